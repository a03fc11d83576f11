"""The fixes' prefill times on a real model: Gemma 3 270M (the offline GGUF package) with its own
vocabulary and the gemma3 template. Marked `slow` (assembling the package and loading it takes
minutes on a shared 2-core machine): `pytest -m slow tests/test_fixes_gemma.py`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench import Assembler
from workbench.analysis.fixes import measure
from workbench.sessions import load_session

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    old = os.environ.get("WORKBENCH_HOME")
    os.environ["WORKBENCH_HOME"] = str(tmp_path_factory.mktemp("home"))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("WORKBENCH_HOME", None)
        else:
            os.environ["WORKBENCH_HOME"] = old


def test_move_volatile_lets_gemma_reuse_its_cache(home: None) -> None:
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
