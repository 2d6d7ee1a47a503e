#!/usr/bin/env bash
# Refresh the hashed locks that deploy/setup.sh and deploy/Dockerfile install from, after pyproject.toml's
# dependencies change:   bash deploy/lock.sh            (keeps every pin that still fits, adds what is new)
# or to move every pin to the newest release allowed:   bash deploy/lock.sh --upgrade
# Needs uv (`pip install uv`) and PyPI. The locks hold every package but torch, for any platform and Python >= 3.11
# (markers where they differ): torch is installed first, on its own, as the CPU build (setup.sh, Dockerfile), so
# it is resolved here as that build (whose dependencies are small) and left out of the files.
#   deploy/requirements.lock        the package's dependencies (the image)
#   deploy/requirements-test.lock   the same pins plus the `test` extra (setup.sh: development and CI)
# CITEBOT_TORCH_FIND_LINKS: where uv finds the CPU wheel of torch (a directory or a page of links); PyTorch's CPU
# index by default.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v "${UV:-uv}" >/dev/null || { echo "lock: needs uv: pip install uv (or set UV=/path/to/uv)" >&2; exit 1; }

torch_version=$(sed -n 's/^TORCH_VERSION=//p' deploy/setup.sh)
torch_links=${CITEBOT_TORCH_FIND_LINKS:-https://download.pytorch.org/whl/cpu/torch/}
constraint=$(mktemp --suffix=.txt)
trap 'rm -f "$constraint"' EXIT
echo "torch==$torch_version+cpu" > "$constraint"

compile() {
  local out=$1; shift
  "${UV:-uv}" pip compile pyproject.toml "$@" --universal --python-version 3.11 --generate-hashes \
    --find-links "$torch_links" --constraint "$constraint" --no-emit-package torch \
    --no-header --quiet --output-file "$out"
  { printf '%s\n' \
      "# Hashed lock of Citebot's dependencies, made by uv from pyproject.toml: do not edit by hand." \
      "# Refresh after a dependency change:  bash deploy/lock.sh   (all to newest: bash deploy/lock.sh --upgrade)" \
      "# Installed with: pip install --require-hashes --no-deps -r $out  (after torch's CPU build, which is not here)"
    grep -v '^# Hashed lock\|^# Refresh after\|^# Installed with' "$out"; } > "$out.new"
  mv "$out.new" "$out"
}

# the image's lock first; the test lock is constrained by it so that the two never disagree on a shared pin
compile deploy/requirements.lock "$@"
compile deploy/requirements-test.lock --extra test --constraint deploy/requirements.lock "$@"
