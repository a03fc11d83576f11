"""Prefix-stability analysis (SPEC 3.2): where each turn's prompt stops reusing the previous one.

A serving engine with prefix caching holds, after turn k−1, that turn's prompt followed by
the reply exactly as the model generated it (its raw content, reasoning included, up to the
end-of-turn token). Turn k can reuse the engine's cache up to the first token where its
prompt differs from what the engine holds. We find that token, the segment and message it
falls in, and why the prompt changed there, with advice.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..assembly import Assembler
from ..assembly.incremental import rendered_after
from ..assembly.result import AssemblyResult, LazyIds, LazyText, ids_array, text_slice
from ..cache.keys import message_fingerprint
from ..conversation import Conversation, Message, canonical_json
from ..difference import first_difference
from ..segments import Segment, SegmentList
from ..truncation import TruncationPolicy
from .provider_terms import provider_diagnostics

# Strings that change on every request: ISO timestamps, clock times, UUIDs, long hex ids, epoch seconds,
# written-out dates.
_VOLATILE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\b"
    r"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b[0-9a-fA-F]{16,}\b"
    r"|\b1[5-9]\d{8}(?:\d{3})?\b"
    r"|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{4}\b"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{1,2},? \d{4}\b")

# The sequence number the reply gets in the probe's render (above any a request can have).
_REPLY_SEQ = 1 << 62

# Special tokens a model emits to end its turn; generation stops right after one of them.
_END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|end|>", "<|return|>", "<|call|>",
               "</s>", "<｜end▁of▁sentence｜>", "<|endoftext|>")

ADVICE = {
    "edited_message": "Keep the conversation log append-only: edit by appending a correction, or accept that "
                      "everything after the edited message is recomputed.",
    "template_rewrite": "This template renders an earlier turn differently once more turns follow (reasoning "
                        "stripped, system prompt moved, a date injected). Keep the reply in the history exactly "
                        "as generated, or choose a template that keeps earlier turns stable.",
    "generation_prompt_mismatch": "The generation prompt this turn ended with is not how the template renders "
                                  "that assistant turn in the next request (for example a prefilled <think>). "
                                  "Make the two agree, or expect the reply to be prefilled again.",
    "volatile_content": "Move timestamps, request ids and dates out of the system prompt and tool schemas into "
                        "the last user message (the suffix), or round them (per day, not per second).",
    "reordered": "Keep messages in the order they happened; project the log to the request with a pure, "
                 "order-preserving function.",
    # The generic word; a cause names the active policy instead (`truncation_advice`).
    "truncated": "Truncation dropped messages the previous prompt had, so the prefix changed at the first "
                 "dropped message. Summarise or drop in larger, rarer steps so most turns stay append-only.",
    "tool_schema_order": "Serialize tool schemas deterministically (the same key order every request, e.g. "
                         "sorted keys) so the tools block is byte-identical across turns.",
    "tools_changed": "The tool schemas changed between turns; everything after the tools block is recomputed. "
                     "Keep the tool set fixed within a session, or put changing tools last.",
    "system_changed": "The system prompt changed between turns; nothing after it can be reused. Keep it fixed "
                      "and put per-request facts in the last user message.",
}


@dataclass(frozen=True, slots=True)
class Cause:
    code: str
    message: str
    advice: str
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "advice": self.advice, "seq": self.seq}


@dataclass(frozen=True, slots=True)
class TurnAnalysis:
    turn: int                         # from 1
    tokens: int
    reused_tokens: int                # tokens of the engine's cache this prompt can reuse
    held_tokens: int                  # what the engine holds after the previous turn (0 on turn 1)
    first_divergence: int | None
    divergence_seq: int | None
    divergence_kind: str | None       # the segment kind the divergence falls in
    causes: tuple[Cause, ...]
    result: AssemblyResult
    # What the engine holds after the previous turn (None on turn 1), read as `held`: kept as the
    # previous prompt's ids and the reply, joined only when read (a long session's turns would
    # otherwise each hold a copy of the whole history).
    held_source: "NDArray[np.uint32] | LazyIds | None" = None
    reply_ids: NDArray[np.uint32] | None = None   # the reply the engine holds past the previous prompt

    @property
    def held(self) -> NDArray[np.uint32] | None:
        """What the engine holds after the previous turn: its prompt, then the reply as generated."""
        return None if self.held_source is None else ids_array(self.held_source)

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "tokens": self.tokens, "reused_tokens": self.reused_tokens,
                "held_tokens": self.held_tokens, "first_divergence": self.first_divergence,
                "divergence_seq": self.divergence_seq, "divergence_kind": self.divergence_kind,
                "causes": [c.to_json() for c in self.causes], "provider_diagnostics": provider_diagnostics(self)}

    def detached(self) -> "AnalysedTurn":
        """The turn's figures without its result and ids (what a report of many turns keeps)."""
        return AnalysedTurn(self.turn, self.tokens, self.reused_tokens, self.held_tokens, self.first_divergence,
                           self.divergence_seq, self.divergence_kind, self.causes, self.to_json())


