"""The two-tier segment cache: a byte-capped local LRU in front of an optional shared Redis.

    cache = TwoTierCache.from_env()                 # Redis only when WORKBENCH_REDIS_URL is set
    entry, source = cache.get_or_build(key, build)  # source: "local" | "redis" | "fresh"

Reads go local -> Redis -> build; writes go through both (local first). N callers
asking for one missing key share one build (single-flight, with a double check once
the flight is taken); a build that raises is remembered for `negative_ttl_s`, so a
burst of requests for a failing key re-raises the same error type without building.
Redis faults of any kind become misses and counted faults, never exceptions.

The Redis server is not trusted (redis_tier.py): every value carries an HMAC over its key
and content, keyed by WORKBENCH_CACHE_SECRET (secret.py; `secret=` overrides it), values
are capped at `max_value_bytes` and every Redis call ends within `redis_deadline_s`. Threads share
at most `redis_max_connections` connections, waiting for a free one within that deadline
(redis_pool.py).

`clock` (default time.monotonic) is what the negative entries' TTL and the Redis back-off are
measured on: schedules, not waits, so a test can step a clock of its own and see an entry expire or
a back-off end without sleeping. Redis deadlines stay on the real clock: they bound socket waits.
"""

from __future__ import annotations

import asyncio
import copy
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NoReturn, cast

import numpy as np
from numpy.typing import NDArray

from ..errors import CacheTypeError, CacheValueError
from .keys import CacheKey
from .local import ByteLRU
from .metrics import TIERS, CacheMetrics, MetricsSnapshot, Tier
from .redis_pool import DEFAULT_MAX_CONNECTIONS
from .redis_tier import DEFAULT_DEADLINE_S, DEFAULT_MAX_VALUE_BYTES, RedisTier, check_name
from .secret import resolve_secret

MetaValue = str | int | float | bool | None
GetSource = Literal["local", "redis", "miss"]
BuildSource = Literal["local", "redis", "fresh"]

ENV_REDIS_URL = "WORKBENCH_REDIS_URL"
MiB = 1 << 20

# What an entry costs beyond its payload: the CacheEntry object, the ndarray header and
# the bytes that own its data, the str header, the meta mappingproxy and dict, and the
# LRU's OrderedDict slot with its 64-char hex key. Measured with tracemalloc on CPython
# 3.11 / NumPy 2 at about 640 B for a small entry; rounded up so the cap errs safe.
ENTRY_OVERHEAD = 768


def _frozen_tokens(token_ids: Any) -> NDArray[np.uint32]:
    """A uint32 copy backed by immutable bytes: no one can flip it writeable again."""
    arr = np.asarray(token_ids)
    if (arr.dtype == np.uint32 and arr.ndim == 1 and not arr.flags.writeable
            and isinstance(arr.base, bytes)):
        return arr  # already immutable (e.g. straight from the Redis decoder): no second copy
    if arr.ndim != 1:
        raise CacheValueError(f"token_ids must be one-dimensional, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise CacheTypeError(f"token_ids must be integers, got dtype {arr.dtype}")
    if arr.size and arr.dtype.kind == "i" and (arr.min() < 0 or arr.max() > 0xFFFFFFFF):
        raise CacheValueError("token_ids must fit in uint32 (0 ≤ id < 2**32)")
    return np.frombuffer(arr.astype(np.uint32).tobytes(), dtype=np.uint32)


@dataclass(frozen=True, slots=True, eq=False)
class CacheEntry:
    """One cached value: text, read-only uint32 token ids, and flat scalar metadata.

    `nbytes` = token bytes + UTF-8 text bytes + meta keys/values as text + ENTRY_OVERHEAD.
    """

    text: str
    token_ids: NDArray[np.uint32]
    meta: Mapping[str, MetaValue] = field(default_factory=dict)
    nbytes: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise CacheTypeError(f"text must be str, got {type(self.text).__name__}")
        text_bytes = len(self.text.encode("utf-8"))  # also refuses lone surrogates, early
        tokens = _frozen_tokens(self.token_ids)
        meta = dict(self.meta)
        for k, v in meta.items():
            if not isinstance(k, str) or not isinstance(v, (str, int, float, bool, type(None))):
                raise CacheTypeError(f"meta must map str to str/int/float/bool/None, got {k!r}: {type(v).__name__}")
        meta_bytes = sum(len(k) + len(str(v)) for k, v in meta.items())
        object.__setattr__(self, "token_ids", tokens)
        object.__setattr__(self, "meta", MappingProxyType(meta))
        object.__setattr__(self, "nbytes", tokens.nbytes + text_bytes + meta_bytes + ENTRY_OVERHEAD)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CacheEntry):
            return NotImplemented
        return (self.text == other.text and np.array_equal(self.token_ids, other.token_ids)
                and dict(self.meta) == dict(other.meta))

    def __hash__(self) -> int:
        return hash((self.text, len(self.token_ids)))


