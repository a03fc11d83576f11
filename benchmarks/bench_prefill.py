"""Prefill with and without prefix reuse, on the CPU, synthetic `tiny` architecture (random weights,
the qwen2.5 vocabulary), in one run: a 2,000-token prefix is prefilled and held; then the same
prefix plus 100 new tokens is prefilled (a) reusing the held prefix, (b) from scratch.

The reuse path must not re-run the prefix: that is checked by the engine's count of the tokens the
model ran over, not by the time.

Run:  .venv/bin/python benchmarks/bench_prefill.py [--model tiny] [--prefix 2000] [--new 100] [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--prefix", type=int, default=2000)
    ap.add_argument("--new", type=int, default=100)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default=None)
    args = ap.parse_args()

    import torch

    from workbench.engine.engine import Engine
    from workbench.tokenizers import get_tokenizer

    tok = get_tokenizer("qwen2.5")
    engine = Engine.load(args.model, vocab_size=tok.vocab_size, device=args.device, dtype=args.dtype)
    rng = np.random.default_rng(0)
    reuse_ms, full_ms, max_diff = [], [], 0.0
    counted = []
    for run in range(args.runs):
        ids = rng.integers(0, tok.vocab_size, args.prefix + args.new).astype(np.uint32)
        engine.clear()
        engine.prefill(ids[: args.prefix])                       # the previous turn: held
        before = engine.processed_tokens
        r = engine.prefill(ids)                                  # reuse
        counted.append(engine.processed_tokens - before)
        f = engine.prefill(ids, reuse=False)                     # from scratch, same engine, same run
        if run:                                                  # the first run warms up
            reuse_ms.append(r.prefill_ms)
            full_ms.append(f.prefill_ms)
        max_diff = max(max_diff, float((r.logits - f.logits).abs().max()))
    m = engine.m
    print(f"model: {m.label}; {m.device} {m.dtype}; {m.params / 1e6:.1f}M parameters; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"prefix {args.prefix} tokens held, then {args.new} new tokens; {args.runs - 1} timed runs (one warm-up)")
    print(f"  with reuse:    median {statistics.median(reuse_ms):8.1f} ms   min {min(reuse_ms):8.1f} ms")
    print(f"  without reuse: median {statistics.median(full_ms):8.1f} ms   min {min(full_ms):8.1f} ms")
    print(f"  ratio (without / with, medians): {statistics.median(full_ms) / statistics.median(reuse_ms):.1f}x")
    print(f"  tokens the model ran over on the reuse path: {sorted(set(counted))} (the {args.new} new ones only: "
          f"{'yes' if set(counted) == {args.new} else 'NO'})")
    print(f"  largest |logit difference| reuse vs full: {max_diff:.2e}")
    print(f"  KV per token {m.kv.bytes_per_token:,} bytes; held after the prompt: "
          f"{m.kv.bytes_for(args.prefix + args.new) / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
