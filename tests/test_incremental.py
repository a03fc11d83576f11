"""Incremental assembly (issue 4): a session's next prompt reuses the unchanged prefix and has
exactly the ids of a cold assembly, for every shipped template, including the ones that rewrite
earlier turns (Qwen 3 strips reasoning, Mistral moves the system prompt, gpt-oss drops analysis)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import Assembler
from workbench.errors import TemplateError
from workbench.sessions import load_session
from workbench.templates import shipped_names

ROOT = Path(__file__).resolve().parent.parent
WORDS = st.lists(st.sampled_from(["hello", " world", " café", " 中文", " 😀", "\n", " x=1;", " über", " the", " ok.",
                                  "<think>", " 42"]), min_size=1, max_size=12).map("".join)
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}}, "required": ["city"]}}}
_ASM: dict[str, Assembler] = {}


def asm(name: str) -> Assembler:
    if name not in _ASM:
        _ASM[name] = Assembler(template=name, context_window=1_000_000, reserve=1000)
    return _ASM[name]


def same(a, b) -> None:  # type: ignore[no-untyped-def]
    assert a.text == b.text
    assert np.array_equal(a.token_ids, b.token_ids)
    assert [(s.kind, s.role, s.seq, s.text, s.start, s.end) for s in a.segments] == \
        [(s.kind, s.role, s.seq, s.text, s.start, s.end) for s in b.segments]
    assert np.array_equal(np.concatenate([s.token_ids for s in a.segments]), a.token_ids)
    assert a.budget.used == b.budget.used and a.budget.parts == b.budget.parts
    assert a.budget.by_kind == b.budget.by_kind
    assert a.cache_key == b.cache_key
    def diags(r):  # type: ignore[no-untyped-def]
        return sorted((d.level, d.code, -1 if d.seq is None else d.seq, d.message) for d in r.diagnostics)
    assert diags(a) == diags(b)


def tool_round(cid: str, result: str) -> list[dict]:
    """An assistant's call of the weather tool and its result."""
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
            {"role": "tool", "tool_call_id": cid, "content": result}]


@st.composite
def session_steps(draw):  # type: ignore[no-untyped-def]
    """A growing conversation, with occasional edits, as the requests a client would send."""
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(WORDS)})
    tools = draw(st.booleans())
    steps, calls = [], 0
    for _ in range(draw(st.integers(3, 7))):
        msgs.append({"role": "user", "content": draw(WORDS)})
        steps.append(copy.deepcopy(msgs))
        if tools and draw(st.integers(0, 2)) == 0:
            msgs += tool_round(f"call{calls:05d}", draw(WORDS))
            calls += 1
            steps.append(copy.deepcopy(msgs))
        reply = {"role": "assistant", "content": draw(WORDS)}
        if draw(st.integers(0, 3)) == 0:
            reply["reasoning_content"] = draw(WORDS)
        msgs.append(reply)
        edit = draw(st.integers(0, 5))
        if edit == 1:  # a system message in the history (DeepSeek gathers them all at the start)
            msgs.append({"role": "system", "content": draw(WORDS)})
        if edit == 0 and len(msgs) > 2:  # the client edits an earlier message
            i = draw(st.integers(0, len(msgs) - 1))
            if msgs[i].get("content"):
                msgs[i] = {**msgs[i], "content": msgs[i]["content"] + " (edited)"}
    steps.append(copy.deepcopy(msgs) + [{"role": "user", "content": "last"}])
    return {"steps": steps, "tools": [WEATHER] if tools else None}


@pytest.mark.parametrize("template", shipped_names())
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=session_steps())
def test_incremental_equals_cold(template: str, case: dict) -> None:
    a = asm(template)
    session = a.session()
    for msgs in case["steps"]:
        req = {"messages": msgs, **({"tools": case["tools"]} if case["tools"] else {})}
        try:
            cold = a.assemble(req)
        except TemplateError:
            return  # this template refuses the shape (alternation, tool ids ...): nothing to compare
        inc = session.assemble(req)
        same(inc, cold)
        assert all(s.source in ("local", "fresh") for s in inc.segments)
        assert inc.reused_segments == sum(1 for s in inc.segments if s.source == "local")


@pytest.mark.parametrize("template", ["qwen2.5", "qwen3", "llama3.1", "mistral-v7", "deepseek-v3", "gpt-oss"])
def test_sample_sessions_reuse_and_stay_exact(template: str) -> None:
    a = asm(template)
    for name in ("tool_agent", "coding_corrections", "support_chat"):
        session = a.session()
        reused = 0
        for req in load_session(ROOT / "sample_sessions" / f"{name}.json").turns:
            try:
                cold = a.assemble(req)
            except TemplateError:
                break
            inc = session.assemble(req)
            same(inc, cold)
            reused += inc.reused_segments
        if len(session) > 2:
            assert reused > 0, f"{template} reused nothing on {name}"


