"""`workbench semantic eval`: the semantic cache on a labelled set (the shipped one by default),
scored with the configured thresholds (or ones calibrated on another set, `--calibrate-on`):
precision, recall, hit rate and saved calls per category and language, each with a bootstrap
interval, beside similarity alone; and a threshold sweep.

`workbench semantic lookup SESSION`: what the app's Semantic tab shows for a turn: the earlier turns
replayed into a semantic cache and the turn looked up (ui/semantic_replay.py), printed as the dict
the tab draws (ui/semantic_panel.py `semantic_view`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from ..errors import WorkbenchError
from ..semantic.bootstrap import METRICS, Costs
from ..semantic.embedders import NAMES
from ..sessions import load_session
from . import options
from .options import announce, build_assembler, catalog_entry, common_options
from .output import SafeText, print_json


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
    lk = ss.add_parser("lookup", help="look a session's turn up in a semantic cache of its earlier turns, as the "
                                      "app's Semantic tab does")
    lk.add_argument("session", help="session file (JSON: a conversation or a log of requests)")
    lk.add_argument("--embedder", default=None, metavar="NAME",
                    help=f"{', '.join(NAMES)} (default: the app's: use where installed, else minilm; hashing: "
                         f"character n-grams, no model)")
    lk.add_argument("--window", type=int, default=5, help="recent turns embedded with the current one (default 5)")
    common_options(lk)          # the assembler prepares each turn's messages (variables, cleaning)
    lk.set_defaults(func=cmd_lookup)


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


def cmd_lookup(args: argparse.Namespace) -> int:
    from ..semantic.cache import SemanticCache
    from ..semantic.embedders import MemoEmbedder, make_embedder
    from ..ui.semantic_panel import semantic_view
    from ..ui.semantic_replay import lookup_turn, nothing_earlier

    options.at_least(args.window, 0, "--window")
    session = load_session(args.session)
    count = len(session.turns)
    turn = count if args.turn is None else args.turn
    session.turn(turn)                          # a turn out of range: the error every command gives
    nothing_earlier(turn, count)                # refused before an embedder loads
    asm, prepare = build_assembler(session, args)
    announce(asm, catalog_entry(args))
    cache = SemanticCache(MemoEmbedder(make_embedder(args.embedder)), window=args.window)
    decision, pairs = lookup_turn(cache, asm, lambda k: prepare(session.turn(k)), count, turn)
    view = semantic_view(decision, cache, pairs)
    if args.json:
        print_json(view)
    else:
        write_lookup(view, session.title, count, sys.stdout)
    return 0


def write_lookup(v: dict[str, Any], title: str, count: int, o: TextIO) -> None:
    """The lookup in a few lines: the verdict and why, this turn's fingerprint, the neighbours."""
    o = SafeText(o)       # the reasons quote the turns' text
    from ..ui.semantic_panel import VERDICTS, decided_on, reason_sentence
    th = v["thresholds"]
    o.write(f"{title}: turn {v['turn']} of {count} · embedder {v['embedder']} · window {v['window']} · "
            f"thresholds high {th['high']} low {th['low']}\n")
    on = f" ({decided_on(v)})" if v["similarity"] is not None else ""
    o.write(f"{VERDICTS[v['verdict']]}{on}: {reason_sentence(v['reason'])}\n{v['this_turn']}\n")
    if not v["neighbours"]:
        return
    o.write(f"{'#':>2} {'turn':>5} {'similarity':>10}  {'fingerprints':<12} {'state':<7} its verdict\n")
    for nb in v["neighbours"]:
        o.write(f"{nb['rank']:>2} {nb['turn'] or '-':>5} {nb['similarity']:>10.3f}  {nb['fingerprints']:<12} "
                f"{nb['state']:<7} {VERDICTS[nb['verdict']]}\n")
        o.write(f"{'':>3}{reason_sentence(nb['reason'])}\n{'':>3}{nb['how_they_differ']}\n")


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
