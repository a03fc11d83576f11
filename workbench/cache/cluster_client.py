"""A redis-py RedisCluster client held to the tiers' bounds: byte cap, deadline, no retries.

Imported only when a cluster URL is configured (it imports redis). What holds the bounds:

- every node connection is a `bounded_connection` (redis_reply.py): the bounded RESP2 parser
  (replies capped, reads held to the call's deadline) and a connect that never outlasts it;
- the client retries nothing (`Retry(NoBackoff(), 0)`): a command that meets a connection error,
  a timeout or a CLUSTERDOWN fails at once, and the tier backs off that shard;
- redirections are followed within the one call: MOVED updates the slot map and tries the new
  owner, ASK tries the importing node once; redis-py stops after 16 redirections, and every
  attempt reads under the same deadline, so a MOVED/ASK storm ends by it. A topology refresh that
  an error asked for runs inside a later call, under that call's deadline, once per second at most.
  Two waits of redis-py's own can pass the deadline: 0.25 s after a CLUSTERDOWN or an uncovered
  slot, and 0.05 s between TRYAGAIN replies (docs/scaling.md).
"""

from __future__ import annotations

from typing import Any

from .cluster import ClusterURL
from .redis_reply import bounded_connection

# The topology the client reads answers in arrays: CLUSTER SLOTS one per slot range (a cluster
# resharded slot by slot can have thousands, 16,384 at most), COMMAND one per command, nested up
# to 6 deep (key specs). GET and SET answer no arrays at all; the byte cap still bounds each reply.
CLUSTER_MAX_ARRAY_ITEMS = 16384
CLUSTER_MAX_ARRAY_DEPTH = 8


class ClusterClientFactory:
    def __init__(self, spec: ClusterURL, *, socket_timeout_s: float, connect_timeout_s: float,
                 max_value_bytes: int, max_connections: int | None = None, gauge: Any = None):
        self.spec = spec
        self._socket_timeout_s = socket_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._max_value_bytes = max_value_bytes
        # Per node; None: redis-py's own default. The cache tier passes its slot count (redis_pool.py).
        self._max_connections = max_connections
        self._gauge = gauge

    def connect(self) -> Any:
        """A RedisCluster client; building one reads the topology from the first startup node that
        answers (call it under a bounded_call)."""
        from redis.backoff import NoBackoff
        from redis.cluster import ClusterNode, LoadBalancingStrategy, RedisCluster
        from redis.retry import Retry

        spec = self.spec
        kwargs: dict[str, Any] = dict(
            socket_timeout=self._socket_timeout_s, socket_connect_timeout=self._connect_timeout_s,
            protocol=2, retry_on_timeout=False,
            connection_class=bounded_connection(self._max_value_bytes, tls=spec.tls,
                                                max_array_items=CLUSTER_MAX_ARRAY_ITEMS,
                                                max_array_depth=CLUSTER_MAX_ARRAY_DEPTH, gauge=self._gauge))
        if self._max_connections is not None:
            kwargs["max_connections"] = self._max_connections
        if spec.username is not None:
            kwargs["username"] = spec.username
        if spec.password is not None:
            kwargs["password"] = spec.password
        if spec.tls:
            kwargs["ssl"] = True
            kwargs.update(spec.ssl)
        return RedisCluster(
            startup_nodes=[ClusterNode(h, p) for h, p in spec.nodes],  # type: ignore[no-untyped-call]
            retry=Retry(NoBackoff(), 0),
            # A lost shard leaves its slots uncovered until a replica takes over: the other
            # shards keep serving meanwhile.
            require_full_coverage=False,
            # Replicas may serve reads (GET; the nearest-prefix script runs on the master); the
            # primary is in the rotation too, so a shard whose replica is gone still answers.
            load_balancing_strategy=LoadBalancingStrategy.ROUND_ROBIN if spec.read_from_replicas else None,
            **kwargs)

    @staticmethod
    def owner(client: Any, rkey: str) -> str | None:
        """The name (host:port) of the master the client maps `rkey`'s slot to; None if unknown."""
        try:
            nodes = client.nodes_manager.slots_cache.get(client.keyslot(rkey))
            return nodes[0].name if nodes else None
        except Exception:  # noqa: BLE001 - a topology being rebuilt: one back-off for the unknown
            return None
