#!/usr/bin/env bash
# README command 2 (and .ci/run): set up if needed, lint and type-check, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
export HAYSTACK_TELEMETRY_ENABLED=False
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
