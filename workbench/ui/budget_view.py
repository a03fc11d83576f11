"""The budget controls (context window, reserve, truncation policy) and the over-budget view, for
both hosts. No UI library here.

Where each setting lives:
- the context window is the session file's own `context_window` field (already read by the CLI and
  the app): an edit goes into the document, so Save and Export keep it; blank removes it, and the
  template's model window (or the default) applies again;
- the reserve for the reply is the request's `max_tokens` (`max_completion_tokens` where the file
  uses that, `max_output_tokens` in a Responses request): the budget reads the reserve from it
  first (workbench/budget.py), and a client sends it with every request, so it too goes into the
  document;
- the truncation policy has no field in a session file (SPEC 7.1): like the template, it is a
  choice of the workbench, carried by the assembler and so by the export bundle.

An over-budget prompt is shown, not refused, in one of two layouts for the token view:
- `interleave`, when the policy fits it: the prompt sent (the kept result's own segments, with its
  own offsets, the summary slot's message flagged "summary"), with each message the policy dropped
  (from the whole, untruncated prompt) flagged "dropped" at its place, struck through; a dropped
  segment is in no prompt that is sent, so its offsets mean only its token count;
- `mark`, with no policy or one that cannot fit it: the whole prompt (every message, nothing
  dropped) with each segment flagged "dropped" (a message the policy would leave out) or "over"
  (tokens past the input budget, the segment split at a token boundary where the budget falls).
Either way the token view strikes through what the model will not see, and what it does see reads
in order, unstruck.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..assembly.truncate import SLOT_SEQ
from ..errors import BudgetSettingError
from ..intake.responses import is_responses
from ..segments import MESSAGE_KINDS, Segment, originals
from ..truncation import NO_TRUNCATION, POLICIES, STRATEGIES, TruncationPolicy, plan

if TYPE_CHECKING:
    from ..assembly.result import AssemblyResult
    from ..tokenizers.base import Tokenizer
    from .document import SessionDocument

NONE = NO_TRUNCATION                           # no truncation: an over-budget prompt is shown as it is
POLICY_LABELS = {"sliding": "sliding", "chunked": "chunked", "summary-slot": "summary-slot",
                 NONE: "none: show all"}
MAX_WINDOW = 100_000_000                       # past this, a typo (no model reads that many tokens)
_NUMBER = re.compile(r"[+-]?\d[\d_,]*")
# A segment's flag in a layout: "" (sent), SUMMARY (sent: the message the summary-slot policy puts in
# place of those it drops, in no request), DROPPED (a message truncation leaves out: not sent), OVER
# (past the input budget: would not fit). STRUCK: the flags of what the model does not see.
SUMMARY, DROPPED, OVER = "summary", "dropped", "over"
STRUCK = frozenset((DROPPED, OVER))


def truncation_policy(name: str) -> TruncationPolicy:
    if name == NONE:
        return TruncationPolicy(enabled=False)
    if name not in STRATEGIES:
        raise BudgetSettingError("policy", f"unknown truncation policy {name!r}",
                                 hint=f"use one of {', '.join(POLICIES)}")
    return TruncationPolicy(strategy=name)  # type: ignore[arg-type]


def parse_tokens(text: str | int | None, control: str, what: str, minimum: int) -> int | None:
    """A count of tokens typed in a box: None when blank (the session's or template's own value)."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise BudgetSettingError(control, f"{what}: a whole number of tokens, got {text!r}")
    s = str(text).strip()
    if isinstance(text, str) and not _NUMBER.fullmatch(s):
        raise BudgetSettingError(control, f"{what}: a whole number of tokens, got {s!r}",
                                 hint="digits only, e.g. 8192 (blank: the session's own value)")
    n = int(s.replace(",", "").replace("_", ""))
    if n < minimum:
        raise BudgetSettingError(control, f"{what} must be {'positive' if minimum else 'zero or more'}, got {n}",
                                 hint=f"a number of tokens >= {minimum}")
    if n > MAX_WINDOW:
        raise BudgetSettingError(control, f"{what}: {n:,} tokens is more than any model reads",
                                 hint=f"at most {MAX_WINDOW:,}")
    return n


# --------------------------------------------------------------------------- the document's fields
def reserve_key(req: dict[str, Any]) -> str:
    if req.get("format") == "responses" or (req.get("format") is None and is_responses(req)):
        return "max_output_tokens"
    return "max_completion_tokens" if req.get("max_completion_tokens") is not None else "max_tokens"


