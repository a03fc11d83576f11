"""The vector index's full scan: int8 scores with an error bound, then float32 rescoring. Its top k
must be a float32 brute-force scan's top k (rows and order, ties aside) on random, clustered and
near-duplicate data, with masks, removals and rows changed after their block was packed; and the
bound must hold for every row, also for vectors the int8 grid fits badly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.semantic import index as index_module
from workbench.semantic.index import VectorIndex, _kth_at_most, _one_thread

TOL = 1e-5      # float32 sums of 512 products in another order differ by far less than this


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def dataset(rng: np.random.Generator, kind: str, n: int, dim: int, spread: float) -> np.ndarray:
    if kind == "random":
        return unit(rng.standard_normal((n, dim)))
    centres = unit(rng.standard_normal((max(1, n // 200) if kind == "clustered" else 3, dim)))
    rows = centres[rng.integers(0, len(centres), n)]
    # near-duplicates: hundreds of rows whose cosines to any query differ in the 4th-6th decimal
    return unit(rows + spread * rng.standard_normal((n, dim)))


def assert_same_top_k(idx: VectorIndex, vecs: np.ndarray, q: np.ndarray, mask: np.ndarray, k: int) -> None:
    rows, sims = idx.search(q, mask, k)
    brute = np.where(mask, vecs @ q, -np.inf).astype(np.float32)
    want = np.argsort(-brute, kind="stable")[: min(k, int(mask.sum()))]
    assert len(rows) == len(want) and len(set(rows.tolist())) == len(rows)
    assert mask[rows].all()
    assert np.allclose(sims, brute[rows], atol=TOL)              # the similarities are float32 cosines
    assert np.allclose(brute[rows], brute[want], atol=TOL)       # the same scores: the same top k up to ties
    ranked = np.sort(brute[mask])[::-1]
    for i, r in enumerate(want):                                  # where no near-tie, the same row, same place
        above = ranked[i - 1] - ranked[i] if i else np.inf
        below = ranked[i] - ranked[i + 1] if i + 1 < len(ranked) else np.inf
        if min(above, below) > 2 * TOL:
            assert rows[i] == r, (i, rows.tolist(), want.tolist())


def build(vecs: np.ndarray) -> VectorIndex:
    idx = VectorIndex(vecs.shape[1], capacity=64)
    for v in vecs:
        idx.add(v, session=0)
    return idx


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The int8 path from a few hundred rows on (the constants are sized for 100k): the same code."""
    monkeypatch.setattr(index_module, "QUANT_FROM", 64)
    monkeypatch.setattr(index_module, "LOOSE_MAX", 8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["random", "clustered", "near-duplicates"]),
       n=st.integers(300, 5000), dim=st.sampled_from([8, 33, 384, 512]), k=st.integers(1, 12),
       spread=st.sampled_from([1e-5, 1e-4, 1e-3, 1e-2, 0.1]), subset=st.sampled_from([1.0, 0.5, 0.2]))
def test_the_int8_scan_returns_brute_forces_top_k(small_blocks: None, seed: int, kind: str, n: int, dim: int,
                                                   k: int, spread: float, subset: float) -> None:
    rng = np.random.default_rng(seed)
    vecs = dataset(rng, kind, n, dim, spread)
    idx = build(vecs)
    assert idx._q8 is not None                                    # torch's int8 kernels are here: that path
    mask = idx.live() & (rng.random(n) < subset)
    mask[0] = True
    for j in range(4):
        q = unit(vecs[rng.integers(0, n)] + [0.0, 1e-3, 0.05, 0.5][j] * rng.standard_normal(dim))
        assert_same_top_k(idx, vecs, q, mask, k)
    assert any(p is not None for p in idx._q8.packed)             # the int8 blocks answered, not a fallback


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(300, 3000), dim=st.sampled_from([8, 64, 512]),
       spike=st.sampled_from([1.0, 30.0, 1000.0]), scale=st.sampled_from([1e-3, 1.0, 50.0]))
def test_the_error_bound_holds_for_every_row(small_blocks: None, seed: int, n: int, dim: int, spike: float,
                                             scale: float) -> None:
    """Vectors with one large component (the int8 grid is coarse for the rest), not normalised."""
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs[np.arange(n), rng.integers(0, dim, n)] *= spike
    vecs = (scale * vecs).astype(np.float32)
    idx = build(vecs)
    idx.search(vecs[0], idx.live(), 1)                            # packs the blocks
    q = (rng.standard_normal(dim) * np.where(rng.random(dim) < 0.05, spike, 1.0)).astype(np.float32)
    with _one_thread(idx._q8.t):
        approx, eps = idx._q8.scores(q, n)
    exact = vecs.astype(np.float64) @ q.astype(np.float64)
    packed = ~idx._loose[:n]
    assert packed.any()
    assert np.all(np.abs(approx.numpy()[packed] - exact[packed]) <= eps)
    assert_same_top_k(idx, vecs, q, idx.live().copy(), 5)


