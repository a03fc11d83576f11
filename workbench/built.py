"""One exact assembly of a conversation, before the budget and the cache key are added.

What the assembler's stages hand each other: the conversation, the text, the segments and ids,
the render-stage diagnostics, and how the assembly came about (spliced, reused, cached).
"""

from __future__ import annotations

import numpy as np

from .conversation import Conversation
from .diagnostics import Diagnostic
from .segments import Segment, Span


class Built:
    """One exact assembly of a conversation (before budget and cache key)."""

    __slots__ = ("conv", "text", "segments", "ids", "diags", "escaped", "render_ms", "tokenize_ms", "spliced",
                 "cut_seq", "spans", "inspected", "reused", "stored", "gen", "estimated", "first_change",
                 "_counts")

    def __init__(self, conv: Conversation, text: str, segments: list[Segment], ids: np.ndarray,
                 diags: list[Diagnostic], escaped: tuple, render_ms: float, tokenize_ms: float):
        self.conv, self.text, self.segments, self.ids = conv, text, segments, ids
        self.diags, self.escaped, self.render_ms, self.tokenize_ms = diags, escaped, render_ms, tokenize_ms
        self.spliced = False
        self.inspected = False        # rewrite diagnostics added
        self.reused = 0               # leading segments taken from the previous result
        self.stored = False           # already in the shared cache
        self.gen = True               # rendered with the generation prompt
        self.estimated: int | None = None  # the fast estimate, when one was made
        self.first_change: int | None = None  # incremental: the first message that differs from before
        self.spans: list[Span] = []
        self.cut_seq: int | None = None
        self._counts: dict[int, int] | None = None

    @property
    def used(self) -> int:
        return len(self.ids)

    @property
    def parts(self) -> dict[str, int]:
        from .budget import Window, measure  # budget imports segments only; kept local to stay light
        return measure(Window(max(self.used, 1) + 1, 0, "default"), self.conv, self.segments, self.used).parts

    def seq_tokens(self) -> dict[int, int]:
        if self._counts is None:
            counts: dict[int, int] = {}
            for s in self.segments:
                if s.seq is not None:
                    counts[s.seq] = counts.get(s.seq, 0) + s.token_count
            self._counts = counts
        return self._counts
