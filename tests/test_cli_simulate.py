"""`workbench simulate` (SPEC 7.3): the JSON contract and what each provider reports on sample sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.cli.main import main

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"


def run(capsys, *args: str) -> dict:  # type: ignore[no-untyped-def]
    assert main(["simulate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "vllm", "sglang"])
def test_contract(capsys, provider: str) -> None:  # type: ignore[no-untyped-def]
    d = run(capsys, str(SESSIONS / "tool_agent.json"), "--provider", provider, "--breakpoints", "auto")
    assert d["provider"] == provider and len(d["turns"]) == 9
    total = cached = 0
    for i, t in enumerate(d["turns"], start=1):
        assert set(t) >= {"turn", "tokens", "cached_tokens", "cost"} and t["turn"] == i
        assert 0 <= t["cached_tokens"] <= t["tokens"] and t["cost"] > 0
        total, cached = total + t["tokens"], cached + t["cached_tokens"]
    assert d["hit_ratio"] == pytest.approx(cached / total)
    assert d["turns"][0]["cached_tokens"] == 0
    # an append-only agent session is mostly cached after the first turn, by every provider
    assert d["hit_ratio"] > 0.5


def test_timestamp_in_system_prompt_defeats_every_cache(capsys) -> None:  # type: ignore[no-untyped-def]
    for provider in ("openai", "vllm", "sglang"):
        d = run(capsys, str(SESSIONS / "timestamp_system.json"), "--provider", provider)
        # the prompts differ from the ~22nd token on: nothing beyond one block can be reused
        assert all(t["cached_tokens"] <= 32 for t in d["turns"]), provider


def test_anthropic_explicit_breakpoints(capsys) -> None:  # type: ignore[no-untyped-def]
    # rag_long marks its system prompt (the handbook) with cache_control: turn 2 on reads it
    d = run(capsys, str(SESSIONS / "rag_long.json"), "--provider", "anthropic", "--context-window", "200000")
    assert d["turns"][0]["cached_tokens"] == 0 and d["turns"][0]["cache_write_tokens"] > 30_000
    assert all(t["cached_tokens"] > 30_000 for t in d["turns"][1:])
    # without breakpoints nothing is cached
    none = run(capsys, str(SESSIONS / "tool_agent.json"), "--provider", "anthropic")
    assert none["hit_ratio"] == 0


def test_bad_provider_and_params_exit_2(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert main(["simulate", str(SESSIONS / "tool_agent.json"), "--provider", "mistral-cloud", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "openai" in err and err.count("\n") == 1
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"mine": {"extends": "vllm", "block_size": -4}}), encoding="utf-8")
    assert main(["simulate", str(SESSIONS / "tool_agent.json"), "--provider", "mine", "--params", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "block_size" in err


def test_truncation_policies_on_an_overflowing_session(capsys) -> None:  # type: ignore[no-untyped-def]
    # overflow.json outgrows its 32k window from turn 15: sliding drops a turn at almost every turn
    # after that, so the prefix moves; chunked drops to a chunk boundary and the prefix holds.
    path = str(SESSIONS / "overflow.json")
    cached = {}
    for policy in ("sliding", "chunked", "summary-slot"):
        d = run(capsys, path, "--provider", "vllm", "--truncation", policy)
        assert d["provider"] == "vllm" and d["truncation"] == policy and len(d["turns"]) == 30
        assert all(set(t) >= {"turn", "tokens", "cached_tokens", "cost"} for t in d["turns"])
        cached[policy] = sum(t["cached_tokens"] for t in d["turns"])
    assert cached["chunked"] > 1.1 * cached["sliding"] and cached["summary-slot"] > cached["sliding"]
    # side by side: the contract's object for sliding, and each policy's totals
    both = run(capsys, path, "--provider", "vllm", "--truncation", "all")
    assert both["truncation"] == "sliding" and sum(t["cached_tokens"] for t in both["turns"]) == cached["sliding"]
    assert [p["truncation"] for p in both["policies"]] == ["sliding", "chunked", "summary-slot"]
    for p in both["policies"]:
        assert p["providers"]["vllm"]["cached_tokens"] == cached[p["truncation"]] and p["turn_count"] == 30
    stable = {p["truncation"]: p["prefix_stable_turns"] for p in both["policies"]}
    assert stable["chunked"] > stable["sliding"]
    # the text view: one row per policy
    assert main(["simulate", path, "--provider", "anthropic", "--breakpoints", "auto", "--truncation", "all"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[0] for r in rows[2:5]] == ["sliding", "chunked", "summary-slot"]


def test_bad_truncation_policy_exit_2(capsys) -> None:  # type: ignore[no-untyped-def]
    path = str(SESSIONS / "overflow.json")
    for extra in (["--truncation", "fifo"], ["--truncation", "all", "--low-water", "1.5"],
                  ["--truncation", "chunked", "--cut"]):
        assert main(["simulate", path, *extra, "--json"]) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("error:") and err.count("\n") == 1, err
    assert main(["simulate", path, "--truncation", "fifo"]) == 2
    assert "sliding" in capsys.readouterr().err   # names the policies there are
