"""A batch of logged sessions analysed and counted (docs/logs.md): the unit of work both runners
of the aggregate (aggregate.py here, ray_runner.py on Ray) run, and the `Tally` it returns.

A tally holds integers and names only and merges by addition, so the report does not depend on
how sessions were batched or in which order batches finished.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .logs import BadLines, LineRef, read_lines
from .reconcile_report import ReconTally
from .session_report import Assemblers, SessionReport, TurnRow, analyze_session

# Causes no one-click fix addresses: what to do instead (a name for the advice, and the advice).
ADVICE_FIXES: dict[str, tuple[str, str]] = {
    "template_changed": ("pin-template-per-conversation", "roll template upgrades out to new conversations "
                                                          "only"),
    "edited_message": ("append-only-log", "edit by appending a correction, not by rewriting history"),
    "truncated": ("chunked-truncation", "--truncation chunked: drop history in larger, rarer steps"),
    "reordered": ("order-preserving-projection", "project the log to the request with an order-preserving, "
                                                 "pure function"),
    "tools_changed": ("fixed-tool-set", "keep the tool set fixed within a session, or put changing tools last"),
    "system_changed": ("stable-system-prompt", "keep the system prompt fixed; per-request facts go last"),
}


# ------------------------------------------------------------------ the tally (a batch's counts)
def _cause_slot() -> dict[str, Any]:
    return {"sessions": 0, "turns": 0, "lost": 0, "templates": {}, "systems": {}, "logged": {}, "clients": {}}


@dataclass
class Tally:
    """What a batch of sessions adds to the report: integers and names, merged by addition."""
    sessions: int = 0
    turns: int = 0
    tokens: int = 0
    held: int = 0
    reused: int = 0
    causes: dict[str, dict[str, Any]] = field(default_factory=dict)
    fixes: dict[str, dict[str, Any]] = field(default_factory=dict)
    bad: BadLines = field(default_factory=BadLines)      # counted; the first 100 kept (logs.BadLines)
    recon: ReconTally = field(default_factory=ReconTally)

    def add(self, report: SessionReport, keep_calls: bool = False) -> None:
        self.bad.extend(report.bad)
        self.recon.add(report.conversation_id, report.reconciliation, keep_calls)
        if not report.turns:
            return
        self.sessions += 1
        seen: set[str] = set()
        for t in report.turns:
            self.turns += 1
            self.tokens += t.tokens
            self.held += t.held
            self.reused += t.reused
            if t.code is not None:
                self._turn_cause(t, first_in_session=t.code not in seen)
                seen.add(t.code)

    def _turn_cause(self, t: TurnRow, first_in_session: bool) -> None:
        c = self.causes.setdefault(t.code or "", _cause_slot())
        c["sessions"] += first_in_session
        c["turns"] += 1
        c["lost"] += t.lost
        c["templates"][t.template] = c["templates"].get(t.template, 0) + t.lost
        sysrow = c["systems"].setdefault(t.system, [0, t.preview])
        sysrow[0] += t.lost
        if t.provider:
            c["logged"][t.provider] = c["logged"].get(t.provider, 0) + t.lost
        if t.client:
            c["clients"][t.client] = c["clients"].get(t.client, 0) + t.lost
        fix, kind = (t.fix, "fix") if t.fix else (ADVICE_FIXES.get(t.code or "", (None, ""))[0], "advice")
        if fix:
            f = self.fixes.setdefault(fix, {"kind": kind, "causes": set(), "lost": 0})
            f["causes"].add(t.code)
            f["lost"] += t.lost

    def merge(self, other: "Tally") -> None:
        for k in ("sessions", "turns", "tokens", "held", "reused"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.bad.merge(other.bad)
        self.recon.merge(other.recon)
        for code, o in other.causes.items():
            c = self.causes.setdefault(code, _cause_slot())
            for k in ("sessions", "turns", "lost"):
                c[k] += o[k]
            for k in ("templates", "logged", "clients"):
                for name, n in o[k].items():
                    c[k][name] = c[k].get(name, 0) + n
            for sha, (n, preview) in o["systems"].items():
                c["systems"].setdefault(sha, [0, preview])[0] += n
        for name, o in other.fixes.items():
            f = self.fixes.setdefault(name, {"kind": o["kind"], "causes": set(), "lost": 0})
            f["causes"] |= set(o["causes"])
            f["lost"] += o["lost"]

    def to_wire(self) -> dict[str, Any]:
        """Plain JSON types, for a Ray worker to send back."""
        return {"counts": [self.sessions, self.turns, self.tokens, self.held, self.reused], "causes": self.causes,
                "fixes": {k: {**v, "causes": sorted(v["causes"])} for k, v in self.fixes.items()},
                "bad": self.bad.to_wire(), "recon": self.recon.to_wire()}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> "Tally":
        s, t, tok, h, r = d["counts"]
        return cls(s, t, tok, h, r, d["causes"], {k: {**v, "causes": set(v["causes"])} for k, v in d["fixes"].items()},
                   BadLines.from_wire(d["bad"]), ReconTally.from_wire(d["recon"]))


def analyze_batch(paths: Sequence[str], names: Sequence[str], batch: Iterable[tuple[str, Sequence[LineRef]]],
                  assemblers: Assemblers) -> Tally:
    """A batch of whole sessions, read back from the logs and analysed: the unit both runners run."""
    tally = Tally()
    for cid, refs in batch:
        raws = read_lines(paths, refs)
        lines = [(names[r.file], r.line, raw) for r, raw in zip(refs, raws)]
        tally.add(analyze_session(cid, lines, assemblers), assemblers.options.calls)
    return tally


def batches(sessions: Iterable[tuple[str, list[LineRef]]], size: int) -> Iterator[list[tuple[str, list[LineRef]]]]:
    """Whole sessions (`LogIndex.ordered()`), `size` at a time."""
    batch: list[tuple[str, list[LineRef]]] = []
    for item in sessions:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch
