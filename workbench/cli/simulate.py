"""`workbench simulate`: what a provider's prefix cache would report, turn by turn, and the cost.

Every turn is assembled through one session under the chosen truncation policy (`--truncation`),
so a truncated turn is refitted from the previous one as a live client would send it. With
`--truncation all` the policies run side by side: the JSON is the contract's object for the first
(sliding), with a `policies` list of each policy's totals.

`--provider` names a preset: a provider (`openai`, its default variant) or a dated variant
(`openai@gpt-5.6`); the output says which preset ran, the page it follows and the day it was checked.
`--model` names a catalog model (its template, tokenizer, window, provider preset and prices, each
option given still winning) or, as before, a model of the preset's list whose prices apply.
"""

from __future__ import annotations

import argparse
import sys

from ..analysis.policies import PolicyRun, compare_policies
from ..analysis.provider_params import ProviderParams
from ..catalog import ModelEntry, find
from ..errors import ProviderParamsError
from ..files import check_user_file
from ..sessions import load_session
from ..truncation import STRATEGIES
from . import options
from .options import announce, build_assembler, common_options, model_json
from .output import print_json, safe


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("simulate", help="provider prefix-cache simulation: cached tokens per turn and cost")
    s.add_argument("session", help="session file (JSON: a conversation or a log of requests)")
    s.add_argument("--provider", default=None,
                   help=f"a preset: {', '.join(ProviderParams.presets())} (provider@variant picks a dated rule "
                        "set; a plain name is the provider's default), or a preset in --params (default: the "
                        "--model's preset, else openai)")
    s.add_argument("--model", default=None,
                   help="a catalog model (`workbench models`: sets template, tokenizer, window, provider preset "
                        "and prices), or a model of the preset's list whose prices and minimums apply")
    s.add_argument("--params", metavar="FILE", default=None,
                   help="your provider presets (JSON, same shape as workbench/analysis/provider_params.json)")
    s.add_argument("--breakpoints", choices=("explicit", "auto"), default="explicit",
                   help="Anthropic cache_control: the session's own (explicit), or after the tools/system "
                        "block and at the end of each request (auto)")
    common_options(s, turn=False, compare_truncation=True, model=False)
    s.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    session = load_session(args.session)
    if args.params:       # read by provider_params.py; checked first, as every file a user names is
        check_user_file(args.params, cap=options.MAX_SETTINGS_BYTES, what="--params file")
    every = args.truncation == "all"
    strategies = STRATEGIES if every else (args.truncation,)
    entry = find(args.model) if args.model else None
    args.catalog_model = entry
    provider = args.provider or (entry.provider if entry is not None else "openai")
    params = _params(provider, entry, args.model, args.params)
    asm, prepare = build_assembler(session, argparse.Namespace(**{**vars(args), "truncation": strategies[0]}))
    announce(asm, entry)
    runs = compare_policies(asm, session.turns.map(prepare), {provider: params}, args.breakpoints, strategies)
    sim = runs[0].simulations[0]
    if args.json:
        out = {**sim.to_json(), "truncation": runs[0].policy, "model": model_json(entry)}
        if every:
            out["policies"] = [r.to_json() for r in runs]
        print_json(out)
        return 0
    o = sys.stdout
    if every:
        _side_by_side(runs, session.title, params)
        return 0
    why = f" ({safe(sim.why)})" if sim.why else ""
    o.write(f"{safe(session.title)}: {len(sim.turns)} turns · provider {safe(sim.provider)} ({safe(params.model)}) · "
            f"truncation "
            f"{runs[0].policy} · hit ratio {sim.hit_ratio:.1%}{why} · cost ${sim.total_cost:.4f} (example prices: "
            "check them)\n")
    o.write(f"{'turn':>4} {'tokens':>8} {'cached':>8} {'written':>8} {'cost $':>10}  why not more\n")
    for t in sim.turns:
        o.write(f"{t.turn:>4} {t.tokens:>8} {t.cached_tokens:>8} {t.cache_write_tokens:>8} {t.cost:>10.5f}  "
                f"{safe(t.why)}".rstrip() + "\n")
    o.write(f"{safe(params.citation)}\n")
    return 0


def _params(provider: str, entry: ModelEntry | None, model: str | None, path: str | None) -> ProviderParams:
    """The preset, with the prices of `--model`: a catalog model's price model where the preset
    lists it (another provider's preset keeps its own default model), else the name as given."""
    if entry is None:
        return ProviderParams.load(provider, {"model": model} if model else None, path=path)
    if entry.price_model is not None:
        try:
            return ProviderParams.load(provider, {"model": entry.price_model}, path=path)
        except ProviderParamsError:
            if provider == entry.provider:
                raise   # the catalog names a price model its own preset lacks: a bug worth seeing
    return ProviderParams.load(provider, path=path)


def _side_by_side(runs: tuple[PolicyRun, ...], title: str, params: ProviderParams) -> None:
    o = sys.stdout
    o.write(f"{safe(title)}: {len(runs[0].prompts)} turns · provider {safe(params.name)} ({safe(params.model)}) · "
            "each truncation "
            "policy (example prices: check them)\n")
    o.write(f"{'truncation':<13} {'truncated':>9} {'stable':>7} {'tokens':>11} {'cached':>11} {'hit':>6} "
            f"{'cost $':>10}\n")
    for r in runs:
        s = r.simulations[0]
        o.write(f"{r.policy:<13} {r.truncated_turns:>9} {r.prefix_stable_turns:>7} {r.tokens:>11,} "
                f"{r.cached_tokens(s.provider):>11,} {s.hit_ratio:>6.1%} {s.total_cost:>10.4f}\n")
    for r in runs:
        if r.simulations[0].why:
            o.write(f"{r.policy}: nothing cached: {safe(r.simulations[0].why)}\n")
    o.write("stable: turns whose prompt starts with the whole previous prompt (an engine prefills only the new "
            "tokens)\n")
    o.write(f"{safe(params.citation)}\n")
