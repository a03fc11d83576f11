"""The prefix-stable projection: each turn's prompt is what the engine holds, then the new messages.

A serving engine with prefix caching holds, after turn k−1, that turn's prompt followed by the
reply exactly as the model generated it (up to and including its end-of-turn token). Many chat
templates render the next request differently from that (earlier reasoning stripped, the system
prompt moved to the last user message, a prefilled `<think>` the next turn writes otherwise), so the
engine recomputes from the first difference on. The projection renders each turn as

    prompt(k) = prompt(k−1) ids + the reply's ids as generated + the bridge ids

where the bridge is the template's own text for the new messages: the template's rendering of the
whole conversation `k`, from right after the reply's end-of-turn token to the end (generation prompt
included). So what the engine held is always an exact prefix of the next prompt (the append-only log
and pure projection of SPEC 3.2), and the new messages read as the template writes them. The price:
the model sees a history shaped differently from its training format wherever the template would
have rewritten it; each turn says where (`Departure`) in a plain sentence. Both renderings are kept.

API (no UI imports; the one-click fix "choose the projection" calls it):

    from workbench.analysis.projection import project, Projection
    turns = project(asm, requests)        # one ProjectedTurn per request, in order
    t = turns[k]
    t.result                              # AssemblyResult of the projection: token_ids (np.uint32), text, segments
    t.template                            # AssemblyResult of the template's own rendering of that request
    t.origins                             # per segment of t.result: "held" | "reply" | "new"
    t.held_tokens                         # what the engine held after the previous turn (an exact prefix)
    t.template_reused                     # how much of that the template's own rendering reuses
    t.departure                           # None, or where and how the projection differs from the template
    t.restart                             # None, or why this turn is the template's rendering (an edited log)

    p = Projection(asm)                   # step by step, as a Session: p.assemble(request) -> AssemblyResult

A turn restarts from the template's own rendering when the request is not an append-only extension
of the previous one (an edited, reordered or truncated history, changed tools, no assistant reply in
between): no rendering can keep a prefix the log itself broke.

Segments of a projected result keep the kinds the UI colours by (system, tools, message, generation
prompt); the previous turn's generation prompt becomes part of the reply's message. The result's
build context and cache key are marked as the projection's, so an incremental Session never extends
a projected result as if it were the template's rendering, and the prompt cache never stores one.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..assembly import Assembler
from ..assembly.build import Rendering, render_spans
from ..assembly.incremental import rendered_after, system_indices
from ..assembly.result import AssemblyResult, LazyIds, LazyText, ids_array, text_slice
from ..budget import PARTS, Budget, Window, part_of
from ..cache.keys import message_fingerprint, prompt_key
from ..conversation import Conversation, Message
from ..difference import first_difference
from ..segments import Segment, SegmentList, Span, originals, tokenize_spans
from .prefix import _END_TOKENS, _REPLY_SEQ, _same_messages, ids_slice, shared_prefix

HELD, REPLY, NEW = "held", "reply", "new"
# How templates open a reasoning block: one kept in the projection and gone from the template's rendering
# is reasoning the template strips from earlier turns.
_REASONING_TAGS = ("<think>", "</think>", "<|channel|>analysis", "<seed:think>", "<|channel>thought", "[THINK]")


@dataclass(frozen=True, slots=True)
class Departure:
    """Where the projection first differs from the template's own rendering of the same request."""

    token: int               # the first token index that differs
    seq: int | None          # the message it falls in (as the template renders it)
    role: str | None
    note: str                # a plain sentence: what the model sees that its template would not show

    def to_json(self) -> dict[str, Any]:
        return {"token": self.token, "seq": self.seq, "role": self.role, "note": self.note}


