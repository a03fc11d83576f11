"""Vectors in one contiguous float32 matrix, searched by brute force (one matrix-vector product):
exact, simple, and fast enough up to about a million entries. Rows are reused after deletion."""

from __future__ import annotations

import numpy as np

from ..errors import WorkbenchError


class VectorIndex:
    def __init__(self, dim: int, capacity: int = 1024):
        self.dim = dim
        self._m = np.zeros((max(capacity, 1), dim), dtype=np.float32)
        self._live = np.zeros(max(capacity, 1), dtype=bool)
        self._free: list[int] = []
        self._n = 0                                   # rows ever used (high-water mark)

    def __len__(self) -> int:
        return int(self._live[: self._n].sum())

    def add(self, vec: np.ndarray) -> int:
        v = np.asarray(vec, dtype=np.float32).reshape(-1)
        if v.shape[0] != self.dim:
            raise WorkbenchError(f"a vector of {v.shape[0]} dimensions for an index of {self.dim}")
        if self._free:
            row = self._free.pop()
        else:
            if self._n == len(self._m):               # grow by doubling: amortised O(1), one block
                self._m = np.concatenate([self._m, np.zeros_like(self._m)])
                self._live = np.concatenate([self._live, np.zeros_like(self._live)])
            row, self._n = self._n, self._n + 1
        self._m[row] = v
        self._live[row] = True
        return row

    def remove(self, row: int) -> None:
        if 0 <= row < self._n and self._live[row]:
            self._live[row] = False
            self._m[row] = 0.0
            self._free.append(row)

    def vector(self, row: int) -> np.ndarray:
        return self._m[row]

    def scores(self, q: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Cosine similarities (vectors are normalised) of `q` with the live rows, or with `rows`."""
        q = np.asarray(q, dtype=np.float32).reshape(-1)
        if rows is None:
            rows = np.flatnonzero(self._live[: self._n])
            sims = self._m[: self._n] @ q
            return rows, sims[rows]
        rows = np.asarray(rows, dtype=np.int64)
        return rows, self._m[rows] @ q
