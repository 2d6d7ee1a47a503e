"""The text layer of each page as positioned lines, with font size and weight.

pypdfium2 was chosen over pypdf by measurement on these machines: plain text extraction of the
117-page GeoTopo textbook runs at ~316 pages/s with pdfium against ~17 pages/s with pypdf (~16 with
its positional visitor), and per-character boxes and font sizes from pdfium still run at ~75
pages/s. pdfium also marks hyphenated line ends itself and keeps the content-stream order that
most producers write in reading order (columns one after the other).

Per page: characters are grouped into runs on one baseline; a wide horizontal gap starts a new run
(a table cell, the other column); runs that follow each other on the same baseline form one line
with ``cells``. Letter-spaced runs ("n o n - G A A P") are repaired from the glyph gaps. Pages are
parsed one at a time and the time budget is checked between pages.

Text comes out as valid Unicode (see :mod:`pipelines.reading.clean_text`): pdfium's UTF-16 halves
of a character outside the BMP are joined, control characters are dropped.

Which pages the OCR step reads (OCR adds, never replaces: a quote must be the PDF's own words): a page
whose text layer is readable keeps it, however short ("Line 1", a line of Arabic). A text layer is unreadable when it
holds no letter or digit, or when a good share of it is garbage: control characters (a font without
a usable ToUnicode map: the glyph numbers come through instead of letters), private-use glyphs,
U+FFFD, or "(cid:12)" written out as text. An unreadable text layer is dropped and the page is OCR'd,
as is a page with no text at all. A page with a readable but short text layer (under
``ocr_min_chars``) whose pictures cover much of it (a scan with a printed page number) is OCR'd too,
and the OCR step adds what the text layer lacks (:mod:`pipelines.reading.ocr`).
"""

from __future__ import annotations

import ctypes
import math
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

from pipelines.reading.clean_text import clean_text, is_dropped_char, join_surrogates
from pipelines.reading.layout import IngestError, Line, Page, ParsedPdf

# Pages read so far, of all the pages: the one progress callback of reading (text layer, OCR, the child process).
PageCallback = Callable[[int, int], None]

_SOFT_HYPHEN_MARK = "\ufffe"  # pdfium's marker for a hyphen at a line end
_SPACES = " \u00a0\t"
_FORCE_BOLD = 1 << 18
_GAP_EM = 1.4  # a horizontal gap wider than this many font sizes splits a line into cells
_LETTER_RUN = re.compile(r"(?:(?<=\s)|^)(?:\S {1,3}){3,}\S(?=\s|$)")
# a text layer with at least this share of garbage characters (and at least _GARBLED_MIN of them) is
# unreadable: a font without a usable ToUnicode map (measured: such pages of the dev set are 80-95% control
# characters; the worst math page of a pdfTeX textbook is 3%)
_GARBLED_SHARE = 0.3
_GARBLED_MIN = 3  # fewer garbage characters than this never make a page unreadable (one odd bullet on "Line 1")
# garbage that survives clean_text: private-use glyphs (symbol fonts mapped nowhere), the replacement character
_ODD_CHAR = re.compile("[\ue000-\uf8ff\ufffd\U000f0000-\U0010ffff]")
_CID = re.compile(r"\(cid:\d+\)")  # glyph ids written out as text by a converter that could not map them
# a short text layer on a page whose pictures cover at least this share of it is a scan with a little text
# (a printed page number, a stamp): OCR adds the picture's words
_SCAN_SHARE = 0.3
_MAX_PAGE_OBJECTS = 20_000  # page objects looked at for pictures; a page with more is drawn, not scanned


def _is_bold(name: str, weight: int, flags: int) -> bool:
    low = name.lower()
    return weight >= 600 or bool(flags & _FORCE_BOLD) or any(k in low for k in ("bold", "black", "heavy", "semibold"))


class _Run:
    __slots__ = ("chars", "xs", "x0", "x1", "top", "bottom", "size", "bold", "hyphen_join")

    def __init__(self, size: float, bold: bool) -> None:
        self.chars: list[str] = []
        self.xs: list[tuple[float, float]] = []  # glyph boxes (left, right); None-free, spaces excluded
        self.x0 = 1e9
        self.x1 = -1e9
        self.top = 1e9
        self.bottom = -1e9
        self.size = size
        self.bold = bold
        self.hyphen_join = False

    def text(self) -> str:
        raw = "".join(self.chars).strip()
        raw = re.sub(r"[ \u00a0\t]+", " ", raw)
        if _LETTER_RUN.search(raw):
            raw = repair_letter_spacing(raw, self.xs)
        return raw