@dataclass(frozen=True, slots=True, eq=False)
class ProjectedTurn:
    turn: int                        # from 1
    result: AssemblyResult           # the projection
    template: AssemblyResult         # the template's own rendering of the whole conversation
    origins: tuple[str, ...]         # per segment of `result`: held | reply | new
    held_tokens: int                 # what the engine held after the previous turn (0 on turn 1)
    reused_tokens: int               # how much of that this projection reuses (all of it, unless it restarts)
    template_reused: int             # how much of what the engine held the template's rendering reuses
    departure: Departure | None      # None when the projection equals the template's rendering
    restart: str | None = None       # why this turn is the template's rendering, not an extension
    # Indices of segments that were a generation prompt when they were sent (carried forward).
    openings: frozenset[int] = frozenset()

    @property
    def token_ids(self) -> NDArray[np.uint32]:
        return self.result.token_ids

    @property
    def text(self) -> str:
        return self.result.text

    @property
    def repaired(self) -> bool:
        """The template's own rendering would have lost part of what the engine held; the projection keeps it."""
        return self.restart is None and self.template_reused < self.held_tokens

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "tokens": self.result.total_tokens, "held_tokens": self.held_tokens,
                "reused_tokens": self.reused_tokens,
                "template_tokens": self.template.total_tokens, "template_reused": self.template_reused,
                "departure": self.departure.to_json() if self.departure else None, "restart": self.restart,
                "held_segments": sum(o != NEW for o in self.origins)}


class Projection:
    """The projection of one conversation, request by request (as `Assembler.session()` assembles them).
    `keep`: hold every turn in `turns` (False: only the last, for a caller that takes each turn as
    it comes and lets it go)."""

    def __init__(self, asm: Assembler, keep: bool = True):
        self.asm = asm
        self._session = asm.session(keep=2)
        self.keep = keep
        self.turns: list[ProjectedTurn] = []
        self.count = 0
        # The previous turn's template rendering and what the engine held after it (its reply added).
        self._last: tuple[AssemblyResult, ProjectedTurn] | None = None
        self._tally: _Tally | None = None     # the budget's sums over the last projected prompt's segments

    def assemble(self, request: Any) -> AssemblyResult:
        return self.add(request).result

    def add(self, request: Any) -> ProjectedTurn:
        tmpl = self._session.assemble(request)
        k = self.count + 1
        if self._last is None:
            turn, self._tally = ProjectedTurn(k, tmpl, tmpl, (NEW,) * len(tmpl.segments), 0, 0, 0, None), None
        else:
            turn, self._tally = _next_turn(self.asm, k, self._last[0], self._last[1], tmpl, self._tally)
        if self.keep:
            self.turns.append(turn)
        self.count = k
        self._last = (tmpl, turn)
        return turn


def project(asm: Assembler, requests: Iterable[Any]) -> list[ProjectedTurn]:
    """The projection of a session's requests (each request: every message so far, as a client sends it)."""
    return list(iter_project(asm, requests))


def iter_project(asm: Assembler, requests: Iterable[Any]) -> Iterator[ProjectedTurn]:
    """`project`, one turn at a time: a caller that keeps only what it reports of each turn holds
    the session's last turn, not all of them."""
    p = Projection(asm, keep=False)
    for r in requests:
        yield p.add(r)


# ----------------------------------------------------------------------------------------------- one turn
def _next_turn(asm: Assembler, k: int, prev_tmpl: AssemblyResult, prev: ProjectedTurn, tmpl: AssemblyResult,
               tally: "_Tally | None" = None) -> "tuple[ProjectedTurn, _Tally | None]":
    """Turn k from the previous one. Each step reads what this turn added (the reply, the bridge, the
    template's new tail), not the history: the previous prompts' ids and text are extended without
    being copied, and what two prompts share by construction is not compared again. `tally`: the
    budget's sums over the previous projected prompt (None: counted here)."""
    reply = _reply(prev_tmpl.conversation, tmpl.conversation)
    gen_text, gen_escaped = held_reply(asm, prev_tmpl, reply, tmpl) if reply is not None else ("", [])
    gen_ids = asm.tokenizer.encode(gen_text, gen_escaped) if gen_text else np.zeros(0, np.uint32)
    held = prev.result.total_tokens + len(gen_ids)
    template_reused = _reuse_after(prev_tmpl.ids_source, gen_ids, tmpl.ids_source)
    same = _same_messages(prev_tmpl, tmpl)
    why = _not_appended(prev_tmpl, tmpl, reply, same)
    if why is not None:
        # The log itself changed: this turn is the template's rendering, and the next extends it.
        return ProjectedTurn(k, tmpl, tmpl, (NEW,) * len(tmpl.segments), held,
                             _reuse_after(prev.result.ids_source, gen_ids, tmpl.ids_source), template_reused, None,
                             why), None
    assert reply is not None
    b = bridge_start(asm, prev_tmpl, tmpl, reply, gen_text)
    result, origins, openings, tally = _build(asm, prev, reply, gen_text, gen_ids, tmpl, b, k, tally)
    dep = _departure(result, origins, openings, tmpl, prev, prev_tmpl, same)
    return ProjectedTurn(k, result, tmpl, origins, held, held, template_reused, dep, None, openings), tally


