"""Truncation by difference: the next request of a session whose prompt was truncated.

A truncated result keeps what it was fitted from (kept.py): where the kept history starts, and a
witness that dropping fewer units would not fit. The next request keeps that start and extends the
previous prompt (incremental.py): only the changed tail is rendered and tokenized. Then, without
re-tokenizing the window:

- **It fits** and the witness still holds (the kept prompt plus what the newest dropped units
  would add is over the budget): the drops are minimal, as a cold assembly would find them, and
  for a chunked policy the chunk boundary is the same one.
- **It overflows**: whole units leave at the head, counted by the exact tokens of the extended
  prompt, to the minimal fit (sliding) or the next chunk boundary (chunked). The ids are the
  extended prompt's with those segments cut out, proven as truncation's splice is, by a render of
  the system messages and the two turns that open the new window.

Anything else (a change before the kept start, a window of another size, a summary slot whose
text would change, a template that renders messages differently by position) returns None, and
the Assembler truncates cold. Property tests hold the ids, text and dropped messages to a cold
assembly for every shipped template.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from ..budget import Window
from ..conversation import Conversation, Message
from ..diagnostics import warning
from ..truncation import (
    Dropped,
    DroppedList,
    Plan,
    TruncationPolicy,
    chunk_after,
    chunk_spacing,
    dropped_records,
    plan,
    starts_chunk,
    truncation_note,
    unit_estimate,
)
from .build import splice
from .built import Built
from .context import BuildContext
from .incremental import extend, first_change
from .kept import KeptWindow
from .result import AssemblyResult
from .truncate import Fitted

_NO_BUILDS = {"exact_assemblies": 0, "splices": 0}


def refit(ctx: BuildContext, prev: AssemblyResult, conv: Conversation, add_generation_prompt: bool, win: Window,
          policy: TruncationPolicy, ratio: float) -> Fitted | None:
    """The truncated prompt of `conv`, from the session's previous truncated result; None when it
    cannot be proven equal to a cold truncation."""
    w = prev.kept
    if w is None or w.witness is None or policy.cut or w.budget != win.input_budget:
        return None
    msgs = conv.messages
    c = first_change(w.full.messages, msgs)
    if c < w.start or not _tail_stands_alone(msgs, w.start, c):
        return None
    kept = w.kept(conv)
    ext = extend(ctx, prev, kept, add_generation_prompt, kept_window=True)
    if ext is None:
        return None
    history = ext.used - w.slot_tokens          # what the fit measures (the slot has its reserve)
    budget = policy.history_budget(win.input_budget)
    if history <= budget and ext.used <= win.input_budget:
        if history + w.witness <= budget or (policy.chunked and not _on_boundary(w)):
            return None   # fewer drops might fit now (or the boundary was not a chunk's): cold decides
        return _fitted(ext, replace(w, full=conv), win, policy, ratio)
    if w.slot is not None:
        return None       # the slot's text changes with what it stands for: cold renders it
    return _dropped(ctx, ext, w, conv, win, policy, ratio)


def overflowed(ctx: BuildContext, ext: Built, win: Window, policy: TruncationPolicy, ratio: float) -> Fitted | None:
    """A session's first overflow: its untruncated previous prompt, extended to `ext` (over the
    budget), loses whole turns at the head as a refit does. None where a cold truncation decides."""
    if policy.cut or policy.strategy == "summary-slot":
        return None
    msgs = ext.conv.messages
    spacing, learned = 0.0, 0
    if policy.chunked:
        spacing, learned = chunk_spacing(msgs, plan(msgs, policy), policy.history_budget(win.input_budget),
                                         policy.low_water, ctx.tokenizer)
    out = _dropped(ctx, ext, KeptWindow(ext.conv, (), 0, 0, 0, win.input_budget, None, spacing), ext.conv, win,
                   policy, ratio)
    if out is not None and out.window is not None and learned > out.window.units:
        # The spacing was learned from units still kept, which an edit may change: never reused.
        out = replace(out, window=replace(out.window, witness=None))
    return out


def _tail_stands_alone(msgs: tuple[Message, ...], start: int, changed: int) -> bool:
    """The kept part holds the last user message, and every tool result changed since the window
    was fitted answers a call in it (a result answering a dropped call would join their units: not
    where the window started; the unchanged ones were checked when it was)."""
    last_user = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].role == "user"), None)
    if last_user is None or last_user < start:
        return False
    answered = {m.tool_call_id for m in msgs[changed:] if m.role == "tool"}
    if not answered:
        return True
    return answered <= {tc.id for m in msgs[start:] for tc in m.tool_calls}


def _on_boundary(w: KeptWindow) -> bool:
    """The window starts at a chunk boundary (else it was the minimal fit, for want of one)."""
    return starts_chunk(w.before, w.at, w.spacing)


def _dropped(ctx: BuildContext, ext: Built, w: KeptWindow, conv: Conversation, win: Window,
             policy: TruncationPolicy, ratio: float) -> Fitted | None:
    """`ext` over the budget: whole units leave at the head, by its exact counts."""
    kmsgs, nh, budget = ext.conv.messages, len(w.head), win.input_budget
    p = plan(kmsgs, policy)
    if any(u[0] < nh for u in p.units):
        return None   # a head message the plan of the kept part would drop: not the full plan's
    counts = ext.seq_tokens()

    def tokens(u: int) -> int:
        return sum(counts.get(kmsgs[i].sequence, 0) for i in p.units[u])

    j, pred = 0, ext.used
    while j < len(p.units) and pred > budget:
        pred -= tokens(j)
        j += 1
    if pred > budget:
        return None   # the mandatory parts alone are over: the cold path says so, with its parts
    b = j
    chunk = None
    if policy.chunked:
        chunk = chunk_after(lambda u: unit_estimate(kmsgs, p.units[u - w.units]), w.units + len(p.units),
                            w.units + j, w.spacing, start=w.units, at=w.at)
        b = chunk.start - w.units
    if b >= len(p.units):
        return None
    cut = splice(ctx, ext, ext.conv.with_messages(p.kept(kmsgs, b)), ext.gen, _anchor(ext.conv, p, b))
    if cut is None:
        return None
    witness = sum(tokens(u) for u in range(j - 1, b))
    first = p.units[b][0]
    # The head grows by the mandatory messages the dropped turns had between them (a system message
    # in the history): indices in the whole conversation, as a cold truncation records them.
    head = w.head + tuple(w.start + i - nh for i in sorted(p.mandatory) if nh <= i < first)
    window = KeptWindow(conv, head, w.start + first - nh, w.units + b,
                        w.dropped + sum(len(p.units[u]) for u in range(b)), budget, witness, w.spacing,
                        chunk.before if chunk else 0.0, chunk.at if chunk else 0.0)
    return _fitted(cut, window, win, policy, ratio, splices=1)


def _anchor(kept: Conversation, p: Plan, b: int) -> tuple[Conversation, ...]:
    """The head of the window after dropping b units and its first two turns, then the same with the
    next turn's first message; none when those are all it has (the whole render is compared then).
    The second is for templates that end the last message of a render differently (Mistral v7 closes
    an assistant message with `</s>` only when another message follows)."""
    if b + 2 >= len(p.units):
        return ()
    msgs = kept.messages
    end = p.units[b + 2][0]
    return tuple(kept.with_messages(p.kept(msgs[:e], b)) for e in (end, end + 1))


def _fitted(built: Built, w: KeptWindow, win: Window, policy: TruncationPolicy, ratio: float,
            splices: int = 0) -> Fitted:
    msgs = w.full.messages
    dropped = DroppedList(partial(_records, msgs, policy, w.units), w.dropped)
    note = warning("truncated", truncation_note(policy, w.dropped, win.input_budget, win.context_window, win.reserve))
    counts = dict(_NO_BUILDS, splices=splices)
    return Fitted(built, dropped, (built,), counts, None, ratio, (note,), w)


def _records(msgs: tuple[Message, ...], policy: TruncationPolicy, k: int) -> list[Dropped]:
    # The whole conversation's plan, made only when the dropped list is read.
    return dropped_records(msgs, plan(msgs, policy), k)
