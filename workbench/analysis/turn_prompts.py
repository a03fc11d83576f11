"""A session's assembled turns as the provider simulators see them (`TurnPrompt`s): each turn's
token ids, its cache breakpoints and the length of the reply that followed it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .providers import TurnPrompt

if TYPE_CHECKING:
    from ..assembly.result import AssemblyResult


def breakpoints_of(result: "AssemblyResult", mode: str) -> tuple[int, ...]:
    """Token offsets where a cache_control prefix ends: the session's own marks ("explicit"), or
    after the tools/system block and at the end of the request ("auto")."""
    segs = list(result.segments)
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
        return sum(s.token_count for s in following.segments if s.seq == seq)
    return 0


def turn_prompts(results: Sequence["AssemblyResult"], breakpoints: str = "explicit") -> list[TurnPrompt]:
    """One TurnPrompt per assembled turn, in order."""
    return [TurnPrompt.from_assembly(r, breakpoints=breakpoints_of(r, breakpoints),
                                     output_tokens=reply_tokens(r, results[k + 1] if k + 1 < len(results) else None))
            for k, r in enumerate(results)]