@dataclass(frozen=True, slots=True)
class AnalysedTurn:
    """A TurnAnalysis let go of its result: its figures, causes and JSON."""
    turn: int
    tokens: int
    reused_tokens: int
    held_tokens: int
    first_divergence: int | None
    divergence_seq: int | None
    divergence_kind: str | None
    causes: tuple[Cause, ...]
    json: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.json)


def analyze(asm: Assembler, requests: Iterable[Any]) -> list[TurnAnalysis]:
    """Assemble each request of a session and compare it with what the engine holds from the previous one."""
    return list(iter_analysis(asm, requests))


def iter_analysis(asm: Assembler, requests: Iterable[Any]) -> Iterator[TurnAnalysis]:
    """`analyze`, one turn at a time. Each request extends the previous one's result (a Session:
    only what changed is rendered and tokenized) and is compared with what the engine holds from
    where the two prompts are known to agree, so a session costs time in proportion to its size,
    not to the sum of its prompts; a caller that keeps only what it reports of each turn keeps
    memory in proportion to the session too."""
    session = asm.session(keep=1)
    prev: tuple[AssemblyResult, Conversation] | None = None
    prev_media = False
    for k, request in enumerate(requests, start=1):
        res = session.assemble(request)
        full = session.prepared
        if full is None:
            full = res.conversation if not res.dropped else asm.prepare(request)[0]
        media = has_media(res, prev[0] if prev is not None else None, prev_media)
        yield analyze_turn(asm, k, res, full, prev, media=(prev_media, media))
        prev, prev_media = (res, full), media


def has_media(res: AssemblyResult, prev: AssemblyResult | None = None, prev_media: bool = True) -> bool:
    """Whether `res`'s conversation holds an image; with the previous result of the session and its
    answer, only the messages after those the two share are looked at."""
    if prev is None or prev_media:
        return bool(res.conversation.media)
    return any(m.media for m in res.conversation.messages[_same_messages(prev, res):] if m.parts)


def analyze_turn(asm: Assembler, k: int, res: AssemblyResult, full: Conversation,
                 previous: tuple[AssemblyResult, Conversation] | None,
                 media: tuple[bool, bool] | None = None) -> TurnAnalysis:
    """Turn k alone: its result and its conversation before truncation (`asm.prepare(request)[0]`),
    against the previous turn's (None on turn 1). The workbench re-analyses only the turn being edited.
    `media`: whether the previous and this result hold images, when the caller knows."""
    if previous is None:
        return TurnAnalysis(k, res.total_tokens, 0, 0, None, None, None, (), res)
    return _compare(asm, k, previous[0], previous[1], res, full, media=media)


