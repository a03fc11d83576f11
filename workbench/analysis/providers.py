"""Provider prefix-cache simulation (SPEC 3.3): what OpenAI, Anthropic, Gemini, vLLM and SGLang
would report as cached for each request of a session, and what each request would cost.

The rules are data: ``provider_params.json`` holds the presets (sizes, TTLs, per-model minimums,
example prices), each naming its source page and the day it was checked; ``openai@gpt-5.6`` picks
a provider's variant. The engines (vLLM, SGLang) also hold the reply they generated: a turn's
``reply_ids`` are counted as cached when the next prompt repeats them. Each simulator is a small
class whose ``process(turn)`` takes one request and returns a ``TurnResult``, so a live workbench
can feed turns as they come; ``simulate()`` runs a whole session. The vLLM simulator names blocks
with the engine's hash chain (``engine.kv.block_hashes``) and the SGLang simulator is the engine's
radix tree in its simulated mode (``engine.radix.RadixKVCache.simulated``): one implementation
each, as in SGLang itself. Where a simulator decides a read, it also says why it read no more
(``TurnResult.why``, worded by cache_reasons.py): a 0 always comes with its reason.

    >>> import numpy as np
    >>> doc = np.arange(3000, dtype=np.uint32)
    >>> sim = simulate([TurnPrompt(doc[:2000]), TurnPrompt(doc[:2500])], "openai")
    >>> [t.cached_tokens for t in sim.turns]      # 2000 shared tokens, in 128-token steps
    [0, 1920]
    >>> [t.cached_tokens for t in simulate([TurnPrompt(doc[:2000]), TurnPrompt(doc[:2500])], "sglang").turns]
    [0, 2000]
"""

from __future__ import annotations

import bisect
import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from ..difference import first_difference
from ..engine.block_set import BlockSet, block_keys, leading
from ..engine.kv import BlockHash, block_hashes
from ..engine.radix import RadixKVCache
from ..errors import ProviderParamsError, SimulationError
from ..segments import originals
from . import cache_reasons as R
from .cache_reasons import Why
from .provider_params import (
    MILLION,
    AnthropicParams,
    GeminiParams,
    OpenAIParams,
    ProviderParams,
    SGLangParams,
    VLLMParams,
)

DEFAULT_GAP_S = 60.0          # TurnPrompt.time_s None: the turn comes this long after the previous one
TTLS = ("5m", "1h")           # Anthropic cache_control TTLs, longest last
BREAKPOINT_MODES = ("", "explicit", "auto")   # TurnPrompt.breakpoint_mode: "" when the caller does not say


# ---------------------------------------------------------------- turns and results

def _as_tokens(value: Any) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise SimulationError(f"must be a 1-D array of token ids, got shape {arr.shape}", field="token_ids")
    if arr.dtype == np.uint32:
        return arr
    if arr.size == 0:
        return np.empty(0, np.uint32)
    if arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() > 0xFFFFFFFF:
        raise SimulationError("token ids must be integers in 0 .. 2**32-1", field="token_ids",
                              hint="pass the pipeline's np.uint32 token ids")
    return arr.astype(np.uint32)


def _offsets(value: Any, n: int, field: str) -> tuple[int, ...]:
    out = tuple(value)
    types = set(map(type, out))
    if out and all(t is not bool and issubclass(t, (int, np.integer)) for t in types):
        # Integers (a prompt's segment ends: thousands of them, every turn): checked at once; the
        # loop below names the first bad one.
        a = np.asarray(out)
        if a.ndim == 1 and a.dtype.kind in "iu" and a[0] > 0 and a[-1] <= n and bool((np.diff(a) > 0).all()):
            return tuple(a.tolist())
    for i, v in enumerate(out):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 < v <= n:
            raise SimulationError(f"[{i}] = {v!r} is not a token offset in 1..{n}", field=field,
                                  hint="offsets are exclusive ends of prefixes of this prompt")
        if i and v <= out[i - 1]:
            raise SimulationError(f"must be strictly ascending, got {list(out)}", field=field)
    return tuple(int(v) for v in out)


