"""The aggregate's `reconciliation` (docs/logs.md section 8): reconciled calls counted per class,
merged by addition like the rest of the tally (tally.py), so that the report does not depend on
how sessions were batched or which runner ran them.

Counts are integers (tokens per class and provider); money is computed once, at the end, from
them: a sum of floats would depend on the order batches finished in.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .provider_params import MILLION
from .reconcile import ADVICE, CLASSES, CallCheck, EngineCall, SessionReconciliation, provider_params
from .reconcile_usage import Reported

MAX_LISTED = 100           # unexplained calls and diagnostics listed (all are counted)


def _first(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["file"], r["line"]))[:MAX_LISTED]


@dataclass
class ReconTally:
    calls: int = 0
    with_usage: int = 0
    # class -> {"calls", "tokens", "by": {provider: tokens}}
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    rewrite: dict[str, list[int]] = field(default_factory=dict)        # conversation -> [written, largest]
    unexplained: list[dict[str, Any]] = field(default_factory=list)    # the first MAX_LISTED, by file and line
    diagnostics: list[dict[str, Any]] = field(default_factory=list)    # the first MAX_LISTED, by file and line
    diagnostic_count: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)           # every call, when asked for (--reconcile-calls)
    # Calls to serving engines, waiting for the pass over their shared cache (`finish_engines`).
    engine: list[EngineCall] = field(default_factory=list)

    def add(self, cid: str, rec: SessionReconciliation | None, keep_rows: bool) -> None:
        if rec is None:
            return
        self.engine += rec.engine
        self.calls += rec.calls
        self.with_usage += len(rec.checks)
        for c in rec.checks:
            self._count(c)
        if rec.rewrite is not None:
            w = self.rewrite.setdefault(cid, [0, 0])
            w[0] += rec.rewrite[0]
            w[1] = max(w[1], rec.rewrite[1])
        unexplained = [_unexplained_row(c) for c in rec.checks if c.cls == "unexplained"]
        if unexplained:
            self.unexplained = _first(self.unexplained + unexplained)
        if rec.diagnostics:
            self.diagnostic_count += len(rec.diagnostics)
            self.diagnostics = _first(self.diagnostics + [b.to_json() for b in rec.diagnostics])
        if keep_rows:
            self.rows += [c.to_json() for c in rec.checks]

    def _count(self, c: CallCheck) -> None:
        slot = self.classes.setdefault(c.cls, {"calls": 0, "tokens": 0, "by": {}})
        slot["calls"] += 1
        slot["tokens"] += c.tokens
        slot["by"][c.provider] = slot["by"].get(c.provider, 0) + c.tokens

    def merge(self, o: "ReconTally") -> None:
        self.calls += o.calls
        self.with_usage += o.with_usage
        for name, s in o.classes.items():
            slot = self.classes.setdefault(name, {"calls": 0, "tokens": 0, "by": {}})
            slot["calls"] += s["calls"]
            slot["tokens"] += s["tokens"]
            for p, n in s["by"].items():
                slot["by"][p] = slot["by"].get(p, 0) + n
        for cid, (w, big) in o.rewrite.items():
            mine = self.rewrite.setdefault(cid, [0, 0])
            mine[0] += w
            mine[1] = max(mine[1], big)
        self.unexplained = _first(self.unexplained + o.unexplained)
        self.diagnostics = _first(self.diagnostics + o.diagnostics)
        self.diagnostic_count += o.diagnostic_count
        self.rows += o.rows
        self.engine += o.engine

    def finish_engines(self, keep_rows: bool) -> None:
        """The serving engines' calls through their shared caches (reconcile_engines.py), counted like
        any other call. Run once, by the driver, after every batch is merged."""
        if not self.engine:
            return
        from .reconcile_engines import reconcile_engines
        done = reconcile_engines(self.engine)
        self.engine = []
        for cid, rec in done.by_conversation.items():
            self.add(cid, rec, keep_rows)

    def to_wire(self) -> dict[str, Any]:
        return {"calls": self.calls, "with_usage": self.with_usage, "classes": self.classes, "rewrite": self.rewrite,
                "unexplained": self.unexplained, "diagnostics": self.diagnostics,
                "diagnostic_count": self.diagnostic_count, "rows": self.rows,
                "engine": [_engine_to_wire(c) for c in self.engine]}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> "ReconTally":
        return cls(d["calls"], d["with_usage"], d["classes"], d["rewrite"], d["unexplained"], d["diagnostics"],
                   d["diagnostic_count"], d["rows"], [_engine_from_wire(x) for x in d.get("engine", [])])

    # the report ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The `reconciliation` object of `analyze --aggregate --json` (docs/logs.md section 8)."""
        classes = {}
        for name in CLASSES:
            s = self.classes.get(name, {"calls": 0, "tokens": 0, "by": {}})
            classes[name] = {"calls": s["calls"], "tokens": s["tokens"], "cost": _cost(s["by"])}
        written = sum(w for w, _ in self.rewrite.values())
        largest = sum(b for _, b in self.rewrite.values())
        return {"calls": self.calls, "with_usage": self.with_usage, "classes": classes,
                "rewrite_factor": {"overall": round(written / largest, 4) if largest else None,
                                   "by_conversation": {cid: round(w / b, 4) for cid, (w, b) in
                                                       sorted(self.rewrite.items()) if b}},
                "unexplained": self.unexplained, "diagnostics": self.diagnostics,
                "diagnostic_count": self.diagnostic_count, "advice": dict(ADVICE)}

    def call_rows(self) -> list[dict[str, Any]]:
        """Every reconciled call (kept when asked for), by file and line."""
        return sorted(self.rows, key=lambda r: (r["file"], r["line"]))


