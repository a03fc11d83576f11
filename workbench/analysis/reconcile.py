"""Reconciliation (issue 32, docs/logs.md section 8): each logged call's cache figures as the
provider or engine reported them (`response.usage`) beside what the workbench predicts for it,
and the difference classified.

Per conversation and provider, the calls are fed in turn order to that provider's simulator
(providers.py: the preset's rules, or the engines' exact caches), which predicts the cached and
the written tokens of each. The class of a call says why its cache read is what it is:

- reported == predicted (the rules explain the call): `match` when the call read everything the
  earlier calls of the conversation offered (up to the rules' own granularity: OpenAI's 128-token
  steps, vLLM's blocks); otherwise why it read less, the first of: `below_minimum`, `prefix_break`
  (the prefix-stability analysis's cause code), `ttl_lapse`, `breakpoint_missing`,
  `breakpoint_moved`, `lookback_exceeded`;
- reported > predicted: `over_report`, with the rule that allowed less (a preset out of date, or,
  for a hosted provider, a prefix another conversation cached: its simulation is per conversation);
- reported < predicted on a prefix the rules find stable and live: `provider_miss` (routing or
  eviction), when the reported figure is one the rules could give; otherwise `unexplained`, as is
  anything the steps above do not name: a defect of the workbench's, to investigate.

Cache scope. A hosted provider (OpenAI, Anthropic, Gemini) is simulated per conversation: its
cache is spread over machines a conversation is routed among, and the presets' rules are stated
per prompt prefix, so what another conversation left is not something the rules promise (an
`over_report` of `cross_conversation` when it shows). A serving engine (the `vllm` and `sglang`
kinds, and our `serve-engine`) has one prefix cache per server process, which every request
shares: a conversation's first call reads what earlier conversations left (the template's opening,
a shared system prompt). With `shared_engines`, the Reconciler therefore does not simulate an
engine's calls itself but hands them back as `EngineCall`s (its prompt, the reply the engine
generated), and `reconcile_engines.py` feeds every call of one engine provider, across
conversations in timestamp order, to one simulator.

The classifier keeps its own light account of what earlier calls offered (their prompts, the
prefixes they wrote) beside the simulator, which it never looks inside: the simulator predicts,
the account explains. Token counts are the workbench's own (the line's template and tokenizer);
where the provider's prompt size differs from ours, the difference is the tolerance of every
comparison (`slack`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ..difference import first_difference
from ..errors import WorkbenchError
from ..segments import originals
from .logs import BadLine
from .provider_params import AnthropicParams, OpenAIParams, ProviderParams, SGLangParams, VLLMParams
from .providers import DEFAULT_GAP_S, Simulator, TurnPrompt, make_simulator
from .reconcile_usage import Reported, parse_reported, reply_token_ids

CLASSES = ("match", "prefix_break", "ttl_lapse", "below_minimum", "breakpoint_missing", "breakpoint_moved",
           "lookback_exceeded", "provider_miss", "over_report", "unexplained")
# The local engine (`workbench serve-engine`) answers from an exact token radix cache, one token a
# page, unbounded: the SGLang simulator with the shipped preset is that cache. One difference: it
# computes the KV of a reply's last sampled token too and holds the whole reply (engine/decode.py),
# which matters where the reply's ids are known (`TurnPrompt.hold_last`). From the reply's text, the
# template's end-of-turn token stands last and is the one dropped, which for a reply cut at the
# length limit (no end-of-turn generated) is again what the engine holds.
ENGINE_PROVIDERS = {"workbench-engine": "sglang", "serve-engine": "sglang"}
KEEP_SOURCES = 8          # earlier calls whose written prefixes the account keeps (per conversation and provider)

ADVICE = {
    "match": "nothing to do: the provider read what its rules allow",
    "prefix_break": "the prompt changed before the cached prefix ended: fix the cause code's cause (analyze "
                    "SESSION names it and its one-click fix)",
    "ttl_lapse": "the gap since the prefix was last used exceeds the cache's lifetime: where gaps sit between "
                 "5 and 60 minutes use Anthropic's 1h cache_control ttl, OpenAI's extended (24h) retention",
    "below_minimum": "the prompts are under the model's minimum cacheable length: nothing is cached; keep a "
                     "long stable prefix (system prompt, tools) or accept it",
    "breakpoint_missing": "the request has no cache_control breakpoint: nothing is read or written; mark the "
                          "end of the stable prefix (or send the top-level cache_control)",
    "breakpoint_moved": "no breakpoint of this request reaches the prefix an earlier call wrote: keep a "
                        "breakpoint where the earlier one was, or at the end of the conversation",
    "lookback_exceeded": "the written prefix lies more than the lookback (Anthropic: 20 blocks) before this "
                         "request's breakpoint: add a breakpoint nearer to it",
    "provider_miss": "the prefix was stable and live, yet the provider read less: routing or eviction; for "
                     "OpenAI send the same prompt_cache_key with every call of a conversation",
    "over_report": "the provider read more than its preset's rules allow: the preset is out of date (the rule "
                   "is named), or another conversation cached the prefix",
    "unexplained": "none of the above: a defect of the workbench's to investigate (the call is listed)",
}


@dataclass(frozen=True, slots=True)
class CallCheck:
    """One call with usage, reconciled. `tokens`: the cached tokens the class accounts for (see
    `to_json`'s fields in docs/logs.md): what earlier calls offered and this call did not read for
    a loss class, the reported-vs-predicted difference for provider_miss, over_report and
    unexplained, 0 for match."""
    file: str
    line: int
    conversation_id: str
    timestamp: str | None
    provider: str
    cls: str
    cause: str | None          # prefix_break: the cause code; over_report: the rule; else None
    predicted_cached: int
    predicted_written: int
    reported: Reported
    tokens: int
    prompt_tokens: int         # as rendered here
    turn: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "conversation_id": self.conversation_id,
                "timestamp": self.timestamp, "provider": self.provider, "class": self.cls, "cause": self.cause,
                "predicted": {"cached": self.predicted_cached, "written": self.predicted_written},
                "reported": self.reported.to_json(), "tokens": self.tokens}


@dataclass(frozen=True, slots=True)
class EngineCall:
    """One call to a serving engine, kept for the pass over the engine's shared cache
    (reconcile_engines.py) instead of being simulated within its conversation. The prompt is kept
    as a difference from the conversation's previous call to the same provider (`base` tokens of
    that prompt, then `tail`): a conversation's prompts mostly extend each other, so this holds
    about the conversation's own tokens, not the sum of its prompts. `reply`: the reply the engine
    generated after this prompt, as it holds it (None: unknown). `when`: seconds since the epoch
    (None: the line had no timestamp)."""
    provider: str
    conversation_id: str
    turn: int
    file: str
    line: int
    timestamp: str | None
    when: float | None
    base: int
    tail: np.ndarray
    reply: np.ndarray | None
    reported: Reported | None
    cause: str | None
    hold_last: bool = False      # the engine holds `reply` whole (TurnPrompt.hold_last)


@dataclass(frozen=True, slots=True)
class SessionReconciliation:
    """A conversation's reconciled calls. `calls`: calls analysed; `rewrite`: (cache-write tokens,
    the largest prompt) over its calls with usage, in the provider's tokens (None without usage).
    `engine`: its calls to serving engines, for the shared pass (only with `shared_engines`)."""
    calls: int
    checks: tuple[CallCheck, ...] = ()
    diagnostics: tuple[BadLine, ...] = ()
    rewrite: tuple[int, int] | None = None
    engine: tuple[EngineCall, ...] = ()


# ------------------------------------------------------------------ presets
@lru_cache(maxsize=64)
def provider_params(name: str) -> ProviderParams | str:
    """The preset a line's provider names (an engine's name maps to its simulator's preset), or
    why there is none."""
    try:
        return ProviderParams.load(ENGINE_PROVIDERS.get(name, name))
    except WorkbenchError as exc:
        return f"provider: {exc.message}"


def _kind(p: ProviderParams) -> str:
    if isinstance(p, AnthropicParams):
        return "anthropic"
    if isinstance(p, OpenAIParams) and p.caching == "breakpoints":
        return "openai_bp"
    if isinstance(p, VLLMParams | SGLangParams):
        return "engine"
    return "auto"                    # OpenAI automatic, Gemini


# ------------------------------------------------------------------ the per-provider account
@dataclass(slots=True)
class _Written:
    pos: int
    src: int
    last_used: float


@dataclass(slots=True)
class _Track:
    """One provider's simulator for one conversation, and the account of what earlier calls offered."""
    params: ProviderParams
    kind: str
    sim: Simulator
    prev_ids: np.ndarray | None = None
    prev_held: np.ndarray | None = None
    prev_time: float = 0.0
    entries: list[_Written] = field(default_factory=list)
    sources: dict[int, np.ndarray] = field(default_factory=dict)
    nsrc: int = 0

    # the rules, as numbers -----------------------------------------------------------------------
    @property
    def minimum(self) -> int:
        p = self.params
        if isinstance(p, AnthropicParams):
            return p.min_cacheable_tokens
        return int(getattr(p, "min_prefix_tokens", 0))

    @property
    def ttl(self) -> float | None:
        p = self.params
        if isinstance(p, AnthropicParams):
            return p.ttl_seconds
        if isinstance(p, OpenAIParams):
            return p.lifetime_s if p.caching == "breakpoints" else p.ttl_s
        return getattr(p, "ttl_s", None)

    @property
    def page(self) -> int:
        p = self.params
        return p.block_size if isinstance(p, VLLMParams) else p.page_size if isinstance(p, SGLangParams) else 1

    def rules(self, x: int) -> int:
        """What the rules read of a shared prefix of x tokens (automatic kinds and engines)."""
        if self.kind == "engine":
            return x // self.page * self.page
        m = self.minimum
        if x < m:
            return 0
        inc = int(getattr(self.params, "increment_tokens", 1))
        return x - (x - m) % inc

    def valid(self, r: int) -> bool:
        """Whether a reported figure is one these rules could give at all."""
        if self.kind == "engine":
            return r % self.page == 0
        if r == 0:
            return True
        if r < self.minimum:
            return False
        return self.kind != "auto" or self.rules(r) == r

    def breakpoints(self, turn: TurnPrompt) -> list[int]:
        """The prefixes this request may read and write at (breakpoint kinds)."""
        p, n = self.params, len(turn.token_ids)
        if isinstance(p, AnthropicParams):
            return sorted(set(turn.breakpoints) | ({n} if p.automatic and n else set()))
        assert isinstance(p, OpenAIParams)
        implicit = [n] if p.mode == "implicit" and n else []
        room = p.max_writes - len(implicit)
        explicit = list(turn.breakpoints)
        return sorted(set((explicit[len(explicit) - room:] if room > 0 else []) + implicit))


