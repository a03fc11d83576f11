"""`workbench simulate`: what a provider's prefix cache would report, turn by turn, and the cost."""

from __future__ import annotations

import argparse
import sys

from ..analysis.provider_params import ProviderParams
from ..analysis.providers import PROVIDERS, simulate
from ..analysis.turn_prompts import turn_prompts
from ..sessions import load_session
from .options import build_assembler, common_options
from .output import print_json


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("simulate", help="provider prefix-cache simulation: cached tokens per turn and cost")
    s.add_argument("session", help="session file (JSON: a conversation or a log of requests)")
    s.add_argument("--provider", default="openai", help=f"{' | '.join(PROVIDERS)} or a preset in --params")
    s.add_argument("--model", default=None, help="model whose prices and minimums apply (a preset's model list)")
    s.add_argument("--params", metavar="FILE", default=None,
                   help="your provider presets (JSON, same shape as workbench/analysis/provider_params.json)")
    s.add_argument("--breakpoints", choices=("explicit", "auto"), default="explicit",
                   help="Anthropic cache_control: the session's own (explicit), or after the tools/system "
                        "block and at the end of each request (auto)")
    common_options(s, turn=False)
    s.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    session = load_session(args.session)
    asm, prepare = build_assembler(session, args)
    params = ProviderParams.load(args.provider, {"model": args.model} if args.model else None, path=args.params)
    sess = asm.session()
    turns = turn_prompts([sess.assemble(prepare(t)) for t in session.turns], args.breakpoints)
    sim = simulate(turns, args.provider, params)
    if args.json:
        print_json(sim.to_json())
        return 0
    o = sys.stdout
    o.write(f"{session.title}: {len(turns)} turns · provider {sim.provider} ({params.model}) · "
            f"hit ratio {sim.hit_ratio:.1%} · cost ${sim.total_cost:.4f} (example prices: check them)\n")
    o.write(f"{'turn':>4} {'tokens':>8} {'cached':>8} {'written':>8} {'cost $':>10}\n")
    for t in sim.turns:
        o.write(f"{t.turn:>4} {t.tokens:>8} {t.cached_tokens:>8} {t.cache_write_tokens:>8} {t.cost:>10.5f}\n")
    return 0