def _reuse(held: NDArray[np.uint32], new: NDArray[np.uint32]) -> int:
    return min(first_difference(held, new), len(held), len(new))


def _reuse_after(prev: "NDArray[np.uint32] | LazyIds", gen: NDArray[np.uint32],
                 new: "NDArray[np.uint32] | LazyIds") -> int:
    """`_reuse(prev + gen, new)`, comparing only from where `new` was extended from `prev` (the
    session's incremental assembly: the ids before that are the same ones)."""
    n_prev, n_new = len(prev), len(new)
    same = shared_prefix(prev, new)
    old = ids_slice(prev, same, n_prev)
    if len(gen):
        old = np.concatenate([old, gen]).astype(np.uint32, copy=False)
    first = same + first_difference(old, ids_slice(new, same, n_new))
    return min(first, n_prev + len(gen), n_new)


def _reply(prev: Conversation, conv: Conversation) -> Message | None:
    """The assistant message that answered the previous request: the first new message, if it is one."""
    n = len(prev.messages)
    if len(conv.messages) > n and conv.messages[n].role == "assistant":
        return conv.messages[n]
    return None


def _not_appended(prev: AssemblyResult, res: AssemblyResult, reply: Message | None, same: int = 0) -> str | None:
    """Why request k does not extend request k−1 as an append-only log (None when it does). `same`:
    leading messages known equal (their prefix chains agree), which are not fingerprinted again."""
    if res.dropped or prev.dropped:
        return "truncation dropped messages, so the history is not append-only"
    pc, nc = prev.conversation, res.conversation
    if pc.tools != nc.tools:
        return "the tool schemas changed between the two requests"
    n = len(pc.messages)
    if len(nc.messages) < n:
        return "the request has fewer messages than the previous one"
    for a, b in zip(pc.messages[same:], nc.messages[same:n]):
        if a.sequence != b.sequence or message_fingerprint(a) != message_fingerprint(b):
            return f"message seq {b.sequence} differs from the previous request's (an edited log)"
    if reply is None:
        return "no assistant reply between the two requests"
    return None


def held_reply(asm: Assembler, prev: AssemblyResult, reply: Message, tmpl: AssemblyResult | None = None
               ) -> tuple[str, list[tuple[int, int]]]:
    """The text the model generated after the previous prompt, and the character spans in it that
    are escaped text (the reply's own special-token strings that the injection policy encodes as
    plain text).

    As prefix analysis defines it (`prefix._generated`): the template's rendering of the conversation
    with the reply as its last turn, after the previous prompt's body and generation prompt, up to and
    including the first end-of-turn token after the reply's content (prefix analysis stops at the
    first one: for gpt-oss, the end of the analysis channel). Some templates render a last assistant turn as a prefill
    (its opening only, without the content): then, given `tmpl` (the next request's rendering), the
    reply is taken from its rendering there, from where it differs from the generation prompt."""
    conv = prev.conversation
    gen = prev.segments[-1] if prev.segments and prev.segments[-1].kind == "generation_prompt" else None
    gen_text = gen.text if gen else ""
    ctx = asm.context_at()
    found = _reply_after(asm, ctx, prev, reply, gen.char_start if gen else len(prev.text_source), gen_text)
    if found is not None:
        text, escaped = found
    else:
        body = prev.text[: gen.char_start] if gen else prev.text
        r = render_spans(ctx, conv.with_messages(conv.messages + (reply.with_(sequence=-1),)), False)
        text, escaped = _reply_span(asm, r, body, gen_text, reply, -1)
    if gen_text and len(text) > len(gen_text) and text.endswith(gen_text):
        # A template that ends every rendering with the generation prompt (add_generation_prompt or
        # not): the model stops before it, so it is not part of the reply.
        text = text[: len(text) - len(gen_text)]
        escaped = [(s, min(e, len(text))) for s, e in escaped if s < len(text)]
    if tmpl is not None and not shows(reply, text):
        agp = bool(tmpl.segments) and tmpl.segments[-1].kind == "generation_prompt"
        text2, escaped2 = _reply_span(asm, render_spans(ctx, tmpl.conversation, agp), None, gen_text, reply,
                                       reply.sequence)
        if shows(reply, text2):
            return text2, escaped2
    return text, escaped


