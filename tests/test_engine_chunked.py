"""Chunked prefill (issue 17): a prompt run in chunks with the KV cache carried over gives the logits
and the KV of one forward pass; progress comes after each chunk; a `check` that raises Cancelled
stops it between chunks and leaves nothing of that prompt held. The synthetic `tiny` model, real
torch on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch  # the test extra pins the CPU wheel

from workbench.engine.engine import Engine, default_chunk
from workbench.errors import Cancelled, EngineError

VOCAB = 512


@pytest.fixture(scope="module")
def tiny() -> Engine:
    return Engine.load("tiny", vocab_size=VOCAB)


def ids(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, n).astype(np.uint32)


def held_kv(engine: Engine, prompt: np.ndarray) -> list[tuple[torch.Tensor, torch.Tensor]]:
    match = engine.cache.match(prompt)
    assert match is not None and match.length == len(prompt)
    return engine.cache.gather(match, len(prompt))


@pytest.mark.parametrize("chunk", [5, 128, 512])
def test_chunks_give_the_logits_and_kv_of_one_pass(tiny: Engine, chunk: int) -> None:
    prompt = ids(700)[: 300 if chunk < 10 else 700]
    n = len(prompt)
    one, chunked = Engine(tiny.m), Engine(tiny.m)
    whole = one.prefill(prompt, chunk=0)
    seen: list[tuple[str, int, int]] = []
    parts = chunked.prefill(prompt, chunk=chunk, progress=lambda *p: seen.append(p))
    torch.testing.assert_close(parts.logits, whole.logits, atol=1e-4, rtol=1e-4)
    for (k1, v1), (k2, v2) in zip(held_kv(one, prompt), held_kv(chunked, prompt), strict=True):
        torch.testing.assert_close(k2, k1, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(v2, v1, atol=1e-4, rtol=1e-4)
    assert parts.kv_bytes == whole.kv_bytes and parts.prefilled_tokens == n
    steps = -(-n // chunk)
    assert len(seen) == steps and seen[-1] == ("prefill", n, n)
    assert [d for _, d, _ in seen] == sorted({min(k * chunk, n) for k in range(1, steps + 1)})
    assert chunked.processed_tokens == n                       # each token run once


def test_chunks_after_a_reused_prefix_equal_a_cold_pass(tiny: Engine) -> None:
    prompt = ids(900, seed=1)
    warm, cold = Engine(tiny.m), Engine(tiny.m)
    warm.prefill(prompt[:400], chunk=64)
    seen: list[tuple[str, int, int]] = []
    r = warm.prefill(prompt, chunk=128, baseline=True, progress=lambda *p: seen.append(p))
    assert (r.reused_tokens, r.prefilled_tokens) == (400, 500)
    torch.testing.assert_close(r.logits, cold.prefill(prompt, chunk=0).logits, atol=1e-4, rtol=1e-4)
    # the reuse pass (500 new tokens), then the baseline over all 900
    assert [p for p in seen if p[0] == "prefill"][-1] == ("prefill", 500, 500)
    assert [p for p in seen if p[0] == "baseline"][-1] == ("baseline", 900, 900)
    assert r.baseline_ms is not None and r.baseline_ms > 0


def test_a_check_that_raises_stops_between_chunks_and_holds_nothing(tiny: Engine) -> None:
    engine = Engine(tiny.m)
    prompt = ids(600, seed=2)
    calls: list[int] = []

    def stop_at_the_third() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise Cancelled("the Cancel button")

    with pytest.raises(Cancelled):
        engine.prefill(prompt, chunk=100, check=stop_at_the_third)
    assert engine.processed_tokens == 200                      # two chunks ran, the third never started
    assert engine.cache.match(prompt).length == 0 and engine.cache.nbytes == 0
    again = engine.prefill(prompt, chunk=100)                  # the engine still works, from scratch
    assert again.reused_tokens == 0 and engine.processed_tokens == 800


def test_the_chunk_size_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKBENCH_PREFILL_CHUNK", raising=False)
    assert default_chunk("cpu") == 512 and default_chunk("cuda:0") == 2048
    monkeypatch.setenv("WORKBENCH_PREFILL_CHUNK", "16")
    assert default_chunk("cpu") == 16
    monkeypatch.setenv("WORKBENCH_PREFILL_CHUNK", "many")
    with pytest.raises(EngineError, match="WORKBENCH_PREFILL_CHUNK"):
        default_chunk("cpu")
