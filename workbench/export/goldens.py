"""A bundle's goldens: the ids a session's requests must assemble to, stored as base64 uint32
little-endian with their count and SHA-256 (bundle.py writes them, fixed.py for a fixed session,
verify.py checks them)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..assembly import Assembler

# Above this many tokens in one session, goldens keep every turn's count and SHA-256 but the ids of
# the last turn only (the SHA-256 still proves equality; the ids locate the first difference).
FULL_IDS_LIMIT = 1_000_000


def encode_ids(ids: np.ndarray) -> str:
    return base64.b64encode(np.asarray(ids, dtype="<u4").tobytes()).decode("ascii")


def decode_ids(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text, validate=True), dtype="<u4").astype(np.uint32)


def ids_sha256(ids: np.ndarray) -> str:
    return hashlib.sha256(np.asarray(ids, dtype="<u4").tobytes()).hexdigest()


def golden_of(asm: Assembler, name: str, requests: Sequence[dict], *, turns: str = "all") -> dict:
    """Expected ids for a session's requests (already prepared: request variables merged in). With
    turns="last" only the last request is kept: alone, it assembles to the same ids."""
    chosen = list(range(len(requests))) if turns == "all" else [len(requests) - 1]
    sess = asm.session()
    results = [sess.assemble(requests[k]) for k in chosen]
    total = sum(r.total_tokens for r in results)
    out = []
    for k, r in zip(chosen, results):
        row: dict[str, Any] = {"turn": k + 1, "count": int(r.total_tokens), "sha256": ids_sha256(r.token_ids),
                               "request": requests[k]}
        if total <= FULL_IDS_LIMIT or k == chosen[-1]:
            row["ids"] = encode_ids(r.token_ids)
        out.append(row)
    return {"session": name, "template_sha256": asm.template.version, "tokenizer_version": asm.tokenizer.version,
            "turns": out}
