"""Intake: OpenAI and Anthropic requests normalize to the same Conversation."""

from __future__ import annotations

import dataclasses

import pytest

from workbench import Assembler
from workbench.intake import detect_format, normalize
from workbench.sessions import conversation_turns, load_session

OPENAI = {"model": "gpt-4o", "max_tokens": 300, "temperature": 0.2, "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Paris?"}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "18 C"},
    {"role": "assistant", "content": "It is 18 C."},
    {"role": "user", "content": "Thanks"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                 "parameters": {"type": "object", "properties": {}}}}]}

ANTHROPIC = {"model": "claude", "max_tokens": 300, "temperature": 0.2,
             "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
             "messages": [
                 {"role": "user", "content": [{"type": "text", "text": "Weather"},
                                              {"type": "text", "text": "in Paris?"}]},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                    "input": {"city": "Paris"}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]},
                 {"role": "assistant", "content": "It is 18 C."},
                 {"role": "user", "content": "Thanks"}],
             "tools": [{"name": "get_weather", "description": "Weather",
                        "input_schema": {"type": "object", "properties": {}}}]}


def test_detection():
    assert detect_format(OPENAI) == "openai"
    assert detect_format(ANTHROPIC) == "anthropic"
    assert detect_format({"messages": [{"role": "user", "content": "x"}]}) == "openai"
    assert detect_format({"format": "anthropic", "messages": []}) == "anthropic"


def test_openai_and_anthropic_normalize_alike():
    a, _ = normalize(OPENAI)
    b, _ = normalize(ANTHROPIC)
    strip = lambda c: [(m.role, m.content, m.tool_calls, m.tool_call_id) for m in c.messages]  # noqa: E731
    # Anthropic joins text blocks with a blank line, OpenAI text parts with a newline
    assert strip(a)[2:] == strip(b)[2:]
    assert [m.sequence for m in a.messages] == list(range(6))
    assert a.tools == b.tools
    assert a.params.max_tokens == b.params.max_tokens == 300
    assert b.messages[0].cache_control and b.messages[0].role == "system"


def test_conversation_is_immutable():
    c, _ = normalize(OPENAI)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.messages[0].content = "changed"  # type: ignore[misc]


def test_same_prompt_from_both_formats():
    asm = Assembler(template="qwen2.5")
    o = dict(OPENAI, messages=[dict(m) for m in OPENAI["messages"]])
    o["messages"][1] = {"role": "user", "content": "Weather\n\nin Paris?"}
    assert asm.assemble(o).text == asm.assemble(ANTHROPIC).text


def test_turns_of_a_conversation():
    turns = conversation_turns(OPENAI)
    assert [len(t["messages"]) for t in turns] == [2, 4, 6]
    assert all(t["tools"] == OPENAI["tools"] for t in turns)


def test_log_sessions_use_their_requests():
    s = load_session("sample_sessions/timestamp_system.json")
    assert len(s.turns) == len(s.raw["requests"])
    assert s.turn(2)["messages"] == s.raw["requests"][1]["messages"]
