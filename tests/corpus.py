"""Conversations used by the exactness tests of every template family.

Each case is an OpenAI-style request plus feature tags, so a test can pick the
cases its format supports (Mistral needs alternating turns, Llama 3.0 has no
tools, ...). Content covers unicode, empty text, whitespace at the edges,
markdown, JSON, tool calls (single and parallel) and tool results.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
FLIGHTS = {"type": "function", "function": {
    "name": "search_flights", "description": "Search flights between two airports on a date.",
    "parameters": {"type": "object", "properties": {
        "origin": {"type": "string"}, "destination": {"type": "string"},
        "date": {"type": "string", "description": "YYYY-MM-DD"}}, "required": ["origin", "destination", "date"]}}}


def _call(cid: str, name: str, args: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


@dataclass
class Case:
    name: str
    messages: list[dict]
    tools: list[dict] | None = None
    tags: set[str] = field(default_factory=set)

    def request(self) -> dict:
        r: dict = {"messages": copy.deepcopy(self.messages)}
        if self.tools:
            r["tools"] = copy.deepcopy(self.tools)
        return r


SYS = {"role": "system", "content": "You are a concise assistant. Answer in plain English."}

CASES: list[Case] = [
    Case("single_user", [{"role": "user", "content": "What is the capital of France?"}]),
    Case("system_user", [SYS, {"role": "user", "content": "Name three primary colours."}], tags={"system"}),
    Case("multi_turn", [SYS,
                        {"role": "user", "content": "Hi there!"},
                        {"role": "assistant", "content": "Hello! How can I help you today?"},
                        {"role": "user", "content": "Tell me a fun fact about octopuses."},
                        {"role": "assistant", "content": "Octopuses have three hearts and blue blood."},
                        {"role": "user", "content": "Why is their blood blue?"}], tags={"system"}),
    Case("no_system_multi", [{"role": "user", "content": "2+2?"},
                             {"role": "assistant", "content": "4"},
                             {"role": "user", "content": "And 3+3?"}]),
    Case("unicode", [SYS, {"role": "user", "content": "Traduis : « naïve café » — et écris 中文 😀 s'il te plaît."},
                     {"role": "assistant", "content": "« café naïf » ; 中文：咖啡 ☕ — voilà !"},
                     {"role": "user", "content": "Ελληνικά? Русский? עברית? हिन्दी?"}], tags={"system"}),
    Case("whitespace_edges", [{"role": "user", "content": "  leading and trailing spaces  "},
                              {"role": "assistant", "content": "\nnewline first\n\n"},
                              {"role": "user", "content": "tabs\tinside\tand a trailing newline\n"}]),
    Case("markdown_code", [SYS, {"role": "user", "content": "Write a Python function that reverses a list."},
                           {"role": "assistant", "content": "```python\ndef rev(xs):\n    return xs[::-1]\n```\n"
                                                            "It returns a new list."},
                           {"role": "user", "content": "Now in place, please. {\"json\": [1, 2]}"}],
         tags={"system"}),
    Case("empty_assistant", [{"role": "user", "content": "Say nothing."},
                             {"role": "assistant", "content": ""},
                             {"role": "user", "content": "Thanks."}], tags={"empty"}),
    Case("ends_with_assistant", [SYS, {"role": "user", "content": "Start a haiku about rain."},
                                 {"role": "assistant", "content": "Soft rain on the roof"}],
         tags={"system", "ends_assistant"}),
    Case("long_text", [SYS, {"role": "user", "content": " ".join(
        f"Paragraph {i}: the quick brown fox jumps over the lazy dog while numbers {i * 37} and "
        f"{i * 1.5} appear." for i in range(120))}], tags={"system"}),
    Case("tools_no_call", [SYS, {"role": "user", "content": "What's the weather in Paris?"}],
         tools=[WEATHER, FLIGHTS], tags={"system", "tools"}),
    Case("tools_no_system", [{"role": "user", "content": "Weather in Tokyo, in fahrenheit?"}],
         tools=[WEATHER], tags={"tools"}),
    Case("tool_call_round", [SYS, {"role": "user", "content": "What's the weather in Paris?"},
                             {"role": "assistant", "content": None, "tool_calls": [
                                 _call("call0abc1", "get_weather", '{"city": "Paris", "unit": "celsius"}')]},
                             {"role": "tool", "tool_call_id": "call0abc1",
                              "content": '{"temperature": 18, "condition": "cloudy"}'},
                             {"role": "assistant", "content": "It is 18 °C and cloudy in Paris."},
                             {"role": "user", "content": "And tomorrow?"}],
         tools=[WEATHER], tags={"system", "tools", "tool_calls"}),
    Case("tool_call_pending", [SYS, {"role": "user", "content": "Find flights from SFO to JFK on 2026-12-24."},
                               {"role": "assistant", "content": None, "tool_calls": [
                                   _call("call1xyz2", "search_flights",
                                         '{"origin": "SFO", "destination": "JFK", "date": "2026-12-24"}')]},
                               {"role": "tool", "tool_call_id": "call1xyz2",
                                "content": '[{"flight": "UA 123", "price": 412}]'}],
         tools=[WEATHER, FLIGHTS], tags={"system", "tools", "tool_calls", "ends_tool"}),
    Case("parallel_calls", [{"role": "user", "content": "Weather in Paris and in Berlin?"},
                            {"role": "assistant", "content": None, "tool_calls": [
                                _call("callPar01", "get_weather", '{"city": "Paris"}'),
                                _call("callPar02", "get_weather", '{"city": "Berlin"}')]},
                            {"role": "tool", "tool_call_id": "callPar01", "content": '{"temperature": 18}'},
                            {"role": "tool", "tool_call_id": "callPar02", "content": '{"temperature": 11}'},
                            {"role": "assistant", "content": "Paris: 18 °C. Berlin: 11 °C."},
                            {"role": "user", "content": "Which is warmer?"}],
         tools=[WEATHER], tags={"tools", "tool_calls", "parallel"}),
    Case("reasoning", [{"role": "user", "content": "Is 17 prime?"},
                       {"role": "assistant", "content": "Yes, 17 is prime.",
                        "reasoning_content": "17 is not divisible by 2, 3 or 4; sqrt(17) < 5."},
                       {"role": "user", "content": "And 21?"}], tags={"reasoning"}),
    Case("reasoning_last", [{"role": "user", "content": "Is 19 prime?"},
                            {"role": "assistant", "content": "Yes.",
                             "reasoning_content": "19 has no divisors below 5."}],
         tags={"reasoning", "ends_assistant"}),
]


def cases(*, exclude: set[str] = frozenset(), require: set[str] = frozenset()) -> list[Case]:
    return [c for c in CASES if not (c.tags & exclude) and require <= c.tags]
