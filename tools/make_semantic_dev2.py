#!/usr/bin/env python3
"""Expand ``tools/data/semantic_dev2.yaml`` into "dev2", a second development set of the
context-aware semantic cache.

Usage:  python tools/make_semantic_dev2.py [OUTPUT_PATH]

Writes ``workbench/semantic/data/dev2.jsonl`` (or OUTPUT_PATH): one JSON object
per line with keys ``context``, ``cached_context``, ``category``, ``should_hit``,
``lang`` and ``id`` (``<scenario>/<lang>/<category>``).

The set exists so the cache's rules can be developed further without looking at
the held-out test half again; it was written without seeing the other sets or the
rules, so it has its own source; its notation is the held-out set's, and so is its
expander (make_semantic_heldout.main, given this source). Sharing that code shares no
cases: the expander builds cases only from the YAML it is given.
Every case is hand-written data: 24 scenarios x {en, zh} x 6 categories = 288
cases, in 24 domains the other sets do not use.  No randomness; the output is
byte-for-byte deterministic, and tests/test_generated_data.py checks that the
committed file is exactly what this writes.  The notation of the source file is
described at its top.
"""

from __future__ import annotations

import sys
from pathlib import Path

from make_semantic_heldout import main

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "data" / "semantic_dev2.yaml"
DEFAULT_OUT = ROOT / "workbench" / "semantic" / "data" / "dev2.jsonl"

if __name__ == "__main__":
    sys.exit(main(sys.argv, SOURCE, DEFAULT_OUT))
