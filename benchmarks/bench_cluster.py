"""A Redis-tier hit on a 3+3 Redis Cluster next to one on a single redis-server, in one run.

Starts both on loopback with the test fixtures' launchers (tests/redis_server.py,
tests/redis_cluster.py), stores the same sealed entries in each, and times, through
`TwoTierCache` with the local tier off so every read goes to Redis:

- `get`: one exact hit (GET, the HMAC check, decoding);
- the earlier-prompt lookup of `_extend_earlier` over 8 prefix keys of one conversation, for a new
  turn (the prompts of earlier turns held: every second prefix, the nearest the 2nd) and for a
  conversation with nothing held, four ways: `TwoTierCache.first` (now: a script returns the
  nearest held value, one round trip, one value moved), its fallback for servers that refuse
  scripts (EXISTS x 8 in one pipelined round trip, then one GET), MGET of all 8 (one round trip,
  every held value moved), and one GET per prefix until one is held (before).

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
from workbench.cache.redis_tier import _probe_then_get, decode  # noqa: E402
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


def _one_by_one(cache: TwoTierCache, keys: list[CacheKey]) -> int:
    """What `_extend_earlier` did before `first`: GET each prefix in turn, nearest first."""
    for i, k in enumerate(keys):
        if cache.get(k)[0] is not None:
            return i
    return -1


def _mget(cache: TwoTierCache, keys: list[CacheKey]) -> int:
    """The alternative to the probe: MGET every prefix (one round trip, every held value moved),
    then check the nearest held one as `get` does."""
    tier = cache._redis
    assert tier is not None
    rkeys = [tier.key(k) for k in keys]
    with tier._bounded_call(tier.deadline_s):
        values = tier._connected().mget(rkeys)
    for i, v in enumerate(values):
        if v is not None:
            decode(v, sealer=tier._sealer, redis_key=rkeys[i].encode())
            return i
    return -1


def _probe(cache: TwoTierCache, keys: list[CacheKey]) -> int:
    """The fallback for servers that refuse scripts: EXISTS x 8 pipelined, then GET the nearest."""
    tier = cache._redis
    assert tier is not None
    rkeys = [tier.key(k) for k in keys]
    with tier._bounded_call(tier.deadline_s):
        got = _probe_then_get(tier._connected(), rkeys)
    if not got:
        return -1
    decode(got[1], sealer=tier._sealer, redis_key=rkeys[got[0] - 1].encode())
    return int(got[0]) - 1


def measure(url: str, tokens: int, reads: int) -> dict[str, tuple[float, float]]:
    cache = TwoTierCache(local_bytes=0, redis_url=url, namespace="bench", secret=b"bench secret, 32 bytes long....")
    entry = CacheEntry("x" * (tokens * 4), np.arange(tokens, dtype=np.uint32))
    convs = [_keys(8, c) for c in range(64)]
    cold = [_keys(8, 1000 + c) for c in range(64)]
    for keys in convs:
        for i in (1, 3, 5, 7):        # a new turn: every earlier turn's prompt is held, the nearest 2nd
            cache.put(keys[i], entry)
    assert cache.get(convs[0][1])[1] == "redis"
    n = iter(range(10**9))
    res = {"get": _time(lambda: cache.get(convs[next(n) % 64][1]), reads)}
    for name, fn in (("first", lambda ks: cache.first(ks)[0]), ("mget", lambda ks: _mget(cache, ks)),
                     ("probe", lambda ks: _probe(cache, ks)),
                     ("sequential", lambda ks: _one_by_one(cache, ks))):
        assert fn(convs[0]) == 1 and fn(cold[0]) == -1
        res[name] = _time(lambda fn=fn: fn(convs[next(n) % 64]), reads)
        res[name + " cold"] = _time(lambda fn=fn: fn(cold[next(n) % 64]), reads)
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
    for name, what in (("get", "exact hit (GET)"),
                       ("first", "new turn: script (now)"), ("probe", "new turn: EXISTS x 8 + GET"),
                       ("mget", "new turn: MGET 8"), ("sequential", "new turn: GET per prefix (before)"),
                       ("first cold", "none held: script (now)"), ("probe cold", "none held: EXISTS x 8"),
                       ("mget cold", "none held: MGET 8"), ("sequential cold", "none held: 8 GETs (before)")):
        s, c = one[name], many[name]
        print(f"{what:34}{f'{s[0]:.3f} / {s[1]:.3f} ms':>22}{f'{c[0]:.3f} / {c[1]:.3f} ms':>22}")
    print("(median / p95)")


if __name__ == "__main__":
    main()
