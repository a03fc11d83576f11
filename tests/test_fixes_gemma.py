"""The fixes' prefill times on a real model: Gemma 3 270M (the offline GGUF package) with its own
vocabulary and the gemma3 template. Marked `slow` (assembling the package and loading it takes
minutes on a shared 2-core machine): `pytest -m slow tests/test_fixes_gemma.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench import Assembler
from workbench.analysis.fixes import measure
from workbench.sessions import load_session

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def test_move_volatile_lets_gemma_reuse_its_cache(own_workbench_home: None) -> None:
    from workbench.engine.models import model_tokenizer
    asm = Assembler(template="gemma3", tokenizer=model_tokenizer("gemma3-270m"), cache=None)
    raw = load_session(ROOT / "sample_sessions" / "timestamp_system.json").raw
    m = measure(asm, raw, ["move-volatile"], providers=("vllm",), engine="gemma3-270m")
    before = sum(t.engine_reused or 0 for t in m.before.turns)
    after = sum(t.engine_reused or 0 for t in m.after.turns)
    assert after > 10 * max(before, 1)
    assert all(t.prefill_ms and t.prefill_ms > 0 for t in (*m.before.turns, *m.after.turns))
    print(f"gemma3-270m prefill over the session: {m.before.totals()['prefill_ms']:.0f} ms -> "
          f"{m.after.totals()['prefill_ms']:.0f} ms; engine reused {before} -> {after} tokens")
