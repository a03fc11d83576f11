"""Prefix-stability analysis (SPEC 3.2, 7.3): first divergence, its segment, its cause."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from workbench import Assembler
from workbench.analysis import analyze
from workbench.cli.main import main
from workbench.sessions import load_session

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "sample_sessions"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}}, "required": ["city"]}}}


def turns_of(name: str) -> tuple:
    return load_session(SESSIONS / f"{name}.json").turns


def log(*requests: dict) -> list[dict]:
    return [dict(r) for r in requests]


BASE = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "Seven."}]


def test_timestamp_in_system_prompt_is_diagnosed() -> None:
    turns = analyze(Assembler(template="qwen2.5"), turns_of("timestamp_system"))
    assert turns[0].first_divergence is None and turns[0].reused_tokens == 0
    for t in turns[1:]:
        assert t.first_divergence is not None and t.first_divergence < 40
        assert t.divergence_kind == "system" and t.divergence_seq == 0
        assert t.causes[0].code == "volatile_content" and "system prompt" in t.causes[0].message
        assert "suffix" in t.causes[0].advice
        assert t.reused_tokens == t.first_divergence


def test_append_only_conversation_reuses_everything_held() -> None:
    asm = Assembler(template="qwen2.5")
    turns = analyze(asm, turns_of("tool_agent"))
    for prev, t in zip(turns, turns[1:]):
        assert t.first_divergence is None and t.causes == ()
        # what the engine holds is exactly a prefix of this prompt, longer than the previous prompt
        assert prev.tokens < t.held_tokens == t.reused_tokens <= t.tokens


def test_cli_json_contract(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["analyze", str(SESSIONS / "timestamp_system.json"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["turns"]) == 5
    for i, t in enumerate(d["turns"], start=1):
        assert set(t) >= {"turn", "tokens", "reused_tokens", "first_divergence", "divergence_seq", "causes"}
        assert t["turn"] == i and isinstance(t["tokens"], int)
        for c in t["causes"]:
            assert set(c) >= {"code", "message", "advice"}
    assert d["turns"][0]["first_divergence"] is None
    assert [c["code"] for c in d["turns"][1]["causes"]] == ["volatile_content"]
    assert main(["analyze", str(SESSIONS / "timestamp_system.json")]) == 0
    assert "volatile_content" in capsys.readouterr().out


def test_reasoning_stripped_by_qwen3_is_a_template_rewrite() -> None:
    turns = analyze(Assembler(template="qwen3"), turns_of("coding_corrections"))
    rewrites = [t for t in turns[1:] if t.causes and t.causes[0].code == "template_rewrite"]
    assert rewrites, "qwen3 renders the last reply with <think> and earlier ones without"
    assert any("reasoning" in t.causes[0].message for t in rewrites)
    # qwen2.5 keeps earlier turns as they were: append-only
    assert all(t.first_divergence is None for t in analyze(Assembler(template="qwen2.5"),
                                                             turns_of("coding_corrections")))


def test_generation_prompt_mismatch() -> None:
    asm = Assembler(template="qwen3", template_kwargs={"enable_thinking": False})
    reqs = [{"messages": BASE[:2]}, {"messages": BASE + [{"role": "user", "content": "Another?"}]}]
    t = analyze(asm, reqs)[1]
    assert t.causes[0].code == "generation_prompt_mismatch"
    # the divergence is right where the previous prompt's generation prompt began to differ
    prev = analyze(asm, reqs)[0]
    assert prev.result.segments[-1].start <= t.first_divergence < prev.tokens + 4


def test_edited_message() -> None:
    edited = copy.deepcopy(BASE) + [{"role": "user", "content": "Another?"}]
    edited[1]["content"] = "Name an even prime."
    t = analyze(Assembler(template="qwen2.5"), [{"messages": BASE[:2]}, {"messages": edited}])[1]
    assert t.causes[0].code == "edited_message" and t.causes[0].seq == 1 and t.divergence_seq == 1


def test_reordered_messages() -> None:
    a = [{"role": "system", "content": "s"}, {"role": "user", "content": "first question"},
         {"role": "assistant", "content": "first answer"}, {"role": "user", "content": "second question"}]
    b = [a[0], a[3], a[2], a[1], {"role": "assistant", "content": "x"}, {"role": "user", "content": "third"}]
    t = analyze(Assembler(template="chatml"), [{"messages": a}, {"messages": b}])[1]
    assert t.causes[0].code == "reordered" and t.divergence_seq == 1


def test_tool_schema_key_order() -> None:
    shuffled = {"function": {"parameters": WEATHER["function"]["parameters"], "name": "get_weather",
                             "description": "Weather for a city."}, "type": "function"}
    reqs = [{"messages": BASE[:2], "tools": [WEATHER]},
            {"messages": BASE + [{"role": "user", "content": "More?"}], "tools": [shuffled]}]
    t = analyze(Assembler(template="qwen2.5"), reqs)[1]
    assert t.causes[0].code == "tool_schema_order" and t.divergence_kind in ("system", "tools")
    # changing a description is a different cause
    changed = copy.deepcopy(WEATHER)
    changed["function"]["description"] = "Weather and air quality for a city."
    reqs[1]["tools"] = [changed]
    assert analyze(Assembler(template="qwen2.5"), reqs)[1].causes[0].code == "tools_changed"


def test_volatile_value_in_tools() -> None:
    def tool(day: str) -> dict:
        t = copy.deepcopy(WEATHER)
        t["function"]["description"] = f"Weather for a city (data as of {day})."
        return t
    reqs = [{"messages": BASE[:2], "tools": [tool("2026-12-01")]},
            {"messages": BASE + [{"role": "user", "content": "More?"}], "tools": [tool("2026-12-02")]}]
    t = analyze(Assembler(template="qwen2.5"), reqs)[1]
    assert t.causes[0].code == "volatile_content" and "2026-12-02" in t.causes[0].message


def test_truncation_is_a_cause() -> None:
    msgs = [{"role": "system", "content": "s"}]
    for i in range(12):
        msgs += [{"role": "user", "content": f"question {i} " * 30}, {"role": "assistant", "content": f"answer {i}"}]
    reqs = [{"messages": msgs[:k]} for k in range(3, len(msgs), 2)]
    turns = analyze(Assembler(template="qwen2.5", context_window=900, reserve=100), reqs)
    cut = [t for t in turns[1:] if t.result.dropped]
    assert cut, "the window is small enough that later turns drop messages"
    first = cut[0]
    assert first.causes[0].code == "truncated" and first.first_divergence is not None
    assert all(t.result.budget.used <= 800 for t in turns)


@pytest.mark.parametrize("template", ["qwen2.5", "llama3", "deepseek-v3", "gpt-oss", "chatml"])
def test_held_prefix_is_exact(template: str) -> None:
    """first_divergence is the first index where held and new ids differ (or None when held is a prefix)."""
    asm = Assembler(template=template)
    reqs = [{"messages": BASE[:2]}, {"messages": BASE + [{"role": "user", "content": "Another?"}]}]
    prev, t = analyze(asm, reqs)
    new = t.result.token_ids
    assert t.held_tokens > prev.tokens  # the reply as generated is held too
    if t.first_divergence is None:
        assert t.reused_tokens == t.held_tokens <= len(new)
    else:
        assert t.reused_tokens == t.first_divergence
    # the reused part of this prompt is the previous prompt (as far as it goes): the same ids
    n = min(t.reused_tokens, prev.tokens)
    assert np.array_equal(new[:n], prev.result.token_ids[:n])
    if t.first_divergence is not None and t.first_divergence < prev.tokens:
        assert new[t.first_divergence] != prev.result.token_ids[t.first_divergence]
