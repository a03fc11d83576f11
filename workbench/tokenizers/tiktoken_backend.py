"""Byte-level BPE vocabularies run by tiktoken (OpenAI, Llama 3, Qwen, Phi-4, Tekken)."""

from __future__ import annotations

import copy
import threading
import unicodedata
from collections.abc import Callable, Collection, Set
from typing import Protocol

import numpy as np

from .._optional import require
from .base import TokenIds, Tokenizer


class _Encoding(Protocol):
    """What this backend uses of a `tiktoken.Encoding` (tiktoken is optional: imported at run time)."""

    max_token_value: int

    def encode_to_numpy(self, text: str, *, allowed_special: Set[str],
                        disallowed_special: Collection[str]) -> TokenIds: ...

    def decode_single_token_bytes(self, token: int) -> bytes: ...


class TiktokenTokenizer(Tokenizer):
    releases_gil = True  # tiktoken's Rust core encodes without holding the GIL

    def __init__(self, *, name: str, version: str, description: str, mergeable_ranks: dict[bytes, int],
                 pat_str: str, specials: dict[str, int], bos_token: str | None = None,
                 eos_token: str | None = None, nfc: bool = False, id_offset: int = 0):
        tiktoken = require("tiktoken", f"the {name} tokenizer")
        self.name, self.version, self.description = name, version, description
        self.specials = dict(specials)
        self.bos_token, self.eos_token = bos_token, eos_token
        # Tekken numbers its byte-level ranks after its control tokens: id = rank + offset.
        self._offset = id_offset
        self._nfc = nfc
        # (kept for a worker's own core: the same objects, no copy)
        self._core_args = {"name": f"workbench-{name}", "pat_str": pat_str, "mergeable_ranks": mergeable_ranks,
                           "special_tokens": {} if id_offset else specials}
        self._enc: _Encoding = tiktoken.Encoding(**self._core_args)
        self._by_id = {v: k.encode("utf-8") for k, v in specials.items()}
        self._special_set = frozenset(specials) if not id_offset else frozenset()
        self._encode: Callable[[str], TokenIds] = self._make_encoder()
        self._workers = threading.local()     # each pool thread's own copy (encode_with_specials_on_worker)

    def _make_encoder(self) -> Callable[[str], TokenIds]:
        enc, off, nfc = self._enc, self._offset, self._nfc

        def encode(text: str) -> TokenIds:
            if nfc and not text.isascii() and not unicodedata.is_normalized("NFC", text):
                # Qwen's HF tokenizer applies NFC before BPE; do the same.
                text = unicodedata.normalize("NFC", text)
            ids = enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=())
            if ids.dtype != np.uint32:
                ids = ids.astype(np.uint32)
            if off:
                ids = ids + np.uint32(off)
            return ids
        return encode

    def encode_ordinary(self, text: str) -> TokenIds:
        return self._encode(text)

    def encode_with_specials_on_worker(self, text: str) -> TokenIds:
        # tiktoken picks one of its regex copies by a hash of the calling thread, and two threads
        # can land on the same copy: both then fight over that regex's scratch space, and two
        # encodes at once took longer than one after the other (85 ms against 63 for the same text
        # on 2 cores; 35 ms when they did not share). A worker thread encodes with a core of its
        # own (about 0.1 s and 35 MB to build once per worker; the ranks are shared).
        own: TiktokenTokenizer | None = getattr(self._workers, "copy", None)
        if own is None:
            own = self._workers.copy = self._own_core()
        return own.encode_with_specials(text)

    def _own_core(self) -> "TiktokenTokenizer":
        tiktoken = require("tiktoken", f"the {self.name} tokenizer")
        own = copy.copy(self)
        own._enc = tiktoken.Encoding(**self._core_args)
        own._encode = own._make_encoder()
        return own

    def encode_with_specials(self, text: str) -> TokenIds:
        if not self._special_set:  # Tekken: control tokens live outside tiktoken's table
            return self.encode(text)
        if self._nfc and not text.isascii() and not unicodedata.is_normalized("NFC", text):
            text = unicodedata.normalize("NFC", text)  # special tokens are ASCII: untouched
        ids = self._enc.encode_to_numpy(text, allowed_special=self._special_set, disallowed_special=())
        return ids if ids.dtype == np.uint32 else ids.astype(np.uint32)

    def token_bytes(self, token_id: int) -> bytes:
        b = self._by_id.get(token_id)
        if b is not None:
            return b
        return self._enc.decode_single_token_bytes(token_id - self._offset)

    @property
    def vocab_size(self) -> int:
        return max(self._enc.max_token_value + 1 + self._offset, max(self.specials.values(), default=0) + 1)