@dataclass(frozen=True, eq=False)
class TurnPrompt:
    """One request as the provider sees it.

    ``breakpoints``: Anthropic ``cache_control`` prefixes, token offsets (exclusive ends), ascending.
    ``block_ends``: where content blocks (messages) end, for Anthropic's lookback; empty means the
    boundaries known are this request's breakpoints and the ends of prefixes written earlier.
    ``time_s``: when it was sent; None means 60 s after the previous turn (the first at 0 s).
    ``reply_ids``: the reply the model generated after this prompt, as the engine holds it (None:
    unknown, the engine simulators then hold the prompt alone).
    ``breakpoint_ttls``: each breakpoint's Anthropic TTL ("5m" or "1h"); empty: the preset's.
    ``hold_last``: the engine holds the reply's last sampled token too (our serve-engine computes
    its KV: engine/decode.py), not one token less as vLLM and SGLang do.
    ``breakpoint_mode``: how ``breakpoints`` were placed ("explicit": the session's own
    cache_control marks; "auto": placed by turn_prompts.breakpoints_of), for the reason a request
    without one reads nothing; "" when the caller does not say.
    The arrays are kept, not copied: do not change them after passing them in."""

    token_ids: np.ndarray
    breakpoints: tuple[int, ...] = ()
    time_s: float | None = None
    output_tokens: int = 0
    block_ends: tuple[int, ...] = ()
    reply_ids: np.ndarray | None = None
    breakpoint_ttls: tuple[str, ...] = ()
    hold_last: bool = False
    breakpoint_mode: str = ""

    def __post_init__(self) -> None:
        ids = _as_tokens(self.token_ids)
        object.__setattr__(self, "token_ids", ids)
        object.__setattr__(self, "breakpoints", _offsets(self.breakpoints, len(ids), "breakpoints"))
        object.__setattr__(self, "block_ends", _offsets(self.block_ends, len(ids), "block_ends"))
        t = self.time_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t)):
            raise SimulationError(f"must be a finite number of seconds or None, got {t!r}", field="time_s")
        o = self.output_tokens
        if isinstance(o, bool) or not isinstance(o, (int, np.integer)) or o < 0:
            raise SimulationError(f"must be a non-negative integer, got {o!r}", field="output_tokens")
        if self.reply_ids is not None:
            object.__setattr__(self, "reply_ids", _as_tokens(self.reply_ids))
        ttls = tuple(self.breakpoint_ttls)
        if ttls and (len(ttls) != len(self.breakpoints) or any(x not in TTLS for x in ttls)):
            raise SimulationError(f"must give one of {', '.join(TTLS)} per breakpoint "
                                  f"({len(self.breakpoints)}), got {list(ttls)}", field="breakpoint_ttls")
        object.__setattr__(self, "breakpoint_ttls", ttls)
        if self.breakpoint_mode not in BREAKPOINT_MODES:
            raise SimulationError(f"must be one of {', '.join(map(repr, BREAKPOINT_MODES))}, got "
                                  f"{self.breakpoint_mode!r}", field="breakpoint_mode")

    @property
    def held_ids(self) -> np.ndarray:
        """What an engine holds after this turn: the prompt and the reply it generated, less the
        last sampled token (never fed back, so it has no KV: SGLang's cache_finished_req keeps
        the committed KV only, vLLM caches computed blocks only). The prompt alone without a reply."""
        if self.reply_ids is None or not len(self.reply_ids):
            return self.token_ids
        reply = self.reply_ids if self.hold_last else self.reply_ids[:-1]
        return np.concatenate([self.token_ids, reply]).astype(np.uint32, copy=False)

    @classmethod
    def from_assembly(cls, result: Any, *, breakpoints: Sequence[int] = (), time_s: float | None = None,
                      output_tokens: int = 0, reply_ids: np.ndarray | None = None,
                      breakpoint_mode: str = "") -> TurnPrompt:
        """From an AssemblyResult: its token ids (an image's as its content id: another image of the
        same size must not be a hit, as vLLM's block hashes and SGLang's image pads see to), and its
        segment ends as the block boundaries."""
        # The segment objects themselves (a SegmentList would copy each reused one to read it).
        ends = sorted({int(s.end) for s in originals(result.segments) if s.end > 0})
        ids = result.content_ids() if hasattr(result, "content_ids") else result.token_ids
        return cls(ids, tuple(breakpoints), time_s, output_tokens, tuple(ends), reply_ids,
                   breakpoint_mode=breakpoint_mode)


