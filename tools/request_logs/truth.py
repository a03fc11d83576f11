"""Ground truth: per turn, what a prefix-caching engine holds and how much of it the next prompt reuses.

After turn k−1 the engine holds that turn's prompt ids followed by the reply exactly as the model
generated it: the text the previous turn's template writes for the reply after the previous prompt's
generation prompt, up to and including the end-of-turn token, tokenized on its own (the engine
decoded those tokens; it did not re-tokenize the prompt). Turn k reuses the common prefix of that
and its own prompt ids; the rest of what was held is lost. This is computed here with the Assembler
(render and tokenize) only — never with workbench.analysis, which is what it checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench import Assembler
from workbench.assembly.result import AssemblyResult
from workbench.conversation import Conversation


@dataclass(frozen=True)
class Turn:
    tokens: int        # this prompt's length
    held: int          # what the engine holds from the previous turn (0 on turn 1)
    reused: int        # the common prefix of held and this prompt
    dropped: frozenset[int]   # sequence numbers truncation left out of this prompt

    @property
    def lost(self) -> int:
        return self.held - self.reused


@dataclass
class _Previous:
    asm: Assembler
    result: AssemblyResult
    full: Conversation         # the previous request's conversation before truncation


class Assemblers:
    """One Assembler per template name, without the shared prompt cache (each turn is assembled cold)."""

    def __init__(self) -> None:
        self._by_name: dict[str, Assembler] = {}

    def __call__(self, template: str) -> Assembler:
        if template not in self._by_name:
            self._by_name[template] = Assembler(template=template, cache=None)
        return self._by_name[template]


class SessionTruth:
    """Feed a session's requests in order; each call returns that turn's figures."""

    def __init__(self, assemblers: Assemblers) -> None:
        self._asm = assemblers
        self._prev: _Previous | None = None
        self.last: AssemblyResult | None = None      # the last turn's assembly (the usage reads its ids)

    def assembler(self, template: str) -> Assembler:
        return self._asm(template)

    def turn(self, request: dict[str, Any], template: str) -> Turn:
        asm = self._asm(template)
        full, diags, _, _ = asm.prepare(request)
        res = asm.assemble(request, cleaned=(full, diags))
        ids = res.token_ids
        dropped = frozenset(d.seq for d in res.dropped)
        prev, self._prev = self._prev, _Previous(asm, res, full)
        self.last = res
        if prev is None:
            return Turn(len(ids), 0, 0, dropped)
        held = held_ids(prev, full)
        n = min(len(held), len(ids))
        diff = np.flatnonzero(held[:n] != ids[:n])
        reused = int(diff[0]) if len(diff) else n
        return Turn(len(ids), len(held), reused, dropped)


def held_ids(prev: _Previous, full: Conversation) -> np.ndarray:
    """The previous prompt's ids followed by the ids of the reply as generated (the assistant message
    that follows the previous request's messages in this one; none when the next message is not one)."""
    res, n = prev.result, len(prev.full.messages)
    if len(full.messages) <= n or full.messages[n].role != "assistant":
        return res.token_ids
    reply = full.messages[n]
    gen = res.segments[-1] if res.segments and res.segments[-1].kind == "generation_prompt" else None
    body = res.text[: gen.char_start] if gen else res.text
    opening = gen.text if gen else ""
    kept: Conversation = res.conversation
    rendered = prev.asm.render_text(kept.with_messages(kept.messages + (reply,)), False)
    if not rendered.startswith(body + opening):
        # The generator only uses templates whose finished reply starts where the generation prompt
        # left off; anything else would be a bug here, not a property of the logs.
        raise AssertionError(f"{prev.asm.template.name}: the reply does not extend the previous prompt")
    generated = rendered[len(body) + len(opening):]
    end = prev.asm.template.eos_token or ""
    if end and end in generated:
        generated = generated[: generated.index(end) + len(end)]
    tail = prev.asm.tokenizer.encode_with_specials(generated)
    return np.concatenate([res.token_ids, np.asarray(tail, dtype=np.uint32)])
