"""Cache metrics: thread-safe counters, bounded latency samples, a typed snapshot, Prometheus text.

The recorder is cheap on the hot path (one lock, an increment); everything derived
(hit rates, percentiles, the exposition text) is computed when a snapshot is taken.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Tier = Literal["local", "redis"]
# connect, timeout: the server is unreachable or silent. garbage: a reply or value that does not
# parse. version: an entry of another wire format. integrity: a value whose HMAC does not match
# its key (forged, or moved from another key). oversize: a reply over the value cap. deadline: a
# call that outlived its overall deadline (a server pacing its bytes). other: e.g. WRONGTYPE.
FaultKind = Literal["connect", "timeout", "garbage", "version", "integrity", "oversize", "deadline", "other"]
TIERS: tuple[Tier, ...] = ("local", "redis")
FAULT_KINDS: tuple[FaultKind, ...] = ("connect", "timeout", "garbage", "version", "integrity", "oversize",
                                      "deadline", "other")
# Where the Redis tier's HMAC secret came from (workbench/cache/secret.py); None without Redis.
SecretSource = Literal["argument", "env", "deployment", "process"]
SECRET_SOURCES: tuple[SecretSource, ...] = ("argument", "env", "deployment", "process")

# Percentiles come from the most recent samples: a live view wants "now", not the
# average since start, and a ring of this size bounds memory and snapshot cost.
LATENCY_WINDOW = 2048


@dataclass(frozen=True, slots=True)
class LatencySummary:
    count: int            # every call since start
    sum_s: float          # every call since start
    p50_s: float | None   # over the last LATENCY_WINDOW calls; None before the first
    p95_s: float | None


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    hits: Mapping[Tier, int]
    misses: Mapping[Tier, int]
    builds: int
    build_failures: int
    singleflight_waits: int
    negative_hits: int
    faults: Mapping[FaultKind, int]
    redis_skipped: int            # Redis lookups/writes skipped while the tier backs off
    local_bytes: int
    local_entries: int
    local_capacity_bytes: int
    evictions: int
    get_latency: LatencySummary
    put_latency: LatencySummary
    redis_enabled: bool = False
    hit_rate: Mapping[Tier, float] = field(default_factory=dict)
    redis_oversize_puts: int = 0  # entries over the value cap, kept out of Redis (local only)
    # "env" or "argument": a secret other machines can share. "deployment": made on this machine
    # (other machines sharing the Redis will not read its entries); "process": this process alone.
    redis_secret: SecretSource | None = None
    # The tier's connections (redis_pool.py): open now, the most open at once, the cap (0 without
    # Redis); calls that waited for a free connection, and those that gave up at their deadline.
    redis_connections: int = 0
    redis_connections_peak: int = 0
    redis_connections_max: int = 0
    redis_pool_waits: int = 0
    redis_pool_timeouts: int = 0

    def prometheus_text(self) -> str:
        return render_prometheus(self)


def _rate(hits: int, misses: int) -> float:
    return hits / (hits + misses) if hits + misses else 0.0


def latency_summary(count: int, total_ns: int, window: deque[int]) -> LatencySummary:
    if not window:
        return LatencySummary(count, total_ns / 1e9, None, None)
    s = sorted(window)

    def pick(q: float) -> float:  # nearest rank
        return s[min(len(s) - 1, int(q * len(s)))] / 1e9

    return LatencySummary(count, total_ns / 1e9, pick(0.50), pick(0.95))


class LatencyCounter:
    """One operation's latencies: count and sum since start, and the last LATENCY_WINDOW samples.
    Not locked: the metrics object that owns it adds and reads under its own lock."""

    __slots__ = ("count", "total_ns", "window")

    def __init__(self) -> None:
        self.count = 0
        self.total_ns = 0
        self.window: deque[int] = deque(maxlen=LATENCY_WINDOW)

    def add(self, ns: int) -> None:
        self.count += 1
        self.total_ns += ns
        self.window.append(ns)

    def summary(self) -> LatencySummary:
        return latency_summary(self.count, self.total_ns, deque(self.window))


class CacheMetrics:
    """The counters one TwoTierCache updates; `snapshot()` freezes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hits = dict.fromkeys(TIERS, 0)
        self._misses = dict.fromkeys(TIERS, 0)
        self._faults = dict.fromkeys(FAULT_KINDS, 0)
        self._counts = {"builds": 0, "build_failures": 0, "singleflight_waits": 0,
                        "negative_hits": 0, "redis_skipped": 0, "redis_oversize_puts": 0,
                        "redis_pool_waits": 0, "redis_pool_timeouts": 0}
        self._lat = {op: LatencyCounter() for op in ("get", "put")}

    def hit(self, tier: Tier) -> None:
        with self._lock:
            self._hits[tier] += 1

    def miss(self, tier: Tier) -> None:
        with self._lock:
            self._misses[tier] += 1

    def fault(self, kind: FaultKind) -> None:
        with self._lock:
            self._faults[kind] += 1

    def count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def latency(self, op: str, ns: int) -> None:
        with self._lock:
            self._lat[op].add(ns)

    def snapshot(self, *, local_bytes: int, local_entries: int, local_capacity_bytes: int,
                 evictions: int, redis_enabled: bool, redis_secret: SecretSource | None = None,
                 redis_connections: tuple[int, int, int] = (0, 0, 0)) -> MetricsSnapshot:
        """`redis_connections`: (open now, most open at once, cap) of the Redis tier's connections."""
        with self._lock:
            hits, misses, faults = dict(self._hits), dict(self._misses), dict(self._faults)
            counts = dict(self._counts)
            lat = {op: c.summary() for op, c in self._lat.items()}
        return MetricsSnapshot(
            hits=hits, misses=misses, faults=faults,
            hit_rate={t: _rate(hits[t], misses[t]) for t in TIERS},
            builds=counts["builds"], build_failures=counts["build_failures"],
            singleflight_waits=counts["singleflight_waits"], negative_hits=counts["negative_hits"],
            redis_skipped=counts["redis_skipped"],
            local_bytes=local_bytes, local_entries=local_entries,
            local_capacity_bytes=local_capacity_bytes, evictions=evictions,
            get_latency=lat["get"], put_latency=lat["put"], redis_enabled=redis_enabled,
            redis_oversize_puts=counts["redis_oversize_puts"], redis_secret=redis_secret,
            redis_connections=redis_connections[0], redis_connections_peak=redis_connections[1],
            redis_connections_max=redis_connections[2], redis_pool_waits=counts["redis_pool_waits"],
            redis_pool_timeouts=counts["redis_pool_timeouts"],
        )


