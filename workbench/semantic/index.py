"""Vectors in one contiguous float32 matrix, searched exhaustively; the top k it returns are the
top k of a float32 brute-force scan, with float32 similarities. Beside each row, a few numeric
columns (session, version set, expiry, state) let a lookup filter with array operations instead of
a Python loop over the entries. Rows are reused after deletion.

Speed. A float32 scan of 100k × 512 reads 205 MB per lookup. torch's float16 scan (the previous
design: 100 MB) was bound by its arithmetic, not by memory. Where torch's int8 kernels (fbgemm, on
x86) are installed, the full scan instead reads an int8 copy of the matrix (one byte per dimension,
each row with its own scale: 51 MB) in packed blocks of `BLOCK` rows, with the query on a 7-bit
grid: integer dot products, exact, then scaled. Measured side by side on this shared 2-core
machine (benchmarks/bench_semantic.py, 100k × 512, load average 1.4–3.2): the scan alone 3.9–4.2 ms
against 7.1–7.5 ms for the float16 one on one thread; a whole shared-scope lookup 4.6–4.8 ms
against 5.0–23 ms for the float16 scan as it ran (on 2 threads: see `_one_thread`). Memory: about
2,600 bytes per entry against 3,090 (the float16 copy was 1,024, the packed int8 one is ~550).

Exact, not probably right. The int8 score s_i differs from the true cosine q·v_i by at most

    eps = |q − q~|·max|v_i| + |q~|·max|v_i − v~_i| + (float rounding)

(Cauchy–Schwarz on q·v − q~·v~ = (q − q~)·v + q~·(v − v~); q~, v~ the quantized vectors, whose
errors are known: |v_i − v~_i| is measured for every row when its block is packed). So if t is the
k-th best int8 score (or any value below it: the search takes the k-th best of the maxima of
groups of 256 rows, which is cheaper), every row of the true top k has s_i ≥ t − 2·eps, and those rows — all of
them, however many near-duplicates there are — are scored again in float32: about 200 rows for the
benchmark's queries (at most 908); a cluster of near-duplicates makes it the whole cluster, never a
wrong answer.

Rows added or changed after their block was packed are "loose": scored exactly in float32 until
`LOOSE_MAX` of them gather in a block, when the block is packed again at the next full scan
(amortised: one pack per `LOOSE_MAX` changes). Without the int8 kernels (no torch, another CPU) the
full scan is the plain float32 one. One session's rows (few candidates) are gathered and scored in
float32 directly, as before. A search may pack blocks, so it changes the index: callers serialise
it with writes (the cache holds its lock).
"""

from __future__ import annotations

import functools
import importlib.util
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .._optional import require
from ..errors import WorkbenchError

COLUMNS = {"session": np.int32, "versions": np.int32, "expires": np.float64, "state": np.int8}
QUANT_FROM = 4096     # rows from which a full scan uses the int8 blocks
BLOCK = 4096          # rows per packed int8 block (a pack costs ~15 ms)
LOOSE_MAX = 256       # rows of a block scored in float32 before the block is packed again
SCAN_THREADS = 1      # torch threads for the scan: see `_one_thread`
QMAX = 63             # the query's grid: 7 bits, so u8·s8 pairs cannot saturate int16 in fbgemm
F32_EPS = float(np.finfo(np.float32).eps)


@functools.cache
def _int8_kernels() -> Any:
    """torch, where its fbgemm int8 linear with float output works as the error bound assumes;
    else None (the float32 scan). Checked once per process, on a small case."""
    if importlib.util.find_spec("torch") is None:
        return None
    torch = require("torch", "the int8 scan")
    qb = torch.backends.quantized
    op = getattr(torch.ops.quantized, "linear_with_input_q_dq_qweight_dq_output_fp32", None)
    if op is None or "fbgemm" not in qb.supported_engines or qb.engine not in ("x86", "fbgemm"):
        return None
    try:
        return torch if _kernel_agrees(torch) else None
    except (AttributeError, RuntimeError, TypeError):   # an API that moved: quantized tensors are deprecated
        return None


def _kernel_agrees(torch: Any) -> bool:
    """The kernel on random integers gives the integer dot products, scaled: the model the bound
    is built on (a saturating int16 step, say, would show here)."""
    rng = np.random.default_rng(0)
    # on the grids already (each row's largest value 127 steps, the query's QMAX): no rounding
    ints = rng.integers(-127, 128, (BLOCK, 64))
    ints[:, 0] = 127
    rows = ints.astype(np.float32) * np.float32(0.01)
    qi = rng.integers(-QMAX, QMAX + 1, 64)
    qi[0] = QMAX
    q = qi.astype(np.float32) * np.float32(0.5)
    blocks = _Int8Blocks(torch, 64)
    blocks.ensure(1)
    blocks.pack(0, rows)
    got, _ = blocks.scores(q, BLOCK)
    want = rows.astype(np.float64) @ q.astype(np.float64)
    return bool(np.allclose(got.numpy(), want, rtol=1e-5, atol=1e-5))


