"""`workbench verify DIR [SESSION...]`: re-assemble a bundle's goldens here and report any drift:
the first token that differs, located to its segment and message, and any template or tokenizer
hash mismatch. Drift is the pitfall of instances running different template or tokenizer versions.
A configuration that fails its seal (a policy or limit edited after the export) is reported field
by field, and nothing is assembled with it: its limits are not the ones exported.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..difference import first_difference
from ..errors import BundleError, WorkbenchError
from ..sessions import load_session
from . import paths
from .goldens import decode_ids, ids_sha256
from .loader import CONFIG_FILE, load
from .schema import check_golden
from .seal import Change, golden_changes


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
    seal: str | None = None                               # the seal's SHA-256 (what to pin)
    not_assembled: str | None = None                      # why nothing was assembled, when nothing was

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.drift and self.not_assembled is None and self.compared > 0

    @property
    def compared(self) -> int:
        """Turns whose ids were compared with a golden's (session files given alone are only assembled)."""
        return sum(c["turns"] for c in self.checked if c.get("golden", True))

    def to_json(self) -> dict:
        return {"bundle": self.bundle, "ok": self.ok, "seal": self.seal, "mismatches": self.mismatches,
                "drift": [d.__dict__ | {"message": d.describe()} for d in self.drift], "checked": self.checked,
                "compared": self.compared, "not_assembled": self.not_assembled}


def _locate(result: Any, index: int) -> tuple[str | None, int | None]:
    seg = next((s for s in result.segments if s.start <= index < s.end), None)
    if seg is None:
        return None, None
    label = seg.kind + (f" · {seg.role}" if seg.role else "") + (f" · seq {seg.seq}" if seg.seq is not None else "")
    return label, seg.seq


# A golden holds each chosen turn's request and ids (the ids of the last turn only past
# goldens.FULL_IDS_LIMIT tokens): hundreds of megabytes are past any session the workbench exports.
MAX_GOLDEN_BYTES = 256 << 20


def read_golden(root: Path, rel: str, fld: str, sealed: Any = None) -> tuple[dict, list[Change]]:
    """The golden file, checked against its schema, with its turns' ids decoded; and how it differs
    from `sealed` (its entry's `seal` in workbench.yaml: None, not sealed, is one Change)."""
    path = paths.inside(root, rel, fld)
    raw = paths.read_bytes(path, MAX_GOLDEN_BYTES, rel, fld)
    try:
        golden = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise BundleError(f"{rel}: cannot read the golden ({reason})", file=rel, field=fld) from None
    check_golden(golden, rel)
    changed = golden_changes(golden, sealed) if isinstance(sealed, dict) else [Change("seal", "missing")]
    for i, row in enumerate(golden["turns"]):
        if "ids" in row:
            try:
                row["ids"] = decode_ids(row["ids"])
            except ValueError as exc:
                raise BundleError(f"{rel}: turns[{i}].ids is not base64 of little-endian uint32 ({exc})", file=rel,
                                  field=f"turns[{i}].ids") from None
    return golden, changed


def _unsealed(change: Change) -> str:
    if change.field == "seal":
        return ("the golden is not sealed (the bundle was exported before goldens were sealed): its requests, ids "
                "and fixes may have been edited; export the bundle again")
    return change.describe()


NO_GOLDENS = ("the bundle holds no goldens: there are no exported ids to compare, so nothing would be verified "
              "(export it with at least one session)")
NO_TURNS = "the golden holds no turns: there are no exported ids of it to compare"


def _reapply(asm: Any, golden: dict, rel: str, source: dict | None) -> Any:
    """The golden's fixes applied again (fixed.py); a record they cannot be applied from is an
    error naming the golden and its `fixes`, whatever the fix raised it as."""
    from .fixed import reapply
    try:
        return reapply(asm, golden, source)
    except WorkbenchError as exc:
        raise BundleError(f"{rel}: fixes: the recorded fixes cannot be applied again: {exc}", file=rel,
                          field="fixes", hint="export the bundle again") from None


def _fixed_ids(asm: Any, applied: Any, requests: list, rel: str) -> list:
    from .fixed import turns_of
    try:
        return turns_of(asm, applied, requests)
    except WorkbenchError as exc:
        raise BundleError(f"{rel}: fixes: the recorded projection cannot be made again: {exc}", file=rel,
                          field="fixes", hint="export the bundle again") from None