# --- Prometheus exposition format (text 0.0.4) --------------------------------------------

_P = "workbench_cache_"


def _num(v: float | int | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "NaN"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


# One sample line: name suffix, labels, value (None: no value yet, written NaN).
Sample = tuple[str, Mapping[str, str], float | int | None]


def prom_family(out: list[str], name: str, kind: str, help_: str, samples: Sequence[Sample],
                prefix: str = _P) -> None:
    out.append(f"# HELP {prefix}{name} {help_}")
    out.append(f"# TYPE {prefix}{name} {kind}")
    for suffix, labels, value in samples:
        lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
        out.append(f"{prefix}{name}{suffix}{{{lab}}} {_num(value)}" if lab else
                   f"{prefix}{name}{suffix} {_num(value)}")


def prom_latency(out: list[str], name: str, help_: str, s: LatencySummary, prefix: str = _P) -> None:
    prom_family(out, name, "summary", help_, [
        ("", {"quantile": "0.5"}, s.p50_s),
        ("", {"quantile": "0.95"}, s.p95_s),
        ("_sum", {}, s.sum_s),
        ("_count", {}, s.count),
    ], prefix)


def render_prometheus(m: MetricsSnapshot) -> str:
    out: list[str] = []

    def by_tier(d: Mapping[Tier, float]) -> list[Sample]:
        return [("", {"tier": t}, d[t]) for t in TIERS]

    prom_family(out, "hits_total", "counter", "Lookups answered by the tier.", by_tier(m.hits))
    prom_family(out, "misses_total", "counter", "Lookups the tier could not answer.", by_tier(m.misses))
    prom_family(out, "hit_ratio", "gauge", "hits / (hits + misses) per tier, 0 before any lookup.",
            by_tier(m.hit_rate))
    prom_family(out, "builds_total", "counter", "Entries built on a miss.", [("", {}, m.builds)])
    prom_family(out, "build_failures_total", "counter", "Builds that raised (then cached as negative entries).",
            [("", {}, m.build_failures)])
    prom_family(out, "singleflight_waits_total", "counter",
            "Callers that waited for another caller's build of the same key.",
            [("", {}, m.singleflight_waits)])
    prom_family(out, "negative_hits_total", "counter",
            "Requests answered by a cached build error instead of a new build.",
            [("", {}, m.negative_hits)])
    prom_family(out, "faults_total", "counter", "Redis tier faults by kind; none reaches the caller.",
            [("", {"kind": k}, m.faults[k]) for k in FAULT_KINDS])
    prom_family(out, "redis_skipped_total", "counter", "Redis calls skipped while the tier backs off.",
            [("", {}, m.redis_skipped)])
    prom_family(out, "redis_enabled", "gauge", "1 when a Redis tier is configured.",
            [("", {}, int(m.redis_enabled))])
    prom_family(out, "redis_oversize_puts_total", "counter",
            "Entries over the value cap, kept out of Redis (served by the local tier only).",
            [("", {}, m.redis_oversize_puts)])
    prom_family(out, "redis_secret", "gauge",
            "1 for where the Redis tier's HMAC secret came from; deployment or process: other machines "
            "cannot share entries until WORKBENCH_CACHE_SECRET is set.",
            [("", {"source": s}, int(m.redis_secret == s)) for s in SECRET_SOURCES])
    prom_family(out, "redis_connections", "gauge", "Connections the Redis tier holds open.",
            [("", {}, m.redis_connections)])
    prom_family(out, "redis_connections_peak", "gauge", "The most connections the Redis tier held open at once.",
            [("", {}, m.redis_connections_peak)])
    prom_family(out, "redis_connections_max", "gauge",
            "The Redis tier's connection cap: calls beyond it wait for a free connection (0: no Redis).",
            [("", {}, m.redis_connections_max)])
    prom_family(out, "redis_pool_waits_total", "counter", "Redis calls that waited for a free connection.",
            [("", {}, m.redis_pool_waits)])
    prom_family(out, "redis_pool_timeouts_total", "counter",
            "Redis calls that found no free connection within their deadline (misses; the server is not "
            "backed off).", [("", {}, m.redis_pool_timeouts)])
    prom_family(out, "local_bytes", "gauge", "Bytes held by the local tier.", [("", {}, m.local_bytes)])
    prom_family(out, "local_capacity_bytes", "gauge", "Byte cap of the local tier.",
            [("", {}, m.local_capacity_bytes)])
    prom_family(out, "local_entries", "gauge", "Entries held by the local tier.", [("", {}, m.local_entries)])
    prom_family(out, "evictions_total", "counter", "Local entries evicted to stay under the byte cap.",
            [("", {}, m.evictions)])
    prom_latency(out, "get_seconds", "Latency of get (both tiers).", m.get_latency)
    prom_latency(out, "put_seconds", "Latency of put (write-through).", m.put_latency)
    return "\n".join(out) + "\n"
