"""The remote adapter against a real OpenAI-compatible server running a real model: `workbench
serve-engine` (the local engine behind /v1/models, /v1/completions and vLLM's /tokenize), started
by the test as a subprocess. vLLM and SGLang need a GPU and cannot run here; the adapter speaks
their documented request and response shapes, which this server answers in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import free_port
from engine_server import tiny_engine_server

from workbench import Assembler, load_session
from workbench.cli.main import main
from workbench.engine.remote import RemoteEngine
from workbench.errors import EngineError

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "sample_sessions" / "tool_agent.json"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with tiny_engine_server() as url:
        yield url


def test_cached_tokens_follow_the_conversation_and_tokenization_matches(server: str) -> None:
    remote = RemoteEngine(server)
    assert remote.model == "tiny"
    asm = Assembler(template="qwen2.5")
    sess = asm.session()
    results = [sess.assemble(t) for t in load_session(SESSION).turns[:3]]
    reports = [remote.prefill(r.token_ids) for r in results]
    assert [r.prompt_tokens for r in reports] == [r.total_tokens for r in results]
    assert reports[0].cached_tokens == 0
    assert [r.cached_tokens for r in reports[1:]] == [results[0].total_tokens, results[1].total_tokens]
    parity = remote.parity(results[2])
    assert parity.equal and parity.first_difference is None


def test_a_tokenizer_mismatch_is_found_and_located(server: str) -> None:
    remote = RemoteEngine(server)
    # Our side counts with another vocabulary than the server's (qwen2.5): drift production would hit.
    other = Assembler(template="qwen2.5", tokenizer="o200k_base")
    result = other.assemble(load_session(SESSION).turn(1))
    parity = remote.parity(result)
    assert not parity.equal and parity.first_difference is not None
    assert parity.segment is not None and parity.segment.startswith("system")
    assert "ours" in parity.detail and "the server's" in parity.detail


def test_remote_errors_say_what_and_where(server: str) -> None:
    with pytest.raises(EngineError, match="cannot reach the server"):
        RemoteEngine(f"http://127.0.0.1:{free_port()}", timeout=5)         # asks /v1/models first
    remote = RemoteEngine(server)
    with pytest.raises(EngineError, match="answered 400.*prompt"):
        remote._request("/v1/completions", {"model": "tiny", "prompt": {"not": "ids"}})


def test_prefill_remote_cli(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prefill", str(SESSION), "--remote", server, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"]["source"] == "remote" and d["cached_tokens_reported"] is True
    turns = d["turns"]
    for prev, t in zip(turns, turns[1:]):
        # at least the previous prompt (the server may still hold this one from an earlier test)
        assert prev["tokens"] <= t["reused_tokens"] == t["cached_tokens"] < t["tokens"]
        assert t["parity"]["equal"] is True
    assert main(["prefill", str(SESSION), "--remote", "http://127.0.0.1:9"]) == 2
    assert capsys.readouterr().err.startswith("error: cannot reach the server")
