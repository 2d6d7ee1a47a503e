"""Table extraction measured: today's detector (``StructureDetector``) beside pdfplumber's ``extract_tables``.

Not part of the product and not a dependency: pdfplumber is imported from wherever it is installed, e.g.
``pip install --target /tmp/tables-lib pdfplumber`` and then::

    PYTHONPATH=/tmp/tables-lib python -m eval.bench.tables [--shared ../shared/pdfs] [--devsets ../shared/devsets]

Three kinds of pages, each printed page by page, then a summary:

1. **Known tables** (exact truth): the sample handbook's and contract's tables (the rows they were generated
   from), a table set as ReportLab's ``Table`` sets it by default (6 pt between columns) and with wide columns, and
   the LaTeX booktabs table of ``026-latex-multicolumn`` (read off the page by eye). Score: the share of true rows
   (header included) found as a row with exactly those cells, and the share of true cells found in the row that
   starts with the same label.
2. **MMLongBench-Doc table questions** (``category == "table"``; the scanned ones have no text layer): the gold
   pages. No true tables; the proxy is whether the gold answer (a single value) comes out as a cell of its own.
3. **FinanceBench evidence pages** (statements): no true tables; the proxy is the number of statement rows (a
   label, then figures, every figure in a cell of its own) and the cells holding two figures (merged columns).

On every development-set page also: ``split`` counts cell borders that cut a word (a cell ending in a letter
before one starting in lower case: ``Independent Lean R | epublican``), a sign of columns in the wrong place.
The row counts are not comparable across extractors: pdfplumber's ``text`` strategy reads a whole page of prose
as one table.

Each PDF is cut to the pages measured (pypdfium2) before either extractor reads it, so both read the same bytes;
the detector then sees no running headers to drop (it needs three pages for that), which only ever adds lines.
Nothing is indexed and no question is asked.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Rows = list[list[str]]
REPO = Path(__file__).resolve().parents[2]
_NUMBER = re.compile(r"\(?[$€£]?\s*-?\d[\d,]*(?:\.\d+)?\s*%?\)?")
_FIGURES = re.compile(r"(?<![\w.])\(?[$€£]?\d[\d,]*(?:\.\d+)?%?\)?(?![\w.])")


def norm(cell: object) -> str:
    return " ".join(str(cell or "").split())


def is_figure(cell: str) -> bool:
    return bool(cell) and (_NUMBER.fullmatch(cell) is not None or cell in ("—", "–", "-", "$"))


# --- the two extractors ------------------------------------------------------------------------------


def detector_tables(data: bytes) -> dict[int, list[Rows]]:
    """Today's detector: page number -> its tables, each ``[header, *rows]``."""
    from eval.bench.reading import PdfParser
    from pipelines.components.structure import StructureDetector

    parsed = PdfParser().run(data)["parsed"]
    out: dict[int, list[Rows]] = {}
    for e in StructureDetector().run(parsed)["elements"]:
        if e.kind == "table":
            rows = [[norm(c) for c in e.header], *[[norm(c) for c in r] for r in e.rows]]
            out.setdefault(e.page_start, []).append(rows)
    return out


def plumber_tables(data: bytes, strategy: str) -> dict[int, list[Rows]]:
    """pdfplumber's ``extract_tables``: ``lines`` (ruled tables, its default) or ``text`` (cells from word gaps)."""
    pdfplumber: Any = importlib.import_module("pdfplumber")
    settings = {"vertical_strategy": strategy, "horizontal_strategy": strategy}
    out: dict[int, list[Rows]] = {}
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for n, page in enumerate(pdf.pages, start=1):
            tables = [[[norm(c) for c in row] for row in t] for t in page.extract_tables(settings)]
            tables = [[r for r in t if any(r)] for t in tables]
            out[n] = [t for t in tables if t]
    return out


EXTRACTORS: dict[str, Callable[[bytes], dict[int, list[Rows]]]] = {
    "detector": detector_tables,
    "plumber-lines": lambda d: plumber_tables(d, "lines"),
    "plumber-text": lambda d: plumber_tables(d, "text"),
}


def subset(data: bytes, pages: Iterable[int]) -> bytes:
    """The PDF cut to ``pages`` (1-based), in order."""
    import pypdfium2 as pdfium

    src = pdfium.PdfDocument(data)
    new = pdfium.PdfDocument.new()
    new.import_pages(src, [p - 1 for p in sorted(set(pages)) if 0 < p <= len(src)])
    buf = io.BytesIO()
    new.save(buf)
    return buf.getvalue()


# --- 1. known tables ----------------------------------------------------------------------------------


