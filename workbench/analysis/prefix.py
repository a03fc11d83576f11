"""Prefix-stability analysis (SPEC 3.2): where each turn's prompt stops reusing the previous one.

A serving engine with prefix caching holds, after turn k−1, that turn's prompt followed by
the reply exactly as the model generated it (its raw content, reasoning included, up to the
end-of-turn token). Turn k can reuse the engine's cache up to the first token where its
prompt differs from what the engine holds. We find that token, the segment and message it
falls in, and why the prompt changed there, with advice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..assembly import Assembler
from ..assembly.result import AssemblyResult
from ..cache.keys import message_fingerprint
from ..conversation import Conversation, Message, canonical_json
from ..difference import first_difference
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
    held: np.ndarray | None = None    # what the engine holds after the previous turn (None on turn 1)

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "tokens": self.tokens, "reused_tokens": self.reused_tokens,
                "held_tokens": self.held_tokens, "first_divergence": self.first_divergence,
                "divergence_seq": self.divergence_seq, "divergence_kind": self.divergence_kind,
                "causes": [c.to_json() for c in self.causes], "provider_diagnostics": provider_diagnostics(self)}


def analyze(asm: Assembler, requests: Sequence[Any]) -> list[TurnAnalysis]:
    """Assemble each request of a session and compare it with what the engine holds from the previous one."""
    out: list[TurnAnalysis] = []
    prev: tuple[AssemblyResult, Conversation] | None = None
    for k, request in enumerate(requests, start=1):
        res = asm.assemble(request)
        full = asm.prepare(request)[0]
        out.append(analyze_turn(asm, k, res, full, prev))
        prev = (res, full)
    return out


def analyze_turn(asm: Assembler, k: int, res: AssemblyResult, full: Conversation,
                 previous: tuple[AssemblyResult, Conversation] | None) -> TurnAnalysis:
    """Turn k alone: its result and its conversation before truncation (`asm.prepare(request)[0]`),
    against the previous turn's (None on turn 1). The workbench re-analyses only the turn being edited."""
    if previous is None:
        return TurnAnalysis(k, res.total_tokens, 0, 0, None, None, None, (), res)
    return _compare(asm, k, previous[0], previous[1], res, full)


def _compare(asm: Assembler, k: int, prev: AssemblyResult, prev_all: Conversation, res: AssemblyResult,
             full: Conversation, generate: Callable[[Assembler, AssemblyResult, Message | None], tuple[str, bool]]
             | None = None) -> TurnAnalysis:
    """`generate`: how the reply as generated is found (`_generated`'s contract); the aggregate passes
    the incremental probe (turn_prompts.generated_pair), whose cost follows the turn, not the history."""
    reply = _reply(prev_all, full)
    generated, mismatch = (generate or _generated)(asm, prev, reply)
    tok = asm.tokenizer
    # Images compare by content (their placeholder tokens are the same for any image of one size).
    held = prev.content_ids() if not generated else np.concatenate(
        [prev.content_ids(), tok.encode_with_specials(generated)]).astype(np.uint32, copy=False)
    new = res.content_ids()
    n = min(len(held), len(new))
    # The first token that differs, or the end of this prompt when the engine holds more than it.
    first = first_difference(held, new)
    d = first if first < n or len(held) > len(new) else None
    reused = n if d is None else d
    seg = None
    if d is not None:
        seg = next((s for s in res.segments if s.start <= d < s.end), res.segments[-1] if res.segments else None)
    causes: list[Cause] = []
    if d is not None:
        causes = _causes(prev, res, d, seg, mismatch, reply, len(prev.token_ids), asm.config.truncation)
    return TurnAnalysis(k, res.total_tokens, reused, len(held), d, seg.seq if seg else None,
                        seg.kind if seg else None, tuple(causes), res, held)


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
    # Messages the previous prompt had, in order, against this request's messages.
    fp_prev = [message_fingerprint(m) for m in pc.messages]
    fp_new = [message_fingerprint(m) for m in nc.messages]
    if res.dropped and not set(fp_prev) <= set(fp_new):
        causes.append(Cause("truncated", f"truncation ({policy.strategy}) dropped {len(res.dropped)} message(s) the "
                            f"previous prompt had; the prompt changes at {where}", truncation_advice(policy, res)))
    # The first of the previous request's messages that this one does not repeat (changed or gone).
    first: int | None = first_difference(fp_prev, fp_new)
    if first == len(fp_prev):
        first = None
    if first is not None and first < len(nc.messages):
        a, b = pc.messages[first], nc.messages[first]
        window = fp_new[first:first + len(fp_prev) - first]
        if sorted(fp_prev[first:]) == sorted(window) and fp_prev[first:] != window:
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