def _cost(by: dict[str, int]) -> float | None:
    """USD at each line's provider prices: a token the cache did (or did not) serve is worth the
    input price less the cached-input price. None where no provider of the class has prices."""
    total, priced = 0.0, False
    for name in sorted(by):
        p = provider_params(name)
        if isinstance(p, str):
            continue
        priced = True
        total += by[name] * max(0.0, p.prices.input - p.prices.cached_input) / MILLION
    return round(total, 6) if priced else None


def _unexplained_row(c: CallCheck) -> dict[str, Any]:
    return {"conversation_id": c.conversation_id, "timestamp": c.timestamp, "file": c.file, "line": c.line,
            "provider": c.provider, "predicted": {"cached": c.predicted_cached, "written": c.predicted_written},
            "reported": c.reported.to_json()}



# ------------------------------------------------------------------ engine calls on the wire (Ray)
def _ids_out(a: np.ndarray | None) -> str | None:
    # Token ids as base64 of little-endian uint32: a quarter of a JSON list's size, and exact.
    return None if a is None else base64.b64encode(np.asarray(a, dtype="<u4").tobytes()).decode("ascii")


def _ids_in(s: str | None) -> np.ndarray | None:
    return None if s is None else np.frombuffer(base64.b64decode(s), dtype="<u4").astype(np.uint32)


def _engine_to_wire(c: EngineCall) -> dict[str, Any]:
    r = c.reported
    return {"provider": c.provider, "cid": c.conversation_id, "turn": c.turn, "file": c.file, "line": c.line,
            "timestamp": c.timestamp, "when": c.when, "base": c.base, "tail": _ids_out(c.tail),
            "reply": _ids_out(c.reply), "cause": c.cause, "hold_last": c.hold_last,
            "reported": None if r is None else [r.cached, r.written, r.prompt, r.shape]}


def _engine_from_wire(d: dict[str, Any]) -> EngineCall:
    r = d["reported"]
    tail = _ids_in(d["tail"])
    return EngineCall(d["provider"], d["cid"], d["turn"], d["file"], d["line"], d["timestamp"], d["when"], d["base"],
                      tail if tail is not None else np.zeros(0, np.uint32), _ids_in(d["reply"]),
                      None if r is None else Reported(*r), d["cause"], d["hold_last"])