@dataclass
class Known:
    name: str
    data: bytes
    page: int
    rows: Rows
    note: str = ""


def _reportlab_table(rows: Rows, col_widths: list[float] | None) -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Table

    styles = getSampleStyleSheet()
    story = [Paragraph("1 Fees", styles["Heading2"]), Paragraph("Table 1: Parking fees by zone", styles["BodyText"]),
             Table(rows, colWidths=col_widths, hAlign="LEFT")]
    buf = io.BytesIO()
    SimpleDocTemplate(buf, pagesize=A4, invariant=1).build(story)
    return buf.getvalue()


PARKING = [["Zone", "Permit (EUR per month)", "Spaces", "Charging points"], ["North", "75", "120", "8"],
           ["South", "60", "95", "4"], ["Harbour", "90", "40", "12"], ["Visitor", "5", "30", "2"]]
MULTICOLUMN = [
    ["Country", "Population (millions)", "Area (km2)", "Capital", "Official Language"],
    ["Austria", "8.9", "83,879", "Vienna", "German"],
    ["Belgium", "11.5", "30,689", "Brussels", "Dutch, French, German"],
    ["Czech Republic", "10.7", "78,866", "Prague", "Czech"],
    ["Denmark", "5.8", "42,951", "Copenhagen", "Danish"],
    ["Finland", "5.5", "338,424", "Helsinki", "Finnish, Swedish"],
]


def known_tables(shared: Path) -> list[Known]:
    from eval.bench.reading import PdfParser
    from eval.sample_pdfs import CONTRACT, CONTRACT_BLOCKS, HANDBOOK, HANDBOOK_BLOCKS, sample_bytes

    out: list[Known] = []
    for name, blocks in ((HANDBOOK, HANDBOOK_BLOCKS), (CONTRACT, CONTRACT_BLOCKS)):
        data = sample_bytes(name)
        parsed = PdfParser().run(data)["parsed"]
        for block in blocks:
            if block[0] != "table":
                continue
            caption, rows = block[1], block[2]
            page = next(p.number for p in parsed.pages if any(caption in ln.text for ln in p.lines))
            out.append(Known(f"{name} {caption.split(':')[0]}", subset(data, [page]), 1, [[norm(c) for c in r]
                                                                                          for r in rows]))
    out.append(Known("reportlab Table, default padding", _reportlab_table(PARKING, None), 1, PARKING))
    out.append(Known("reportlab Table, wide columns", _reportlab_table(PARKING, [90, 150, 80, 110]), 1, PARKING))
    multi = shared / "026-latex-multicolumn_multicolumn.pdf"
    if multi.exists():
        out.append(Known("026-latex-multicolumn Table 1 (booktabs)", subset(multi.read_bytes(), [3]), 1, MULTICOLUMN,
                         "CC-BY-SA-4.0, py-pdf/sample-files"))
    return out


def score_known(truth: Rows, tables: list[Rows]) -> tuple[float, float]:
    """(share of true rows found exactly, share of true cells found in the row with the same first cell)."""
    rows = [r for t in tables for r in t]
    exact = sum(1 for t in truth if any([c for c in r if c] == [c for c in t if c] for r in rows))
    cells = 0
    for t in truth:
        same = [r for r in rows if r and r[0] == t[0]]
        if same:
            cells += max(sum(1 for c in t if c in r) for r in same)
    return exact / len(truth), cells / sum(len(t) for t in truth)


# --- 2. and 3. development-set pages ------------------------------------------------------------------


@dataclass
class PageCase:
    doc: str
    page: int
    answers: list[str] = field(default_factory=list)


def _answer_value(answer: str) -> str:
    """A gold answer as one comparable value ("" for lists and sentences)."""
    a = answer.strip().strip(".")
    if a.startswith("[") or len(a.split()) > 4:
        return ""
    return a.lower().replace("$", "").replace("%", "").replace(",", "").strip()


def _cell_value(cell: str) -> str:
    return cell.lower().replace("$", "").replace("%", "").replace(",", "").strip()


def devset_pages(devsets: Path, name: str) -> dict[str, list[PageCase]]:
    """doc -> the gold pages of the set's table questions (MMLongBench-Doc) or of every question (FinanceBench)."""
    out: dict[str, dict[int, PageCase]] = {}
    for line in (devsets / name / "cases.jsonl").read_text().splitlines():
        case = json.loads(line)
        if name.startswith("mmlongbench") and case.get("category") != "table":
            continue
        for src in case.get("sources", []):
            for page in src["pages"]:
                pc = out.setdefault(src["doc"], {}).setdefault(page, PageCase(src["doc"], page))
                if value := _answer_value(case.get("answer", "")):
                    pc.answers.append(value)
    return {doc: sorted(pages.values(), key=lambda p: p.page) for doc, pages in out.items()}


