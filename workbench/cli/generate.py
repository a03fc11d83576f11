"""`workbench generate SESSION`: the next assistant reply to a turn on an engine, and what the
engine's KV cache reused: what the app's and the notebook's Run tab do, by the same code
(engine/next_reply.py), so that `--json` prints every figure the tab shows (issue 33).

`--turns N` generates for the N turns up to `--turn` (default the last) one after another on one
engine, each turn's request as the session file has it: from the second on, the engine holds the
previous prompt and the reply it generated, and the report says how much of the new prompt that
covers and where they part (the recorded reply in the file, not the generated one, follows the
previous prompt, so the reuse stops at the reply). In the tab: open the session cut at the first of
those turns, Generate, add the next turn's messages, Generate again.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from ..engine.next_reply import (
    DEFAULT_MAX_NEW,
    EMPTY_REPLY,
    MAX_NEW_LIMIT,
    SYNTHETIC_WARNING,
    Runner,
    RunOutcome,
    figures_parts,
    headline_parts,
    job_for,
    plain,
    reuse_parts,
)
from ..errors import WorkbenchError
from ..sessions import load_session
from ..templates import DEFAULT_TEMPLATE
from .options import announce, at_least, build_assembler, common_options
from .output import SafeText, print_json


def add_parsers(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser("generate", help="the next assistant reply to a turn on an engine (the Run tab), and the KV "
                                        "cache it reused")
    p.add_argument("session", help="session file (JSON: a conversation or a log of requests)")
    engine = p.add_mutually_exclusive_group()
    # default None, not "tiny": argparse takes a value equal to the default for no value, and would let
    # `--model tiny --remote URL` through
    engine.add_argument("--model", default=None,
                        help="the local engine: tiny (synthetic, random weights), gemma3-270m (a real base model, "
                             "offline package), a model folder or a .gguf file (default tiny)")
    engine.add_argument("--remote", metavar="URL", default=None,
                        help="an OpenAI-compatible server instead (vLLM, SGLang, workbench serve-engine): its "
                             "/v1/completions, and its cached_tokens as the reuse")
    p.add_argument("--max-new-tokens", type=int, default=DEFAULT_MAX_NEW,
                   help=f"most tokens the reply may have, from 1 to {MAX_NEW_LIMIT} (default {DEFAULT_MAX_NEW})")
    p.add_argument("--turns", type=int, default=1,
                   help="generate for this many turns up to --turn, in order, on one engine: each later one "
                        "reports the reuse of what the engine held (default 1)")
    common_options(p, model=False)
    p.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    at_least(args.turns, 1, "--turns")
    session = load_session(args.session)
    last = len(session.turns) if args.turn is None else args.turn
    session.turn(last)                               # a turn out of range says which turns exist
    first = last - args.turns + 1
    if first < 1:
        raise WorkbenchError(f"--turns {args.turns} reaches before turn 1 (turn {last} is the last one asked for)",
                             hint=f"use --turns between 1 and {last}")
    asm, prepare = build_assembler(session, args)
    announce(asm, None)
    template = args.template or DEFAULT_TEMPLATE     # the name as chosen, as the tab's template picker holds it
    spec = args.remote or args.model or "tiny"
    runner = Runner()
    outcomes = [runner.run(job_for(k, prepare(session.turn(k)), asm, template), spec, args.max_new_tokens)
                for k in range(first, last + 1)]
    if args.json:
        print_json(outcomes[0].to_json() if len(outcomes) == 1 else {"generations": [o.to_json() for o in outcomes]})
        return 0
    for k, o in enumerate(outcomes):
        if k:
            sys.stdout.write("\n")
        write_report(o, session.title or Path(args.session).name)
    return 0


def write_report(o: RunOutcome, title: str, out: Any = None) -> None:
    """The tab's report as text: the same sentences, one paragraph a line."""
    out = SafeText(out or sys.stdout)      # the reply and the turn's text come from the data
    out.write(f"{title}: {plain(headline_parts(o))}\n")
    for line in (o.note, SYNTHETIC_WARNING if o.synthetic else ""):
        if line:
            out.write(line + "\n")
    out.write("reply:\n" + textwrap.indent(o.text or EMPTY_REPLY, "  ", lambda _line: True) + "\n")
    out.write(plain(figures_parts(o)) + "\n")
    out.write(plain(reuse_parts(o)) + "\n")