def _reply_after(asm: Assembler, ctx: Any, prev: AssemblyResult, reply: Message, end: int, gen_text: str
                 ) -> tuple[str, list[tuple[int, int]]] | None:
    """`_reply_span` of the whole render where it starts with the previous body (`end`: the body's
    length), from the incremental probe's render of the last turn and the reply alone (the text
    before is the previous prompt's, checked by the probe): the same positions and the same text,
    at a cost that follows the turn. None where the probe does not apply. The probe refuses escaped
    text, and the previous prompt has none, so the render has no escaped spans."""
    if prev.context != ctx.fingerprint:
        return None
    conv = prev.conversation
    found = rendered_after(ctx, prev, conv.with_messages(conv.messages + (reply.with_(sequence=_REPLY_SEQ),)), False,
                           extends=True)
    if found is None:
        return None
    at0, tail = found
    if end < at0 or not tail.startswith(text_slice(prev.text_source, at0, end)):
        return None       # the render does not start with the body: the reply's own span, in the whole render
    # Positions are the whole render's; the tail holds the render from at0 on.
    start, stop = end, at0 + len(tail)
    part = tail[start - at0:]
    start += len(gen_text) if part.startswith(gen_text) else first_difference(part, gen_text)
    start = min(start, stop)
    end_at = stop
    content = (reply.content or "").strip()[:20]
    at = tail.find(content, start - at0, stop - at0) if content else -1
    frm = at + at0 if at >= 0 else start
    ends = [(i + at0, t) for t in _END_TOKENS if t in asm.tokenizer.specials
            and 0 <= (i := tail.find(t, frm - at0)) and i + at0 < stop]
    if ends:
        i, t = min(ends)
        end_at = i + len(t)
    return tail[start - at0:end_at - at0], []


def shows(reply: Message, text: str) -> bool:
    """Whether `text` holds the reply: the start of its content, else its first tool call's name
    (a reply with neither: always)."""
    content = (reply.content or "").strip()
    if content:
        return content[:20] in text
    return not reply.tool_calls or reply.tool_calls[0].name in text


def _reply_span(asm: Assembler, r: Rendering, body: str | None, gen_text: str, reply: Message, seq: int
                ) -> tuple[str, list[tuple[int, int]]]:
    """The reply's generated part of rendering `r`: after `body` when the rendering starts with it,
    else in message `seq`'s span; past the generation prompt; to the first end-of-turn token."""
    rendered = r.text
    if body is not None and rendered.startswith(body):
        start, stop = len(body), len(rendered)
    else:
        # The template rewrote what came before: take the reply's own span of this rendering.
        span = next((s for s in r.spans if s.seq == seq), None)
        start, stop = (span.start, len(rendered) if seq == -1 else span.end) if span else (len(rendered),) * 2
    part = rendered[start:stop]
    start += len(gen_text) if part.startswith(gen_text) else first_difference(part, gen_text)
    start = min(start, stop)
    end = stop
    # The model stops at the first end-of-turn token after its content: a reply made of several
    # messages (gpt-oss: the analysis channel closed by <|end|>, then the final one) runs on.
    content = (reply.content or "").strip()[:20]
    at = rendered.find(content, start, stop) if content else -1
    frm = at if at >= 0 else start
    ends = [(i, t) for t in _END_TOKENS if t in asm.tokenizer.specials and 0 <= (i := rendered.find(t, frm)) < stop
            and not _inside(i, r.escaped)]
    if ends:
        i, t = min(ends)
        end = i + len(t)
    escaped = [(max(s, start) - start, min(e, end) - start) for s, e in r.escaped if e > start and s < end]
    return rendered[start:end], escaped