def _compare(asm: Assembler, k: int, prev: AssemblyResult, prev_all: Conversation, res: AssemblyResult,
             full: Conversation, generate: Callable[[Assembler, AssemblyResult, Message | None], tuple[str, bool]]
             | None = None, media: tuple[bool, bool] | None = None) -> TurnAnalysis:
    """`generate`: how the reply as generated is found (`_generated`'s contract); by default the
    incremental probe (`generated_pair`), whose cost follows the turn, not the history. `media`:
    whether `prev` and `res` hold images (None: looked at here)."""
    reply = _reply(prev_all, full)
    generated, mismatch = (generate or generated_pair)(asm, prev, reply)
    gen = np.asarray(asm.tokenizer.encode_with_specials(generated), dtype=np.uint32) if generated else None
    n_prev, n_new = prev.total_tokens, res.total_tokens
    held_len = n_prev + (len(gen) if gen is not None else 0)
    held_source: NDArray[np.uint32] | LazyIds
    if any(media) if media is not None else (prev.conversation.media or res.conversation.media):
        # Images compare by content (their placeholder tokens are the same for any image of one size).
        held_source = prev.content_ids() if gen is None else np.concatenate(
            [prev.content_ids(), gen]).astype(np.uint32, copy=False)
        first = first_difference(held_source, res.content_ids())
    else:
        # The two prompts agree up to where this one was extended from the previous one (known
        # without looking); only the rest is compared, the previous prompt's end and reply against
        # this one's new tail.
        same = shared_prefix(prev.ids_source, res.ids_source)
        old = ids_slice(prev.ids_source, same, n_prev)
        if gen is not None:
            old = np.concatenate([old, gen])
        first = same + first_difference(old, ids_slice(res.ids_source, same, n_new))
        held_source = prev.ids_source if gen is None else LazyIds(prev.ids_source, n_prev, gen)
    n = min(held_len, n_new)
    # The first token that differs, or the end of this prompt when the engine holds more than it.
    d = first if first < n or held_len > n_new else None
    reused = n if d is None else d
    seg = segment_at(res.segments, d) if d is not None else None
    causes: list[Cause] = []
    if d is not None:
        causes = _causes(prev, res, d, seg, mismatch, reply, n_prev, asm.config.truncation)
    return TurnAnalysis(k, res.total_tokens, reused, held_len, d, seg.seq if seg else None,
                        seg.kind if seg else None, tuple(causes), res, held_source, gen)


def segment_at(segments: Sequence[Segment], d: int) -> Segment | None:
    """The segment holding token `d`, else the last one (None without segments). Segments tile the
    prompt in order, so bisection finds it; the scan is kept for a list that does not."""
    if not segments:
        return None
    orig = segments.orig if isinstance(segments, SegmentList) else segments
    i = bisect.bisect_right(orig, d, key=_start) - 1
    if i >= 0 and orig[i].start <= d < orig[i].end:
        return segments[i]
    return next((s for s in segments if s.start <= d < s.end), segments[-1])


def _start(s: Segment) -> int:
    return s.start


def shared_prefix(prev: "NDArray[np.uint32] | LazyIds | str | LazyText",
                  new: "NDArray[np.uint32] | LazyIds | str | LazyText") -> int:
    """How many leading ids (or characters) `new` shares with `prev` by construction: incremental
    assembly makes a prompt as an earlier prompt's head and a new tail (LazyIds, LazyText), so where
    that head is `prev` or one of the heads `prev` was made from, they agree up to the shorter of the
    two heads. 0 when unknown (then everything is compared)."""
    if new is prev:
        return len(prev)
    if not isinstance(new, (LazyIds, LazyText)):
        return 0
    lazy, joined = (LazyIds, "_arr") if isinstance(new, LazyIds) else (LazyText, "_str")
    head, node, limit = new.head, prev, len(prev)
    for _ in range(8):   # the head is `prev` itself or a few links back: a long walk is not worth it
        if head is node or (isinstance(node, lazy) and getattr(node, joined) is not None
                            and head is getattr(node, joined)):
            return min(new.head_len, limit)
        if not isinstance(node, lazy):
            break
        limit = min(limit, node.head_len)
        node = node.head
    return 0


def ids_slice(ids: "NDArray[np.uint32] | LazyIds", a: int, b: int) -> NDArray[np.uint32]:
    """ids[a:b] without joining a LazyIds: the links that hold the range are read, no others."""
    if isinstance(ids, LazyIds) and b <= ids.root_len:
        return ids.root[a:b]
    node = ids
    while isinstance(node, LazyIds) and node._arr is None and b <= node.head_len:
        node = node.head
    if isinstance(node, np.ndarray):
        return node[a:b]
    if node._arr is not None:
        return node._arr[a:b]
    h = node.head_len
    if a >= h:
        return node.tail[a - h:b - h]
    return np.concatenate([ids_slice(node.head, a, h), node.tail[:max(b - h, 0)]]).astype(np.uint32, copy=False)