@dataclass(frozen=True)
class TurnResult:
    turn: int                 # from 1
    tokens: int               # prompt tokens
    cached_tokens: int        # reported as cached (Anthropic: cache_read_input_tokens)
    cache_write_tokens: int   # Anthropic: cache_creation_input_tokens; engines: tokens newly stored
    cost: float               # USD: input + cache read/write + output
    uncached_tokens: int = 0  # billed at the input price (Anthropic: input_tokens)
    output_tokens: int = 0
    time_s: float = 0.0
    detail: str = ""
    # Why the cached figure is 0, or less than the prompt shares with what the provider holds, as
    # the simulator decided it (cache_reasons.py); None when it read all it could.
    reason: Why | None = None

    @property
    def why(self) -> str:
        return self.reason.text if self.reason is not None else ""

    def to_json(self) -> dict[str, Any]:
        """SPEC 7.3's keys, and "why" and "why_code" where there is a reason."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "reason"}
        if self.reason is not None:
            out.update(self.reason.to_json())
        return out


@dataclass(frozen=True)
class Simulation:
    provider: str
    turns: tuple[TurnResult, ...]
    params: ProviderParams | None = None

    @property
    def hit_ratio(self) -> float:
        total = sum(t.tokens for t in self.turns)
        return sum(t.cached_tokens for t in self.turns) / total if total else 0.0

    @property
    def total_cost(self) -> float:
        return sum(t.cost for t in self.turns)

    @property
    def why(self) -> str:
        """Why the hit ratio is 0 (no turn read anything): the turns' reasons, runs of the same one
        said once; "" when some turn read a cached prefix."""
        if any(t.cached_tokens for t in self.turns):
            return ""
        return R.summary([t.reason for t in self.turns]) if self.turns else "no turns"

    @property
    def preset_note(self) -> str:
        """Which preset ran, its source page and the day it was checked (one line)."""
        return self.params.citation if self.params is not None else f"preset {self.provider}"

    def to_json(self) -> dict[str, Any]:
        """SPEC 7.3: {"provider", "turns": [{"turn", "tokens", "cached_tokens", "cost", ...}], "hit_ratio"},
        and which preset ran: "preset", "source", "checked"."""
        out: dict[str, Any] = {"provider": self.provider, "turns": [t.to_json() for t in self.turns],
                               "hit_ratio": self.hit_ratio, "total_cost": self.total_cost}
        if self.why:
            out["hit_ratio_why"] = self.why
        if self.params is not None:
            p = self.params
            out.update(kind=p.kind, model=p.model, preset=p.preset or p.name, source=p.source, checked=p.checked,
                       params=p.to_json())
        return out


# ---------------------------------------------------------------- simulators

class Simulator:
    """Holds one provider's cache state; ``process(turn)`` answers one request and updates it."""

    kind: ClassVar[str] = ""
    bills_writes: ClassVar[bool] = False       # writes billed apart from input (Anthropic)

    def __init__(self, params: ProviderParams):
        if params.kind != self.kind:
            raise ProviderParamsError(f"a {type(self).__name__} needs {self.kind} params, got {params.kind}",
                                      preset=params.name, hint=f"load a {self.kind} preset")
        self.params = params
        self.turn = 0
        self.time_s: float | None = None

    def process(self, turn: TurnPrompt) -> TurnResult:
        idx = self.turn + 1
        if not isinstance(turn, TurnPrompt):
            raise SimulationError(f"expected a TurnPrompt, got {type(turn).__name__}", turn=idx,
                                  hint="wrap the token ids: TurnPrompt(token_ids)")
        if turn.time_s is None:
            t = 0.0 if self.time_s is None else self.time_s + DEFAULT_GAP_S
        else:
            t = float(turn.time_s)
            if self.time_s is not None and t < self.time_s:
                raise SimulationError(f"goes back in time ({t:g} s after {self.time_s:g} s)", turn=idx,
                                      field="time_s", hint="feed the requests in the order they were sent")
        cached, written, detail, why = self._step(turn, idx, t)
        self.turn, self.time_s = idx, t
        n, p = len(turn.token_ids), self.params.prices
        billed_writes = written if self.bills_writes else 0
        uncached = n - cached - billed_writes
        cost = (uncached * p.input + cached * p.cached_input + self._write_cost(billed_writes)
                + turn.output_tokens * p.output) / MILLION
        return TurnResult(idx, n, cached, written, cost, uncached, turn.output_tokens, t, detail, why)

    def _write_price(self) -> float:
        return self.params.prices.input

    def _write_cost(self, written: int) -> float:
        """USD per million tokens times tokens, for the writes of the turn just stepped."""
        return written * self._write_price()

    def _step(self, turn: TurnPrompt, idx: int, t: float) -> tuple[int, int, str, Why | None]:
        """(cached tokens, cache-write tokens, one-line detail, why it read no more: None when it read
        all it could); may raise before changing state."""
        raise NotImplementedError


@dataclass(slots=True)
class _Stored:
    tokens: np.ndarray
    last_used: float


