"""The Redis tier's connections: a bounded number of calls at once, shared by every thread, and a
gauge of the connections open.

redis-py's default pool holds at most 100 connections (redis-py 8; older versions had no cap) and
raises "Too many connections" for the 101st caller instead of waiting: with 200 threads on a healthy
server, a third of the calls failed as connect faults. Here a call first takes one of
`max_connections` slots (a semaphore), waiting for one within the call's deadline, and the client's
pool is capped at the same number, so redis-py never opens more connections than there are slots
and never refuses one. A call that cannot get a slot within its deadline is a miss counted as
`redis_pool_timeouts`, not a fault of the server, and starts no back-off: the server is fine, this
process is busy. The slots also bound how many threads wait on Redis replies at once, so a burst of
threads does not turn into a burst of connections (each a handshake) or of sockets.

In a cluster the slots bound the calls; each node's pool is capped at the same number, so no node
sees more than `max_connections` connections from one tier.

The gauge counts what the bounded parser (redis_reply.py) sees connect and disconnect: the
connections open now, the most open at once, and how many were ever opened. It and the slots'
counts are in the cache metrics (metrics.py: redis_connections, redis_connections_peak,
redis_connections_max, redis_pool_waits, redis_pool_timeouts).
"""

from __future__ import annotations

import threading
import time

from ..errors import CacheValueError

# A call holds a connection for one round trip (~0.2 ms on loopback, a few ms across a network);
# Python runs one thread at a time, so a handful of connections keep a process busy and 16 leave
# room for slow replies. Raise it (redis_max_connections=) for a server far away.
DEFAULT_MAX_CONNECTIONS = 16
MAX_CONNECTIONS_LIMIT = 10_000   # redis-server's default maxclients


def check_max_connections(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CONNECTIONS_LIMIT:
        return value
    raise CacheValueError(f"cache redis_max_connections must be an integer from 1 to {MAX_CONNECTIONS_LIMIT:,}, "
                          f"got {value!r}", hint=f"the default is {DEFAULT_MAX_CONNECTIONS}")


class ConnectionGauge:
    """Connections open now, the most open at once, and how many were ever opened."""

    __slots__ = ("_lock", "open", "peak", "opened")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open = self.peak = self.opened = 0

    def connected(self) -> None:
        with self._lock:
            self.open += 1
            self.opened += 1
            self.peak = max(self.peak, self.open)

    def disconnected(self) -> None:
        with self._lock:
            self.open -= 1


class CallSlots:
    """At most `size` Redis calls at once; `take` waits for a slot until a deadline."""

    __slots__ = ("size", "_sem")

    def __init__(self, size: int) -> None:
        self.size = size
        self._sem = threading.BoundedSemaphore(size)

    def take(self, deadline: float) -> bool | None:
        """True: a slot at once. False: a slot after waiting. None: none before `deadline`
        (time.monotonic()). A taken slot must be given back (`give`)."""
        if self._sem.acquire(blocking=False):
            return True
        left = deadline - time.monotonic()
        if left > 0 and self._sem.acquire(timeout=left):
            return False
        return None

    def give(self) -> None:
        self._sem.release()
