"""`analyze LOGS... --aggregate`: production request logs analysed at scale (docs/logs.md).

    aggregate(paths, ray=None | True | "ADDRESS", template=..., tokenizer=..., template_args=...) -> AggregateReport

Logs are indexed in one streaming pass (logs.py), cut into batches of whole sessions, and each
batch is analysed by the same pure per-session function (session_report.py), in this process or
as a Ray Data job (ray_runner.py). A batch comes back as a `Tally`: integer counts only, merged by
addition, so the report does not depend on how sessions were batched or in which order batches
finished: local and Ray runs print the same JSON (but for `runner`).

Lost tokens: for turn k ≥ 2, held(k) − reused(k), what the engine held after turn k−1 (its
prompt and the reply as generated) that turn k does not reuse. A turn's lost tokens go to its
first cause, the one at the divergence point. Costs and recovered tokens are estimates: the cost
prices each lost token at a provider's uncached input price less its cached price, and a fix is
credited with all the lost tokens of the causes it addresses.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..templates.arguments import canonical, template_kwargs
from .logs import KEPT_BAD_LINES, LogIndex, index_logs
from .provider_params import MILLION, ProviderParams
from .session_report import Assemblers, Options
from .tally import ADVICE_FIXES, Tally, analyze_batch, batches

COST_PROVIDERS = ("openai", "anthropic", "gemini")   # each cause's lost tokens priced under these
TOP = 5                      # templates and system prompts listed per cause
MAX_DIAGNOSTICS = KEPT_BAD_LINES   # bad lines listed in the report (all are counted)


# ------------------------------------------------------------------ the report
@dataclass
class AggregateReport:
    requests: int
    tally: Tally
    runner: dict[str, Any]
    providers: dict[str, ProviderParams]

    @property
    def lost_tokens(self) -> int:
        return self.tally.held - self.tally.reused

    def to_json(self) -> dict[str, Any]:
        t = self.tally
        return {"requests": self.requests, "sessions": t.sessions, "turns": t.turns, "tokens": t.tokens,
                "held_tokens": t.held, "reused_tokens": t.reused, "lost_tokens": self.lost_tokens,
                "bad_lines": t.bad.count, "diagnostics": [b.to_json() for b in t.bad.kept[:MAX_DIAGNOSTICS]],
                "causes": self._causes(), "fixes": self._fixes(), "estimates": ESTIMATES_NOTE,
                "reconciliation": t.recon.to_json(), "runner": self.runner}

    def call_rows(self) -> list[dict[str, Any]]:
        """Every reconciled call, by file and line (`aggregate(..., calls=True)`; else empty)."""
        return self.tally.recon.call_rows()

    def _cost(self, lost: int, names: Iterable[str]) -> dict[str, float]:
        return {p: round(lost * saving(self.providers[p]) / MILLION, 6) for p in names if p in self.providers}

    def _causes(self) -> list[dict[str, Any]]:
        total = self.lost_tokens
        rows = []
        for code, c in self.tally.causes.items():
            rows.append({
                "code": code, "sessions": c["sessions"], "turns": c["turns"], "lost_tokens": c["lost"],
                "share": round(c["lost"] / total, 6) if total > 0 else 0.0,
                "cost": self._cost(c["lost"], COST_PROVIDERS),
                "logged_cost": {p: self._cost(n, [p]).get(p) for p, n in sorted(c["logged"].items())},
                "top_templates": [{"template": k, "lost_tokens": n} for k, n in _top(c["templates"].items())],
                "top_clients": [{"client": k, "lost_tokens": n} for k, n in _top(c["clients"].items())],
                "top_system_prompts": [{"sha256": k, "preview": v[1], "lost_tokens": v[0]} for k, v in
                                       _top((k, v) for k, v in c["systems"].items())]})
        return sorted(rows, key=lambda r: (-r["lost_tokens"], r["code"]))

    def _fixes(self) -> list[dict[str, Any]]:
        from .fixes import FIXES
        rows = []
        for name, f in self.tally.fixes.items():
            doc = FIXES[name].description if name in FIXES else next(
                (a for n, a in ADVICE_FIXES.values() if n == name), "")
            rows.append({"fix": name, "kind": f["kind"], "causes": sorted(f["causes"]), "recovered_tokens": f["lost"],
                         "recovered_cost": self._cost(f["lost"], COST_PROVIDERS), "estimate": True,
                         "description": doc})
        return sorted(rows, key=lambda r: (-r["recovered_tokens"], r["fix"]))


ESTIMATES_NOTE = ("cost and recovered_* are estimates: each lost token priced at the provider's uncached input "
                  "price less its cached price; a fix credited with every lost token of the causes it addresses")


def saving(p: ProviderParams) -> float:
    """USD per million tokens a cache hit saves over a miss (input less cached input)."""
    return max(0.0, p.prices.input - p.prices.cached_input)


def _top(items: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    def lost(kv: tuple[str, Any]) -> int:
        return int(kv[1][0] if isinstance(kv[1], list) else kv[1])
    return sorted(items, key=lambda kv: (-lost(kv), kv[0]))[:TOP]


# ------------------------------------------------------------------ running it
def aggregate(paths: Sequence[str | os.PathLike[str]], *, ray: str | bool | None = None, template: str | None = None,
              tokenizer: str | None = None, progress: bool = False, strict: bool = False,
              provider: str | None = None, calls: bool = False,
              template_args: Mapping[str, Any] | None = None) -> AggregateReport:
    """Index the logs, analyse every session (here, or on Ray: `ray=True` starts local Ray, a
    string names a cluster's address), and report per cause code. `provider`: the provider of the
    lines that name none, for reconciliation; `calls`: keep every reconciled call (`call_rows()`);
    `template_args`: chat template arguments for every request (checked as `--template-arg` is)."""
    started = time.perf_counter()
    kwargs = template_kwargs(template_args or {}, where="--template-arg")
    if provider is not None:
        from .reconcile import provider_params
        known = provider_params(provider)
        if isinstance(known, str):    # a wrong --provider is one error before any work
            from ..errors import UnknownProviderError
            raise UnknownProviderError(known.removeprefix("provider: "),
                                       hint=f"use a preset name ({', '.join(ProviderParams.presets())}) or "
                                            "workbench-engine")
    options = Options(template, tokenizer, provider, calls, canonical(kwargs) if kwargs else "")
    # The default template and tokenizer load here first: a wrong name is one error before any work.
    Assemblers(options).get(options.default_template)
    names = [os.fspath(p) for p in paths]
    runner: dict[str, Any]
    if ray is None or ray is False:
        index = index_logs(paths, strict=strict)
        tally, runner = _local(index, names, options, progress), {"mode": "local", "address": None, "workers": 1}
    else:
        from .ray_runner import run_on_ray
        index, tally, runner = run_on_ray(lambda: index_logs(paths, strict=strict), names, options,
                                          None if ray is True else str(ray), progress)
    tally.bad.merge(index.bad)
    # The serving engines' shared caches: one ordered pass over their calls, here, after every batch
    # (reconcile_engines.py): the same for both runners, whatever order batches finished in.
    tally.recon.finish_engines(calls)
    first = tally.bad.earliest(names) if strict else None
    if first is not None:
        raise first.error()
    providers: dict[str, ProviderParams | None] = {p: ProviderParams.load(p) for p in COST_PROVIDERS}
    for c in tally.causes.values():
        for p in c["logged"]:
            if p not in providers:
                providers[p] = _provider(p)
    runner["seconds"] = round(time.perf_counter() - started, 3)
    return AggregateReport(index.requests, tally, runner, {k: v for k, v in providers.items() if v is not None})


def _provider(name: str) -> ProviderParams | None:
    from ..errors import WorkbenchError
    try:
        return ProviderParams.load(name)
    except WorkbenchError:
        return None      # a provider the presets do not know: its lines are counted, not priced


def _local(index: LogIndex, names: Sequence[str], options: Options, progress: bool) -> Tally:
    assemblers = Assemblers(options)
    tally = Tally()
    bar = _bar(len(index.sessions), progress)
    for batch in batches(index.ordered(), 64):
        tally.merge(analyze_batch(index.paths, names, batch, assemblers))
        if bar is not None:
            bar.update(len(batch))
    if bar is not None:
        bar.close()
    return tally


def _bar(total: int, progress: bool) -> Any:
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return _Bar(total)
    return tqdm(total=total, unit="session", desc="analyze", file=sys.stderr, dynamic_ncols=True)


class _Bar:
    """A bare progress line on stderr where tqdm is not installed (it is not a core dependency)."""

    def __init__(self, total: int):
        self.total, self.done = total, 0

    def update(self, n: int) -> None:
        self.done += n
        sys.stderr.write(f"\ranalyze: {self.done}/{self.total} sessions")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
