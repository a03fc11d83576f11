"""The prefill engine on the CPU with real torch and transformers: prefix reuse gives the logits of
a full prefill, the reuse path runs only the new tokens (counted), the KV cap holds, and bad input
(a missing or mismatched model, a prompt over the window, the device out of memory) is a clear
error. The synthetic `tiny` architecture keeps it to seconds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch  # the test extra pins the CPU wheel

from workbench import Assembler, load_session
from workbench.cli.main import main
from workbench.engine.engine import Engine
from workbench.engine.kv import KV_CONFIGS, kv_config, paged_view
from workbench.engine.models import device_errors, is_out_of_memory, load_model
from workbench.errors import EngineError

ROOT = Path(__file__).resolve().parent.parent
SMALL_VOCAB = 512


@pytest.fixture(scope="module")
def small() -> Engine:
    return Engine.load("tiny", vocab_size=SMALL_VOCAB)


def prompts(seed: int = 0) -> list[np.ndarray]:
    """A conversation's growing prompts: each turn extends the previous one; turn 4 edits turn 2's tail."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, SMALL_VOCAB, 300).astype(np.uint32)
    t2 = np.concatenate([base, rng.integers(0, SMALL_VOCAB, 80)]).astype(np.uint32)
    t3 = np.concatenate([t2, rng.integers(0, SMALL_VOCAB, 50)]).astype(np.uint32)
    t4 = np.concatenate([t2[:340], rng.integers(0, SMALL_VOCAB, 90)]).astype(np.uint32)
    return [base, t2, t3, t4]


def test_reuse_gives_the_logits_of_a_full_prefill_and_runs_only_the_new_tokens(small: Engine) -> None:
    small.clear()
    fresh = Engine(small.m)               # same weights, its own empty cache
    before = small.processed_tokens
    reports = [small.prefill(p) for p in prompts()]
    assert [r.reused_tokens for r in reports] == [0, 300, 380, 340]
    assert small.processed_tokens - before == sum(r.prefilled_tokens for r in reports) == 300 + 80 + 50 + 90
    for p, r in zip(prompts(), reports):
        full = fresh.prefill(p, reuse=False)
        assert full.reused_tokens == 0
        torch.testing.assert_close(r.logits, full.logits, atol=1e-4, rtol=1e-4)
    # The tree shares the common prefix: 300 + 80 + 50 + 90 distinct positions, not 1,540.
    assert small.cache.tokens_held == 520
    assert small.cache.nbytes == 520 * small.m.kv.bytes_per_token


def test_the_same_prompt_again_runs_one_token_and_baseline_is_measured_apart(small: Engine) -> None:
    small.clear()
    p = prompts(1)[1]
    small.prefill(p)
    before = small.processed_tokens
    r = small.prefill(p, baseline=True, top_k=5)
    assert (r.reused_tokens, r.prefilled_tokens) == (len(p) - 1, 1)
    assert small.processed_tokens - before == 1 + len(p)        # the reuse run, then the full baseline
    assert r.baseline_ms is not None and r.baseline_ms > 0 and r.prefill_ms > 0
    assert len(r.top) == 5 and r.top[0].prob >= r.top[-1].prob
    assert r.kv_bytes == len(p) * small.m.kv.bytes_per_token


def test_the_kv_cap_holds_and_evicts_the_oldest(small: Engine) -> None:
    per_token = small.m.kv.bytes_per_token
    engine = Engine(small.m, kv_cap_bytes=500 * per_token)
    a, b = prompts(2)[0], prompts(3)[0]                          # 300 tokens each, unrelated
    engine.prefill(a)
    engine.prefill(b)                                           # 600 > 500: a goes
    assert engine.cache.nbytes <= 500 * per_token and engine.cache.evictions == 1
    assert engine.prefill(a).reused_tokens == 0
    assert engine.prefill(a).reused_tokens == len(a) - 1


