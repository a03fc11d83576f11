"""`workbench render --projection` and `workbench analyze --projection`: the prefix-stable projection
(workbench/analysis/projection.py) of a session, turn by turn, next to the template's own rendering."""

from __future__ import annotations

import argparse
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..analysis.projection import ProjectedTurn, iter_project
from ..sessions import load_session
from .options import build_assembler
from .output import print_json, safe


def projected(args: argparse.Namespace, upto: int | None = None) -> tuple[Iterator[ProjectedTurn], str, Any]:
    """The session's turns projected, one at a time (up to turn `upto`, from 1; None: all), its title
    and the assembler. Each turn extends the one before; a caller keeps what it reports of each."""
    session = load_session(args.session)
    asm, prepare = build_assembler(session, args, cache=None)
    turns = session.turns.map(prepare)
    n = len(turns) if upto is None else upto
    if not 1 <= n <= len(turns):
        from ..errors import WorkbenchError
        raise WorkbenchError(f"--turn must be between 1 and {len(turns)}, got {n}")
    return iter_project(asm, (turns[i] for i in range(n))), session.title, asm


def projection_json(t: ProjectedTurn) -> dict[str, Any]:
    return {"turn": t.turn, "held_tokens": t.held_tokens, "reused_tokens": t.reused_tokens,
            "origins": list(t.origins), "template_tokens": t.template.total_tokens,
            "template_reused": t.template_reused, "departure": t.departure.to_json() if t.departure else None,
            "restart": t.restart}


def cmd_render_projection(args: argparse.Namespace, print_view: Callable[..., None]) -> int:
    """`print_view`: render.py's segment view (passed in: render.py calls this module, not the reverse)."""
    turns, _, _ = projected(args, args.turn)
    t = deque(turns, maxlen=1)[0]      # the last turn; the ones before are let go as they pass
    if args.json:
        print_json({**t.result.to_json(), "projection": projection_json(t)})
        return 0
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty()
                                        and not os.environ.get("NO_COLOR"))
    print_view(t.result, sys.stdout, colour=colour, full=args.full)
    sys.stdout.write(safe(_summary(t)) + "\n")
    return 0


def _summary(t: ProjectedTurn) -> str:
    if t.restart is not None:
        return f"projection, turn {t.turn}: the template's own rendering ({t.restart})"
    held = f"projection, turn {t.turn}: the first {t.held_tokens} tokens are what the engine held (the template's " \
           f"own rendering reuses {t.template_reused})"
    if t.departure is None:
        return held + "; identical to the template's rendering"
    d = t.departure
    return held + f"; departs from the template's rendering at token {d.token} (seq {d.seq}): {d.note}"


def cmd_analyze_projection(args: argparse.Namespace) -> int:
    turns, title, asm = projected(args)
    rows = [_analysis_row(t) for t in turns]       # each turn's row, then the turn is let go
    if args.json:
        print_json({"projection": True, "turns": rows})
        return 0
    out = sys.stdout
    out.write(f"{safe(title)}: {len(rows)} turns, projection of template {safe(asm.template.name)}, tokenizer "
              f"{safe(asm.tokenizer.name)}\n")
    out.write(f"{'turn':>4} {'tokens':>8} {'held':>8} {'reused':>8} {'template reused':>16}  "
              "departs from the template\n")
    for r in rows:
        d = r["departure"]
        dep = "restart: " + r["restart"] if r["restart"] else (
            f"at {d['token']} (seq {d['seq']}): {d['note']}" if d else "-")
        out.write(f"{r['turn']:>4} {r['tokens']:>8} {r['held_tokens']:>8} {r['reused_tokens']:>8} "
                  f"{r['template']['reused_tokens']:>16}  {safe(dep)}\n")
    return 0


def _analysis_row(t: ProjectedTurn) -> dict[str, Any]:
    """One turn in `analyze`'s shape (SPEC 7.3), for the projected prompts, plus the projection's own fields."""
    diverges = t.turn > 1 and t.reused_tokens < t.held_tokens
    seg = next((s for s in t.result.segments if s.start <= t.reused_tokens < s.end), None) if diverges else None
    return {"turn": t.turn, "tokens": t.result.total_tokens, "reused_tokens": t.reused_tokens,
            "held_tokens": t.held_tokens, "first_divergence": t.reused_tokens if diverges else None,
            "divergence_seq": seg.seq if seg else None, "divergence_kind": seg.kind if seg else None,
            "causes": [], "restart": t.restart,
            "departure": t.departure.to_json() if t.departure else None,
            "template": {"tokens": t.template.total_tokens, "reused_tokens": t.template_reused}}
