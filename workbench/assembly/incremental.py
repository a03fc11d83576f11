"""Incremental assembly: the next request of a session renders and tokenizes only what changed.

The previous result holds the text, ids and segments of a prompt. When the next request starts
with the same messages, everything before the turn that holds the first change is reused and
only the rest is rendered and tokenized (`extend`, taking the build context and that result):

- **Probe** (the fast path): render only the system messages, two turns before that turn (anchors)
  and the tail. The first anchor turn soaks up what templates do to "the first user message"
  (Gemma folds the system prompt into it, Llama 3.1 puts tools there). The second must render
  exactly as it did in the previous prompt, or the probe is not trusted. The tail starts at the
  user message that opens the changed turn, so templates that rewrite the previous turn when a new
  one arrives re-render it: Qwen 3 strips reasoning, Mistral moves the system prompt and tools to the
  last user message. Cost follows the change, not the history.
- **Verified** (any template): render everything, keep the previous ids up to the last segment
  boundary inside the common text prefix, and tokenize only the rest.

Both paths cut only where a segment starts with a special token. Encoding is split at special
tokens, so the reused ids are exactly those a cold assembly would produce. Property tests hold the
incremental ids to a cold assembly for every shipped template.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from ..conversation import Conversation, Message
from ..diagnostics import Diagnostic
from ..difference import first_difference
from ..rewrites import NOT_VERBATIM, inspect_render
from ..segments import Segment, SegmentList, Span, find_message_segment, moved_diagnostics, originals, tokenize_spans
from .build import render_spans
from .built import Built, Tier
from .context import BuildContext
from .result import LazyIds, LazyText, ids_array, text_slice

_ROLE = attrgetter("role")


class Prior(Protocol):
    """What extending reads of an earlier prompt: an AssemblyResult, or a prompt from the cache."""

    @property
    def conversation(self) -> Conversation: ...
    @property
    def text_source(self) -> "str | LazyText": ...
    @property
    def ids_source(self) -> "NDArray[np.uint32] | LazyIds": ...
    @property
    def segments(self) -> Sequence[Segment]: ...
    @property
    def render_diagnostics(self) -> tuple[Diagnostic, ...]: ...
    @property
    def dropped(self) -> Sequence[object]: ...
    @property
    def escaped(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def variables(self) -> tuple[object, ...]: ...


@dataclass(frozen=True)
class _Ask:
    """What one extension is for: the conversation, its generation flag, where it first differs
    from the earlier prompt, and the cache tier that prompt came from (None: a session's own)."""

    conv: Conversation
    add_generation_prompt: bool
    first_change: int
    tier: Tier | None


@dataclass(frozen=True)
class _Tail:
    """The freshly rendered end of the prompt, from the message that opens it."""

    msgs: Sequence[Message]
    text: str
    spans: list[Span]
    injection: list[Diagnostic]     # the injection diagnostics of the render it came from
    render_ms: float


def first_change(a: Sequence[Message], b: Sequence[Message]) -> int:
    """Index of the first message that differs (len of the shorter one if one is a prefix)."""
    return first_difference(tuple(a), tuple(b))


def extend(ctx: BuildContext, prev: Prior, conv: Conversation, add_generation_prompt: bool,
           tier: Tier | None = None, kept_window: bool = False) -> Built | None:
    """The exact assembly of `conv`, reusing `prev` where possible; None when nothing can be reused.
    `tier`: the cache tier `prev` came from (None: a session's own previous result). A truncated
    `prev` is extended only to `conv` holding its drops too (`kept_window`: refit.py built it so)."""
    pc = prev.conversation
    if (prev.dropped and not kept_window) or prev.escaped or pc.tools != conv.tools or not prev.segments \
            or prev.variables:
        return None
    if len(pc.messages) < 2:
        # A lone message owns the whole block before it (layout: the system block of a one-message
        # conversation is that message's); with more messages it may not, so its segments are not reused.
        return None
    c = first_change(pc.messages, conv.messages)
    if c == 0:
        return None
    ask = _Ask(conv, add_generation_prompt, c, tier)
    return _probe(ctx, prev, ask) or _verified(ctx, prev, ask)


def _user_before(msgs: Sequence[Message], i: int, floor: int) -> int | None:
    """The last user message at an index in [floor, i)."""
    for j in range(i - 1, floor - 1, -1):
        if msgs[j].role == "user":
            return j
    return None


def _special_start(ctx: BuildContext, text: str, pos: int) -> bool:
    pat = ctx.tokenizer.special_pattern
    return pat is not None and pat.match(text, pos) is not None


def _anchors(msgs: Sequence[Message], c: int, systems: Sequence[int] | None = None
             ) -> tuple[int, int, int, int] | None:
    """(first non-system message, the two user messages before the changed turn, the user message
    opening it), or None when the change is too close to the start or a system message intervenes.
    `systems`: the indices of msgs' system messages, when known (`system_indices`)."""
    first_ns = next((i for i, m in enumerate(msgs) if m.role != "system"), len(msgs))
    r = _user_before(msgs, min(c, len(msgs) - 1) + 1, first_ns)
    a = _user_before(msgs, r, first_ns) if r is not None else None
    a2 = _user_before(msgs, a, first_ns) if a is not None else None
    if r is None or a is None or a2 is None:
        return None
    if systems is None:
        if "system" in map(_ROLE, msgs[first_ns:r]):
            return None
    elif bisect.bisect_left(systems, first_ns) < bisect.bisect_left(systems, r):
        return None
    return first_ns, a2, a, r


# The system messages' indices of the last few conversations extended (by the identity of their
# messages tuple, which an entry holds), so that each turn finds them from the previous turn's
# and its own new messages instead of looking at every message of the history again.
_SYSTEMS: dict[int, tuple[tuple[Message, ...], tuple[int, ...]]] = {}
_SYSTEMS_KEPT = 8
_SYSTEMS_LOCK = threading.Lock()


def system_indices(msgs: tuple[Message, ...], earlier: tuple[Message, ...] | None = None, same: int = 0
                   ) -> tuple[int, ...]:
    """Indices of the system messages in `msgs`; `earlier`: a conversation whose first `same`
    messages are msgs' (the previous prompt's), whose indices are reused where they are known."""
    with _SYSTEMS_LOCK:
        got = _SYSTEMS.get(id(msgs))
        if got is not None and got[0] is msgs:
            return got[1]
        old = _SYSTEMS.get(id(earlier)) if earlier is not None else None
    if old is not None and old[0] is earlier:
        head = old[1][:bisect.bisect_left(old[1], same)]
        out = head + tuple(i for i in range(same, len(msgs)) if msgs[i].role == "system")
    else:
        out = tuple(i for i, m in enumerate(msgs) if m.role == "system")
    with _SYSTEMS_LOCK:
        if len(_SYSTEMS) >= _SYSTEMS_KEPT:
            del _SYSTEMS[next(iter(_SYSTEMS))]    # the oldest entry (dicts keep insertion order)
        _SYSTEMS[id(msgs)] = (msgs, out)
    return out


def rendered_after(ctx: BuildContext, prev: Prior, conv: Conversation, add_generation_prompt: bool, *,
                   extends: bool = False) -> tuple[int, str] | None:
    """The render of `conv`, which repeats every message of `prev` and adds some, from the user
    message that opens its last turn: (where that message starts in `prev`'s text, the text from
    there), found as the probe finds it; None where the probe is not trusted (render it whole).
    Text only, no tokens: what prefix analysis reads of the reply the model generated. `extends`:
    the caller made `conv`'s messages as `prev`'s and more (they are not compared again: a long
    conversation's every message, on every turn)."""
    pc = prev.conversation
    if prev.escaped or pc.tools != conv.tools or not prev.segments or len(pc.messages) < 2 \
            or (not extends and conv.messages[:len(pc.messages)] != pc.messages):
        return None
    # A segment start moved back to a token boundary is no longer where the render put it: a cut
    # there must start at a special token (never moved) to be the render's.
    moved = frozenset(d.seq for d in prev.render_diagnostics if d.code == "segment_boundary_moved"
                      and d.seq is not None)
    found = _probe_tail(ctx, prev, _Ask(conv, add_generation_prompt, len(pc.messages), None), moved)
    if found is None:
        return None
    i_r, tail = found
    return originals(prev.segments)[i_r].char_start, tail.text


def _probe(ctx: BuildContext, prev: Prior, ask: _Ask) -> Built | None:
    """Render only the system messages, two anchor turns and the tail (see the module docstring)."""
    found = _probe_tail(ctx, prev, ask)
    return _join(ctx, prev, ask, *found) if found is not None else None


def _probe_tail(ctx: BuildContext, prev: Prior, ask: _Ask, moved: frozenset[int] | None = None
                ) -> tuple[int, _Tail] | None:
    """The probe's tail, and the index of the previous segment it replaces from; None when untrusted.
    The tail is tokenized and joined to the previous ids, so its cut must start at a special token;
    for the text alone (`moved`: the messages whose segment start moved to a token boundary) any
    message start will do that did not move."""
    conv = ask.conv
    msgs = conv.messages
    found = _anchors(msgs, ask.first_change, system_indices(msgs, prev.conversation.messages, ask.first_change))
    if found is None:
        return None
    first_ns, a2, a, r = found
    orig = originals(prev.segments)
    i_r = find_message_segment(orig, msgs[r].sequence)
    i_a = find_message_segment(orig, msgs[a].sequence)
    ids = moved is None or msgs[r].sequence in moved or msgs[a].sequence in moved
    if i_r is None or i_a is None or (ids and not _special_start(ctx, orig[i_r].text, 0)):
        return None
    probe = render_spans(ctx, conv.with_messages(msgs[:first_ns] + msgs[a2:]), ask.add_generation_prompt)
    if probe.escaped:
        return None  # text with special-token strings to escape: the cold path handles the spans
    start_of: dict[int, int] = {}
    for sp in probe.spans:
        if sp.kind == "message" and sp.seq is not None and sp.seq not in start_of:
            start_of[sp.seq] = sp.start
    cut_r, cut_a, cut_a2 = (start_of.get(msgs[i].sequence) for i in (r, a, a2))
    if cut_r is None or cut_a is None or cut_a2 is None or (ids and not _special_start(ctx, probe.text, cut_r)):
        return None
    # What the template puts before the messages must not have changed: DeepSeek gathers every
    # system message there, so one added later in the conversation rewrites the head.
    if probe.text[:cut_a2] != text_slice(prev.text_source, 0, cut_a2):
        return None
    # The anchor turn must render exactly as it did in the previous prompt.
    if probe.text[cut_a:cut_r] != text_slice(prev.text_source, orig[i_a].char_start, orig[i_r].char_start):
        return None
    spans = [Span(sp.kind, sp.role, sp.seq, sp.start - cut_r, sp.end - cut_r, sp.media) for sp in probe.spans
             if sp.start >= cut_r]
    return i_r, _Tail(msgs[r:], probe.text[cut_r:], spans, probe.injection, probe.render_ms)


def _verified(ctx: BuildContext, prev: Prior, ask: _Ask) -> Built | None:
    """Render everything; reuse the previous ids up to the last clean boundary in the common prefix."""
    conv = ask.conv
    full = render_spans(ctx, conv, ask.add_generation_prompt)
    if full.escaped:
        return None
    common = first_difference(_text(prev), full.text)
    orig = originals(prev.segments)
    # The last previous segment starting inside the common prefix, at a special token, where the new
    # render also starts a span, and whose message is unchanged.
    new_starts = {sp.start: k for k, sp in enumerate(full.spans)}
    for i in range(len(orig) - 1, 0, -1):
        s = orig[i]
        if s.char_start <= common and s.char_start in new_starts and _special_start(ctx, s.text, 0) \
                and s.kind != "generation_prompt":
            k, c0 = new_starts[s.char_start], s.char_start
            spans = [Span(sp.kind, sp.role, sp.seq, sp.start - c0, sp.end - c0, sp.media) for sp in full.spans[k:]]
            # The tail's messages: from the first one with a segment there to the end, including those
            # the template folded into another message's segment (they have none of their own).
            first = next((sp.seq for sp in full.spans[k:] if sp.seq is not None), None)
            start = next((j for j, m in enumerate(conv.messages) if m.sequence == first), len(conv.messages))
            tail = _Tail(conv.messages[start:], full.text[c0:], spans, full.injection, full.render_ms)
            return _join(ctx, prev, ask, i, tail)
    return None


def _join(ctx: BuildContext, prev: Prior, ask: _Ask, i_cut: int, tail: _Tail) -> Built:
    """The previous prompt up to segment i_cut, then the freshly rendered and tokenized tail."""
    conv = ask.conv
    orig = originals(prev.segments)
    cut = orig[i_cut]
    tail_seqs = {m.sequence for m in tail.msgs}
    # Injection diagnostics of reused messages are already in the previous prompt's.
    diags = [d for d in tail.injection if d.seq is None or d.seq in tail_seqs]
    # Python work that needs no token ids runs before the encode (as in a cold assembly).
    diags += _tail_diagnostics(ctx, prev, i_cut, tail)
    t0 = time.perf_counter()
    fresh, tail_ids, moved = tokenize_spans(tail.text, tail.spans, ctx.tokenizer)
    tokenize_ms = (time.perf_counter() - t0) * 1e3
    diags += moved_diagnostics(moved)
    n0, c0 = cut.start, cut.char_start
    prev_ids = prev.ids_source
    ids = LazyIds(prev_ids, n0, tail_ids) if len(tail_ids) * 8 < n0 else \
        _frozen(np.concatenate([ids_array(prev_ids)[:n0], tail_ids]).astype(np.uint32, copy=False))
    shifted = [Segment(s.kind, s.role, s.seq, s.text, s.token_ids, s.start + n0, s.end + n0, s.char_start + c0,
                       s.char_end + c0, media=s.media) for s in fresh]
    kept = _kept_diagnostics(ctx, prev, conv, i_cut, tail)
    # A message that changed but renders to the same text (Llama trims the whitespace an edit added)
    # keeps its segment, not its old diagnostics: what the template did to it is looked at again.
    first_seq = tail.msgs[0].sequence if tail.msgs else None
    changed = [m for m in conv.messages[ask.first_change:] if first_seq is None or m.sequence < first_seq]
    if changed:
        seqs = {m.sequence for m in changed}
        kept = [d for d in kept if d.seq not in seqs] + \
            [d for d in _inspect_whole(ctx, prev, i_cut, tail, changed) if d.seq is not None]
    text = LazyText(prev.text_source, c0, tail.text) if len(tail.text) * 8 < c0 else _text(prev)[:c0] + tail.text
    segments = SegmentList(orig[:i_cut] + shifted, i_cut, ask.tier or "local")
    return Built(conv, text, segments, ids, tuple(kept + diags), (), tail.render_ms, tokenize_ms, inspected=True,
                 reused=i_cut, gen=ask.add_generation_prompt, first_change=ask.first_change, hit=ask.tier)


def _kept_diagnostics(ctx: BuildContext, prev: Prior, conv: Conversation, i_cut: int, tail: _Tail
                      ) -> list[Diagnostic]:
    """Render diagnostics of the reused messages stay and the tail's are new, except where a
    reused message's text was looked for in the whole prompt (the template placed it elsewhere, as
    Mistral puts the system prompt in the last user message, or rendered it nowhere): the new tail
    may hold it now, so those are looked for again."""
    first_seq = tail.msgs[0].sequence if tail.msgs else None
    kept: list[Diagnostic] = []
    again: set[int] = set()
    for d in prev.render_diagnostics:
        if d.seq is None or first_seq is None or d.seq >= first_seq:
            continue
        kept.append(d)
        if d.code == "template_moved_content" or (d.code == "template_rewrite" and NOT_VERBATIM in d.message):
            again.add(d.seq)
    if not again:
        return kept
    kept = [d for d in kept if d.seq not in again]
    orig = originals(prev.segments)
    msgs = [m for m in conv.messages[:len(conv.messages) - len(tail.msgs)] if m.sequence in again]
    # Rendered nowhere and found in the tail: its last occurrence, where a cold assembly looks, is there.
    near = [m for m in msgs if not _has_region(orig, i_cut, m.sequence) and (m.content or "").strip() in tail.text]
    kept += [d for d in inspect_render(tail.text, near, tail.spans, ctx.template.source) if d.seq is not None]
    far = [m for m in msgs if m not in near]
    if far:
        kept += [d for d in _inspect_whole(ctx, prev, i_cut, tail, far) if d.seq is not None]
    return kept


def _has_region(orig: Sequence[Segment], i_cut: int, seq: int) -> bool:
    """Message `seq` has text of its own among the first i_cut segments (its message segment, or
    the system block it owns)."""
    i = find_message_segment(orig, seq)
    return (i is not None and i < i_cut) or any(s.seq == seq for s in orig[:min(3, i_cut)])


def _tail_diagnostics(ctx: BuildContext, prev: Prior, i_cut: int, tail: _Tail) -> list[Diagnostic]:
    """The rewrite diagnostics of the tail's messages. A message the template rendered nowhere is
    looked for in the whole prompt, as a cold assembly does (its text may stand in a reused part)."""
    src = ctx.template.source
    placed = {sp.seq for sp in tail.spans if sp.seq is not None and sp.end > sp.start}
    lost = [m for m in tail.msgs if m.sequence not in placed and (m.content or "").strip()
            and (m.content or "").strip() not in tail.text]
    if not lost:
        return inspect_render(tail.text, tail.msgs, tail.spans, src)
    found = [m for m in tail.msgs if m not in lost]
    return inspect_render(tail.text, found, tail.spans, src) + \
        [d for d in _inspect_whole(ctx, prev, i_cut, tail, lost) if d.seq is not None]


def _inspect_whole(ctx: BuildContext, prev: Prior, i_cut: int, tail: _Tail, msgs: list[Message]
                   ) -> list[Diagnostic]:
    """Rewrite diagnostics of `msgs` against the whole prompt. Rare, so the head's text is joined
    only here."""
    orig = originals(prev.segments)
    c0 = orig[i_cut].char_start
    whole = text_slice(prev.text_source, 0, c0) + tail.text
    spans = [Span(s.kind, s.role, s.seq, s.char_start, s.char_end, s.media) for s in orig[:i_cut]] + \
        [Span(sp.kind, sp.role, sp.seq, sp.start + c0, sp.end + c0, sp.media) for sp in tail.spans]
    return inspect_render(whole, msgs, spans, ctx.template.source)


def _text(prev: Prior) -> str:
    t = prev.text_source
    return t if isinstance(t, str) else str(t)


def _frozen(a: NDArray[np.uint32]) -> NDArray[np.uint32]:
    a.flags.writeable = False
    return a
