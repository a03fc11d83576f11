"""`workbench analyze LOGS... --aggregate [--ray [ADDRESS]] [--json]`: request logs analysed at
scale (workbench/analysis/aggregate.py, docs/logs.md). stdout carries the report (one JSON object
with --json, else a table per cause); the progress bar and Ray's own messages go to stderr."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import WorkbenchError
from ..templates import DEFAULT_TEMPLATE, get_template
from ..templates.arguments import template_arguments
from .options import template_args
from .output import print_json, safe

# Options of the single-session analysis that the aggregate does not take (it renders every
# session with its template's own settings; `--template-arg` is the exception: the arguments a
# server passes every request, given once for all of them).
_REFUSED = (("--fix", "fix"), ("--projection", "projection"), ("--prefill", "prefill"), ("--vars", "vars"),
            ("--context-window", "context_window"), ("--reserve", "reserve"))


def cmd_aggregate(args: argparse.Namespace) -> int:
    for flag, attr in _REFUSED:
        if getattr(args, attr, None):
            raise WorkbenchError(f"{flag} does not go with --aggregate",
                                 hint="--aggregate renders each logged request with its template's own settings")
    from ..analysis.aggregate import aggregate
    kwargs = template_args(getattr(args, "template_args", None))
    if kwargs:
        unused_arguments(args.template or DEFAULT_TEMPLATE, kwargs)
    calls = getattr(args, "reconcile_calls", None)
    report = aggregate(args.session, ray=args.ray, template=args.template, tokenizer=args.tokenizer,
                       progress=not args.no_progress, strict=args.strict, provider=getattr(args, "provider", None),
                       calls=calls is not None, template_args=kwargs)
    data = report.to_json()
    if calls is not None:
        write_calls(calls, report.call_rows())
    if args.json:
        print_json(data)
    else:
        write_table(data)
    return 0


def unused_arguments(template: str, kwargs: dict[str, Any]) -> None:
    """The `template_arg_unused` warning of the other commands, for the default template (the one
    the lines that name none render with; a line naming another gets the arguments too)."""
    read = template_arguments(get_template(template).source)
    for key in sorted(set(kwargs) - set(read)):
        print(f"warning: template_arg_unused: the template {safe(repr(template))} does not read {key!r} "
              f"(it reads: {', '.join(read) or 'no arguments'})", file=sys.stderr)


def write_calls(path: str, rows: list[dict[str, Any]]) -> None:
    """--reconcile-calls FILE: one JSON line per reconciled call, by file and line."""
    import json
    try:
        with open(path, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise WorkbenchError(f"cannot write {path}: {exc.strerror}", hint="check the path") from None


def write_reconciliation(d: dict[str, Any]) -> None:
    out = sys.stdout
    r = d["reconciliation"]
    if not r["with_usage"] and not r["diagnostics"]:
        return
    rf = r["rewrite_factor"]["overall"]
    out.write(f"\nreconciliation: {r['with_usage']:,} of {r['calls']:,} calls reported usage"
              + (f"; re-write factor {rf:.2f}x" if rf is not None else "") + "\n")
    out.write(f"{'class':<20} {'calls':>8} {'tokens':>12} {'cost $':>12}\n")
    for name, c in r["classes"].items():
        if c["calls"]:
            cost = "-" if c["cost"] is None else f"{c['cost']:.4f}"
            out.write(f"{name:<20} {c['calls']:>8,} {c['tokens']:>12,} {cost:>12}\n")
            if name != "match":
                out.write(f"    {r['advice'][name]}\n")
    for u in r["unexplained"][:5]:
        out.write(f"    unexplained: {safe(u['file'])}:{u['line']} ({safe(u['provider'])}): reported "
                  f"{u['reported']['cached']}, predicted {u['predicted']['cached']}\n")
    if r["diagnostics"]:
        out.write(f"usage diagnostics: {r['diagnostic_count']:,} (first: {_bad(r['diagnostics'][0])})\n")


def write_table(d: dict[str, Any]) -> None:
    out = sys.stdout
    r = d["runner"]
    out.write(f"{d['requests']:,} requests, {d['sessions']:,} sessions, {d['turns']:,} turns "
              f"({r['mode']}, {r['workers']} worker{'s' if r['workers'] != 1 else ''}, {r['seconds']:.1f} s)\n")
    held = d["held_tokens"]
    pct = f" ({d['lost_tokens'] / held:.1%} of what the engine held)" if held else ""
    out.write(f"tokens sent {d['tokens']:,}; engine held {held:,}; reused {d['reused_tokens']:,}; "
              f"lost {d['lost_tokens']:,}{pct}\n")
    if d["bad_lines"]:
        out.write(f"bad lines: {d['bad_lines']:,} (first: {_bad(d['diagnostics'][0])})\n")
    if not d["causes"]:
        out.write("no turn lost any of what the engine held: every session is append-only\n")
        write_reconciliation(d)
        return
    provs = list(d["causes"][0]["cost"])
    out.write(f"\n{'cause':<28} {'sessions':>9} {'turns':>8} {'lost tokens':>13} {'share':>7}"
              + "".join(f" {p + ' $':>12}" for p in provs) + "\n")
    for c in d["causes"]:
        out.write(f"{c['code']:<28} {c['sessions']:>9,} {c['turns']:>8,} {c['lost_tokens']:>13,} {c['share']:>7.1%}"
                  + "".join(f" {c['cost'][p]:>12.4f}" for p in provs) + "\n")
        # Template names, clients and system prompts are the logs' own text: shown as data.
        if c["top_templates"]:
            out.write("    templates: " + ", ".join(f"{safe(t['template'])} ({t['lost_tokens']:,})"
                                                    for t in c["top_templates"][:3]) + "\n")
        if c.get("top_clients"):
            out.write("    clients: " + ", ".join(f"{safe(t['client'])} ({t['lost_tokens']:,})"
                                                  for t in c["top_clients"][:3]) + "\n")
        for s in c["top_system_prompts"][:2]:
            out.write(f"    system {s['sha256'][:12]} ({s['lost_tokens']:,}): {safe(s['preview'])}\n")
    out.write(f"\n{'fix (estimated)':<32} {'kind':<7} {'recovers tokens':>16}  causes\n")
    for f in d["fixes"]:
        out.write(f"{f['fix']:<32} {f['kind']:<7} {f['recovered_tokens']:>16,}  {', '.join(f['causes'])}\n")
    out.write("(costs and recoveries are estimates; --json has every figure)\n")
    write_reconciliation(d)


def _bad(b: dict[str, Any]) -> str:
    return safe(f"{b['file']}:{b['line']}: {b['problem']}")