def test_edit_last_message_reuses_everything_before_it() -> None:
    req = load_session(ROOT / "sample_sessions" / "support_chat.json").turn(None)
    msgs = req["messages"]
    a = asm("qwen2.5")
    session = a.session()
    first = session.assemble(req)
    edited = {**req, "messages": msgs[:-1] + [{**msgs[-1], "content": msgs[-1]["content"] + " Thanks!"}]}
    second = session.assemble(edited)
    same(second, a.assemble(edited))
    assert second.reused_segments >= len(first.segments) - 6
    assert [s.source for s in second.segments][:second.reused_segments] == ["local"] * second.reused_segments
    assert second.segments[-1].source == "fresh"
    # results handed out never change what the session keeps
    with pytest.raises(ValueError):
        second.token_ids[0] = 0


def test_changed_system_prompt_is_assembled_cold() -> None:
    a = asm("qwen2.5")
    s = a.session()
    s.assemble({"messages": [{"role": "system", "content": "A"}, {"role": "user", "content": "hi"}]})
    r = s.assemble({"messages": [{"role": "system", "content": "B"}, {"role": "user", "content": "hi"}]})
    assert r.reused_segments == 0 and "B" in r.text


def test_custom_template_uses_the_verified_path(tmp_path: Path) -> None:
    """A template the probe cannot vouch for: everything is rendered, only the tail is tokenized."""
    src = (asm("chatml").template.source + "{# total: {{ messages | length }} #}")
    path = tmp_path / "custom.jinja"
    path.write_text(src, encoding="utf-8")
    a = Assembler(template=str(path), tokenizer="qwen2.5", context_window=1_000_000, reserve=10)
    s = a.session()
    msgs = [{"role": "user", "content": f"q{i}"} if i % 2 == 0 else {"role": "assistant", "content": f"a{i}"}
            for i in range(9)]
    s.assemble({"messages": msgs[:7]})
    r = s.assemble({"messages": msgs})
    same(r, a.assemble({"messages": msgs}))
    assert r.reused_segments > 0


def test_session_keeps_a_bounded_history() -> None:
    a = asm("qwen2.5")
    s = a.session(keep=3)
    turns = load_session(ROOT / "sample_sessions" / "tool_agent.json").turns
    for t in turns:
        s.assemble(t)
    assert len(s) == len(turns) and len(s.results) == 3 and list(s.requests) == list(turns[-3:])
    assert s.last is s.results[-1] and s.last.reused_segments > 0


def test_cleaning_diagnostics_carry_over_exactly() -> None:
    """Empty messages, a late system message, a call without its result, a result away from its call:
    the session cleans only the new tail and reports exactly what a cold cleaning reports."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "callA0001", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}
    steps = [
        [{"role": "user", "content": "  "}],
        [{"role": "user", "content": "  "}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"},
         call],
        [{"role": "user", "content": "  "}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"},
         call, {"role": "user", "content": "wait"}, {"role": "tool", "tool_call_id": "callA0001", "content": "sun"}],
        [{"role": "user", "content": "  "}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"},
         call, {"role": "user", "content": "wait"}, {"role": "tool", "tool_call_id": "callA0001", "content": "sun"},
         {"role": "assistant", "content": ""}, {"role": "system", "content": "late"}, {"role": "user", "content": "x"}],
    ]
    a = Assembler(template="chatml", context_window=100_000, reserve=10, cache=None)
    s = a.session()
    codes = set()
    for msgs in steps:
        req = {"messages": msgs, "tools": [WEATHER]}
        r, c = s.assemble(req), a.assemble(req)
        same(r, c)
        codes |= {d.code for d in r.diagnostics}
    assert {"empty_message", "missing_tool_result", "tool_result_separated", "system_not_first"} <= codes


def test_separated_result_at_the_boundary() -> None:
    """A call, a user message, then its result: the result is separated whether or not the call and
    the user message were already in the previous request."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"callB000{i}", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        for i in (1, 2)]}
    base = [{"role": "user", "content": "go"}, call, {"role": "user", "content": "hm"},
            {"role": "tool", "tool_call_id": "callB0001", "content": "sun"}]
    a = Assembler(template="chatml", context_window=100_000, reserve=10, cache=None)
    s = a.session()
    for msgs in (base, base + [{"role": "tool", "tool_call_id": "callB0002", "content": "rain"},
                               {"role": "user", "content": "and?"}]):
        req = {"messages": msgs, "tools": [WEATHER]}
        r = s.assemble(req)
        same(r, a.assemble(req))
    assert sum(d.code == "tool_result_separated" for d in r.diagnostics) == 2


def test_an_edit_the_template_trims_away_gets_its_diagnostic_again():
    """Found by the truncation property (llama3): an earlier user message edited only by a trailing
    newline renders to the same text, so its segment is reused, but the template now trims it: the
    incremental result says so, as a cold assembly does."""
    asm = Assembler(template="llama3", cache=None)
    session = asm.session()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"},
            {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "How are you?"}]
    session.assemble({"messages": msgs})
    edited = [msgs[0], {"role": "user", "content": "Hello there\n"}, *msgs[2:],
              {"role": "assistant", "content": "Fine."}, {"role": "user", "content": "Good."}]
    inc, cold = session.assemble({"messages": edited}), asm.assemble({"messages": edited})
    same(inc, cold)
    assert inc.reused_segments > 0
    assert any(d.code == "content_trimmed" and d.seq == 1 for d in inc.diagnostics)
