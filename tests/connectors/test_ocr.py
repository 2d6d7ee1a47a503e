"""connectors.ocr: Tesseract lines with confidence; a missing binary is a typed error."""

from __future__ import annotations

import pytest

from connectors import ocr


def _image(lines: list[str]):  # noqa: ANN202
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("L", (1400, 120 + 70 * len(lines)), 255)
    draw = ImageDraw.Draw(img)
    try:
        font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", 36)
    except OSError:
        font = ImageFont.load_default(size=36)
    for i, line in enumerate(lines):
        draw.text((60, 60 + 70 * i), line, fill=0, font=font)
    return img


@pytest.mark.slow
def test_ocr_image_reads_lines_with_confidence() -> None:
    if not ocr.tesseract_available():
        pytest.skip("tesseract is not installed")
    lines = ["Invoice number 4471 is due on 30 June", "Payment terms are net thirty days"]
    page = ocr.ocr_image(_image(lines), language="eng", timeout_s=30)
    got = " ".join(ln.text for ln in page.lines).split()
    expected = " ".join(lines).split()
    assert sum(1 for w in expected if w in got) / len(expected) >= 0.9
    assert len(page.lines) == 2 and page.lines[0].top < page.lines[1].top
    assert 60 < page.confidence <= 100 and all(ln.x1 > ln.x0 for ln in page.lines)


def test_missing_tesseract_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ocr.shutil, "which", lambda _name: None)
    with pytest.raises(ocr.OcrUnavailableError, match="tesseract"):
        ocr.ocr_image(_image(["x"]))


def test_unknown_page_segmentation_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="psm"):
        ocr.ocr_image(_image(["x"]), psm=99)
