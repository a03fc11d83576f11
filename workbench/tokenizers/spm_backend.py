"""Mistral's SentencePiece vocabularies (v3, v7), as mistral-common encodes them.

mistral-common encodes every text piece between control tokens on its own, and
SentencePiece puts its dummy prefix `▁` in front of each. Rendered as text that
prefix is a space; so a piece that starts with a space is encoded as
SentencePiece(piece[1:]) and the ids round-trip to the text exactly. A piece
with no leading space still gets SentencePiece's prefix (it cannot be turned
off at run time): templates for these vocabularies always write the space.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .base import TokenIds, Tokenizer


class SentencePieceModel(Protocol):
    """What this backend uses of a `sentencepiece.SentencePieceProcessor` (mistral-common's model)."""

    def encode(self, input: str) -> list[int]: ...

    def id_to_piece(self, id: int) -> str: ...

    def get_piece_size(self) -> int: ...

    def is_control(self, id: int) -> bool: ...

    def is_byte(self, id: int) -> bool: ...


class MistralSPMTokenizer(Tokenizer):
    def __init__(self, sp: SentencePieceModel, *, name: str, version: str, description: str):
        self.name, self.version, self.description = name, version, description
        self._sp = sp
        self.specials = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())
                         if sp.is_control(i) or (sp.id_to_piece(i).startswith("[") and sp.id_to_piece(i).endswith("]")
                                                 and i < 1000)}
        self.specials.pop("<unk>", None)
        self.bos_token, self.eos_token = "<s>", "</s>"
        self._by_id = {v: k.encode() for k, v in self.specials.items()}

    def encode_ordinary(self, text: str) -> TokenIds:
        if text.startswith(" "):
            text = text[1:]
        return np.asarray(self._sp.encode(text), dtype=np.uint32)

    def token_bytes(self, token_id: int) -> bytes:
        b = self._by_id.get(token_id)
        if b is not None:
            return b
        sp = self._sp
        if sp.is_byte(token_id):
            return bytes([int(sp.id_to_piece(token_id)[3:5], 16)])
        return sp.id_to_piece(token_id).replace("\u2581", " ").encode("utf-8")

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()