@dataclass(frozen=True, slots=True)
class _Offer:
    """What the earlier calls offered this one: `full`, what it could read had nothing changed;
    `shared`, what it could read of the prefix it still shares; `prev_shared`, its common prefix
    with the previous call; `best`, the written prefix `shared` ends at (breakpoint kinds)."""
    full: int
    shared: int
    prev_shared: int
    gap: float
    best: _Written | None


def _offer(tr: _Track, ids: np.ndarray, t: float) -> _Offer | None:
    if tr.prev_ids is None:
        return None
    n, gap = len(ids), t - tr.prev_time
    if tr.kind in ("auto", "engine"):
        prev = tr.prev_held if tr.kind == "engine" and tr.prev_held is not None else tr.prev_ids
        cap = max(n - 1, 0) if tr.kind == "engine" else n      # an engine always recomputes the last token
        full = min(len(prev), cap)
        s = min(first_difference(prev, ids), full)
        return _Offer(full, s, s, gap, None)
    prev_shared = first_difference(tr.prev_ids, ids)
    shared_by: dict[int, int] = {}
    full, shared, best = 0, 0, None
    for e in tr.entries:
        if e.pos > n:
            continue
        full = max(full, e.pos)
        s = shared_by.get(e.src)
        if s is None:
            s = shared_by[e.src] = first_difference(tr.sources[e.src], ids)
        if s >= e.pos and e.pos >= shared:
            shared, best = e.pos, e
    return _Offer(full, shared, prev_shared, gap, best)


