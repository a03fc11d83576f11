"""Goldens of a fixed session (analysis/fixes.py): the bundle records which fixes were applied, with
what they need to be applied again (their params: pin-date's instant) and the session they were
applied to; `verify` applies them again to that session (or to the session file given) and checks
that they give the same requests and the same ids. The projection, when chosen, is recorded too."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .goldens import FULL_IDS_LIMIT, encode_ids, golden_of, ids_sha256

if TYPE_CHECKING:
    from ..analysis.fixes import Applied
    from ..assembly import Assembler

Prepare = Callable[[dict[str, Any]], dict[str, Any]]


def record(applied: "Applied") -> dict[str, Any]:
    """What a golden keeps of the fixes."""
    return {"applied": applied.specs(), "projection": applied.settings.projection,
            "settings": applied.settings.to_json(), "source": applied.original}


def turns_of(asm: "Assembler", applied: "Applied", requests: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    """Each turn's ids after the fixes: the fixed assembler's, or the projection's."""
    from ..analysis.fixes import fixed_assembler, ids_of, projection_hook
    if applied.settings.projection:
        return [ids_of(r) for r in projection_hook()(asm, list(requests))]
    sess = fixed_assembler(asm, applied.settings).session()
    return [sess.assemble(r).token_ids for r in requests]


def fixed_golden(asm: "Assembler", name: str, requests: Sequence[dict[str, Any]], applied: "Applied",
                 turns: str = "all") -> dict[str, Any]:
    """A golden of the fixed session's requests, with the fixes recorded."""
    from ..analysis.fixes import fixed_assembler
    if not applied.settings.projection:
        golden = golden_of(fixed_assembler(asm, applied.settings), name, requests, turns=turns)
    else:
        ids = turns_of(asm, applied, requests)
        chosen = range(len(ids)) if turns == "all" else [len(ids) - 1]
        total = sum(len(ids[k]) for k in chosen)
        rows = [{"turn": k + 1, "count": len(ids[k]), "sha256": ids_sha256(ids[k]), "request": requests[k],
                 **({"ids": encode_ids(ids[k])} if total <= FULL_IDS_LIMIT or k == len(ids) - 1 else {})}
                for k in chosen]
        golden = {"session": name, "template_sha256": asm.template.version,
                  "tokenizer_version": asm.tokenizer.version, "turns": rows}
    golden["fixes"] = record(applied)
    return golden


def reapply(asm: "Assembler", golden: dict[str, Any], source: dict[str, Any] | None = None,
            prepare: Prepare | None = None) -> tuple["Applied", list[dict[str, Any]], str | None]:
    """The golden's fixes applied again (to `source`, the session file as it is now, else to the
    session recorded): the result, its requests for the golden's turns, and a mismatch ('' when
    the requests are those the golden holds; None when a source was given: it may differ)."""
    from ..analysis.fixes import apply_fixes
    from ..sessions import parse_session
    rec = golden["fixes"]
    applied = apply_fixes(source if source is not None else rec["source"], rec["applied"], asm)
    turns = parse_session(applied.session).turns
    requests = [prepare(turns[t["turn"] - 1]) if prepare else turns[t["turn"] - 1]
                for t in golden["turns"] if t["turn"] <= len(turns)]
    if source is not None:
        return applied, requests, None
    want = [t["request"] for t in golden["turns"]]
    same = json.dumps(requests, sort_keys=True) == json.dumps(want, sort_keys=True)
    return applied, requests, "" if same else (
        "the recorded fixes, applied again to the recorded session, give other requests than the golden's")
