"""``citebot bench ingest PATH... [--json]``: indexing speed and memory, next to a naive Haystack baseline.

Per run, over the given PDFs (files or folders):

* parse+structure+chunk pages/s (guard, pdfium parser, structure, chunker; no OCR, no embedding), and
  chunks per page for each input (every chunk costs an embedding),
* OCR s/page on the pages that need it (when the inputs have none, the sample handbook's scanned
  page is OCR'd so the number is always there; the report says which),
* for each compared embedding backend (``--backends``; default torch and the configured one), in the
  same run: embedding chunks/s of our chunks, and end-to-end pages/s of ``Indexer.ingest`` into a fresh
  temporary store, so the ratio holds on a noisy machine,
* peak RSS of the process after our pipeline (``ru_maxrss``), before the baseline runs,
* the naive baseline in the same run: Haystack ``PyPDFToDocument`` + ``DocumentSplitter`` cutting
  800-character windows with 150 characters of overlap + the configured embedder,
* the embedding in unsorted batches (64 chunks at a time in document order, so each batch is padded to its
  longest chunk) beside the indexer's (every chunk of a document sorted by length first), same chunks, same run:
  what sorting saves.

``--save-chunks FILE`` writes what the indexer stored (id, text, metadata but the upload time) and
``--same-chunks FILE`` compares a run with such a file, e.g. one made by an older version: a speed change must
not change what is indexed (the development sets' indexes stay valid). ``--check`` exits 1 when a target is
missed or the chunks differ, for a pipeline: the targets are checked for the last backend compared (the configured
one; the ones before it are baselines) on CPU time, reader child included, which is what one core gives whatever
else the machine runs; and on the wall clock too when the load average stayed at or below ``CHECK_WALL_MAX_LOAD``
(a machine with load <= 1.5 is what the targets assume), else the report says the wall clock was not checked and why.

Wall-clock and CPU seconds are both reported: these machines are shared, and CPU time is the steadier number when
other work runs (the end-to-end CPU time is this process's plus the reader child's, which the child reports:
:func:`pipelines.reading.isolation.children_cpu_s`). ``--synthetic-pages N`` adds a generated N-page text report
(e.g. 500 for the memory target); ``--filing-pages N`` a generated N-page annual-report-like filing (items, dense
financial tables, numbered notes; 160 for the target). Targets: end-to-end >= 6 pages/s on the 117-page
shared PDF and >= 5 pages/s on a 160-page text filing; parse+chunk >= 30 pages/s; OCR <= 2 s/page; peak RSS <= 1.5
GB.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from connectors.settings import Settings


def register(sub: Any) -> None:
    from eval.bench.common import add_backends_arg

    p = sub.add_parser("ingest", help="indexing speed and peak memory vs a naive Haystack baseline")
    p.add_argument("paths", nargs="*", metavar="PATH", help="PDF files or folders (default: the sample PDFs)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--synthetic-pages", type=int, default=0, help="also generate and index an N-page text PDF")
    p.add_argument("--filing-pages", type=int, default=0,
                   help="also generate and index an N-page annual-report-like filing (tables, numbered notes)")
    p.add_argument("--no-baseline", action="store_true", help="skip the naive baseline")
    p.add_argument("--save-chunks", metavar="FILE",
                   help="write every chunk the indexer stored (id, text, metadata) to FILE as JSON lines")
    p.add_argument("--same-chunks", metavar="FILE",
                   help="compare the stored chunks with a --save-chunks FILE (e.g. made by an older version); "
                        "a difference makes the run fail")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a target is missed (end-to-end pages/s, parse pages/s, peak RSS) or the "
                        "chunks differ from --same-chunks")
    add_backends_arg(p)
    p.set_defaults(func=run_bench)


def synthetic_pdf(pages: int) -> bytes:
    """A long text-only report: numbered sections, paragraphs, a running footer (deterministic)."""
    import io

    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    words = [
        "the", "committee", "reviewed", "quarterly", "operating", "results", "budget", "variance",
        "supplier", "contracts", "maintenance", "schedule", "safety", "incidents", "staffing", "levels",
        "regional", "offices", "capital", "expenditure", "forecast", "revenue", "customer", "retention",
        "training", "programme", "compliance", "audit", "findings", "recommendations",
    ]
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, invariant=1)
    w, h = A4
    n = 0
    for page in range(1, pages + 1):
        c.setFont("Helvetica", 8)
        c.drawString(72, 30, f"Annual operations report  -  page {page}")
        y = h - 72
        c.setFont("Helvetica-Bold", 13)
        c.drawString(72, y, f"{page} Operations review part {page}")
        y -= 24
        c.setFont("Times-Roman", 10.5)
        for line in range(44):
            text = " ".join(words[(n + k * 7) % len(words)] for k in range(14))
            n += 3
            c.drawString(72, y, text.capitalize() + ("." if line % 5 == 4 else ""))
            y -= 14
            if line % 5 == 4:
                y -= 6
            if y < 60:
                break
        c.showPage()
    c.save()
    return buf.getvalue()


_ITEMS = (
    "Item 1. Business", "Item 1A. Risk Factors", "Item 2. Properties", "Item 5. Market for Registrant's Equity",
    "Item 7. Management's Discussion and Analysis", "Item 7A. Quantitative and Qualitative Disclosures",
    "Item 8. Financial Statements and Supplementary Data", "Item 9A. Controls and Procedures",
)
_NOTES = (
    "Revenue Recognition", "Income Taxes", "Goodwill and Intangible Assets", "Long-Term Debt", "Leases",
    "Pension and Postretirement Benefits", "Stock-Based Compensation", "Commitments and Contingencies",
    "Segment Information", "Derivatives and Hedging", "Inventories", "Property, Plant and Equipment",
)
_LINES = (
    "Net sales", "Cost of sales", "Gross profit", "Selling, general and administrative", "Research and development",
    "Operating income", "Interest expense, net", "Other income", "Income before income taxes",
    "Provision for income taxes", "Net income", "Depreciation and amortization", "Capital expenditures",
    "Free cash flow", "Total assets", "Total liabilities", "Long-term debt", "Shareholders' equity",
    "Accounts receivable", "Inventories", "Accrued liabilities", "Deferred revenue",
)
_PHRASES = (
    "The Company recognizes revenue when control of the promised goods or services transfers to the customer",
    "in an amount that reflects the consideration expected to be received in exchange for those goods",
    "Management evaluates the recoverability of goodwill annually in the fourth quarter",
    "or more frequently if events or changes in circumstances indicate that the carrying amount may not be",
    "recoverable", "The effective tax rate was {p}% compared with {q}% in the prior year",
    "primarily due to the mix of earnings across jurisdictions and discrete items",
    "As of December 31, {y}, the Company had ${n} million of unrecognized tax benefits",
    "Borrowings under the revolving credit facility bear interest at a floating rate",
    "The Company was in compliance with all covenants as of the balance sheet date",
    "See Note {k} for further information about the fair value hierarchy",
    "Operating lease cost was ${n} million and variable lease cost was ${m} million",
    "Foreign currency fluctuations reduced net sales by {p}% in the period",
)


def filing_pdf(pages: int, seed: int = 11) -> bytes:
    """An annual-report-like text filing (deterministic): item headings, numbered notes, paragraphs of
    disclosure prose with figures, and a dense financial table on every page; one page per note part."""
    import io
    import random

    from reportlab.lib import colors
    from reportlab.lib.pagesizes import LETTER
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    rng = random.Random(seed)
    styles = getSampleStyleSheet()

    def prose(sentences: int) -> str:
        out = []
        for _ in range(sentences):
            parts = rng.sample(_PHRASES, 2)
            out.append(", ".join(parts).format(
                p=f"{rng.uniform(5, 35):.1f}", q=f"{rng.uniform(5, 35):.1f}", y=rng.randint(2019, 2024),
                n=f"{rng.randint(10, 9000):,}", m=f"{rng.randint(1, 900):,}", k=rng.randint(1, 24)) + ".")
        return " ".join(out)

    def footer(c: Any, doc: Any) -> None:
        c.setFont("Helvetica", 8)
        c.drawString(72, 30, f"Example Industries Inc. | {doc.page}")

    story: list[Any] = []
    note = 0
    for page in range(1, pages + 1):
        if page % 20 == 1:
            story.append(Paragraph(_ITEMS[(page // 20) % len(_ITEMS)], styles["Heading1"]))
        if page % 2 == 1:
            note += 1
            story.append(Paragraph(f"Note {note}. {_NOTES[note % len(_NOTES)]}", styles["Heading2"]))
        story.append(Paragraph(prose(4), styles["BodyText"]))
        rows = [["(in millions, except per share)", "2024", "2023", "2022", "Change", "%"]]
        for line in rng.sample(_LINES, 16):
            a, b, c = (rng.randint(50, 60_000) for _ in range(3))
            rows.append([line, f"{a:,}", f"{b:,}", f"{c:,}", f"{a - b:,}", f"{(a - b) / b * 100:.1f}%"])
        table = Table(rows, repeatRows=1)
        table.setStyle(TableStyle([("FONTSIZE", (0, 0), (-1, -1), 8), ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
                                   ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
                                   ("BOTTOMPADDING", (0, 0), (-1, -1), 1), ("TOPPADDING", (0, 0), (-1, -1), 1)]))
        story += [Spacer(1, 6), table, Spacer(1, 6), Paragraph(prose(3), styles["BodyText"]), PageBreak()]
    buf = io.BytesIO()
    SimpleDocTemplate(buf, pagesize=LETTER, invariant=1, title="Annual report").build(
        story, onFirstPage=footer, onLaterPages=footer)
    return buf.getvalue()


def _collect(paths: list[str], synthetic_pages: int, filing_pages: int = 0) -> list[tuple[str, bytes]]:
    from eval import sample_pdfs

    out: list[tuple[str, bytes]] = []
    for raw in paths:
        p = Path(raw)
        files = sorted(q for q in p.rglob("*.pdf")) if p.is_dir() else [p]
        out.extend((f.name, f.read_bytes()) for f in files if f.is_file())
    if not paths:
        out.extend((name, sample_pdfs.sample_bytes(name)) for name in sample_pdfs.SAMPLE_FILES)
    if synthetic_pages:
        out.append((f"synthetic-{synthetic_pages}-pages.pdf", synthetic_pdf(synthetic_pages)))
    if filing_pages:
        out.append((f"filing-{filing_pages}-pages.pdf", filing_pdf(filing_pages)))
    return out


class _Clock:
    def __enter__(self) -> _Clock:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


def _rate(n: float, seconds: float) -> float | None:
    return round(n / seconds, 2) if seconds > 0 else None


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def run_bench(args: argparse.Namespace, settings: Settings) -> int:  # noqa: PLR0915 - one linear report
    from eval.bench.common import compared_backends, load_average, with_backend
    from eval.bench.reading import OcrFallback, PdfGuard, PdfParser
    from pipelines.components.chunker import StructureChunker
    from pipelines.components.structure import StructureDetector
    from pipelines.reading.layout import IngestError

    backends = compared_backends(settings, args.backends)
    inputs = _collect(args.paths, args.synthetic_pages, args.filing_pages)
    if not inputs:
        print("citebot bench ingest: no PDFs found", file=sys.stderr)
        return 2
    load_start = load_average()
    model_path = str(settings.resolved_model_path)
    guard = PdfGuard(max_file_mb=settings.max_file_mb, max_pages=settings.max_pages)
    parser = PdfParser(ocr_min_chars=settings.ocr_min_chars)
    structure = StructureDetector()
    chunker = StructureChunker(
        model_path=model_path, max_tokens=settings.chunk_max_tokens, min_tokens=settings.chunk_min_tokens
    )
    chunker.warm_up()

    # 1. parse + structure + chunk (text layer only), the same for every backend
    parse_pages, chunks_all, ocr_todo, refused = 0, [], [], []
    per_file: dict[str, dict[str, Any]] = {}
    with _Clock() as parse_clock:
        for name, data in inputs:
            try:
                guard.run(data)
                parsed = parser.run(data)["parsed"]
            except IngestError as e:
                refused.append({"file": name, "reason": e.reason})
                continue
            parse_pages += parsed.page_count
            ocr_todo.append((data, parsed))
            out = structure.run(parsed)
            docs = chunker.run(out["elements"], doc_id="bench", file_name=name, scope="bench",
                               page_labels=out.get("page_labels"))["documents"]
            chunks_all += docs
            per_file[name] = {"pages": parsed.page_count, "chunks": len(docs),
                              "chunks_per_page": round(len(docs) / max(parsed.page_count, 1), 2),
                              "pages_per_s": {}}

    # 2. OCR on the pages that need it (or the sample scan)
    ocr = OcrFallback(enabled=True, dpi=settings.ocr_dpi, language=settings.ocr_language,
                      page_timeout_s=settings.ocr_page_timeout_s)
    ocr_source = "inputs"
    if not any(p.needs_ocr for _, parsed in ocr_todo for p in parsed.pages):
        from eval import sample_pdfs

        data = sample_pdfs.sample_bytes(sample_pdfs.HANDBOOK)
        ocr_todo = [(data, parser.run(data)["parsed"])]
        ocr_source = "sample handbook scan (inputs have no image-only pages)"
    ocr_pages = sum(1 for _, parsed in ocr_todo for p in parsed.pages if p.needs_ocr)
    with _Clock() as ocr_clock:
        for data, parsed in ocr_todo:
            ocr.run(data, parsed)

    # 3 and 4, per backend in turn: embedding of our chunks, then end to end into a fresh store
    per_backend: dict[str, dict[str, Any]] = {}
    for backend in backends:
        per_backend[backend] = _measure_backend(with_backend(settings, backend), inputs, chunks_all, per_file)
    rss_ours = _peak_rss_mb()

    results: dict[str, Any] = {
        "inputs": [{"file": n, "bytes": len(d)} for n, d in inputs],
        "refused": refused,
        "backends": backends,
        "load_avg_1m": [load_start, load_average()],
        "settings": {"torch_threads": settings.torch_threads, "batch_size": settings.embedding_batch_size,
                     "chunk_max_tokens": settings.chunk_max_tokens, "ocr_dpi": settings.ocr_dpi},
        "parse_structure_chunk": {"pages": parse_pages, "chunks": len(chunks_all),
                                  "wall_s": round(parse_clock.wall, 2), "cpu_s": round(parse_clock.cpu, 2),
                                  "pages_per_s": _rate(parse_pages, parse_clock.wall),
                                  "pages_per_cpu_s": _rate(parse_pages, parse_clock.cpu)},
        "per_file": per_file,
        "ocr": {"pages": ocr_pages, "source": ocr_source,
                "s_per_page": round(ocr_clock.wall / ocr_pages, 2) if ocr_pages else None},
        "per_backend": per_backend,
        "peak_rss_mb": rss_ours,
    }
    stored = per_backend[backends[-1]].pop("stored_chunks")
    for b in backends[:-1]:
        per_backend[b].pop("stored_chunks")
    if args.save_chunks:
        Path(args.save_chunks).write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in stored), "utf-8")
    if args.same_chunks:
        results["same_chunks"] = compare_chunks(stored, Path(args.same_chunks))
    if not args.no_baseline:
        results["baseline"] = _baseline(inputs, with_backend(settings, backends[-1]), pages=parse_pages)
    results["missed"] = missed_targets(results)
    _print(results, as_json=args.json)
    return 1 if args.check and results["missed"] else 0


TARGETS = {"end_to_end_pages_per_s": 5.0, "parse_pages_per_s": 30.0, "peak_rss_mb": 1536.0}
CHECK_WALL_MAX_LOAD = 1.5


def wall_checked(results: dict[str, Any]) -> bool:
    """Whether the wall-clock rates count: the 1-minute load average at start and end at most 1.5."""
    return max(results["load_avg_1m"]) <= CHECK_WALL_MAX_LOAD


def missed_targets(results: dict[str, Any]) -> list[str]:
    """What ``--check`` fails on: each target missed by the last backend compared (per CPU-second, reader child
    included; per wall-clock second too when :func:`wall_checked`), and chunks that differ from ``--same-chunks``."""
    missed = []
    b = results["backends"][-1]
    e2e = results["per_backend"][b]["end_to_end"]
    target = TARGETS["end_to_end_pages_per_s"]
    per_cpu = e2e["pages_per_cpu_s"] or 0.0
    if per_cpu < target:
        missed.append(f"end to end {per_cpu} pages per CPU-s (reader child included) < {target} ({b})")
    wall = wall_checked(results)
    if wall and (e2e["pages_per_s"] or 0.0) < target:
        missed.append(f"end to end {e2e['pages_per_s']} pages/s < {target} ({b})")
    parse = results["parse_structure_chunk"]
    target = TARGETS["parse_pages_per_s"]
    if (parse["pages_per_cpu_s"] or 0.0) < target:
        missed.append(f"parse+structure+chunk {parse['pages_per_cpu_s']} pages per CPU-s < {target}")
    if wall and (parse["pages_per_s"] or 0.0) < target:
        missed.append(f"parse+structure+chunk {parse['pages_per_s']} pages/s < {target}")
    if results["peak_rss_mb"] > TARGETS["peak_rss_mb"]:
        missed.append(f"peak RSS {results['peak_rss_mb']} MB > {TARGETS['peak_rss_mb']}")
    same = results.get("same_chunks")
    if same and not same["identical"]:
        missed.append(f"chunks differ from {same['file']}: {same['first_difference']}")
    return missed


def stored_chunks(store: Any) -> list[dict[str, Any]]:
    """Every chunk of the bench scope as the store holds it: id, text and metadata, without the upload time (which
    changes every run). What ``--save-chunks`` writes and ``--same-chunks`` compares."""
    docs = store.fetch(scopes=["bench"], limit=1_000_000)
    return [{"id": d.id, "content": d.content, "meta": {k: v for k, v in d.meta.items() if k != "uploaded_at"}}
            for d in docs]


def compare_chunks(stored: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    """``stored`` against the chunks saved in ``path``: identical, or where they first differ."""
    saved = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    now = [json.loads(json.dumps(c, sort_keys=True)) for c in stored]  # the same JSON round trip as the file's
    first = ""
    if len(saved) != len(now):
        first = f"{len(now)} chunks, the file has {len(saved)}"
    else:
        for a, b in zip(saved, now, strict=True):
            if a != b:
                keys = [k for k in ("id", "content") if a.get(k) != b.get(k)]
                keys += [f"meta.{k}" for k in sorted(set(a["meta"]) | set(b["meta"]))
                         if a["meta"].get(k) != b["meta"].get(k)]
                first = f"chunk {a.get('id')}: {', '.join(keys)}"
                break
    return {"file": str(path), "chunks": len(now), "identical": not first, "first_difference": first}


def _measure_backend(settings: Settings, inputs: list[tuple[str, bytes]], chunks: list[Any],
                     per_file: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Embedding chunks/s and end-to-end pages/s (per file too) with ``settings``' backend."""
    from connectors.stores import open_store
    from pipelines.components.embedder import PassageEmbedder
    from pipelines.indexing import Indexer
    from pipelines.reading.isolation import children_cpu_s

    embedder = PassageEmbedder(**settings.embedding_args(), batch_size=settings.embedding_batch_size)  # type: ignore[arg-type]
    with _Clock() as load_clock:
        embedder.warm_up()
    from pipelines.components.embedder import passage_text

    texts = [passage_text(d) for d in chunks]
    step = max(settings.embedding_batch_size * 2, 32)
    embedder._encoder.encode(texts[:step], settings.embedding_batch_size)  # noqa: SLF001 - first runs allocate
    with _Clock() as before_clock:  # unsorted batches, 64 chunks at a time in document order: what sorting saves
        for start in range(0, len(texts), step):
            embedder._encoder.encode(texts[start:start + step], settings.embedding_batch_size)  # noqa: SLF001
    with _Clock() as embed_clock:
        embedder.run(chunks)
    e2e_pages = e2e_chunks = 0
    reader_cpu = children_cpu_s()
    with tempfile.TemporaryDirectory() as tmp:
        e2e_settings = settings.model_copy(update={"data_dir": Path(tmp)})
        e2e_store = open_store(e2e_settings)
        indexer = Indexer(e2e_settings, e2e_store)
        indexer.warm_up()
        with _Clock() as e2e_clock:
            for name, data in inputs:
                with _Clock() as one:
                    res = indexer.ingest(data, file_name=name, scope="bench")
                if res.status == "indexed":
                    e2e_pages += res.pages
                    e2e_chunks += res.chunks
                    if name in per_file:
                        per_file[name]["pages_per_s"][settings.embedding_backend] = _rate(res.pages, one.wall)
        stored = stored_chunks(e2e_store)
    reader_cpu = children_cpu_s() - reader_cpu
    return {
        "stored_chunks": stored,
        "running": str(embedder._encoder.backend),  # noqa: SLF001 - torch after a fallback
        "model_load_s": round(load_clock.wall, 2),
        "embedding": {"chunks": len(chunks), "wall_s": round(embed_clock.wall, 2), "cpu_s": round(embed_clock.cpu, 2),
                      "chunks_per_s": _rate(len(chunks), embed_clock.wall),
                      "chunks_per_cpu_s": _rate(len(chunks), embed_clock.cpu)},
        "embedding_before": {"chunks": len(chunks), "wall_s": round(before_clock.wall, 2),
                             "cpu_s": round(before_clock.cpu, 2),
                             "chunks_per_s": _rate(len(chunks), before_clock.wall),
                             "chunks_per_cpu_s": _rate(len(chunks), before_clock.cpu)},
        "end_to_end": {"pages": e2e_pages, "chunks": e2e_chunks, "wall_s": round(e2e_clock.wall, 2),
                       "cpu_s": round(e2e_clock.cpu + reader_cpu, 2), "reader_cpu_s": round(reader_cpu, 2),
                       "pages_per_s": _rate(e2e_pages, e2e_clock.wall),
                       "pages_per_cpu_s": _rate(e2e_pages, e2e_clock.cpu + reader_cpu)},
    }


