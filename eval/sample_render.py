"""Lay out a sample document's blocks as a PDF with ReportLab, recording the page each anchor lands on.

A document is a list of blocks: ("h1"|"h2", text), ("p", text), ("bullets", [..]),
("table", caption, [header, *rows]), ("anchor", key), ("pagebreak",), ("twocol",), ("onecol",),
("scan", lines), ("spaced_h2", text).
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass, field
from typing import Any

_FIXED_DATE = "D:20240301090000+00'00'"


def _soft_hyphenate(text: str) -> str:
    """Insert soft hyphens into long words so ReportLab breaks some lines with a hyphen."""
    out = []
    for word in text.split(" "):
        core = word.strip(".,;:()\u201c\u201d'")
        if len(core) >= 9 and core.isalpha() and core.islower():
            mid = len(word) // 2
            # break after a vowel near the middle, the way a hyphenation dictionary would
            cut = next((i + 1 for i in range(mid, len(word) - 3) if word[i] in "aeiou"), mid)
            word = word[:cut] + "\u00ad" + word[cut:]
        out.append(word)
    return " ".join(out)


def _scan_image(lines: list[str]) -> Any:
    """The memo as a slightly rotated, noisy greyscale 'scan' at 200 dpi (JPEG bytes)."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    w, h = 1700, 2200  # US letter at 200 dpi
    img = Image.new("L", (w, h), 250)
    draw = ImageDraw.Draw(img)
    font: Any
    bold: Any
    try:
        font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", 40)
        bold = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSerif-Bold.ttf", 46)
    except OSError:
        font = ImageFont.load_default(size=40)
        bold = ImageFont.load_default(size=46)
    y = 220
    for i, line in enumerate(lines):
        f = bold if i in (0, 2) else font
        draw.text((190, y), line, fill=25, font=f)
        y += 64 if line else 40
    draw.line((190, y + 40, 700, y + 10), fill=40, width=4)  # a "signature" stroke
    rng = random.Random(20240614)  # fixed seed: reproducible speckle
    px = img.load()
    assert px is not None
    for _ in range(9000):
        x, yy = rng.randrange(w), rng.randrange(h)
        px[x, yy] = rng.choice((90, 140, 200))
    img = img.rotate(0.5, resample=Image.Resampling.BICUBIC, fillcolor=245, expand=False)
    img = img.filter(ImageFilter.GaussianBlur(0.6))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=80, optimize=False)
    return buf.getvalue()


@dataclass
class Build:
    anchors: dict[str, int] = field(default_factory=dict)
    pages: int = 0


