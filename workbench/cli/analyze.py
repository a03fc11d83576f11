"""`workbench analyze`: per turn, how much of the engine's cache the prompt reuses, and why not more.
With `--fix NAME[,NAME]`, the session is analysed after those fixes (analysis/fixes.py), and each
turn carries the figures before them too."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..analysis.prefix import iter_analysis
from ..analysis.reconcile_session import TurnReconciler
from ..errors import WorkbenchError
from ..sessions import load_session
from .options import announce, build_assembler, catalog_entry, common_options, model_json, projection_option
from .output import print_json, safe


def add_parsers(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("analyze", help="prefix stability: where each turn's prompt diverges from the previous one")
    a.add_argument("session", nargs="+", metavar="SESSION",
                   help="session file (JSON: a conversation or a log of requests); with --aggregate, one or "
                        "more request logs (JSON lines, docs/logs.md)")
    a.add_argument("--aggregate", action="store_true",
                   help="read request logs (JSON lines), group them into sessions and report per cause code: "
                        "sessions and turns affected, tokens not reused, cost per provider, the fixes that "
                        "would recover most")
    a.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="with --aggregate: run the per-session analysis as a Ray Data job, on local Ray, or on "
                        "the cluster at ADDRESS (pip install 'prompt-workbench[ray]')")
    a.add_argument("--strict", action="store_true",
                   help="with --aggregate: the first bad log line is an error (default: counted and reported)")
    a.add_argument("--no-progress", action="store_true", help="with --aggregate: no progress bar on stderr")
    a.add_argument("--provider", metavar="NAME", default=None,
                   help="reconciliation: the provider (a preset: openai, openai@gpt-5.6, anthropic, vllm, sglang; or "
                        "workbench-engine) of the calls whose log line names none; its rules predict their cached "
                        "tokens, set beside the reported ones (docs/logs.md section 8)")
    a.add_argument("--reconcile-calls", metavar="FILE", default=None,
                   help="with --aggregate: write every reconciled call to FILE, one JSON line each")
    a.add_argument("--fix", metavar="NAME[,NAME]", default=None,
                   help="apply these one-click fixes first and show the figures before and after them: "
                        "sort-tool-keys, move-volatile, keep-reasoning, pin-date, merge-system, split-system, "
                        "projection")
    a.add_argument("--prefill", metavar="MODEL", default=None,
                   help="with --fix: also time the local engine's prefill of every turn, before and after "
                        "(a real forward pass; tiny, gemma3-270m)")
    common_options(a, turn=False)
    projection_option(a)
    a.set_defaults(func=cmd_analyze)


@contextmanager
def long_session_gc() -> Iterator[None]:
    """Fewer young-generation collections while a session is analysed. Each turn's request,
    conversation and cleaned conversation are containers of every message so far, and a collection
    that finds one still young walks all of it: with the default threshold (700 allocations,
    about two collections a turn) that was 5 of 20 ms a turn at 100,000 messages. At 50,000 a
    collection comes every hundred-odd turns and meets only the last turn's containers alive. The
    previous thresholds come back after (a caller in the same process keeps its own)."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def cmd_analyze(args: argparse.Namespace) -> int:
    entry = catalog_entry(args)
    if args.aggregate:
        from .aggregate import cmd_aggregate
        if entry is not None:   # the logs' sessions rendered with the model's template and tokenizer
            args.template = args.template or entry.template
            args.tokenizer = args.tokenizer or entry.tokenizer
        with long_session_gc():
            return cmd_aggregate(args)
    _single(args)
    with long_session_gc():
        return _analyze(args, entry)


def _analyze(args: argparse.Namespace, entry: Any) -> int:
    if args.projection:
        from .projection import cmd_analyze_projection
        return cmd_analyze_projection(args)
    session = load_session(args.session)
    asm, prepare = build_assembler(session, args)
    announce(asm, entry)
    if args.fix is not None:
        return _with_fixes(args, session, asm, prepare)
    # Each turn extends the previous one and is let go once its figures are taken: time and memory
    # follow the session's size (prefix.iter_analysis).
    rec = TurnReconciler(session.raw, getattr(args, "provider", None))
    rows: list[dict[str, Any]] = []
    shown: list[tuple[int, int, int, int | None, str | None, int | None, tuple[Any, ...]]] = []
    for t in iter_analysis(asm, session.turns.map(prepare)):
        rec.add(t)
        if args.json:
            rows.append(t.to_json())
        else:
            shown.append((t.turn, t.tokens, t.reused_tokens, t.first_divergence, t.divergence_kind, t.divergence_seq,
                          t.causes))
    count = len(rows) if args.json else len(shown)
    check = rec.finish(count)
    if args.json:
        for row, r in zip(rows, check.per_turn):
            if r is not None:
                row["reconciliation"] = r
        out: dict[str, Any] = {"turns": rows, "model": model_json(entry)}
        if check.per_turn_any or check.diagnostics:
            out["reconciliation_diagnostics"] = [b.to_json() for b in check.diagnostics]
        print_json(out)
        return 0
    stream = sys.stdout
    stream.write(f"{safe(session.title)}: {count} turns, template {safe(asm.template.name)}, tokenizer "
              f"{safe(asm.tokenizer.name)}\n")
    stream.write(f"{'turn':>4} {'tokens':>8} {'reused':>8} {'diverges at':>12}  cause\n")
    for turn, tokens, reused, first_divergence, kind, seq, causes in shown:
        at = "-" if first_divergence is None else f"{first_divergence}"
        where = f" ({kind}, seq {seq})" if first_divergence is not None else ""
        first = causes[0] if causes else None
        stream.write(f"{turn:>4} {tokens:>8} {reused:>8} {at:>12}  "
                  f"{safe(first.code + where) if first else ('append-only' if turn > 1 else '')}\n")
        for c in causes:
            stream.write(f"       {safe(c.code)}: {safe(c.message)}\n       advice: {safe(c.advice)}\n")
        r = check.per_turn[turn - 1] if turn - 1 < len(check.per_turn) else None
        if r is not None:
            stream.write(safe(f"       cache ({r['provider']}): reported {r['reported']['cached']} cached"
                           + (f", {r['reported']['written']} written" if r['reported']['written'] is not None else "")
                           + f"; predicted {r['predicted']['cached']} cached, {r['predicted']['written']} written: "
                           + r["class"] + (f" ({r['cause']})" if r["cause"] else "")) + "\n")
    for b in check.diagnostics:
        stream.write(f"usage: request {b.line}: {safe(b.problem)}\n")
    return 0


