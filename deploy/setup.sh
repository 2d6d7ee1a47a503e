#!/usr/bin/env bash
# Set up Citebot on a fresh Debian machine: tesseract-ocr, a venv in .venv, torch (CPU), the package, and the
# embedding model's ONNX export (made once from the packaged weights; the first start would make it otherwise).
# Idempotent: a second run only re-installs when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tesseract >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing tesseract-ocr with apt-get" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr >/dev/null
  else
    echo "setup: tesseract-ocr is missing and I am not root: run 'sudo apt-get install tesseract-ocr'." >&2
    echo "setup: going on without it; scanned pages will be reported as unreadable." >&2
  fi
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Citebot needs Python >= 3.11; set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv

stamp=.venv/.citebot-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages into .venv (a few minutes the first time; log: .venv/install.log)" >&2
  {
    .venv/bin/python -m pip install --disable-pip-version-check --upgrade pip &&
    # the CPU build first, so no dependency ever pulls a CUDA build
    .venv/bin/python -m pip install --disable-pip-version-check torch==2.13.0 &&
    .venv/bin/python -m pip install --disable-pip-version-check -e ".[test]"
  } > .venv/install.log 2>&1 || { tail -n 30 .venv/install.log >&2; echo "setup: pip failed (see .venv/install.log)" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# the ONNX export of the embedding model, into CITEBOT_DATA_DIR/models (or CITEBOT_MODELS_DIR); a no-op once made
.venv/bin/citebot models prepare || echo "setup: the ONNX export failed; Citebot will use torch (see above)" >&2
