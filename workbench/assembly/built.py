"""One exact assembly of a conversation, before the budget and the cache key are added.

What the stages hand each other: the conversation, the text, the segments and ids, the render-stage
diagnostics, and how the assembly came about (spliced, reused, from a cache). Frozen: a stage that
learns more returns a changed copy (`dataclasses.replace`), so no flag is set behind anyone's back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ..budget import Window, measure
from ..conversation import Conversation
from ..diagnostics import Diagnostic
from ..segments import Segment, Span
from .result import LazyIds, LazyText

Tier = Literal["local", "redis"]


@dataclass(frozen=True, eq=False)
class Built:
    conv: Conversation
    text: "str | LazyText"
    segments: Sequence[Segment]
    ids: "NDArray[np.uint32] | LazyIds"
    diags: tuple[Diagnostic, ...]
    escaped: tuple[tuple[int, int], ...] = ()   # character spans kept as plain text
    render_ms: float = 0.0
    tokenize_ms: float = 0.0
    spans: tuple[Span, ...] = ()
    inspected: bool = False          # rewrite diagnostics added
    reused: int = 0                  # leading segments taken from an earlier prompt
    stored: bool = False             # already in the shared cache
    gen: bool = True                 # rendered with the generation prompt
    spliced: bool = False            # cut out of a larger exact assembly (truncation)
    cut_seq: int | None = None       # the message truncation cut to fill the budget
    first_change: int | None = None  # incremental: the first message that differs from before
    estimated: int | None = None     # the fast estimate, when one was made
    hit: Tier | None = None          # the cache tier this prompt (or its prefix) came from
    chain: tuple[str, ...] | None = None   # conv's prefix chain, when worked out while its encode ran
    _counts: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    @property
    def used(self) -> int:
        return len(self.ids)

    @cached_property
    def parts(self) -> dict[str, int]:
        return measure(Window(max(self.used, 1) + 1, 0, "default"), self.conv, self.segments, self.used).parts

    def seq_tokens(self) -> dict[int, int]:
        """Tokens per message sequence number (truncation drops by these exact counts)."""
        if not self._counts and self.segments:
            for s in self.segments:
                if s.seq is not None:
                    self._counts[s.seq] = self._counts.get(s.seq, 0) + s.token_count
        return self._counts
