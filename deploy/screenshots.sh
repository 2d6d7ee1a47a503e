#!/usr/bin/env bash
# A doc step, not part of set-up or CI: remake the screenshots the READMEs link, in Debian's headless Chromium.
#   eval/report-screenshot.png   `citebot eval report` of a demo-set run: the verdict first (eval/README.md)
#   eval/quality-screenshot.png  `citebot quality` over two made-up months of chat (eval/fakes/chat_history.py),
#                                the last week crossing the thumbs-down alarm (README.md, "Running it")
# Needs: bash deploy/setup.sh, then `apt-get install chromium fonts-noto-color-emoji` (the emoji font draws 👍/👎).
# Chromium stays off the network (eval/screenshot.py); the PNGs are reduced to 256 colours to stay small in git.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c 'import sys; from eval.screenshot import find_chromium; sys.exit(find_chromium() is None)'; then
  echo "screenshots: no Chromium: run 'apt-get install chromium fonts-noto-color-emoji' (as root) first" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CITEBOT_DATA_DIR="$work/data" HAYSTACK_TELEMETRY_ENABLED=False

shoot() {  # HTML PNG HEIGHT
  .venv/bin/python -m eval.screenshot "$1" "$2" --width 1280 --height "$3" >/dev/null
  .venv/bin/python -c 'import sys; from PIL import Image; p = sys.argv[1]
Image.open(p).convert("RGB").quantize(256).save(p, optimize=True)' "$2"
  echo "$2 ($(du -k "$2" | cut -f1) kB)"
}

.venv/bin/citebot eval run --out "$work/run" --json >/dev/null 2>"$work/run.log"
.venv/bin/citebot eval report "$work/run" >/dev/null
shoot "$work/run/report.html" eval/report-screenshot.png 1500

.venv/bin/python -m eval.fakes.chat_history "$CITEBOT_DATA_DIR" --until 2026-11-25T12:00:00+00:00 >/dev/null
.venv/bin/citebot quality --out "$work/quality" --until 2026-11-25T12:00:00+00:00 >/dev/null
shoot "$work/quality/quality.html" eval/quality-screenshot.png 1500
