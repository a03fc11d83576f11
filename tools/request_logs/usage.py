"""Reported usage, as OpenAI and Anthropic would report it under their documented cache rules, with
known differences injected, and the class of every call kept apart as ground truth (issue 32).

The rules are the presets' (`workbench/analysis/provider_params.json`: minimum cacheable prompt,
OpenAI's 128-token increments and idle TTL, Anthropic's breakpoints, 20-block lookback and 5 min /
1 h TTLs), re-implemented here from the documented rules on the Assembler's token ids, never with
workbench.analysis, which is what the reconciliation checks. Per conversation one cache (the
presets' model: one session, one cache).

Classes injected (only on calls that would otherwise be a clean hit: a turn no breaker touched,
inside the TTL, over the minimum, something read), so each has one cause:
  provider_miss       the provider reported 0 cached (routing) or, for some OpenAI calls, fewer
                      128-token steps than the rules give (eviction of the tail)
  over_report         more than the rules allow: OpenAI whole-token hits (a rule with another block
                      size), Anthropic a read that covers what the rules would write
  breakpoint_missing  Anthropic, the conversation's last call: every cache_control removed
  breakpoint_moved    Anthropic, the conversation's last call: the last message's cache_control moved
                      to the conversation's first user message
  ttl_lapse           not drawn: the schedule's long gaps (a user back after minutes or hours); a call
                      is one when the rules with the TTL read less than the same rules without it
Every other call is labelled with what the rules say (match, below_minimum, prefix_break with the
breaker's cause code) and `injected: false`; those labels are the generator's reading, not a claim
about how a classifier must name mixed cases (`also` lists a second cause where two coincide).
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

PARAMS = Path(__file__).resolve().parents[2] / "workbench" / "analysis" / "provider_params.json"
OPENAI, ANTHROPIC = "openai", "anthropic"
# The rates below apply to eligible calls only (a clean hit; for the breakpoint classes, an Anthropic
# conversation's last call), drawn from a stream of their own so the log's other bytes stay put.
MISS_RATE, OVER_RATE = 0.06, 0.06
BREAKPOINT_RATE = 0.3          # of eligible last calls: missing, then as many moved
PARTIAL_MISS = 0.3             # of OpenAI misses: fewer steps rather than none


def _first_difference(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


def load_presets() -> dict[str, dict[str, Any]]:
    """The two presets the generator reports under (their plain names: OpenAI's default variant)."""
    raw = json.loads(PARAMS.read_text(encoding="utf-8"))
    openai = raw[raw[OPENAI]["alias"]] if "alias" in raw[OPENAI] else raw[OPENAI]
    anthropic = raw[ANTHROPIC]
    model = anthropic["model"]
    min_anthropic = anthropic["models"].get(model, {}).get("min_cacheable_tokens", anthropic["min_cacheable_tokens"])
    return {
        OPENAI: {"model": openai["model"], "min": openai["min_prefix_tokens"], "step": openai["increment_tokens"],
                 "ttl_s": openai["ttl_s"]},
        ANTHROPIC: {"model": model, "min": min_anthropic, "lookback": anthropic["lookback_blocks"],
                    "ttl_s": {"5m": anthropic["ttl_5m_s"], "1h": anthropic["ttl_1h_s"]}},
    }


# ---------------------------------------------------------------- the rules

@dataclass
class _Prompt:
    ids: np.ndarray
    last_used: float


class OpenAIRules:
    """Automatic caching: prompts of at least `min` tokens are stored; a hit is the longest prefix shared
    with a live stored prompt, counted in `step`-token increments above `min`; an entry idle longer
    than the TTL is gone, a hit keeps it warm. A stored prompt that is a prefix of a newer one is
    replaced by it."""

    def __init__(self, preset: dict[str, Any], ttl: bool = True):
        self.p, self.ttl = preset, ttl
        self.stored: list[_Prompt] = []

    def step(self, ids: np.ndarray, t: float) -> dict[str, int]:
        p, n = self.p, len(ids)
        alive = [s for s in self.stored if not self.ttl or t - s.last_used <= p["ttl_s"]]
        shared = [_first_difference(s.ids, ids) for s in alive]
        best = max(range(len(alive)), key=shared.__getitem__, default=None)
        longest = shared[best] if best is not None else 0
        cached = 0
        if best is not None and n >= p["min"] and longest >= p["min"]:
            cached = longest - (longest - p["min"]) % p["step"]
            alive[best].last_used = t
        if n >= p["min"]:
            kept = [s for s, m in zip(alive, shared) if m < len(s.ids)]
            if not any(m == n for m in (m for s, m in zip(alive, shared) if m < len(s.ids))):
                kept.append(_Prompt(ids, t))
            alive = kept
        self.stored = alive
        return {"cached": cached, "written": 0, "longest": longest}


@dataclass
class _Entry:
    source: int
    expires: float
    ttl: float


@dataclass
class AnthropicRules:
    """Explicit breakpoints (token offsets with their TTL): each reads the longest live entry among its
    own prefix and up to `lookback` earlier block boundaries, stopping at what an earlier breakpoint
    read; every breakpoint past the read and at least `min` tokens long is written (an entry expiring
    its TTL after the write); a read refreshes the entry it read."""

    p: dict[str, Any]
    ttl: bool = True
    entries: dict[int, list[_Entry]] = field(default_factory=dict)
    sources: dict[int, np.ndarray] = field(default_factory=dict)
    next_source: int = 0

    def step(self, ids: np.ndarray, t: float, bps: list[tuple[int, str]], block_ends: list[int]) -> dict[str, Any]:
        p = self.p
        if self.ttl:
            for length in list(self.entries):
                live = [e for e in self.entries[length] if t <= e.expires]
                if live:
                    self.entries[length] = live
                else:
                    del self.entries[length]
            used = {e.source for es in self.entries.values() for e in es}
            self.sources = {k: v for k, v in self.sources.items() if k in used}
        ttl_of = dict(bps)
        offsets = sorted(ttl_of)
        if not offsets:
            return {"cached": 0, "written": 0, "written_5m": 0, "written_1h": 0, "lookback_missed": False}
        shared = {sid: _first_difference(src, ids) for sid, src in self.sources.items()}

        def live(length: int) -> _Entry | None:
            return next((e for e in self.entries.get(length, ()) if shared[e.source] >= length), None)

        bounds = sorted(set(block_ends) | set(offsets))
        read, hit = 0, None
        for b in offsets:
            i = bounds.index(b)
            for j in range(i, max(-1, i - p["lookback"] - 1), -1):
                if bounds[j] <= read:
                    break
                e = live(bounds[j])
                if e is not None:
                    read, hit = bounds[j], e
                    break
        # A live entry between the read and the last breakpoint that no breakpoint's lookback reached
        # (for the labels only: the rules' reading of why it was not read).
        covered = {bounds[j] for b in offsets for j in range(max(0, bounds.index(b) - p["lookback"]),
                                                             bounds.index(b) + 1)}
        lookback_missed = any(read < x <= offsets[-1] and x not in covered and live(x) is not None
                              for x in self.entries)
        if hit is not None:
            hit.expires = t + hit.ttl
        written = [b for b in offsets if b > read and b >= p["min"]]
        by_ttl = {"5m": 0, "1h": 0}
        if written:
            sid, self.next_source = self.next_source, self.next_source + 1
            self.sources[sid] = ids
            start = read
            for b in written:
                life = p["ttl_s"][ttl_of[b]]
                self.entries.setdefault(b, []).append(_Entry(sid, t + life, life))
                by_ttl[ttl_of[b]] += b - start
                start = b
        return {"cached": read, "written": written[-1] - read if written else 0,
                "written_5m": by_ttl["5m"], "written_1h": by_ttl["1h"], "lookback_missed": lookback_missed}


# ---------------------------------------------------------------- per call

def breakpoints(result: Any, request: dict[str, Any]) -> list[tuple[int, str]]:
    """Token offsets where the request's cache_control prefixes end (the end of the marked message's
    last segment), each with its TTL, read from the request as sent."""
    ttl_by_seq: dict[int, str] = {}
    marked = [m for m in result.conversation.messages if m.cache_control]
    ttls = _request_ttls(request)
    if len(ttls) != len(marked):
        raise AssertionError(f"{len(marked)} marked messages, {len(ttls)} cache_control marks in the request")
    for m, ttl in zip(marked, ttls):
        ttl_by_seq[m.sequence] = ttl
    last_end: dict[int, int] = {}
    for s in result.segments:
        if s.seq in ttl_by_seq:
            last_end[s.seq] = s.end
    return sorted((end, ttl_by_seq[seq]) for seq, end in last_end.items())


def _request_ttls(request: dict[str, Any]) -> list[str]:
    """The TTL of each marked message, in order (system first): what its cache_control says."""
    out = []
    system = request.get("system")
    if isinstance(system, list):
        marks = [b["cache_control"] for b in system if isinstance(b, dict) and b.get("cache_control")]
        if marks:
            out.append(marks[-1].get("ttl", "5m"))
    for m in request.get("messages", []):
        content = m.get("content")
        if isinstance(content, list):
            marks = [b["cache_control"] for b in content if isinstance(b, dict) and b.get("cache_control")]
            if marks:
                out.append(marks[-1].get("ttl", "5m"))
    return out


def block_ends(result: Any) -> list[int]:
    return sorted({int(s.end) for s in result.segments if s.end > 0})


def strip_marks(request: dict[str, Any], keep_system: bool) -> dict[str, Any]:
    """The request with every message's cache_control removed (the system's too unless kept)."""
    out = copy.deepcopy(request)
    if not keep_system and isinstance(out.get("system"), list):
        for b in out["system"]:
            b.pop("cache_control", None)
    for m in out["messages"]:
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict):
                    b.pop("cache_control", None)
    return out