def _baseline(inputs: list[tuple[str, bytes]], settings: Settings, *, pages: int) -> dict[str, Any]:
    """Haystack PyPDFToDocument + DocumentSplitter (800 chars, 150 overlap) + the same embedder.

    ``pages`` is the page count of the same inputs (pdfium's), so the rates compare like for like.
    """
    import logging

    from haystack.components.converters import PyPDFToDocument
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.dataclasses import ByteStream

    from connectors.embedding import embed

    logging.getLogger("pypdf").setLevel(logging.ERROR)

    def windows(text: str) -> list[str]:
        return [text[i:i + 800] for i in range(0, max(len(text) - 150, 1), 800 - 150)]

    converter = PyPDFToDocument()
    splitter = DocumentSplitter(split_by="function", splitting_function=windows, split_length=1)
    if hasattr(splitter, "warm_up"):
        splitter.warm_up()
    chunks = []
    with _Clock() as conv:
        for name, data in inputs:
            out = converter.run(sources=[ByteStream(data=data, meta={"file_name": name})])
            chunks += splitter.run(documents=out["documents"])["documents"]
    with _Clock() as emb:
        embed([c.content or "" for c in chunks], path=settings.resolved_model_path, threads=settings.torch_threads,
              batch_size=settings.embedding_batch_size, backend=settings.embedding_backend,
              models_dir=settings.resolved_models_dir)
    total = conv.wall + emb.wall
    return {
        "convert_split_cpu_s": round(conv.cpu, 2),
        "embedding_cpu_s": round(emb.cpu, 2),
        "end_to_end_pages_per_cpu_s": _rate(pages, conv.cpu + emb.cpu),
        "pages": pages,
        "chunks": len(chunks),
        "convert_split_wall_s": round(conv.wall, 2),
        "convert_split_pages_per_s": _rate(pages, conv.wall),
        "embedding_wall_s": round(emb.wall, 2),
        "embedding_chunks_per_s": _rate(len(chunks), emb.wall),
        "end_to_end_pages_per_s": _rate(pages, total),
        "mean_chunk_chars": round(sum(len(c.content or "") for c in chunks) / len(chunks), 1) if chunks else 0,
    }