class OpenAISimulator(Simulator):
    """Automatic caching of prompts >= min_prefix_tokens; hits in increment_tokens steps; idle TTL."""

    kind = "openai"
    params: OpenAIParams

    def __init__(self, params: ProviderParams):
        super().__init__(params)
        self._stored: list[_Stored] = []
        self._ever_stored = False      # an empty store after turn 1: expired (True) or never cacheable

    def _step(self, turn: TurnPrompt, idx: int, t: float) -> tuple[int, int, str, Why | None]:
        p, toks = self.params, turn.token_ids
        n = len(toks)
        alive = [s for s in self._stored if t - s.last_used <= p.ttl_s]
        gone = [s for s in self._stored if t - s.last_used > p.ttl_s]
        expired = len(gone)
        shared = [first_difference(s.tokens, toks) for s in alive]
        best = max(range(len(alive)), key=shared.__getitem__, default=None)
        longest = shared[best] if best is not None else 0
        cacheable = n >= p.min_prefix_tokens
        cached = 0
        if best is not None and cacheable and longest >= p.min_prefix_tokens:
            cached = longest - (longest - p.min_prefix_tokens) % p.increment_tokens
            alive[best].last_used = t                      # a hit keeps the entry warm
        diverged = best is not None and longest < len(alive[best].tokens)
        why = self._why(toks, idx, t, cached, longest, diverged, len(alive), gone)
        if cacheable:
            # A stored prompt that is a prefix of this one is subsumed by it: drop it, store this one
            # unless it is itself a prefix of something kept (then the hit above refreshed that).
            kept = [s for s, m in zip(alive, shared) if m < len(s.tokens)]
            if not any(m == n for s, m in zip(alive, shared) if m < len(s.tokens)):
                kept.append(_Stored(toks, t))
            alive = kept
        self._stored = alive
        steps = "whole tokens" if p.increment_tokens == 1 else f"{p.increment_tokens}-token steps"
        detail = (f"prompt under {p.min_prefix_tokens} tokens: not cached" if not cacheable else
                  f"longest shared prefix {longest} -> {cached} cached in {steps}")
        if expired:
            detail += f"; {expired} entr{'y' if expired == 1 else 'ies'} expired"
        self._ever_stored = self._ever_stored or bool(alive)
        return cached, 0, detail, why

    def _why(self, toks: np.ndarray, idx: int, t: float, cached: int, longest: int, diverged: bool,
             alive: int, gone: list[_Stored]) -> Why | None:
        """Why this turn read `cached` and no more (None: all it could), from the `alive` entries'
        longest shared prefix and the entries that expired since the last turn (`gone`)."""
        p, n = self.params, len(toks)
        if n < p.min_prefix_tokens:
            return R.below_minimum(self.kind, n, p.min_prefix_tokens)
        lapsed = max(((first_difference(s.tokens, toks), s) for s in gone), key=lambda x: x[0], default=None)
        if lapsed is not None and lapsed[0] >= p.min_prefix_tokens and lapsed[0] > longest:
            return R.ttl_lapse(self.kind, lapsed[0], t - lapsed[1].last_used, p.ttl_s)
        if cached == 0:
            if alive:
                return R.short_prefix(self.kind, longest, p.min_prefix_tokens)
            if idx == 1:
                return R.first_turn(self.kind)
            return R.all_expired(self.kind, p.ttl_s) if self._ever_stored else \
                R.none_stored(self.kind, p.min_prefix_tokens)
        if cached < longest:
            return R.steps(self.kind, longest, cached, p.min_prefix_tokens, p.increment_tokens, diverged)
        return None


class GeminiSimulator(OpenAISimulator):
    """Gemini implicit caching: automatic, a minimum per model, whole tokens, an idle lifetime."""

    kind = "gemini"
    params: GeminiParams       # type: ignore[assignment]   # the same knobs OpenAISimulator reads


@dataclass(slots=True)
class _Written:
    source: int        # which stored prompt holds the prefix
    length: int
    last_used: float
    order: int         # when it was written: matching considers the latest ones


