"""The Semantic tab's lookup on a long session: the first click against the clicks after it (issue 17).

Run:  .venv/bin/python benchmarks/bench_semantic_reuse.py [--session sample_sessions/bench_1000.json]
      [--fresh]

The app's own path (WorkbenchState.semantic, what the tab's button runs on its worker), the default
embedder (all-MiniLM-L6-v2), loaded before the clock starts. In order, on the last turn:

- first click: every turn's context made and embedded;
- again: the same document, nothing changed;
- after an edit to the last message, and after an edit to a message in the middle of the session
  (every later turn's context made again; only the changed texts embedded);
- another turn selected (the middle one), then the last again.

With --fresh, the from-scratch replay each click used to run (before issue 17) is timed too, once.
Each line says how many texts were embedded and how many vectors were reused. The bar (issue 17):
a lookup after the first within 1 s.
"""

from __future__ import annotations

import argparse
import time

from workbench.semantic.cache import SemanticCache
from workbench.semantic.embedders import MiniLMEmbedder
from workbench.ui.semantic_replay import replay
from workbench.ui.state import WorkbenchState


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--session", default="sample_sessions/bench_1000.json")
    ap.add_argument("--fresh", action="store_true", help="also time the from-scratch replay (a minute or more)")
    args = ap.parse_args()

    embedder = MiniLMEmbedder()
    t0 = time.perf_counter()
    embedder.embed(["load the model"])
    print(f"embedder loaded in {time.perf_counter() - t0:.1f} s (not counted below)")
    state = WorkbenchState(args.session, restore=False)
    last = state.turn
    rows: list[tuple[str, float, str]] = []

    def click(what: str) -> None:
        memo = state._semantic.embedder if state._semantic is not None else None
        before = (memo.embedded, memo.reused) if memo is not None else (0, 0)
        t = time.perf_counter()
        decision, cache = state.semantic(embedder)
        s = time.perf_counter() - t
        memo = cache.embedder
        rows.append((what, s, f"{memo.embedded - before[0]:,} texts embedded, {memo.reused - before[1]:,} reused, "
                              f"{state._replay.made:,} turns made; {decision.reason[:60]}"))

    def edit(index: int, text: str) -> None:
        msgs = state.doc.messages(state.turn)
        state.apply({"op": "set", "index": index, "field": "content", "value": text})
        assert len(state.doc.messages(state.turn)) == len(msgs)

    click("first click")
    click("again, nothing changed")
    n = len(state.doc.messages(state.turn))
    edit(n - 1, "How do I restore the sediment samples from last week's backup?")
    click("after an edit to the last message")
    edit(n // 2 - (n // 2) % 2, "Can you summarise the sampling protocol once more?")
    click("after an edit in the middle")
    state.select_turn(last // 2)
    click(f"turn {last // 2} selected")
    state.select_turn(last)
    click(f"turn {last} again")
    if args.fresh:
        asm = state.assembler()
        requests = [state.doc.request(k) for k in range(1, state.doc.turn_count + 1)]
        t = time.perf_counter()
        replay(SemanticCache(embedder), asm, requests, last)
        rows.insert(0, ("from scratch (each click before)", time.perf_counter() - t, "every turn embedded"))

    print(f"{args.session}: {state.doc.turn_count} turns, lookup of turn {last}")
    width = max(len(r[0]) for r in rows)
    for what, s, note in rows:
        print(f"  {what:<{width}}  {s:8.2f} s   {note}")


if __name__ == "__main__":
    main()