def _print(results: dict[str, Any], *, as_json: bool) -> None:
    from eval.bench.common import ratio

    if as_json:
        print(json.dumps(results, indent=2))
        return
    p, o = results["parse_structure_chunk"], results["ocr"]
    backends, res = results["backends"], results["per_backend"]
    base = backends[0]
    n_in = len(results["inputs"])
    print(f"inputs: {n_in} PDF{'' if n_in == 1 else 's'}, refused: {len(results['refused'])}; backends "
          f"{', '.join(backends)} in turn in this run; load average (1 min) at start / end: "
          f"{results['load_avg_1m'][0]} / {results['load_avg_1m'][1]} (2 vCPUs)")
    print(f"parse+structure+chunk: {p['pages']} pages -> {p['chunks']} chunks in {p['wall_s']} s "
          f"= {p['pages_per_s']} pages/s ({p['pages_per_cpu_s']} pages per CPU-s)   target >= 30")
    print(f"OCR: {o['pages']} page{'' if o['pages'] == 1 else 's'}, {o['s_per_page']} s/page ({o['source']})   "
          "target <= 2")
    print(f"  {'':40s}" + "".join(f"{b:>12s}" for b in backends) + "    ratio")
    rows = [("model load s", lambda r: r["model_load_s"], False),
            ("embedding chunks/s, unsorted batches", lambda r: r["embedding_before"]["chunks_per_s"], True),
            ("embedding chunks per CPU-s, unsorted", lambda r: r["embedding_before"]["chunks_per_cpu_s"], True),
            ("embedding chunks/s", lambda r: r["embedding"]["chunks_per_s"], True),
            ("embedding chunks per CPU-s", lambda r: r["embedding"]["chunks_per_cpu_s"], True),
            ("end to end pages/s", lambda r: r["end_to_end"]["pages_per_s"], True),
            ("end to end pages per CPU-s, reader too", lambda r: r["end_to_end"]["pages_per_cpu_s"], True),
            ("  of which reader child CPU-s", lambda r: r["end_to_end"]["reader_cpu_s"], False)]
    for label, get, higher_better in rows:
        vals = [get(res[b]) for b in backends]
        ratios = ", ".join(ratio(get(res[b]), get(res[base])) if higher_better else ratio(get(res[base]), get(res[b]))
                           for b in backends[1:])
        print(f"  {label:40s}" + "".join(f"{v if v is not None else '-':>12}" for v in vals) + f"    {ratios}")
    print("  per file (pages, chunks/page, end-to-end pages/s per backend):")
    for name, f in results["per_file"].items():
        rates = "  ".join(f"{b} {f['pages_per_s'].get(b, '-')}" for b in backends)
        print(f"    {name[:48]:48s} {f['pages']:5d} p  {f['chunks_per_page']:5.2f} c/p  {rates}")
    print("  targets: >= 6 pages/s on the 117-page shared PDF, >= 5 on a 160-page text filing")
    print(f"peak RSS after our pipeline: {results['peak_rss_mb']} MB (every compared backend loaded in this one "
          "process)   target <= 1536")
    speedups = ", ".join(f"{name} {ratio(res[name]['embedding_before']['cpu_s'], res[name]['embedding']['cpu_s'])}"
                         for name in backends)
    print(f"  embedding in length-sorted / unsorted batches (same chunks, same run, per CPU-s): {speedups}")
    same = results.get("same_chunks")
    if same:
        print(f"chunks compared with {same['file']}: {same['chunks']} chunks, "
              + ("identical" if same["identical"] else f"DIFFERENT ({same['first_difference']})"))
    b = results.get("baseline")
    if b:
        print(f"baseline (PyPDFToDocument + 800/150 char splitter + {backends[-1]} embedder): {b['pages']} pages -> "
              f"{b['chunks']} chunks; convert+split {b['convert_split_pages_per_s']} pages/s, embedding "
              f"{b['embedding_chunks_per_s']} chunks/s, end to end {b['end_to_end_pages_per_s']} pages/s "
              f"({b['end_to_end_pages_per_cpu_s']} per CPU-s)")
    if not wall_checked(results):
        print(f"wall-clock rates not checked: load average above {CHECK_WALL_MAX_LOAD} (per CPU-s checked)")
    for m in results["missed"]:
        print(f"target missed: {m}")
