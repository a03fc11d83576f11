"""Editing the last message of a long session and re-assembling: incremental vs cold vs apply_chat_template.

Run:  .venv/bin/python benchmarks/bench_incremental.py [--runs 40] [--hf-runs 3]

Measured in one run, on the 1,000-message sample session, qwen2.5 template, in two windows: one
that holds everything (1M tokens, no truncation) and the template's default (32k tokens: the
session is truncated, and each update refits the kept window by difference, assembly/refit.py):
  update       Session.assemble(the same request with its last user message edited): intake of the
               changed message only, the changed turn rendered with two anchor turns, only the tail
               tokenized, the rest of the text, ids and segments reused from the previous result
               (the result's id array and text are joined on first read; that read is timed too)
  cold         Assembler.assemble(the same request), nothing reused
  hf           transformers apply_chat_template(tokenize=True) on the same messages
And the update at 100 messages (the first 100 of the same session) against the update at 1,000.
The bars: update(1,000) <= hf / 100 (issue 4); in both windows, cold / update >= 100 and
update(1,000) <= 1.5 x update(100) (issue 16).
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

WINDOWS = {"window that holds everything": {"context_window": 1_000_000, "reserve": 1000},
           "the template's default window (truncating)": {}}


def updates(messages: list[dict], tools, runs: int, gc_on: bool, window: dict) -> tuple[float, object, dict]:  # type: ignore[no-untyped-def]
    asm = Assembler(template="qwen2.5", cache=None, **window)
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
    cold = Assembler(template="qwen2.5", cache=None, **window).assemble(req)
    assert last is not None and np.array_equal(ids, cold.token_ids) and text == cold.text
    assert list(last.dropped) == list(cold.dropped)
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

    print(f"session: bench_1000 ({len(msgs)} messages), template qwen2.5; update = the last user message "
          f"edited; ids and dropped messages checked equal to a cold assembly")
    hf_row = None
    for label, window in WINDOWS.items():
        rows = {}
        for gc_on in (True, False):
            t1000, r1000, info = updates(msgs, tools, args.runs, gc_on, window)
            t100, _, _ = updates(small, tools, args.runs, gc_on, window)
            rows[gc_on] = (t1000, t100)
        req = info["req"]
        cold_asm = Assembler(template="qwen2.5", cache=None, **window)
        cold = statistics.median(_timed(lambda: cold_asm.assemble(req)) for _ in range(5))  # noqa: B023
        # A truncating assembler learns its tokenizer's tokens per estimated token from the first
        # requests it truncates (its window search narrows): its very first request, timed apart.
        first = statistics.median(_first_request(req, window) for _ in range(3))
        print(f"\n{label}: {r1000.total_tokens:,} tokens kept, {len(r1000.dropped)} messages dropped, reused "
              f"{r1000.reused_segments} of {len(r1000.segments)} segments")
        print(f"{'':50}{'median ms':>10}")
        for gc_on in (True, False):
            tag = "gc on" if gc_on else "gc paused while timing"
            print(f"{'update, 1,000 messages (' + tag + ')':50}{rows[gc_on][0] * 1e3:9.3f}")
            print(f"{'update, 100 messages (' + tag + ')':50}{rows[gc_on][1] * 1e3:9.3f}")
        print(f"{'first read of token_ids after an update, 1,000':50}{info['read_ids'] * 1e3:9.3f}")
        print(f"{'first read of text after an update, 1,000':50}{info['read_text'] * 1e3:9.3f}")
        print(f"{'cold assembly, 1,000 messages':50}{cold * 1e3:9.2f}")
        print(f"{'cold, the first request of a new assembler':50}{first * 1e3:9.2f}")
        for gc_on in (True, False):
            tag = "gc on" if gc_on else "gc paused"
            print(f"cold / update(1,000), {tag}: {cold / rows[gc_on][0]:.0f}x (bar 100x; a new assembler's "
                  f"first request: {first / rows[gc_on][0]:.0f}x); "
                  f"update(1,000) / update(100): {rows[gc_on][0] / rows[gc_on][1]:.2f} (bar 1.5)")
        if not r1000.dropped:
            hf_row = (req, r1000, rows[True][0])

    assert hf_row is not None
    req, r1000, update = hf_row
    asm = Assembler(template="qwen2.5", context_window=1_000_000, reserve=1000, cache=None)
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
    print(f"\n{'apply_chat_template(tokenize=True), 1,000':50}{hf * 1e3:9.1f}")
    print(f"update (no truncation) / apply_chat_template: 1/{hf / update:.0f} (bar: at most 1/100)")
    print(f"ids (no truncation) equal to apply_chat_template: {same}")
    return 0


def _first_request(req: dict, window: dict) -> float:
    t = time.perf_counter()
    Assembler(template="qwen2.5", cache=None, **window).assemble(req)
    return time.perf_counter() - t


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
