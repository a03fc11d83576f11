"""`workbench semantic eval`: the semantic cache on a labelled set (the shipped one by default),
scored with the configured thresholds (or ones calibrated on another set, `--calibrate-on`):
precision, recall, hit rate and saved calls per category and language, each with a bootstrap
interval, beside similarity alone; and a threshold sweep."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from ..errors import WorkbenchError
from ..semantic.bootstrap import METRICS, Costs
from ..semantic.embedders import NAMES
from . import options
from .output import print_json


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("semantic", help="the context-aware semantic cache")
    ss = s.add_subparsers(dest="semantic_command", required=True)
    e = ss.add_parser("eval", help="evaluate on labelled pairs: per-category hit rate and precision, threshold sweep")
    e.add_argument("--dataset", metavar="FILE", default=None,
                   help="JSON lines, or a shipped set: eval (the default), heldout, heldout-dev, heldout-test, dev2")
    e.add_argument("--window", type=int, default=5, help="recent turns embedded with the current one (default 5)")
    e.add_argument("--thresholds", metavar="HIGH,LOW", default=None,
                   help="score with these thresholds (default: the cache's own for the embedder)")
    e.add_argument("--calibrate-on", metavar="DEV", default=None,
                   help="calibrate the thresholds on DEV (a set, as --dataset), then score --dataset with them; "
                        "refused when DEV shares cases or scenarios with --dataset")
    e.add_argument("--min-precision", type=float, default=0.95, help="calibration: the precision to keep")
    e.add_argument("--false-hit-cost", type=float, default=3.0, metavar="CALLS",
                   help="saved-cost estimate: what a wrong answer served costs, in model calls (default 3)")
    e.add_argument("--cost-per-call", type=float, default=None, metavar="PRICE",
                   help="saved-cost estimate: the price of one call, to show money saved per 1,000 lookups")
    e.add_argument("--embedder", choices=NAMES, default=None,
                   help="use: USE multilingual v3 (the default where installed); minilm: all-MiniLM-L6-v2; "
                        "hashing: character n-grams, no model")
    e.add_argument("--chart", metavar="FILE.html", default=None, help="write the sweep as a Plotly chart")
    e.add_argument("--json", action="store_true", help="print the report as one JSON object")
    e.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    from ..semantic.cache import Thresholds
    from ..semantic.evaluate import evaluate, load_dataset, make_cache, sweep_figure

    options.at_least(args.window, 0, "--window")
    options.fraction(args.min_precision, "--min-precision")
    options.non_negative(args.false_hit_cost, "--false-hit-cost")
    options.non_negative(args.cost_per_call, "--cost-per-call")
    th = options.thresholds(args.thresholds, "--thresholds")
    if th is not None and args.calibrate_on is not None:
        raise WorkbenchError("--thresholds and --calibrate-on exclude each other",
                             hint="--thresholds fixes them; --calibrate-on DEV finds them on DEV")
    cases = load_dataset(args.dataset)
    dev = None if args.calibrate_on is None else load_dataset(args.calibrate_on)
    out = evaluate(make_cache(args.embedder, args.window), cases, th, args.min_precision, calibrate_on=dev,
                   costs=Costs(args.false_hit_cost, args.cost_per_call))
    if args.chart:
        from .._optional import require
        pio = require("plotly.io", "the sweep chart")
        fig = sweep_figure(out["sweep"], Thresholds(out["thresholds"]["high"], out["thresholds"]["low"]))
        pio.write_html(fig, args.chart, include_plotlyjs=True, full_html=True)   # self-contained: works offline
    if args.json:
        print_json(out)
    else:
        write_report(out, args, sys.stdout)
    return 0


def write_report(out: dict[str, Any], args: argparse.Namespace, o: TextIO) -> None:
    t = out["thresholds"]
    how = {"configured": "the cache's own", "given": "given",
           "calibrated": f"calibrated on {args.calibrate_on} at precision {t['min_precision']:.0%}"}[t["source"]]
    o.write(f"{out['cases']} cases ({', '.join(out['languages'])}) · embedder {out['embedder']} · window "
            f"{out['window']} · thresholds high {t['high']} low {t['low']} ({how})\n")
    if t["calibrated"] and not t["precision_target_met"]:
        o.write(f"no thresholds reach precision {t['min_precision']:.0%} on {args.calibrate_on}: the pair with the "
                f"best precision there\n")
    sc = out["saved_cost"]
    o.write(f"each figure: value [95% interval, {out['bootstrap']['resamples']} resamples by scenario]; second line: "
            f"similarity alone (hit iff similarity >= high). saved/1k: calls saved per 1,000 lookups, a false hit "
            f"costing {sc['false_hit_cost']:g} (pays above precision {sc['break_even_precision']:.0%})\n")
    o.write(f"{'group':<22}{'should':>6}{'cases':>6}  " + "".join(f"{h:<20}" for h in ("precision", "recall",
                                                                                     "hit rate")) + "saved/1k\n")
    f = out["figures"]
    rows = [("overall", f["overall"])] + [(k, v) for kind in ("by_category", "by_language", "by_category_language")
                                          for k, v in f[kind].items()]
    for name, row in rows:
        # where a hit is right, and where any hit is a false one
        cat = out["categories"].get(name.split("/")[0])
        should = "" if cat is None else "hit" if cat["should_hit"] else "miss"
        for rule, label, n in (("rules", name, str(row["cases"])), ("similarity_only", "  similarity alone", "")):
            cells = "".join(_cell(row[rule][m], m) for m in METRICS)
            o.write(f"{label:<22}{should if n else '':>6}{n:>6}  {cells}".rstrip() + "\n")
    if sc["cost_per_call"] is not None:
        money = f["overall"]["rules"]["money_saved_per_1000"]
        o.write(f"at {sc['cost_per_call']:g} per call, the rules save {_cell(money, 'money').strip()} "
                f"per 1,000 lookups\n")


def _cell(fig: dict[str, float | None], metric: str) -> str:
    """`0.92 [0.85–0.98]`, or `-` when the figure is undefined (no hits: no precision)."""
    if fig["value"] is None:
        return f"{'-':<20}"
    fmt = {"saved_per_1000": "{:+.0f}", "money": "{:+.2f}"}.get(metric, "{:.2f}")
    span = "" if fig["low"] is None else f" [{fmt.format(fig['low'])}–{fmt.format(fig['high'])}]"
    return f"{fmt.format(fig['value']) + span:<20}"
