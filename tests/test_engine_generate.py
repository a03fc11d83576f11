"""Generation on the local engine (`tiny`: real torch forward passes over random weights, on the CPU):
greedy decoding is deterministic, a warm KV cache changes nothing in the ids, the engine keeps the
prompt and its reply, and the next turn reuses exactly their common prefix with the new prompt.
The Run tab's Controller path shows the reply and appends it on request (`append_reply`); a remote engine is `workbench
serve-engine` started as a subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from browser import free_port
from engine_server import tiny_engine_server

from workbench import Assembler
from workbench.difference import first_difference
from workbench.engine.engine import Engine
from workbench.errors import Cancelled, EngineError
from workbench.ui.controller import Controller
from workbench.ui.run_panel import engine_spec, run_html
from workbench.ui.state import WorkbenchState

ROOT = Path(__file__).resolve().parent.parent
MINIMAL = ROOT / "sample_sessions" / "openai_minimal.json"   # ends with a user message


@pytest.fixture(scope="module")
def asm() -> Assembler:
    return Assembler(template="qwen2.5")


@pytest.fixture(scope="module")
def engine(asm: Assembler) -> Engine:
    return Engine.load("tiny", vocab_size=asm.tokenizer.vocab_size)


@pytest.fixture(scope="module")
def prompt(asm: Assembler) -> np.ndarray:
    state = WorkbenchState(str(MINIMAL), restore=False)
    return asm.assemble(state.doc.request(state.doc.turn_count)).token_ids


def test_greedy_generation_is_deterministic_and_a_warm_cache_changes_no_id(engine: Engine, prompt: np.ndarray,
                                                                          asm: Assembler) -> None:
    engine.clear()
    cold = engine.generate(prompt, 8, reuse=False, tokenizer=asm.tokenizer)
    assert cold.reused_tokens == 0 and cold.prefilled_tokens == len(prompt) and cold.completion_tokens == 8
    assert cold.new_ids.dtype == np.uint32 and cold.finish_reason == "length"
    assert cold.text == asm.tokenizer.decode(cold.new_ids)
    engine.clear()
    again = engine.generate(prompt, 8, reuse=False, tokenizer=asm.tokenizer)
    assert again.new_ids.tolist() == cold.new_ids.tolist()
    # Warm: the first 30 tokens held (from a prefill), then the whole prompt reusing them.
    engine.clear()
    engine.prefill(prompt[:30])
    before = engine.processed_tokens
    warm = engine.generate(prompt, 8, tokenizer=asm.tokenizer)
    assert warm.reused_tokens == 30 and warm.prefilled_tokens == len(prompt) - 30
    # the model ran over the rest of the prompt and the 8 new tokens (each one's KV kept), no more
    assert engine.processed_tokens - before == len(prompt) - 30 + 8
    assert warm.new_ids.tolist() == cold.new_ids.tolist()


def test_the_kv_kept_after_generation_is_the_kv_of_a_fresh_prefill(engine: Engine, prompt: np.ndarray) -> None:
    engine.clear()
    rep = engine.generate(prompt, 6)
    full = np.concatenate([prompt, rep.new_ids, np.asarray([42], np.uint32)])
    reused = engine.prefill(full)
    assert reused.reused_tokens == len(prompt) + 6 and reused.prefilled_tokens == 1   # prompt + reply were held
    engine.clear()
    fresh = engine.prefill(full, reuse=False)
    assert float((reused.logits - fresh.logits).abs().max()) < 1e-4


def test_an_end_of_turn_id_stops_the_reply_and_suppressed_ids_are_never_generated(engine: Engine,
                                                                                   prompt: np.ndarray,
                                                                                   asm: Assembler) -> None:
    engine.clear()
    first = int(engine.generate(prompt, 1).new_ids[0])
    stopped = engine.generate(prompt, 8, stop_ids=[first], tokenizer=asm.tokenizer)
    assert stopped.finish_reason == "stop" and stopped.new_ids.tolist() == [first] and stopped.text == ""
    other = engine.generate(prompt, 4, suppress_ids=[first])
    assert first not in other.new_ids.tolist()


def test_generation_is_cancelled_between_decode_steps(engine: Engine, prompt: np.ndarray) -> None:
    seen: list[int] = []

    def check() -> None:
        if len(seen) >= 2:
            raise Cancelled("generation cancelled")

    with pytest.raises(Cancelled):
        engine.generate(prompt, 50, check=check, on_token=lambda ids: seen.append(len(ids)))
    assert seen == [1, 2]
    assert engine.generate(prompt, 2).completion_tokens == 2     # the engine still works


@pytest.mark.parametrize("max_new, says", [(0, "at least 1"), (10**9, "exceed the model's window")])
def test_bad_generation_requests_say_what(engine: Engine, prompt: np.ndarray, max_new: int, says: str) -> None:
    with pytest.raises(EngineError, match=says):
        engine.generate(prompt, max_new)
    with pytest.raises(EngineError, match="empty"):
        engine.generate(np.zeros(0, np.uint32), 4)


def test_the_next_turn_reuses_the_common_prefix_of_what_the_engine_held(engine: Engine, asm: Assembler) -> None:
    state = WorkbenchState(str(MINIMAL), restore=False)
    req = state.doc.request(state.doc.turn_count)
    engine.clear()
    p1 = asm.assemble(req).token_ids
    g1 = engine.generate(p1, 10, tokenizer=asm.tokenizer, suppress_ids=asm.tokenizer.special_ids)
    held = engine.held_ids
    assert held is not None and held.tolist() == [*p1.tolist(), *g1.new_ids.tolist()]
    msgs = [*req["messages"], {"role": "assistant", "content": g1.text}, {"role": "user", "content": "And why?"}]
    p2 = asm.assemble({**req, "messages": msgs}).token_ids
    g2 = engine.generate(p2, 4, tokenizer=asm.tokenizer)
    common = first_difference(held, p2)
    assert g2.held_before == len(held) and g2.common == common
    assert g2.reused_tokens == min(common, len(p2) - 1) and g2.reused_tokens >= len(p1)
    if common < len(held):          # where the re-rendered reply parted from the generated ids
        assert g2.break_at == common and g2.held_token == int(held[common]) and g2.prompt_token == int(p2[common])


# ------------------------------------------------------------------------------ the Run tab's path
class InlineHost:
    def call_later(self, delay_ms: int, fn) -> None:  # type: ignore[no-untyped-def]
        fn()

    def call_from_thread(self, fn) -> None:  # type: ignore[no-untyped-def]
        fn()

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return lambda *a, **k: None       # the views: nothing to draw here


def controller() -> Controller:
    state = WorkbenchState(str(MINIMAL), restore=False)
    c = Controller(state, InlineHost(), background=False)
    c.views = frozenset()
    c.refresh()
    return c


def run(c: Controller, spec: str, max_new: int = 6) -> tuple[object, str, list[str]]:
    got: list[tuple[object, str]] = []
    progress: list[str] = []
    c.run_generate(spec, max_new, lambda r, e: got.append((r, e)), progress.append)
    assert len(got) == 1
    return got[0][0], got[0][1], progress


def test_generate_appends_the_reply_and_the_next_turn_reports_its_reuse() -> None:
    c = controller()
    s = c.state
    n, turns = len(s.doc.messages(s.turn)), s.doc.turn_count
    result, error, progress = run(c, "tiny")
    assert error == "" and result is not None
    outcome, generation = result  # type: ignore[misc]
    assert len(s.doc.messages(s.turn)) == n and not s.doc.dirty      # shown, not written
    assert c.append_reply(outcome.text, generation) == f"appended to the session as message {n} (assistant)"
    msgs = s.doc.messages(s.turn)
    assert len(msgs) == n + 1 and msgs[-1] == {"role": "assistant", "content": outcome.text}
    assert s.doc.dirty and s.doc.turn_count == turns + 1 and s.turn == turns + 1
    assert any(p.startswith("loading tiny") for p in progress) and any(" of 6 tokens: " in p for p in progress)
    assert outcome.local.reused_tokens == 0 and "held nothing of this session yet" in run_html(outcome)
    # Generating again right away: the session ends with the reply.
    _, error, _ = run(c, "tiny")
    assert "ends with an assistant reply" in error and len(s.doc.messages(s.turn)) == n + 1
    c.ops([{"op": "insert", "index": n + 1, "message": {"role": "user", "content": "Thanks. Why, though?"}}])
    result, error, _ = run(c, "tiny")
    assert error == ""
    second = result[0]  # type: ignore[index]
    held = outcome.local.prompt_tokens + outcome.completion_tokens
    assert second.local.held_before == held and second.reused_tokens >= outcome.prompt_tokens
    page = run_html(second)
    assert f"{second.reused_tokens:,} reused" in page and f"The engine held {held:,} tokens" in page


def test_cancel_and_bad_engines_show_inline_and_change_nothing(tmp_path: Path) -> None:
    c = controller()
    s = c.state
    n = len(s.doc.messages(s.turn))
    _, error, _ = run(c, str(tmp_path / "no-such-model"))
    assert "no such folder" in error
    _, error, _ = run(c, f"http://127.0.0.1:{free_port()}")
    assert "cannot reach the server" in error
    c.runner = None
    got: list[tuple[object, str]] = []

    def progress(text: str) -> None:
        if " of 40 tokens" in text:
            c.cancel_generate()         # the Cancel button, pressed while it decodes

    c.run_generate("tiny", 40, lambda r, e: got.append((r, e)), progress)
    assert got == [(None, "generation cancelled")]
    assert len(s.doc.messages(s.turn)) == n and not s.doc.dirty
    with pytest.raises(EngineError, match="type the server's URL"):
        engine_spec("a remote server (OpenAI-compatible URL)", "  ")
    with pytest.raises(EngineError, match="not an http"):
        engine_spec("a remote server (OpenAI-compatible URL)", "127.0.0.1:8000")
    assert engine_spec("tiny (synthetic, CPU)") == "tiny"


# ------------------------------------------------------------------------------ remote
@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with tiny_engine_server() as url:
        yield url


def test_a_remote_server_generates_the_same_reply_and_reports_its_cache(server: str, engine: Engine,
                                                                        prompt: np.ndarray, asm: Assembler) -> None:
    from workbench.engine.remote import RemoteEngine
    remote = RemoteEngine(server)
    first = remote.generate(prompt, 5)
    engine.clear()
    local = engine.generate(prompt, 5, tokenizer=asm.tokenizer)   # the same weights (seed 0), greedy
    assert first.text == local.text and first.completion_tokens == 5 and first.finish_reason == "length"
    again = remote.generate(prompt, 5)
    assert again.text == first.text and again.cached_tokens == len(prompt) - 1
    # Through the Run tab's path: the reply is appended on request, the server's cache figure shown.
    c = controller()
    result, error, _ = run(c, server, 4)
    assert error == ""
    outcome, generation = result  # type: ignore[misc]
    c.append_reply(outcome.text, generation)
    assert c.state.doc.messages(c.state.turn)[-1]["content"] == outcome.text
    assert outcome.reused_tokens is not None and f"{outcome.reused_tokens:,} reused" in run_html(outcome)