def _inside(i: int, spans: Sequence[tuple[int, int]]) -> bool:
    return any(s <= i < e for s, e in spans)


def bridge_start(asm: Assembler, prev: AssemblyResult, tmpl: AssemblyResult, reply: Message, generated: str) -> int:
    """Where the bridge starts in the template's rendering of request k (`tmpl`): right after the
    reply as generated. Where the template keeps the previous prompt and the reply as they were,
    that is their length; otherwise it is found in the reply's own rendering: after its end-of-turn
    token when the generated text ends with one, else after the generated text's last characters
    (32, 16 or 8 of them), else after the reply's last end-of-turn token in the template's text, else
    where the next message starts. Only the reply's rendering and what follows are read: `tmpl`
    extends `prev` (a session), so the text before is compared from where the two may differ."""
    src = tmpl.text_source
    n = len(src)
    p_len = len(prev.text_source)
    held = p_len + len(generated)
    if text_slice(src, p_len, held) == generated and _starts_with(tmpl, prev):
        return held
    first, later = _reply_segments(tmpl, reply.sequence)
    re_ = later.char_start if later is not None else n
    if first is None:
        return next_message_start(asm, tmpl, reply.sequence)
    rs = first.char_start
    own = next((t for t in _END_TOKENS if t in asm.tokenizer.specials and generated.endswith(t)), None)
    # Segment starts are snapped back to token boundaries: the reply's rendering may run a few
    # characters past the next segment's start, so each search may end up to its own length later.
    if own is not None:
        i = _rfind_free(src, own, rs, re_ + len(own), tmpl.escaped)
        if i >= 0:
            return i + len(own)
    # The reply's last characters: the template may write the end of a turn in its history that the
    # reply as the last turn did not have (a closing token after tool calls): the bridge starts with it.
    for k in (32, 16, 8):
        tail = generated[-k:]
        if tail and (i := _rfind(src, tail, rs, re_ + len(tail))) >= 0:
            return i + len(tail)
    # The template's own closing of the reply in its history (gpt-oss writes <|end|> where the model
    # generated <|return|>); by its text, as a tokenizer without these special tokens counts it too.
    best = max(((i, t) for t in _END_TOKENS if (i := _rfind_free(src, t, rs, re_ + len(t), tmpl.escaped)) >= 0),
               default=None)
    return best[0] + len(best[1]) if best is not None else next_message_start(asm, tmpl, reply.sequence)


def _starts_with(tmpl: AssemblyResult, prev: AssemblyResult) -> bool:
    """Whether `tmpl`'s text starts with `prev`'s, comparing from where the session extended it."""
    a, b = prev.text_source, tmpl.text_source
    n = len(a)
    if len(b) < n:
        return False
    same = shared_prefix(a, b)
    return text_slice(a, same, n) == text_slice(b, same, n)


def _reply_segments(tmpl: AssemblyResult, seq: int) -> tuple[Segment | None, Segment | None]:
    """The reply's first message segment in `tmpl`, and the first segment after the reply (a later
    message's, or the generation prompt). A session's extension of the previous prompt reuses only
    segments of earlier messages, before any generation prompt: only its new ones are looked at."""
    segs = tmpl.segments
    orig = originals(segs)
    lo = segs.reused if isinstance(segs, SegmentList) and segs.source == "local" else 0
    first = next((x for x in orig[lo:] if x.seq == seq and x.kind == "message"), None)
    later = next((x for x in orig[lo:] if (x.seq is not None and x.seq > seq) or x.kind == "generation_prompt"),
                 None)
    return first, later


def next_message_start(asm: Assembler, tmpl: AssemblyResult, seq: int) -> int:
    """Where the template's text for the first message after `seq` (or its generation prompt) starts,
    before segment starts are snapped to token boundaries (a render with spans)."""
    agp = bool(tmpl.segments) and tmpl.segments[-1].kind == "generation_prompt"
    spans = render_spans(asm.context_at(), tmpl.conversation, agp).spans
    return next((sp.start for sp in spans if (sp.seq is not None and sp.seq > seq) or sp.kind == "generation_prompt"),
                len(tmpl.text))


def _rfind(text: "str | LazyText", token: str, lo: int, hi: int) -> int:
    """text.rfind(token, lo, hi), reading only text[lo:hi]."""
    i = text_slice(text, lo, min(hi, len(text))).rfind(token)
    return i + lo if i >= 0 else -1