@contextmanager
def _one_thread(torch: Any) -> Iterator[None]:
    """Run the scan's torch calls on SCAN_THREADS threads, then restore the setting. On a machine
    whose cores are busy (this 2-core one: load average 2 to 8 while tests run), a 2-thread
    torch call waits for its second thread to be scheduled: measured 12 ms per int8 block with
    2 threads against 0.2 ms with one. The scan is a few milliseconds; one thread is enough. The
    setting is process-wide: a torch call another thread starts during the scan runs on one thread
    too (measured: the other thread sees 1)."""
    before = torch.get_num_threads()
    if before != SCAN_THREADS:
        torch.set_num_threads(SCAN_THREADS)
    try:
        yield
    finally:
        if before != SCAN_THREADS:
            torch.set_num_threads(before)


class _Int8Blocks:
    """The int8 copy of the matrix, in packed blocks, and each block's error bounds."""

    def __init__(self, torch: Any, dim: int):
        self.t = torch
        self.dim = dim
        self.packed: list[Any] = []           # per block: fbgemm packed weights, or None
        self.err: list[float] = []            # per block: max |v − v~| over its rows
        self.norm: list[float] = []           # per block: max |v| over its rows

    def ensure(self, blocks: int) -> None:
        while len(self.packed) < blocks:
            self.packed.append(None)
            self.err.append(0.0)
            self.norm.append(0.0)

    def pack(self, b: int, rows: np.ndarray) -> None:
        """Quantize `rows` (float32, up to BLOCK of them) per row to int8 and pack them."""
        t = self.t
        # each row's scale is a float32 value: fbgemm keeps scales in float32, and the error
        # bound must be measured against exactly what the kernel multiplies by
        scale = np.ones(BLOCK, np.float32)
        scale[: len(rows)] = np.abs(rows).max(axis=1) / 127
        scale[scale == 0] = 1.0
        tmp = rows / scale[: len(rows), None]          # one float32 temporary, rounded in place
        np.clip(np.rint(tmp, out=tmp), -127, 127, out=tmp)
        wq = np.zeros((BLOCK, self.dim), np.int8)
        wq[: len(rows)] = tmp
        del tmp
        err = norm = 0.0
        for lo in range(0, len(rows), 512):           # float64 in slices: no 16 MB temporaries
            v64 = rows[lo:lo + 512].astype(np.float64)
            deq = wq[lo:lo + 512][: len(v64)].astype(np.float64) * scale[lo:lo + len(v64), None].astype(np.float64)
            err = max(err, float(np.linalg.norm(v64 - deq, axis=1).max()))
            norm = max(norm, float(np.linalg.norm(v64, axis=1).max()))
        # rounded up a little: the norms themselves are computed in floating point
        self.err[b] = err * (1 + 1e-6) + 1e-12
        self.norm[b] = norm * (1 + 1e-6)
        with warnings.catch_warnings():
            # quantized tensors are deprecated in torch (kept through the versions pyproject allows)
            warnings.simplefilter("ignore", UserWarning)
            qw = t._make_per_channel_quantized_tensor(
                t.from_numpy(wq), t.from_numpy(scale.astype(np.float64)), t.zeros(BLOCK, dtype=t.long), 0)
            self.packed[b] = t.ops.quantized.linear_prepack(qw, None)

    def scores(self, q: np.ndarray, n: int) -> tuple[Any, float]:
        """int8 scores of the first n rows (-inf for blocks never packed) and their error bound."""
        t = self.t
        amax = float(np.abs(q).max())
        s = float(np.float32(amax / QMAX))
        k = np.clip(np.rint(q / s), -QMAX, QMAX)
        x = (np.float32(s) * k.astype(np.float32)).astype(np.float32)  # on the grid: quantized exactly
        op = t.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32.default  # the overload: less dispatch
        xt = t.from_numpy(x).reshape(1, -1)
        ninf = t.full((BLOCK,), float("-inf"))
        parts = [op(xt, s, QMAX + 1, p)[0] if p is not None else ninf
                 for p in self.packed[: -(-n // BLOCK)]]
        q64, x64 = q.astype(np.float64), x.astype(np.float64)
        qerr, qn, xn = float(np.linalg.norm(q64 - x64)), float(np.linalg.norm(q64)), float(np.linalg.norm(x64))
        vn, ve = max(self.norm, default=0.0), max(self.err, default=0.0)
        eps = (qerr * vn + xn * ve                       # the quantization of the query and rows
               + 1e-6 * xn * (vn + ve)                   # the kernel's float scaling
               + 2 * self.dim * F32_EPS * qn * vn)       # float32 rescoring vs a float32 brute force
        return t.cat(parts)[:n], eps * (1 + 1e-6)


def _kth_at_most(scores: np.ndarray, k: int, group: int = 256) -> float:
    """A value at or below the k-th largest of `scores` (k of them finite): the k-th largest of
    the maxima of groups of `group` rows, since k distinct rows reach it. Close to the k-th
    largest itself when the best rows are spread over the groups; a max over groups costs a
    quarter of a top-k over 100k scores."""
    whole = len(scores) - len(scores) % group
    maxima = scores[:whole].reshape(-1, group).max(axis=1)
    if whole < len(scores):
        maxima = np.append(maxima, scores[whole:].max())
    kth = float(np.partition(maxima, -k)[-k]) if k <= len(maxima) else -np.inf
    return kth if np.isfinite(kth) else float(np.partition(scores, -k)[-k])


class VectorIndex:
    def __init__(self, dim: int, capacity: int = 1024):
        self.dim = dim
        cap = max(capacity, 1)
        self._m = np.zeros((cap, dim), dtype=np.float32)
        self._live = np.zeros(cap, dtype=bool)
        self._loose = np.ones(cap, dtype=bool)          # not (or no longer) as packed: score in float32
        self.cols = {k: np.zeros(cap, dtype=t) for k, t in COLUMNS.items()}
        self._free: list[int] = []
        self._n = 0                                   # rows ever used (high-water mark)
        # torch only speeds the scan up: used where installed, through the one optional-import place
        torch = _int8_kernels()
        self._q8 = _Int8Blocks(torch, dim) if torch is not None else None

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
                self._loose = np.concatenate([self._loose, np.ones_like(self._loose)])
                self.cols = {k: np.concatenate([c, np.zeros_like(c)]) for k, c in self.cols.items()}
            row, self._n = self._n, self._n + 1
        self._m[row] = v
        self._loose[row] = True
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
            self._loose[row] = True
            self._free.append(row)

    def vector(self, row: int) -> np.ndarray:
        return self._m[row]

    def live(self) -> np.ndarray:
        return self._live[: self._n]

    def col(self, name: str) -> np.ndarray:
        return self.cols[name][: self._n]

    def nbytes(self) -> int:
        """Bytes the index holds: the float32 matrix, the columns, and the packed int8 blocks
        (fbgemm's copy: one byte per dimension plus a column offset, per row)."""
        own = self._m.nbytes + self._live.nbytes + self._loose.nbytes + sum(c.nbytes for c in self.cols.values())
        packed = 0 if self._q8 is None else sum(p is not None for p in self._q8.packed) * BLOCK * (self.dim + 4)
        return own + packed

    def pack(self, loose_max: int | None = None) -> int:
        """Pack again the int8 blocks holding more than `loose_max` (LOOSE_MAX unless given; 0: any)
        rows added or changed since they were packed; returns how many. A full scan does this by
        itself (about 25 ms a block of 4096); a caller that has just loaded many entries can call
        it to keep that cost out of the first lookup."""
        if self._q8 is None:
            return 0
        most = LOOSE_MAX if loose_max is None else loose_max
        blocks = -(-self._n // BLOCK)
        self._q8.ensure(blocks)
        packed = 0
        for b in range(blocks):
            lo, hi = b * BLOCK, min((b + 1) * BLOCK, self._n)
            if np.count_nonzero(self._loose[lo:hi]) > most:
                self._q8.pack(b, self._m[lo:hi])
                self._loose[lo:hi] = False
                packed += 1
        return packed

    def search(self, q: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k rows under `mask` (a boolean array over the used rows) most similar to `q`
        (vectors are normalised: the dot product is the cosine), best first."""
        q = np.asarray(q, dtype=np.float32).reshape(-1)
        count = int(np.count_nonzero(mask))
        if count == 0 or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if count * 8 < self._n:                       # few candidates (one session's): gather them
            rows = np.flatnonzero(mask)
            sims = self._m[rows] @ q
        elif self._q8 is not None and self._n >= QUANT_FROM and np.any(q):
            with _one_thread(self._q8.t):
                rows = self._int8_candidates(q, mask, min(k, count))
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

    def _int8_candidates(self, q: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
        """Every row under `mask` that can be in the top k: those whose int8 score is within
        2·eps of the k-th best (see the module docstring for why that is safe)."""
        q8, t, n = self._q8, self._q8.t, self._n     # type: ignore[union-attr]
        self.pack()
        approx, eps = q8.scores(q, n)
        loose = np.flatnonzero(self._loose[:n] & mask)
        if len(loose):                                # their float32 score stands in for the int8 one
            approx[t.from_numpy(loose)] = t.from_numpy(self._m[loose] @ q)
        scores = np.where(mask, approx.numpy(), -np.inf)
        return np.flatnonzero(scores >= _kth_at_most(scores, k) - 2 * eps)
