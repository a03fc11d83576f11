"""The token budget (SPEC 2.6): window, reserve, and where the tokens go.

Input budget = context window − reserved output tokens. The window and the reserve
come, in order, from: the request (`max_tokens` sets the reserve), the assembler's
configuration, the template's model, and the defaults below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .conversation import Conversation
from .errors import BudgetError
from .segments import MESSAGE_KINDS, Segment, find_message_segment

DEFAULT_CONTEXT_WINDOW = 131072
DEFAULT_RESERVE = 4096

# The parts a person wants to see, in prompt order; bos and preamble count as system framing.
PARTS = ("system", "tools", "history", "last_user", "generation_prompt")


@dataclass(frozen=True, slots=True)
class Window:
    context_window: int
    reserve: int
    reserve_source: str  # "request max_tokens" | "assembler" | "template" | "default"

    @property
    def input_budget(self) -> int:
        return self.context_window - self.reserve


def resolve_window(conv: Conversation, *, context_window: int | None, reserve: int | None,
                   template_window: int | None, template_reserve: int | None) -> Window:
    """Pick the window and reserve for this request; refuse impossible combinations."""
    cw = context_window if context_window is not None else (template_window or DEFAULT_CONTEXT_WINDOW)
    if isinstance(cw, bool) or not isinstance(cw, int) or cw <= 0:
        raise BudgetError(f"the context window must be a positive number of tokens, got {cw!r}",
                          hint="pass --context-window N (or context_window=N) with N > 0")
    if conv.params.max_tokens is not None:
        res, src = conv.params.max_tokens, "request max_tokens"
    elif reserve is not None:
        res, src = reserve, "assembler"
    elif template_reserve is not None:
        res, src = template_reserve, "template"
    else:
        res, src = DEFAULT_RESERVE, "default"
    if src in ("template", "default") and isinstance(res, int) and res > cw // 4:
        # A default reserve is for the model's full window; in a smaller window it keeps a quarter.
        res, src = cw // 4, src + " (a quarter of the window)"
    if isinstance(res, bool) or not isinstance(res, int) or res < 0:
        raise BudgetError(f"the output reserve must be zero or a positive number of tokens, got {res!r}",
                          hint="pass --reserve N (or reserve=N) with N >= 0")
    if res >= cw:
        what = "max_tokens in the request" if src == "request max_tokens" else "the reserve"
        raise BudgetError(f"{what} ({res}) leaves no room for input in a context window of {cw} tokens",
                          hint="lower the reserve / max_tokens or raise the context window")
    return Window(cw, res, src)


@dataclass(frozen=True, slots=True)
class Budget:
    context_window: int
    reserve: int
    input_budget: int
    used: int
    by_kind: dict[str, int]
    parts: dict[str, int]          # system / tools / history / last_user / generation_prompt
    reserve_source: str = "default"
    estimated: int | None = None   # the fast estimate made before the exact count (None: not needed)
    exact_assemblies: int = 1      # exact assemblies it took to find what fits (render + tokenize each)
    splices: int = 0               # kept prompts derived from a larger exact assembly (checked)

    @property
    def free(self) -> int:
        """Input tokens left; negative when the prompt is over budget (truncation off)."""
        return self.input_budget - self.used

    def breakdown(self) -> dict[str, dict[str, float]]:
        """Tokens and share of the context window for each part, the reserve and what is free."""
        rows = dict(self.parts)
        rows["reserve"] = self.reserve
        rows["free"] = max(self.free, 0)
        cw = self.context_window
        return {k: {"tokens": v, "share": round(v / cw, 6)} for k, v in rows.items()}

    def to_json(self) -> dict[str, Any]:
        return {"context_window": self.context_window, "reserve": self.reserve, "input_budget": self.input_budget,
                "used": self.used, "free": self.free, "by_kind": dict(self.by_kind),
                "breakdown": self.breakdown(), "reserve_source": self.reserve_source,
                "estimated": self.estimated, "exact_assemblies": self.exact_assemblies, "splices": self.splices}


def part_of(seg: Segment, last_user_seq: int | None) -> str:
    if seg.kind in ("system", "bos", "preamble"):
        return "system"
    if seg.kind == "tools":
        return "tools"
    if seg.kind == "generation_prompt":
        return "generation_prompt"
    if seg.seq is not None and seg.seq == last_user_seq:
        return "last_user"
    return "history"


def measure(window: Window, conv: Conversation, segments: Sequence[Segment], used: int,
            estimated: int | None = None, exact_assemblies: int = 1, splices: int = 0) -> Budget:
    last_user = next((m.sequence for m in reversed(conv.messages) if m.role == "user"), None)
    by_kind: dict[str, int] = {}
    parts = dict.fromkeys(PARTS, 0)
    for s in segments:
        n = s.end - s.start
        by_kind[s.kind] = by_kind.get(s.kind, 0) + n
        parts[part_of(s, last_user)] += n
    return Budget(context_window=window.context_window, reserve=window.reserve, input_budget=window.input_budget,
                  used=used, by_kind=by_kind, parts=parts, reserve_source=window.reserve_source,
                  estimated=estimated, exact_assemblies=exact_assemblies, splices=splices)


def measure_next(window: Window, conv: Conversation, prev: Budget, prev_conv: Conversation,
                 prev_segments: Sequence[Segment], cut: int, segments: Sequence[Segment], used: int,
                 **counts: int) -> Budget:
    """measure() for a prompt whose segments before `cut` are the previous prompt's: counts only the
    segments after it (the previous tail out, the new tail in) and moves the last user message."""
    def last_user(c: Conversation) -> int | None:
        return next((m.sequence for m in reversed(c.messages) if m.role == "user"), None)

    lu_prev, lu_new = last_user(prev_conv), last_user(conv)
    by_kind, parts = dict(prev.by_kind), dict(prev.parts)
    for s in prev_segments[cut:]:
        n = s.end - s.start
        by_kind[s.kind] = by_kind.get(s.kind, 0) - n
        parts[part_of(s, lu_prev)] -= n
    if lu_prev != lu_new:
        # The previous last user message, if it is in the reused head, is history now; the new one,
        # if it is there too, moves the other way.
        for seq, src, dst in ((lu_prev, "last_user", "history"), (lu_new, "history", "last_user")):
            i = find_message_segment(prev_segments, seq) if seq is not None else None
            while i is not None and i < cut and prev_segments[i].seq == seq and prev_segments[i].kind in MESSAGE_KINDS:
                n = prev_segments[i].end - prev_segments[i].start
                parts[src] -= n
                parts[dst] += n
                i += 1
    for s in segments[cut:]:
        n = s.end - s.start
        by_kind[s.kind] = by_kind.get(s.kind, 0) + n
        parts[part_of(s, lu_new)] += n
    by_kind = {k: v for k, v in by_kind.items() if v}
    return Budget(context_window=window.context_window, reserve=window.reserve, input_budget=window.input_budget,
                  used=used, by_kind=by_kind, parts=parts, reserve_source=window.reserve_source, **counts)
