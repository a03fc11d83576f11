"""Diagnostics in the providers' terms (issue 18): every cause code of the prefix analysis maps to
Anthropic's cache-diagnostic type and OpenAI's prompt_cache_diagnostics reason, in `analyze --json`.

Each cause comes from a real assembly (real templates and tokenizers), as in test_analysis.py.
"""

from __future__ import annotations

import copy
import doctest
import json
from pathlib import Path

import pytest

from workbench import Assembler
from workbench.analysis import analyze, provider_terms
from workbench.analysis.prefix import ADVICE, TurnAnalysis
from workbench.analysis.provider_terms import BY_PLACE, TERMS, provider_diagnostics
from workbench.cli.main import main
from workbench.sessions import load_session

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}}, "required": ["city"]}}}
BASE = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "Seven."}]
MORE = {"role": "user", "content": "Another?"}


def second(template: str, reqs: list[dict], **kw) -> TurnAnalysis:  # type: ignore[no-untyped-def]
    return analyze(Assembler(template=template, **kw), reqs)[1]


def tool(description: str) -> dict:
    t = copy.deepcopy(WEATHER)
    t["function"]["description"] = description
    return t


def case_tool_schema_order() -> TurnAnalysis:
    shuffled = {"function": {"parameters": WEATHER["function"]["parameters"], "name": "get_weather",
                             "description": "Weather for a city."}, "type": "function"}
    return second("qwen2.5", [{"messages": BASE[:2], "tools": [WEATHER]},
                              {"messages": BASE + [MORE], "tools": [shuffled]}])


def case_tools_changed() -> TurnAnalysis:
    return second("qwen2.5", [{"messages": BASE[:2], "tools": [WEATHER]},
                              {"messages": BASE + [MORE], "tools": [tool("Weather and air quality for a city.")]}])


def case_volatile_tools() -> TurnAnalysis:
    return second("qwen2.5", [{"messages": BASE[:2], "tools": [tool("Weather (data as of 2026-12-01).")]},
                              {"messages": BASE + [MORE], "tools": [tool("Weather (data as of 2026-12-02).")]}])


def case_volatile_system() -> TurnAnalysis:
    return analyze(Assembler(template="qwen2.5"), load_session(SESSIONS / "timestamp_system.json").turns)[1]


def case_volatile_message() -> TurnAnalysis:
    a = [{"role": "system", "content": "s"}, {"role": "user", "content": "Report for 2026-12-01 please."}]
    b = [a[0], {"role": "user", "content": "Report for 2026-12-02 please."}, {"role": "assistant", "content": "ok"},
         MORE]
    return second("chatml", [{"messages": a}, {"messages": b}])


def case_system_changed() -> TurnAnalysis:
    changed = [{"role": "system", "content": "You are verbose and kind."}] + BASE[1:] + [MORE]
    return second("qwen2.5", [{"messages": BASE[:2]}, {"messages": changed}])


def case_edited_message() -> TurnAnalysis:
    edited = copy.deepcopy(BASE) + [MORE]
    edited[1]["content"] = "Name an even prime."
    return second("qwen2.5", [{"messages": BASE[:2]}, {"messages": edited}])


def case_reordered() -> TurnAnalysis:
    a = [{"role": "system", "content": "s"}, {"role": "user", "content": "first question"},
         {"role": "assistant", "content": "first answer"}, {"role": "user", "content": "second question"}]
    b = [a[0], a[3], a[2], a[1], {"role": "assistant", "content": "x"}, {"role": "user", "content": "third"}]
    return second("chatml", [{"messages": a}, {"messages": b}])


def case_truncated() -> TurnAnalysis:
    msgs = [{"role": "system", "content": "s"}]
    for i in range(12):
        msgs += [{"role": "user", "content": f"question {i} " * 30}, {"role": "assistant", "content": f"answer {i}"}]
    turns = analyze(Assembler(template="qwen2.5", context_window=900, reserve=100),
                    [{"messages": msgs[:k]} for k in range(3, len(msgs), 2)])
    return next(t for t in turns[1:] if t.causes and t.causes[0].code == "truncated")


def case_generation_prompt_mismatch() -> TurnAnalysis:
    return second("qwen3", [{"messages": BASE[:2]}, {"messages": BASE + [MORE]}],
                  template_kwargs={"enable_thinking": False})


