"""The shared prompt cache inside assembly: exact hits, prefix hits extended, single-flight misses.

An assembled prompt is stored whole (see prompts.py). A request finds its own prompt there (an
exact hit), or an earlier prompt of the same conversation that it extends like a session extends
its previous result (a prefix hit, possibly written by another process through Redis), or
else it is assembled cold through the cache's single flight: N concurrent callers render once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..built import Built
from ..conversation import Conversation
from ..diagnostics import Diagnostic
from ..incremental import extend
from ..segments import Segment, SegmentList, originals
from ..truncation import estimate_message, estimate_text
from .keys import CacheKey, prefix_chain, prompt_key
from .prompts import from_entry, to_entry
from .store import CacheEntry

if TYPE_CHECKING:
    from ..assembler import Assembler
    from ..context import BuildContext

# How many shorter prefixes of a request to look up as earlier prompts of the same conversation
# (a new turn adds a reply and a user message, or a few tool rounds).
PREFIX_PROBES = 8


def from_cache(asm: "Assembler", conv: Conversation, add_generation_prompt: bool, budget: int | None,
               ctx: "BuildContext") -> Built | None:
    """This exact prompt from the cache; else an earlier prompt of the conversation, extended; else a
    cold assembly through the cache's single flight. None when the prompt is headed for truncation."""
    cache = asm.cache
    assert cache is not None
    msgs = conv.messages
    est = None
    if budget is not None:
        # Newest first, stopping once clearly over: a prompt headed for truncation skips the cache
        # (and the hashing of its whole history) at the cost of a few messages' lengths.
        ratio = asm._ratio
        acc = sum(estimate_text(x) for x in conv.tools) * ratio
        for m in reversed(msgs):
            acc += estimate_message(m) * ratio
            if acc > budget * 0.9:
                return None
        est = int(acc)
    chain = prefix_chain(msgs)
    key = prompt_key(ctx, conv.tools, chain, add_generation_prompt)
    vocab = asm.tokenizer.vocab_size
    entry, src = cache.get(key)
    if entry is not None:
        built = from_entry_built(conv, entry, src, add_generation_prompt, vocab)
        if built is not None and (budget is None or built.used <= budget):
            return built
    for j in range(len(msgs) - 1, max(len(msgs) - 1 - PREFIX_PROBES, 0), -1):
        head = conv.with_messages(msgs[:j])
        e, src = cache.get(prompt_key(ctx, conv.tools, chain[:j], True))
        if e is None:
            continue
        prev = from_entry_built(head, e, src, True, vocab)
        if prev is None:
            break
        inc = extend(asm, Previous.of(prev, src, ctx.fingerprint), conv, add_generation_prompt, ctx)
        if inc is not None and (budget is None or inc.used <= budget):
            inc.gen = add_generation_prompt
            return inc
        break
    made: list[Built] = []

    def build() -> CacheEntry:
        b = asm._build(conv, add_generation_prompt, ctx)
        b.gen = add_generation_prompt
        made.append(b)
        e = to_entry(b.text, b.ids, b.segments, b.diags, len(msgs))
        if e is None or b.escaped:
            raise Uncacheable()
        return e

    try:
        entry, src = cache.get_or_build(key, build)
    except Uncacheable:
        return made[0] if made else None
    if made:
        made[0].stored, made[0].estimated = True, est
        return made[0]
    return from_entry_built(conv, entry, src, add_generation_prompt, vocab)


def from_entry_built(conv: Conversation, entry: CacheEntry, src: str, add_generation_prompt: bool,
                     vocab_size: int) -> Built | None:
    try:
        text, ids, segs, diags, n = from_entry(entry, "fresh")
    except (ValueError, KeyError, TypeError, IndexError):
        return None  # a malformed entry is a miss
    if n != len(conv.messages):
        return None
    if len(ids) and vocab_size and int(ids.max()) >= vocab_size:
        return None  # an id this vocabulary does not have: not a prompt it made
    seqs = {m.sequence for m in conv.messages}
    if any(s.seq is not None and s.seq not in seqs for s in segs):
        return None
    built = Built(conv, text, SegmentList(segs, len(segs), src), ids, list(diags), (), 0.0, 0.0)
    built.inspected, built.reused, built.stored, built.gen = True, len(segs), True, add_generation_prompt
    return built


def store(asm: "Assembler", conv: Conversation, key: CacheKey, result) -> None:  # type: ignore[no-untyped-def]
    """Write an assembled prompt through to the cache under its key, for later requests of its conversation."""
    assert asm.cache is not None
    entry = to_entry(result.text, result.token_ids, originals(result.segments), result.render_diagnostics,
                     len(conv.messages))
    if entry is not None:
        asm.cache.put(key, entry)


class Uncacheable(Exception):
    """A build whose prompt the entry format cannot hold (escaped user text): assembled, not cached."""


@dataclass
class Previous:
    """An earlier prompt of the conversation, from the cache, in the shape extend() reads."""

    conversation: Conversation
    text_source: str
    token_ids: np.ndarray
    segments: list[Segment]
    render_diagnostics: tuple[Diagnostic, ...]
    reuse_source: str
    context: str = ""
    dropped: tuple = ()
    escaped: tuple = ()
    variables: tuple = ()
    prefix_chain: tuple = ()

    @property
    def text(self) -> str:
        return self.text_source

    @classmethod
    def of(cls, b: Built, src: str, context: str) -> "Previous":
        return cls(b.conv, b.text, b.ids, originals(b.segments), tuple(b.diags), src, context)
