"""Segment cache keys: SHA-256 over \\x00-joined stable inputs, chained over the prefix.

Nothing volatile goes in: no timestamps, request ids or user ids. Each message
has a content fingerprint; the chain makes a changed message invalidate
everything after it and nothing before it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..conversation import Message, canonical_json


@dataclass(frozen=True, slots=True)
class CacheKey:
    hex: str

    @property
    def short(self) -> str:
        return self.hex[:8]

    def __str__(self) -> str:
        return self.hex


def _h(*parts: str) -> str:
    # Intake refuses lone surrogates, so plain UTF-8 (the fast codec path) always works.
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


def _field(v: str | None) -> str:
    # None and "" must hash differently: a leading tag keeps the fields unambiguous.
    return "\x01" if v is None else "\x02" + v


def message_fingerprint(m: Message) -> str:
    parts = [m.role, _field(m.content), _field(m.name), _field(m.tool_call_id), _field(m.reasoning)]
    for tc in m.tool_calls:
        parts += [tc.id, tc.name, tc.arguments]
    return _h(*parts)


def prefix_chain(messages: Iterable[Message], root: str = "") -> list[str]:
    """chain[i] = H(chain[i-1], fingerprint(message i))."""
    out, prev = [], root
    for m in messages:
        prev = _h(prev, message_fingerprint(m))
        out.append(prev)
    return out


def extend_chain(chain: Sequence[str], messages: Sequence[Message], start: int) -> tuple[str, ...]:
    """The chain of `messages`, reusing `chain[:start]` (the messages before `start` are unchanged)."""
    head = tuple(chain[:start])
    return head + tuple(prefix_chain(messages[start:], head[-1] if head else ""))


def cache_key(*, template_version: str, tokenizer_version: str, policy_version: str,
              tools: Sequence[str], messages: Sequence[Message], extra: str = "",
              chain: Sequence[str] | None = None) -> CacheKey:
    """The key of a whole prompt. `chain`, when given, is `prefix_chain(messages)` already computed."""
    system = next((m.content or "" for m in messages if m.role == "system"), "")
    tools_canon = canonical_json([json.loads(t) for t in tools])
    if chain is None:
        chain = prefix_chain(messages)
    return CacheKey(_h(template_version, tokenizer_version, policy_version, system, tools_canon,
                       chain[-1] if chain else "", extra))
