"""`workbench metrics`: run a session's requests through one assembler session, print its metrics."""

from __future__ import annotations

import argparse
import json
import sys

from ..sessions import load_session
from .render import build_assembler, common_options


def add_parsers(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("metrics", help="assembly metrics for a session, as Prometheus text (or --json)")
    m.add_argument("session", help="session file (JSON: a conversation or a log of requests)")
    m.add_argument("--cold", action="store_true", help="assemble every turn cold (no session reuse)")
    common_options(m, turn=False)
    m.set_defaults(func=cmd_metrics)


def cmd_metrics(args: argparse.Namespace) -> int:
    session = load_session(args.session)
    asm, prepare = build_assembler(session, args, cache=None if args.cold else "auto")
    s = asm.session()
    for turn in session.turns:
        (asm.assemble if args.cold else s.assemble)(prepare(turn))
    snap = asm.metrics.snapshot()
    if args.json:
        json.dump(snap.to_json(), sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(snap.prometheus_text())
    return 0
