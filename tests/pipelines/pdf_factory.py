"""PDFs whose text layer says something other than what is drawn, as real producers' PDFs do.

reportlab draws the lines with its bundled Vera font; the font's ToUnicode map is then rewritten
(with pypdf) so each drawn character reads as ``remap(character)``. That reproduces what pdfium
returns for real PDFs: mathematical bold letters outside the BMP (as UTF-16 surrogate pairs), or
control characters from a font without a usable ToUnicode map.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path

import pypdf
import reportlab
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

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