def _image_change(a: Message, b: Message) -> str:
    """What changed between the images of two versions of a message, in a few words."""
    for x, y in zip(a.media, b.media):
        if x.digest != y.digest:
            size = f"{y.width}×{y.height}" if y.width else "of unknown size"
            same = " of the same size" if (x.width, x.height) == (y.width, y.height) else f", now {size}"
            return f"{y.where}: other content{same}"
    return f"{len(b.media)} images where there were {len(a.media)}"


def _reply(prev_all: Conversation, full: Conversation) -> Message | None:
    """The assistant message that answered the previous request: the first new message, if it is one."""
    n = len(prev_all.messages)
    if len(full.messages) > n and full.messages[n].role == "assistant":
        return full.messages[n]
    return None


def _generated(asm: Assembler, prev: AssemblyResult, reply: Message | None) -> tuple[str, bool]:
    """The text the model generated after the previous prompt, and whether the generation prompt
    differs from how the template renders that reply as a finished turn."""
    if reply is None:
        return "", False
    conv = prev.conversation
    gen = prev.segments[-1] if prev.segments and prev.segments[-1].kind == "generation_prompt" else None
    body = prev.text[: gen.char_start] if gen else prev.text
    gen_text = gen.text if gen else ""
    rendered = asm.render_text(conv.with_messages(conv.messages + (reply.with_(sequence=-1),)), False)
    if not rendered.startswith(body):
        return "", False  # the reply changes what came before it: the next prompt shows the rewrite
    return _generated_in(asm, rendered[len(body):], gen_text)


def _generated_in(asm: Assembler, part: str, gen_text: str) -> tuple[str, bool]:
    """`_generated` from `part`, what the render of the reply as a finished turn adds after the
    previous prompt's body (a fast path finds it without rendering the whole conversation)."""
    if part.startswith(gen_text):
        text, mismatch = part[len(gen_text):], False
    else:
        text, mismatch = part[first_difference(part, gen_text):], True
    # The model stops after its end-of-turn token; what the template writes after it is not generated.
    ends = [(i, t) for t in _END_TOKENS if t in asm.tokenizer.specials and (i := text.find(t)) >= 0]
    if ends:
        i, t = min(ends)
        text = text[: i + len(t)]
    return text, mismatch


def generated_pair(asm: Assembler, prev: AssemblyResult, reply: Message | None) -> tuple[str, bool]:
    """`_generated`'s contract (the text, and whether the generation prompt differs from how the
    template renders the reply), through the incremental probe where it applies."""
    if reply is None:
        return "", False
    fast = _generated_fast(asm, prev, reply)
    return fast if fast is not None else _generated(asm, prev, reply)


def _generated_fast(asm: Assembler, prev: AssemblyResult, reply: Message) -> tuple[str, bool] | None:
    """`_generated`'s text from the probe's render of the last turn and the reply; None where the
    probe does not apply (a short conversation, escaped text, another build context)."""
    ctx = asm.context_at()
    if prev.context != ctx.fingerprint:
        return None   # assembled under other settings (or another day's date): its text is not this render's
    conv = prev.conversation
    # A sequence number of its own, above every message's (the slow path's -1 is a summary slot's):
    # the probe finds messages by it. A constant, not the largest one plus one: finding that would
    # read every message of the history each turn, and the text does not depend on it.
    found = rendered_after(ctx, prev, conv.with_messages(conv.messages + (reply.with_(sequence=_REPLY_SEQ),)),
                           False, extends=True)
    if found is None:
        return None
    start, tail = found
    segs = prev.segments
    gen = segs[-1] if segs and segs[-1].kind == "generation_prompt" else None
    end = gen.char_start if gen is not None else len(prev.text_source)
    if end < start:
        return None
    # The render's head is the previous prompt's up to `start` (the probe checked its anchors), so
    # the render starts with the previous body exactly when the tail starts with the body's rest.
    body = text_slice(prev.text_source, start, end)
    if not tail.startswith(body):
        return "", False   # the reply changes what came before it: the next prompt shows the rewrite
    return _generated_in(asm, tail[len(body):], gen.text if gen is not None else "")


