"""Assembly metrics: what an Assembler did, as a typed snapshot and as Prometheus text.

Recorded once per assembly, in O(1) (counts come from the result's summary fields, not from
walking its segments): cold vs incremental assemblies, segments and tokens reused vs rendered,
render and tokenize time, assembly latency, truncations, and how requests spread over cache keys.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..cache.metrics import LatencyCounter, LatencySummary, Sample, prom_family, prom_latency

if TYPE_CHECKING:
    from .result import AssemblyResult

_P = "workbench_assembly_"
TOP_KEYS = 10


@dataclass(frozen=True, slots=True)
class AssemblySnapshot:
    assemblies: Mapping[str, int]        # mode -> count: "cold", "incremental", "cached" (a whole prompt reused)
    segments: Mapping[str, int]          # source -> count: "local" (reused), "fresh"
    tokens: Mapping[str, int]            # source -> tokens
    render_s: float
    tokenize_s: float
    latency: LatencySummary
    truncations: int
    dropped_messages: int
    distinct_keys: int
    top_keys: tuple[tuple[str, int], ...]  # (first 8 hex digits, assemblies), most frequent first

    @property
    def reuse_ratio(self) -> float:
        """Share of segments taken from the previous result instead of rendered again."""
        total = sum(self.segments.values())
        return self.segments.get("local", 0) / total if total else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"assemblies": dict(self.assemblies), "segments": dict(self.segments), "tokens": dict(self.tokens),
                "reuse_ratio": self.reuse_ratio, "render_s": self.render_s, "tokenize_s": self.tokenize_s,
                "latency": {"count": self.latency.count, "sum_s": self.latency.sum_s, "p50_s": self.latency.p50_s,
                            "p95_s": self.latency.p95_s},
                "truncations": self.truncations, "dropped_messages": self.dropped_messages,
                "distinct_keys": self.distinct_keys, "top_keys": [list(k) for k in self.top_keys]}

    def prometheus_text(self) -> str:
        out: list[str] = []

        def fam(name: str, kind: str, help_: str, samples: list[Sample]) -> None:
            prom_family(out, name, kind, help_, samples, _P)

        fam("total", "counter", "Assemblies: cold, incremental (an earlier prompt extended) or cached (reused whole).",
            [("", {"mode": m}, n) for m, n in self.assemblies.items()])
        fam("segments_total", "counter", "Segments by where they came from.",
            [("", {"source": s}, n) for s, n in self.segments.items()])
        fam("tokens_total", "counter", "Prompt tokens by where they came from.",
            [("", {"source": s}, n) for s, n in self.tokens.items()])
        fam("segment_reuse_ratio", "gauge", "local / all segments.", [("", {}, self.reuse_ratio)])
        fam("render_seconds_total", "counter", "Time spent rendering chat templates.", [("", {}, self.render_s)])
        fam("tokenize_seconds_total", "counter", "Time spent tokenizing.", [("", {}, self.tokenize_s)])
        prom_latency(out, "seconds", "Assembly latency.", self.latency, _P)
        fam("truncations_total", "counter", "Assemblies that dropped messages to fit the budget.",
            [("", {}, self.truncations)])
        fam("dropped_messages_total", "counter", "Messages dropped by truncation.", [("", {}, self.dropped_messages)])
        fam("distinct_keys", "gauge", "Distinct prompt cache keys seen.", [("", {}, self.distinct_keys)])
        fam("key_assemblies", "gauge", f"Assemblies per cache key, the {TOP_KEYS} most frequent.",
            [("", {"key": k}, n) for k, n in self.top_keys])
        return "\n".join(out) + "\n"


class AssemblyMetrics:
    """The counters one Assembler updates (thread-safe); `snapshot()` freezes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modes: Counter[str] = Counter({"cold": 0, "incremental": 0, "cached": 0})
        self._segments: Counter[str] = Counter({"local": 0, "fresh": 0})
        self._tokens: Counter[str] = Counter({"local": 0, "fresh": 0})
        self._keys: Counter[str] = Counter()
        self._render_s = self._tokenize_s = 0.0
        self._truncations = self._dropped = 0
        self._lat = LatencyCounter()

    def record(self, r: "AssemblyResult") -> None:
        reused = r.reused_segments
        n = len(r.segments)
        reused_tokens = r.segments[reused].start if 0 < reused < n else (r.total_tokens if reused else 0)
        t = r.timings_ms
        ns = int(t.get("total", 0.0) * 1e6)
        with self._lock:
            self._modes["cached" if reused and reused == n else "incremental" if reused else "cold"] += 1
            self._segments["local"] += reused
            self._segments["fresh"] += n - reused
            self._tokens["local"] += reused_tokens
            self._tokens["fresh"] += r.total_tokens - reused_tokens
            self._keys[r.cache_key.short] += 1
            self._render_s += t.get("render", 0.0) / 1e3
            self._tokenize_s += t.get("tokenize", 0.0) / 1e3
            if r.dropped:
                self._truncations += 1
                self._dropped += len(r.dropped)
            self._lat.add(ns)

    def snapshot(self) -> AssemblySnapshot:
        with self._lock:
            lat = self._lat.summary()
            return AssemblySnapshot(dict(self._modes), dict(self._segments), dict(self._tokens), self._render_s,
                                    self._tokenize_s, lat, self._truncations, self._dropped, len(self._keys),
                                    tuple(self._keys.most_common(TOP_KEYS)))