def case_template_rewrite() -> TurnAnalysis:
    turns = analyze(Assembler(template="qwen3"), load_session(SESSIONS / "coding_corrections.json").turns)
    return next(t for t in turns[1:] if t.causes and t.causes[0].code == "template_rewrite")


# cause code, how it is made, what Anthropic and OpenAI would name (None: no change to them)
CASES = [
    ("tool_schema_order", case_tool_schema_order, "tools_changed", "tools_changed"),
    ("tools_changed", case_tools_changed, "tools_changed", "tools_changed"),
    ("volatile_content", case_volatile_tools, "tools_changed", "tools_changed"),
    ("volatile_content", case_volatile_system, "system_changed", "input_changed"),
    ("volatile_content", case_volatile_message, "messages_changed", "input_changed"),
    ("system_changed", case_system_changed, "system_changed", "input_changed"),
    ("edited_message", case_edited_message, "messages_changed", "input_changed"),
    ("reordered", case_reordered, "messages_changed", "input_changed"),
    ("truncated", case_truncated, "messages_changed", "input_changed"),
    ("generation_prompt_mismatch", case_generation_prompt_mismatch, None, None),
    ("template_rewrite", case_template_rewrite, None, None),
]


@pytest.mark.parametrize("code,make,anthropic,openai", CASES, ids=[f"{c[0]}-{c[1].__name__[5:]}" for c in CASES])
def test_each_cause_in_the_providers_terms(code: str, make, anthropic: str | None,  # type: ignore[no-untyped-def]
                                           openai: str | None) -> None:
    t = make()
    assert t.causes[0].code == code
    d = provider_diagnostics(t)
    assert d is not None
    assert d["causes"][0] == {"code": code, "anthropic": anthropic, "openai": openai}
    missed = min(t.held_tokens, t.tokens) - t.first_divergence
    if anthropic is None:
        # the requests are append-only to a provider: no miss reason, and a note that says why
        assert d["anthropic"] == {"cache_miss_reason": None} and d["openai"] == {"type": "cache_hit"}
        assert "append-only" in d["note"]
    else:
        reason = d["anthropic"]["cache_miss_reason"]
        assert reason == {"type": anthropic, "cache_missed_input_tokens": missed} and missed > 0
        assert d["openai"] == {"type": "cache_miss", "reason": openai, "cache_missed_tokens": missed,
                               "comparison_reusable_tokens": t.held_tokens}
        assert "note" not in d


def test_every_cause_code_is_mapped() -> None:
    # a cause code added to the analysis without a mapping would silently report "no change"
    assert set(ADVICE) <= set(TERMS) | {"volatile_content"}
    assert set(BY_PLACE) == {"tools", "system", "message"}
    assert {c[0] for c in CASES} == set(ADVICE)


def test_append_only_and_first_turns(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["analyze", str(SESSIONS / "tool_agent.json"), "--json"]) == 0
    turns = json.loads(capsys.readouterr().out)["turns"]
    assert turns[0]["provider_diagnostics"] is None                 # nothing to compare with
    for t in turns[1:]:
        d = t["provider_diagnostics"]
        assert d["anthropic"] == {"cache_miss_reason": None} and d["openai"] == {"type": "cache_hit"}
        assert d["causes"] == [] and "note" not in d
        assert d["sources"]["anthropic"].startswith("https://") and d["sources"]["checked"] == "2026-12-04"
        # the contract's fields are all still there, unrenamed
        assert {"turn", "tokens", "reused_tokens", "first_divergence", "divergence_seq", "causes"} <= set(t)


def test_cli_json_names_the_system_prompt_change(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["analyze", str(SESSIONS / "timestamp_system.json"), "--json"]) == 0
    for t in json.loads(capsys.readouterr().out)["turns"][1:]:
        d = t["provider_diagnostics"]
        assert d["anthropic"]["cache_miss_reason"]["type"] == "system_changed"
        assert d["openai"]["reason"] == "input_changed"
        assert d["openai"]["cache_missed_tokens"] == min(t["held_tokens"], t["tokens"]) - t["first_divergence"]


def test_module_docstring_examples_run() -> None:
    assert doctest.testmod(provider_terms).attempted > 0 and doctest.testmod(provider_terms).failed == 0
