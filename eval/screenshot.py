"""Screenshots of the HTML reports in headless Chromium: what a person sees first, as a PNG.

Used by ``deploy/screenshots.sh`` (the doc step that makes the PNGs the READMEs link) and by the test that
checks the eval report's verdict is above the fold. Chromium is Debian's ``chromium`` package; nothing is
downloaded. The flags keep it off the network (no background services, no component updates) and in a fresh
profile, as this machine's notes advise.

    python -m eval.screenshot report.html report.png [--width 1280] [--height 900]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--force-device-scale-factor=1")


class ScreenshotError(RuntimeError):
    """Chromium is missing or did not write the picture."""


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def screenshot(html: Path, png: Path, *, width: int = 1280, height: int = 900, timeout_s: float = 90.0) -> Path:
    """Render ``html`` (a local file) in a ``width`` x ``height`` window and save the view as ``png``."""
    browser = find_chromium()
    if browser is None:
        raise ScreenshotError("no Chromium found: on Debian `apt-get install chromium`")
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="citebot-chromium-") as profile:
        cmd = [browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
               f"--screenshot={png.resolve()}", html.resolve().as_uri()]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)  # noqa: S603
        except subprocess.TimeoutExpired as e:
            raise ScreenshotError(f"Chromium took longer than {timeout_s:.0f} s") from e
    if not png.exists() or png.stat().st_size == 0:
        raise ScreenshotError(f"Chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-500:]}")
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.screenshot", description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args(argv)
    try:
        print(screenshot(args.html, args.png, width=args.width, height=args.height))
    except ScreenshotError as e:
        print(f"screenshot: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