def test_rows_changed_after_packing_are_scored_exactly_then_packed_again(small_blocks: None) -> None:
    rng = np.random.default_rng(7)
    vecs = dataset(rng, "clustered", 3000, 64, 1e-3)
    idx = build(vecs)
    live = idx.live().copy()
    assert_same_top_k(idx, vecs, vecs[10], live, 5)
    assert not idx._loose[:3000].any()                            # all packed now
    for r in range(0, 40, 2):                                     # removed and reused rows: other vectors
        idx.remove(r)
        vecs[r] = 0.0
    assert_same_top_k(idx, vecs, vecs[11], idx.live().copy(), 5)  # removed rows are never returned
    for r in range(0, 40, 2):
        vecs[r] = unit(vecs[3] + 1e-4 * rng.standard_normal(64))   # near-duplicates of row 3, loose
        assert idx.add(vecs[r], session=0) in range(0, 40, 2)
    assert idx._loose[:40].sum() == 20
    assert_same_top_k(idx, vecs, vecs[3], idx.live().copy(), 12)
    assert not idx._loose[:3000].any()                            # more than LOOSE_MAX: packed again
    rows, _ = idx.search(vecs[3], idx.live().copy(), 21)
    assert set(range(0, 40, 2)) | {3} == set(rows.tolist())      # the whole cluster, found
    for r in (41, 43, 45):                                        # a few changed: scored in float32, not packed
        vecs[r] = unit(vecs[3] + 1e-5 * rng.standard_normal(64))
        idx.remove(r)
        assert idx.add(vecs[r], session=0) == r
    assert_same_top_k(idx, vecs, vecs[3], idx.live().copy(), 24)
    assert idx._loose[:3000].sum() == 3


def test_the_benchmark_data_gives_brute_forces_top_3() -> None:
    """The benchmark's vectors and queries (fewer of them), with the shipped constants."""
    rng = np.random.default_rng(0)
    n, dim = 20_000, 512
    vecs = unit(rng.standard_normal((n, dim)))
    idx = build(vecs)
    mask = idx.live().copy()
    for j in range(30):
        q = (vecs[(j * 7919) % n] + 0.05 * rng.standard_normal(dim)).astype(np.float32)
        assert_same_top_k(idx, vecs, q, mask, 3)
    assert all(p is not None for p in idx._q8.packed)


def test_without_the_int8_kernels_the_scan_is_float32() -> None:
    rng = np.random.default_rng(3)
    vecs = dataset(rng, "near-duplicates", 5000, 32, 1e-4)
    idx = build(vecs)
    idx._q8 = None                                                # as where torch is not installed
    for j in range(5):
        assert_same_top_k(idx, vecs, vecs[j * 100], idx.live().copy(), 7)


def test_the_scan_leaves_torchs_thread_setting_as_it_was() -> None:
    import torch
    idx = build(unit(np.random.default_rng(4).standard_normal((5000, 16))))
    before = torch.get_num_threads()
    idx.search(idx.vector(0), idx.live().copy(), 3)
    assert torch.get_num_threads() == before


def test_pack_packs_what_changed_and_only_that(small_blocks: None) -> None:
    rng = np.random.default_rng(5)
    vecs = dataset(rng, "random", 3000, 48, 0.0)
    idx = build(vecs)
    assert idx._loose[:3000].all()                                # nothing packed before a full scan
    assert idx.pack() == 1 and not idx._loose[:3000].any()        # 3000 rows: one block of 4096
    assert idx.pack() == 0
    idx.remove(7)
    assert idx.pack() == 0 and idx.pack(0) == 1                   # 1 changed row: under LOOSE_MAX, unless 0
    assert_same_top_k(idx, np.where(np.arange(3000)[:, None] == 7, 0, vecs).astype(np.float32), vecs[9],
                      idx.live().copy(), 4)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3000), k=st.integers(1, 20),
       hidden=st.sampled_from([0.0, 0.5, 0.99]), ties=st.booleans())
def test_the_cut_is_never_above_the_kth_best(seed: int, n: int, k: int, hidden: float, ties: bool) -> None:
    rng = np.random.default_rng(seed)
    scores = (rng.integers(0, 5, n) if ties else rng.standard_normal(n)).astype(np.float32)
    scores[rng.random(n) < hidden] = -np.inf                     # rows outside the mask
    finite = np.sort(scores[np.isfinite(scores)])[::-1]
    if len(finite) < k:
        return
    got = _kth_at_most(scores, k)
    assert np.isfinite(got) and got <= finite[k - 1]
