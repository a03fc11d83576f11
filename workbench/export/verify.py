"""`workbench verify DIR [SESSION...]`: re-assemble a bundle's goldens here and report any drift:
the first token that differs, located to its segment and message, and any template or tokenizer
hash mismatch. Drift is the pitfall of instances running different template or tokenizer versions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import BundleError
from ..sessions import load_session
from .bundle import decode_ids, ids_sha256
from .loader import load


@dataclass
class Drift:
    session: str
    turn: int
    expected: int                      # token count in the golden
    got: int
    first_difference: int | None       # token index (None: only the SHA-256 was kept, and it differs)
    expected_id: int | None
    got_id: int | None
    segment: str | None                # where that token falls in the assembly here
    seq: int | None                    # the message's sequence number

    def describe(self) -> str:
        where = f" in {self.segment}" if self.segment else ""
        if self.first_difference is None:
            return (f"{self.session} turn {self.turn}: ids differ ({self.got} tokens here, {self.expected} "
                    f"expected; the golden keeps only their SHA-256 for this turn)")
        return (f"{self.session} turn {self.turn}: first difference at token {self.first_difference}{where}: "
                f"{self.got_id if self.got_id is not None else 'end'} here, "
                f"{self.expected_id if self.expected_id is not None else 'end'} expected "
                f"({self.got} tokens here, {self.expected} expected)")


@dataclass
class VerifyReport:
    bundle: str
    mismatches: list[dict]
    drift: list[Drift] = field(default_factory=list)
    checked: list[dict] = field(default_factory=list)   # {session, turns, tokens}

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.drift

    def to_json(self) -> dict:
        return {"bundle": self.bundle, "ok": self.ok, "mismatches": self.mismatches,
                "drift": [d.__dict__ | {"message": d.describe()} for d in self.drift], "checked": self.checked}


def _locate(result: Any, index: int) -> tuple[str | None, int | None]:
    seg = next((s for s in result.segments if s.start <= index < s.end), None)
    if seg is None:
        return None, None
    label = seg.kind + (f" · {seg.role}" if seg.role else "") + (f" · seq {seg.seq}" if seg.seq is not None else "")
    return label, seg.seq


def verify(folder: str | Path, sessions: Sequence[str] = ()) -> VerifyReport:
    bundle = load(folder, strict=False)
    asm = bundle.assembler
    report = VerifyReport(str(folder), bundle.mismatches)
    given = {Path(s).name: s for s in sessions}
    for g in bundle.config["goldens"]:
        path = bundle.path / g["file"]
        try:
            golden = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BundleError(f"{g['file']}: cannot read the golden ({exc})", file=g["file"]) from None
        name = golden["session"]
        rows = golden["turns"]
        requests = [t["request"] for t in rows]
        if Path(name).name in given:      # the session file as it is now, against the exported ids
            now = load_session(given.pop(Path(name).name)).turns
            requests = [now[t["turn"] - 1] if t["turn"] <= len(now) else t["request"] for t in rows]
        sess = asm.session()
        tokens = 0
        for exp, req in zip(rows, requests):
            k = exp["turn"]
            r = sess.assemble(req)
            tokens += r.total_tokens
            ids = r.token_ids
            if ids_sha256(ids) == exp["sha256"] and len(ids) == exp["count"]:
                continue
            if "ids" not in exp:
                report.drift.append(Drift(name, k, exp["count"], len(ids), None, None, None, None, None))
                continue
            want = decode_ids(exp["ids"])
            n = min(len(ids), len(want))
            diff = np.flatnonzero(ids[:n] != want[:n])
            i = int(diff[0]) if len(diff) else n
            seg, seq = _locate(r, min(i, len(ids) - 1)) if len(ids) else (None, None)
            report.drift.append(Drift(name, k, len(want), len(ids), i, int(want[i]) if i < len(want) else None,
                                      int(ids[i]) if i < len(ids) else None, seg, seq))
        report.checked.append({"session": name, "turns": len(rows), "tokens": tokens})
    for name, path in given.items():      # no golden for these: they must assemble here
        s = load_session(path)
        sess = asm.session()
        total = sum(sess.assemble(t).total_tokens for t in s.turns)
        report.checked.append({"session": name, "turns": len(s.turns), "tokens": total, "golden": False})
    return report
