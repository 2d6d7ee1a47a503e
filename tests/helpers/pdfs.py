"""The PDFs tests upload, built with reportlab (STYLE.md: generated in fixtures, no binary blobs).

* :func:`make_pdf` — lines of text drawn on pages: the one builder for ordinary test documents;
* :func:`sections_pdf` — headings and flowing paragraphs laid out by reportlab's platypus;
* :func:`remapped_pdf`, :func:`slide_deck_pdf` — PDFs as some real producers write them: a text layer that says
  something other than what is drawn (reportlab draws the lines with its bundled Vera font; the font's ToUnicode
  map is then rewritten with pypdf so each drawn character reads as ``remap(character)``, as pdfium returns for
  mathematical bold letters outside the BMP, or control characters from a font without a usable ToUnicode map),
  and a slide deck of pictures with no text layer;
* :func:`scanned_pdf` — scanned pages: a picture of printed lines filling the page, with or without a few lines
  of real text layer over it (a printed page number, a stamp).

PDFs built to break something (decompression bombs, glyph grids, hostile titles) stay with the test that breaks it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdf
import reportlab
from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

# A staff handbook's leave pages, for ``make_pdf``: the fact most chat tests ask about ("eighteen weeks").
LEAVE_PAGES = [
    ["1 Introduction", "This handbook describes how Halvard Logistics treats its employees."],
    [
        "4 Leave",
        "4.2 Parental leave",
        "Employees may take eighteen weeks of paid parental leave after the birth or adoption of a child.",
        "Parental leave must be requested from the people team at least four weeks in advance.",
    ],
]


# A finance memo with one fact nobody else has (the Zephyr budget), so a leak shows in an answer.
ZEPHYR_LINES = [
    "Aurora Project Finance Memo",
    "1 Budget",
    "The Zephyr budget for the Aurora project is 4,200 kroner per quarter.",
    "Requests above the Zephyr budget need approval from the finance committee.",
    "2 Reporting",
    "Spending is reported to the steering group every month.",
]


@dataclass(frozen=True)
class Line:
    """A line drawn in its own way: bold, another size, or further below the line above it than ``leading``."""

    text: str
    bold: bool = False
    size: float | None = None
    gap: float | None = None


def numbered_headings(i: int, line: str) -> bool:
    """A page's first line and its short numbered lines ("4 Leave", "4.2 Parental leave") are its headings."""
    return i == 0 or line[:1].isdigit() and len(line) < 40


def make_pdf(
    pages: Sequence[Sequence[str | Line]],
    *,
    size: float = 11,
    leading: float = 22,
    top: float = 780,
    left: float = 60,
    bold: Callable[[int, str], bool] | None = numbered_headings,
) -> bytes:
    """An A4 PDF with a text layer, one page per list of lines, drawn in Helvetica from ``top`` down, ``leading``
    points apart. ``bold(i, line)`` picks the bold lines of a page (headings, for the structure detector; ``None``:
    none); a :class:`Line` says it for itself. The same lines give the same bytes (reportlab's invariant mode)."""
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, invariant=True)
    for lines in pages:
        y = top
        for i, item in enumerate(lines):
            line = item if isinstance(item, Line) else Line(item, bold=bool(bold and bold(i, item)))
            if i:
                y -= leading if line.gap is None else line.gap
            c.setFont("Helvetica-Bold" if line.bold else "Helvetica", size if line.size is None else line.size)
            c.drawString(left, y, line.text)
        c.showPage()
    c.save()
    return buf.getvalue()


def sections_pdf(*pages: list[tuple[str, str]]) -> bytes:
    """A text PDF laid out by platypus, one page per argument: each page a list of ``(heading, paragraph)``."""
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()
    story: list[Any] = []
    for i, page in enumerate(pages):
        if i:
            story.append(PageBreak())
        for heading, text in page:
            story.append(Paragraph(heading, styles["Heading2"]))
            story.append(Paragraph(text, styles["BodyText"]))
    buf = io.BytesIO()
    SimpleDocTemplate(buf, pagesize=A4, title="Test document").build(story)
    return buf.getvalue()


_ENTRY = re.compile(r"<([0-9A-F]{2})> <([0-9A-F]{4})>")

MATH_BOLD = {c: chr(0x1D400 + i) for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")} | {
    c: chr(0x1D41A + i) for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")
}


def to_math_bold(text: str) -> str:
    """"Number" -> "𝐍𝐮𝐦𝐛𝐞𝐫"."""
    return "".join(MATH_BOLD.get(c, c) for c in text)


def to_control_chars(ch: str) -> str:
    """What a font without a usable ToUnicode map yields: small glyph numbers, read as control characters."""
    return chr(1 + ord(ch) % 30) if ch.isalnum() else ch


def remapped_pdf(pages: list[list[str]], remap: Callable[[str], str], *, remap_pages: set[int]) -> bytes:
    """A PDF with one page per list of lines; on the 1-based ``remap_pages`` the text layer reads ``remap(ch)``."""
    pdfmetrics.registerFont(TTFont("Vera", str(Path(reportlab.__file__).parent / "fonts" / "Vera.ttf")))
    writer = pypdf.PdfWriter()
    for number, lines in enumerate(pages, start=1):
        # one PDF per page, so each page has its own font and ToUnicode map
        buf = io.BytesIO()
        c = canvas.Canvas(buf, invariant=1)
        c.setFont("Vera", 11)
        for i, line in enumerate(lines):
            c.drawString(72, 720 - 16 * i, line)
        c.showPage()
        c.save()
        page_pdf = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(buf.getvalue())))
        if number in remap_pages:
            _remap_text_layer(page_pdf, remap)
        writer.append(page_pdf)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _remap_text_layer(pdf: pypdf.PdfWriter, remap: Callable[[str], str]) -> None:
    def entry(m: re.Match[str]) -> str:
        ch = bytes.fromhex(m.group(2)).decode("utf-16-be")
        if ch == "\0":
            return m.group(0)
        return f"<{m.group(1)}> <{remap(ch).encode('utf-16-be').hex().upper()}>"

    for font in pdf.pages[0]["/Resources"]["/Font"].values():
        to_unicode = font.get_object().get("/ToUnicode")
        if to_unicode is not None:
            stream = to_unicode.get_object()
            stream.set_data(_ENTRY.sub(entry, stream.get_data().decode("latin-1")).encode("latin-1"))


def slide_deck_pdf(slides: list[list[str]]) -> bytes:
    """An image-only slide deck (as slide-sharing sites export them): one 1280x720 picture per 720x405 pt page,
    the first line of each slide a large title, no text layer."""
    from PIL import Image, ImageDraw, ImageFont
    from reportlab.lib.utils import ImageReader

    fonts = Path(reportlab.__file__).parent / "fonts"
    title_font = ImageFont.truetype(str(fonts / "VeraBd.ttf"), 64)
    body_font = ImageFont.truetype(str(fonts / "Vera.ttf"), 40)
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=(720, 405), invariant=1)
    for lines in slides:
        img = Image.new("RGB", (1280, 720), (250, 250, 245))
        draw = ImageDraw.Draw(img)
        y = 70
        for i, line in enumerate(lines):
            draw.text((90, y), line, fill=(20, 30, 60), font=title_font if i == 0 else body_font)
            y += 120 if i == 0 else 64
        png = io.BytesIO()
        img.save(png, format="PNG")
        c.drawImage(ImageReader(io.BytesIO(png.getvalue())), 0, 0, width=720, height=405)
        c.showPage()
    c.save()
    return buf.getvalue()


def scanned_pdf(pages: Sequence[tuple[Sequence[str], Sequence[str]]]) -> bytes:
    """An A4 PDF of scanned pages, one per ``(picture lines, text-layer lines)``: the picture lines are printed
    into a page-sized 100-dpi image (black on white, 28-px Vera, as a scanner sees a printed page); the text-layer
    lines are drawn as real text in Helvetica near the foot of the page, over the picture."""
    from PIL import Image, ImageDraw, ImageFont
    from reportlab.lib.utils import ImageReader

    font = ImageFont.truetype(str(Path(reportlab.__file__).parent / "fonts" / "Vera.ttf"), 28)
    width, height = A4
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, invariant=1)
    for picture, text in pages:
        img = Image.new("L", (827, 1169), 255)
        draw = ImageDraw.Draw(img)
        for i, line in enumerate(picture):
            draw.text((90, 120 + 48 * i), line, fill=0, font=font)
        png = io.BytesIO()
        img.save(png, format="PNG")
        c.drawImage(ImageReader(io.BytesIO(png.getvalue())), 0, 0, width=width, height=height)
        c.setFont("Helvetica", 10)
        for i, line in enumerate(text):
            c.drawString(60, 40 + 14 * (len(text) - 1 - i), line)
        c.showPage()
    c.save()
    return buf.getvalue()
