"""A Redis-tier hit on a 3+3 Redis Cluster next to one on a single redis-server, in one run.

Starts both on loopback with the test fixtures' launchers (tests/redis_server.py,
tests/redis_cluster.py), stores the same sealed entries in each, and times, through
`TwoTierCache` with the local tier off so every read goes to Redis:

- `get`: one exact hit (GET, the HMAC check, decoding);
- `first`: the earlier-prompt lookup of `_extend_earlier`: 8 prefix keys of one conversation
  probed in one pipelined round trip (EXISTS x 8), then one GET of the nearest held one;
- `sequential`: the same lookup as it was before, one GET per prefix until one is held (6 here).

Prints the median and p95 of each, side by side (ms). Needs redis-server and redis-cli on PATH.

    python benchmarks/bench_cluster.py [--tokens 2000] [--reads 2000]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from redis_cluster import launch_cluster  # noqa: E402
from redis_server import RedisServer  # noqa: E402

from workbench.cache import TwoTierCache  # noqa: E402
from workbench.cache.keys import CacheKey  # noqa: E402
from workbench.cache.store import CacheEntry  # noqa: E402


def _keys(n: int, conv: int) -> list[CacheKey]:
    tag = hashlib.sha256(f"conversation {conv}".encode()).hexdigest()[:16]
    return [CacheKey(hashlib.sha256(f"{conv}/{i}".encode()).hexdigest(), tag) for i in range(n)]


def _time(fn, reads: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(reads):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    out.sort()
    return statistics.median(out), out[int(len(out) * 0.95)]


def measure(url: str, tokens: int, reads: int) -> dict[str, tuple[float, float]]:
    cache = TwoTierCache(local_bytes=0, redis_url=url, namespace="bench", secret=b"bench secret, 32 bytes long....")
    entry = CacheEntry("x" * (tokens * 4), np.arange(tokens, dtype=np.uint32))
    convs = [_keys(8, c) for c in range(64)]
    for keys in convs:
        cache.put(keys[5], entry)         # the nearest held prefix: the 6th of 8 probed
    assert cache.get(convs[0][5])[1] == "redis"
    hit = iter(range(10**9))
    res = {"get": _time(lambda: cache.get(convs[next(hit) % 64][5]), reads)}
    assert cache.first(convs[0])[0] == 5
    probe = iter(range(10**9))
    res["first"] = _time(lambda: cache.first(convs[next(probe) % 64]), reads)
    def one_by_one(keys: list[CacheKey]) -> None:   # what _extend_earlier did before: GET each in turn
        for k in keys:
            if cache.get(k)[0] is not None:
                return
    seq = iter(range(10**9))
    res["sequential"] = _time(lambda: one_by_one(convs[next(seq) % 64]), reads)
    faults = sum(cache.metrics().faults.values())
    assert faults == 0, cache.metrics().faults
    cache.close()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=2000, help="tokens per entry (text of 4 chars per token)")
    ap.add_argument("--reads", type=int, default=2000)
    args = ap.parse_args()
    exe = shutil.which("redis-server")
    if exe is None or shutil.which("redis-cli") is None:
        sys.exit("redis-server and redis-cli must be on PATH")
    work = Path(tempfile.mkdtemp(prefix="wb-bench-cluster-"))
    single = RedisServer(exe, work / "single")
    (work / "single").mkdir()
    single.start()
    cluster = launch_cluster(work / "cluster")
    try:
        one = measure(single.url, args.tokens, args.reads)
        many = measure(cluster.url, args.tokens, args.reads)
    finally:
        cluster.stop()
        single.stop()
    print(f"Redis-tier reads, {args.tokens}-token entries, {args.reads} reads each, loopback, local tier off")
    print(f"{'':34}{'single server':>22}{'cluster (3+3)':>22}")
    for name, what in (("get", "exact hit (GET)"), ("first", "8 prefixes probed + 1 GET"),
                       ("sequential", "one GET per prefix (6, before)")):
        s, c = one[name], many[name]
        print(f"{what:34}{f'{s[0]:.3f} / {s[1]:.3f} ms':>22}{f'{c[0]:.3f} / {c[1]:.3f} ms':>22}")
    print("(median / p95)")


if __name__ == "__main__":
    main()