def test_a_real_session_with_its_tokenizer(tmp_path: Path) -> None:
    asm = Assembler(template="qwen2.5")
    session = load_session(ROOT / "sample_sessions" / "tool_agent.json")
    engine = Engine.load("tiny", vocab_size=asm.tokenizer.vocab_size)
    sess = asm.session()
    results = [sess.assemble(t) for t in session.turns[:3]]
    reports = [engine.prefill(r.token_ids) for r in results]
    # An append-only log: each turn reuses all of the previous prompt.
    assert [r.reused_tokens for r in reports[1:]] == [results[0].total_tokens, results[1].total_tokens]
    full = Engine(engine.m).prefill(results[2].token_ids, reuse=False)
    torch.testing.assert_close(reports[2].logits, full.logits, atol=1e-4, rtol=1e-4)
    assert engine.m.source == "synthetic" and "synthetic" in engine.m.label


def test_model_folders_load_and_bad_ones_say_why(tmp_path: Path) -> None:
    m = load_model("tiny", vocab_size=SMALL_VOCAB)
    m.model.config.max_position_embeddings = 64
    m.model.save_pretrained(tmp_path / "tiny64")
    loaded = Engine.load(str(tmp_path / "tiny64"), vocab_size=SMALL_VOCAB)
    assert loaded.m.source == "folder" and loaded.m.window == 64 and loaded.m.kv.layers == 4
    with pytest.raises(EngineError, match="more than the model's window of 64"):
        loaded.prefill(np.arange(100, dtype=np.uint32))
    with pytest.raises(EngineError, match="512 embedding rows"):
        Engine.load(str(tmp_path / "tiny64"), vocab_size=151665)
    with pytest.raises(EngineError, match="no such folder"):
        Engine.load(str(tmp_path / "nowhere"), vocab_size=SMALL_VOCAB)
    (tmp_path / "empty").mkdir()
    with pytest.raises(EngineError, match="no config.json"):
        Engine.load(str(tmp_path / "empty"), vocab_size=SMALL_VOCAB)
    with pytest.raises(EngineError, match="no such GGUF"):
        Engine.load(str(tmp_path / "model.gguf"), vocab_size=SMALL_VOCAB)
    with pytest.raises(EngineError, match="outside the model's vocabulary"):
        loaded.prefill(np.array([1, 2, SMALL_VOCAB + 3], dtype=np.uint32))


def test_running_out_of_memory_is_an_engine_error() -> None:
    with pytest.raises(Exception) as caught:
        torch.empty(1 << 62, dtype=torch.uint8)             # a real allocation failure
    assert is_out_of_memory(caught.value)
    with pytest.raises(EngineError, match="out of memory on cpu"):
        with device_errors("cpu", "prefill"):
            torch.empty(1 << 62, dtype=torch.uint8)


def test_kv_arithmetic_and_the_paged_view(tmp_path: Path) -> None:
    assert KV_CONFIGS["Llama-3-8B"].bytes_per_token == 32 * 8 * 128 * 2 * 2 == 131072
    assert KV_CONFIGS["Qwen2.5-7B"].bytes_per_token == 28 * 4 * 128 * 2 * 2
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 8,
                                                      "num_key_value_heads": 2, "hidden_size": 512,
                                                      "torch_dtype": "float32"}))
    assert kv_config(str(tmp_path)).bytes_per_token == 2 * 2 * 64 * 2 * 4
    with pytest.raises(EngineError, match="unknown KV config"):
        kv_config("GPT-9")
    a = np.arange(40, dtype=np.uint32)
    b = np.concatenate([a, np.arange(100, 130)]).astype(np.uint32)      # extends a
    c = np.concatenate([a[:20], np.arange(200, 220)]).astype(np.uint32)  # diverges at 20
    view = paged_view([a, b, c], "Llama-3-8B", block_size=16)
    assert [(t.blocks, t.shared_blocks) for t in view] == [(3, 0), (5, 2), (3, 1)]
    assert view[-1].held_bytes == (2 + 2 + 1 + 1) * 16 * 131072       # distinct full blocks + c's partial


def test_prefill_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prefill", str(ROOT / "sample_sessions" / "tool_agent.json"), "--json", "--baseline"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"]["synthetic"] is True and d["model"]["name"] == "tiny"
    turns = d["turns"]
    assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
    for prev, t in zip(turns, turns[1:]):
        assert t["reused_tokens"] == prev["tokens"]                 # append-only: the whole previous prompt
        assert t["prefilled_tokens"] == t["tokens"] - t["reused_tokens"]
        assert t["kv_bytes"] == t["tokens"] * d["model"]["kv"]["bytes_per_token"]
        assert t["baseline_ms"] > 0
    assert d["processed_tokens"] == sum(t["prefilled_tokens"] + t["tokens"] for t in turns)


