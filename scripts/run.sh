#!/usr/bin/env bash
# Set up (once) and run the main job: render the embedded demo session as a coloured segment view.
set -euo pipefail
EXTRAS=packs
source "$(dirname "$0")/_venv.sh"
exec .venv/bin/workbench demo --color always "$@"