def page_stats(tables: list[Rows], answers: list[str]) -> dict[str, int]:
    rows = [r for t in tables for r in t]
    cells = [c for r in rows for c in r if c]
    statement = sum(
        1 for r in rows
        if r and r[0] and not is_figure(r[0]) and any(is_figure(c) for c in r[1:])
        and all(is_figure(c) or not _FIGURES.search(c) for c in r[1:] if c)
    )
    return {
        "tables": len(tables),
        "rows": len(rows),
        "statement_rows": statement,
        "merged_figures": sum(1 for c in cells if len(_FIGURES.findall(c)) >= 2),
        "split_words": sum(1 for r in rows for a, b in zip(r, r[1:], strict=False)
                           if a[-1:].isalpha() and b[:1].islower()),
        "answers": len(answers),
        "answer_cells": sum(1 for a in answers if any(_cell_value(c) == a for c in cells)),
    }


def measure_devset(devsets: Path, name: str, extractors: list[str], *, show: int) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {x: {} for x in extractors}
    print(f"\n## {name}: " + ("table questions' gold pages" if name.startswith("mmlong") else "evidence pages"))
    print(f"{'doc p.':<44} " + " ".join(f"{x:>34}" for x in extractors))
    print(f"{'':<44} " + " ".join(f"{'tables rows stmt merged split ans':>34}" for _ in extractors))
    for doc, cases in devset_pages(devsets, name).items():
        path = devsets / name / "pdfs" / doc
        if not path.exists():
            continue
        data = subset(path.read_bytes(), [c.page for c in cases])
        results = {x: EXTRACTORS[x](data) for x in extractors}
        for i, case in enumerate(cases, start=1):
            cols = []
            for x in extractors:
                s = page_stats(results[x].get(i, []), case.answers)
                for k, v in s.items():
                    totals[x][k] = totals[x].get(k, 0) + v
                totals[x]["pages"] = totals[x].get("pages", 0) + 1
                ans = f"{s['answer_cells']}/{s['answers']}" if s["answers"] else "-"
                cols.append(f"{s['tables']:>6} {s['rows']:>4} {s['statement_rows']:>4} {s['merged_figures']:>6} "
                            f"{s['split_words']:>5} {ans:>5}")
            print(f"{doc[:38] + ' p.' + str(case.page):<44} " + " ".join(f"{c:>34}" for c in cols))
            if show:
                for x in extractors:
                    for t in results[x].get(i, [])[:1]:
                        for r in t[:show]:
                            print(f"      {x:<14} | " + " | ".join(r)[:150])
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.bench.tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "pdfs")
    parser.add_argument("--devsets", type=Path, default=REPO.parent / "shared" / "devsets")
    parser.add_argument("--sets", nargs="*", default=["mmlongbench-dev", "financebench-dev"])
    parser.add_argument("--show", type=int, default=0, help="print the first N rows of each page's first table")
    args = parser.parse_args(argv)
    try:
        importlib.import_module("pdfplumber")
    except ImportError:
        print("pdfplumber is not installed here: pip install --target /tmp/tables-lib pdfplumber, then run with "
              "PYTHONPATH=/tmp/tables-lib", file=sys.stderr)
        return 2
    extractors = list(EXTRACTORS)

    print("## known tables: rows found exactly / cells found in the row with the same label")
    print(f"{'table':<44} " + " ".join(f"{x:>16}" for x in extractors))
    sums = {x: [0.0, 0.0] for x in extractors}
    known = known_tables(args.shared)
    for k in known:
        cols = []
        for x in extractors:
            rows_ok, cells_ok = score_known(k.rows, EXTRACTORS[x](k.data).get(k.page, []))
            sums[x][0] += rows_ok
            sums[x][1] += cells_ok
            cols.append(f"{rows_ok:>7.0%} {cells_ok:>7.0%}")
        print(f"{k.name[:44]:<44} " + " ".join(f"{c:>16}" for c in cols))
    print(f"{'mean over ' + str(len(known)) + ' tables':<44} "
          + " ".join(f"{sums[x][0] / len(known):>7.0%} {sums[x][1] / len(known):>7.0%}" for x in extractors))

    summary: dict[str, Any] = {"known": {x: {"rows_exact": round(sums[x][0] / len(known), 3),
                                             "cells": round(sums[x][1] / len(known), 3)} for x in extractors}}
    for name in args.sets:
        if (args.devsets / name / "cases.jsonl").exists():
            summary[name] = measure_devset(args.devsets, name, extractors, show=args.show)
    print("\n## summary (JSON)")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
