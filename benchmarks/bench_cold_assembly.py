"""Cold assembly of the 1,000-message sample session vs transformers.apply_chat_template.

Run:  .venv/bin/python benchmarks/bench_cold_assembly.py [--runs 7] [--template qwen2.5]

Everything is measured side by side in one run on the same text:
  ours         Assembler.assemble(request): normalize, clean, render (tracked), segment, tokenize, budget, key
  ours encode  our tokenizer's own encode of the rendered text (one call, one thread)
  hf           transformers apply_chat_template(tokenize=True), same template, same vocabulary (Hugging Face
               fast tokenizer built from the same qwen.tiktoken file, as the Qwen models ship it)
  hf encode    that tokenizer's own encode of the rendered text
The issue's bar: ours − ours encode ≤ 10% of ours encode. Prints a table and checks the ids are equal.
Needs the `packs` and `test` extras (transformers).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench import Assembler, load_session  # noqa: E402
from workbench.tokenizers.packs import module_file  # noqa: E402
from workbench.tokenizers.registry import QWEN3_SPECIALS, QWEN_PAT  # noqa: E402


def hf_qwen_tokenizer():  # type: ignore[no-untyped-def]
    """A Qwen fast tokenizer built offline from qwen.tiktoken (pattern, NFC, byte-level, specials)."""
    from tokenizers import normalizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    path = module_file("qwen_tokenizer", "resources/qwen.tiktoken", dist="qwen-tokenizer", purpose="benchmark")
    core = TikTokenConverter(vocab_file=str(path), pattern=QWEN_PAT, extra_special_tokens=QWEN3_SPECIALS).converted()
    core.normalizer = normalizers.NFC()
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>")


def timed(fn, runs: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    out = fn()  # warm-up
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples), out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--template", default="qwen2.5")
    ap.add_argument("--session", default=str(ROOT / "sample_sessions" / "bench_1000.json"))
    args = ap.parse_args()

    session = load_session(args.session)
    request = session.turn(None)
    # cold: no prompt cache; a window the whole session fits in (no truncation)
    asm = Assembler(template=args.template, tokenizer="qwen3", cache=None, context_window=1_000_000, reserve=1000)
    conv, _ = asm.normalize(request)
    messages = conv.to_template_messages()

    # Ours and our encode are timed in alternation, so both see the same machine state;
    # the overhead is the median of the per-pair ratios.
    result = asm.assemble(request)
    text = result.text
    ids = asm.tokenizer.encode_with_specials(text)
    pairs = []
    for _ in range(args.runs):
        t = time.perf_counter()
        result = asm.assemble(request)
        a = time.perf_counter() - t
        t = time.perf_counter()
        ids = asm.tokenizer.encode_with_specials(text)
        pairs.append((a * 1e3, (time.perf_counter() - t) * 1e3))
    ours_ms = statistics.median(p[0] for p in pairs)
    enc_ms = statistics.median(p[1] for p in pairs)
    overhead = statistics.median((a - e) / e for a, e in pairs) * 100

    hf = hf_qwen_tokenizer()
    source = asm.template.source
    hf_ms, hf_ids = timed(lambda: hf.apply_chat_template(messages, chat_template=source, tokenize=True,
                                                         add_generation_prompt=True, return_dict=False), args.runs)
    hf_enc_ms, _ = timed(lambda: hf(text, add_special_tokens=False)["input_ids"], args.runs)
    if isinstance(hf_ids, dict) or hasattr(hf_ids, "keys"):
        hf_ids = hf_ids["input_ids"]
    same = (np.array_equal(np.asarray(hf_ids, dtype=np.uint32), result.token_ids)
            and np.array_equal(ids, result.token_ids))

    n_msgs, n_tok = len(messages), result.total_tokens
    print(f"session {Path(args.session).name}: {n_msgs} messages, {n_tok:,} tokens, {len(text):,} characters; "
          f"template {args.template}; {args.runs} runs, median; {os.cpu_count()} CPUs")
    print(f"{'':34}{'ms':>9}")
    print(f"{'ours: Assembler.assemble (cold)':34}{ours_ms:9.1f}")
    print(f"{'ours: tokenizer encode alone':34}{enc_ms:9.1f}")
    print(f"{'hf: apply_chat_template(tokenize)':34}{hf_ms:9.1f}")
    print(f"{'hf: tokenizer encode alone':34}{hf_enc_ms:9.1f}")
    stages = {k: round(v, 1) for k, v in result.timings_ms.items()}
    print(f"our stages (last run, ms): {stages}")
    print(f"pipeline overhead over our encode (median of paired runs): {overhead:+.1f}%  (bar: ≤ +10%)")
    print(f"ours vs apply_chat_template: {hf_ms / ours_ms:.2f}× faster")
    print(f"token ids identical (ours, our encode, apply_chat_template): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
