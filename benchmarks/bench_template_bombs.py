"""Hostile templates that loop without output, with and without the loop budget; honest templates on
long sessions, with the steps they take.

Run:  .venv/bin/python benchmarks/bench_template_bombs.py [--before] [--messages 1000,10000,100000]

Part 1, the bombs (issue 34, item 7): each is rendered under the default RenderLimits (the budget of
steps, workbench/templates/steps.py) and, with --before, under the limits of before this issue (no
budget: only the 10 s deadline stopped them). Printed: seconds to the refusal and what stopped it.

Part 2, honest renders: every shipped template on a generated session of N messages (alternating
turns, a tool call and its result in every fifth exchange; plain turns for a template that refuses
tool messages), with the steps it took, the input size the budget grows with, and the budget.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.errors import TemplateError, TemplateLimitError  # noqa: E402
from workbench.templates import RenderLimits, get_template, render, shipped_names  # noqa: E402
from workbench.templates.bounds import weight  # noqa: E402
from workbench.templates.steps import MAX_STEPS  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from test_template_loop_budget import TOOLS, _session  # noqa: E402  (the test's sessions: one generator)

BOMBS = {
    "nested empty range loops (the issue's)":
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "macro calling itself twice": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                                  "{{ f(40) }}",
    "map over a 30M-char string": "{{ ('x' * 30000000)|map('upper')|list|length }}",
    "cycler in a loop nest": "{% set c = cycler('a', 'b') %}{% for a in range(100000) %}{% for b in range(100000) %}"
                             "{% set x = c.next() %}{% endfor %}{% endfor %}",
}
BEFORE = RenderLimits(max_steps=MAX_STEPS, steps_per_input=None)   # no budget: the deadline alone


def bomb(source: str, limits: RenderLimits) -> tuple[float, str]:
    t0 = time.perf_counter()
    try:
        render(source, "bomb", [{"role": "user", "content": "hi"}], tools=None, add_generation_prompt=True,
               kwargs={}, limits=limits)
        what = "rendered"
    except TemplateLimitError as exc:
        text = str(exc)
        what = ("the step budget" if " steps (" in text else "the macro depth" if "nested more" in text
                else "the deadline" if "longer than" in text else text[:40])
    return time.perf_counter() - t0, what


def honest(name: str, n: int) -> str:
    t = get_template(name)
    kwargs = {**t.kwargs, "bos_token": t.bos_token or "", "eos_token": t.eos_token or ""}
    limits = RenderLimits(timeout_s=600, max_expansion=None)
    for tool_calls in (True, False):
        msgs, tools = _session(n, tool_calls=tool_calls), TOOLS if tool_calls else None
        t0 = time.perf_counter()
        try:
            out = render(t.source, name, msgs, tools=tools, add_generation_prompt=True, kwargs=kwargs, limits=limits)
        except TemplateLimitError as exc:
            return f"{name:15} {n:>8,}  refused: {exc.message[:80]}"
        except TemplateError:
            continue
        dt = time.perf_counter() - t0
        size = weight([msgs, tools, kwargs])
        allowed = limits.max_steps + int((limits.steps_per_input or 0) * size)
        return (f"{name:15} {n:>8,} {'tools' if tool_calls else 'plain':>6} {dt:8.2f} {out.steps:>11,} "
                f"{size:>12,} {allowed:>12,} {out.steps / size:6.3f}")
    return f"{name:15} {n:>8,}  renders neither session"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", action="store_true", help="also render each bomb without the budget (10 s each)")
    ap.add_argument("--messages", default="1000,10000,100000")
    args = ap.parse_args()
    print(f"{'bomb':40} {'with the budget':>27}" + (f"  {'before (deadline only)':>27}" if args.before else ""))
    for title, source in BOMBS.items():
        dt, what = bomb(source, RenderLimits())
        line = f"{title:40} {dt:7.3f} s, {what:17}"
        if args.before:
            dt0, what0 = bomb(source, BEFORE)
            line += f"  {dt0:7.3f} s, {what0:17}"
        print(line, flush=True)
    print()
    print(f"{'template':15} {'messages':>8} {'shape':>6} {'seconds':>8} {'steps':>11} {'input size':>12} "
          f"{'budget':>12} {'steps/size':>6}")
    for n in (int(x) for x in args.messages.split(",")):
        for name in shipped_names():
            print(honest(name, n), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
