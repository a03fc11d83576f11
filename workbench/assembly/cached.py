"""The shared prompt cache inside assembly: exact hits, prefix hits extended, single-flight misses.

An assembled prompt is stored whole (workbench/cache/prompts.py) under its key
(workbench/cache/keys.py). A request finds its own prompt there (an exact hit), or an earlier
prompt of the same conversation that it extends like a session extends its previous result (a
prefix hit, possibly written by another process through Redis), or else it is assembled cold
through the cache's single flight: N concurrent callers render once. Everything read back is
checked before it is used (`_entry_built`): an entry is a miss unless it could be this prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from ..cache.keys import CacheKey, prefix_chain, prompt_key, tag_index
from ..cache.prompts import from_entry, to_entry
from ..cache.store import CacheEntry, TwoTierCache
from ..conversation import Conversation
from ..diagnostics import Diagnostic
from ..segments import Segment, SegmentList, originals
from ..truncation import Dropped
from ..variables import Binding
from .build import exact
from .built import Built, Tier
from .context import BuildContext
from .incremental import extend
from .result import ids_array

# How many shorter prefixes of a request to look up as earlier prompts of the same conversation
# (a new turn adds a reply and a user message, or a few tool rounds).
PREFIX_PROBES = 8


def from_cache(ctx: BuildContext, cache: TwoTierCache, conv: Conversation, add_generation_prompt: bool,
               fits: int | None = None, estimated: int | None = None) -> Built | None:
    """This exact prompt from the cache; else an earlier prompt of the conversation, extended; else a
    cold assembly through the cache's single flight. `fits`: the input budget, when the caller checks
    the result against one (a prompt over it is returned for the caller to truncate); `estimated`:
    the caller's fast estimate, kept on a prompt assembled here."""
    chain = prefix_chain(conv.messages)
    key = prompt_key(ctx.fingerprint, conv.tools, chain, add_generation_prompt, tag_at=tag_index(conv.messages))
    entry, src = cache.get(key)
    if entry is not None:
        built = _entry_built(ctx, conv, entry, src, add_generation_prompt)
        if built is not None and (fits is None or built.used <= fits):
            return built
    extended = _extend_earlier(ctx, cache, conv, chain, add_generation_prompt)
    if extended is not None and (fits is None or extended.used <= fits):
        return extended
    built = _single_flight(ctx, cache, key, conv, add_generation_prompt)
    # Only a prompt assembled and stored here carries the estimate (as budget.estimated shows it).
    return replace(built, estimated=estimated) if built is not None and built.stored and not built.hit else built


def _extend_earlier(ctx: BuildContext, cache: TwoTierCache, conv: Conversation, chain: Sequence[str],
                    add_generation_prompt: bool) -> Built | None:
    """The nearest earlier prompt of this conversation in the cache, extended to `conv`. The shorter
    prefixes are looked up together (`TwoTierCache.first`: one Redis round trip for all of them, as
    they share the conversation's hash tag), nearest first."""
    msgs = conv.messages
    at = tag_index(msgs)
    lengths = range(len(msgs) - 1, max(len(msgs) - 1 - PREFIX_PROBES, 0), -1)
    # A prefix of system messages only takes its tag from its own last message (min), as its own
    # prompt was stored under; every other prefix shares the request's tag.
    keys = [prompt_key(ctx.fingerprint, conv.tools, chain[:j], True, tag_at=min(at, j - 1)) for j in lengths]
    i, e, src = cache.first(keys)
    if e is None:
        return None
    j = lengths[i]
    prev = _entry_built(ctx, conv.with_messages(msgs[:j]), e, src, True)
    if prev is None:
        return None
    return extend(ctx, Cached.of(prev), conv, add_generation_prompt, tier=prev.hit)


def _single_flight(ctx: BuildContext, cache: TwoTierCache, key: CacheKey, conv: Conversation,
                   add_generation_prompt: bool) -> Built | None:
    """A cold assembly that N concurrent callers share (the first builds and stores, the others read)."""
    made: list[Built] = []

    def build() -> CacheEntry:
        b = exact(ctx, conv, add_generation_prompt)
        made.append(b)
        # A cold assembly: its text is a str and its ids an array already (str() and ids_array() return them).
        e = to_entry(str(b.text), ids_array(b.ids), b.segments, b.diags, len(conv.messages))
        if e is None or b.escaped:
            raise Uncacheable()
        return e

    try:
        entry, src = cache.get_or_build(key, build)
    except Uncacheable:
        return made[0] if made else None
    if made:
        return replace(made[0], stored=True)
    return _entry_built(ctx, conv, entry, src, add_generation_prompt)


def _entry_built(ctx: BuildContext, conv: Conversation, entry: CacheEntry, src: str, add_generation_prompt: bool
                 ) -> Built | None:
    """The prompt an entry holds, if it can be this conversation's: its segment table well formed,
    its message count and positions those of `conv`, its ids in this vocabulary."""
    try:
        text, ids, segs, diags, n = from_entry(entry, "fresh")
    except (ValueError, KeyError, TypeError, IndexError):
        return None  # a malformed entry is a miss
    vocab = ctx.tokenizer.vocab_size
    seqs = {m.sequence for m in conv.messages}
    if n != len(conv.messages) or (len(ids) and vocab and int(ids.max()) >= vocab) or \
            any(s.seq is not None and s.seq not in seqs for s in segs):
        return None  # not a prompt this vocabulary and this request could have made
    tier: Tier = "redis" if src == "redis" else "local"
    return Built(conv, text, SegmentList(segs, len(segs), tier), ids, tuple(diags), inspected=True, reused=len(segs),
                 stored=True, gen=add_generation_prompt, hit=tier)


def store(cache: TwoTierCache, key: CacheKey, conv: Conversation, result: "Storable") -> None:
    """Write an assembled prompt through to the cache under its key, for later requests of its
    conversation."""
    entry = to_entry(result.text, result.token_ids, originals(result.segments), result.render_diagnostics,
                     len(conv.messages))
    if entry is not None:
        cache.put(key, entry)


class Storable(Protocol):
    """What `store` reads of a result (AssemblyResult has all of it)."""

    @property
    def text(self) -> str: ...
    @property
    def token_ids(self) -> NDArray[np.uint32]: ...
    @property
    def segments(self) -> Sequence[Segment]: ...
    @property
    def render_diagnostics(self) -> tuple[Diagnostic, ...]: ...


class Uncacheable(Exception):
    """A build whose prompt the entry format cannot hold (escaped text): assembled, not cached."""


@dataclass(frozen=True)
class Cached:
    """An earlier prompt of the conversation from the cache, in the shape `extend` reads."""

    conversation: Conversation
    text_source: str
    ids_source: NDArray[np.uint32]
    segments: list[Segment]
    render_diagnostics: tuple[Diagnostic, ...]
    dropped: tuple[Dropped, ...] = ()
    escaped: tuple[tuple[int, int], ...] = ()
    variables: tuple[Binding, ...] = ()

    @classmethod
    def of(cls, b: Built) -> "Cached":
        return cls(b.conv, str(b.text), np.asarray(b.ids), originals(b.segments), b.diags)