def _volatile_diff(a: str, b: str) -> list[str]:
    """The volatile-looking strings that differ between two texts (empty if the change is elsewhere)."""
    if a == b:
        return []
    va, vb = _VOLATILE.findall(a), _VOLATILE.findall(b)
    if va == vb:
        return []
    # The texts must be equal once every volatile string is masked.
    if _VOLATILE.sub("\x00", a) != _VOLATILE.sub("\x00", b):
        return []
    return [y for x, y in zip(va, vb) if x != y] or vb


def _causes(prev: AssemblyResult, res: AssemblyResult, d: int, seg, mismatch: bool,  # type: ignore[no-untyped-def]
            reply: Message | None, prev_len: int, policy: TruncationPolicy) -> list[Cause]:
    causes: list[Cause] = []
    pc, nc = prev.conversation, res.conversation
    where = f"token {d}" + (f", {seg.kind}" if seg else "") + (f" (seq {seg.seq})" if seg and seg.seq is not None
                                                               else "")
    # Tools.
    if pc.tools != nc.tools:
        if [canonical_json(json.loads(t)) for t in pc.tools] == [canonical_json(json.loads(t)) for t in nc.tools]:
            causes.append(_cause("tool_schema_order", f"the tool schemas are the same but serialized with a "
                                 f"different key order; the prompt changes at {where}"))
        elif (v := _volatile_diff("\n".join(pc.tools), "\n".join(nc.tools))):
            causes.append(_cause("volatile_content", f"the tool schemas carry volatile values ({_show(v)}); the "
                                 f"prompt changes at {where}"))
        else:
            causes.append(_cause("tools_changed", f"the tool schemas changed; the prompt changes at {where}"))
    # Messages the previous prompt had, in order, against this request's messages. Fingerprints
    # from the first message whose prefix chain differs: the ones before it are equal (the chain
    # covers them), and hashing them every turn would cost the whole history.
    same = 0 if res.dropped else _same_messages(prev, res)
    fp_prev = [message_fingerprint(m) for m in pc.messages[same:]]
    fp_new = [message_fingerprint(m) for m in nc.messages[same:len(pc.messages)]]
    if res.dropped and not set(fp_prev) <= {message_fingerprint(m) for m in nc.messages}:
        causes.append(Cause("truncated", f"truncation ({policy.strategy}) dropped {len(res.dropped)} message(s) the "
                            f"previous prompt had; the prompt changes at {where}", truncation_advice(policy, res)))
    # The first of the previous request's messages that this one does not repeat (changed or gone).
    first: int | None = same + first_difference(fp_prev, fp_new)
    if first == len(pc.messages):
        first = None
    if first is not None and first < len(nc.messages):
        a, b = pc.messages[first], nc.messages[first]
        window = fp_new[first - same:]
        if sorted(fp_prev[first - same:]) == sorted(window) and fp_prev[first - same:] != window:
            causes.append(_cause("reordered", f"messages of the previous request come in a different order from "
                                 f"seq {b.sequence}; the prompt changes at {where}", b.sequence))
        elif a.role == b.role and (v := _volatile_diff(a.content or "", b.content or "")):
            place = "the system prompt" if b.role == "system" else f"a {b.role} message"
            causes.append(_cause("volatile_content", f"{place} carries values that change every request "
                                 f"({_show(v)}); the prompt changes at {where}", b.sequence))
        elif not any(c.code == "truncated" for c in causes):
            code = "system_changed" if a.role == b.role == "system" else "edited_message"
            what = f"{b.role} message seq {b.sequence} differs from the previous request's"
            if seg is not None and seg.kind == "image" and a.media and b.media:
                # The placeholder tokens are alike for any image of a size: its content is what changed.
                what = f"{b.role} message seq {b.sequence} holds another image where the previous request had one " \
                       f"({_image_change(a, b)})"
            causes.append(_cause(code, f"{what}; the prompt changes at {where}", b.sequence))
    if not causes:
        # Same messages, same tools: the template or the generation prompt made the difference.
        gen_tokens = prev.segments[-1].token_count if prev.segments and \
            prev.segments[-1].kind == "generation_prompt" else 0
        # Inside the previous generation prompt: the next request renders that turn's opening differently.
        if reply is not None and (prev_len - gen_tokens <= d < prev_len or (mismatch and d >= prev_len)):
            causes.append(_cause("generation_prompt_mismatch", f"the previous prompt ended with a generation "
                                 f"prompt that the template does not render for that reply; the prompt changes "
                                 f"at {where}", seg.seq if seg else None))
        else:
            detail = _rewrite_detail(pc, nc, seg, reply)
            causes.append(_cause("template_rewrite", f"the template renders an earlier turn differently now "
                                 f"that more turns follow{detail}; the prompt changes at {where}",
                                 seg.seq if seg else None))
    return causes


