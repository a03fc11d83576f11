"""`workbench analyze`: per turn, how much of the engine's cache the prompt reuses, and why not more."""

from __future__ import annotations

import argparse
import sys

from ..analysis import analyze
from ..sessions import load_session
from .options import build_assembler, common_options, projection_option
from .output import print_json


def add_parsers(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("analyze", help="prefix stability: where each turn's prompt diverges from the previous one")
    a.add_argument("session", help="session file (JSON: a conversation or a log of requests)")
    common_options(a, turn=False)
    projection_option(a)
    a.set_defaults(func=cmd_analyze)


def cmd_analyze(args: argparse.Namespace) -> int:
    if args.projection:
        from .projection import cmd_analyze_projection
        return cmd_analyze_projection(args)
    session = load_session(args.session)
    asm, prepare = build_assembler(session, args)
    turns = analyze(asm, session.turns.map(prepare))   # each turn built when analyzed: linear memory
    if args.json:
        print_json({"turns": [t.to_json() for t in turns]})
        return 0
    out = sys.stdout
    out.write(f"{session.title}: {len(turns)} turns, template {asm.template.name}, tokenizer {asm.tokenizer.name}\n")
    out.write(f"{'turn':>4} {'tokens':>8} {'reused':>8} {'diverges at':>12}  cause\n")
    for t in turns:
        at = "-" if t.first_divergence is None else f"{t.first_divergence}"
        where = f" ({t.divergence_kind}, seq {t.divergence_seq})" if t.first_divergence is not None else ""
        first = t.causes[0] if t.causes else None
        out.write(f"{t.turn:>4} {t.tokens:>8} {t.reused_tokens:>8} {at:>12}  "
                  f"{first.code + where if first else ('append-only' if t.turn > 1 else '')}\n")
        for c in t.causes:
            out.write(f"       {c.code}: {c.message}\n       advice: {c.advice}\n")
    return 0