class _Turns:
    """A golden's turns, assembled in order: by the bundle's assembler (with the fixes' settings
    when the golden records fixes), or taken from the projection's ids."""

    def __init__(self, projected: list[Any] | None, asm: Any, applied: Any):
        from types import SimpleNamespace
        self._projected = None if applied is None or not applied.settings.projection else \
            iter(SimpleNamespace(token_ids=i, segments=()) for i in (projected or []))
        if applied is not None and self._projected is None:
            from ..analysis.fixes import fixed_assembler
            asm = fixed_assembler(asm, applied.settings)
        self._sess = asm.session()

    def assemble(self, request: dict) -> Any:
        return next(self._projected) if self._projected is not None else self._sess.assemble(request)


def verify(folder: str | Path, sessions: Sequence[str] = (), *, seal: str | None = None) -> VerifyReport:
    """Re-assemble the goldens (and `sessions`) here. `seal`: the seal SHA-256 pinned by the caller."""
    bundle = load(folder, strict=False, seal=seal)
    report = VerifyReport(str(folder), bundle.mismatches, seal=bundle.config["seal"]["sha256"])
    asm = bundle.assembler
    if asm is None:
        report.not_assembled = ("the configuration is not the one exported (see the mismatches): nothing was "
                                "assembled with it")
        return report
    given = {Path(s).name: s for s in sessions}
    if not bundle.config["goldens"]:
        # Nothing exported to compare with: "ok" here would say what nothing was checked for.
        report.mismatches.append({"file": CONFIG_FILE, "field": "goldens", "message": NO_GOLDENS})
    for i, g in enumerate(bundle.config["goldens"]):
        golden, changed = read_golden(bundle.path, g["file"], f"goldens[{i}].file", g.get("seal"))
        for ch in changed:   # named, and still assembled: the drift shows what the edit does
            report.mismatches.append({"file": g["file"], "field": ch.field, "message": _unsealed(ch)})
        name = golden["session"]
        rows = golden["turns"]
        if not rows:
            report.mismatches.append({"file": g["file"], "field": "turns", "message": NO_TURNS})
        requests = [t["request"] for t in rows]
        source = given.pop(Path(name).name, None)
        if "fixes" in golden:               # the fixes, applied again: the same requests, the same ids
            applied, requests, differ = _reapply(asm, golden, g["file"], load_session(source).raw if source else None)
            if differ and not any(m["file"] == g["file"] and m["field"] == "fixes" for m in report.mismatches):
                report.mismatches.append({"file": g["file"], "field": "fixes", "message": differ})
            results = _Turns(_fixed_ids(asm, applied, requests, g["file"]) if applied.settings.projection else None,
                             asm, applied)
        else:
            if source is not None:        # the session file as it is now, against the exported ids
                now = load_session(source).turns
                requests = [now[t["turn"] - 1] if t["turn"] <= len(now) else t["request"] for t in rows]
            results = _Turns(None, asm, None)
        if len(requests) < len(rows):     # a turn not compared is never passed over in silence
            report.mismatches.append({"file": g["file"], "field": "turns", "message": (
                f"the fixes applied again give {len(requests)} of the golden's {len(rows)} turns: the others "
                "were not compared")})
        tokens = 0
        for exp, req in zip(rows, requests):
            k = exp["turn"]
            r = results.assemble(req)
            tokens += len(r.token_ids)
            ids = r.token_ids
            if ids_sha256(ids) == exp["sha256"] and len(ids) == exp["count"]:
                continue
            if "ids" not in exp:
                report.drift.append(Drift(name, k, exp["count"], len(ids), None, None, None, None, None))
                continue
            want = exp["ids"]
            i = first_difference(ids, want)
            seg, seq = _locate(r, min(i, len(ids) - 1)) if len(ids) else (None, None)
            report.drift.append(Drift(name, k, len(want), len(ids), i, int(want[i]) if i < len(want) else None,
                                      int(ids[i]) if i < len(ids) else None, seg, seq))
        report.checked.append({"session": name, "turns": min(len(rows), len(requests)), "tokens": tokens})
    for name, path in given.items():      # no golden for these: they must assemble here
        s = load_session(path)
        sess = asm.session()
        total = sum(sess.assemble(t).total_tokens for t in s.turns)
        report.checked.append({"session": name, "turns": len(s.turns), "tokens": total, "golden": False})
    return report
