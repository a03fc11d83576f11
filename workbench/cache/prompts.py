"""Whole assembled prompts as cache entries: what a process stores so another can reuse it.

An entry holds the prompt text, its token ids and, in the metadata, the segment table and the
render-stage diagnostics, as JSON. It is keyed by the prompt's cache key (workbench/cache/keys.py:
the build context's fingerprint, the tools, the message fingerprint chain, the generation flag).
A later request whose messages start with those messages finds it and extends it
(workbench/assembly/incremental.py), in this process or another one through Redis.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..diagnostics import Diagnostic
from ..segments import Segment
from .store import CacheEntry

FORMAT = 1
_KINDS = ("system", "tools", "message", "generation_prompt", "bos", "preamble")
_ROLES = (None, "system", "user", "assistant", "tool")


def to_entry(text: str, ids: NDArray[np.uint32], segments: Sequence[Segment], diagnostics: Sequence[Diagnostic],
             n_messages: int) -> CacheEntry | None:
    table: list[int] = []
    for s in segments:
        if s.kind not in _KINDS or s.role not in _ROLES:
            return None  # a kind this format cannot name: not cached
        table += [_KINDS.index(s.kind), _ROLES.index(s.role), -1 if s.seq is None else s.seq, s.start, s.end,
                  s.char_start, s.char_end]
    diags = [[d.level, d.code, d.message, d.seq] for d in diagnostics]
    return CacheEntry(text, ids, {"format": FORMAT, "messages": n_messages, "segments": json.dumps(table),
                                  "diagnostics": json.dumps(diags, ensure_ascii=False)})


def from_entry(entry: CacheEntry, source: str
               ) -> tuple[str, NDArray[np.uint32], list[Segment], list[Diagnostic], int]:
    """(text, ids, segments marked with `source`, render diagnostics, message count); ValueError if malformed.
    Every field is checked for type and range: an entry is read, never trusted."""
    meta = entry.meta
    if meta.get("format") != FORMAT:
        raise ValueError("another prompt-entry format")
    table = json.loads(str(meta["segments"]))
    ids = entry.token_ids
    text = entry.text
    segs: list[Segment] = []
    if not isinstance(table, list) or len(table) % 7 or not all(type(v) is int for v in table):
        raise ValueError("segment table")
    prev_end = prev_char = 0
    for i in range(0, len(table), 7):
        k, r, seq, start, end, c0, c1 = table[i:i + 7]
        if not (0 <= k < len(_KINDS) and 0 <= r < len(_ROLES) and seq >= -1):
            raise ValueError("segment kind, role or seq out of range")
        if start != prev_end or c0 != prev_char or end < start or c1 < c0:
            raise ValueError("segments do not tile the prompt")
        segs.append(Segment(_KINDS[k], _ROLES[r], None if seq < 0 else seq, text[c0:c1], ids[start:end], start, end,
                            c0, c1, source))
        prev_end, prev_char = end, c1
    if prev_end != len(ids) or prev_char != len(text):
        raise ValueError("segments do not cover the prompt")
    diags = []
    for d in json.loads(str(meta["diagnostics"])):
        lv, code, msg, seq = d
        if lv not in ("info", "warning", "error") or not isinstance(code, str) or not isinstance(msg, str) \
                or not (seq is None or type(seq) is int):
            raise ValueError("diagnostic")
        diags.append(Diagnostic(lv, code, msg, seq))
    n = meta["messages"]
    if type(n) is not int or n < 0:
        raise ValueError("message count")
    return text, ids, segs, diags, n