@pytest.mark.parametrize("argv, says", [
    (["--model", "no/such/model"], "no such folder"),
    (["--device", "cuda"], "no CUDA device"),
    (["--kv-cap-mb", "-1"], "--kv-cap-mb"),
])
def test_prefill_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    if says == "no CUDA device" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["prefill", str(ROOT / "sample_sessions" / "tool_agent.json"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and says in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ a real model: Gemma 3 270M (GGUF)
@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The offline Gemma 3 270M package (the test extra installs it): assembled, its vocabulary
    converted and the model loaded once (about a minute on a 2-core CPU)."""
    import os

    from workbench.engine.models import model_tokenizer
    from workbench.tokenizers import get_tokenizer

    old = os.environ.get("WORKBENCH_HOME")
    os.environ["WORKBENCH_HOME"] = str(tmp_path_factory.mktemp("home"))
    try:
        tok_name = model_tokenizer("gemma3-270m")
        tok = get_tokenizer(tok_name)
        yield Engine.load("gemma3-270m", vocab_size=tok.vocab_size), tok, tok_name
    finally:
        if old is None:
            os.environ.pop("WORKBENCH_HOME", None)
        else:
            os.environ["WORKBENCH_HOME"] = old


def test_the_real_gemma_model_predicts_real_words_and_says_it_is_a_base_model(gemma) -> None:  # type: ignore[no-untyped-def]
    engine, tok, _name = gemma
    assert engine.m.source == "gguf" and "base model" in engine.m.label
    assert engine.m.kv.bytes_per_token == 18 * 1 * 256 * 2 * 4      # Gemma 3 270M in fp32 on the CPU
    ids = np.concatenate([[2], tok.encode("The capital of France is")]).astype(np.uint32)   # <bos> first
    r = engine.prefill(ids, top_k=5, tokenizer=tok)
    assert " Paris" in [t.text for t in r.top]                      # real weights, dequantized right


def test_the_real_gemma_model_reuses_the_previous_turn_exactly(gemma) -> None:  # type: ignore[no-untyped-def]
    engine, tok, name = gemma
    engine.clear()
    asm = Assembler(template="gemma3", tokenizer=name)
    one = asm.assemble({"messages": [{"role": "user", "content": "Name three rivers in Europe."}]})
    two = asm.assemble({"messages": [{"role": "user", "content": "Name three rivers in Europe."},
                                     {"role": "assistant", "content": "The Danube, the Rhine and the Loire."},
                                     {"role": "user", "content": "Which is the longest?"}]})
    assert one.token_ids[0] == 2 and len(two.token_ids) > len(one.token_ids)
    engine.prefill(one.token_ids)
    r = engine.prefill(two.token_ids)
    assert r.reused_tokens == len(one.token_ids)        # the generation prompt is where turn 2 goes on
    full = Engine(engine.m).prefill(two.token_ids, reuse=False)
    torch.testing.assert_close(r.logits, full.logits, atol=1e-3, rtol=1e-3)


def test_kv_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["kv", str(ROOT / "sample_sessions" / "tool_agent.json"), "--config", "Qwen2.5-7B",
                 "--dtype", "fp8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["config"]["bytes_per_token"] == 28 * 4 * 128 * 2 * 1 and d["block_size"] == 16
    turns = d["turns"]
    for prev, t in zip(turns, turns[1:]):
        # append-only: every full block held after the last turn, its prompt and the reply as
        # generated (less the last sampled token), is shared
        assert prev["reply_tokens_held"] > 0
        assert t["shared_blocks"] == (prev["tokens"] + prev["reply_tokens_held"]) // 16 > prev["tokens"] // 16
        assert t["held_bytes"] >= max(t["kv_bytes"], prev["held_bytes"])
        assert t["kv_bytes"] == t["tokens"] * d["config"]["bytes_per_token"]
    assert main(["kv", str(ROOT / "sample_sessions" / "tool_agent.json"), "--block-size", "0"]) == 2
    assert "--block-size" in capsys.readouterr().err
    assert main(["kv", str(ROOT / "sample_sessions" / "tool_agent.json"), "--config", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: unknown KV config")
