"""The tokenizer interface every backend implements.

A backend only has to encode *ordinary* text (no special tokens) and tell the
bytes of a token. Splitting text at special-token strings is done here, once,
for every backend: that is where the injection policy applies (a special-token
string typed by a user is encoded as plain text, never as a control token),
and it lets segments be tokenized piece by piece.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

TokenIds: TypeAlias = NDArray[np.uint32]  # 1-D
EMPTY: TokenIds = np.zeros(0, dtype=np.uint32)
# A trie of characters; the key "" marks the end of a word.
_Trie: TypeAlias = dict[str, "_Trie"]


def file_sha256(*paths: Path | str) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def byte_label(raw: bytes) -> str:
    """`raw` as text where it is whole UTF-8 characters, and `<0xNN>` for each byte that is not
    (a lone lead or continuation byte of a character split across tokens)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        # surrogateescape maps each undecodable byte to U+DC80..U+DCFF, so the valid runs stay text.
        text = raw.decode("utf-8", "surrogateescape")
        return "".join(f"<0x{ord(c) - 0xDC00:02X}>" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)


def trie_regex(words: Iterable[str]) -> str:
    """A regex matching any of `words`, longest first, built as a trie.

    Vocabularies carry up to ~1,100 special tokens; a flat alternation of that
    many literals makes Python's regex engine try each one at every position.
    """
    trie: _Trie = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: _Trie) -> str:
        end = "" in node
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch != ""]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if end else body

    return emit(trie)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A run of the text: one special token, or ordinary text between them."""

    start: int          # character offsets into the text
    end: int
    ids: TokenIds
    special: bool


class Tokenizer(ABC):
    name: str
    version: str            # sha256 of the vocabulary files (identity for cache keys)
    description: str = ""
    specials: dict[str, int]
    bos_token: str | None = None
    eos_token: str | None = None

    # --- what a backend provides -------------------------------------------------
    @abstractmethod
    def encode_ordinary(self, text: str) -> TokenIds:
        """Encode text with no special-token parsing at all."""

    @abstractmethod
    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token stands for (used for offsets and display)."""

    @property
    def vocab_size(self) -> int:
        return 0

    # --- shared machinery ---------------------------------------------------------
    @cached_property
    def special_pattern(self) -> re.Pattern[str] | None:
        if not self.specials:
            return None
        return re.compile(trie_regex(self.specials))

    def find_specials(self, text: str) -> list[tuple[int, int, str]]:
        pat = self.special_pattern
        if pat is None:
            return []
        return [(m.start(), m.end(), m.group()) for m in pat.finditer(text)]

    def encode_ordinary_many(self, texts: list[str]) -> list[TokenIds]:
        return [self.encode_ordinary(t) for t in texts]

    def chunks(self, text: str, escaped: Sequence[tuple[int, int]] = ()) -> list[Chunk]:
        """Split at special tokens (except inside `escaped` spans) and encode each piece."""
        pieces: list[tuple[int, int, int | None]] = []   # (start, end, special id or None)
        pos = 0
        for s, e, tok in self.control_matches(text, escaped):
            if s > pos:
                pieces.append((pos, s, None))
            pieces.append((s, e, self.specials[tok]))
            pos = e
        if pos < len(text):
            pieces.append((pos, len(text), None))
        plain = self.encode_ordinary_many([text[s:e] for s, e, sid in pieces if sid is None])
        out: list[Chunk] = []
        k = 0
        for s, e, sid in pieces:
            if sid is None:
                out.append(Chunk(s, e, plain[k], False))
                k += 1
            else:
                out.append(Chunk(s, e, np.array([sid], dtype=np.uint32), True))
        return out

    def control_matches(self, text: str, escaped: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int, str]]:
        """The special-token strings of `text` that become control tokens: none overlaps an `escaped`
        span, even in part, so escaped text never lends a character to a control token."""
        pat = self.special_pattern
        if pat is None:
            return []
        if not escaped:
            return self.find_specials(text)
        esc = sorted(escaped)
        out: list[tuple[int, int, str]] = []
        ei, pos, n = 0, 0, len(text)
        while pos <= n:
            m = pat.search(text, pos)
            if m is None:
                break
            s, e = m.start(), m.end()
            while ei < len(esc) and esc[ei][1] <= s:
                ei += 1
            if ei < len(esc) and esc[ei][0] < e:        # touches escaped text
                lo, hi = esc[ei]
                if s < lo:
                    # Starts in the template's text: a shorter token ending before the escaped span may
                    # still be the template's own.
                    short = pat.match(text, s, lo)
                    if short is not None:
                        out.append((s, short.end(), short.group()))
                        pos = short.end()
                        continue
                    pos = s + 1
                else:
                    pos = max(hi, s + 1)
                continue
            out.append((s, e, m.group()))
            pos = e
        return out

    def encode_with_specials(self, text: str) -> TokenIds:
        """Every special-token string is a control token. Backends override with a one-call path."""
        return self.encode(text)

    def encode_with_specials_on_worker(self, text: str) -> TokenIds:
        """`encode_with_specials` on a pool thread running beside the caller's (segments.PendingEncode):
        a backend whose encoder must not be shared between threads running at once gives each
        worker its own."""
        return self.encode_with_specials(text)

    @cached_property
    def special_ids(self) -> TokenIds:
        return np.array(sorted(self.specials.values()), dtype=np.uint32)

    def special_positions(self, ids: TokenIds) -> NDArray[np.intp]:
        """Where `ids` holds a special token: one lookup per id in a table over the vocabulary (an
        `isin` against the specials compares every id with each of them: 3 ms on a 300k-token
        prompt, against a fraction of one)."""
        table = self._special_table
        if len(ids) and int(ids.max()) >= len(table):
            return np.flatnonzero(np.isin(ids, self.special_ids))
        return np.flatnonzero(table[ids])

    @cached_property
    def _special_table(self) -> NDArray[np.bool_]:
        top = int(self.special_ids.max()) + 1 if len(self.special_ids) else 0
        table = np.zeros(max(top, self.vocab_size), dtype=np.bool_)
        table[self.special_ids] = True
        return table

    def encode(self, text: str, escaped: Sequence[tuple[int, int]] = ()) -> TokenIds:
        """Tokenize rendered prompt text: special-token strings become control tokens."""
        cs = self.chunks(text, escaped)
        if not cs:
            return EMPTY.copy()
        return np.concatenate([c.ids for c in cs]).astype(np.uint32, copy=False)

    def decode(self, ids: Iterable[int]) -> str:
        return b"".join(self.token_bytes(int(i)) for i in ids).decode("utf-8", errors="replace")

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """A display string per token: its text, with bytes that are not whole characters (an emoji
        split across tokens) shown as `<0xF0>`, the way byte-fallback vocabularies name them."""
        return [byte_label(self.token_bytes(int(i))) for i in ids]

    def char_boundaries(self, text: str, ids: TokenIds) -> list[int] | None:
        """Character offset after each token of `text` (an ordinary chunk), -1 for a token that
        ends inside a character; None when the tokens do not spell the text byte for byte
        (normalization)."""
        ends = self.char_ends(text, ids)
        return None if ends is None else ends.tolist()

    def char_ends(self, text: str, ids: TokenIds) -> NDArray[np.int64] | None:
        """char_boundaries as an array, computed without a Python loop over the tokens (the token
        view asks this of every segment of a 100k-token prompt)."""
        raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
        byte_ends = np.cumsum(self.token_byte_lengths(ids), dtype=np.int64)
        if (byte_ends[-1] if len(byte_ends) else 0) != len(raw):
            return None
        starts = (raw & 0xC0) != 0x80                  # where a character starts (not a continuation byte)
        chars_before = np.concatenate(([0], np.cumsum(starts, dtype=np.int64)))   # at each byte offset
        on_boundary = np.append(starts, True)[byte_ends]
        return np.where(on_boundary, chars_before[byte_ends], -1)

    def token_byte_lengths(self, ids: TokenIds) -> NDArray[np.int64]:
        """The byte length of each token, from a per-tokenizer table filled on an id's first sight."""
        ids = np.asarray(ids, dtype=np.int64)
        table = self.__dict__.get("_byte_lengths")
        top = int(ids.max()) + 1 if len(ids) else 0
        if table is None or len(table) < top:
            grown = np.full(max(top, self.vocab_size), -1, dtype=np.int64)
            if table is not None:
                grown[:len(table)] = table
            table = self.__dict__["_byte_lengths"] = grown
        lens = table[ids]
        unseen = np.unique(ids[lens < 0])
        if len(unseen):
            for i in unseen.tolist():    # once per id and tokenizer: a racing thread writes the same value
                table[i] = len(self.token_bytes(i))
            lens = table[ids]
        return lens

    def info(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "description": self.description}