def moved(request: dict[str, Any]) -> dict[str, Any] | None:
    """The request with its last message's cache_control on the conversation's first user message
    instead (None when that message is the last or the one before)."""
    msgs = request["messages"]
    first = next((i for i, m in enumerate(msgs) if m["role"] == "user"), None)
    if first is None or first >= len(msgs) - 2:
        return None
    mark = next((b["cache_control"] for b in msgs[-1]["content"] if isinstance(b, dict) and b.get("cache_control")),
                None)
    out = strip_marks(request, keep_system=True)
    blocks = out["messages"][first]["content"]
    if not isinstance(blocks, list) or not blocks or mark is None:
        return None
    blocks[-1]["cache_control"] = dict(mark)
    return out


@dataclass
class Reported:
    cached: int
    written: int
    written_5m: int = 0
    written_1h: int = 0


class SessionUsage:
    """One conversation's caches under the rules (with and without the TTL, for the labels), and the
    injections drawn for it."""

    def __init__(self, presets: dict[str, dict[str, Any]], provider: str, seed: int, cid: str, n_calls: int):
        self.provider, self.preset = provider, presets[provider]
        self.rng = random.Random(f"usage-{seed}-{cid}")
        self.n_calls = n_calls
        if provider == OPENAI:
            self.rules: Any = OpenAIRules(self.preset)
            self.open: Any = OpenAIRules(self.preset, ttl=False)
        else:
            self.rules = AnthropicRules(self.preset)
            self.open = AnthropicRules(self.preset, ttl=False)
        self.prev_t: float | None = None

    def call(self, k: int, t_s: float, ids: np.ndarray, result: Any, request: dict[str, Any], lost: int,
             cause: str | None, assemble: Any = None) -> tuple[dict[str, Any], Reported, dict[str, Any]]:
        """(the request as sent, what is reported, the ground-truth record) for call k (0-based).
        `assemble(request)`: the request's AssemblyResult (a request whose marks change is assembled
        again to find where its marked messages end)."""
        self.assemble = assemble
        n = len(ids)
        u = self.rng.random()
        if self.provider == OPENAI:
            r, o = self.rules.step(ids, t_s), self.open.step(ids, t_s)
            rules = Reported(r["cached"], 0)
            truth = self._label(k, n, r["cached"], o["cached"], lost, cause)
            reported = rules
            if truth["class"] == "match" and k and r["cached"] > 0:
                if u < MISS_RATE:
                    fewer = r["cached"] - self.preset["step"] * self.rng.randint(1, 4)
                    partial = self.rng.random() < PARTIAL_MISS and fewer >= self.preset["min"]
                    reported = Reported(fewer if partial else 0, 0)
                    truth.update({"class": "provider_miss", "injected": True,
                                  "detail": "fewer increments than the rules give" if partial else "reported 0"})
                elif u < MISS_RATE + OVER_RATE and r["longest"] > r["cached"]:
                    reported = Reported(r["longest"], 0)
                    truth.update({"class": "over_report", "injected": True,
                                  "detail": f"whole-token hit ({r['longest']}), not in {self.preset['step']}-token "
                                            "increments: a rule with another block size"})
            return request, reported, {**truth, "rules": _fig(rules), "reported": _fig(reported)}
        return self._anthropic(k, t_s, ids, result, request, lost, cause, u)

    def _anthropic(self, k: int, t_s: float, ids: np.ndarray, result: Any, request: dict[str, Any], lost: int,
                   cause: str | None, u: float) -> tuple[dict[str, Any], Reported, dict[str, Any]]:
        ends = block_ends(result)
        bps = breakpoints(result, request)
        # The breakpoint injections: decided on a copy of the caches (the tokens do not depend on the
        # marks), so the call as the client meant it can be compared with the call as it was sent.
        before, before_open = copy.deepcopy(self.rules), copy.deepcopy(self.open)
        r, o = self.rules.step(ids, t_s, bps, ends), self.open.step(ids, t_s, bps, ends)
        rules = Reported(r["cached"], r["written"], r["written_5m"], r["written_1h"])
        truth = self._label(k, n := len(ids), r["cached"], o["cached"], lost, cause)
        if r["lookback_missed"] and truth["class"] == "match":
            truth.update({"class": "lookback_exceeded", "detail": "a live entry lay beyond the 20-block lookback"})
        reported = rules
        last = k == self.n_calls - 1
        clean = truth["class"] == "match" and k > 0 and r["cached"] > 0
        if clean and last and u < 2 * BREAKPOINT_RATE:
            kind = "breakpoint_missing" if u < BREAKPOINT_RATE else "breakpoint_moved"
            sent = strip_marks(request, keep_system=False) if kind == "breakpoint_missing" else moved(request)
            if sent is not None:
                self.rules, self.open = before, before_open
                again = self.assemble(sent)
                if not np.array_equal(again.token_ids, ids):
                    raise AssertionError("cache_control changed the prompt's tokens")
                r2 = self.rules.step(ids, t_s, breakpoints(again, sent), ends)
                self.open.step(ids, t_s, breakpoints(again, sent), ends)
                if r2["cached"] < r["cached"]:
                    reported = Reported(r2["cached"], r2["written"], r2["written_5m"], r2["written_1h"])
                    truth.update({"class": kind, "injected": True,
                                  "detail": ("no cache_control in the request" if kind == "breakpoint_missing" else
                                             "the last message's cache_control moved to the first user message"),
                                  "intended": _fig(rules)})
                    return sent, reported, {**truth, "rules": _fig(reported), "reported": _fig(reported)}
                # Without a loss the move would not show: keep the call as meant.
                self.rules, self.open = before, before_open
                self.rules.step(ids, t_s, bps, ends)
                self.open.step(ids, t_s, bps, ends)
        if clean:
            uu = self.rng.random()
            if uu < MISS_RATE:
                end = r["cached"] + r["written"]
                reported = Reported(0, end, *_by_ttl([b for b in bps if b[0] >= self.preset["min"]], 0, end))
                truth.update({"class": "provider_miss", "injected": True,
                              "detail": "read 0 on a live prefix: the whole prefix written again"})
            elif uu < MISS_RATE + OVER_RATE and r["written"] > 0:
                reported = Reported(r["cached"] + r["written"], 0)
                truth.update({"class": "over_report", "injected": True,
                              "detail": "read what the rules would write at the last breakpoint"})
        del n
        return request, reported, {**truth, "rules": _fig(rules), "reported": _fig(reported)}

    def _label(self, k: int, n: int, cached: int, open_cached: int, lost: int, cause: str | None) -> dict[str, Any]:
        """The rules' own reading of a call: below the minimum, a TTL lapse, a prefix break, a match."""
        also: list[str] = []
        if n < self.preset["min"]:
            cls = "below_minimum"
            if lost and cause:
                also.append("prefix_break")
        elif open_cached > cached:
            cls = "ttl_lapse"
            if lost and cause:
                also.append("prefix_break")
        elif lost and cause:
            cls = "prefix_break"
        else:
            cls = "match"
        out: dict[str, Any] = {"class": cls, "injected": cls == "ttl_lapse" and not also}
        if cause and (cls == "prefix_break" or "prefix_break" in also):
            out["cause"] = cause
        if also:
            out["also"] = also
        return out


