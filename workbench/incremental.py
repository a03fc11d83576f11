"""Incremental assembly: the next request of a session renders and tokenizes only what changed.

The previous result holds the text, ids and segments of a prompt. When the next request starts
with the same messages, everything before the turn that holds the first change is reused and
only the rest is rendered and tokenized:

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

import time
from operator import attrgetter
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ._compare import first_difference
from .built import Built
from .conversation import Conversation, Message
from .diagnostics import Diagnostic
from .result import LazyIds, LazyText, ids_array, text_slice
from .rewrites import inspect_render
from .segments import (Segment, SegmentList, Span, find_message_segment, layout, moved_diagnostics, originals,
                       tokenize_spans)

if TYPE_CHECKING:
    from .assembler import Assembler
    from .context import BuildContext
    from .result import AssemblyResult


_ROLE = attrgetter("role")


def first_change(a: Sequence[Message], b: Sequence[Message]) -> int:
    """Index of the first message that differs (len of the shorter one if one is a prefix)."""
    return first_difference(tuple(a), tuple(b))


def _user_before(msgs: Sequence[Message], i: int, floor: int) -> int | None:
    """The last user message at an index in [floor, i)."""
    for j in range(i - 1, floor - 1, -1):
        if msgs[j].role == "user":
            return j
    return None


def extend(asm: "Assembler", prev: "AssemblyResult", conv: Conversation, add_generation_prompt: bool,
           ctx: "BuildContext") -> "Built | None":
    """The exact assembly of `conv`, reusing `prev` where possible; None when nothing can be reused."""
    pc = prev.conversation
    if prev.dropped or prev.escaped or pc.tools != conv.tools or not prev.segments or prev.variables:
        return None
    if len(pc.messages) < 2:
        # A lone message owns the whole block before it (layout: the system block of a one-message
        # conversation is that message's); with more messages it may not, so its segments are not reused.
        return None
    msgs = conv.messages
    c = first_change(pc.messages, msgs)
    if c == 0:
        return None
    built = _probe(asm, prev, conv, c, add_generation_prompt, ctx) or \
        _verified(asm, prev, conv, add_generation_prompt, ctx)
    if built is not None:
        built.first_change = c  # the key chain is extended from here
    return built


def _is_special_start(asm: "Assembler", text: str, pos: int) -> bool:
    pat = asm.tokenizer.special_pattern
    return pat is not None and pat.match(text, pos) is not None


def _probe(asm: "Assembler", prev: "AssemblyResult", conv: Conversation, c: int,
           add_generation_prompt: bool, ctx: "BuildContext") -> "Built | None":
    msgs = conv.messages
    first_ns = next((i for i, m in enumerate(msgs) if m.role != "system"), len(msgs))
    r = _user_before(msgs, min(c, len(msgs) - 1) + 1, first_ns)  # the user message opening the changed turn
    if r is None:
        return None
    a = _user_before(msgs, r, first_ns)
    a2 = _user_before(msgs, a, first_ns) if a is not None else None
    if a is None or a2 is None or "system" in map(_ROLE, msgs[first_ns:r]):
        return None  # too close to the start (the verified path is cheap there) or a system message between
    orig = originals(prev.segments)
    i_r = find_message_segment(orig, msgs[r].sequence)
    i_a = find_message_segment(orig, msgs[a].sequence)
    if i_r is None or i_a is None:
        return None
    seg_r = orig[i_r]
    if not _is_special_start(asm, seg_r.text, 0):
        return None
    probe = conv.with_messages(msgs[:first_ns] + msgs[a2:])
    text, spans, render_ms, escaped, diags = _render_spans(asm, probe, add_generation_prompt, ctx)
    if escaped:
        return None  # user text with special-token strings: the cold path handles the spans
    start_of = {}
    for sp in spans:
        if sp.kind == "message" and sp.seq is not None and sp.seq not in start_of:
            start_of[sp.seq] = sp.start
    cut_r, cut_a = start_of.get(msgs[r].sequence), start_of.get(msgs[a].sequence)
    if cut_r is None or cut_a is None:
        return None
    # The anchor turn must render exactly as it did in the previous prompt.
    if text[cut_a:cut_r] != text_slice(prev.text_source, orig[i_a].char_start, seg_r.char_start):
        return None
    if not _is_special_start(asm, text, cut_r):
        return None
    tail = text[cut_r:]
    tail_spans = [Span(sp.kind, sp.role, sp.seq, sp.start - cut_r, sp.end - cut_r) for sp in spans
                  if sp.start >= cut_r]
    return _join(asm, prev, conv, orig, i_r, msgs[r:], tail, tail_spans, diags, render_ms)


def _render_spans(asm: "Assembler", conv: Conversation, add_generation_prompt: bool, ctx: "BuildContext"
                  ) -> tuple[str, list[Span], float, list[tuple[int, int]], list[Diagnostic]]:
    """Render `conv` (tracked) and lay it out into spans; with the render time in ms, the escaped
    spans and the injection diagnostics."""
    t0 = time.perf_counter()
    rendered, gen_start, _, escaped, diags = asm._render(conv, add_generation_prompt, ctx)
    render_ms = (time.perf_counter() - t0) * 1e3
    spans = layout(rendered.text, conv.messages, rendered.starts, gen_start=gen_start,
                   tools_start=rendered.tools_start, bos_token=asm._kwargs().get("bos_token") or None)
    return rendered.text, spans, render_ms, escaped, diags


def _verified(asm: "Assembler", prev: "AssemblyResult", conv: Conversation,
              add_generation_prompt: bool, ctx: "BuildContext") -> "Built | None":
    """Render everything; reuse the previous ids up to the last clean boundary in the common prefix."""
    text, spans, render_ms, escaped, diags = _render_spans(asm, conv, add_generation_prompt, ctx)
    if escaped:
        return None
    common = first_difference(prev.text, text)
    orig = originals(prev.segments)
    # The last previous segment starting inside the common prefix, at a special token, where the new
    # render also starts a span, and whose message is unchanged.
    new_starts = {sp.start: k for k, sp in enumerate(spans)}
    for i in range(len(orig) - 1, 0, -1):
        s = orig[i]
        if s.char_start <= common and s.char_start in new_starts and _is_special_start(asm, s.text, 0) \
                and s.kind != "generation_prompt":
            k = new_starts[s.char_start]
            tail_spans = [Span(sp.kind, sp.role, sp.seq, sp.start - s.char_start, sp.end - s.char_start)
                          for sp in spans[k:]]
            # The tail's messages: from the first one with a segment there to the end, including those
            # the template folded into another message's segment (they have none of their own).
            first = next((sp.seq for sp in spans[k:] if sp.seq is not None), None)
            start = next((j for j, m in enumerate(conv.messages) if m.sequence == first), len(conv.messages))
            tail_msgs = list(conv.messages[start:])
            return _join(asm, prev, conv, orig, i, tail_msgs, text[s.char_start:], tail_spans, diags, render_ms)
    return None


def _join(asm: "Assembler", prev: "AssemblyResult", conv: Conversation, orig: list[Segment], i_cut: int,
          tail_msgs: Sequence[Message], tail: str, tail_spans: list[Span], injection: list[Diagnostic],
          render_ms: float = 0.0) -> "Built | None":
    """The previous prompt up to segment i_cut, then the freshly rendered and tokenized tail.
    `injection`: the injection diagnostics of the render the tail came from (those of reused
    messages are already in the previous prompt's)."""
    cut = orig[i_cut]
    tail_seqs = {m.sequence for m in tail_msgs}
    diags = [d for d in injection if d.seq is None or d.seq in tail_seqs]
    # Python work that needs no token ids runs before the encode (as in a cold assembly).
    diags += inspect_render(tail, tail_msgs, tail_spans, asm.template.source)
    t0 = time.perf_counter()
    fresh, tail_ids, moved = tokenize_spans(tail, tail_spans, asm.tokenizer)
    tokenize_ms = (time.perf_counter() - t0) * 1e3
    diags += moved_diagnostics(moved)
    t0, c0 = cut.start, cut.char_start
    prev_ids = getattr(prev, "ids_source", None)
    if prev_ids is None:
        prev_ids = prev.token_ids
    ids = LazyIds(prev_ids, t0, tail_ids) if len(tail_ids) * 8 < t0 else \
        _frozen(np.concatenate([ids_array(prev_ids)[:t0], tail_ids]).astype(np.uint32, copy=False))
    shifted = [Segment(s.kind, s.role, s.seq, s.text, s.token_ids, s.start + t0, s.end + t0, s.char_start + c0,
                       s.char_end + c0) for s in fresh]
    segments = SegmentList(orig[:i_cut] + shifted, i_cut, getattr(prev, "reuse_source", "local"))
    # Render diagnostics of the reused messages stay and the tail's are new, except where the
    # template placed a reused message's text in the tail (Mistral: the system prompt sits in the
    # last user message): those are looked for in the new tail.
    first_seq = tail_msgs[0].sequence if tail_msgs else None
    kept: list[Diagnostic] = []
    placed: set[int] = set()
    for d in prev.render_diagnostics:
        if d.seq is None or first_seq is None or d.seq >= first_seq:
            continue
        if d.code == "template_moved_content":
            placed.add(d.seq)
        else:
            kept.append(d)
    if placed:
        again = [m for m in conv.messages[:len(conv.messages) - len(tail_msgs)] if m.sequence in placed]
        forward = [m for m in again if (m.content or "").strip() in tail]
        kept += [d for d in inspect_render(tail, forward, tail_spans, asm.template.source)
                 if d.seq is not None]
        back = [m for m in again if m not in forward]
        if back:
            # Moved into a reused segment (consecutive messages folded together): look in the whole
            # prompt, as a cold assembly does. Rare, so the head's text is joined only here.
            whole = text_slice(prev.text_source, 0, c0) + tail
            spans = [Span(s.kind, s.role, s.seq, s.char_start, s.char_end) for s in orig[:i_cut]] + \
                [Span(sp.kind, sp.role, sp.seq, sp.start + c0, sp.end + c0) for sp in tail_spans]
            kept += [d for d in inspect_render(whole, back, spans, asm.template.source) if d.seq is not None]
    text = LazyText(prev.text_source, c0, tail) if len(tail) * 8 < c0 else prev.text[:c0] + tail
    built = Built(conv, text, segments, ids, kept + diags, (), render_ms, tokenize_ms)
    built.inspected = True
    built.reused = i_cut
    return built


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
