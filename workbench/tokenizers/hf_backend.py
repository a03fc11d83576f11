"""Hugging Face `tokenizers` vocabularies (tokenizer.json): DeepSeek, any `hf:` folder."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .._optional import require
from .base import TokenIds, Tokenizer, file_sha256


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    # GPT-2's byte <-> printable-unicode table used by ByteLevel tokenizers.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class _Encoded(Protocol):
    ids: list[int]


class _Backend(Protocol):
    """What this backend uses of a `tokenizers.Tokenizer` (tokenizers is optional: imported at run time)."""

    def encode(self, sequence: str, *, add_special_tokens: bool) -> _Encoded: ...

    def encode_batch(self, input: Sequence[str], *, add_special_tokens: bool) -> list[_Encoded]: ...

    def id_to_token(self, id: int) -> str | None: ...

    def get_vocab_size(self, with_added_tokens: bool) -> int: ...


class HFTokenizer(Tokenizer):
    def __init__(self, path: Path, *, name: str, description: str = "",
                 config: dict[str, Any] | None = None):
        tk = require("tokenizers", f"the {name} tokenizer")
        self.name, self.description = name, description
        self.version = file_sha256(path)
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        added = data.get("added_tokens") or []
        self.specials = {a["content"]: a["id"] for a in added}
        # Special tokens are split by the shared machinery; the model itself must see plain text only.
        data["added_tokens"] = []
        self._tok: _Backend = tk.Tokenizer.from_str(json.dumps(data))
        self._vocab = {v: k for k, v in data["model"].get("vocab", {}).items()} if isinstance(
            data["model"].get("vocab"), dict) else {}
        self._byte_level = "ByteLevel" in json.dumps(data.get("decoder") or {}) or \
            "ByteLevel" in json.dumps(data.get("pre_tokenizer") or {})
        self._by_id = {v: k.encode("utf-8") for k, v in self.specials.items()}
        cfg = config or {}
        self.bos_token = _tok_str(cfg.get("bos_token"))
        self.eos_token = _tok_str(cfg.get("eos_token"))

    def encode_ordinary(self, text: str) -> TokenIds:
        return np.asarray(self._tok.encode(text, add_special_tokens=False).ids, dtype=np.uint32)

    def encode_ordinary_many(self, texts: list[str]) -> list[TokenIds]:
        # tokenizers encodes a batch on all cores, outside the GIL.
        return [np.asarray(e.ids, dtype=np.uint32) for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def token_bytes(self, token_id: int) -> bytes:
        b = self._by_id.get(token_id)
        if b is not None:
            return b
        piece = self._tok.id_to_token(token_id)
        if piece is None:
            return b""
        if self._byte_level:
            dec = _byte_decoder()
            return bytes(dec.get(ch, 0) for ch in piece)
        if piece.startswith("<0x") and piece.endswith(">") and len(piece) == 6:
            return bytes([int(piece[3:5], 16)])
        return piece.replace("\u2581", " ").encode("utf-8")

    @property
    def vocab_size(self) -> int:
        return max(self._tok.get_vocab_size(with_added_tokens=False), max(self.specials.values(), default=0) + 1)


def _tok_str(v: object) -> str | None:
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None
