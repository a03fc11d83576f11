"""`workbench semantic eval`: the semantic cache on a labelled set (the shipped one by default): per
category hit rate and precision, thresholds calibrated from the negatives, a threshold sweep."""

from __future__ import annotations

import argparse
import sys

from ..semantic.embedders import NAMES
from . import options
from .output import print_json


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("semantic", help="the context-aware semantic cache")
    ss = s.add_subparsers(dest="semantic_command", required=True)
    e = ss.add_parser("eval", help="evaluate on labelled pairs: per-category hit rate and precision, threshold sweep")
    e.add_argument("--dataset", metavar="FILE", default=None,
                   help="JSON lines, or a shipped set: eval (the default), heldout, heldout-dev, heldout-test")
    e.add_argument("--window", type=int, default=5, help="recent turns embedded with the current one (default 5)")
    e.add_argument("--thresholds", metavar="HIGH,LOW", default=None,
                   help="fixed thresholds instead of calibrating them from the negatives")
    e.add_argument("--min-precision", type=float, default=0.95, help="calibration: the precision to keep")
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
    th = options.thresholds(args.thresholds, "--thresholds")
    cases = load_dataset(args.dataset)
    out = evaluate(make_cache(args.embedder, args.window), cases, th, args.min_precision)
    if args.chart:
        from .._optional import require
        pio = require("plotly.io", "the sweep chart")
        fig = sweep_figure(out["sweep"], Thresholds(out["thresholds"]["high"], out["thresholds"]["low"]))
        pio.write_html(fig, args.chart, include_plotlyjs=True, full_html=True)   # self-contained: works offline
    if args.json:
        print_json(out)
        return 0
    o = sys.stdout
    t = out["thresholds"]
    o.write(f"{out['cases']} cases ({', '.join(out['languages'])}) · embedder {out['embedder']} · window "
            f"{out['window']} · thresholds high {t['high']} low {t['low']}"
            f"{' (calibrated from the data)' if t['calibrated'] else ''}\n")
    if t["calibrated"] and not t["precision_target_met"]:
        o.write(f"no thresholds reach precision {t['min_precision']:.0%} on this set: shown at the 95th percentile "
                f"of the negatives\n")
    o.write(f"{'category':<20} {'should':>6} {'cases':>6} {'hit rate':>9} {'accuracy':>9} {'precision':>10}\n")
    for name, c in out["categories"].items():
        prec = "-" if c["precision"] is None else f"{c['precision']:.2f}"
        o.write(f"{name:<20} {'hit' if c['should_hit'] else 'miss':>6} {c['cases']:>6} {c['hit_rate']:>9.2%} "
                f"{c['accuracy']:>9.2%} {prec:>10}\n")
    ov = out["overall"]
    precision = ov["precision"] if ov["precision"] is None else format(ov["precision"], ".2%")
    o.write(f"overall: hit rate {ov['hit_rate']:.2%}, precision {precision}, "
            f"recall {ov['recall']:.2%}; similarity alone at the high threshold: precision "
            f"{out['similarity_only_at_high']['precision']}, recall {out['similarity_only_at_high']['recall']:.2%}\n")
    return 0
