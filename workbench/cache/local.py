"""The local tier: an in-process LRU capped by bytes, not by entries.

Segment entries range from a few tokens to whole conversations, so an entry count
says nothing about memory; every value reports its own `nbytes` and the total never
exceeds the cap, not even for a moment inside `put`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

from ..errors import CacheValueError


class Sized(Protocol):
    @property
    def nbytes(self) -> int: ...


V = TypeVar("V", bound=Sized)


class ByteLRU(Generic[V]):
    """Least-recently-used map bounded by the sum of its values' `nbytes`. Thread-safe."""

    def __init__(self, max_bytes: int):
        if max_bytes < 0:
            raise CacheValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._data: OrderedDict[str, V] = OrderedDict()
        self._bytes = 0
        self._evictions = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: str, value: V) -> bool:
        """Store `value` as most recent; False (and nothing evicted) when it alone exceeds the cap."""
        size = value.nbytes
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            if size > self.max_bytes:
                # The old value is stale either way: the caller says the key now means `value`.
                return False
            while self._bytes + size > self.max_bytes:
                _, evicted = self._data.popitem(last=False)
                self._bytes -= evicted.nbytes
                self._evictions += 1
            self._data[key] = value
            self._bytes += size
            return True

    def setdefault(self, key: str, value: V) -> V:
        """The value already held for `key` if any (now most recent), else store `value` and return it."""
        with self._lock:
            held = self._data.get(key)
            if held is not None:
                self._data.move_to_end(key)
                return held
        self.put(key, value)
        return value

    def discard(self, key: str) -> None:
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0

    def keys(self) -> list[str]:
        """Oldest first: the next key to be evicted leads."""
        with self._lock:
            return list(self._data)

    @property
    def nbytes(self) -> int:
        return self._bytes

    @property
    def evictions(self) -> int:
        return self._evictions

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._data
