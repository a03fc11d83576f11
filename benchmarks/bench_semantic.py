"""Semantic-cache lookup over 100,000 entries, with the embedding time apart.

Entries: 100k context vectors (512 dimensions by default, as the default embedder, USE multilingual,
gives; `--dim 384` for all-MiniLM-L6-v2; random unit vectors, so the search does the same work
whatever the text) with fingerprints, in two layouts, timed in one run:
- shared: all 100k entries visible to the request (one scope): the brute-force worst case. Timed
  twice, lookups interleaved: with the index as it is (an int8 scan with exact float32 rescoring)
  and with the previous one (a float16 scan, the best 16 rescored in float32), for the comparison;
- per session: 100k entries over 1,000 sessions, the lookup in one of them (the default scope).
Lookup = the filters over the index's columns, the similarity search, the top 3, the decision.
Then the scan alone, interleaved, with 1 and 2 torch threads, and the index's bytes per entry.
The embedding of one context (current turn + window) with each real model is timed separately and
printed beside the lookup. The load average is printed before and after: this machine is shared.

Run:  .venv/bin/python benchmarks/bench_semantic.py [--entries 100000] [--lookups 200] [--dim 512]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np

from workbench.semantic.index import QUANT_FROM, VectorIndex


class FixedEmbedder:
    """Hands the benchmark's query vector to the cache (no model in the timed loop)."""
    name = "fixed"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.next = np.zeros((1, dim), np.float32)

    def embed(self, texts):  # type: ignore[no-untyped-def]
        return np.repeat(self.next, len(texts), axis=0)


class Float16Index(VectorIndex):
    """The previous full scan, kept here to be timed beside the current one: a float16 torch copy
    of the matrix scanned, the best 16 rescored in float32 (not guaranteed exact), with torch's
    thread setting as the process has it (or `threads`)."""

    def __init__(self, dim: int, capacity: int = 1024, threads: int | None = None):
        super().__init__(dim, capacity)
        import torch
        self.t, self.threads, self._h = torch, threads, torch.zeros((0, dim), dtype=torch.float16)

    def search(self, q: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        t, q = self.t, np.asarray(q, dtype=np.float32).reshape(-1)
        count = int(np.count_nonzero(mask))
        if count * 8 < self._n or self._n < QUANT_FROM:
            return super().search(q, mask, k)
        if len(self._h) != self._n:                   # the copy the old index kept up to date on add
            self._h = t.from_numpy(self._m[: self._n]).to(t.float16)
        before = t.get_num_threads()
        t.set_num_threads(self.threads or before)
        try:
            half = self._h @ t.from_numpy(q).to(t.float16)
            half.masked_fill_(~t.from_numpy(mask), float("-inf"))
            rows = t.topk(half, min(count, max(k, 16))).indices.numpy()
        finally:
            t.set_num_threads(before)
        sims = self._m[rows] @ q
        top = np.argsort(-sims, kind="stable")[:k]
        return rows[top], sims[top].astype(np.float32)

    def nbytes(self) -> int:
        return super().nbytes() + self._n * self.dim * 2


def build(args: argparse.Namespace, vecs: np.ndarray, sessions: int, old: int | None
          ) -> tuple[Any, FixedEmbedder, float]:
    """A cache of the benchmark's entries; `old`: with the previous index, on that many torch
    threads (0: as the process has it). Its first full scan (which packs the int8 blocks) untimed."""
    from workbench.semantic.cache import Entry, SemanticCache, Thresholds
    from workbench.semantic.fingerprint import fingerprint

    fp = fingerprint("How do I deploy the billing service to EU-West?")
    emb = FixedEmbedder(args.dim)
    cache = SemanticCache(emb, thresholds=Thresholds(0.9, 0.8))
    if old is not None:
        cache.index = Float16Index(args.dim, threads=old or None)
    t0 = time.perf_counter()
    for i in range(args.entries):
        e = Entry(i + 1, "*" if sessions == 1 else f"s{i % sessions}", -1, fp, VERSIONS, time.time(),
                  3600.0, {"text": "x"}, "ctx", current_text="How do I deploy the billing service to EU-West?")
        cache._insert(e, vecs[i])
    build_s = time.perf_counter() - t0
    emb.next = vecs[:1]
    cache.lookup("s3", [{"role": "user", "content": "warm up"}], VERSIONS)
    return cache, emb, build_s


VERSIONS = {"model": "m", "tokenizer": "t", "system_prompt": "s", "knowledge": "k"}


def lookups(args: argparse.Namespace, vecs: np.ndarray, setups: dict[str, tuple[Any, FixedEmbedder, float]]
            ) -> dict[str, tuple[float, float, float, float, float]]:
    """Each setup answers the same queries, interleaved (the order alternating), each with its own
    new text every time: the rules' caches must not make the judging look free."""
    rng = np.random.default_rng(1)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in setups}
    names = list(setups)
    for j in range(args.lookups):
        q = (vecs[(j * 7919) % args.entries] + 0.05 * rng.standard_normal(args.dim)).astype(np.float32)[None]
        for name in (names if j % 2 == 0 else names[::-1]):
            cache, emb, _ = setups[name]
            emb.next = q
            msgs = [{"role": "user", "content": f"How do I deploy the billing service to EU-West, {name} try {j}?"}]
            d = cache.lookup("s3", msgs, VERSIONS)
            got[name].append((d.search_ms, d.judge_ms))
    out = {}
    for name, rows in got.items():
        total = [s + r for s, r in rows]
        out[name] = (statistics.median(total), float(np.percentile(total, 95)), setups[name][2],
                     statistics.median(s for s, _ in rows), statistics.median(r for _, r in rows))
    return out