class OpenAIBreakpointSimulator(Simulator):
    """GPT-5.6 and later: explicit prompt_cache_breakpoints (and one implicit, at the prompt's end,
    in implicit mode); at most max_writes written per request, the latest ones; a read is the
    longest live breakpoint prefix among the conversation's latest match_breakpoints, at any
    distance (no lookback limit), not rounded; writes billed at ``prices.cache_write``."""

    kind = "openai"
    bills_writes = True
    params: OpenAIParams

    def __init__(self, params: ProviderParams):
        super().__init__(params)
        self._written: list[_Written] = []
        self._sources: dict[int, np.ndarray] = {}
        self._count = 0
        self._ever_written = False     # nothing live after turn 1: expired (True) or never written

    def _write_price(self) -> float:
        return self.params.prices.cache_write

    def _step(self, turn: TurnPrompt, idx: int, t: float) -> tuple[int, int, str, Why | None]:
        p, toks = self.params, turn.token_ids
        n = len(toks)
        gone = [w for w in self._written if t - w.last_used > p.lifetime_s]
        self._written = [w for w in self._written if t - w.last_used <= p.lifetime_s]
        live = list(self._written)
        recent = sorted(self._written, key=lambda w: w.order)[-p.match_breakpoints:]
        shared = {sid: first_difference(src, toks) for sid, src in self._sources.items()
                  if any(w.source == sid for w in recent)}
        hit = max((w for w in recent if w.length <= n and shared[w.source] >= w.length),
                  key=lambda w: w.length, default=None)
        read = hit.length if hit is not None else 0
        if hit is not None:
            hit.last_used = t                               # a read keeps the entry alive
        implicit = [n] if p.mode == "implicit" and n else []
        room = p.max_writes - len(implicit)
        explicit = list(turn.breakpoints)
        writable = explicit[len(explicit) - room:] if room > 0 else []
        passed = len(explicit) - len(writable)
        written = [b for b in sorted(set(writable + implicit)) if b > read and b >= p.min_prefix_tokens]
        creation = written[-1] - read if written else 0
        why = self._why(toks, idx, t, read, creation, live, gone)   # before this turn's writes and pruning
        if written:
            sid = self._count
            self._sources[sid] = toks
            for b in written:
                self._count += 1
                self._written.append(_Written(sid, b, t, self._count))
        self._ever_written = self._ever_written or bool(written)
        used = {w.source for w in self._written}
        self._sources = {k: v for k, v in self._sources.items() if k in used}
        parts = [f"read {read}" if read else "no live breakpoint prefix to read"]
        if written:
            parts.append(f"wrote {creation} at {', '.join(map(str, written))}")
        if passed:
            parts.append(f"{passed} earlier breakpoint(s) not written (at most {p.max_writes} writes per request)")
        return read, creation, "; ".join(parts), why

    def _why(self, toks: np.ndarray, idx: int, t: float, read: int, wrote: int, live: list[_Written],
             gone: list[_Written]) -> Why | None:
        """Why this turn read `read` and no more (None: all it could), from the entries live at this
        turn and those that expired since the last one (`gone`)."""
        p, n = self.params, len(toks)
        if n < p.min_prefix_tokens:
            return R.below_minimum(self.kind, n, p.min_prefix_tokens)

        shared: dict[int, int] = {}       # per stored prompt, once: a prompt holds many breakpoints

        def matches(w: _Written) -> bool:
            if w.source not in shared:
                shared[w.source] = first_difference(self._sources[w.source], toks)
            return w.length <= n and shared[w.source] >= w.length

        lapsed = max((w for w in gone if matches(w)), key=lambda w: w.length, default=None)
        if lapsed is not None and lapsed.length > read:
            return R.ttl_lapse(self.kind, lapsed.length, t - lapsed.last_used, p.lifetime_s)
        older = max((w.length for w in live if matches(w)), default=0)
        if older > read:       # live and matching, but not among the latest match_breakpoints
            return R.too_many_breakpoints_ago(older, p.match_breakpoints)
        if read:
            return None
        if live:
            at = max(shared.get(s, first_difference(self._sources[s], toks)) for s in {w.source for w in live})
            return R.diverged_written(at, min(w.length for w in live), n)
        if idx == 1:
            return R.first_turn(self.kind, wrote=wrote, minimum=p.min_prefix_tokens)
        if gone or self._ever_written:
            return R.all_expired(self.kind, p.lifetime_s)
        return R.nothing_written(self.kind, p.min_prefix_tokens)


@dataclass(slots=True)
class _Entry:
    source: int        # which stored prompt holds the prefix
    expires: float
    ttl: float


