"""Builders for sessions written out in full apart from what must vary: drawn tool-call ids
(tool_agent) and a per-request time stamp and request id (timestamp_system)."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from typing import Any

from .common import Session, random_id, substitute


def call_ids(session: Session, spec: dict[str, Any], rng: random.Random) -> Session:
    """The source's messages with ``$call0`` … ``$call<count-1>`` replaced by drawn ids."""
    ids = {f"$call{i}": random_id(rng) for i in range(spec["count"])}
    return {"messages": substitute(session["messages"], ids)}


def timestamped_requests(session: Session, spec: dict[str, Any], rng: random.Random) -> Session:
    """One request per turn; each system prompt starts with the time and a fresh request id,
    and the history grows by the turn's user/assistant pair."""
    requests = []
    t = spec["start"]
    history: list[dict[str, Any]] = []
    for gap, turn in zip(spec["gaps"], spec["turns"], strict=True):
        t += gap
        stamp = dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        rid = uuid.UUID(int=rng.getrandbits(128), version=4)
        system = spec["system_header"].format(time=stamp, request_id=rid) + "\n\n" + spec["system"]
        user = {"role": "user", "content": turn["user"]}
        requests.append({"messages": [{"role": "system", "content": system}, *history, user], "tools": []})
        if turn.get("assistant") is not None:
            history = [*history, user, {"role": "assistant", "content": turn["assistant"]}]
    return {"requests": requests}