def scan_alone(args: argparse.Namespace, vecs: np.ndarray) -> None:
    """The index's full scan without the cache around it: the current and the previous one on one
    thread, interleaved; then each on 2 threads, apart (see `main`)."""
    from workbench.semantic import index as index_module
    new, old = VectorIndex(args.dim), Float16Index(args.dim, threads=1)
    for v in vecs:
        new.add(v)
        old.add(v)
    mask = new.live().copy()
    new.search(vecs[0], mask, 3)                      # the first full scan packs the int8 blocks
    old.search(vecs[0], mask, 3)
    rng = np.random.default_rng(2)
    queries = [(vecs[(j * 104729) % args.entries] + 0.05 * rng.standard_normal(args.dim)).astype(np.float32)
               for j in range(args.lookups)]
    runs: dict[str, list[float]] = {}

    def timed(name: str, idx: VectorIndex, q: np.ndarray) -> None:
        t0 = time.perf_counter()
        idx.search(q, mask, 3)
        runs.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)

    for q in queries:
        timed("int8 (current), 1 thread", new, q)
        timed("float16 (previous), 1 thread", old, q)
    index_module.SCAN_THREADS, old.threads = 2, 2
    for q in queries[:20]:
        timed("float16 (previous), 2 threads", old, q)
    for q in queries[:20]:
        timed("int8 (current), 2 threads", new, q)
    index_module.SCAN_THREADS = 1
    for name, ts in runs.items():
        print(f"  scan alone, {name}: median {statistics.median(ts):.2f} ms, p95 {np.percentile(ts, 95):.2f} ms "
              f"({len(ts)} scans)")
    with index_module._one_thread(new._q8.t):       # type: ignore[union-attr]
        cands = [len(new._int8_candidates(q, mask, 3)) for q in queries]
    print(f"  rows rescored in float32 by the int8 scan (top 3): median {statistics.median(cands):.0f}, "
          f"max {max(cands)}")
    print(f"  index bytes per entry: {new.nbytes() / args.entries:,.0f} (int8) against "
          f"{old.nbytes() / args.entries:,.0f} (float16); of them the float32 matrix's capacity "
          f"{new._m.nbytes / args.entries:,.0f} ({len(new._m):,} rows for {args.entries:,})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--dim", type=int, default=512, help="vector size (512: USE multilingual; 384: MiniLM)")
    args = ap.parse_args()
    print("load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((args.entries, args.dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    # the current index and the previous scan on one thread, interleaved: the scans compared; then
    # the previous one as it ran (torch's thread setting as the process has it) on its own, since
    # a 2-thread torch call leaves a spinning thread behind that slows whatever runs next
    shared = {"shared": build(args, vecs, 1, None), "shared, previous, 1 thread": build(args, vecs, 1, 1)}
    results = lookups(args, vecs, shared)
    del shared
    results.update(lookups(args, vecs, {"shared, previous as was": build(args, vecs, 1, 0)}))
    results.update(lookups(args, vecs, {"per session": build(args, vecs, 1000, None)}))
    for layout, (med, p95, build_s, scan, judged) in results.items():
        visible = args.entries // 1000 if layout == "per session" else args.entries
        print(f"{layout:>22}: {args.entries:,} entries of {args.dim} dimensions ({visible:,} visible to the "
              f"request): lookup median {med:.2f} ms, p95 {p95:.2f} ms (bar: median <= 5 ms) = scan {scan:.2f} "
              f"+ rules {judged:.2f} ms; index built in {build_s:.1f} s")
    scan_alone(args, vecs)
    for name in ("use", "minilm"):
        time_embedding(name)
    print("load average (1, 5, 15 min) after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


def time_embedding(name: str) -> None:
    """One context (the current turn and the window: two texts), median of 20, after a warm-up."""
    try:
        from workbench.semantic.embedders import make_embedder
        m = make_embedder(name)
        m.embed(["warm up"])
        ts = []
        for j in range(20):
            t0 = time.perf_counter()
            context = [f"How do I deploy the billing service to region {j}?", f"user: earlier turn {j}\nassistant: ok"]
            m.embed(context)
            ts.append((time.perf_counter() - t0) * 1e3)
        print(f"embedding one context (current turn + window, 2 texts) with {m.name} ({m.dim} dimensions): median "
              f"{statistics.median(ts):.1f} ms (apart from the lookup)")
    except Exception as exc:  # noqa: BLE001 - the lookup figures stand on their own
        print(f"embedding with {name} not timed: {exc}")


if __name__ == "__main__":
    main()
