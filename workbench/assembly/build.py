"""The stages of one exact assembly: render, lay out, tokenize, diagnose.

Each is a function of the build context and a conversation; none keeps state. `exact` runs them
all; incremental assembly (incremental.py), the prompt cache (cached.py) and truncation
(truncate.py) call the pieces they need.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from ..cache.keys import prefix_chain
from ..conversation import Conversation, MediaPart
from ..diagnostics import Diagnostic
from ..errors import TemplateError
from ..injection import Guarded, guard
from ..rewrites import inspect_render
from ..segments import MESSAGE_KINDS, PendingEncode, Segment, Span, layout, moved_diagnostics, tokenize_spans
from ..templates import Rendered, render
from .built import Built
from .context import BuildContext
from .media import place, split_spans, template_media, unrendered


class Rendering(NamedTuple):
    """A tracked render laid out into spans, with what the tokenizer needs to know about it."""

    text: str
    spans: list[Span]
    pending: PendingEncode                 # the encode of `text`, started while it rendered
    escaped: list[tuple[int, int]]         # character spans to encode as plain text
    injection: list[Diagnostic]            # what the fields' special-token strings got
    render_ms: float


def exact(ctx: BuildContext, conv: Conversation, add_generation_prompt: bool, inspect: bool = True) -> Built:
    """One exact assembly (rewrite diagnostics only when `inspect`: a truncation window needs counts)."""
    r = render_spans(ctx, conv, add_generation_prompt)
    t1 = time.perf_counter()
    diags = list(r.injection)
    chain = None
    if inspect:
        # Python work that needs no token ids runs now, while the encode finishes on other threads:
        # the rewrite diagnostics, and the messages' fingerprints the result's key is made of.
        diags += inspect_render(r.text, conv.messages, r.spans, ctx.template.source)
        chain = tuple(prefix_chain(conv.messages))
    segments, ids, moved = tokenize_spans(r.text, r.spans, ctx.tokenizer, r.escaped,
                                          None if r.escaped else r.pending)
    diags += moved_diagnostics(moved)
    return Built(conv, r.text, segments, ids, tuple(diags), tuple(r.escaped), r.render_ms,
                 (time.perf_counter() - t1) * 1e3, spans=tuple(r.spans), inspected=inspect,
                 gen=add_generation_prompt, chain=chain)


def render_spans(ctx: BuildContext, conv: Conversation, add_generation_prompt: bool) -> Rendering:
    """Render (tracked), start encoding the output as it comes, and lay it out into spans.

    The fields are checked while the encode of the first render runs on other threads (the common
    case finds nothing, and the check costs no time on the path to the ids). When some field's text
    is to be escaped, the template renders again, given placeholders for it."""
    t0 = time.perf_counter()
    pending = PendingEncode(ctx.tokenizer)
    r, gen_start = _render_once(ctx, conv, add_generation_prompt, None, pending.feed)
    g = fields_guard(ctx, conv)
    escaped: list[tuple[int, int]] = []
    if g is not None and g.escapes:
        pending = PendingEncode(ctx.tokenizer)   # the first output is not the prompt: never read
        r, gen_start = _render_once(ctx, conv, add_generation_prompt, g, None)
        if gen_start is not None:
            r.gen_reads.append(gen_start)   # moved with the other positions
        r, escaped = g.restore(r)
        if gen_start is not None:
            gen_start = r.gen_reads.pop()
    if add_generation_prompt and ctx.shipped:
        last_start = max(r.starts.values(), default=0)
        if r.gen_reads and last_start <= r.gen_reads[-1] < len(r.text):
            gen_start = r.gen_reads[-1]
    diags = list(g.diagnostics) if g is not None else []
    images: list[tuple[int, int, MediaPart]] = []
    if conv.media:
        if ctx.vision is None:
            diags += unrendered(conv, ctx.template.name)
        else:
            # The processor's part: each placeholder becomes that image's tokens (assembly/media.py).
            r, escaped, gen_start, images = place(ctx.vision, conv, r, escaped, gen_start, ctx.template.name,
                                                  ctx.render_limits.max_output_chars)
            if images:
                pending = PendingEncode(ctx.tokenizer)   # what was fed is the text before placing
                pending.feed(r.text)
    pending.finish(r.text)
    spans = layout(r.text, conv.messages, r.starts, gen_start=gen_start, tools_start=r.tools_start,
                   bos_token=ctx.bos_token)
    spans = split_spans(spans, images)
    return Rendering(r.text, spans, pending, escaped, diags, (time.perf_counter() - t0) * 1e3)


def fields_guard(ctx: BuildContext, conv: Conversation) -> Guarded | None:
    """Special-token strings in the fields of `conv`, by source policy (raises where it is "reject")."""
    return guard(conv, ctx.tokenizer, ctx.injection, ctx.avoid, media=template_media(ctx.vision))


def _inputs(ctx: BuildContext, conv: Conversation, g: Guarded | None
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """What the template is given: messages (media parts as parts where the template places them)
    and tools, escaped strings as placeholders."""
    if g is not None:
        return g.messages, g.tools
    return conv.to_template_messages(template_media(ctx.vision)), conv.tool_schemas() or None


def _render_once(ctx: BuildContext, conv: Conversation, add_generation_prompt: bool, g: Guarded | None,
                 sink: Callable[[str], None] | None) -> tuple[Rendered, int | None]:
    """One tracked render (of the placeholders' inputs when `g` is given), and where the generation
    prompt starts when a second render is needed to know it (before any restore)."""
    t = ctx.template
    tmsgs, tools = _inputs(ctx, conv, g)
    limits, kw, now = ctx.render_limits, dict(ctx.kwargs), ctx.instant
    with _unmasked(g):
        r = render(t.source, t.name, tmsgs, tools=tools, add_generation_prompt=add_generation_prompt, kwargs=kw,
                   track=True, track_generation=ctx.shipped, limits=limits, sink=sink, now=now)
        gen_start = None
        if add_generation_prompt and not ctx.shipped and "add_generation_prompt" in t.source:
            # The generation prompt is what the render adds when asked for it.
            plain = render(t.source, t.name, tmsgs, tools=tools, add_generation_prompt=False, kwargs=kw,
                           limits=limits, now=now).text
            if r.text.startswith(plain) and len(plain) < len(r.text):
                gen_start = len(plain)
    return r, gen_start


def render_text(ctx: BuildContext, conv: Conversation, add_generation_prompt: bool) -> str:
    """The template's text for `conv` (untracked, escaped strings restored), no tokens."""
    t = ctx.template
    g = fields_guard(ctx, conv)
    tmsgs, tools = _inputs(ctx, conv, g)
    with _unmasked(g):
        r = render(t.source, t.name, tmsgs, tools=tools, add_generation_prompt=add_generation_prompt,
                   kwargs=dict(ctx.kwargs), limits=ctx.render_limits, now=ctx.instant)
    return g.restore(r)[0].text if g is not None else r.text


def splice(ctx: BuildContext, base: Built, conv: Conversation, add_generation_prompt: bool,
           anchors: Sequence[Conversation] = ()) -> Built | None:
    """`base` without the segments of messages `conv` no longer has, if that is provably exact.

    Exact when a plain render of `conv` is the spliced text (the template renders the kept messages
    the same without the dropped ones) and every cut starts at a special token (encoding is split
    at special tokens, so the ids on either side cannot change). An anchor, when given, is the start
    of `conv` (its head and two turns): its render standing as the start of the spliced text, on a
    segment boundary, is taken for the whole render, as incremental assembly's probe does (the rest
    of the text is the base's, rendered in full before). `anchors` are tried in order.
    """
    if base.escaped or not ctx.tokenizer.specials:
        return None
    t0 = time.perf_counter()
    kept = _kept_segments(ctx, base.segments, {m.sequence for m in conv.messages})
    if kept is None:
        return None
    g = fields_guard(ctx, conv)
    if g is not None and g.escapes:
        return None
    text = "".join(s.text for s in kept)
    same = any(_starts_with(render_text(ctx, a, False), text, kept) for a in anchors)
    if not same and render_text(ctx, conv, add_generation_prompt) != text:
        return None
    t1 = time.perf_counter()
    out = _retiled(kept)
    ids = np.concatenate([s.token_ids for s in kept]).astype(np.uint32, copy=False) if kept else \
        np.zeros(0, dtype=np.uint32)
    ids.flags.writeable = False
    # A system message that now comes first is the system block, as a render lays it out (a system
    # message of the history, once everything before it is dropped).
    lead = conv.messages[0].sequence if conv.messages and conv.messages[0].role == "system" else None
    out = [Segment("system" if s.seq == lead and s.kind == "message" else s.kind, s.role, s.seq, s.text,
                   ids[s.start:s.end], s.start, s.end, s.char_start, s.char_end, media=s.media) for s in out]
    spans = tuple(Span(s.kind, s.role, s.seq, s.char_start, s.char_end, s.media) for s in out)
    diags = tuple(g.diagnostics) if g is not None else ()
    return Built(conv, text, out, ids, diags, (), (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3,
                 spans=spans, spliced=True, gen=add_generation_prompt)


def _starts_with(head: str, text: str, segs: Sequence[Segment]) -> bool:
    """`text` starts with `head`, which ends where one of `segs` (the pieces of `text`) ends."""
    if not text.startswith(head):
        return False
    pos = 0
    for s in segs:
        pos += len(s.text)
        if pos >= len(head):
            return pos == len(head)
    return False


def _kept_segments(ctx: BuildContext, segs: Sequence[Segment], keep: set[int]) -> list[Segment] | None:
    """The segments of the kept messages, or None unless every cut lands on a whole special token
    and something is dropped."""
    kept: list[Segment] = []
    prev_dropped = False
    for s in segs:
        gone = s.seq is not None and s.kind in MESSAGE_KINDS and s.seq not in keep
        if gone != prev_dropped:
            # A cut: the segment on the far side must begin with a special token, whole.
            lead = ctx.special_of_id.get(int(s.token_ids[0])) if s.token_count else None
            if lead is None or not s.text.startswith(lead):
                return None
        prev_dropped = gone
        if not gone:
            kept.append(s)
    if prev_dropped or len(kept) == len(segs):
        return None
    return kept


def _retiled(kept: list[Segment]) -> list[Segment]:
    """The kept segments with their token and character offsets counted from 0 again."""
    out: list[Segment] = []
    tpos = cpos = 0
    for s in kept:
        n, c = s.token_count, len(s.text)
        out.append(Segment(s.kind, s.role, s.seq, s.text, s.token_ids, tpos, tpos + n, cpos, cpos + c, media=s.media))
        tpos, cpos = tpos + n, cpos + c
    return out


@contextmanager
def _unmasked(g: Guarded | None) -> Iterator[None]:
    """Errors raised while rendering quote fields as the user wrote them, not their placeholders."""
    try:
        yield
    except TemplateError as exc:
        if g is None or not g.escapes:
            raise
        clear = copy.copy(exc)
        clear.message, clear.hint = g.unmask(exc.message), exc.hint and g.unmask(exc.hint)
        clear.args = tuple(g.unmask(a) if isinstance(a, str) else a for a in exc.args)
        raise clear from None


__all__ = ["Rendering", "exact", "fields_guard", "render_spans", "render_text", "splice"]