def render(blocks: list[tuple[Any, ...]], running_title: str, doc_title: str) -> tuple[bytes, Build]:
    from reportlab.lib import colors
    from reportlab.lib.enums import TA_CENTER
    from reportlab.lib.pagesizes import LETTER
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import inch
    from reportlab.lib.utils import ImageReader
    from reportlab.platypus import (
        BaseDocTemplate,
        Flowable,
        Frame,
        FrameBreak,
        KeepTogether,
        ListFlowable,
        ListItem,
        NextPageTemplate,
        PageBreak,
        PageTemplate,
        Paragraph,
        Spacer,
        Table,
        TableStyle,
    )

    state = Build()
    pw, ph = LETTER
    margin = inch

    class Anchor(Flowable):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

        def wrap(self, aw: float, ah: float) -> tuple[float, float]:
            return 0, 0

        def draw(self) -> None:
            state.anchors.setdefault(self.key, self.canv.getPageNumber())

    class ScanPage(Flowable):
        """A full-page image with no text layer (drawn on a page template without header/footer)."""

        def __init__(self, data: bytes) -> None:
            super().__init__()
            self.data = data

        def wrap(self, aw: float, ah: float) -> tuple[float, float]:
            return aw, ah

        def draw(self) -> None:
            state.anchors.setdefault("hb_scan", self.canv.getPageNumber())
            self.canv.drawImage(ImageReader(io.BytesIO(self.data)), 0, 0, width=pw, height=ph)

    class SpacedHeading(Flowable):
        """A heading drawn glyph by glyph with spaces, the way some producers letter-space text."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

        def wrap(self, aw: float, ah: float) -> tuple[float, float]:
            return aw, 26

        def draw(self) -> None:
            self.canv.setFont("Helvetica-Bold", 12.5)
            self.canv.drawString(0, 8, self.text)

    body = ParagraphStyle(
        "body", fontName="Times-Roman", fontSize=11, leading=14.5, spaceAfter=7,
        embeddedHyphenation=1, hyphenationLang="en_GB", uriWasteReduce=0.3,
    )
    h1 = ParagraphStyle("h1", fontName="Helvetica-Bold", fontSize=16, leading=20, spaceBefore=8, spaceAfter=8)
    h2 = ParagraphStyle("h2", fontName="Helvetica-Bold", fontSize=12.5, leading=16, spaceBefore=6, spaceAfter=5)
    caption = ParagraphStyle("cap", fontName="Helvetica-Oblique", fontSize=10, leading=13, spaceAfter=4)
    cell = ParagraphStyle("cell", fontName="Times-Roman", fontSize=10, leading=12)
    head_cell = ParagraphStyle("hcell", fontName="Times-Bold", fontSize=10, leading=12)
    title1 = ParagraphStyle("t1", fontName="Helvetica-Bold", fontSize=26, leading=32, alignment=TA_CENTER)
    title2 = ParagraphStyle("t2", fontName="Helvetica", fontSize=14, leading=20, alignment=TA_CENTER)

    def decorate(canv: Any, doc: Any) -> None:
        canv.saveState()
        canv.setFont("Helvetica", 8.5)
        canv.setFillColor(colors.HexColor("#444444"))
        canv.drawString(margin, ph - 0.6 * inch, running_title)
        canv.line(margin, ph - 0.66 * inch, pw - margin, ph - 0.66 * inch)
        canv.drawString(margin, 0.55 * inch, "Confidential \u2014 internal use only")
        canv.drawRightString(pw - margin, 0.55 * inch, f"Page {canv.getPageNumber()}")
        canv.restoreState()

    def count(canv: Any, doc: Any) -> None:
        state.pages = max(state.pages, canv.getPageNumber())

    buf = io.BytesIO()
    doc = BaseDocTemplate(
        buf, pagesize=LETTER, leftMargin=margin, rightMargin=margin, topMargin=margin, bottomMargin=margin,
        title=doc_title, author="Citebot sample generator", subject="Sample document", creator="Citebot",
        producer="ReportLab", invariant=1,
    )
    fw, fh = pw - 2 * margin, ph - 2 * margin
    gap = 0.3 * inch
    cw = (fw - gap) / 2
    doc.addPageTemplates([
        PageTemplate("one", [Frame(margin, margin, fw, fh, id="f1")], onPage=decorate, onPageEnd=count),
        PageTemplate(
            "two",
            [Frame(margin, margin, cw, fh, id="c1"), Frame(margin + cw + gap, margin, cw, fh, id="c2")],
            onPage=decorate, onPageEnd=count,
        ),
        PageTemplate("scan", [Frame(0, 0, pw, ph, id="s", leftPadding=0, rightPadding=0, topPadding=0,
                                    bottomPadding=0)], onPageEnd=count),
    ])

    story: list[Any] = []
    for block in blocks:
        kind = block[0]
        if kind == "title":
            story += [Spacer(1, 2.2 * inch), Paragraph(block[1], title1), Spacer(1, 0.3 * inch),
                      Paragraph(block[2], title2), Spacer(1, 0.15 * inch), Paragraph(block[3], title2),
                      Spacer(1, 0.6 * inch)]
        elif kind == "h1":
            story.append(Paragraph(block[1], h1))
        elif kind == "h2":
            story.append(Paragraph(block[1], h2))
        elif kind == "spaced_h2":
            story.append(SpacedHeading(block[1]))
        elif kind == "p":
            story.append(Paragraph(_soft_hyphenate(block[1]), body))
        elif kind == "bullets":
            story.append(ListFlowable(
                [ListItem(Paragraph(t, body), leftIndent=14) for t in block[1]],
                bulletType="bullet", start="\u2022", leftIndent=14,
            ))
        elif kind == "table":
            header, *rows = block[2]
            data = [[Paragraph(c, head_cell) for c in header]] + [[Paragraph(c, cell) for c in r] for r in rows]
            t = Table(data, repeatRows=1, hAlign="LEFT")
            t.setStyle(TableStyle([
                ("LINEABOVE", (0, 0), (-1, 0), 1, colors.black),
                ("LINEBELOW", (0, 0), (-1, 0), 0.6, colors.black),
                ("LINEBELOW", (0, -1), (-1, -1), 1, colors.black),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#e8e8e8")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("LEFTPADDING", (0, 0), (-1, -1), 6),
                ("RIGHTPADDING", (0, 0), (-1, -1), 14),
            ]))
            story.append(KeepTogether([Paragraph(block[1], caption), t, Spacer(1, 10)]))
        elif kind == "anchor":
            story.append(Anchor(block[1]))
        elif kind == "pagebreak":
            story.append(PageBreak())
        elif kind == "twocol":
            story += [NextPageTemplate("two"), PageBreak()]
        elif kind == "columnbreak":
            story.append(FrameBreak())
        elif kind == "onecol":
            story += [NextPageTemplate("one"), PageBreak()]
        elif kind == "scan":
            story += [NextPageTemplate("scan"), PageBreak(), ScanPage(_scan_image(block[1])), NextPageTemplate("one")]
        else:  # pragma: no cover - a typo in the tables above
            raise ValueError(f"unknown block kind {kind!r}")
    doc.build(story)
    return buf.getvalue(), state
