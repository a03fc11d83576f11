"""The Run tab's generation on a real model: Gemma 3 270M (the offline GGUF package), assembled with
its own vocabulary and the gemma3 template. Marked `slow`: assembling the package, converting its
vocabulary and loading it took 4-5 minutes on this shared 2-core machine (30-50 s when idle), so it
runs with `pytest -m slow`, not in the default run."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.ui.run_panel import Runner, stop_ids
from workbench.ui.state import WorkbenchState

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def test_gemma_generates_real_words_and_the_next_turn_reuses_its_reply(own_workbench_home: None) -> None:
    state = WorkbenchState(str(ROOT / "sample_sessions" / "openai_minimal.json"), restore=False)
    runner = Runner()
    job = runner.prepare(state)
    first = runner.run(job, "gemma3-270m", 8)
    assert "gemma3 template" in first.assembled_with and "own vocabulary" in first.note
    assert "base model" in first.model_label and first.local is not None
    assert any(c.isalpha() for c in first.text)                  # real weights: words, not noise
    engine = next(iter(runner._engines.values()))
    asm, _ = runner._assembler_for(job, "gemma3-270m", None)
    assert asm.tokenizer.specials["<end_of_turn>"] in stop_ids(asm, engine)
    engine.clear()
    again = runner.run(job, "gemma3-270m", 8)
    assert again.local is not None and again.local.new_ids.tolist() == first.local.new_ids.tolist()   # greedy
    msgs = state.doc.messages(state.turn)
    state.apply({"op": "insert", "index": len(msgs), "message": {"role": "assistant", "content": first.text}})
    state.apply({"op": "insert", "index": len(msgs) + 1, "message": {"role": "user", "content": "And the singular?"}})
    second = runner.generate(state, "gemma3-270m", 4)
    rep = second.local
    assert rep is not None and rep.held_before == first.prompt_tokens + first.completion_tokens
    assert second.reused_tokens == min(rep.common, second.prompt_tokens - 1) >= first.prompt_tokens