def _rfind_free(text: "str | LazyText", token: str, lo: int, hi: int, escaped: Sequence[tuple[int, int]]) -> int:
    """The last occurrence of `token` in text[lo:hi] that is the template's (not escaped user text)."""
    part = text_slice(text, lo, min(hi, len(text)))
    i = part.rfind(token)
    while i >= 0 and _inside(i + lo, escaped):
        i = part.rfind(token, 0, i)
    return i + lo if i >= 0 else -1


def _build(asm: Assembler, prev: ProjectedTurn, reply: Message, gen_text: str, gen_ids: NDArray[np.uint32],
           tmpl: AssemblyResult, b: int, k: int, tally: "_Tally | None" = None
           ) -> "tuple[AssemblyResult, tuple[str, ...], frozenset[int], _Tally]":
    """The projected result: the previous projection, the reply as generated, the bridge. The text
    and ids extend the previous ones without copying them; the budget's sums are carried in
    `tally` (made here from the previous prompt's segments when None)."""
    pr = prev.result
    len0, n0 = len(pr.text_source), pr.total_tokens
    segs = list(originals(pr.segments))
    if tally is None:
        tally = _Tally.of(segs)
    openings = set(prev.openings)
    # Only the previous turn's own new segments can be a generation prompt (those before it were
    # turned into the reply's opening already).
    for i in range(_new_from(prev.origins), len(segs)):
        s = segs[i]
        if s.kind == "generation_prompt":
            # Sent as the generation prompt; now the opening of the reply the engine holds.
            segs[i] = dataclasses.replace(s, kind="message", role="assistant", seq=reply.sequence, source="fresh")
            tally.drop(s)
            tally.add(segs[i])
            openings.add(i)
    origins = [HELD] * len(segs)
    c1, n1 = len0 + len(gen_text), n0 + len(gen_ids)
    if gen_text:
        segs.append(Segment("message", "assistant", reply.sequence, gen_text, _ro(gen_ids), n0, n1, len0, c1))
        tally.add(segs[-1])
        origins.append(REPLY)
    bridge = text_slice(tmpl.text_source, b, len(tmpl.text_source))
    tsegs = originals(tmpl.segments)
    j = len(tsegs)
    while j and tsegs[j - 1].char_end > b:   # the segments that end after b: a suffix (they tile the text)
        j -= 1
    spans = [Span(s.kind, s.role, s.seq, max(s.char_start, b) - b, s.char_end - b) for s in tsegs[j:]]
    escaped = [(max(s, b) - b, e - b) for s, e in tmpl.escaped if e > b]
    bsegs, bids, _ = tokenize_spans(bridge, spans, asm.tokenizer, escaped) if bridge else ([], np.zeros(0, np.uint32),
                                                                                            [])
    for s in bsegs:
        segs.append(dataclasses.replace(s, start=s.start + n1, end=s.end + n1, char_start=s.char_start + c1,
                                        char_end=s.char_end + c1))
        tally.add(segs[-1])
        origins.append(NEW)
    ids = LazyIds(pr.ids_source, n0, np.concatenate([gen_ids, bids]).astype(np.uint32, copy=False))
    text = LazyText(pr.text_source, len0, gen_text + bridge)
    conv = tmpl.conversation
    context = f"{tmpl.context}/projection"
    key = prompt_key(context, conv.tools, tmpl.prefix_chain + (f"turns:{k}",), bool(bsegs and
                                                                                   bsegs[-1].kind ==
                                                                                   "generation_prompt"))
    budget = tally.budget(asm.window(conv), conv, len(ids))
    result = dataclasses.replace(tmpl, text_source=text, ids_source=ids, segments=tuple(segs), budget=budget,
                                 cache_key=key, context=context, kept=None,
                                 cache_hits={"local": 0, "redis": 0})
    return result, tuple(origins), frozenset(openings), tally


def _new_from(origins: Sequence[str]) -> int:
    """Where the run of new segments at the end of a turn's origins starts."""
    i = len(origins)
    while i and origins[i - 1] == NEW:
        i -= 1
    return i


