#!/usr/bin/env bash
# Set up (once) and run the main job: render the embedded demo session as a coloured segment view.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[packs]"
exec .venv/bin/workbench demo --color always "$@"
