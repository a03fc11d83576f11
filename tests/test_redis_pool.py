"""The Redis tier's bounded connection pool (issue 34, item 8), against a real redis-server.

A hostile-input probe saw 61 connect faults with 200 threads on a healthy server: redis-py's
default pool refuses the 101st concurrent caller ("Too many connections") instead of waiting. The
tier now lets at most `redis_max_connections` calls run at once, the others wait for a free
connection within their deadline, and the pool holds as many connections as there are slots.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import numpy as np
import pytest
from redis_cluster import Cluster, redis_cluster  # noqa: F401  (fixture)
from redis_server import RedisServer, redis_server  # noqa: F401  (fixture)

from workbench.cache.keys import CacheKey
from workbench.cache.redis_pool import DEFAULT_MAX_CONNECTIONS
from workbench.cache.store import CacheEntry, TwoTierCache
from workbench.errors import CacheValueError

SECRET = b"pool test secret, 32 bytes long!"
# A healthy server: the timeouts are not what is tested (they bound a hostile one, elsewhere), so
# they are generous enough for a busy machine running 200 threads.
HEALTHY = dict(environment="test", secret=SECRET, socket_timeout_s=2.0, redis_deadline_s=5.0, local_bytes=0)


def key(i: int, ns: str = "k") -> CacheKey:
    return CacheKey(hashlib.sha256(f"{ns}-{i}".encode()).hexdigest())


def entry(i: int) -> CacheEntry:
    return CacheEntry(f"prompt {i}", np.arange(i, i + 1 + i % 7, dtype=np.uint32), {"thread": i})


def hammer(cache: TwoTierCache, threads: int, rounds: int) -> list[str]:
    """`threads` threads released at once, each writing and reading back its own entries `rounds`
    times (get, and the nearest-prefix lookup); what any of them read wrong, as text."""
    barrier = threading.Barrier(threads)
    wrong: list[str] = []

    def run(i: int) -> None:
        mine, other = key(i), key(i, "absent")
        barrier.wait()
        for r in range(rounds):
            cache.put(mine, entry(i))
            got, source = cache.get(mine)
            if source != "redis" or got != entry(i):
                wrong.append(f"thread {i} round {r}: get gave {source}")
            at, got, source = cache.first([other, mine])
            if (at, source) != (1, "redis") or got != entry(i):
                wrong.append(f"thread {i} round {r}: first gave {at}, {source}")

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return wrong


def clients(server: Any) -> int:
    """Client connections the server holds: not the one asking, nor a replica's link to its master."""
    me = server.client_id()
    return sum(1 for c in server.client_list() if int(c["id"]) != me and "S" not in c["flags"])


def test_200_threads_see_no_fault_and_share_a_bounded_pool(redis_server: RedisServer) -> None:  # noqa: F811
    cache = TwoTierCache(redis_url=redis_server.url, namespace="pool", **HEALTHY)
    wrong = hammer(cache, threads=200, rounds=3)
    m = cache.metrics()
    assert wrong == []
    assert m.hits["redis"] == 200 * 3 * 2                            # every read, from Redis, right
    assert sum(m.faults.values()) == 0 and m.redis_skipped == 0 and m.redis_pool_timeouts == 0
    assert m.redis_connections_max == DEFAULT_MAX_CONNECTIONS
    assert 1 <= m.redis_connections_peak <= DEFAULT_MAX_CONNECTIONS
    inspect = redis_server.client()
    assert clients(inspect) == m.redis_connections <= DEFAULT_MAX_CONNECTIONS   # the server's count, and ours
    cache.close()
    assert cache.metrics().redis_connections == 0 and clients(inspect) == 0


def test_a_call_finding_no_free_connection_is_a_miss_not_a_fault(redis_server: RedisServer) -> None:  # noqa: F811
    cache = TwoTierCache(redis_url=redis_server.url, namespace="wait", redis_max_connections=1,
                         **{**HEALTHY, "redis_deadline_s": 0.2})
    cache.put(key(1), entry(1))
    tier = cache._redis
    assert tier is not None and tier.slots.take(deadline=0.0) is True     # this test holds the only one
    try:
        assert cache.get(key(1)) == (None, "miss")
    finally:
        tier.slots.give()
    m = cache.metrics()
    assert (m.redis_pool_waits, m.redis_pool_timeouts) == (1, 1)
    assert sum(m.faults.values()) == 0
    # No back-off: the server was never at fault, so the next call goes straight to it.
    assert cache.get(key(1)) == (entry(1), "redis")
    assert cache.metrics().redis_skipped == 0


def test_a_url_asking_for_fewer_connections_gets_that_many_slots(redis_server: RedisServer) -> None:  # noqa: F811
    cache = TwoTierCache(redis_url=redis_server.url + "?max_connections=3", namespace="url", **HEALTHY)
    assert hammer(cache, threads=50, rounds=2) == []
    m = cache.metrics()
    assert m.redis_connections_max == 3 and m.redis_connections_peak <= 3
    assert sum(m.faults.values()) == 0 and m.redis_pool_timeouts == 0      # redis-py never refused one
    cache.close()


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "16", 10**6])
def test_bad_connection_cap_is_refused(redis_server: RedisServer, bad: Any) -> None:  # noqa: F811
    with pytest.raises(CacheValueError, match="redis_max_connections must be an integer from 1 to") as e:
        TwoTierCache(redis_url=redis_server.url, redis_max_connections=bad, **HEALTHY)
    assert e.value.hint and str(DEFAULT_MAX_CONNECTIONS) in e.value.hint


def test_pool_metrics_are_exported(redis_server: RedisServer) -> None:  # noqa: F811
    cache = TwoTierCache(redis_url=redis_server.url, namespace="prom", **HEALTHY)
    cache.put(key(7), entry(7))
    text = cache.prometheus_text()
    assert f"workbench_cache_redis_connections_max {DEFAULT_MAX_CONNECTIONS}\n" in text
    assert "workbench_cache_redis_connections 1\n" in text
    assert "workbench_cache_redis_pool_timeouts_total 0\n" in text
    local = TwoTierCache().prometheus_text()
    assert "workbench_cache_redis_connections_max 0\n" in local


def test_200_threads_on_a_cluster_stay_within_the_cap_on_every_node(redis_cluster: Cluster) -> None:  # noqa: F811
    cap = 4
    cache = TwoTierCache(redis_url=redis_cluster.url, namespace="pool", redis_max_connections=cap, **HEALTHY)
    wrong = hammer(cache, threads=200, rounds=2)
    m = cache.metrics()
    assert wrong == [] and sum(m.faults.values()) == 0 and m.redis_pool_timeouts == 0
    per_node = [clients(redis_cluster.node_client(n)) for n in redis_cluster.masters()]
    # Each master: at most `cap` connections from the tier.
    assert all(n <= cap for n in per_node), per_node
    assert sum(per_node) == m.redis_connections >= len(per_node)
    cache.close()