class AnthropicSimulator(Simulator):
    """Explicit breakpoints; reads at the longest live prefix within the lookback, writes the rest."""

    kind = "anthropic"
    bills_writes = True
    params: AnthropicParams

    def __init__(self, params: ProviderParams):
        super().__init__(params)
        self._entries: dict[int, list[_Entry]] = {}       # prefix length -> entries (one per content)
        self._sources: dict[int, np.ndarray] = {}
        self._next_source = 0
        self._write_usd = 0.0                              # the last turn's writes, per TTL stretch
        self._ever_written = False     # nothing live after turn 1: expired (True) or never written

    def _breakpoints(self, turn: TurnPrompt, idx: int) -> dict[int, str]:
        """This request's breakpoints -> their TTL: its own, and the automatic one (the top-level
        cache_control, at the end of the last block) when the preset says so. Refused as the API
        refuses them: more than max_breakpoints (the automatic one counts), or a 1h entry after a 5m one."""
        p = self.params
        out = dict(zip(turn.breakpoints, turn.breakpoint_ttls or (p.ttl,) * len(turn.breakpoints)))
        if p.automatic and len(turn.token_ids):
            out.setdefault(len(turn.token_ids), p.ttl)
        if len(out) > p.max_breakpoints:
            auto = " (the automatic one included)" if p.automatic else ""
            raise SimulationError(f"has {len(out)} cache_control breakpoints{auto}; at most {p.max_breakpoints} "
                                  "are allowed", turn=idx, field="breakpoints",
                                  hint="keep the last breakpoint and the ones before long stable parts; "
                                       f"each looks back {p.lookback_blocks} blocks on its own")
        order = sorted(out)
        for a, b in zip(order, order[1:]):
            if TTLS.index(out[a]) < TTLS.index(out[b]):
                raise SimulationError(f"a 1h breakpoint at token {b} comes after a 5m breakpoint at token {a}",
                                      turn=idx, field="breakpoint_ttls",
                                      hint="entries with a longer TTL must come first: mark the earlier "
                                           "(more stable) prefixes 1h and the later ones 5m")
        return out

    def _write_price(self) -> float:
        return self.params.write_price

    def _write_cost(self, written: int) -> float:
        return self._write_usd

    def _expire(self, t: float) -> list[tuple[int, _Entry, np.ndarray]]:
        """Drop the entries expired at `t`; returns them (prefix length, entry, its prompt)."""
        lost = []
        for length in list(self._entries):
            live = [e for e in self._entries[length] if t <= e.expires]
            lost += [(length, e, self._sources[e.source]) for e in self._entries[length] if t > e.expires]
            if live:
                self._entries[length] = live
            else:
                del self._entries[length]
        used = {e.source for es in self._entries.values() for e in es}
        self._sources = {k: v for k, v in self._sources.items() if k in used}
        return lost

    def _step(self, turn: TurnPrompt, idx: int, t: float) -> tuple[int, int, str, Why | None]:
        p, toks = self.params, turn.token_ids
        ttl_of = self._breakpoints(turn, idx)
        bps = tuple(sorted(ttl_of))
        lost = self._expire(t)
        self._write_usd = 0.0
        if not bps:
            return 0, 0, "no cache_control breakpoint: nothing read or written", \
                R.breakpoint_missing(turn.breakpoint_mode)
        shared = {sid: first_difference(src, toks) for sid, src in self._sources.items()}

        def live(length: int) -> _Entry | None:
            return next((e for e in self._entries.get(length, ()) if shared[e.source] >= length), None)

        # Without block ends, an earlier breakpoint's prefix that this prompt shares is taken as a
        # block boundary here too: the same content ended a block there.
        bounds = sorted(set(turn.block_ends or (x for x in self._entries if x <= len(toks))) | set(bps))
        read, hit, at = 0, None, 0
        for b in bps:
            i = bisect.bisect_left(bounds, b)                 # bounds[i] == b
            for j in range(i, max(-1, i - p.lookback_blocks - 1), -1):
                if bounds[j] <= read:
                    break
                e = live(bounds[j])
                if e is not None:
                    read, hit, at = bounds[j], e, b
                    break
        if hit is not None:
            hit.expires = t + hit.ttl                         # a read refreshes the entry for free
        written = [b for b in bps if b > read and b >= p.min_cacheable_tokens]
        creation = written[-1] - read if written else 0
        why = self._why(toks, idx, t, read, bps, bounds, shared, lost, creation)   # before this turn's writes
        self._ever_written = self._ever_written or bool(written)
        if written:
            sid, self._next_source = self._next_source, self._next_source + 1
            self._sources[sid] = toks
            for b in written:
                life = p.ttl_s_of(ttl_of[b])
                self._entries.setdefault(b, []).append(_Entry(sid, t + life, life))
        # Each stretch is written at the TTL of the breakpoint that ends it (1h ones come first).
        start = read
        for b in written:
            self._write_usd += (b - start) * p.write_price_of(ttl_of[b])
            start = b
        parts = [f"read {read} (breakpoint at {at})" if read else "no live prefix to read"]
        if written:
            ttls = sorted({ttl_of[b] for b in written}, key=TTLS.index)
            parts.append(f"wrote {creation} ({', '.join(ttls)}) at {', '.join(map(str, written))}")
        skipped = [b for b in bps if b > read and b < p.min_cacheable_tokens]
        if skipped:
            parts.append(f"under {p.min_cacheable_tokens} tokens, not cached: {', '.join(map(str, skipped))}")
        return read, creation, "; ".join(parts), why

    def _why(self, toks: np.ndarray, idx: int, t: float, read: int, bps: tuple[int, ...], bounds: list[int],
             shared: dict[int, int], lost: list[tuple[int, _Entry, np.ndarray]], wrote: int) -> Why | None:
        """Why this turn read `read` and no more (None: all it could): from the entries live at this
        turn (`shared`: each prompt's shared prefix with this one) and those that expired since the last."""
        p, n = self.params, len(toks)
        if not read and n < p.min_cacheable_tokens:
            return R.below_minimum(self.kind, n, p.min_cacheable_tokens)
        lapsed = max(((length, e) for length, e, src in lost if length <= n and first_difference(src, toks) >= length),
                     key=lambda x: x[0], default=None)
        if lapsed is not None and lapsed[0] > read:
            length, e = lapsed
            return R.ttl_lapse(self.kind, length, t - (e.expires - e.ttl), e.ttl)
        best = max((length for length, es in self._entries.items()
                    if length <= n and any(shared[e.source] >= length for e in es)), default=0)
        if best > read:        # live and shared, yet no breakpoint read it
            if best in bounds and best <= bps[-1]:
                return R.lookback_exceeded(best, bps[bisect.bisect_left(bps, best)], p.lookback_blocks)
            return R.breakpoint_moved(best, bps[-1])
        if read:
            return None
        if self._entries:
            return R.diverged_written(max(shared.values()), min(self._entries), n)
        if idx == 1:
            return R.first_turn(self.kind, wrote=wrote, minimum=p.min_cacheable_tokens)
        if lost or self._ever_written:
            return R.all_expired(self.kind, p.ttl_seconds)
        return R.nothing_written(self.kind, p.min_cacheable_tokens)


