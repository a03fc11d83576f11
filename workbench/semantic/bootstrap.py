"""Bootstrap confidence intervals for the evaluation's figures: precision, recall, hit rate and the
saved-cost estimate, for any decision rule (the cache's, or similarity alone) on any group of cases.

Resampling is by SCENARIO, not by case. The labelled sets write each scenario once and vary it six
ways (and in two languages): the cases of one scenario share a domain, a wording and often a
history, so they succeed or fail together. Drawing cases one by one would treat 12 correlated
cases as 12 independent ones and give intervals that are too narrow. A case's scenario is its id up
to the first "/"; an id without "/" is a scenario of its own (then this is the case bootstrap).

Every interval is a 95% percentile interval over RESAMPLES draws with a fixed seed, so a run gives
the same figures twice. The draws are one multinomial matrix (resamples x scenarios) times the
per-scenario counts: one matrix product per group and rule, no Python loop over resamples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

RESAMPLES = 2000
SEED = 19
LEVEL = 0.95
METRICS = ("precision", "recall", "hit_rate", "saved_per_1000")


@dataclass(frozen=True)
class Costs:
    """The saved-cost estimate, per 1,000 lookups like the scored set's: each correct hit saves the
    model call it replaces; each false hit costs `false_hit` calls. A wrong answer served saves
    nothing (the user asks again: that call is still made), costs the user a wasted turn, and may
    go unnoticed; 3 calls is a modest price for that. At 3 the cache pays only above 75% precision
    (false_hit / (1 + false_hit)). `per_call`: the price of one call, to show money as well."""
    false_hit: float = 3.0
    per_call: float | None = None

    @property
    def break_even_precision(self) -> float:
        return self.false_hit / (1.0 + self.false_hit)


def scenario(case_id: str) -> str:
    """The cluster a case is resampled with: its id up to the first "/" (the whole id without one)."""
    return case_id.split("/", 1)[0]


def _counts(hit: np.ndarray, should: np.ndarray, cluster: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per scenario: cases, true hits, false hits, positives (n_clusters x 4)."""
    cols = np.stack([np.ones_like(hit), hit & should, hit & ~should, should], axis=1).astype(np.float64)
    out = np.zeros((n_clusters, 4))
    np.add.at(out, cluster, cols)
    return out


def _metrics(c: np.ndarray, costs: Costs) -> dict[str, np.ndarray]:
    """The four figures from summed counts (last axis: cases, true hits, false hits, positives).
    0/0 (no hits, no positives) is nan: undefined, not zero."""
    n, tp, fp, pos = c[..., 0], c[..., 1], c[..., 2], c[..., 3]
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"precision": tp / (tp + fp), "recall": tp / pos, "hit_rate": (tp + fp) / n,
                "saved_per_1000": 1000.0 * (tp - costs.false_hit * fp) / n}


def _figure(point: float, draws: np.ndarray, digits: int) -> dict[str, float | None]:
    """The value and its interval. Resamples where the figure is undefined (no hits drawn, for
    precision) are left out: the interval is conditional on the figure existing."""
    if np.isnan(point):
        return {"value": None, "low": None, "high": None}
    draws = draws[~np.isnan(draws)]
    if not len(draws):
        return {"value": round(float(point), digits), "low": None, "high": None}
    tail = (1.0 - LEVEL) / 2 * 100
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return {"value": round(float(point), digits), "low": round(float(lo), digits), "high": round(float(hi), digits)}


def intervals(rules: Mapping[str, np.ndarray], should: np.ndarray, case_ids: Sequence[str], costs: Costs,
              *, resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, dict[str, Any]]:
    """For each decision rule (name -> hit per case): every figure with its interval. All rules see
    the same draws, so their intervals are paired (the rules are compared on the same resampled
    sets)."""
    names, cluster = np.unique([scenario(i) for i in case_ids], return_inverse=True)
    k = len(names)
    draws = np.random.default_rng(seed).multinomial(k, np.full(k, 1.0 / k), size=resamples).astype(np.float64)
    out: dict[str, dict[str, Any]] = {}
    for rule, hit in rules.items():
        counts = _counts(np.asarray(hit, dtype=bool), np.asarray(should, dtype=bool), cluster, k)
        point, boot = _metrics(counts.sum(axis=0), costs), _metrics(draws @ counts, costs)
        out[rule] = {m: _figure(float(point[m]), boot[m], 1 if m == "saved_per_1000" else 4) for m in METRICS}
        if costs.per_call is not None:
            out[rule]["money_saved_per_1000"] = {key: None if v is None else round(v * costs.per_call, 4)
                                                 for key, v in out[rule]["saved_per_1000"].items()}
    return out
