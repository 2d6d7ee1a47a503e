#!/usr/bin/env bash
# README command 1: set everything up and run the demo on the embedded defaults (no server, no API key).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
export HAYSTACK_TELEMETRY_ENABLED=False
# the demo prints answers; per-answer log lines would interleave with them
export CITEBOT_LOG_LEVEL="${CITEBOT_LOG_LEVEL:-warning}"
exec .venv/bin/citebot demo "$@"
