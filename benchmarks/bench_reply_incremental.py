"""The reply the engines hold, computed from the last turn (issue 18).

Run:  PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_reply_incremental.py [TEMPLATE ...]

For each template (mistral-v7, qwen2.5 and llama3.1 by default), on `bench_1000.json` (500 turns)
in the workbench: the Cache tab's part (`WorkbenchState.panels(["cache"])`, every turn assembled,
each turn's reply, the simulators), then every reply both ways on the turns it assembled: the
whole conversation rendered with the reply (prefix.py's `_generated`, what every turn cost
before), and from the last turn (`turn_prompts.generated_text`); the two texts are checked equal.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import workbench.analysis.turn_prompts  # noqa: F401  (the module, below, not the function of that name)
from workbench.analysis.prefix import _generated
from workbench.ui.state import WorkbenchState

tp = sys.modules["workbench.analysis.turn_prompts"]
SESSION = Path(__file__).resolve().parent.parent / "sample_sessions" / "bench_1000.json"


def run(template: str) -> None:
    s = WorkbenchState(str(SESSION), autosave=None, restore=False)
    s.choose(template=template)
    s.assemble()
    t0 = time.perf_counter()
    out = s.panels(["cache"])
    part = time.perf_counter() - t0
    asm, results = out.assembler, [r.result for r in s._records if r is not None]
    pairs = [(r, tp._reply_message(r, n)) for r, n in zip(results, results[1:])]
    pairs = [(r, m) for r, m in pairs if m is not None]
    t1 = time.perf_counter()
    whole = [_generated(asm, r, m)[0] for r, m in pairs]
    t2 = time.perf_counter()
    fast = [tp.generated_text(asm, r, m) for r, m in pairs]
    t3 = time.perf_counter()
    assert whole == fast, "the reply from the last turn differs from the whole render's"
    n = len(pairs)
    print(f"{template}: cache part {part:.1f} s; {n} replies ({sum(bool(r.dropped) for r, _ in pairs)} after a "
          f"truncated turn): whole render {t2 - t1:.1f} s ({(t2 - t1) / n * 1e3:.1f} ms each), from the last turn "
          f"{t3 - t2:.2f} s ({(t3 - t2) / n * 1e3:.1f} ms each), same text", flush=True)


if __name__ == "__main__":
    for name in sys.argv[1:] or ["mistral-v7", "qwen2.5", "llama3.1"]:
        run(name)
