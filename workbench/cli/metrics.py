"""`workbench metrics`: run a session's requests through one assembler session, print its metrics."""

from __future__ import annotations

import argparse
import sys

from ..sessions import load_session
from .options import build_assembler, common_options
from .output import print_json, safe


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
    cache = asm.cache.metrics() if asm.cache is not None else None
    if args.json:
        out = snap.to_json()
        if cache is not None:
            out["cache"] = {"hits": dict(cache.hits), "misses": dict(cache.misses), "hit_rate": dict(cache.hit_rate),
                            "faults": dict(cache.faults), "local_bytes": cache.local_bytes,
                            "redis_enabled": cache.redis_enabled}
        print_json(out)
    else:
        # The assembler's counters, then the prompt cache's tiers (hits per tier, faults, bytes).
        # Label values name templates and tokenizers, which may be files the user named.
        sys.stdout.write(safe(snap.prometheus_text(), layout=True))
        if cache is not None:
            sys.stdout.write(safe(cache.prometheus_text(), layout=True))
    return 0
