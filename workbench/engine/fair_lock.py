"""Turns on the engine, first come first served, with a bounded wait.

The engine and its KV cache serve one request at a time. `threading.Lock` is not fair: a thread
that releases it and asks again at once usually wins, so a long prompt prefilled chunk by chunk
would starve a short request behind it. Here every waiter queues in arrival order, and gives up
after its deadline instead of waiting forever.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager


class FairLock:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: deque[object] = deque()
        self._held = False

    def acquire(self, timeout: float) -> bool:
        """Wait for our turn, at most `timeout` seconds; False when it did not come."""
        me = object()
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            self._waiting.append(me)
            while self._held or self._waiting[0] is not me:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._waiting.remove(me)
                    self._cond.notify_all()       # the one behind us may be first now
                    return False
                self._cond.wait(left)
            self._waiting.popleft()
            self._held = True
            return True

    def release(self) -> None:
        with self._cond:
            if not self._held:
                raise RuntimeError("release of a FairLock that is not held")
            self._held = False
            self._cond.notify_all()

    @contextmanager
    def turn(self, timeout: float, on_timeout: Exception) -> Iterator[None]:
        """`with lock.turn(5, Busy()):` runs the block holding the lock, or raises `on_timeout`."""
        if not self.acquire(timeout):
            raise on_timeout
        try:
            yield
        finally:
            self.release()

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    @property
    def held(self) -> bool:
        return self._held