class _Tally:
    """`budget.measure`'s sums over a projected prompt's segments, kept as segments are added and
    relabelled, so a turn's budget costs its own segments, not the history's. Per kind its segments
    and tokens (a kind is listed where its first segment is, as measure lists it), the parts as
    if no message were the last user message, and the tokens of each message's history segments,
    which move to "last_user" for the one that is."""

    def __init__(self) -> None:
        self.kinds: dict[str, list[int]] = {}
        self.parts = dict.fromkeys(PARTS, 0)
        self.by_seq: dict[int, int] = {}

    @classmethod
    def of(cls, segments: Sequence[Segment]) -> "_Tally":
        t = cls()
        for s in segments:
            t.add(s)
        return t

    def add(self, s: Segment, sign: int = 1) -> None:
        n = (s.end - s.start) * sign
        got = self.kinds.get(s.kind)
        if got is None:
            got = self.kinds[s.kind] = [0, 0]
        got[0] += sign
        got[1] += n
        if not got[0]:
            del self.kinds[s.kind]      # no segment of that kind left: it is listed where the next one comes
        part = part_of(s, None)
        self.parts[part] += n
        if part == "history" and s.seq is not None:
            self.by_seq[s.seq] = self.by_seq.get(s.seq, 0) + n

    def drop(self, s: Segment) -> None:
        self.add(s, -1)

    def budget(self, window: Window, conv: Conversation, used: int) -> Budget:
        """measure(window, conv, segments, used) for the segments counted."""
        last_user = next((m.sequence for m in reversed(conv.messages) if m.role == "user"), None)
        parts = dict(self.parts)
        if last_user is not None:
            moved = self.by_seq.get(last_user, 0)
            parts["history"] -= moved
            parts["last_user"] += moved
        return Budget(context_window=window.context_window, reserve=window.reserve, input_budget=window.input_budget,
                      used=used, by_kind={k: v[1] for k, v in self.kinds.items()}, parts=parts,
                      reserve_source=window.reserve_source, estimated=None, exact_assemblies=1, splices=0)


def _ro(a: NDArray[np.uint32]) -> NDArray[np.uint32]:
    a.flags.writeable = False
    return a


# ------------------------------------------------------------------------------------------- departure
def _departure(result: AssemblyResult, origins: Sequence[str], openings: frozenset[int], tmpl: AssemblyResult,
               prev: ProjectedTurn | None = None, prev_tmpl: AssemblyResult | None = None, same: int = 0
               ) -> Departure | None:
    """Where the projection first differs from the template's rendering. With the previous turn
    (`prev`, its template rendering `prev_tmpl`, and `same`: the messages the two requests share),
    the prompts are compared from where either changed: the projection extends the previous one,
    the template's rendering extends its previous one, and those two agreed up to the previous
    departure."""
    q_len, p_len = result.total_tokens, tmpl.total_tokens
    d = _first_departure(result, tmpl, prev, prev_tmpl)
    if d >= q_len and d >= p_len:
        return None
    qi = _segment_at(result.segments, d)
    ps = tmpl.segments[_segment_at(tmpl.segments, d)] if tmpl.segments else None
    qs = result.segments[qi] if result.segments else None
    seq = ps.seq if ps is not None else None
    role = ps.role if ps is not None else None
    earlier = prev_tmpl.conversation.messages if prev_tmpl is not None else None
    return Departure(d, seq, role, _note(result.conversation, qs, ps, qi in openings, origins[qi] if qs else NEW,
                                         earlier, same))


def _first_departure(result: AssemblyResult, tmpl: AssemblyResult, prev: ProjectedTurn | None,
                     prev_tmpl: AssemblyResult | None) -> int:
    """first_difference of the two prompts' ids."""
    q, p = result.ids_source, tmpl.ids_source
    if prev is None or prev_tmpl is None or prev.template is not prev_tmpl:
        return first_difference(ids_array(q), ids_array(p))
    q_prev = prev.result.total_tokens
    agree = shared_prefix(prev_tmpl.ids_source, p)     # the template's ids repeat its previous ones this far
    d_prev = prev.departure.token if prev.departure is not None else None
    if d_prev is not None and d_prev < agree and d_prev < q_prev:
        return d_prev    # both sides still hold the tokens where they first differed
    # The projection repeats its previous prompt, and the template its previous one up to `agree`:
    # they agree up to the previous departure (everywhere, when there was none).
    lim = min(agree, q_prev, d_prev if d_prev is not None else q_prev)
    return lim + first_difference(ids_slice(q, lim, len(q)), ids_slice(p, lim, len(p)))


