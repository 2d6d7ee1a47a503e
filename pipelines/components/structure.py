"""StructureDetector: positioned lines -> headings, paragraphs, lists, tables and captions with a section path.

* Running headers/footers and page numbers: lines in the top/bottom margin band whose text (digits
  folded) repeats on many pages, and lone page-number lines there, are dropped.
* Headings come from the font (larger than body text, or bold and short), from numbering ("7.2",
  "Section 12", "ARTICLE IV") and from the PDF outline when there is one. Numbering gives the
  level; un-numbered headings get a level from their font size.
* Paragraphs join lines (hyphenated breaks glued, "reim-" + "bursement"), also across a page or
  column break when the sentence goes on, but never onto a third page; OCR'd lines never join
  across a page break (a slide is a unit of its own).
* Lists are kept whole (bullet or "(a)"/"1)" items with their continuation lines).
* Tables are runs of lines made of several cells on one baseline (plus wrapped header/cell lines
  aligned to a column), with their caption ("Table 3: ...") and header row.

What one line is (running line, numbering, caption, bullet, table row) is in
:mod:`pipelines.components.structure_lines`; this module puts the lines together.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter
from typing import Any

from haystack import component, default_from_dict, default_to_dict

from pipelines.components.printed_page_numbers import printed_page_labels
from pipelines.components.structure_lines import (
    ARTICLE,
    BULLET,
    BULLET_CHARS,
    CAPTION,
    ENUMERATED,
    SECTION,
    SENTENCE_END,
    caption_label,
    continues_row,
    heading_numbering,
    is_table_row,
    join_lines,
    norm_title,
    strip_running_lines,
)
from pipelines.reading.layout import Element, Line, ParsedPdf


@component
class StructureDetector:
    def __init__(self, *, heading_size_ratio: float = 1.12, max_heading_chars: int = 120) -> None:
        if heading_size_ratio <= 1.0:
            raise ValueError("heading_size_ratio must be above 1.0")
        if max_heading_chars < 10:
            raise ValueError("max_heading_chars must be at least 10")
        self.heading_size_ratio = heading_size_ratio
        self.max_heading_chars = max_heading_chars

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, heading_size_ratio=self.heading_size_ratio, max_heading_chars=self.max_heading_chars
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StructureDetector:
        return default_from_dict(cls, data)

    @component.output_types(elements=list[Element], page_labels=dict[int, str])
    def run(self, parsed: ParsedPdf) -> dict[str, Any]:
        """Find headings, paragraphs, lists and tables, and the section each belongs to.

        :param parsed: the document's pages and lines, from the reader.
        :returns: ``elements``, in reading order with their section paths, and ``page_labels``, page number -> the
            label a reader sees (the PDF's own labels, or the numbers printed on the pages).
        """
        pages = strip_running_lines([p.lines for p in parsed.pages], [p.height for p in parsed.pages])
        ocr_conf = {p.number: p.ocr_confidence for p in parsed.pages if p.ocr}
        lines = [ln for page_lines in pages for ln in page_lines]
        body = self._body_size(lines)
        outline = {(pg, norm_title(t)): lvl for lvl, t, pg in parsed.outline}
        outline_titles = {(pg, norm_title(re.sub(r"^[\dIVX.]+\s+", "", t))): lvl for lvl, t, pg in parsed.outline}
        elements = self._elements(lines, body, outline, outline_titles, ocr_conf)
        self._assign_levels(elements)
        self._assign_sections(elements)
        if any(p.label for p in parsed.pages):
            labels = {p.number: p.label for p in parsed.pages}
        else:  # no /PageLabels: the numbers the pages print, when they agree on one offset
            labels = printed_page_labels([p.lines for p in parsed.pages])
        return {"elements": elements, "page_labels": labels}

    # --- steps -------------------------------------------------------------------------------
    @staticmethod
    def _body_size(lines: list[Line]) -> float:
        weights: Counter[float] = Counter()
        for ln in lines:
            if ln.size > 0 and ln.ocr_confidence is None:
                weights[round(ln.size * 2) / 2] += len(ln.text)
        return weights.most_common(1)[0][0] if weights else 10.0

    def _heading_level_hint(
        self, ln: Line, body: float, outline: dict[tuple[int, str], int], outline_titles: dict[tuple[int, str], int]
    ) -> int | None:
        """None when ``ln`` is not a heading; 0 when it is but the level is decided later; >0 from the outline."""
        if ln.ocr_confidence is not None or ln.cells and is_table_row(ln):
            return None
        text = ln.text.strip()
        key = (ln.page, norm_title(text))
        if key in outline:
            return outline[key]
        stripped = (ln.page, norm_title(re.sub(r"^[\dIVX.]+\s+", "", text)))
        if stripped in outline_titles and len(text) <= self.max_heading_chars:
            return outline_titles[stripped]
        if len(text) > self.max_heading_chars or len(text.split()) > 16 or len(text) < 2:
            return None
        if text.endswith((",", ";")) or (text.endswith(".") and not re.search(r"\d\.$", text)):
            return None
        if not any(c.isalpha() for c in text) or CAPTION.match(text) or BULLET.match(text):
            return None
        bigger = ln.size >= body * self.heading_size_ratio
        numbered, _ = heading_numbering(text)
        if bigger and (len(text.split()) <= 12 or numbered):
            return 0
        if ln.bold and (numbered or len(text.split()) <= 8):
            return 0
        if ARTICLE.match(text) or (SECTION.match(text) and text[:1].isupper() and len(text) <= 80):
            return 0
        return None

    def _elements(
        self,
        lines: list[Line],
        body: float,
        outline: dict[tuple[int, str], int],
        outline_titles: dict[tuple[int, str], int],
        ocr_conf: dict[int, float | None],
    ) -> list[Element]:
        out: list[Element] = []
        para: list[Line] = []
        i = 0

        def flush_para() -> None:
            if not para:
                return
            text = ""
            hyphen = False
            page_offsets: list[tuple[int, int]] = []
            for ln in para:
                line = ln.text.strip()
                text = join_lines(text, line, hyphen)
                if ln.page != (page_offsets[-1][1] if page_offsets else para[0].page):
                    page_offsets.append((len(text) - len(line), ln.page))
                hyphen = ln.hyphen_join
            ocr = para[0].ocr_confidence is not None
            out.append(Element(
                kind="paragraph", text=text, page_start=para[0].page, page_end=para[-1].page,
                ocr=ocr, ocr_confidence=ocr_conf.get(para[0].page) if ocr else None, page_offsets=page_offsets,
            ))
            para.clear()

        while i < len(lines):
            ln = lines[i]
            text = ln.text.strip()
            if not text:
                i += 1
                continue
            # tables: a caption followed by rows, or rows (caption may follow)
            if ln.ocr_confidence is None:
                table = self._try_table(lines, i)
                if table is not None:
                    flush_para()
                    element, i = table
                    self._attach_caption(out, element, lines, i)
                    if element.caption and i < len(lines) and lines[i].text.strip() == element.caption:
                        i += 1
                    out.append(element)
                    continue
            hint = self._heading_level_hint(ln, body, outline, outline_titles)
            if hint is not None:
                flush_para()
                title = text
                # a heading wrapped onto a second line in the same font
                if (
                    i + 1 < len(lines)
                    and lines[i + 1].page == ln.page
                    and abs(lines[i + 1].size - ln.size) < 0.3
                    and lines[i + 1].bold == ln.bold
                    and 0 <= lines[i + 1].top - ln.bottom < ln.size * 0.8
                    and ln.size >= body * self.heading_size_ratio
                    and not heading_numbering(lines[i + 1].text)[0]
                    and len(title) + len(lines[i + 1].text) <= self.max_heading_chars
                ):
                    i += 1
                    title = join_lines(title, lines[i].text.strip(), ln.hyphen_join)
                numbering, _ = heading_numbering(title)
                out.append(Element(
                    kind="heading", text=title, page_start=ln.page, page_end=lines[i].page,
                    level=hint, numbering=numbering, font_size=ln.size,
                ))
                i += 1
                continue
            m = CAPTION.match(text)
            if m and ln.ocr_confidence is None and len(text) <= 250 and not m.group(1).lower().startswith("tab"):
                flush_para()
                out.append(Element(
                    kind="caption", text=text, page_start=ln.page, page_end=ln.page,
                    label=caption_label(m.group(1), m.group(2)),
                ))
                i += 1
                continue
            if ln.ocr_confidence is None and BULLET.match(text):
                flush_para()
                element, i = self._list(lines, i)
                out.append(element)
                continue
            # paragraph lines
            if para:
                prev = para[-1]
                new_para = False
                if prev.page != ln.page or ln.top < prev.top - 2:  # page or column break
                    new_para = bool(SENTENCE_END.search(prev.text.strip())) and not prev.hyphen_join
                else:
                    gap = ln.top - prev.bottom
                    size = max(prev.size, ln.size, 1.0) if prev.size and ln.size else (prev.bottom - prev.top)
                    new_para = gap > 0.55 * size
                if (prev.ocr_confidence is None) != (ln.ocr_confidence is None):
                    new_para = True
                if ln.page != prev.page and ln.ocr_confidence is not None:
                    new_para = True  # an OCR'd page (a slide) stands alone: OCR gives no sentence flow to follow
                if ln.page > para[0].page + 1:
                    new_para = True  # a paragraph (and so a citation) never spans more than two pages
                if new_para:
                    flush_para()
            para.append(ln)
            i += 1
        flush_para()
        return out

    @staticmethod
    def _list(lines: list[Line], i: int) -> tuple[Element, int]:
        items: list[str] = []
        first = lines[i]
        marker_x = first.x0
        cur = ""
        hyphen = False
        last = first
        while i < len(lines):
            ln = lines[i]
            text = ln.text.strip()
            if ln is not first:
                if ln.page != last.page and SENTENCE_END.search(last.text.strip()) and not BULLET.match(text):
                    break
                if ln.page > first.page + 1:
                    break  # a list (and so a citation) never spans more than two pages
                gap = ln.top - last.bottom if ln.page == last.page else 0.0
                if gap > 0.9 * max(last.size, 1.0) and not BULLET.match(text):
                    break
                if BULLET.match(text):
                    if abs(ln.x0 - marker_x) > 30:
                        break
                elif ln.x0 < marker_x + 2:
                    break
            if BULLET.match(text):
                if cur:
                    items.append(cur)
                cur = BULLET.sub("", text, count=1) if text.startswith(BULLET_CHARS) else text
                hyphen = ln.hyphen_join
            else:
                cur = join_lines(cur, text, hyphen)
                hyphen = ln.hyphen_join
            last = ln
            i += 1
        if cur:
            items.append(cur)
        text = "\n".join(it if ENUMERATED.match(it) else f"- {it}" for it in items)
        return Element(kind="list", text=text, page_start=first.page, page_end=last.page, items=items), i

    def _try_table(self, lines: list[Line], i: int) -> tuple[Element, int] | None:
        caption = ""
        if CAPTION.match(lines[i].text.strip()) and i + 1 < len(lines) and is_table_row(lines[i + 1]):
            m = CAPTION.match(lines[i].text.strip())
            if m and m.group(1).lower().startswith("tab"):
                caption = lines[i].text.strip()
                i += 1
        if not is_table_row(lines[i]):
            return None
        region: list[Line] = []
        col_x: list[float] = []
        j = i
        while j < len(lines):
            ln = lines[j]
            if region and ln.page != region[-1].page:
                break
            if is_table_row(ln):
                if region and ln.top - max(r.bottom for r in region) > 3.0 * max(ln.size, 1.0):
                    break
                region.append(ln)
                col_x.extend(ln.cell_x)
                j += 1
                continue
            if not region:
                break
            prev = region[-1]
            tol = 0.4 * max(ln.size, 1.0)
            same_row = any(abs(ln.bottom - r.bottom) <= tol for r in region)
            aligned = any(abs(ln.x0 - x) <= 3.0 for x in col_x)
            close = ln.top - prev.bottom < 1.0 * max(ln.size, 1.0)
            if len(ln.text) <= 60 and (same_row or (aligned and close)) and heading_numbering(ln.text)[0] == "":
                region.append(ln)
                j += 1
                continue
            break
        multi = [r for r in region if r.cells]
        if len(multi) < 2:
            return None
        # cells by baseline (a line and the short lines beside it on the same baseline)
        baselines: list[dict[str, Any]] = []
        for r in sorted(region, key=lambda r: (r.bottom, r.x0)):
            parts = list(zip(r.cell_x, r.cells, strict=True)) if r.cells else [(r.x0, r.text.strip())]
            if baselines and abs(baselines[-1]["bottom"] - r.bottom) <= 0.4 * max(1.0, r.bottom - r.top):
                baselines[-1]["cells"] = sorted(baselines[-1]["cells"] + parts)
                baselines[-1]["top"] = min(baselines[-1]["top"], r.top)
                baselines[-1]["low"] = max(baselines[-1]["low"], r.bottom)
            else:
                baselines.append({"bottom": r.bottom, "low": r.bottom, "top": r.top, "page": r.page, "cells": parts})
        counts = Counter(len(b["cells"]) for b in baselines if len(b["cells"]) >= 2)
        full = counts.most_common(1)[0][0] if counts else 0
        cols = self._columns(col_x, [b["cells"] for b in baselines if len(b["cells"]) == full])
        if len(cols) < 2:
            return None
        for b in baselines:  # a row of the typical width fills the columns in order; others go by position
            in_order = len(b["cells"]) == len(cols)
            b["cells"] = [(k if in_order else min(range(len(cols)), key=lambda c: abs(cols[c] - x)), t)
                          for k, (x, t) in enumerate(b["cells"])]
        # rows, with wrapped lines folded into the row above
        rows: list[dict[str, Any]] = []
        for b in baselines:
            size = max(1.0, b["low"] - b["top"])
            close = bool(rows) and -0.2 * size <= b["top"] - rows[-1]["bottom"] < 0.5 * size
            if close and continues_row(rows[-1]["cells"], b["cells"], full, header=len(rows) == 1):
                row = rows[-1]
            else:
                row = {"cells": {}, "bottom": b["low"], "page": b["page"]}
                rows.append(row)
            for col, t in b["cells"]:
                row["cells"][col] = (row["cells"][col] + " " + t) if col in row["cells"] else t
            row["bottom"] = max(row["bottom"], b["low"])
        table_rows = [tuple(r["cells"].get(k, "") for k in range(len(cols))) for r in rows]
        header, body_rows = table_rows[0], table_rows[1:]
        if not body_rows:
            return None
        m = CAPTION.match(caption) if caption else None
        label = f"Table {m.group(2)}" if m else ""
        element = Element(
            kind="table", text="", page_start=region[0].page, page_end=region[-1].page, label=label,
            caption=caption, header=header, rows=body_rows, row_pages=[r["page"] for r in rows[1:]],
        )
        return element, j

    @staticmethod
    def _columns(xs: list[float], typical: list[list[tuple[float, str]]]) -> list[float]:
        """Column positions: from the rows of the typical width when they agree (centred or right-aligned
        figures start at different x), else clusters of the cells' left edges."""
        if len(typical) >= 2:
            cols = [statistics.median(row[k][0] for row in typical) for k in range(len(typical[0]))]
            if all(a < b for a, b in itertools.pairwise(cols)):
                return cols
        cols_: list[list[float]] = []
        for x in sorted(xs):
            if cols_ and x - statistics.mean(cols_[-1]) <= 8.0:
                cols_[-1].append(x)
            else:
                cols_.append([x])
        return [statistics.mean(c) for c in cols_]

    @staticmethod
    def _attach_caption(out: list[Element], table: Element, lines: list[Line], j: int) -> None:
        if table.caption:
            return
        # caption just before the table (already emitted as a paragraph/caption) or just after it
        if out and out[-1].kind in ("paragraph", "caption") and out[-1].page_end == table.page_start:
            m = CAPTION.match(out[-1].text)
            if m and m.group(1).lower().startswith("tab") and len(out[-1].text) <= 250:
                table.caption = out.pop().text
                table.label = f"Table {m.group(2)}"
                return
        if j < len(lines):
            text = lines[j].text.strip()
            m = CAPTION.match(text)
            if m and m.group(1).lower().startswith("tab") and lines[j].page == table.page_end:
                table.caption = text
                table.label = f"Table {m.group(2)}"

    # --- levels and section paths -----------------------------------------------------------
    @staticmethod
    def _assign_levels(elements: list[Element]) -> None:
        heads = [e for e in elements if e.kind == "heading"]
        sizes_by_depth: dict[int, list[float]] = {}
        for h in heads:
            if h.level == 0 and h.numbering:
                depth = heading_numbering(h.text)[1]
                sizes_by_depth.setdefault(depth, []).append(h.font_size)
        unnumbered_sizes = sorted({h.font_size for h in heads if not h.numbering}, reverse=True)
        for h in heads:
            size = h.font_size
            if h.level > 0:
                continue
            if h.numbering:
                h.level = heading_numbering(h.text)[1]
                continue
            if sizes_by_depth:
                level = max(sizes_by_depth) + 1
                for depth in sorted(sizes_by_depth):
                    if size >= max(sizes_by_depth[depth]) - 0.5:
                        level = depth
                        break
                h.level = level
            else:
                h.level = min(3, unnumbered_sizes.index(size) + 1) if size in unnumbered_sizes else 1

    @staticmethod
    def _assign_sections(elements: list[Element]) -> None:
        """Each element's section path: the headings above it. An abstract holds no table, so a table under an
        "Abstract" heading (a paper whose next headings were not found, a two-column sample with none) is filed
        under the abstract's parent, the document's title, not cited as part of the abstract."""
        stack: list[tuple[int, str, str]] = []  # (level, title, numbering)
        for e in elements:
            if e.kind == "heading":
                while stack and stack[-1][0] >= e.level:
                    stack.pop()
                stack.append((e.level, e.text, e.numbering))
            path = stack[:-1] if e.kind == "table" and stack and norm_title(stack[-1][1]) == "abstract" else stack
            e.section = " > ".join(t for _, t, _ in path)
            e.section_id = next((n for _, _, n in reversed(path) if n), "")
