#!/usr/bin/env python3
"""Expand ``tools/data/semantic_eval.yaml`` into ``workbench/semantic/data/eval.jsonl``, the
labelled evaluation set of the context-aware semantic cache.

    python tools/make_semantic_eval.py [OUTPUT_PATH]

Deterministic (no randomness): the cases are written in the order of the scenarios, the
languages and the categories, so expanding twice gives a byte-identical file, and
tests/test_generated_data.py checks that the committed file is exactly what this writes.

Each output line is one case::

    {"context": [...], "cached_context": [...], "category": ..., "should_hit": ...,
     "lang": "en" | "zh", "id": "<scenario>/<lang>/<category>"}

``cached_context`` is the conversation whose answer is already cached (its last user message is
the question that was answered); ``context`` is the new conversation (its last user message is the
current question); ``should_hit`` says whether the cached answer is right for the new question.
The notation of the source file is described at its top.

The held-out set has its own source and its own expander (make_semantic_heldout.py): it was
written apart from this set, which the rules were tuned on, and shares no data and no
case-building code with it (only the YAML reader, datafile.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from datafile import DataFileError, load_yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "data" / "semantic_eval.yaml"
OUT_PATH = ROOT / "workbench" / "semantic" / "data" / "eval.jsonl"

CATEGORIES = {
    "paraphrase": True,
    "coreference": True,
    "added_background": True,
    "entity_swap": False,
    "intent_reversal": False,
    "related_different": False,
}
LANGS = ("en", "zh")
MAX_CHARS = 300

HIST = "<<history>>"  # expands to the language block's "history" turns


def expand(turns: list[str], history: list[str] | None, where: str) -> list[str]:
    """Replace the HIST marker by the history turns."""
    out: list[str] = []
    for t in turns:
        if t == HIST:
            if not history:
                raise DataFileError(f"{where}: {HIST} used but no history given")
            out.extend(history)
        else:
            out.append(t)
    return out


def to_messages(turns: list[str], where: str) -> list[dict[str, str]]:
    if not turns or len(turns) % 2 == 0:
        raise DataFileError(f"{where}: a conversation alternates user/assistant and ends with a user message")
    msgs = []
    for i, text in enumerate(turns):
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_CHARS:
            raise DataFileError(f"{where}: message {i} is not text, empty or longer than {MAX_CHARS} chars")
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return msgs


def build_cases(scenarios: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cases = []
    seen: set[str] = set()
    for sc in scenarios:
        for lang in LANGS:
            block = sc[lang]
            history = block.get("history")
            for category, should_hit in CATEGORIES.items():
                cid = f"{sc['id']}/{lang}/{category}"
                entry = block[category]
                if isinstance(entry, dict):
                    new, cached = entry["new"], entry.get("cached", block["base"])
                else:
                    new, cached = entry, block["base"]
                context = to_messages(expand(new, history, cid), cid)
                cached_context = to_messages(expand(cached, history, cid), cid)
                if context == cached_context:
                    raise DataFileError(f"{cid}: context and cached_context are identical")
                if category == "coreference" and len(context) < 3:
                    raise DataFileError(f"{cid}: a coreference case needs an earlier exchange in context")
                if cid in seen:
                    raise DataFileError(f"duplicate id {cid}")
                seen.add(cid)
                cases.append({
                    "context": context,
                    "cached_context": cached_context,
                    "category": category,
                    "should_hit": should_hit,
                    "lang": lang,
                    "id": cid,
                })
    return cases


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else OUT_PATH
    cases = build_cases(load_yaml(SOURCE)["scenarios"])
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    out.write_text(text, encoding="utf-8", newline="\n")
    print(f"wrote {len(cases)} cases to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
