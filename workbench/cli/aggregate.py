"""`workbench analyze LOGS... --aggregate [--ray [ADDRESS]] [--json]`: request logs analysed at
scale (workbench/analysis/aggregate.py, docs/logs.md). stdout carries the report (one JSON object
with --json, else a table per cause); the progress bar and Ray's own messages go to stderr."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import WorkbenchError
from .output import print_json

# Options of the single-session analysis that the aggregate does not take (it renders every
# session with its template's own settings).
_REFUSED = (("--fix", "fix"), ("--projection", "projection"), ("--prefill", "prefill"), ("--vars", "vars"),
            ("--context-window", "context_window"), ("--reserve", "reserve"))


def cmd_aggregate(args: argparse.Namespace) -> int:
    for flag, attr in _REFUSED:
        if getattr(args, attr, None):
            raise WorkbenchError(f"{flag} does not go with --aggregate",
                                 hint="--aggregate renders each logged request with its template's own settings")
    from ..analysis.aggregate import aggregate
    report = aggregate(args.session, ray=args.ray, template=args.template, tokenizer=args.tokenizer,
                       progress=not args.no_progress, strict=args.strict)
    data = report.to_json()
    if args.json:
        print_json(data)
    else:
        write_table(data)
    return 0


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
        return
    provs = list(d["causes"][0]["cost"])
    out.write(f"\n{'cause':<28} {'sessions':>9} {'turns':>8} {'lost tokens':>13} {'share':>7}"
              + "".join(f" {p + ' $':>12}" for p in provs) + "\n")
    for c in d["causes"]:
        out.write(f"{c['code']:<28} {c['sessions']:>9,} {c['turns']:>8,} {c['lost_tokens']:>13,} {c['share']:>7.1%}"
                  + "".join(f" {c['cost'][p]:>12.4f}" for p in provs) + "\n")
        if c["top_templates"]:
            out.write("    templates: " + ", ".join(f"{t['template']} ({t['lost_tokens']:,})"
                                                    for t in c["top_templates"][:3]) + "\n")
        if c.get("top_clients"):
            out.write("    clients: " + ", ".join(f"{t['client']} ({t['lost_tokens']:,})"
                                                  for t in c["top_clients"][:3]) + "\n")
        for s in c["top_system_prompts"][:2]:
            out.write(f"    system {s['sha256'][:12]} ({s['lost_tokens']:,}): {s['preview']}\n")
    out.write(f"\n{'fix (estimated)':<32} {'kind':<7} {'recovers tokens':>16}  causes\n")
    for f in d["fixes"]:
        out.write(f"{f['fix']:<32} {f['kind']:<7} {f['recovered_tokens']:>16,}  {', '.join(f['causes'])}\n")
    out.write("(costs and recoveries are estimates; --json has every figure)\n")


def _bad(b: dict[str, Any]) -> str:
    return f"{b['file']}:{b['line']}: {b['problem']}"