def _segment_at(segments: Sequence[Segment], d: int) -> int:
    """The index of the segment holding token d, else the last one's (0 without segments)."""
    if not segments:
        return 0
    orig = segments.orig if isinstance(segments, SegmentList) else segments
    i = bisect.bisect_right(orig, d, key=_start) - 1    # segments tile the ids in order
    if i >= 0 and orig[i].start <= d < orig[i].end:
        return i
    for i, s in enumerate(segments):
        if s.start <= d < s.end:
            return i
    return max(len(segments) - 1, 0)


def _start(s: Segment) -> int:
    return s.start


def _message(conv: Conversation, seq: int | None) -> Message | None:
    """The message with sequence number `seq` (the last one, as a dict by sequence keeps it):
    usually at that index, else looked for."""
    if seq is None:
        return None
    msgs = conv.messages
    if 0 <= seq < len(msgs) and msgs[seq].sequence == seq and (seq + 1 == len(msgs) or msgs[seq + 1].sequence != seq):
        return msgs[seq]
    return {m.sequence: m for m in msgs}.get(seq)


def _note(conv: Conversation, qs: Segment | None, ps: Segment | None, opening: bool, origin: str,
          earlier: tuple[Message, ...] | None = None, same: int = 0) -> str:
    """What the model sees in the projection that its template's rendering does not show, in words.
    `earlier`, `same`: the previous request's messages and how many this one repeats (where its
    system messages are is then known from the previous one's)."""
    m = _message(conv, qs.seq) if qs is not None else None
    if opening:
        return ("the model sees the generation prompt it was given for an earlier reply (e.g. a prefilled "
                "<think>), where its template renders that turn's opening differently in training format")
    if m is not None and m.role == "assistant" and qs is not None and ps is not None:
        r = (m.reasoning or "").strip()
        if r and r[:40] in qs.text and r[:40] not in ps.text:
            return (f"the model sees earlier reasoning kept (reply seq {m.sequence}), which its template strips "
                    "in training format")
        if any(t in qs.text and t not in ps.text for t in _REASONING_TAGS):
            return (f"the model sees the reasoning block of an earlier reply kept (seq {m.sequence}, empty here), "
                    "which its template strips in training format")
    if qs is not None and ps is not None:
        msgs = conv.messages
        system = next(((msgs[i].content or "").strip()[:40]
                       for i in system_indices(msgs, earlier, same if earlier is not None else 0)
                       if (msgs[i].content or "").strip()), None)
        if system and qs.role != "system" and (system in qs.text) != (system in ps.text):
            return ("the model sees the system prompt where the earlier requests put it; its template moves it "
                    "next to the latest user message")
        if any((n in qs.text) != (n in ps.text) for n in map(_tool_name, conv.tools)):
            return ("the model sees the tool definitions where an earlier request had them; its template places "
                    "them elsewhere once more turns follow")
        closed = next((t for t in _END_TOKENS if t in qs.text and t not in ps.text), None)
        if closed is not None and m is not None and m.role == "assistant":
            return (f"the model sees an earlier reply closed with the token it generated ({closed}), where its "
                    "template closes earlier turns differently in training format")
    if origin == NEW or qs is None:
        return "the model sees the new messages after the earlier turns exactly as it was served them"
    who = f"{m.role} message seq {m.sequence}" if m is not None else "an earlier turn"
    return (f"the model sees {who} as it was rendered when it was the latest turn; its template renders it "
            "differently once more turns follow")


def _tool_name(schema: str) -> str:
    try:
        d = json.loads(schema)
    except ValueError:
        return "\x00"
    f = d.get("function", d) if isinstance(d, dict) else {}
    name = f.get("name") if isinstance(f, dict) else None
    return name if isinstance(name, str) and name else "\x00"


__all__ = ["HELD", "NEW", "REPLY", "Departure", "ProjectedTurn", "Projection", "bridge_start", "held_reply",
           "iter_project", "project"]
