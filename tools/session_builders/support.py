"""The long customer-support chat: written episodes in order, with short filler exchanges drawn
in between until the chat has the target number of messages."""

from __future__ import annotations

import random
from typing import Any

from .common import Session, args_json, pick, random_id, tool_call

Pair = dict[str, Any]  # {user, assistant} or {user, tool, args, result, assistant}


def _fillers(rng: random.Random, pool: list[list[Pair]], n_pairs: int) -> list[list[Pair]]:
    """Filler units (one or more pairs that belong together) adding up to *n_pairs* pairs."""
    fillers: list[list[Pair]] = []
    for unit in pick(rng, pool, len(pool)):
        if sum(len(u) for u in fillers) + len(unit) <= n_pairs:
            fillers.append(unit)
    singles = [u for u in pool if len(u) == 1]
    while sum(len(u) for u in fillers) < n_pairs:
        fillers.append(rng.choice(singles))
    return fillers


def _slots(episodes: list[list[Pair]]) -> list[tuple[int, int]]:
    """Where small talk may go: after a pair whose reply does not wait for the customer,
    outside the greeting and the wrap-up."""
    slots = []
    for ei, ep in enumerate(episodes[:-1]):
        if ei == 0:
            continue
        for pi, pair in enumerate(ep):
            reply = pair["assistant"]
            if "?" in reply or "take your time" in reply.lower() or "be here" in reply:
                continue  # the customer owes an answer here; no small talk
            slots.append((ei, pi))
    return slots


def _pair_messages(rng: random.Random, pair: Pair) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": pair["user"]}]
    if "tool" in pair:
        cid = random_id(rng)
        out.append({"role": "assistant", "content": None, "tool_calls": [tool_call(cid, pair["tool"], pair["args"])]})
        out.append({"role": "tool", "tool_call_id": cid, "content": args_json(pair["result"])})
    out.append({"role": "assistant", "content": pair["assistant"]})
    return out


def support_chat(session: Session, spec: dict[str, Any], rng: random.Random) -> Session:
    episodes = [ep["turns"] for ep in spec["episodes"]]
    episode_pairs = sum(len(e) for e in episodes)
    n_tools = sum(1 for e in episodes for pair in e if "tool" in pair)
    # messages = system + 2*pairs + 2*tool calls + final user message
    n_fill = (spec["target_messages"] - 2 - 2 * n_tools) // 2 - episode_pairs
    fillers = _fillers(rng, spec["fillers"], n_fill)
    slots = _slots(episodes)
    chosen = sorted(rng.sample(range(len(slots)), k=min(len(fillers), len(slots))))
    inserts: dict[tuple[int, int], list[Pair]] = {}
    for k, unit in enumerate(fillers):
        inserts.setdefault(slots[chosen[k % len(chosen)]], []).extend(unit)
    messages: list[dict[str, Any]] = [{"role": "system", "content": spec["system"]}]
    for ei, ep in enumerate(episodes):
        for pi, pair in enumerate(ep):
            messages += _pair_messages(rng, pair)
            for filler in inserts.get((ei, pi), []):
                messages += _pair_messages(rng, filler)
    messages.append({"role": "user", "content": spec["last_user"]})
    return {"messages": messages}