def repair_letter_spacing(text: str, boxes: list[tuple[float, float]] | None = None) -> str:
    """Join letter-spaced runs ("P a y m e n t   S c h e d u l e" -> "Payment Schedule").

    Word breaks inside a run come from the glyph gaps when ``boxes`` (one per non-space glyph, in
    order) are given, else from runs of two or more spaces.
    """
    glyph_gaps: list[float] | None = None
    if boxes and len(boxes) == sum(1 for c in text if not c.isspace()):
        glyph_gaps = [boxes[i + 1][0] - boxes[i][1] for i in range(len(boxes) - 1)]

    out: list[str] = []
    pos = 0
    glyph_index = 0  # index of the next non-space glyph of ``text``
    for m in _LETTER_RUN.finditer(text):
        before = text[pos:m.start()]
        out.append(before)
        glyph_index += sum(1 for c in before if not c.isspace())
        run = m.group(0)
        letters = [c for c in run if not c.isspace()]
        if glyph_gaps is not None:
            gaps = glyph_gaps[glyph_index:glyph_index + len(letters) - 1]
            typical = statistics.median(gaps) if gaps else 0.0
            word = [letters[0]]
            for letter, gap in zip(letters[1:], gaps, strict=False):
                if gap > max(typical * 1.8, typical + 1.0):
                    word.append(" ")
                word.append(letter)
            out.append("".join(word))
        else:
            out.append(re.sub(r"(\S) (?=\S)", r"\1", re.sub(r"\s{2,}", "\x00", run)).replace("\x00", " "))
        glyph_index += len(letters)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def parse_page(textpage: Any, page_number: int, width: float, height: float) -> Page:
    """Lines of one page from a pdfium text page."""
    import pypdfium2.raw as raw

    tp = textpage.raw
    n = raw.FPDFText_CountChars(tp)
    page = Page(number=page_number, width=width, height=height)
    if n <= 0:
        return page
    text = textpage.get_text_range(0, n)
    same_length = len(text) == n
    left, right, bottom, top = ctypes.c_double(), ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
    name_buf = ctypes.create_string_buffer(96)
    flags = ctypes.c_int()

    runs: list[_Run] = []
    cur: _Run | None = None
    pending_hyphen = False
    nonspace = 0
    get_box = raw.FPDFText_GetCharBox
    get_size = raw.FPDFText_GetFontSize
    get_matrix = raw.FPDFText_GetMatrix
    matrix = raw.FS_MATRIX()
    ref_m = ctypes.byref(matrix)
    ref_l, ref_r, ref_b, ref_t = ctypes.byref(left), ctypes.byref(right), ctypes.byref(bottom), ctypes.byref(top)
    # running state of the current run, kept in locals for speed
    c_top = c_bottom = c_x1 = c_size = 0.0
    dropped = 0
    skip_next = False
    for i in range(n):
        if skip_next:  # the low half of a surrogate pair joined at i - 1
            skip_next = False
            continue
        ch = text[i] if same_length else chr(raw.FPDFText_GetUnicode(tp, i))
        if "\ud800" <= ch <= "\udfff":
            low = "" if i + 1 >= n else text[i + 1] if same_length else chr(raw.FPDFText_GetUnicode(tp, i + 1))
            ch = join_surrogates(ch, low)
            if not ch:  # a lone half
                dropped += 1
                continue
            skip_next = True
        if ch == "\r" or ch == "\n":
            if cur is not None:
                cur.top, cur.bottom, cur.x1 = c_top, c_bottom, c_x1
            cur = None
            continue
        if ch == _SOFT_HYPHEN_MARK or ch == "\u00ad":
            pending_hyphen = True
            continue
        if ch in _SPACES:
            if cur is not None:
                cur.chars.append(" ")
            continue
        if (ch < " " or "\x7f" <= ch <= "\x9f" or ch >= "\ufdd0") and is_dropped_char(ch):
            dropped += 1
            continue
        if not get_box(tp, i, ref_l, ref_r, ref_b, ref_t):
            continue
        gl, gr = left.value, right.value
        t, b = height - top.value, height - bottom.value
        new_run = cur is None
        if cur is not None:
            mid = (t + b) / 2
            slack = 0.35 * c_size
            gap = gl - c_x1
            if not (c_top - slack <= mid <= c_bottom + slack) or gap < -c_size or gap > _GAP_EM * max(c_size, 1.0):
                new_run = True
        if new_run:
            if cur is not None:
                cur.top, cur.bottom, cur.x1 = c_top, c_bottom, c_x1
            size = get_size(tp, i)
            if get_matrix(tp, i, ref_m):
                # the font size of the Tf operator, scaled by the text and page matrices: many producers set
                # "1 Tf" and scale with the matrix, and a 1-pt size split words at every glyph gap
                size *= math.hypot(matrix.c, matrix.d)
            size = size or (b - t)
            raw.FPDFText_GetFontInfo(tp, i, name_buf, 96, ctypes.byref(flags))
            weight = raw.FPDFText_GetFontWeight(tp, i)
            if pending_hyphen and runs:
                runs[-1].hyphen_join = True
            cur = _Run(size=size, bold=_is_bold(name_buf.value.decode("latin-1", "replace"), weight, flags.value))
            runs.append(cur)
            cur.x0 = gl
            c_top, c_bottom, c_x1, c_size = t, b, gr, size
        else:
            if t < c_top:
                c_top = t
            if b > c_bottom:
                c_bottom = b
            if gr > c_x1:
                c_x1 = gr
            if gl < cur.x0:  # type: ignore[union-attr]
                cur.x0 = gl  # type: ignore[union-attr]
        pending_hyphen = False
        cur.chars.append(ch)  # type: ignore[union-attr]
        cur.xs.append((gl, gr))  # type: ignore[union-attr]
        nonspace += 1
    if cur is not None:
        cur.top, cur.bottom, cur.x1 = c_top, c_bottom, c_x1
    lines = _runs_to_lines(runs, page_number)
    if not is_readable("\n".join(ln.text for ln in lines), dropped=dropped):
        return page  # an unreadable text layer: no lines, no characters, so the page is OCR'd
    page.chars = nonspace
    page.lines = lines
    return page


