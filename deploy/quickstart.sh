#!/usr/bin/env bash
# README command 1: set everything up and run the demo on the embedded defaults (no server, no API key).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
export HAYSTACK_TELEMETRY_ENABLED=False
exec .venv/bin/citebot demo "$@"
