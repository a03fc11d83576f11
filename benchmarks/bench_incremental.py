"""Editing the last message of a long session and re-assembling: incremental vs cold vs apply_chat_template.

Run:  .venv/bin/python benchmarks/bench_incremental.py [--runs 40] [--hf-runs 3]

Measured in one run, on the 1,000-message sample session, qwen2.5 template, no truncation (a
1M-token window):
  update       Session.assemble(the same request with its last user message edited): intake of the
               changed message only, the changed turn rendered with two anchor turns, only the tail
               tokenized, the rest of the text, ids and segments reused from the previous result
               (the result's id array and text are joined on first read; that read is timed too)
  cold         Assembler.assemble(the same request), nothing reused
  hf           transformers apply_chat_template(tokenize=True) on the same messages
And the update at 100 messages (the first 100 of the same session) against the update at 1,000.
The issue's bars: update(1,000) <= hf / 100; update(1,000) <= 1.5 x update(100).
Updates are timed twice: as they run (the garbage collector on) and with the collector paused
during timing, which is timeit's convention. Ids are checked equal to the cold assembly.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_cold_assembly import hf_qwen_tokenizer  # noqa: E402

from workbench import Assembler, load_session  # noqa: E402


def updates(messages: list[dict], tools, runs: int, gc_on: bool) -> tuple[float, object, dict]:  # type: ignore[no-untyped-def]
    asm = Assembler(template="qwen2.5", context_window=1_000_000, reserve=1000, cache=None)
    session = asm.session()
    session.assemble({"messages": messages, "tools": tools})
    times = []
    last = None
    req: dict = {}
    if not gc_on:
        gc.collect()
        gc.disable()  # for the whole timing loop, as timeit does
    try:
        for i in range(runs):
            edited = list(messages)
            edited[-1] = {"role": "user", "content": messages[-1]["content"] + f" (edit {i})"}
            req = {"messages": edited, "tools": tools}
            t = time.perf_counter()
            last = session.assemble(req)
            times.append(time.perf_counter() - t)
    finally:
        gc.enable()
    # The reused prefix is joined into the result's id array and text on first read: time that too.
    t = time.perf_counter()
    ids = last.token_ids
    read_ids = time.perf_counter() - t
    t = time.perf_counter()
    text = last.text
    read_text = time.perf_counter() - t
    cold = asm.assemble(req)
    assert last is not None and np.array_equal(ids, cold.token_ids) and text == cold.text
    return statistics.median(times), last, {"req": req, "read_ids": read_ids, "read_text": read_text}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--hf-runs", type=int, default=3)
    args = ap.parse_args()
    request = load_session(ROOT / "sample_sessions" / "bench_1000.json").turn(None)
    msgs, tools = request["messages"], request.get("tools")
    assert msgs[-1]["role"] == "user"
    small = msgs[:100] if msgs[99]["role"] == "user" else msgs[:99]

    rows = {}
    for gc_on in (True, False):
        t1000, r1000, info = updates(msgs, tools, args.runs, gc_on)
        t100, _, _ = updates(small, tools, args.runs, gc_on)
        rows[gc_on] = (t1000, t100)
    req = info["req"]

    asm = Assembler(template="qwen2.5", context_window=1_000_000, reserve=1000, cache=None)
    cold = statistics.median(_timed(lambda: asm.assemble(req)) for _ in range(5))
    tok = hf_qwen_tokenizer()
    hf_msgs = asm.normalize(req)[0].to_template_messages()
    hf_ids = None
    hf_times = []
    for _ in range(args.hf_runs):
        t = time.perf_counter()
        hf_ids = tok.apply_chat_template(hf_msgs, tools=asm.normalize(req)[0].tool_schemas() or None,
                                         chat_template=asm.template.source, tokenize=True, add_generation_prompt=True)
        hf_times.append(time.perf_counter() - t)
    hf = statistics.median(hf_times)
    if hasattr(hf_ids, "input_ids"):  # newer transformers return a BatchEncoding
        hf_ids = hf_ids["input_ids"]
    same = list(map(int, r1000.token_ids)) == list(hf_ids)

    print(f"session: bench_1000 ({len(msgs)} messages, {r1000.total_tokens:,} tokens), template qwen2.5; "
          f"update = the last user message edited; reused {r1000.reused_segments} of {len(r1000.segments)} "
          f"segments")
    print(f"{'':34}{'median ms':>10}")
    for gc_on in (True, False):
        label = "gc on" if gc_on else "gc paused while timing"
        print(f"{'update, 1,000 messages (' + label + ')':50}{rows[gc_on][0] * 1e3:9.3f}")
        print(f"{'update, 100 messages (' + label + ')':50}{rows[gc_on][1] * 1e3:9.3f}")
    print(f"{'first read of token_ids after an update, 1,000':50}{info['read_ids'] * 1e3:9.3f}")
    print(f"{'first read of text after an update, 1,000':50}{info['read_text'] * 1e3:9.3f}")
    print(f"{'cold assembly, 1,000 messages':50}{cold * 1e3:9.2f}")
    print(f"{'apply_chat_template(tokenize=True), 1,000':50}{hf * 1e3:9.1f}")
    print(f"update / apply_chat_template: 1/{hf / rows[True][0]:.0f} (bar: at most 1/100)")
    for gc_on in (True, False):
        print(f"update(1,000) / update(100), {'gc on' if gc_on else 'gc paused'}: "
              f"{rows[gc_on][0] / rows[gc_on][1]:.2f} (bar 1.5)")
    print(f"ids: equal to the cold assembly; equal to apply_chat_template: {same}")
    return 0


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
