"""`workbench analyze SESSION` for a session whose requests carry the responses they got (a log:
`{"requests": [{..., "response": {..., "usage": ...}}, ...]}`): each turn's reported cache figures
beside the predicted ones, and the class of the difference (reconcile.py).

The provider is `--provider`, else the session's own `"provider"`, else read from the usage's
shape (Anthropic's figures: `anthropic`; any other: `openai`). A request's `"timestamp"` (ISO-8601),
where it has one, gives the gaps the TTLs are measured on; without one, turns are 60 s apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .logs import BadLine, parse_timestamp
from .reconcile import Reconciler


@dataclass(frozen=True, slots=True)
class SessionCheck:
    """Per turn, its reconciliation row (None where the turn's request carried no usage), and the
    usage diagnostics (their `line` is the request's number, from 1)."""
    per_turn: tuple[dict[str, Any] | None, ...]
    diagnostics: tuple[BadLine, ...]

    @property
    def per_turn_any(self) -> bool:
        return any(r is not None for r in self.per_turn)

    def to_json(self) -> dict[str, Any]:
        return {"turns": list(self.per_turn), "diagnostics": [b.to_json() for b in self.diagnostics]}


def _guess(requests: Sequence[Any]) -> str:
    for r in requests:
        usage = (r.get("response") or {}).get("usage") if isinstance(r, dict) and isinstance(
            r.get("response"), dict) else None
        if isinstance(usage, dict):
            return "anthropic" if "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage \
                else "openai"
    return "openai"


def reconcile_turns(raw: Any, turns: Sequence[Any], asm: Any, provider: str | None) -> SessionCheck:
    """`turns`: `analyze`'s TurnAnalysis list for the session `raw` (the file's JSON object)."""
    requests = raw.get("requests") if isinstance(raw, dict) else None
    if not isinstance(requests, list) or not any(isinstance(r, dict) and "response" in r for r in requests):
        return SessionCheck(tuple(None for _ in turns), ())
    session_provider = raw.get("provider") if isinstance(raw.get("provider"), str) else None
    rec = Reconciler("session", provider or session_provider or _guess(requests))
    name = str(raw.get("title") or "session")
    prev_len = 0
    for k, (t, req) in enumerate(zip(turns, requests), start=1):
        req = req if isinstance(req, dict) else {}
        ts = req.get("timestamp") if isinstance(req.get("timestamp"), str) else None
        reply = t.held[prev_len:] if t.held is not None and len(t.held) > prev_len else None
        rec.add(name, k, timestamp=ts, when=parse_timestamp(ts), provider=None, response=req.get("response"),
                result=t.result, cause=t.causes[0].code if t.causes else None, previous_reply=reply)
        prev_len = len(t.result.token_ids)
    done = rec.finish()
    by_turn = {c.turn: c for c in done.checks}
    rows: list[dict[str, Any] | None] = []
    for k in range(1, len(turns) + 1):
        c = by_turn.get(k)
        rows.append(None if c is None else {
            "provider": c.provider, "class": c.cls, "cause": c.cause,
            "predicted": {"cached": c.predicted_cached, "written": c.predicted_written},
            "reported": c.reported.to_json(), "tokens": c.tokens})
    return SessionCheck(tuple(rows), done.diagnostics)
