"""Why a simulated prefix cache read what it read (issue 33): the reason a turn's cached figure is
0, or less than the prompt shares with what the provider holds, in words.

The simulators (providers.py) make each decision and name its reason where they make it; these
helpers only word it, so that every simulator says the same thing the same way. A reason has a
code (the reconciliation's class names where one fits, reconcile.py: `below_minimum`,
`prefix_break`, `ttl_lapse`, `breakpoint_missing`, `breakpoint_moved`, `lookback_exceeded`; and
`first_turn`, `nothing_written`, `granularity`, `evicted`), the sentence for the turn (with its
figures) and the rule (the same without them), which a session's summary joins.

    >>> below_minimum("openai", 291, 1024).text
    "the prompt (291 tokens) is under OpenAI's 1,024-token minimum: not cached"
    >>> summary([below_minimum("anthropic", 291, 1024), below_minimum("anthropic", 437, 1024)])
    "every turn: under Anthropic's 1,024-token minimum"
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

NAMES = {"openai": "OpenAI", "anthropic": "Anthropic", "gemini": "Gemini", "vllm": "vLLM", "sglang": "SGLang"}
MODES = {"explicit": "the session's own cache_control marks", "auto": "placed by the workbench"}


@dataclass(frozen=True)
class Why:
    code: str
    text: str      # this turn's reason, with its figures
    rule: str      # the same without this turn's figures: what a run of turns shares

    def to_json(self) -> dict[str, str]:
        return {"why": self.text, "why_code": self.code}


def name(kind: str) -> str:
    return NAMES.get(kind, kind)


def duration(seconds: float) -> str:
    """A TTL or an idle gap as people say it: 90 s, 5 min, 1 h 30 min."""
    s = max(0, int(round(seconds)))
    if s < 120:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    parts = ([f"{h} h"] if h else []) + ([f"{m} min"] if m else []) + ([f"{sec} s"] if sec and not h else [])
    return " ".join(parts)


# ---------------------------------------------------------------- every provider

def below_minimum(kind: str, n: int, minimum: int) -> Why:
    return Why("below_minimum", f"the prompt ({n:,} tokens) is under {name(kind)}'s {minimum:,}-token minimum: "
               "not cached", f"under {name(kind)}'s {minimum:,}-token minimum")


def first_turn(kind: str, engine: bool = False, wrote: int | None = None, minimum: int = 0) -> Why:
    """Turn 1: nothing held or written before it. `wrote`: what this turn writes (the breakpoint
    providers; None for the automatic ones, which cache the prompt itself)."""
    if engine:
        return Why("first_turn", "turn 1: the engine holds nothing yet (it keeps this prompt and the reply "
                   "for the next turn)", "turn 1: nothing held yet")
    if wrote is None:
        return Why("first_turn", "turn 1: nothing cached yet (this prompt is cached for the next turns)",
                   "turn 1: nothing cached yet")
    then = (f"this turn writes {wrote:,} tokens for the next" if wrote else
            f"this turn writes nothing either: no breakpoint at or over {name(kind)}'s {minimum:,}-token minimum")
    return Why("first_turn", f"turn 1: nothing written before ({then})", "turn 1: nothing written before")


def ttl_lapse(kind: str, length: int, idle_s: float, ttl_s: float) -> Why:
    return Why("ttl_lapse", f"the cached prefix ({length:,} tokens) expired: {duration(idle_s)} since it was last "
               f"used, over {name(kind)}'s {duration(ttl_s)} TTL",
               f"the cached prefix expired ({duration(ttl_s)} TTL)")


def all_expired(kind: str, ttl_s: float) -> Why:
    return Why("ttl_lapse", f"nothing cached is live: every earlier prefix expired (idle over {name(kind)}'s "
               f"{duration(ttl_s)} TTL)", f"the cached prefixes expired ({duration(ttl_s)} TTL)")


# ---------------------------------------------------------------- automatic caching (OpenAI, Gemini)

def none_stored(kind: str, minimum: int) -> Why:
    return Why("below_minimum", f"nothing cached before: every earlier prompt was under {name(kind)}'s "
               f"{minimum:,}-token minimum", f"earlier prompts under {name(kind)}'s {minimum:,}-token minimum")


def short_prefix(kind: str, shared: int, minimum: int) -> Why:
    """Cacheable, but the prefix shared with every cached prompt is under the minimum."""
    return Why("prefix_break", f"the prompt diverges from every cached prompt at token {shared:,}: the shared "
               f"prefix is under {name(kind)}'s {minimum:,}-token minimum",
               f"diverges under {name(kind)}'s {minimum:,}-token minimum")


def steps(kind: str, shared: int, cached: int, minimum: int, increment: int, diverged: bool) -> Why:
    """A hit rounded down: the minimum, then increment-token steps."""
    how = f"diverges from the cached prompt at token {shared:,}" if diverged else f"shares {shared:,} tokens"
    return Why("granularity", f"the prompt {how}; {name(kind)} caches {minimum:,} tokens, then {increment}-token "
               f"steps: {cached:,}", f"cached in {increment}-token steps")


# ---------------------------------------------------------------- breakpoints (Anthropic, OpenAI GPT-5.6)

def breakpoint_missing(mode: str) -> Why:
    """No cache_control breakpoint in the request; `mode` says how the breakpoints were placed
    ("explicit", "auto", or "" when the caller did not say)."""
    how = f" (breakpoints: {mode}, {MODES[mode]})" if mode in MODES else ""
    fix = ("; mark the end of the stable prefix with cache_control, or let the workbench place them "
           "(breakpoints: auto)" if mode != "auto" else "")
    return Why("breakpoint_missing", f"no cache_control breakpoint in this request{how}, and Anthropic reads and "
               f"writes only at marked prefixes{fix}", f"no cache_control breakpoint{how}")


def nothing_written(kind: str, minimum: int) -> Why:
    return Why("nothing_written", f"nothing written before: no earlier request wrote a prefix (its breakpoints "
               f"were missing or under {name(kind)}'s {minimum:,}-token minimum)", "nothing written before")


def diverged_written(at: int, shortest: int, n: int) -> Why:
    if at >= n:      # this prompt is a prefix of what was written, shorter than every written prefix
        return Why("prefix_break", f"the prompt ({n:,} tokens) ends before the shortest written prefix does (at "
                   f"token {shortest:,})", "shorter than the written prefixes")
    return Why("prefix_break", f"the prompt diverges from every written prefix at token {at:,}, before the "
               f"shortest one ends (at token {shortest:,})", "diverges before the written prefixes end")


def breakpoint_moved(length: int, last: int) -> Why:
    where = (f"after this request's last breakpoint (token {last:,}): a breakpoint reads only prefixes up to "
             "itself" if length > last else "where no block of this request ends: a read stops at block ends")
    return Why("breakpoint_moved", f"a written prefix ends at token {length:,}, {where}",
               "no breakpoint reaches the written prefix")


def lookback_exceeded(length: int, at: int, blocks: int) -> Why:
    return Why("lookback_exceeded", f"a written prefix ends at token {length:,}, more than {blocks} blocks before "
               f"the breakpoint at token {at:,}: Anthropic looks back {blocks} blocks", "beyond the lookback")


def too_many_breakpoints_ago(length: int, match: int) -> Why:
    return Why("lookback_exceeded", f"a written prefix ({length:,} tokens) matches, but it is older than the "
               f"conversation's latest {match} breakpoints that OpenAI matches", "older than the matched breakpoints")


# ---------------------------------------------------------------- engines (vLLM blocks, SGLang pages)

def no_full_unit(kind: str, n: int, unit: int, what: str) -> Why:
    return Why("granularity", f"the prompt ({n:,} tokens) has no full {unit}-token {what} before its last token "
               f"(recomputed for its logits): {name(kind)} reuses whole {what}s only", f"no full {what}")


def engine_diverged(kind: str, at: int, held: int, cached: int, unit: int, what: str) -> Why:
    where = "from its first token" if at == 0 else f"at token {at:,}"
    whole = f"; {name(kind)} reuses the whole {unit}-token {what}s before it: {cached:,}" if unit > 1 else ""
    return Why("prefix_break", f"the prompt differs from what the engine holds after the previous turn "
               f"({held:,} tokens) {where}{whole}", "diverges from what the engine holds")


def engine_rounded(kind: str, shared: int, cached: int, unit: int, what: str, whole_prompt: bool) -> Why:
    if whole_prompt:
        whole = f" and {name(kind)} reuses whole {unit}-token {what}s" if unit > 1 else ""
        return Why("granularity", f"the engine holds the whole prompt; its last token is recomputed (for its "
                   f"logits){whole}: {cached:,}", "the last token is recomputed")
    return Why("granularity", f"{shared:,} tokens held from the previous turn; {name(kind)} reuses whole "
               f"{unit}-token {what}s: {cached:,}", f"whole {unit}-token {what}s only")


def evicted(kind: str, expected: int, cached: int, capacity: str) -> Why:
    return Why("evicted", f"{expected:,} tokens were held for this prefix, {cached:,} are left: the rest were "
               f"evicted (capacity {capacity})", "evicted")


# ---------------------------------------------------------------- a session

def summary(reasons: Sequence[Why | None]) -> str:
    """Why a session read nothing (a 0.0 % hit ratio): its turns' rules, consecutive turns with the
    same rule as one run ("turn 1: turn 1: nothing cached yet" is said once)."""
    runs: list[tuple[int, int, str]] = []
    for k, why in enumerate(reasons, start=1):
        rule = why.rule if why is not None else "no reason given"
        if runs and runs[-1][2] == rule:
            runs[-1] = (runs[-1][0], k, rule)
        else:
            runs.append((k, k, rule))
    if len(runs) == 1 and len(reasons) > 1 and not runs[0][2].startswith("turn 1:"):
        return f"every turn: {runs[0][2]}"
    out = []
    for a, b, rule in runs:
        if rule.startswith("turn 1:"):
            out.append(rule)
        else:
            out.append(f"{'turn' if a == b else 'turns'} {a if a == b else f'{a}-{b}'}: {rule}")
    return "; ".join(out)
