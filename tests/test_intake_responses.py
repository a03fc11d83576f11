"""The Responses API (`POST /v1/responses`) read like its Chat Completions equivalent (issue 30).

The oracle is the Chat Completions request that says the same thing, written by hand here (and,
for the property test, by a converter written in this file from OpenAI's migration guide, not by
the intake under test): on every shipped template both give the same text and the same token ids.
Refusals name the item's path (`input[3].call_id`) and say why.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import Assembler
from workbench.errors import RequestError, WorkbenchError
from workbench.intake import detect_format, normalize
from workbench.sessions import parse_session
from workbench.templates import SHIPPED

WEATHER = {"name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def fcall(call_id: str, args: str, name: str = "get_weather") -> dict:
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name, "arguments": args,
            "status": "completed"}


def fout(call_id: str, output: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def out_msg(text: str) -> dict:
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def cc_call(call_id: str, args: str, name: str = "get_weather") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


# (id, Responses request, its Chat Completions equivalent)
PAIRS = [
    ("string_input", {"model": "gpt-5.4", "input": "What is the capital of France?"},
     {"model": "gpt-5.4", "messages": [{"role": "user", "content": "What is the capital of France?"}]}),
    ("instructions_and_parts",
     {"instructions": "You are terse.", "input": [
         {"role": "user", "content": [{"type": "input_text", "text": "Line one."},
                                      {"type": "input_text", "text": "Line two."}]}]},
     {"messages": [{"role": "system", "content": "You are terse."},
                   {"role": "user", "content": [{"type": "text", "text": "Line one."},
                                                {"type": "text", "text": "Line two."}]}]}),
    ("developer_and_history",
     {"input": [{"role": "developer", "content": "Answer in French."},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello"}]},
                out_msg("Bonjour !"),
                {"role": "user", "content": "And goodbye?"}]},
     {"messages": [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "Hello"},
                   {"role": "assistant", "content": "Bonjour !"}, {"role": "user", "content": "And goodbye?"}]}),
    ("parallel_tool_calls",
     {"instructions": "Use tools.", "tools": [{"type": "function", **WEATHER}],
      "input": [{"role": "user", "content": "Weather in Paris and Rome?"},
                fcall("call_a", '{"city": "Paris"}'), fcall("call_b", '{"city": "Rome"}'),
                fout("call_a", "18 C"), fout("call_b", "24 C"),
                out_msg("Paris 18 C, Rome 24 C."), {"role": "user", "content": "Thanks"}],
      "max_output_tokens": 512},
     {"tools": [{"type": "function", "function": WEATHER}],
      "messages": [{"role": "system", "content": "Use tools."},
                   {"role": "user", "content": "Weather in Paris and Rome?"},
                   {"role": "assistant", "content": None,
                    "tool_calls": [cc_call("call_a", '{"city": "Paris"}'), cc_call("call_b", '{"city": "Rome"}')]},
                   {"role": "tool", "tool_call_id": "call_a", "content": "18 C"},
                   {"role": "tool", "tool_call_id": "call_b", "content": "24 C"},
                   {"role": "assistant", "content": "Paris 18 C, Rome 24 C."},
                   {"role": "user", "content": "Thanks"}],
      "max_completion_tokens": 512}),
    ("reasoning_then_call",
     {"input": [{"role": "user", "content": "Weather in Oslo?"},
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Need the tool."}]},
                fcall("c1", '{"city": "Oslo"}'), fout("c1", "-3 C"),
                {"type": "reasoning", "id": "rs_2", "summary": [],
                 "content": [{"type": "reasoning_text", "text": "It is cold."}], "encrypted_content": "gAAAA..."},
                out_msg("It is -3 C in Oslo.")],
      "tools": [{"type": "function", **WEATHER}], "reasoning": {"effort": "low"}},
     {"tools": [{"type": "function", "function": WEATHER}], "reasoning_effort": "low",
      "messages": [{"role": "user", "content": "Weather in Oslo?"},
                   {"role": "assistant", "content": None, "reasoning_content": "Need the tool.",
                    "tool_calls": [cc_call("c1", '{"city": "Oslo"}')]},
                   {"role": "tool", "tool_call_id": "c1", "content": "-3 C"},
                   {"role": "assistant", "content": "It is -3 C in Oslo.", "reasoning_content": "It is cold."}]}),
    ("text_then_call_in_one_turn",
     {"input": [{"role": "user", "content": "Rome?"}, out_msg("Let me check."), fcall("c9", '{"city": "Rome"}'),
                fout("c9", [{"type": "input_text", "text": "24 C"}])],
      "tools": [{"type": "function", **WEATHER}]},
     {"tools": [{"type": "function", "function": WEATHER}],
      "messages": [{"role": "user", "content": "Rome?"},
                   {"role": "assistant", "content": "Let me check.", "tool_calls": [cc_call("c9", '{"city": "Rome"}')]},
                   {"role": "tool", "tool_call_id": "c9", "content": [{"type": "text", "text": "24 C"}]}]}),
    ("refusal_and_structured_output",
     {"input": [{"role": "user", "content": "Tell me a secret."},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "refusal", "refusal": "I can't share that."}]},
                {"role": "user", "content": "A joke then."}],
      "text": {"format": {"type": "json_schema", "name": "joke", "schema": {"type": "object"}, "strict": True}}},
     {"messages": [{"role": "user", "content": "Tell me a secret."},
                   {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't share that."}]},
                   {"role": "user", "content": "A joke then."}],
      "response_format": {"type": "json_schema", "json_schema": {"name": "joke", "schema": {"type": "object"},
                                                                 "strict": True}}}),
    ("cut_arguments_kept",
     {"input": [{"role": "user", "content": "Paris?"}, fcall("c1", '{"city": "Par'), fout("c1", "error: cut")],
      "tools": [{"type": "function", **WEATHER}]},
     {"tools": [{"type": "function", "function": WEATHER}],
      "messages": [{"role": "user", "content": "Paris?"},
                   {"role": "assistant", "content": None, "tool_calls": [cc_call("c1", '{"city": "Par')]},
                   {"role": "tool", "tool_call_id": "c1", "content": "error: cut"}]}),
]


@pytest.mark.parametrize("resp,chat", [p[1:] for p in PAIRS], ids=[p[0] for p in PAIRS])
def test_a_responses_request_is_its_chat_completions_equivalent(resp, chat):
    assert detect_format(resp) == "responses"
    r_conv, r_diags = normalize(resp)
    c_conv, c_diags = normalize(chat)
    assert r_conv.messages == c_conv.messages
    assert r_conv.tools == c_conv.tools
    assert r_conv.params == c_conv.params
    assert r_conv.source_format == "responses"
    assert {d.code for d in c_diags} <= {d.code for d in r_diags}


@pytest.mark.parametrize("template", sorted(SHIPPED))
def test_same_ids_on_every_shipped_template(template):
    """Every pair, both ways, on every shipped template: the same text and ids, or the same refusal
    (Gemma 3 has no tool turns, for one)."""
    asm = Assembler(template=template, cache=None)
    compared = 0
    for name, resp, chat in PAIRS:
        try:
            want = asm.assemble(chat)
        except WorkbenchError as exc:
            with pytest.raises(type(exc)):
                asm.assemble(resp)
            continue
        got = asm.assemble(resp)
        assert got.text == want.text, name
        assert np.array_equal(got.token_ids, want.token_ids), name
        assert [(s.kind, s.seq, s.start, s.end) for s in got.segments] == \
            [(s.kind, s.seq, s.start, s.end) for s in want.segments], name
        compared += 1
    assert compared >= 3, f"{template}: only {compared} pairs rendered"


# --- the property: any conversation, sent both ways --------------------------------------------------
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict]:
    """A Chat Completions conversation: user turns, assistant replies (text, tool calls, reasoning),
    tool results; always ends with a user message."""
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(TEXT)})
    n = 0
    for _ in range(draw(st.integers(1, 4))):
        msgs.append({"role": "user", "content": draw(TEXT)})
        kind = draw(st.sampled_from(["text", "calls", "none"]))
        if kind == "none":
            continue
        reply: dict = {"role": "assistant", "content": draw(TEXT) if kind == "text" or draw(st.booleans()) else None}
        if draw(st.booleans()):
            reply["reasoning_content"] = draw(TEXT)
        if kind == "calls":
            ids = [f"call_{n + j}" for j in range(draw(st.integers(1, 3)))]
            n += len(ids)
            reply["tool_calls"] = [cc_call(i, json.dumps({"city": draw(TEXT)})) for i in ids]
            msgs.append(reply)
            msgs += [{"role": "tool", "tool_call_id": i, "content": draw(TEXT)} for i in ids]
            msgs.append({"role": "assistant", "content": draw(TEXT)})
        else:
            msgs.append(reply)
    if msgs[-1]["role"] != "user":
        msgs.append({"role": "user", "content": draw(TEXT)})
    return msgs


def to_responses(messages: list[dict]) -> dict:
    """Chat Completions messages -> Responses input, as OpenAI's migration guide maps them: system first as
    `instructions`, an assistant message as its reasoning item, output message and function calls."""
    req: dict = {"input": []}
    rest = messages
    if messages and messages[0]["role"] == "system":
        req["instructions"], rest = messages[0]["content"], messages[1:]
    for m in rest:
        if m["role"] == "assistant":
            if "reasoning_content" in m:
                req["input"].append({"type": "reasoning", "id": "rs", "summary": [
                    {"type": "summary_text", "text": m["reasoning_content"]}]})
            if m.get("content") is not None:
                req["input"].append(out_msg(m["content"]))
            for c in m.get("tool_calls", []):
                req["input"].append(fcall(c["id"], c["function"]["arguments"], c["function"]["name"]))
        elif m["role"] == "tool":
            req["input"].append(fout(m["tool_call_id"], m["content"]))
        else:
            req["input"].append({"role": m["role"], "content": [{"type": "input_text", "text": m["content"]}]})
    return req


REACHED = {"n": 0}
ASSEMBLERS = {t: Assembler(template=t, cache=None) for t in ("qwen2.5", "llama3.1", "qwen3", "gpt-oss")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.sampled_from(sorted(ASSEMBLERS)))
def test_property_any_conversation_sent_both_ways_gives_the_same_ids(messages, template):
    asm = ASSEMBLERS[template]
    chat = {"messages": messages, "tools": [{"type": "function", "function": WEATHER}]}
    resp = {**to_responses(messages), "tools": [{"type": "function", **WEATHER}]}
    try:
        want = asm.assemble(chat)
    except WorkbenchError as exc:
        with pytest.raises(type(exc)):
            asm.assemble(resp)
        return
    got = asm.assemble(resp)
    assert np.array_equal(got.token_ids, want.token_ids)
    REACHED["n"] += 1


def test_the_property_reached_its_check():
    # Runs after the property test (file order): most generated conversations must have rendered.
    print(f"both-ways property: {REACHED['n']} examples compared")
    assert REACHED["n"] >= 30


# --- refusals: what cannot be rebuilt offline, and what OpenAI refuses too --------------------------
USER = {"role": "user", "content": "hi"}
BAD = [
    ("previous_response_id_alone", {"previous_response_id": "resp_1", "input": "more"},
     ["previous_response_id", "OpenAI's servers"]),
    ("conversation_param", {"conversation": "conv_1", "input": "more"}, ["conversation", "stored"]),
    ("builtin_web_search", {"input": [USER, {"type": "web_search_call", "id": "ws_1", "status": "completed"}]},
     ["input[1]", "web search", "built-in"]),
    ("builtin_mcp", {"input": [USER, {"type": "mcp_call", "id": "m", "name": "x", "server_label": "s"}]},
     ["input[1]", "MCP"]),
    ("computer_call", {"input": [USER, {"type": "computer_call", "id": "c", "call_id": "c", "action": {}}]},
     ["input[1]", "computer use"]),
    ("item_reference", {"input": [USER, {"type": "item_reference", "id": "msg_1"}]}, ["input[1]", "stored"]),
    ("output_without_call", {"input": [USER, fout("call_x", "1")]},
     ["input[1].call_id", "no earlier call", "call_x"]),
    ("output_answered_twice", {"input": [USER, fcall("a", "{}"), fout("a", "1"), fout("a", "2")]},
     ["input[3].call_id", "already answered"]),
    ("call_id_reused", {"input": [USER, fcall("a", "{}"), fcall("a", "{}")]},
     ["input[2].call_id", "already used by input[1]"]),
    ("call_without_call_id", {"input": [USER, {"type": "function_call", "name": "f", "arguments": "{}"}]},
     ["input[1].call_id"]),
    ("unknown_item", {"input": [USER, {"type": "hologram"}]}, ["input[1].type", "hologram"]),
    ("unknown_part", {"input": [{"role": "user", "content": [{"type": "input_smell", "x": 1}]}]},
     ["input[0].content[0].type", "input_smell"]),
    ("bad_role", {"input": [{"role": "wizard", "content": "x"}]}, ["input[0].role", "wizard"]),
    ("instructions_number", {"instructions": 5, "input": "x"}, ["instructions", "string"]),
    ("input_number", {"input": 5}, ["input", "string or a list"]),
    ("empty_input", {"input": []}, ["input", "at least one"]),
    ("text_format_unknown", {"input": "x", "text": {"format": {"type": "yaml"}}}, ["text.format"]),
]


@pytest.mark.parametrize("req,fragments", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_refusals_name_the_item(req, fragments):
    with pytest.raises(RequestError) as info:
        normalize(req)
    msg = str(info.value)
    assert msg.startswith(fragments[0]), msg
    for f in fragments[1:]:
        assert f in msg, f"{f!r} not in {msg!r}"


def test_cli_prints_one_error_line(tmp_path, capsys):
    from workbench.cli.main import main
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"input": [USER, {"type": "web_search_call", "id": "w", "status": "completed"}]}))
    assert main(["render", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "input[1]" in lines[0], lines


def test_built_in_tools_in_the_tool_list_are_reported_not_rendered():
    conv, diags = normalize({"input": "x", "tools": [{"type": "web_search"}, {"type": "function", **WEATHER}]})
    assert len(conv.tools) == 1 and "get_weather" in conv.tools[0]
    assert any(d.code == "server_tool_skipped" and "web_search" in d.message for d in diags)


def test_encrypted_reasoning_is_reported_opaque_and_not_rendered():
    secret = "gAAAAB" + "x" * 500
    req = {"input": [USER, {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": secret},
                     out_msg("ok"), {"role": "user", "content": "and?"}]}
    conv, diags = normalize(req)
    assert conv.messages[1].reasoning is None
    d = next(d for d in diags if d.code == "encrypted_reasoning")
    assert "506 characters" in d.message
    assert secret not in Assembler(template="qwen3", cache=None).assemble(req).text


# --- sessions and logs: turns, and previous_response_id resolved from the log ------------------------
def test_a_responses_conversation_file_has_a_turn_per_model_turn():
    s = parse_session({"instructions": "Be brief.", "tools": [{"type": "function", **WEATHER}], "input": [
        USER, fcall("a", '{"city": "Oslo"}'), fout("a", "1 C"), out_msg("1 C."),
        {"role": "user", "content": "Rome?"}, out_msg("Let me see."), fcall("b", '{"city": "Rome"}'), fout("b", "20")]})
    assert s.format == "responses"
    ends = [len(t["input"]) for t in s.turns]
    assert ends == [1, 3, 5, 8]


def test_previous_response_id_is_resolved_from_the_log():
    log = {"requests": [
        {"instructions": "Old rules.", "input": "Hi", "response": {"id": "resp_1", "output": [out_msg("Hello!")]}},
        {"instructions": "New rules.", "previous_response_id": "resp_1", "input": "Bye"}]}
    s = parse_session(log)
    asm = Assembler(template="qwen2.5", cache=None)
    got = asm.assemble(s.turns[1])
    want = asm.assemble({"messages": [{"role": "system", "content": "New rules."}, {"role": "user", "content": "Hi"},
                                      {"role": "assistant", "content": "Hello!"},
                                      {"role": "user", "content": "Bye"}]})
    assert np.array_equal(got.token_ids, want.token_ids)   # instructions are not carried over, as OpenAI does


def test_a_chain_the_log_does_not_hold_is_refused_naming_the_request():
    with pytest.raises(WorkbenchError, match=r"requests\[1\]\.previous_response_id: response 'resp_9'"):
        parse_session({"requests": [{"input": "Hi"}, {"previous_response_id": "resp_9", "input": "x"}]})


# --- a session's next Responses request parses only what is new -------------------------------------
NEXT = {"n": 0}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(0, 3), TEXT)
def test_property_the_next_request_parses_to_what_a_whole_parse_gives(messages, cut, edit):
    """Item by item, then with an item edited part-way: the incremental intake's conversation and
    diagnostics equal a whole parse's, and a session's ids equal a cold assembly's."""
    from workbench.intake.limits import IntakeLimits as Limits
    from workbench.intake.next_request import normalize_next
    req = to_responses(messages)
    items = req["input"]
    state = None
    limits = Limits()
    session = ASSEMBLERS["qwen2.5"].session()
    seqs = [items[:n] for n in range(1, len(items) + 1)]
    if len(items) > cut + 1:
        changed = list(items)
        changed[len(items) - 1 - cut] = {"role": "user", "content": edit}
        seqs.append(changed)
    for inp in seqs:
        r = {**req, "input": inp}
        try:
            want_conv, want_diags = normalize(r)
        except RequestError as exc:
            with pytest.raises(RequestError, match=re.escape(exc.message)):
                normalize_next(r, state, limits)
            state = None
            continue
        conv, diags, state = normalize_next(r, state, limits)
        assert conv == want_conv
        assert sorted(map(repr, diags)) == sorted(map(repr, want_diags))
        try:
            cold = ASSEMBLERS["qwen2.5"].assemble(r)
        except WorkbenchError:
            continue
        assert np.array_equal(session.assemble(r).token_ids, cold.token_ids)
    NEXT["n"] += 1


def test_the_next_request_property_reached_its_check():
    print(f"incremental Responses intake: {NEXT['n']} conversations")
    assert NEXT["n"] >= 30


def test_a_bundle_golden_of_a_responses_request_reproduces_its_ids(tmp_path):
    from workbench.export.bundle import export_bundle
    from workbench.export.loader import load_bundle
    asm = Assembler(template="qwen2.5", cache=None)
    resp = PAIRS[3][1]
    folder = export_bundle(asm, tmp_path / "b", [("responses.json", [resp])])
    goldens = list((folder / "goldens").glob("*.json"))
    assert goldens and any("function_call_output" in p.read_text() for p in goldens)
    assert np.array_equal(load_bundle(folder).assemble(resp).token_ids, asm.assemble(resp).token_ids)
