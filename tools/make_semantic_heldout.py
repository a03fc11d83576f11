#!/usr/bin/env python3
"""Expand ``tools/data/semantic_heldout.yaml`` into the held-out labelled evaluation set of the
context-aware semantic cache.

Usage:  python tools/make_semantic_heldout.py [OUTPUT_PATH]

Writes ``workbench/semantic/data/heldout.jsonl`` (or OUTPUT_PATH): one JSON object
per line with keys ``context``, ``cached_context``, ``category``, ``should_hit``,
``lang`` and ``id`` (``<scenario>/<lang>/<category>``).

The set was written independently of the main evaluation set and of the cache's
rules, so it can check whether they generalise; that is why it has its own source
and its own expander, sharing no data and no case-building code with
make_semantic_eval.py (only the YAML reader, datafile.py).  Every case is
hand-written data: 20 scenarios x {en, zh} x 6 categories = 240 cases.  No
randomness; the output is byte-for-byte deterministic, and
tests/test_generated_data.py checks that the committed file is exactly what this
writes.  The notation of the source file is described at its top.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from datafile import DataFileError, load_yaml

CATEGORIES = (
    ("paraphrase", True),
    ("coreference", True),
    ("added_background", True),
    ("entity_swap", False),
    ("intent_reversal", False),
    ("related_different", False),
)
LANGS = ("en", "zh")
MAX_CHARS = 300

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "data" / "semantic_heldout.yaml"
DEFAULT_OUT = ROOT / "workbench" / "semantic" / "data" / "heldout.jsonl"


def _messages(texts: list[str], where: str) -> list[dict[str, str]]:
    if not texts or len(texts) % 2 == 0:
        raise DataFileError(f"{where}: a conversation must start and end with a user message")
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise DataFileError(f"{where}: message {i} is empty")
        if len(text) >= MAX_CHARS:
            raise DataFileError(f"{where}: message {i} has {len(text)} characters (limit {MAX_CHARS})")
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return out


def build_cases(scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    seen_scenarios: set[str] = set()
    for sc in scenarios:
        scenario = sc["id"]
        langs = {k: v for k, v in sc.items() if k != "id"}
        if scenario in seen_scenarios:
            raise DataFileError(f"duplicate scenario {scenario}")
        seen_scenarios.add(scenario)
        if set(langs) != set(LANGS):
            raise DataFileError(f"{scenario}: needs exactly the languages {LANGS}")
        for lang in LANGS:
            block = langs[lang]
            expected = {"cached"} | {c for c, _ in CATEGORIES}
            if set(block) != expected:
                raise DataFileError(f"{scenario}/{lang}: keys {sorted(block)} != {sorted(expected)}")
            for category, should_hit in CATEGORIES:
                case_id = f"{scenario}/{lang}/{category}"
                entry = block[category]
                if isinstance(entry, dict):
                    context, cached = entry["context"], entry.get("cached", block["cached"])
                else:
                    context, cached = entry, block["cached"]
                if context == cached:  # a pair of one conversation with itself tests nothing
                    raise DataFileError(f"{case_id}: context and cached_context are identical")
                if case_id in seen_ids:
                    raise DataFileError(f"duplicate id {case_id}")
                seen_ids.add(case_id)
                cases.append({
                    "context": _messages(context, case_id + " context"),
                    "cached_context": _messages(cached, case_id + " cached_context"),
                    "category": category,
                    "should_hit": should_hit,
                    "lang": lang,
                    "id": case_id,
                })
    return cases


def main(argv: list[str], source: Path = SOURCE, default_out: Path = DEFAULT_OUT) -> int:
    """Expand `source` into `argv[1]` (or `default_out`). make_semantic_dev2.py calls it with its
    own source: the notation is the same."""
    out = Path(argv[1]) if len(argv) > 1 else default_out
    cases = build_cases(load_yaml(source)["scenarios"])
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(c, ensure_ascii=False, sort_keys=False) + "\n" for c in cases)
    out.write_text(text, encoding="utf-8", newline="\n")
    multi = sum(len(c["context"]) > 1 for c in cases)
    print(f"wrote {len(cases)} cases ({multi} with multi-turn context) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
