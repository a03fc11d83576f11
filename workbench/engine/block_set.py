"""A set of block hashes in two flat arrays: the blocks an engine that never evicts holds.

A simulated vLLM without a capacity keeps a key for every full block of every prompt it was sent,
and a session under sliding truncation makes every turn's blocks new (its window starts one message
later): up to 2,048 blocks a turn at a 32k window. As a Python set of digests (about 120 bytes a
block: the bytes object and its slot) the simulator alone peaked at 562 MB over 4,000 sliding
19k-token turns (317 MB with this table). Here a block is the first
16 bytes of its digest in an open-addressing table (linear probing) of two uint64 columns and a
used flag: 17 bytes a slot, between 0.35 and 0.7 of the slots used, so 24-49 bytes a block (while
the table doubles, the old one too for a moment).

Exactness: the digests are SHA-256 or BLAKE2b of the block's whole prefix (`kv.block_hashes`); two
different prefixes share their first 128 bits with a probability of about n² / 2**129 over n
blocks (1e-23 at 100 million), far below any other error in a simulation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

KEY_BYTES = 16
MAX_LOAD = 0.7          # past this share of used slots the table doubles


def block_keys(hashes: Sequence[bytes]) -> np.ndarray:
    """The (n, 2) uint64 keys of digests: their first 16 bytes (a shorter digest zero-padded)."""
    raw = b"".join(h[:KEY_BYTES] for h in hashes)
    if len(raw) != KEY_BYTES * len(hashes):
        raw = b"".join(h[:KEY_BYTES].ljust(KEY_BYTES, b"\0") for h in hashes)
    return np.frombuffer(raw, dtype=np.uint64).reshape(-1, 2)


class BlockSet:
    """Many keys (`block_keys`) looked up and inserted at once, as numpy operations.

    A key's home slot is the top bits of its first word (the table has 2**bits slots), so the
    homes keep the keys' order: a table that doubles is refilled from its keys sorted by home,
    each placed at max(its home, the previous one's slot + 1), which is where linear probing puts
    it (no probing), a range of homes at a time."""

    def __init__(self, bits: int = 12):
        self._bits = max(bits, 3)
        self._keys = np.zeros((1 << self._bits, 2), dtype=np.uint64)
        self._used = np.zeros(1 << self._bits, dtype=bool)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def nbytes(self) -> int:
        return int(self._keys.nbytes + self._used.nbytes)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """Whether each key is held (a bool per row)."""
        return self._probe(keys)[1]

    def add(self, keys: np.ndarray) -> np.ndarray:
        """Hold these keys; returns whether each was held before the call (a key twice in the
        batch: its second row too says False, and it is held once)."""
        if self._count + len(keys) > MAX_LOAD * len(self._used):
            self._grow(self._count + len(keys))
        where, found = self._probe(keys)
        if not found.all():
            self._place(keys[~found], where[~found])
        return found

    def _home(self, k0: np.ndarray) -> np.ndarray:
        return (k0 >> np.uint64(64 - self._bits)).astype(np.intp)

    def _probe(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each key: the slot holding it, else the first free slot on its probe path; and
        whether it was found. The keys' paths are walked one step per round, all at once, and the
        last few (long paths) one at a time: a round costs the same for 3 keys as for 300."""
        n, size = len(keys), len(self._used)
        table, used, rows = self._keys, self._used, _rows(self._keys)
        k0, k1 = keys[:, 0], keys[:, 1]
        s = self._home(k0)
        found = np.zeros(n, dtype=bool)
        where = np.empty(n, dtype=np.intp)
        todo = np.arange(n)
        while len(todo) > _SCALAR_TAIL:
            row, taken = _cols(rows[s]), used[s]
            same = taken & (row[:, 0] == k0[todo]) & (row[:, 1] == k1[todo])
            stop = same | ~taken
            done = todo[stop]
            found[done], where[done] = same[stop], s[stop]
            go = ~stop
            todo, s = todo[go], s[go] + 1
            s[s == size] = 0
        for i, j in zip(todo.tolist(), s.tolist()):
            a, b = k0[i], k1[i]
            while used[j] and not (table[j, 0] == a and table[j, 1] == b):
                j = j + 1 if j + 1 < size else 0
            found[i], where[i] = bool(used[j]), j
        return where, found

    def _place(self, keys: np.ndarray, where: np.ndarray) -> None:
        """Write keys that were not held at the free slots their probe found. Two that reached the
        same slot: the first takes it, the other probes again (and is dropped if it is the same key)."""
        while len(keys):
            slots, first = np.unique(where, return_index=True)
            _rows(self._keys)[slots] = _rows(keys)[first]
            self._used[slots] = True
            self._count += len(slots)
            if len(slots) == len(keys):
                return
            rest = np.ones(len(keys), dtype=bool)
            rest[first] = False
            keys = keys[rest]
            where, found = self._probe(keys)
            keys, where = keys[~found], where[~found]

    def _grow(self, need: int) -> None:
        bits = self._bits
        while need > MAX_LOAD * (1 << bits):
            bits += 1
        old_keys, old_used = self._keys, self._used
        self._bits, self._count = bits, 0
        self._keys = np.zeros((1 << bits, 2), dtype=np.uint64)
        self._used = np.zeros(1 << bits, dtype=bool)
        # The keys a range of homes at a time (by their top `split` bits), so that sorting needs
        # memory for a part of them only; each range starts after where the previous one ended.
        held = int(old_used.sum())
        split = max(0, (held // _REHASH_KEYS).bit_length())
        last, wrapped = -1, []
        for r in range(1 << split):
            part = self._old_range(old_keys, old_used, split, r)
            part = _cols(_rows(part)[np.argsort(part[:, 0])])
            i = np.arange(len(part))
            slot = np.maximum(np.maximum.accumulate(self._home(part[:, 0]) - i), last + 1) + i
            fits = slot < len(self._used)
            _rows(self._keys)[slot[fits]] = _rows(part)[fits]
            self._used[slot[fits]] = True
            self._count += int(fits.sum())
            wrapped.append(part[~fits])       # past the end: their paths go on from slot 0
            if len(part):
                last = int(slot[-1])
        rest = np.concatenate(wrapped)
        if len(rest):
            self._place(rest, self._probe(rest)[0])

    @staticmethod
    def _old_range(keys: np.ndarray, used: np.ndarray, split: int, r: int) -> np.ndarray:
        parts = []
        for a in range(0, len(used), _REHASH_KEYS):
            k = keys[a:a + _REHASH_KEYS][used[a:a + _REHASH_KEYS]]
            parts.append(k if not split else k[(k[:, 0] >> np.uint64(64 - split)) == r])
        return np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.uint64)


def _rows(keys: np.ndarray) -> np.ndarray:
    """(n, 2) uint64 keys as n 16-byte items, to gather and scatter whole keys in one operation.
    complex128 only carries the bytes (copies keep every bit, NaN patterns included); keys are
    compared as uint64 (`_cols`), never as numbers of this type."""
    return np.ascontiguousarray(keys).view(np.complex128).reshape(-1)


def _cols(rows: np.ndarray) -> np.ndarray:
    return rows.view(np.uint64).reshape(-1, 2)


_SCALAR_TAIL = 24          # keys left on their paths when the probe goes on one key at a time
_REHASH_KEYS = 1 << 20     # keys sorted at a time when the table grows (and old slots read at a time)


def leading(found: np.ndarray) -> int:
    """How many of the first rows are True, up to the first False."""
    return len(found) if found.all() else int(np.argmin(found))
