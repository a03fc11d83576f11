"""Provider prefix-cache simulators: tokens per second over a recorded-like 100-turn session.

Run:  .venv/bin/python benchmarks/bench_providers.py [--turns 100] [--final-tokens 60000] [--runs 5]

The session is synthetic: one growing array of token ids (a 2,000-token system prompt, then about
580 tokens more each turn, reaching --final-tokens), every turn a prefix of it; every tenth turn edits
one token in the newer half of the history first, so the caches break and recover as they would
after an edited message. Anthropic turns carry two breakpoints (end of system, end of prompt) and
one block boundary per turn (each turn adds one message). Turns are 60 s apart (the default), so
nothing expires.

Timed: simulate(turns, provider) from a fresh simulator, best and median of --runs. The target is
at least 5 million prompt tokens per second for each provider; two more rows run vLLM and SGLang
with a capacity small enough to evict.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.analysis import ProviderParams, TurnPrompt, simulate  # noqa: E402

TARGET_MTOK_S = 5.0
SYSTEM = 2_000


def session(turns: int, final: int, seed: int) -> list[TurnPrompt]:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 150_000, final, dtype=np.uint32)
    out, ends = [], [SYSTEM]
    for k in range(1, turns + 1):
        n = SYSTEM + (final - SYSTEM) * k // turns
        if k % 10 == 0:
            i = int(rng.integers(n // 2, n))
            base[i] = (int(base[i]) + 1) % 150_000
        ends.append(n)                      # each turn adds one message: its end is a block boundary
        out.append(TurnPrompt(base[:n].copy(), breakpoints=(SYSTEM, n), block_ends=tuple(ends)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--final-tokens", type=int, default=60_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    turns = session(args.turns, args.final_tokens, args.seed)
    total = sum(len(t.token_ids) for t in turns)
    rows = [(name, name, ProviderParams.load(name)) for name in ("openai", "anthropic", "vllm", "sglang")]
    rows += [("vllm (2,000 blocks)", "vllm", ProviderParams.load("vllm", overrides={"capacity_blocks": 2000})),
             ("sglang (32k tokens)", "sglang", ProviderParams.load("sglang", overrides={"capacity_tokens": 32_000}))]

    print(f"session: {len(turns)} turns, {total:,} prompt tokens, last prompt {len(turns[-1].token_ids):,} tokens")
    print(f"{'provider':<22}{'tokens':>12}{'best s':>10}{'median s':>10}{'Mtok/s':>9}{'hit ratio':>11}")
    slow = []
    for label, provider, params in rows:
        simulate(turns[:3], provider, params)                     # warm-up
        times, sim = [], None
        for _ in range(args.runs):
            t0 = time.perf_counter()
            sim = simulate(turns, provider, params)
            times.append(time.perf_counter() - t0)
        assert sim is not None
        best = min(times)
        rate = total / best / 1e6
        if rate < TARGET_MTOK_S:
            slow.append(label)
        print(f"{label:<22}{total:>12,}{best:>10.4f}{statistics.median(times):>10.4f}{rate:>9.1f}"
              f"{sim.hit_ratio:>11.3f}")
    print(f"target: >= {TARGET_MTOK_S:g} Mtok/s per provider: "
          + ("met" if not slow else f"missed by {', '.join(slow)}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
