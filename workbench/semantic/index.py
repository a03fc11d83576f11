"""Vectors in one contiguous float32 matrix, searched by brute force (one matrix-vector product):
simple, exact, and fast enough up to about a million entries. Beside each row, a few numeric
columns (session, version set, expiry, state) let a lookup filter with array operations instead of
a Python loop over the entries. Rows are reused after deletion.

A full scan is bound by memory bandwidth: 100k × 384 float32 is 154 MB read per lookup (about 7 ms
here). Where torch is installed (the semantic extra brings it), a float16 copy of the matrix is
scanned instead (half the bytes, and torch's float16 kernels: about 3.5 ms), and the best
candidates are then scored again exactly in float32, so the similarities a decision sees are exact.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from .._optional import require
from ..errors import WorkbenchError

COLUMNS = {"session": np.int32, "versions": np.int32, "expires": np.float64, "state": np.int8}
RESCORE = 16          # candidates from the float16 scan scored again in float32
HALF_FROM = 4096      # rows from which a full scan uses the float16 copy


class VectorIndex:
    def __init__(self, dim: int, capacity: int = 1024):
        self.dim = dim
        cap = max(capacity, 1)
        self._m = np.zeros((cap, dim), dtype=np.float32)
        self._live = np.zeros(cap, dtype=bool)
        self.cols = {k: np.zeros(cap, dtype=t) for k, t in COLUMNS.items()}
        self._free: list[int] = []
        self._n = 0                                   # rows ever used (high-water mark)
        # torch only speeds the scan up: used where installed, through the one optional-import place
        self._torch = require("torch", "the float16 scan") if importlib.util.find_spec("torch") else None
        self._h = self._torch.zeros((cap, dim), dtype=self._torch.float16) if self._torch is not None else None

    def __len__(self) -> int:
        return int(self._live[: self._n].sum())

    def add(self, vec: np.ndarray, **cols: float) -> int:
        v = np.asarray(vec, dtype=np.float32).reshape(-1)
        if v.shape[0] != self.dim:
            raise WorkbenchError(f"a vector of {v.shape[0]} dimensions for an index of {self.dim}")
        if self._free:
            row = self._free.pop()
        else:
            if self._n == len(self._m):               # grow by doubling: amortised O(1), one block
                self._m = np.concatenate([self._m, np.zeros_like(self._m)])
                self._live = np.concatenate([self._live, np.zeros_like(self._live)])
                self.cols = {k: np.concatenate([c, np.zeros_like(c)]) for k, c in self.cols.items()}
                if self._h is not None:
                    self._h = self._torch.cat([self._h, self._torch.zeros_like(self._h)])
            row, self._n = self._n, self._n + 1
        self._m[row] = v
        if self._h is not None:
            self._h[row] = self._torch.from_numpy(v).to(self._torch.float16)
        self._live[row] = True
        for k, val in cols.items():
            self.cols[k][row] = val
        return row

    def set(self, row: int, **cols: float) -> None:
        for k, val in cols.items():
            self.cols[k][row] = val

    def remove(self, row: int) -> None:
        if 0 <= row < self._n and self._live[row]:
            self._live[row] = False
            self._m[row] = 0.0
            if self._h is not None:
                self._h[row] = 0.0
            self._free.append(row)

    def vector(self, row: int) -> np.ndarray:
        return self._m[row]

    def live(self) -> np.ndarray:
        return self._live[: self._n]

    def col(self, name: str) -> np.ndarray:
        return self.cols[name][: self._n]

    def search(self, q: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k rows under `mask` (a boolean array over the used rows) most similar to `q`
        (vectors are normalised: the dot product is the cosine), best first."""
        q = np.asarray(q, dtype=np.float32).reshape(-1)
        count = int(np.count_nonzero(mask))
        if count == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if count * 8 < self._n:                       # few candidates (one session's): gather them
            rows = np.flatnonzero(mask)
            sims = self._m[rows] @ q
        elif self._h is not None and self._n >= HALF_FROM:
            # float16 scan for the candidates, then exact float32 scores for the best of them
            t = self._torch
            half = self._h[: self._n] @ t.from_numpy(q).to(t.float16)
            half.masked_fill_(~t.from_numpy(mask), float("-inf"))
            rows = t.topk(half, min(count, max(k, RESCORE))).indices.numpy()
            sims = self._m[rows] @ q
        else:                                         # most rows: one pass over the whole matrix
            sims = np.where(mask, self._m[: self._n] @ q, -np.inf)
            rows = np.arange(self._n)
        if len(rows) > k:
            top = np.argpartition(-sims, k - 1)[:k]
            rows, sims = rows[top], sims[top]
        keep = np.isfinite(sims)
        rows, sims = rows[keep], sims[keep]
        order = np.argsort(-sims, kind="stable")
        return rows[order], sims[order].astype(np.float32)