def _loss(tr: _Track, turn: TurnPrompt, P: int, o: _Offer | None, cause: str | None) -> tuple[str, str | None, int]:
    """Reported == predicted: why this call read P, and how much less than offered (class, cause, offered)."""
    if o is None:
        return "match", None, 0          # the conversation's first call here: nothing to reuse
    n, m = len(turn.token_ids), tr.minimum
    prev_len = len(tr.prev_ids) if tr.prev_ids is not None else 0
    if tr.kind in ("anthropic", "openai_bp"):
        bps = tr.breakpoints(turn)
        if not bps and o.prev_shared >= m and P == 0:
            return "breakpoint_missing", None, max(o.shared, o.prev_shared)
        if m and min(prev_len, n) < m and o.prev_shared > 0 and P == 0:
            return "below_minimum", None, min(o.prev_shared, prev_len, n)
        if P >= o.full:
            return "match", None, o.full
        if o.shared < o.full and P >= o.shared:
            return "prefix_break", cause or "diverged", o.full
        ttl = tr.ttl
        if o.best is not None and ttl is not None and t_of(turn) - o.best.last_used > ttl:
            return "ttl_lapse", None, o.full
        if isinstance(tr.params, AnthropicParams) and o.best is not None:
            return _reach(tr, turn, bps, o.best.pos), None, o.full
        if isinstance(tr.params, OpenAIParams) and o.best is not None:
            # Only the latest match_breakpoints written prefixes are matched: older ones are out of reach.
            return "lookback_exceeded", None, o.full
        return "unexplained", None, o.full
    if m and o.full < m and o.shared > 0 and P == 0:
        return "below_minimum", None, o.full
    if P >= tr.rules(o.full):
        return "match", None, tr.rules(o.full)
    if o.shared < o.full and P >= tr.rules(o.shared):
        return "prefix_break", cause or "diverged", tr.rules(o.full)
    ttl = tr.ttl
    if ttl is not None and o.gap > ttl:
        return "ttl_lapse", None, tr.rules(o.full)
    if tr.kind == "engine":
        return "provider_miss", None, tr.rules(o.full)      # the simulated engine's own capacity evicted it
    return "unexplained", None, tr.rules(o.full)


