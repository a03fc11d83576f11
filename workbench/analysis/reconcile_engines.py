"""The serving engines' shared prefix cache, reconciled (issue 32, docs/logs.md section 8).

A serving engine (vLLM, SGLang, our `serve-engine`) keeps one prefix cache per server process, and
every request it serves reads and fills that one cache: a conversation's first call reads what
earlier conversations left (the template's opening, a shared system prompt). So the calls of one
engine provider are not simulated per conversation (reconcile.py does that for hosted providers)
but here, all of them through one simulator, in the order the server saw them: by timestamp across
conversations, each conversation's calls in turn order.

The per-session analysis (either runner) hands each engine call back as an `EngineCall`; the
driver collects them (reconcile_report.ReconTally) and runs this one ordered pass at the end. The
order is a total order on the calls themselves (time, conversation, turn), never the order batches
finished in, so the local and the Ray runner report the same.

Assumptions, stated because a log cannot tell them:
- one server per provider name: every line that names `vllm` (or `workbench-engine`) went to one
  process with one cache (replicas behind a balancer would each have their own: their calls show
  as `provider_miss`, reported less than predicted);
- the cache's capacity is the preset's (`capacity_blocks`, `capacity_tokens`; null in the shipped
  presets: unbounded). serve-engine caps its cache in bytes of KV (`--kv-cap-mb`, 2 GiB by default),
  which a log does not translate into tokens; a call whose prefix that cap evicted reports less than
  predicted and is counted as `provider_miss`;
- a call without a timestamp runs right after its conversation's previous call (or first, for a
  conversation with none).

Memory: the simulator holds token ids only (providers.py's simulated mode, no KV); the collected
calls hold each conversation's prompts as differences from its previous prompt (about its own
tokens), and a conversation's account is dropped after its last call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..errors import WorkbenchError
from .logs import BadLine
from .providers import Simulator, TurnPrompt, make_simulator
from .reconcile import (
    CallCheck,
    EngineCall,
    SessionReconciliation,
    _kind,
    _Track,
    provider_params,
    step,
    written_and_prompt,
)


@dataclass(frozen=True, slots=True)
class EngineResults:
    """The shared pass's outcome per conversation: its engine calls' checks and re-write figures
    (`calls` is 0: the conversation's own reconciliation counted them already)."""
    by_conversation: dict[str, SessionReconciliation]


def _order(calls: Iterable[EngineCall]) -> list[tuple[float, EngineCall]]:
    """Every call with the time it reached the server, in the server's order. A call without a
    timestamp, or with one earlier than its conversation's previous call, runs right after that call."""
    by: dict[tuple[str, str], list[EngineCall]] = {}
    for c in calls:
        by.setdefault((c.provider, c.conversation_id), []).append(c)
    timed: list[tuple[float, EngineCall]] = []
    for group in by.values():
        group.sort(key=lambda c: c.turn)
        t = float("-inf")
        for c in group:
            t = max(t, c.when) if c.when is not None else t
            timed.append((t, c))
    timed.sort(key=lambda x: (x[1].provider, x[0], x[1].conversation_id, x[1].turn))
    return timed


def reconcile_engines(calls: Iterable[EngineCall]) -> EngineResults:
    """One simulator per engine provider, fed every call of that provider in the server's order."""
    timed = _order(calls)
    left: dict[tuple[str, str], int] = {}
    for _, c in timed:
        key = (c.provider, c.conversation_id)
        left[key] = left.get(key, 0) + 1
    # Providers with no usage anywhere have nothing to check: their pass is skipped.
    checked = {c.provider for _, c in timed if c.reported is not None}
    sims: dict[str, Simulator | None] = {}
    tracks: dict[tuple[str, str], _Track] = {}
    last: dict[tuple[str, str], np.ndarray] = {}
    checks: dict[str, list[CallCheck]] = {}
    bad: dict[str, list[BadLine]] = {}
    rewrite: dict[str, list[int]] = {}
    t0: dict[str, float] = {}
    for when, c in timed:
        if c.provider not in checked:
            continue
        key = (c.provider, c.conversation_id)
        left[key] -= 1
        prev = last.get(key)
        ids = c.tail if prev is None or c.base == 0 else np.concatenate([prev[:c.base], c.tail])
        if left[key]:
            last[key] = ids
        else:
            last.pop(key, None)
        sim = sims.get(c.provider, False)
        if sim is False:
            params = provider_params(c.provider)
            sim = sims[c.provider] = None if isinstance(params, str) else make_simulator(params.kind, params)
        if sim is None:
            continue      # the conversation's own reconciliation named the problem already
        tr = tracks.get(key)
        if tr is None:
            tr = tracks[key] = _Track(sim.params, _kind(sim.params), sim)
        # Times relative to the provider's first timed call: TTLs (none for the engine presets) see gaps only.
        rel = 0.0 if when == float("-inf") else when - t0.setdefault(c.provider, when)
        turn = TurnPrompt(ids, (), rel, reply_ids=c.reply, hold_last=c.hold_last)
        try:
            cached, written, got = step(tr, turn, c.reported, c.cause)
        except WorkbenchError as exc:
            bad.setdefault(c.conversation_id, []).append(BadLine(c.file, c.line, f"not simulated: {exc.message}"))
            continue
        finally:
            if not left[key]:
                tracks.pop(key, None)     # the conversation's last call here: its account is not needed again
        if c.reported is not None and got is not None:
            checks.setdefault(c.conversation_id, []).append(
                CallCheck(c.file, c.line, c.conversation_id, c.timestamp, c.provider, got[0], got[1], cached,
                          written, c.reported, got[2], len(ids), c.turn))
            w, p = written_and_prompt(c.reported, len(ids))
            r = rewrite.setdefault(c.conversation_id, [0, 0])
            r[0] += w
            r[1] = max(r[1], p)
    out: dict[str, SessionReconciliation] = {}
    for cid in sorted(set(checks) | set(bad)):
        got_checks = tuple(checks.get(cid, ()))
        rw = rewrite.get(cid)
        out[cid] = SessionReconciliation(0, got_checks, tuple(bad.get(cid, ())),
                                         (rw[0], rw[1]) if rw is not None else None)
    return EngineResults(out)