# Block-hash chains remembered, in blocks (about 80 bytes each: 20 MB): a budget in blocks, not in
# prompts, since a prompt of a long window is thousands of blocks (the former 2,048 prompts of 2,000
# blocks each come to about 330 MB by that arithmetic).
CHAIN_MEMO_BLOCKS = 1 << 18
_CHAINS: OrderedDict[tuple[str, int, bytes], list[BlockHash]] = OrderedDict()
_chain_blocks = 0     # blocks in _CHAINS
_chains_lock = threading.Lock()   # the app simulates sessions on several threads


def _recall(key: tuple[str, int, bytes]) -> list[BlockHash] | None:
    with _chains_lock:
        got = _CHAINS.get(key)
        if got is not None:
            _CHAINS.move_to_end(key)
        return got


def _remember(key: tuple[str, int, bytes], chain: list[BlockHash]) -> None:
    global _chain_blocks
    if len(chain) > CHAIN_MEMO_BLOCKS:
        return
    with _chains_lock:
        old = _CHAINS.pop(key, None)
        _chain_blocks += len(chain) - (len(old) if old is not None else 0)
        _CHAINS[key] = chain
        while _chain_blocks > CHAIN_MEMO_BLOCKS:
            _chain_blocks -= len(_CHAINS.popitem(last=False)[1])