def t_of(turn: TurnPrompt) -> float:
    return float(turn.time_s or 0.0)


def _reach(tr: _Track, turn: TurnPrompt, bps: Sequence[int], pos: int) -> str:
    """Anthropic: why no breakpoint of this request read the prefix written up to `pos`."""
    after = [b for b in bps if b >= pos]
    bounds = sorted(set(turn.block_ends) | set(bps))
    j = bisect.bisect_left(bounds, pos)
    if not after or j >= len(bounds) or bounds[j] != pos:
        return "breakpoint_moved"
    i = bisect.bisect_left(bounds, min(after))
    assert isinstance(tr.params, AnthropicParams)
    return "lookback_exceeded" if i - j > tr.params.lookback_blocks else "unexplained"


def _over_rule(tr: _Track, turn: TurnPrompt, R: int, o: _Offer | None) -> str:
    """Reported more than predicted: the rule that allowed less."""
    if o is None:
        return "cross_conversation"      # a prefix cached before this conversation's first call here
    n, m, ttl = len(turn.token_ids), tr.minimum, tr.ttl
    if tr.kind == "engine":
        if R > max(n - 1, 0):
            return "last_token"
        if R % tr.page:
            return "block_size" if isinstance(tr.params, VLLMParams) else "page_size"
        return "capacity" if R <= tr.rules(o.shared) else "shared_prefix"
    if R < m:
        return "min_cacheable_tokens" if tr.kind == "anthropic" else "min_prefix_tokens"
    if tr.kind == "auto":
        if tr.rules(R) != R:
            return "increment_tokens"
        if ttl is not None and o.gap > ttl and R <= tr.rules(o.shared):
            return "ttl_s"
        return "shared_prefix"
    if not tr.breakpoints(turn):
        return "breakpoints"             # read without any breakpoint: automatic caching the preset lacks
    if o.best is not None and ttl is not None and t_of(turn) - o.best.last_used > ttl and R <= o.shared:
        return "ttl" if tr.kind == "anthropic" else "ttl_s"
    if R <= o.shared:
        return "lookback_blocks" if tr.kind == "anthropic" else "match_breakpoints"
    return "shared_prefix"


def _update(tr: _Track, turn: TurnPrompt, P: int) -> None:
    """The account after this call: its prompt, what it held and wrote, when."""
    ids, t = turn.token_ids, t_of(turn)
    tr.prev_ids, tr.prev_time = ids, t
    if tr.kind == "engine":
        tr.prev_held = turn.held_ids
    if tr.kind not in ("anthropic", "openai_bp"):
        return
    for e in tr.entries:
        if e.pos == P and first_difference(tr.sources[e.src], ids) >= P:
            e.last_used = t          # a read refreshes the entry
    written = [b for b in tr.breakpoints(turn) if b > P and b >= tr.minimum]
    if written:
        src, tr.nsrc = tr.nsrc, tr.nsrc + 1
        tr.sources[src] = ids
        tr.entries += [_Written(b, src, t) for b in written]
        if len(tr.sources) > KEEP_SOURCES:
            keep = set(sorted(tr.sources)[-KEEP_SOURCES:])
            tr.sources = {k: v for k, v in tr.sources.items() if k in keep}
            tr.entries = [e for e in tr.entries if e.src in keep]