def is_readable(text: str, *, dropped: int = 0) -> bool:
    """Whether a page's text layer ``text`` (``dropped`` control characters already taken out of it) reads as
    text: it holds a letter or digit, and garbage (control characters, private-use glyphs, U+FFFD, "(cid:12)")
    is under :data:`_GARBLED_SHARE` of it or fewer than :data:`_GARBLED_MIN` characters."""
    total = dropped + len(text) - text.count(" ") - text.count("\n")
    garbage = dropped
    if "(cid:" in text:
        cids = _CID.findall(text)
        garbage += sum(len(m) for m in cids)
        text = _CID.sub(" ", text)
    garbage += len(_ODD_CHAR.findall(text))
    if not any(c.isalnum() for c in text):
        return False
    return garbage < _GARBLED_MIN or garbage < _GARBLED_SHARE * total


def _runs_to_lines(runs: list[_Run], page_number: int) -> list[Line]:
    """Consecutive runs sharing a baseline become one line (with cells); others stay separate."""
    lines: list[Line] = []
    group: list[_Run] = []

    def flush() -> None:
        if not group:
            return
        texts = [r.text() for r in group]
        keep = [(r, t) for r, t in zip(group, texts, strict=True) if t]
        if not keep:
            group.clear()
            return
        rs = [r for r, _ in keep]
        cells = tuple(t for _, t in keep)
        lines.append(Line(
            page=page_number,
            text=" ".join(cells),
            x0=min(r.x0 for r in rs),
            top=min(r.top for r in rs),
            x1=max(r.x1 for r in rs),
            bottom=max(r.bottom for r in rs),
            size=max(r.size for r in rs),
            bold=all(r.bold for r in rs),
            cells=cells if len(cells) > 1 else (),
            cell_x=tuple(r.x0 for r in rs) if len(cells) > 1 else (),
            hyphen_join=rs[-1].hyphen_join,
        ))
        group.clear()

    for run in runs:
        if group:
            prev = group[-1]
            tol = 0.4 * max(prev.size, run.size, 1.0)
            if abs(run.bottom - prev.bottom) <= tol and run.x0 > prev.x1:
                group.append(run)
                continue
            flush()
        group.append(run)
    flush()
    return lines


TIMEOUT = "Reading this PDF took longer than the time allowed per document, so it was not indexed."


