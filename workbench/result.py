"""The typed result of one assembly (SPEC 2.7) and its JSON form (SPEC 7.2)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .cache.keys import CacheKey
from .conversation import Conversation
from .diagnostics import Diagnostic
from .segments import Segment


@dataclass(frozen=True, slots=True)
class Budget:
    context_window: int
    reserve: int
    input_budget: int
    used: int
    by_kind: dict[str, int]

    @property
    def free(self) -> int:
        return self.input_budget - self.used

    def to_json(self) -> dict:
        return {"context_window": self.context_window, "reserve": self.reserve, "input_budget": self.input_budget,
                "used": self.used, "free": self.free, "by_kind": dict(self.by_kind)}


@dataclass(frozen=True, slots=True)
class Dropped:
    seq: int
    reason: str

    def to_json(self) -> dict:
        return {"seq": self.seq, "reason": self.reason}


@dataclass(frozen=True, slots=True, eq=False)
class AssemblyResult:
    template: dict            # {"name", "version"}
    tokenizer: dict           # {"name", "version"}
    text: str
    token_ids: np.ndarray     # np.uint32, read-only
    segments: tuple[Segment, ...]
    budget: Budget
    dropped: tuple[Dropped, ...]
    cache_key: CacheKey
    diagnostics: tuple[Diagnostic, ...]
    timings_ms: dict[str, float]
    conversation: Conversation
    cache_hits: dict[str, int] = field(default_factory=lambda: {"local": 0, "redis": 0})
    # Character spans of user text holding special-token strings, encoded as plain text.
    escaped: tuple[tuple[int, int], ...] = ()

    @property
    def total_tokens(self) -> int:
        return int(self.token_ids.shape[0])

    @property
    def cache_key_short(self) -> str:
        return self.cache_key.short

    def to_json(self) -> dict:
        return {
            "template": {"name": self.template["name"], "version": self.template["version"]},
            "tokenizer": {"name": self.tokenizer["name"], "version": self.tokenizer["version"]},
            "text": self.text,
            "token_ids": self.token_ids.tolist(),
            "total_tokens": self.total_tokens,
            "segments": [s.to_json() for s in self.segments],
            "budget": self.budget.to_json(),
            "dropped": [d.to_json() for d in self.dropped],
            "cache_key": self.cache_key.hex,
            "cache_key_short": self.cache_key.short,
            "cache_hits": dict(self.cache_hits),
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "escaped_spans": [list(e) for e in self.escaped],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