def explicit_reserve(doc: "SessionDocument", turn: int) -> int | None:
    req = doc.data["requests"][turn - 1] if doc.is_log else doc.data   # (not doc.request: no copy per keystroke)
    v = req.get(reserve_key(req)) if isinstance(req, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def explicit_window(doc: "SessionDocument") -> int | None:
    v = doc.data.get("context_window")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def write_window(doc: "SessionDocument", value: int | None) -> None:
    # The top-level object is replaced key by key: a snapshot (a dict copy) already taken is untouched.
    if value is None:
        doc.data.pop("context_window", None)
    else:
        doc.data["context_window"] = value
    doc.dirty = True


def write_reserve(doc: "SessionDocument", value: int | None) -> None:
    """`max_tokens` in every request the document sends (one object for a conversation, each request
    of a log), copied on write."""
    def edited(req: dict[str, Any]) -> dict[str, Any]:
        key = reserve_key(req)
        out = {k: v for k, v in req.items() if k != key}
        if value is not None:
            out[key] = value
        return out

    if doc.is_log:
        doc.data["requests"] = [edited(r) for r in doc.data["requests"]]
    else:
        new = edited(doc.data)
        doc.data.clear()
        doc.data.update(new)
    doc.dirty = True


@dataclass(frozen=True)
class BudgetSettings:
    """What the controls show: each value and where it came from."""
    context_window: int
    window_source: str             # "session file" | "template qwen2.5" | "default"
    window_explicit: int | None    # the session file's own value (the box's text), None: blank
    reserve: int
    reserve_source: str
    reserve_explicit: int | None
    policy: str

    def to_json(self) -> dict[str, Any]:
        return {"context_window": self.context_window, "window_source": self.window_source,
                "reserve": self.reserve, "reserve_source": self.reserve_source, "policy": self.policy}


def window_source(doc: "SessionDocument", template: Any, model: Any = None) -> str:
    if explicit_window(doc) is not None:
        return "session file"
    if model is not None:
        return f"model {model.id}"
    return f"template {template.name}" if template.context_window else "default"


def reserve_label(source: str) -> str:
    return {"request max_tokens": "session file (max_tokens)", "assembler": "session file (max_tokens)"}.get(
        source, source)


# --------------------------------------------------------------------------- the over-budget view
@dataclass(frozen=True)
class Overflow:
    """A layout of what the token view shows, with what the model will not see flagged per segment
    (see the module's doc: `interleave` or `mark`)."""
    full: "AssemblyResult"          # every message, nothing dropped
    segments: tuple[Segment, ...]   # the layout's segments, in view order
    flags: tuple[str, ...]          # per segment: "" or "summary" (seen), "dropped", "over"
    policy: str
    input_budget: int
    refused: str = ""               # why the policy could not fit it ("" when it could, or none was asked)

    @property
    def over(self) -> int:
        """Tokens past the input budget (struck through at the end of what is kept)."""
        return self._tokens(OVER)

    @property
    def dropped_tokens(self) -> int:
        return self._tokens(DROPPED)

    @property
    def summary_tokens(self) -> int:
        """The summary slot's message: sent, in place of the dropped ones (0 when there is none)."""
        return self._tokens(SUMMARY)

    def _tokens(self, flag: str) -> int:
        return sum(s.token_count for s, f in zip(self.segments, self.flags) if f == flag)

    @property
    def dropped_seqs(self) -> frozenset[int]:
        return frozenset(s.seq for s, f in zip(self.segments, self.flags) if f == DROPPED and s.seq is not None)

    def ids(self, *flags: str) -> np.ndarray:
        parts = [np.asarray(s.token_ids, dtype=np.uint32) for s, f in zip(self.segments, self.flags) if f in flags]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint32)

    def kept_ids(self) -> np.ndarray:
        """The prompt the policy keeps, in view order (over the budget or not): what is sent."""
        return self.ids("", SUMMARY, OVER)

    def seen_ids(self) -> np.ndarray:
        """What fits: the kept part up to the input budget."""
        return self.ids("", SUMMARY)

    def note(self) -> str:
        """The token view's header line."""
        parts = []
        if self.over:
            parts.append(f"{self.over:,} tokens over the window: the struck-through part would not fit "
                         f"(input budget {self.input_budget:,})")
        n = len(self.dropped_seqs)
        if n:
            parts.append(f"{self.policy} truncation drops {n} message(s), {self.dropped_tokens:,} tokens: "
                         f"struck through, the model does not see them")
        if self.summary_tokens:
            parts.append(f"a summary message of {self.summary_tokens:,} tokens, inserted by the truncation "
                         f"policy, is sent in their place")
        if self.refused:
            parts.append(self.refused)
        return " · ".join(parts)

    def header(self) -> dict[str, Any]:
        return {"note": self.note(), "over": self.over, "dropped": len(self.dropped_seqs),
                "dropped_tokens": self.dropped_tokens, "summary_tokens": self.summary_tokens}