def step(tr: _Track, turn: TurnPrompt, reported: Reported | None,
         cause: str | None) -> tuple[int, int, tuple[str, str | None, int] | None]:
    """One call through the track: (predicted cached, predicted written, its class, cause and
    tokens, or None where it reported no usage). Raises WorkbenchError for a request the provider
    would refuse (nothing is then simulated)."""
    o = _offer(tr, turn.token_ids, t_of(turn))
    sim = tr.sim.process(turn)
    got = None
    if reported is not None:
        got = classify(tr, turn, sim.cached_tokens, sim.cache_write_tokens, reported, o, cause)
    _update(tr, turn, sim.cached_tokens)
    return sim.cached_tokens, sim.cache_write_tokens, got


def classify(tr: _Track, turn: TurnPrompt, P: int, Wp: int, r: Reported, o: _Offer | None,
             cause: str | None) -> tuple[str, str | None, int]:
    """(class, cause or rule, tokens) of one call."""
    n = len(turn.token_ids)
    slack = abs(r.prompt - n) if r.prompt is not None else 0
    diff = r.cached - P
    if abs(diff) <= slack:
        if r.written is not None and tr.kind in ("anthropic", "openai_bp") and abs(r.written - Wp) > slack:
            if r.written > Wp:
                return "over_report", "cache_writes", r.written - Wp
            return "unexplained", None, Wp - r.written
        cls, why, offered = _loss(tr, turn, P, o, cause)
        return cls, why, 0 if cls == "match" else max(0, offered - r.cached)
    if diff > 0:
        return "over_report", _over_rule(tr, turn, r.cached, o), diff
    if slack or tr.valid(r.cached):
        return "provider_miss", None, -diff
    return "unexplained", None, -diff


# ------------------------------------------------------------------ a conversation
@dataclass(slots=True)
class _Call:
    file: str
    line: int
    timestamp: str | None
    when: float | None
    provider: str | None
    result: Any                 # AssemblyResult
    reply: np.ndarray | None    # the reply to this call as generated, from the next call's text (filled in by it)
    cause: str | None
    reported: Reported | None
    turn: int
    reply_ids: np.ndarray | None = None     # the reply's ids as the engine returned them (preferred: exact)

    @property
    def generated(self) -> np.ndarray | None:
        return self.reply_ids if self.reply_ids is not None else self.reply

    @property
    def hold_last(self) -> bool:
        """Whether the engine holds `generated` whole (see ENGINE_PROVIDERS)."""
        return self.reply_ids is not None and self.provider in ENGINE_PROVIDERS


