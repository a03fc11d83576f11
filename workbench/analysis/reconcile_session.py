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
    rec = TurnReconciler(raw, provider)
    for t in turns:
        rec.add(t)
    return rec.finish(len(turns))


class TurnReconciler:
    """`reconcile_turns`, fed one TurnAnalysis at a time as the analysis makes them (so the caller
    need not keep every turn's result): `add` each, then `finish(number of turns)`. Nothing is held
    for a session whose requests carry no response."""

    def __init__(self, raw: Any, provider: str | None):
        requests = raw.get("requests") if isinstance(raw, dict) else None
        self.active = isinstance(requests, list) and any(isinstance(r, dict) and "response" in r for r in requests)
        self._requests: list[Any] = requests if self.active and isinstance(requests, list) else []
        self._rec: Reconciler | None = None
        self._name = ""
        if self.active:
            session_provider = raw.get("provider") if isinstance(raw.get("provider"), str) else None
            self._rec = Reconciler("session", provider or session_provider or _guess(self._requests))
            self._name = str(raw.get("title") or "session")

    def add(self, t: Any) -> None:
        k = t.turn
        if self._rec is None or k > len(self._requests):
            return
        req = self._requests[k - 1]
        req = req if isinstance(req, dict) else {}
        ts = req.get("timestamp") if isinstance(req.get("timestamp"), str) else None
        # The reply the engine holds past the previous prompt (`held` beyond that prompt's ids).
        self._rec.add(self._name, k, timestamp=ts, when=parse_timestamp(ts), provider=None,
                      response=req.get("response"), result=t.result, cause=t.causes[0].code if t.causes else None,
                      previous_reply=t.reply_ids)

    def finish(self, count: int) -> SessionCheck:
        if self._rec is None:
            return SessionCheck(tuple(None for _ in range(count)), ())
        done = self._rec.finish()
        by_turn = {c.turn: c for c in done.checks}
        rows: list[dict[str, Any] | None] = []
        for k in range(1, count + 1):
            c = by_turn.get(k)
            rows.append(None if c is None else {
                "provider": c.provider, "class": c.cls, "cause": c.cause,
                "predicted": {"cached": c.predicted_cached, "written": c.predicted_written},
                "reported": c.reported.to_json(), "tokens": c.tokens})
        return SessionCheck(tuple(rows), done.diagnostics)