def interleave(kept: "AssemblyResult", full: "AssemblyResult", *, policy: str) -> Overflow:
    """The prompt sent, `kept` (its own segments and offsets; the summary slot's message, seq
    SLOT_SEQ, flagged "summary"), with the segments of each message it dropped, taken from `full`
    (the same request untruncated), flagged "dropped" at its place: before the first kept segment
    of a later message, and before the summary slot that stands for them. The unflagged and
    "summary" segments, in order, are exactly `kept`'s."""
    gone = frozenset(d.seq for d in kept.dropped)
    drops = [s for s in originals(full.segments) if s.kind in MESSAGE_KINDS and s.seq in gone]
    drop_seqs = [s.seq or 0 for s in drops]     # (each is a message's: in `gone`, never None)
    own = originals(kept.segments)
    # Each kept segment's place among the request's messages: its own seq; the slot's, that of the
    # first message kept after it (the dropped ones before it go first). None: not a message's.
    anchor: list[int | None] = [None] * len(own)
    after: int | None = None
    for i in range(len(own) - 1, -1, -1):
        seq = own[i].seq
        if seq == SLOT_SEQ:
            anchor[i] = after if after is not None else SLOT_SEQ    # (no message after: all go before it)
        elif seq is not None:
            anchor[i] = after = seq
    segs: list[Segment] = []
    flags: list[str] = []
    d = 0
    for s, at in zip(own, anchor):
        while at is not None and d < len(drops) and (at == SLOT_SEQ or drop_seqs[d] < at):
            segs.append(drops[d])
            flags.append(DROPPED)
            d += 1
        segs.append(s)
        flags.append(SUMMARY if s.seq == SLOT_SEQ else "")
    # None kept after them (the policy always keeps the last user message, so not expected): before
    # the trailing segments of no message (the generation prompt).
    end = len(segs)
    while end > 0 and segs[end - 1].seq is None:
        end -= 1
    segs[end:end] = drops[d:]
    flags[end:end] = [DROPPED] * (len(drops) - d)
    return Overflow(full, tuple(segs), tuple(flags), policy, kept.budget.input_budget)


def mark(full: "AssemblyResult", tokenizer: "Tokenizer", *, dropped: Sequence[int], input_budget: int,
         policy: str, count_over: bool, refused: str = "") -> Overflow | None:
    """`full` laid out with the messages `dropped` flagged and, with `count_over`, the kept tokens
    past `input_budget` flagged "over". None when nothing is struck."""
    gone = frozenset(dropped)
    segs: list[Segment] = []
    flags: list[str] = []
    used = 0
    for s in originals(full.segments):
        if s.kind in MESSAGE_KINDS and s.seq in gone:
            segs.append(s)
            flags.append(DROPPED)
            continue
        n = s.token_count
        room = input_budget - used if count_over else n
        used += n
        if room >= n:
            segs.append(s)
            flags.append("")
        elif room <= 0:
            segs.append(s)
            flags.append(OVER)
        else:
            head, tail = split(s, room, tokenizer)
            if head is not None:
                segs.append(head)
                flags.append("")
            segs.append(tail)
            flags.append(OVER)
    if not any(flags):
        return None
    return Overflow(full, tuple(segs), tuple(flags), policy, input_budget, refused)


def split(s: Segment, k: int, tokenizer: "Tokenizer") -> tuple[Segment | None, Segment]:
    """`s` cut after its k-th token, at the nearest token boundary at or before it that falls
    between characters (None, s when there is none: the whole segment is past the budget)."""
    ends = tokenizer.char_boundaries(s.text, s.token_ids)
    if ends is None:
        return None, s
    while k > 0 and ends[k - 1] < 0:
        k -= 1
    if k <= 0:
        return None, s
    c = ends[k - 1]
    ids = np.asarray(s.token_ids)
    head = replace(s, text=s.text[:c], token_ids=ids[:k], end=s.start + k, char_end=s.char_start + c)
    tail = replace(s, text=s.text[c:], token_ids=ids[k:], start=s.start + k, char_start=s.char_start + c)
    return head, tail


def unit_seqs(full: "AssemblyResult", policy: str) -> list[int]:
    """Every message a policy may drop (all of them are, when even that does not fit)."""
    msgs = full.conversation.messages
    p = plan(msgs, truncation_policy(policy if policy != NONE else "sliding"))
    return [msgs[i].sequence for u in p.units for i in u]