class Reconciler:
    """One conversation's calls, fed in turn order (`add`), reconciled at the end (`finish`).
    Nothing is simulated for a conversation none of whose calls reported usage. `shared_engines`:
    calls to serving engines are returned as `EngineCall`s for the pass over the engine's shared
    cache (reconcile_engines.py), whether or not they reported usage (each one filled the cache
    the others read); without it (one conversation alone: `analyze SESSION`), they are simulated
    here, which for a lone conversation is the same thing."""

    def __init__(self, conversation_id: str, default_provider: str | None = None, shared_engines: bool = False,
                 keep_results: bool = True):
        self.cid = conversation_id
        self.default_provider = default_provider
        self.shared_engines = shared_engines
        # False: the caller knows no call reports usage or goes to an engine, so `finish` reads no
        # prompt and none is kept (a long session's every prompt, held to its end, is a lot).
        self.keep_results = keep_results
        self._calls: list[_Call] = []
        self._bad: list[BadLine] = []
        self._usage = 0
        self._last_ts: tuple[str, str, int, Reported | str | None] | None = None

    def add(self, file: str, line: int, *, timestamp: str | None, when: float | None, provider: str | None,
            response: Any, result: Any, cause: str | None, previous_reply: np.ndarray | None) -> None:
        """One analysed call: its assembled prompt (`result`), the cause code the prefix analysis
        gave it (None: none), and the reply to the previous call as the model generated it."""
        got = parse_reported(response, result.total_tokens)   # the count: the ids are not joined for it
        if isinstance(got, str):
            self._bad.append(BadLine(file, line, got))
        if timestamp is not None:
            if self._last_ts is not None and self._last_ts[0] == timestamp and got != self._last_ts[3] \
                    and isinstance(got, Reported) and isinstance(self._last_ts[3], Reported):
                self._bad.append(BadLine(file, line, f"timestamp: {timestamp} is also the timestamp of "
                                                     f"{self._last_ts[1]}:{self._last_ts[2]}, with different "
                                                     "usage: their order is a guess"))
            self._last_ts = (timestamp, file, line, got)
        reported = got if isinstance(got, Reported) else None
        self._usage += reported is not None
        if self._calls and previous_reply is not None:
            self._calls[-1].reply = previous_reply
        ids = reply_token_ids(response)
        self._calls.append(_Call(file, line, timestamp, when, provider or self.default_provider,
                                 result if self.keep_results else None, None,
                                 cause, reported, len(self._calls) + 1,
                                 None if ids is None else np.asarray(ids, dtype=np.uint32)))

    def finish(self) -> SessionReconciliation:
        calls, bad = self._calls, list(self._bad)
        shared = self.shared_engines and any(c.provider is not None and is_engine(c.provider) for c in calls)
        if not self._usage and not shared:
            return SessionReconciliation(len(calls), (), tuple(bad))
        if not self.keep_results:
            raise AssertionError("a reconciliation that reads the prompts was told none would be needed")
        from .turn_prompts import breakpoints_of
        tracks: dict[str, _Track | None] = {}
        checks: list[CallCheck] = []
        engine: list[EngineCall] = []
        last_engine_ids: dict[str, np.ndarray] = {}
        t0 = next((c.when for c in calls if c.when is not None), 0.0)
        t = 0.0
        written_total, largest = 0, 0
        for k, c in enumerate(calls):
            t = (c.when - t0) if c.when is not None else (t + DEFAULT_GAP_S if k else 0.0)
            if c.provider is None:
                if c.reported is not None:
                    bad.append(BadLine(c.file, c.line, "provider: the line names none, and no --provider was "
                                                       "given: its usage is not reconciled"))
                continue
            tr = tracks.get(c.provider, False)
            if tr is False:
                params = provider_params(c.provider)
                if isinstance(params, str):
                    bad.append(BadLine(c.file, c.line, f"{params}: its calls' usage is not reconciled"))
                    tr = None
                else:
                    tr = _Track(params, _kind(params), make_simulator(params.kind, params))
                tracks[c.provider] = tr
            if tr is None:
                continue
            res = c.result
            if self.shared_engines and tr.kind == "engine":
                ids = res.content_ids()
                prev = last_engine_ids.get(c.provider)
                base = 0 if prev is None else first_difference(prev, ids)
                last_engine_ids[c.provider] = ids
                engine.append(EngineCall(c.provider, self.cid, c.turn, c.file, c.line, c.timestamp, c.when, base,
                                         np.array(ids[base:], dtype=np.uint32), c.generated, c.reported, c.cause,
                                         c.hold_last))
                continue
            try:
                turn = TurnPrompt(res.content_ids(), breakpoints_of(res, "explicit"), t,
                                  block_ends=tuple(sorted({int(s.end) for s in originals(res.segments) if s.end > 0})),
                                  reply_ids=c.generated, hold_last=c.hold_last)
                cached, written, got = step(tr, turn, c.reported, c.cause)
            except WorkbenchError as exc:
                # A request the provider would refuse (five breakpoints): not simulated, not counted.
                bad.append(BadLine(c.file, c.line, f"not simulated: {exc.message}"))
                continue
            if c.reported is not None and got is not None:
                checks.append(CallCheck(c.file, c.line, self.cid, c.timestamp, c.provider, got[0], got[1],
                                        cached, written, c.reported, got[2], len(turn.token_ids), c.turn))
                w, p = written_and_prompt(c.reported, len(turn.token_ids))
                written_total += w
                largest = max(largest, p)
        rewrite = (written_total, largest) if checks else None
        return SessionReconciliation(len(calls), tuple(checks), tuple(bad), rewrite, tuple(engine))


def is_engine(provider: str) -> bool:
    """Whether a provider name is a serving engine's (one prefix cache shared by all its requests)."""
    params = provider_params(provider)
    return not isinstance(params, str) and _kind(params) == "engine"


def written_and_prompt(r: Reported, rendered: int) -> tuple[int, int]:
    """A call's cache-write tokens and prompt size, for the re-write factor. Where the API reports
    no writes, a prefix cache stores what it did not read."""
    prompt = r.prompt if r.prompt is not None else rendered
    return (r.written if r.written is not None else max(0, prompt - r.cached)), prompt
