"""A clock that moves only when a test says so, for the schedules the product reads through a `clock=`
hook (the cache's back-off and negative-entry TTL): the test steps time past an interval instead of
sleeping through it, and counts what happened at each step. Real waits on sockets never read it."""

from __future__ import annotations

import threading


class FakeClock:
    """Monotonic seconds; `advance` is the only way they change."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start          # far from 0: the back-off reads 0 as "healthy"
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock never goes back")
        with self._lock:
            self._now += seconds