def _reraise(exc: BaseException) -> NoReturn:
    """Raise a copy of `exc` (same type and attributes) chained to the original.

    Raising one exception object from many threads would race on its traceback;
    a copy keeps each raise separate and the original build traceback in __cause__.
    """
    try:
        clone: BaseException | None = copy.copy(exc)
    except Exception:  # noqa: BLE001 - a type that cannot be rebuilt from its args: raise it as is
        clone = None
    if clone is None or clone is exc or type(clone) is not type(exc):
        raise exc
    raise clone from exc


def _hex(key: CacheKey) -> str:
    if not isinstance(key, CacheKey):
        raise CacheTypeError(f"cache keys are CacheKey (workbench.cache.cache_key), got {type(key).__name__}")
    return key.hex


class _Flight:
    __slots__ = ("done", "entry", "source", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.entry: CacheEntry | None = None
        self.source: BuildSource = "fresh"
        self.error: BaseException | None = None


class TwoTierCache:
    def __init__(self, local_bytes: int = 256 * MiB, redis_url: str | None = None, *,
                 environment: str = "default", namespace: str = "segments", ttl_s: float = 3600,
                 negative_ttl_s: float = 2.0, socket_timeout_s: float = 0.05,
                 backoff_initial_s: float = 0.1, backoff_max_s: float = 5.0,
                 negative_max_entries: int = 4096, secret: bytes | str | None = None,
                 max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES, redis_deadline_s: float = DEFAULT_DEADLINE_S,
                 redis_max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 clock: Callable[[], float] = time.monotonic):
        if local_bytes < 0:
            raise CacheValueError(f"cache local_bytes must be >= 0, got {local_bytes}",
                                  hint="0 turns the local tier off")
        check_name("environment", environment)
        check_name("namespace", namespace)
        if not callable(clock):
            raise CacheTypeError(f"cache clock must be a function returning monotonic seconds, got "
                                 f"{type(clock).__name__}", hint="leave it out: time.monotonic is the default")
        self._metrics = CacheMetrics()
        self._local: ByteLRU[CacheEntry] = ByteLRU(local_bytes)
        # The secret is resolved only with a Redis tier: a local-only cache trusts its own memory.
        self._redis = None if not redis_url else RedisTier(
            redis_url, environment=environment, namespace=namespace, ttl_s=ttl_s,
            socket_timeout_s=socket_timeout_s, metrics=self._metrics, secret=resolve_secret(secret),
            backoff_initial_s=backoff_initial_s, backoff_max_s=backoff_max_s,
            max_value_bytes=max_value_bytes, deadline_s=redis_deadline_s, max_connections=redis_max_connections,
            clock=clock)
        self._clock = clock
        self._negative_ttl_s = negative_ttl_s
        self._negative_max = negative_max_entries
        self._negative: dict[str, tuple[float, BaseException]] = {}
        self._neg_lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._flights_lock = threading.Lock()
        # One task per key per event loop; loops are weakly held so a closed loop's map goes away.
        self._async_flights: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Task[tuple[CacheEntry, BuildSource]]]] = \
            weakref.WeakKeyDictionary()

    @classmethod
    def from_env(cls, **kwargs: Any) -> TwoTierCache:
        """The app default: Redis when WORKBENCH_REDIS_URL is set (SPEC 7.5), else local only."""
        return cls(redis_url=os.environ.get(ENV_REDIS_URL, "").strip() or None, **kwargs)

    @property
    def redis_enabled(self) -> bool:
        return self._redis is not None

    def redis_key(self, key: CacheKey) -> str | None:
        """The Redis key an entry lives under (None without a Redis tier)."""
        return None if self._redis is None else self._redis.key(key)

    # --- get / put -----------------------------------------------------------------------

    def get(self, key: CacheKey, *, tiers: Sequence[Tier] = TIERS) -> tuple[CacheEntry | None, GetSource]:
        """Look `key` up in `tiers` (in order); a Redis hit is promoted to local when local is in `tiers`."""
        hex_ = _hex(key)
        if not set(tiers) <= set(TIERS):
            raise CacheValueError(f"tiers must be drawn from {TIERS}, got {tuple(tiers)}")
        t0 = time.perf_counter_ns()
        try:
            return self._lookup(key, hex_, tiers)
        finally:
            self._metrics.latency("get", time.perf_counter_ns() - t0)

    def _lookup(self, key: CacheKey, hex_: str, tiers: Sequence[Tier]) -> tuple[CacheEntry | None, GetSource]:
        if "local" in tiers:
            entry = self._local.get(hex_)
            if entry is not None:
                self._metrics.hit("local")
                return entry, "local"
            self._metrics.miss("local")
        if "redis" in tiers and self._redis is not None:
            parts = self._redis.get(key)  # counts its own hit / miss / fault
            if parts is not None:
                entry = CacheEntry(*parts)
                if "local" in tiers:
                    # A concurrent build may have filled local meanwhile: keep one object per key.
                    entry = self._local.setdefault(hex_, entry)
                return entry, "redis"
        return None, "miss"

    def first(self, keys: Sequence[CacheKey]) -> tuple[int, CacheEntry | None, GetSource]:
        """The first of `keys` either tier holds: (its index, the entry, where it came from), as
        `get` on each in turn would find it, or (-1, None, "miss"). The local tier is read first;
        Redis is asked for the nearest of the keys before the first local hit that it holds, in one
        round trip (`RedisTier.nearest`)."""
        t0 = time.perf_counter_ns()
        try:
            hexes = [_hex(k) for k in keys]
            local_at, held = len(keys), None
            for i, h in enumerate(hexes):
                held = self._local.get(h)     # kept: an eviction meanwhile cannot turn it into a miss
                if held is not None:
                    local_at = i
                    break
            if self._redis is not None and local_at:
                i, parts = self._redis.nearest(keys[:local_at])   # counts its own hit / miss / faults
                if parts is not None:
                    self._metrics.miss("local")
                    return i, self._local.setdefault(hexes[i], CacheEntry(*parts)), "redis"
            if held is not None:
                self._metrics.hit("local")
                return local_at, held, "local"
            return -1, None, "miss"
        finally:
            self._metrics.latency("get", time.perf_counter_ns() - t0)

    def put(self, key: CacheKey, entry: CacheEntry) -> None:
        """Write-through: local first, then Redis (a Redis failure is counted, not raised)."""
        if not isinstance(entry, CacheEntry):
            raise CacheTypeError(f"the cache stores CacheEntry, got {type(entry).__name__}")
        hex_ = _hex(key)
        t0 = time.perf_counter_ns()
        try:
            self._local.put(hex_, entry)
            self._forget_failure(hex_)
            if self._redis is not None:
                if entry.nbytes - ENTRY_OVERHEAD > self._redis.max_value_bytes:
                    # Its encoding is at least this large: refuse it before copying it into one.
                    self._metrics.count("redis_oversize_puts")
                else:
                    self._redis.set(key, self._redis.encode(key, entry.text, entry.token_ids, entry.meta))
        finally:
            self._metrics.latency("put", time.perf_counter_ns() - t0)

    # --- get_or_build: single-flight + negative entries ------------------------------------

    def get_or_build(self, key: CacheKey, build: Callable[[], CacheEntry]) -> tuple[CacheEntry, BuildSource]:
        """The entry for `key`, building it once however many threads ask at the same time.

        Callers that waited on another's build get that caller's entry and source.
        """
        hex_ = _hex(key)
        self._raise_if_failed(hex_)
        entry, got = self.get(key)
        if entry is not None:
            return entry, cast(Tier, got)  # an entry found comes from a tier: "local" or "redis"
        with self._flights_lock:
            flight = self._flights.get(hex_)
            leader = flight is None
            if leader:
                flight = self._flights[hex_] = _Flight()
        assert flight is not None
        if not leader:
            self._metrics.count("singleflight_waits")
            flight.done.wait()
            if flight.entry is not None:
                return flight.entry, flight.source
            if isinstance(flight.error, Exception):
                _reraise(flight.error)
            return self.get_or_build(key, build)  # the leader was interrupted: take over
        try:
            # Double check: a flight that ended between our miss and taking this one has
            # already filled the local tier (or failed). Its misses were counted above.
            self._raise_if_failed(hex_)
            entry = self._local.get(hex_)
            if entry is not None:
                self._metrics.hit("local")
                flight.source = "local"
            else:
                entry = self._build(key, build)
            flight.entry = entry
            return entry, flight.source
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._flights_lock:
                del self._flights[hex_]
            flight.done.set()

    def _build(self, key: CacheKey, build: Callable[[], CacheEntry]) -> CacheEntry:
        self._metrics.count("builds")
        try:
            entry = build()
            if not isinstance(entry, CacheEntry):
                raise CacheTypeError(f"build must return a CacheEntry, got {type(entry).__name__}")
        except Exception as exc:
            self._metrics.count("build_failures")
            self._remember_failure(key.hex, exc)
            raise
        self.put(key, entry)
        return entry

    async def aget_or_build(self, key: CacheKey, build: Callable[[], CacheEntry]) -> tuple[CacheEntry, BuildSource]:
        """`get_or_build` for asyncio: local hits answer in the loop; the rest (Redis I/O and
        the sync `build`) runs in a thread, one task per key shared by every coroutine."""
        hex_ = _hex(key)
        self._raise_if_failed(hex_)
        entry = self._local.get(hex_)
        if entry is not None:
            self._metrics.hit("local")
            return entry, "local"
        loop = asyncio.get_running_loop()
        with self._flights_lock:
            flights = self._async_flights.setdefault(loop, {})
        task = flights.get(hex_)
        if task is None:
            task = loop.create_task(asyncio.to_thread(self.get_or_build, key, build))
            flights[hex_] = task
            task.add_done_callback(lambda t: flights.pop(hex_, None) if flights.get(hex_) is t else None)
        else:
            self._metrics.count("singleflight_waits")
        # shield: one waiter being cancelled must not cancel the build the others wait for.
        return await asyncio.shield(task)

    def _raise_if_failed(self, hex_: str) -> None:
        if not self._negative:  # the common case takes no lock
            return
        with self._neg_lock:
            item = self._negative.get(hex_)
            if item is None:
                return
            deadline, exc = item
            if self._clock() >= deadline:
                del self._negative[hex_]
                return
        self._metrics.count("negative_hits")
        _reraise(exc)

    def _remember_failure(self, hex_: str, exc: Exception) -> None:
        if self._negative_ttl_s <= 0 or self._negative_max <= 0:
            return
        now = self._clock()
        with self._neg_lock:
            if len(self._negative) >= self._negative_max:
                for k in [k for k, (d, _) in self._negative.items() if d <= now]:
                    del self._negative[k]
                while len(self._negative) >= self._negative_max:
                    del self._negative[next(iter(self._negative))]  # oldest first
            self._negative.pop(hex_, None)
            self._negative[hex_] = (now + self._negative_ttl_s, exc)

    def _forget_failure(self, hex_: str) -> None:
        if self._negative:
            with self._neg_lock:
                self._negative.pop(hex_, None)

    # --- housekeeping --------------------------------------------------------------------

    def metrics(self) -> MetricsSnapshot:
        return self._metrics.snapshot(
            local_bytes=self._local.nbytes, local_entries=len(self._local),
            local_capacity_bytes=self._local.max_bytes, evictions=self._local.evictions,
            redis_enabled=self._redis is not None,
            redis_secret=None if self._redis is None else self._redis.secret_source,
            redis_connections=(0, 0, 0) if self._redis is None else self._redis.connection_counts())

    def prometheus_text(self) -> str:
        return self.metrics().prometheus_text()

    def clear_local(self) -> None:
        """Drop the local tier and the negative entries (Redis keeps its entries until their TTL)."""
        self._local.clear()
        with self._neg_lock:
            self._negative.clear()

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()

    def __enter__(self) -> TwoTierCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        tier = f", redis={self._redis.prefix!r}" if self._redis is not None else ""
        return f"TwoTierCache(local={self._local.nbytes}/{self._local.max_bytes} B{tier})"
