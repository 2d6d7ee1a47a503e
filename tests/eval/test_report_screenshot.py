"""What a release manager sees first: the eval report's verdict, above the fold in a real browser.

Runs where Debian's Chromium is installed (it is not part of the set-up: deploy/screenshots.sh is the doc step
that makes the README's PNGs); elsewhere it is skipped and says why.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from eval.report import write_report
from eval.screenshot import find_chromium, screenshot
from tests.helpers.runs import good, missed, refused_unanswerable, write_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_chromium() is None, reason="Debian's chromium is not installed (apt-get install "
                       "chromium); the report screenshot is a doc step: deploy/screenshots.sh"),
]

FAIL_RED, PASS_GREEN = (0xB3, 0x26, 0x1E), (0x1F, 0x7A, 0x3A)


def _share(img: Image.Image, box: tuple[int, int, int, int], colour: tuple[int, int, int]) -> float:
    """The share of the pixels in ``box`` that have ``colour``."""
    pixels = np.asarray(img.crop(box).convert("RGB"), dtype=np.int16)
    return float((np.abs(pixels - np.array(colour)).max(axis=2) <= 6).mean())


@pytest.mark.parametrize("regress", [True, False])
def test_the_verdict_is_the_first_thing_on_screen(tmp_path: Path, regress: bool) -> None:
    base = write_run(tmp_path / "base", [good("a", critical=True), good("b"), refused_unanswerable("u")])
    new = write_run(tmp_path / "new", [missed("a", critical=True) if regress else good("a", critical=True),
                                       good("b"), refused_unanswerable("u")])
    write_report(new, against=base)
    png = screenshot(new / "report.html", tmp_path / "shot.png", width=1280, height=800)
    img = Image.open(png)
    assert img.size == (1280, 800)
    colour, other = (FAIL_RED, PASS_GREEN) if regress else (PASS_GREEN, FAIL_RED)
    # the banner fills the top of the page: its colour dominates the first 90 px, nothing else comes before it
    assert _share(img, (0, 0, 1280, 90), colour) > 0.5
    first_rows = [y for y in range(0, 200) if _share(img, (0, y, 1280, y + 1), colour) > 0.5]
    assert first_rows and first_rows[0] < 40
    assert _share(img, (0, 0, 1280, 800), other) < 0.01  # the other verdict's banner is nowhere (a PASS word may be)
