"""Semantic-cache lookup over 100,000 entries, with the embedding time apart.

Entries: 100k context vectors (512 dimensions by default, as the default embedder, USE multilingual,
gives; `--dim 384` for all-MiniLM-L6-v2; random unit vectors, so the search does the same work
whatever the text) with fingerprints, in two layouts, timed in one
run:
- shared: all 100k entries visible to the request (one scope): the brute-force worst case;
- per session: 100k entries over 1,000 sessions, the lookup in one of them (the default scope).
Lookup = the filters over the index's columns, the similarity search, the top 3, the decision.
The embedding of one context (current turn + window) with each real model is timed separately and
printed beside the lookup.

Run:  .venv/bin/python benchmarks/bench_semantic.py [--entries 100000] [--lookups 200] [--dim 512]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


class FixedEmbedder:
    """Hands the benchmark's query vector to the cache (no model in the timed loop)."""
    name = "fixed"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.next = np.zeros((1, dim), np.float32)

    def embed(self, texts):  # type: ignore[no-untyped-def]
        return np.repeat(self.next, len(texts), axis=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--dim", type=int, default=512, help="vector size (512: USE multilingual; 384: MiniLM)")
    args = ap.parse_args()

    from workbench.semantic.cache import Entry, SemanticCache, Thresholds
    from workbench.semantic.fingerprint import fingerprint

    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((args.entries, args.dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    versions = {"model": "m", "tokenizer": "t", "system_prompt": "s", "knowledge": "k"}
    fp = fingerprint("How do I deploy the billing service to EU-West?")
    results = {}
    for layout, sessions in (("shared", 1), ("per session", 1000)):
        emb = FixedEmbedder(args.dim)
        cache = SemanticCache(emb, thresholds=Thresholds(0.9, 0.8))
        t0 = time.perf_counter()
        for i in range(args.entries):
            e = Entry(i + 1, "*" if sessions == 1 else f"s{i % sessions}", -1, fp, versions, time.time(),
                      3600.0, {"text": "x"}, "ctx", current_text="How do I deploy the billing service to EU-West?")
            cache._insert(e, vecs[i])
        build_s = time.perf_counter() - t0
        times, scans, judging = [], [], []
        for j in range(args.lookups):
            # a new text every time: the rules' caches must not make the judging look free
            msgs = [{"role": "user", "content": f"How do I deploy the billing service to EU-West, try {j}?"}]
            emb.next = (vecs[(j * 7919) % args.entries] + 0.05 * rng.standard_normal(args.dim)).astype(np.float32)[None]
            d = cache.lookup("s3", msgs, versions)
            times.append(d.search_ms + d.judge_ms)          # the scan, and the rules over the 3 nearest
            scans.append(d.search_ms)
            judging.append(d.judge_ms)
        results[layout] = (statistics.median(times), float(np.percentile(times, 95)), build_s,
                           statistics.median(scans), statistics.median(judging))
    for layout, (med, p95, build_s, scan, judged) in results.items():
        visible = args.entries if layout == "shared" else args.entries // 1000
        print(f"{layout:>12}: {args.entries:,} entries of {args.dim} dimensions ({visible:,} visible to the request): "
              f"lookup median "
              f"{med:.2f} ms, p95 {p95:.2f} ms (bar: median <= 5 ms) = scan {scan:.2f} + rules {judged:.2f} ms; "
              f"index built in {build_s:.1f} s")
    for name in ("use", "minilm"):
        time_embedding(name)


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
