"""The one-click fixes' before/after table over sample_sessions/ (docs/caching.md, "One-click
fixes"): for every sample session and every fix that changes something there, the tokens reused
over the session, the append-only turns, each provider's cached tokens and cost (Anthropic with
`--breakpoints auto`: the samples carry no cache_control of their own), and the local
engine's prefill time of every turn (a real forward pass; the engine starts empty for each column
and keeps what earlier turns left). The fixes with nothing to fix are listed with their notes.

Run:  .venv/bin/python benchmarks/bench_fixes.py [--engine tiny] [--skip bench_1000.json]
      .venv/bin/python benchmarks/bench_fixes.py --engine gemma3-270m --only timestamp_system.json \
          --template gemma3 --tokenizer MODEL   (the model's own vocabulary: workbench.engine.models)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The template each sample is measured with: the default, or the family its cause needs.
TEMPLATES = {"coding_corrections.json": "qwen3", "openai_minimal.json": "gpt-oss"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="tiny", help="model for the prefill times ('' for none)")
    ap.add_argument("--only", nargs="*", default=None, help="session file names")
    ap.add_argument("--skip", nargs="*", default=["bench_1000.json"])
    ap.add_argument("--template", default=None, help="one template for every session")
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--repeats", type=int, default=5, help="runs per column; each turn keeps its fastest prefill")
    args = ap.parse_args()

    from workbench import Assembler
    from workbench.analysis.fixes import FIXES, apply_fixes, measure
    from workbench.errors import FixNotApplicable
    from workbench.sessions import load_session

    tok = args.tokenizer
    if args.engine and args.engine != "tiny" and tok is None:
        from workbench.engine.models import model_tokenizer
        tok = model_tokenizer(args.engine)
    print("| session | template | fix | reused tokens | append-only turns | vLLM cached | Anthropic cached "
          "| OpenAI cached | Anthropic cost | prefill (" + (args.engine or "none") + ") |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    notes: list[str] = []
    for path in sorted((ROOT / "sample_sessions").glob("*.json")):
        if (args.only and path.name not in args.only) or path.name in args.skip:
            continue
        template = args.template or TEMPLATES.get(path.name, "qwen2.5")
        raw = load_session(path).raw
        cw = raw.get("context_window")    # the session's own window (rag_long: 128k), as the CLI reads it
        asm = Assembler(template=template, tokenizer=tok, context_window=cw if isinstance(cw, int) else None)
        for name in FIXES:
            try:
                out = apply_fixes(raw, [name], asm).outcomes[0]
            except FixNotApplicable as exc:
                notes.append(f"{path.name} · {name}: {exc}")
                continue
            if not out.changed:
                notes.append(f"{path.name} · {name}: {out.note}")
                continue
            t0 = time.perf_counter()
            m = measure(asm, raw, [name], engine=args.engine or None, repeats=args.repeats, breakpoints="auto")
            print(row(path.stem, template, name, m.before.totals(), m.after.totals(), args.engine), flush=True)
            notes.append(f"{path.name} · {name}: measured in {time.perf_counter() - t0:.1f} s: {out.note}")
    print()
    for n in notes:
        print(f"- {n}")


def row(session: str, template: str, fix: str, b: dict, a: dict, engine: str) -> str:
    def pair(key: str, sub: str | None = None, fmt: str = "{:,}") -> str:
        x, y = (b[key], a[key]) if sub is None else (b[key][sub], a[key][sub])
        return f"{fmt.format(x)} → {fmt.format(y)}"
    pre = f"{pair('engine_prefilled_tokens')} tokens, {pair('prefill_ms', fmt='{:,.0f}')} ms" if engine else "-"
    return (f"| {session} | {template} | {fix} | {pair('reused_tokens')} of {b['tokens']:,} → {a['tokens']:,} "
            f"| {pair('append_only_turns')} of {b['turns'] - 1} | {pair('cached_tokens', 'vllm')} "
            f"| {pair('cached_tokens', 'anthropic')} | {pair('cached_tokens', 'openai')} "
            f"| {pair('cost', 'anthropic', '${:.4f}')} | {pre} |")


if __name__ == "__main__":
    main()
