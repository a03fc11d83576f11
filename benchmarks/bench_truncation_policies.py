"""Truncation policies side by side over a 300-turn session that overflows a 16k window (issue 16).

Run:  .venv/bin/python benchmarks/bench_truncation_policies.py [--turns 300] [--window 16384]
          [--low-water 0.5] [--prefill-turns 151-170 | all | none] [--model tiny]

The session: the first --turns user turns of sample_sessions/bench_1000.json (its system message,
then user/assistant pairs; about 500 tokens a turn), qwen2.5 template and tokenizer, a window of
--window tokens (the template's reserve). Each policy (sliding, chunked, summary-slot, all with
--low-water) assembles every turn through one Session, so a truncated turn is refitted from the
previous one as a live client would send it.

Per policy:
  tokens sent        the prompt tokens of every turn
  prefix-stable      turns whose prompt starts with the whole previous prompt (the engine prefills
                     only the new tokens)
  cached, cost       what the vLLM, SGLang, OpenAI and Anthropic simulators report over the session
                     (presets as shipped; Anthropic with breakpoints after the system block and at
                     the end of each request: --breakpoints auto; turns 60 s apart; example prices)
  engine prefill     the local engine (synthetic `tiny` model, random weights, on this CPU): a real
                     forward pass per turn, reusing its radix-tree KV cache across the turns. The
                     whole session is too slow for a 2-core CPU under sliding (about 10 s per 16k
                     prompt), so by default turns 151-170 are prefilled, after turn 150 is prefilled
                     untimed to hold what the engine would hold; --prefill-turns all runs every turn.
                     The engine's tokens to prefill over the whole session are counted too: its radix
                     tree in simulated mode, which is the SGLang simulator's (page 1, unbounded).
                     Timed two ways: the forward passes alone (the engine's prefill_ms), and each
                     whole prefill() call (with gathering the reused KV and storing the new).
Then the ratios chunked / sliding and summary-slot / sliding of cached tokens per provider, and the
issue's bar: chunked caches at least 3x the tokens sliding does on vLLM and on Anthropic.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench import Assembler  # noqa: E402
from workbench.analysis.policies import PolicyRun, run_policy, with_policy  # noqa: E402
from workbench.sessions import parse_session  # noqa: E402
from workbench.truncation import STRATEGIES, TruncationPolicy  # noqa: E402

PROVIDERS = ("vllm", "sglang", "openai", "anthropic")
BAR = 3.0          # chunked / sliding cached tokens, on vLLM and Anthropic


def requests(turns: int) -> list[dict]:
    data = json.loads((ROOT / "sample_sessions" / "bench_1000.json").read_text("utf-8"))
    msgs = data["messages"][:2 * turns]           # the system message, then `turns` user messages
    session = parse_session({"format": data["format"], "messages": msgs, "tools": data.get("tools") or []})
    if len(session.turns) != turns:
        raise SystemExit(f"bench_1000.json has {len(session.turns)} turns in its first {len(msgs)} messages, "
                         f"not {turns}")
    return list(session.turns)


def turn_range(text: str, turns: int) -> range:
    if text == "all":
        return range(1, turns + 1)
    if text == "none":
        return range(0)
    lo, _, hi = text.partition("-")
    first, last = int(lo), int(hi or lo)
    if not 1 <= first <= last <= turns:
        raise SystemExit(f"--prefill-turns {text}: turns are 1..{turns}")
    return range(first, last + 1)


def prefill(runs: list[PolicyRun], turns: range, model: str, vocab_size: int) -> dict[str, dict[str, float]]:
    """Each policy's prompts for `turns` through one engine, the turn before them held first."""
    import numpy as np

    from workbench.engine.engine import Engine

    engine = Engine.load(model, vocab_size=vocab_size)
    engine.prefill(np.arange(64, dtype=np.uint32))                 # the first forward pass warms up
    out = {}
    for r in runs:
        engine.clear()
        if turns.start > 1:
            engine.prefill(r.prompts[turns.start - 2].token_ids)   # what the engine holds before them
        before, ms, wall, reused = engine.processed_tokens, 0.0, 0.0, 0
        for k in turns:
            t0 = time.perf_counter()
            rep = engine.prefill(r.prompts[k - 1].token_ids)
            wall += time.perf_counter() - t0
            ms += rep.prefill_ms
            reused += rep.reused_tokens
        out[r.policy] = {"ms": ms, "wall": wall, "prefilled": engine.processed_tokens - before, "reused": reused,
                         "tokens": sum(len(r.prompts[k - 1].token_ids) for k in turns)}
    out["_model"] = {"label": engine.m.label, "device": engine.m.device}   # type: ignore[dict-item]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--window", type=int, default=16384)
    ap.add_argument("--low-water", type=float, default=0.5)
    ap.add_argument("--prefill-turns", default="151-170", help="FIRST-LAST, all, or none")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--breakpoints", choices=("explicit", "auto"), default="auto")
    args = ap.parse_args()

    reqs = requests(args.turns)
    base = Assembler(template="qwen2.5", context_window=args.window, cache=None,
                     truncation=TruncationPolicy(low_water=args.low_water))
    providers = dict.fromkeys(PROVIDERS)
    runs, assembly_s = [], {}
    for s in STRATEGIES:
        t0 = time.perf_counter()
        runs.append(run_policy(with_policy(base, s), reqs, providers, args.breakpoints))
        assembly_s[s] = time.perf_counter() - t0
    first = runs[0].truncated[0] if runs[0].truncated else None
    b = base.window(base.prepare(reqs[-1])[0])
    print(f"session: {args.turns} turns of bench_1000.json, qwen2.5; window {args.window:,} (input budget "
          f"{b.input_budget:,}); low water {args.low_water}; sliding first drops at turn {first}")
    print(f"{'policy':<13}{'truncated':>10}{'stable':>8}{'tokens sent':>13}"
          + "".join(f"{p + ' cached':>17}" for p in PROVIDERS) + f"{'assembly s':>12}")
    for r in runs:
        print(f"{r.policy:<13}{r.truncated_turns:>10}{r.prefix_stable_turns:>8}{r.tokens:>13,}"
              + "".join(f"{r.cached_tokens(p):>17,}" for p in PROVIDERS) + f"{assembly_s[r.policy]:>12.1f}")
    print(f"{'cost $ (example prices)':<44}" + "".join(f"{p:>17}" for p in PROVIDERS))
    for r in runs:
        print(f"{r.policy:<44}" + "".join(f"{r.simulation(p).total_cost:>17.4f}" for p in PROVIDERS))
    sliding = runs[0]
    print(f"{'cached tokens / sliding':<44}" + "".join(f"{p:>17}" for p in PROVIDERS))
    for r in runs[1:]:
        print(f"{r.policy:<44}" + "".join(f"{r.cached_tokens(p) / max(sliding.cached_tokens(p), 1):>16.2f}x"
                                          for p in PROVIDERS))
    chunked = runs[1]
    ratios = {p: chunked.cached_tokens(p) / max(sliding.cached_tokens(p), 1) for p in ("vllm", "anthropic")}
    met = all(v >= BAR for v in ratios.values())
    print(f"bar: chunked >= {BAR:g}x sliding cached tokens on vLLM and Anthropic: "
          + ", ".join(f"{p} {v:.2f}x" for p, v in ratios.items()) + (" -> met" if met else " -> NOT met"))

    print("engine tokens to prefill, whole session (its radix tree in simulated mode = the SGLang simulator): "
          + ", ".join(f"{r.policy} {r.tokens - r.cached_tokens('sglang'):,}" for r in runs))
    turns = turn_range(args.prefill_turns, args.turns)
    if not turns:
        return 0 if met else 1
    t0 = time.perf_counter()
    eng = prefill(runs, turns, args.model, base.tokenizer.vocab_size)
    model = eng.pop("_model")
    print(f"engine prefill, turns {turns.start}-{turns.stop - 1} ({len(turns)} turns; turn {turns.start - 1} held "
          f"first, untimed): {model['label']} on {model['device']}, {time.perf_counter() - t0:.0f} s in all")
    print(f"{'policy':<13}{'prompt tokens':>15}{'reused':>12}{'prefilled':>12}{'prefill s':>11}{'with KV s':>11}")
    for r in runs:
        e = eng[r.policy]
        print(f"{r.policy:<13}{e['tokens']:>15,}{e['reused']:>12,}{e['prefilled']:>12,}{e['ms'] / 1e3:>11.1f}"
              f"{e['wall']:>11.1f}")
    print("prefill s: the forward passes (the engine's prefill_ms); with KV s: each whole prefill() call, with "
          "gathering the reused KV from the radix tree and storing the new")
    s_ms = eng["sliding"]["ms"]
    print("prefill time / sliding: " + ", ".join(f"{r.policy} {eng[r.policy]['ms'] / s_ms:.2f}" for r in runs[1:]))
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