def _same_messages(prev: AssemblyResult, res: AssemblyResult) -> int:
    """How many leading messages the two requests share, from their prefix chains (a link covers
    its message and every one before it); 0 where a chain does not cover its conversation."""
    a, b = prev.prefix_chain, res.prefix_chain
    if len(a) != len(prev.conversation.messages) or len(b) != len(res.conversation.messages):
        return 0
    # A link equal in both means every link before it is equal too (each hashes the one before):
    # bisection finds the first difference in a few comparisons, not one per message.
    lo, hi = 0, min(len(a), len(b))   # a[:lo] == b[:lo]; the answer is in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] == b[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def chunk_tokens(policy: TruncationPolicy, res: AssemblyResult) -> int:
    """The history a chunked drop makes room for: (1 − low_water) of the history budget."""
    return round((1.0 - policy.low_water) * policy.history_budget(res.budget.input_budget))


def turns_per_chunk(policy: TruncationPolicy, res: AssemblyResult) -> int | None:
    """About how many turns a chunk holds: its tokens over what a kept turn of this prompt takes on
    average. None without a kept turn."""
    roles = {m.sequence: m.role for m in res.conversation.messages}
    users = sum(1 for r in roles.values() if r == "user")
    history = sum(s.token_count for s in res.segments if s.seq is not None and roles.get(s.seq) not in (None, "system"))
    if not users or not history:
        return None
    return max(1, round(chunk_tokens(policy, res) / (history / users)))


def truncation_advice(policy: TruncationPolicy, res: AssemblyResult) -> str:
    """What to do about a prefix truncation changed, under the policy that truncated it."""
    chunk = f"about {chunk_tokens(policy, res):,} tokens"
    if policy.strategy == "sliding":
        n = turns_per_chunk(policy, res)
        holds = f"for about {n} turn{'s' if n != 1 else ''}" if n else "until the history has grown by a chunk"
        return ("Sliding truncation drops the fewest turns that make the prompt fit, so once the history overflows "
                "the prefix changes on almost every turn and the whole window is prefilled again. Switch to "
                f"--truncation chunked (TruncationPolicy(strategy=\"chunked\")): it drops to {policy.low_water:.0%} "
                f"of the budget at once, and the kept prefix then holds {holds} ({chunk} of new history); or "
                "summary-slot, which also puts a summary message in place of the dropped turns.")
    when = (f"once per chunk, when the history has grown by {chunk} ({1 - policy.low_water:.0%} of the budget) "
            "since the last drop, and the turns between keep the whole prefix")
    lower = ("Expected; a lower --low-water makes drops rarer (each keeps less history), a higher one keeps more "
             "history and drops more often.")
    if policy.strategy == "chunked":
        return f"Chunked truncation dropped down to a chunk boundary: this happens {when}. {lower}"
    return (f"The summary slot's text changed: it now stands for this drop's messages too, so the prompt changes "
            f"from the slot on. Summary-slot truncation drops to a chunk boundary: this happens {when}. {lower}")


def _rewrite_detail(pc: Conversation, nc: Conversation, seg, reply: Message | None) -> str:  # type: ignore[no-untyped-def]
    if seg is None:
        return ""
    if reply is not None and reply.reasoning and reply.reasoning.strip() not in seg.text and seg.role == "assistant":
        return " (the reasoning of the earlier reply is stripped)"
    if seg.kind in ("system",) or any(m.role == "system" and (m.content or "").strip() and
                                      (m.content or "").strip() in seg.text for m in nc.messages
                                      if seg.role != "system"):
        return " (the system prompt moved)"
    return ""


def _cause(code: str, message: str, seq: int | None = None) -> Cause:
    return Cause(code, message, ADVICE[code], seq)


def _show(values: list[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:3])
    return shown + (f" and {len(values) - 3} more" if len(values) > 3 else "")