def _single(args: argparse.Namespace) -> None:
    """Without --aggregate: one session file, as before; the aggregate's options are refused."""
    if len(args.session) > 1:
        raise WorkbenchError(f"analyze takes one session file, got {len(args.session)}",
                             hint="add --aggregate to analyse request logs (JSON lines) together")
    for flag, given in (("--ray", args.ray is not None), ("--strict", args.strict),
                        ("--reconcile-calls", args.reconcile_calls is not None)):
        if given:
            raise WorkbenchError(f"{flag} goes with --aggregate", hint="add --aggregate, or leave out " + flag)
    args.session = args.session[0]


def _with_fixes(args: argparse.Namespace, session: Any, asm: Any, prepare: Any) -> int:
    from ..analysis.fixes import measure, parse_names
    names = parse_names(args.fix)            # an unknown name: one error line, before any work
    m = measure(asm, session.raw, names, engine=args.prefill, prepare=prepare)
    if args.json:
        print_json(fixed_json(m))
        return 0
    out = sys.stdout
    out.write(f"{safe(session.title)}: {len(m.after.turns)} turns, template {safe(asm.template.name)}, fixes "
              f"{', '.join(names)}\n")
    for o in m.applied.outcomes:
        out.write(f"  {o.fix}: {'applied' if o.changed else 'no change'}: {safe(o.note)}\n")
    prov = list(m.after.turns[0].cached_tokens) if m.after.turns else []
    head = "".join(f" {p + ' cached':>22}" for p in prov) + (f" {'prefill ms':>19}" if m.engine else "")
    out.write(f"{'turn':>4} {'tokens':>15} {'reused':>15}{head}\n")
    rows = [(str(b.turn), b, a) for b, a in zip(m.before.turns, m.after.turns)]
    for label, b, a in rows:
        out.write(_row(label, b.tokens, a.tokens, b.reused_tokens, a.reused_tokens, b, a, prov, m.engine))
    tb, ta = m.before.totals(), m.after.totals()
    out.write(_row("all", tb["tokens"], ta["tokens"], tb["reused_tokens"], ta["reused_tokens"], tb, ta, prov,
                   m.engine))
    for p in prov:     # a provider that cached nothing says why (the simulation's reason, as --json carries it)
        for label, side in (("before", m.before), ("after", m.after)):
            if side.why.get(p):
                out.write(f"{safe(p)} cached nothing {label}: {safe(side.why[p])}\n")
    out.write("(each cell: before -> after; cost per provider and each turn's reasons in --json)\n")
    return 0


def _row(label: str, tb: int, ta: int, rb: int, ra: int, b: Any, a: Any, prov: list[str], engine: str | None) -> str:
    def get(x: Any, key: str) -> Any:
        return x[key] if isinstance(x, dict) else getattr(x, key)

    def pair(x: Any, y: Any) -> str:
        return f"{x} -> {y}"

    cb, ca = get(b, "cached_tokens"), get(a, "cached_tokens")
    cells = "".join(f" {pair(cb[p], ca[p]):>22}" for p in prov)
    if engine:
        cells += f" {pair(round(get(b, 'prefill_ms')), round(get(a, 'prefill_ms'))):>19}"
    return f"{label:>4} {pair(tb, ta):>15} {pair(rb, ra):>15}{cells}\n"


def fixed_json(m: Any) -> dict[str, Any]:
    """SPEC 7.2: each turn as `analyze --json` prints it (after the fixes), with `before`; the
    fixes' outcomes, both columns per turn and the totals added."""
    turns = []
    for t, b, a in zip(m.after.analysis or m.after.turns, m.before.turns, m.after.turns):
        row = t.to_json() if hasattr(t, "causes") else {   # the projection: no analysis of its own
            **a.to_json(), "divergence_seq": None, "divergence_kind": None, "causes": []}
        row["before"] = {k: v for k, v in b.to_json().items() if k != "turn"}
        row["after"] = {k: v for k, v in a.to_json().items() if k != "turn"}
        turns.append(row)
    out = {"turns": turns, "fixes": [o.to_json() for o in m.applied.outcomes], "engine": m.engine,
           "totals": {"before": m.before.totals(), "after": m.after.totals()}}
    if m.before.why or m.after.why:      # provider -> why it cached nothing over the session
        out["hit_ratio_why"] = {"before": m.before.why, "after": m.after.why}
    return out