def _by_ttl(bps: list[tuple[int, str]], start: int, end: int) -> tuple[int, int]:
    """(5m, 1h) tokens of the stretch start..end, each piece at the TTL of the breakpoint that ends it."""
    five = hour = 0
    for b, ttl in bps:
        if b <= start:
            continue
        piece = min(b, end) - start
        if piece <= 0:
            break
        if ttl == "1h":
            hour += piece
        else:
            five += piece
        start = min(b, end)
    return five, hour


def _fig(r: Reported) -> dict[str, int]:
    return {"cached": r.cached, "written": r.written}


def usage_object(provider: str, n: int, rep: Reported, output_tokens: int) -> dict[str, Any]:
    """`usage` exactly in the provider's shape: Chat Completions, or Anthropic Messages (whose
    input_tokens leave out what was read and written)."""
    if provider == OPENAI:
        return {"prompt_tokens": n, "completion_tokens": output_tokens, "total_tokens": n + output_tokens,
                "prompt_tokens_details": {"cached_tokens": rep.cached, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}
    return {"input_tokens": n - rep.cached - rep.written, "cache_creation_input_tokens": rep.written,
            "cache_read_input_tokens": rep.cached,
            "cache_creation": {"ephemeral_5m_input_tokens": rep.written_5m,
                               "ephemeral_1h_input_tokens": rep.written_1h},
            "output_tokens": output_tokens, "service_tier": "standard"}
