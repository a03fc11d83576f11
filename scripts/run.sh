#!/usr/bin/env bash
# Set up (once) and run the main job: the workbench as a local web app on a sample session
# (`workbench app`: 127.0.0.1 only, it prints the address; Ctrl-C stops it). Arguments go to the
# command: a session file, --port N, --host ADDR, --no-show.
set -euo pipefail
EXTRAS=packs,ui
source "$(dirname "$0")/_venv.sh"
exec .venv/bin/workbench app "$@"