def parse_pdf(
    data: bytes,
    *,
    ocr_min_chars: int = 40,
    deadline: float | None = None,
    on_page: PageCallback | None = None,
) -> ParsedPdf:
    """Every page's lines; pages without a readable text layer, and pages with fewer than ``ocr_min_chars``
    characters of it on a mostly pictured page, flagged for OCR. ``deadline`` is a ``time.monotonic()`` value;
    past it the parse stops with :class:`IngestError`."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        raise IngestError("The PDF is damaged and could not be opened.", code="corrupt") from e
    pages: list[Page] = []
    try:
        total = len(pdf)
        outline = _outline(pdf)
        for i in range(total):
            if deadline is not None and time.monotonic() > deadline:
                raise IngestError(TIMEOUT, code="timeout")
            try:
                pg = pdf[i]
            except pdfium.PdfiumError:
                pages.append(Page(number=i + 1, width=612, height=792, needs_ocr=False))
                continue
            try:
                width, height = pg.get_size()
                tp = pg.get_textpage()
                try:
                    page = parse_page(tp, i + 1, width, height)
                finally:
                    tp.close()
                page.needs_ocr = not page.lines or (
                    page.chars < ocr_min_chars and picture_share(pg) >= _SCAN_SHARE
                )
            finally:
                pg.close()
            page.label = _page_label(pdf, i)
            pages.append(page)
            if on_page is not None:
                on_page(i + 1, total)
    finally:
        pdf.close()
    return ParsedPdf(pages=pages, outline=outline)


def picture_share(pg: Any) -> float:
    """How much of the page's crop box (0-1) its pictures cover: image objects, and forms that hold one (a form's
    objects are measured in its own space, so the form's box on the page stands for them). Overlaps count
    twice; the sum is capped at 1."""
    import pypdfium2.raw as raw

    box = pg.get_cropbox()  # (left, bottom, right, top) in the space object bounds use, before /Rotate
    page_area = (box[2] - box[0]) * (box[3] - box[1])
    if page_area <= 0:
        return 0.0
    area = 0.0
    count = raw.FPDFPage_CountObjects(pg.raw)
    for i in range(min(count, _MAX_PAGE_OBJECTS)):
        obj = raw.FPDFPage_GetObject(pg.raw, i)
        kind = raw.FPDFPageObj_GetType(obj)
        if kind == raw.FPDF_PAGEOBJ_IMAGE or kind == raw.FPDF_PAGEOBJ_FORM and _form_has_picture(obj, 1):
            area += _clipped_area(obj, box)
            if area >= page_area:
                return 1.0
    return area / page_area


def _form_has_picture(form: Any, depth: int) -> bool:
    import pypdfium2.raw as raw

    count = min(raw.FPDFFormObj_CountObjects(form), _MAX_PAGE_OBJECTS)
    for i in range(count):
        obj = raw.FPDFFormObj_GetObject(form, i)
        kind = raw.FPDFPageObj_GetType(obj)
        if kind == raw.FPDF_PAGEOBJ_IMAGE or kind == raw.FPDF_PAGEOBJ_FORM and depth < 8 and _form_has_picture(
            obj, depth + 1
        ):
            return True
    return False


def _clipped_area(obj: Any, box: tuple[float, float, float, float]) -> float:
    import pypdfium2.raw as raw

    left, bottom, right, top = ctypes.c_float(), ctypes.c_float(), ctypes.c_float(), ctypes.c_float()
    if not raw.FPDFPageObj_GetBounds(obj, ctypes.byref(left), ctypes.byref(bottom), ctypes.byref(right),
                                     ctypes.byref(top)):
        return 0.0
    w = min(right.value, box[2]) - max(left.value, box[0])
    h = min(top.value, box[3]) - max(bottom.value, box[1])
    return w * h if w > 0 and h > 0 else 0.0


def _page_label(pdf: Any, index: int) -> str:
    """The page's label as PDF viewers show it ("iii", "17"), from the document's /PageLabels; "" if none."""
    try:
        return clean_text(str(pdf.get_page_label(index) or "")).strip()[:32]
    except Exception:  # noqa: BLE001 - a broken label tree only costs the labels
        return ""


def _outline(pdf: Any) -> list[tuple[int, str, int]]:
    out: list[tuple[int, str, int]] = []
    try:
        for item in pdf.get_toc(max_depth=8):
            dest = item.get_dest()
            index = dest.get_index() if dest is not None else None
            title = clean_text(item.get_title() or "").strip()
            if index is None or not title:
                continue
            out.append((item.level + 1, title, index + 1))
            if len(out) >= 2000:
                break
    except Exception:  # noqa: BLE001 - a broken outline is ignored, the text is what matters
        return []
    return out
