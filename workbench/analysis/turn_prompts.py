"""A session's assembled turns as the provider simulators see them (`TurnPrompt`s): each turn's
token ids, its cache breakpoints, the length of the reply that followed it and, given the
assembler, the reply's token ids as the model generated them (what an engine holds after the turn)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..segments import originals

# The analysis's own account of what the engine holds (the probe lives in prefix.py; its
# reference tests read it here too).
from .prefix import _generated_fast, generated_pair  # noqa: F401
from .providers import TurnPrompt

if TYPE_CHECKING:
    from ..assembly import Assembler
    from ..assembly.result import AssemblyResult
    from ..conversation import Message


def breakpoints_of(result: "AssemblyResult", mode: str) -> tuple[int, ...]:
    """Token offsets where a cache_control prefix ends: the session's own marks ("explicit"), or
    after the tools/system block and at the end of the request ("auto")."""
    # The segment objects themselves: a reused segment read through the result's SegmentList is
    # copied to say where it came from, which is not read here (a copy of every segment, every turn).
    segs = originals(result.segments)
    if mode == "auto":
        # After the system/tools block, and after the last message (not the generation prompt, which
        # the next request renders as the reply's opening): the next request's prefix ends there.
        head = [s.end for s in segs if s.kind in ("bos", "system", "tools", "preamble")]
        body = [s.end for s in segs if s.kind != "generation_prompt"]
        ends = ([max(head)] if head else []) + ([max(body)] if body else [])
        return tuple(sorted(set(e for e in ends if e > 0)))
    marked = {m.sequence for m in result.conversation.messages if m.cache_control}
    last_end = {}
    for s in segs:
        if s.seq in marked:
            last_end[s.seq] = s.end  # the end of the message's last segment
    return tuple(sorted(last_end.values()))


def reply_tokens(result: "AssemblyResult", following: "AssemblyResult | None") -> int:
    """Tokens of the reply to `result`: the next request's first new message, if it is the assistant's."""
    if following is None:
        return 0
    n = len(result.conversation.messages)
    msgs = following.conversation.messages
    if len(msgs) > n and msgs[n].role == "assistant":
        seq = msgs[n].sequence
        return sum(s.end - s.start for s in originals(following.segments) if s.seq == seq)
    return 0


def _reply_message(result: "AssemblyResult", following: "AssemblyResult") -> "Message | None":
    """The assistant message answering `result`: in the next request, the message right after the
    last one `result` sent (found by its position in the request, so truncation does not shift it)."""
    msgs = result.conversation.messages
    if not msgs:
        return None
    after = msgs[-1].sequence + 1
    return next((m for m in following.conversation.messages if m.sequence == after and m.role == "assistant"), None)


def reply_ids(asm: "Assembler", result: "AssemblyResult", following: "AssemblyResult | None") -> np.ndarray | None:
    """The reply to `result` as the model generated it (from after the generation prompt to its
    end-of-turn token, rendered as the template writes a last turn: reasoning kept), tokenized on
    its own as an engine appends it; None when the next request does not start with a reply."""
    if following is None:
        return None
    reply = _reply_message(result, following)
    if reply is None:
        return None
    text = generated_text(asm, result, reply)
    return np.asarray(asm.tokenizer.encode_with_specials(text), dtype=np.uint32) if text else None


def generated_text(asm: "Assembler", prev: "AssemblyResult", reply: "Message") -> str:
    """What the model generated after `prev` (prefix.py's `_generated`, the reference): rendered
    from the user message opening the last turn where the incremental probe is trusted (cost
    follows the turn, not the history), else from the whole conversation."""
    return generated_pair(asm, prev, reply)[0]


def turn_prompts(results: Sequence["AssemblyResult"], breakpoints: str = "explicit",
                 asm: "Assembler | None" = None) -> list[TurnPrompt]:
    """One TurnPrompt per assembled turn, in order. With `asm` (the assembler that built them),
    each carries the reply that followed it as generated, which vLLM and SGLang hold."""
    return [turn_prompt(r, results[k + 1] if k + 1 < len(results) else None, breakpoints, asm)
            for k, r in enumerate(results)]


def turn_prompt(result: "AssemblyResult", following: "AssemblyResult | None", breakpoints: str = "explicit",
                asm: "Assembler | None" = None) -> TurnPrompt:
    """`turn_prompts`' prompt for one turn, given the next turn's result (None for the last): what
    a caller feeding the simulators turn by turn builds once the next turn is assembled."""
    mode = "auto" if breakpoints == "auto" else "explicit"     # as breakpoints_of reads it
    return TurnPrompt.from_assembly(result, breakpoints=breakpoints_of(result, breakpoints),
                                    output_tokens=reply_tokens(result, following),
                                    reply_ids=reply_ids(asm, result, following) if asm is not None else None,
                                    breakpoint_mode=mode)