class VLLMSimulator(Simulator):
    """Automatic prefix caching over full blocks keyed by a hash chain (the engine's own,
    `engine.kv.block_hashes`); LRU eviction, tails first."""

    kind = "vllm"
    params: VLLMParams

    def __init__(self, params: ProviderParams):
        super().__init__(params)
        # LRU first; when unbounded a BlockSet (nothing is evicted, so recency does not matter, and a
        # session holds a key per block of every prompt: flat arrays, not a set of bytes objects)
        self._blocks: OrderedDict[BlockHash, None] | BlockSet = \
            BlockSet() if self.params.capacity_blocks is None else OrderedDict()
        self._prev: np.ndarray = np.empty(0, np.uint32)
        self._prev_hashes: list[BlockHash] = []
        self._held: np.ndarray | None = None     # what the previous turn left held: for the reason

    def block_hashes(self, toks: np.ndarray) -> list[BlockHash]:
        """One key per full block of block_size tokens. The chain is hashed every hash_block_size
        tokens, hash[i] = H(hash[i-1] + bytes of i-th piece) (`engine.kv.block_hashes`); a block's
        key is the hash at its last piece, which stands for its whole prefix (vLLM merges the
        finer hashes into each block the same way)."""
        per = self.params.block_size // self.params.hash_size
        chain = self._chain(toks)
        return chain if per == 1 else chain[per - 1::per]

    def _chain(self, toks: np.ndarray) -> list[BlockHash]:
        size, algo = self.params.hash_size, self.params.hash_algo
        # The same prompt simulated again (the workbench re-simulates a session after each edit,
        # and only the edited turn changed) takes its chain from a small memo keyed by its content.
        memo_key = (algo, size, hashlib.blake2b(toks.tobytes(), digest_size=16).digest())
        got = _recall(memo_key)
        if got is None:
            # Blocks inside the prefix shared with the previous prompt hash the same: reuse them, so
            # a growing session hashes only its new tokens.
            keep = min(first_difference(self._prev, toks) // size, len(self._prev_hashes))
            got = block_hashes(toks, size, algo=algo, known=self._prev_hashes[:keep])
            _remember(memo_key, got)
        self._prev, self._prev_hashes = toks, got
        return got

    def _step(self, turn: TurnPrompt, idx: int, t: float) -> tuple[int, int, str, Why | None]:
        p, toks = self.params, turn.token_ids
        hashes, blocks = self.block_hashes(toks), self._blocks
        limit = max(len(toks) - 1, 0) // p.block_size      # one token is always recomputed for logits
        hit = 0
        if not isinstance(blocks, BlockSet):
            while hit < limit and hashes[hit] in blocks:
                hit += 1
        held = turn.held_ids                                # the prompt, and the reply as generated
        if len(held) > len(toks):
            hashes = self.block_hashes(held)                # the prompt's blocks, then the reply's
        new = 0
        if isinstance(blocks, BlockSet):
            before = len(blocks)
            held_before = blocks.add(block_keys(hashes))    # looked up before any is added
            hit = leading(held_before[:limit])
            new = len(blocks) - before
        else:
            # Touch the tail first, so that block 0 is the most recently used: eviction then takes
            # the tails of old prompts before the heads every prompt shares.
            for h in reversed(hashes):
                if h in blocks:
                    blocks.move_to_end(h)
                else:
                    blocks[h] = None
                    new += 1
        evicted = 0
        if isinstance(blocks, OrderedDict) and p.capacity_blocks is not None:
            while len(blocks) > p.capacity_blocks:
                blocks.popitem(last=False)
                evicted += 1
        detail = f"{hit} of {limit} reusable full blocks cached ({p.block_size} tokens each)"
        if len(held) > len(toks):
            detail += f"; holds {len(hashes)} blocks with the reply"
        if evicted:
            detail += f"; {evicted} blocks evicted"
        capacity = "unbounded" if p.capacity_blocks is None else f"{p.capacity_blocks:,} blocks"
        why = _engine_why(self.kind, idx, toks, self._held, hit * p.block_size, p.block_size, "block", capacity)
        self._held = held
        return hit * p.block_size, new * p.block_size, detail, why


class SGLangSimulator(Simulator):
    """RadixAttention: the engine's own radix tree (`engine.radix.RadixKVCache`) in its simulated
    mode, pages of page_size, a cap in tokens; LRU leaf eviction."""

    kind = "sglang"
    params: SGLangParams

    def __init__(self, params: ProviderParams):
        super().__init__(params)
        self.tree = RadixKVCache.simulated(self.params.capacity_tokens, page_size=self.params.page_size)
        self._held: np.ndarray | None = None     # what the previous turn left held: for the reason

    @property
    def stored_tokens(self) -> int:
        return self.tree.nbytes          # a simulated token weighs one byte

    def _step(self, turn: TurnPrompt, idx: int, t: float) -> tuple[int, int, str, Why | None]:
        toks, ps, tree = turn.token_ids, self.params.page_size, self.tree
        n = len(toks)
        cached = tree.match(toks[:max(n - 1, 0) // ps * ps]).length     # one token is always recomputed
        evicted_before = tree.evicted_bytes
        held = turn.held_ids
        new = tree.insert(held)                  # its whole pages: the prompt and the reply as generated
        evicted = tree.evicted_bytes - evicted_before
        detail = f"longest stored prefix {cached}" + (f" (pages of {ps})" if ps > 1 else "")
        if evicted:
            detail += f"; {evicted} tokens evicted"
        cap = self.params.capacity_tokens
        why = _engine_why(self.kind, idx, toks, self._held, cached, ps, "page",
                          "unbounded" if cap is None else f"{cap:,} tokens")
        self._held = held
        return cached, new, detail, why


def _engine_why(kind: str, idx: int, toks: np.ndarray, held: np.ndarray | None, cached: int, unit: int,
                what: str, capacity: str) -> Why | None:
    """Why an engine (vLLM blocks, SGLang pages of `unit` tokens) read `cached` tokens of this
    prompt and no more, against what the previous turn left `held` (None on the first turn)."""
    n = len(toks)
    reusable = max(n - 1, 0) // unit * unit          # before the last token, in whole units
    if held is None:
        return R.first_turn(kind, engine=True) if idx == 1 and not cached else None
    if not cached and not reusable:
        return R.no_full_unit(kind, n, unit, what)
    d = first_difference(held, toks)
    expected = min(d, reusable) // unit * unit
    if cached < expected:
        return R.evicted(kind, expected, cached, capacity)
    if d < len(held) and d < n and cached <= d:
        return R.engine_diverged(kind, d, len(held), cached, unit, what)
    if cached < d:
        return R.engine_rounded(kind, d, cached, unit, what, whole_prompt=d >= n)
    return None


_SIMULATORS: dict[str, type[Simulator]] = {
    "openai": OpenAISimulator, "anthropic": AnthropicSimulator, "vllm": VLLMSimulator,
    "sglang": SGLangSimulator, "gemini": GeminiSimulator}
# The providers the panels show, in their order (plain names: each provider's default preset).
# Gemini and the other variants (openai@gpt-5.6) run when asked for by name.
PROVIDERS: tuple[str, ...] = ("openai", "anthropic", "vllm", "sglang")


def _simulator_class(params: ProviderParams) -> type[Simulator]:
    if isinstance(params, OpenAIParams) and params.caching == "breakpoints":
        return OpenAIBreakpointSimulator
    return _SIMULATORS[params.kind]


def make_simulator(provider: str = "openai", params: ProviderParams | None = None) -> Simulator:
    """A fresh simulator for a preset name, or for ``params`` (``provider`` must then agree)."""
    if params is None:
        params = ProviderParams.load(provider)
    elif provider not in (params.kind, params.name, params.preset):
        raise ProviderParamsError(f"params are for {params.kind!r} (preset {params.name!r}) but "
                                  f"provider={provider!r}", preset=params.name,
                                  hint=f"pass provider={params.kind!r} or leave params out")
    return _simulator_class(params)(params)


def simulate(turns: Sequence[TurnPrompt], provider: str = "openai",
             params: ProviderParams | None = None) -> Simulation:
    """Feed a session's requests, in order, to one provider's simulated cache."""
    sim = make_simulator(provider, params)
    results = tuple(sim.process(t) for t in turns)
    return Simulation(sim.params.name, results, sim.params)


__all__ = [
    "PROVIDERS", "AnthropicSimulator", "GeminiSimulator", "OpenAIBreakpointSimulator", "OpenAISimulator",
    "SGLangSimulator", "Simulation", "Simulator", "TurnPrompt", "TurnResult", "VLLMSimulator", "make_simulator",
    "simulate",
]
