"""Strict intake (issue 14, case 8): what plain JSON cannot carry, and what a request must not
say twice or leave empty, is refused with a RequestError that names the exact field.

Each hostile row has an honest twin that must pass: the checks refuse the payload, not the shape.
The payloads are the issue's: a lone surrogate in a tool-call name or id and in an Anthropic
tool_use name, nesting of thousands of levels, a 5,000-digit integer, NaN and Infinity, duplicate
tool-call ids, an empty Anthropic tool name, "context_window": "8k".
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict

import numpy as np
import pytest
from needs import need

from workbench import Assembler, strict_json
from workbench.errors import RequestError, WorkbenchError
from workbench.intake import IntakeLimits, normalize
from workbench.intake.next_request import normalize_next

USER = {"role": "user", "content": "hi"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}}}}}


def nest(levels: int, leaf=None, key: str | None = "a"):
    """`levels` containers, one inside the other (around `leaf`, when given), built without recursion."""
    v, wraps = (({} if key is not None else []), levels - 1) if leaf is None else (leaf, levels)
    for _ in range(wraps):
        v = {key: v} if key is not None else [v]
    return v


def call(cid="call_1", name="get_weather", arguments='{"city": "Paris"}'):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def calls(*cs, content=None):
    return {"role": "assistant", "content": content, "tool_calls": list(cs)}


def result(cid="call_1", content="18 C"):
    return {"role": "tool", "tool_call_id": cid, "content": content}


def openai(*msgs, **rest):
    return {"messages": [USER, *msgs], "tools": [WEATHER], **rest}


def anthropic(*msgs, tools=None, **rest):
    return {"system": "Be brief.", "messages": [USER, *msgs],
            "tools": tools if tools is not None else [{"name": "get_weather", "input_schema": {"type": "object"}}],
            **rest}


def tool_use(tid="toolu_1", name="get_weather", inp=None):
    return {"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": name, "input": inp or {}}]}


def tool_result(tid="toolu_1", content="18 C"):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": content}]}


# (id, hostile request, fragments the error must hold: the field's exact path first)
HOSTILE = [
    # lone surrogates, everywhere a string can be
    ("surrogate_call_id", openai(calls(call("call_\ud800")), result("call_\ud800")),
     ["messages[1].tool_calls[0].id", "surrogate"]),
    ("surrogate_call_name", openai(calls(call(name="get_\ud800")), result()),
     ["messages[1].tool_calls[0].function.name", "surrogate"]),
    ("surrogate_in_arguments_key", openai(calls(call(arguments={"\ud83d": 1})), result()),
     ["messages[1].tool_calls[0].function.arguments", "surrogate"]),
    ("surrogate_tool_call_id_of_result", openai(calls(call()), result("call_1\udfff")),
     ["messages[2].tool_call_id", "surrogate"]),
    ("surrogate_anthropic_tool_use_name", anthropic(tool_use(name="get_\udc00"), tool_result()),
     ["messages[1].content[0].name", "surrogate"]),
    ("surrogate_anthropic_tool_use_id", anthropic(tool_use(tid="t\ud800"), tool_result("t\ud800")),
     ["messages[1].content[0].id", "surrogate"]),
    ("surrogate_anthropic_result_id", anthropic(tool_use(), tool_result("toolu_1\ud800")),
     ["messages[2].content[0].tool_use_id", "surrogate"]),
    ("surrogate_anthropic_system", {"system": [{"type": "text", "text": "s\ud800"}], "messages": [USER]},
     ["system[0].text", "surrogate"]),
    ("surrogate_tool_description", {"messages": [USER], "tools": [
        {"type": "function", "function": {"name": "f", "description": "d\ud800", "parameters": {}}}]},
     ["tools[0].function.description", "surrogate"]),
    ("surrogate_tool_schema_key", {"messages": [USER], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"properties": {"\udc00": {}}}}}]},
     ["tools[0].function.parameters.properties", "key", "surrogate"]),
    ("surrogate_variables", {"messages": [USER], "variables": {"who": "x\ud800"}}, ["variables.who", "surrogate"]),
    ("surrogate_model", {"messages": [USER], "model": "m\ud800"}, ["model", "surrogate"]),
    ("surrogate_stop", {"messages": [USER], "stop": ["\ud800"]}, ["stop[0]", "surrogate"]),
    ("surrogate_unknown_field", {"messages": [{"role": "user", "content": "x", "audio": {"id": "\ud800"}}]},
     ["messages[0].audio.id", "surrogate"]),
    ("surrogate_request_key", {"messages": [USER], "meta\ud800": 1}, ["'meta\\ud800'", "surrogate"]),
    ("surrogate_content_part", {"messages": [{"role": "user", "content": [{"type": "text", "text": "\ud800"}]}]},
     ["messages[0].content[0].text", "surrogate"]),
    # nesting (the issue: >= 3,000 levels raised RecursionError)
    ("deep_tool_schema", {"messages": [USER], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": nest(3000)}}]},
     ["tools[0].function.parameters.a.a", "more", "nested more than 200 levels"]),
    ("deep_arguments_object", openai(calls(call(arguments=nest(5000))), result()),
     ["messages[1].tool_calls[0].function.arguments.a", "nested more than 200"]),
    ("deep_variables", {"messages": [USER], "variables": {"v": nest(3000, key=None)}},
     ["variables.v[0][0]", "nested more than 200"]),
    ("deep_unknown_field", {"messages": [{"role": "user", "content": "x", "extra": nest(3000)}]},
     ["messages[0].extra.a", "nested"]),
    ("deep_anthropic_input", anthropic(tool_use(inp=nest(3000)), tool_result()),
     ["messages[1].content[0].input.a", "nested"]),
    ("deep_extra_param", {"messages": [USER], "metadata": nest(3000)}, ["metadata.a", "nested"]),
    # huge integers (the issue: a 5,000-digit integer crashed the CLI)
    ("int_5000_digits_in_memory", {"messages": [USER], "max_tokens": 10 ** 5000}, ["max_tokens", "digits"]),
    ("int_in_tool_schema", {"messages": [USER], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"maximum": -(10 ** 150)}}}]},
     ["tools[0].function.parameters.maximum", "over the limit"]),
    # NaN and Infinity (the issue: rendered as invalid JSON)
    ("nan_temperature", {"messages": [USER], "temperature": float("nan")}, ["temperature", "finite"]),
    ("inf_top_p", {"messages": [USER], "top_p": float("inf")}, ["top_p", "finite"]),
    ("nan_in_arguments_object", openai(calls(call(arguments={"x": [math.nan]})), result()),
     ["messages[1].tool_calls[0].function.arguments.x[0]", "finite"]),
    ("inf_in_tool_schema", {"messages": [USER], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"default": math.inf}}}]},
     ["tools[0].function.parameters.default", "finite"]),
    ("nan_in_response_format", {"messages": [USER], "response_format": {"type": "json_object", "x": math.nan}},
     ["response_format.x", "finite"]),
    ("nan_in_anthropic_input", anthropic(tool_use(inp={"x": math.nan}), tool_result()),
     ["messages[1].content[0].input.x", "finite"]),
    # tool-call ids: one id for two calls that wait for their results
    ("duplicate_parallel_call_ids", openai(calls(call("a"), call("a", arguments="{}")), result("a"), result("a")),
     ["messages[1].tool_calls[1].id", "'a'", "messages[1].tool_calls[0]"]),
    ("duplicate_id_before_result", openai(calls(call("a")), calls(call("a")), result("a")),
     ["messages[2].tool_calls[0].id", "messages[1].tool_calls[0]", "no result yet"]),
    ("duplicate_anthropic_tool_use_ids", anthropic(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "get_weather", "input": {}},
                                          {"type": "tool_use", "id": "t", "name": "get_weather", "input": {}}]},
        tool_result("t")), ["messages[1].content[1].id", "'t'"]),
    ("empty_call_id", openai(calls(call("")), result("")), ["messages[1].tool_calls[0].id", "non-empty"]),
    # empty names
    ("empty_anthropic_tool_name", anthropic(tools=[{"name": "", "input_schema": {"type": "object"}}]),
     ["tools[0].name", "non-empty"]),
    ("empty_openai_tool_name", {"messages": [USER], "tools": [{"type": "function", "function": {"name": ""}}]},
     ["tools[0].function.name", "non-empty"]),
    ("empty_function_name", openai(calls(call(name="")), result()),
     ["messages[1].tool_calls[0].function.name", "non-empty"]),
    ("empty_tool_use_name", anthropic(tool_use(name=""), tool_result()), ["messages[1].content[0].name", "non-empty"]),
    ("empty_tool_use_id", anthropic(tool_use(tid=""), tool_result("")), ["messages[1].content[0].id", "non-empty"]),
    ("empty_tool_result_id", anthropic(tool_use(), tool_result("")), ["messages[2].content[0].tool_use_id"]),
    # option types: silently ignored before
    ("context_window_8k", {"messages": [USER], "context_window": "8k"}, ["context_window", "positive integer", "'8k'"]),
    ("context_window_true", {"messages": [USER], "context_window": True}, ["context_window", "True"]),
    ("context_window_zero", {"messages": [USER], "context_window": 0}, ["context_window", "positive"]),
    ("context_window_float", {"messages": [USER], "context_window": 8192.0}, ["context_window", "8192.0"]),
    ("stream_string", {"messages": [USER], "stream": "yes"}, ["stream", "true or false"]),
    ("tool_choice_number", {"messages": [USER], "tool_choice": 5}, ["tool_choice", "string or an object"]),
    ("response_format_string", {"messages": [USER], "response_format": "json"}, ["response_format", "object"]),
    ("title_not_string", {"messages": [USER], "title": ["x"]}, ["title", "string"]),
    ("max_tokens_float", {"messages": [USER], "max_tokens": 10.5}, ["max_tokens", "integer"]),
    # shapes plain JSON has no word for
    ("non_string_key", {"messages": [USER], "variables": {1: "x"}}, ["variables", "key must be a string"]),
    ("set_value", {"messages": [USER], "variables": {"s": {1, 2}}}, ["variables.s", "set values are not JSON"]),
    ("request_key_not_string", {"messages": [USER], 7: "x"}, ["a request's keys must be strings"]),
    ("role_is_a_list", {"messages": [{"role": ["user"], "content": "x"}]}, ["messages[0].role", "unknown role"]),
    ("no_messages", {"messages": []}, ["messages", "at least one"]),
]


# Arguments text that OpenAI takes as sent (it never parses a call's arguments in the history): kept,
# with a warning naming the field; the template gets {} in its place, as vLLM's preprocessing gives it.
KEPT_ARGUMENTS = [
    ("surrogate_escaped_in_arguments", openai(calls(call(arguments='{"city": "\\udc00"}')), result()),
     ["messages[1].tool_calls[0].function.arguments", "at city", "surrogate"]),
    ("deep_arguments_text", openai(calls(call(arguments="[" * 10_000 + "]" * 10_000)), result()),
     ["messages[1].tool_calls[0].function.arguments", "nested more than 200 levels", "character"]),
    ("int_5000_digits_in_arguments_text", openai(calls(call(arguments='{"n": ' + "9" * 5000 + "}")), result()),
     ["messages[1].tool_calls[0].function.arguments", "longer than 100 digits"]),
    ("int_200_digits_in_arguments_text", openai(calls(call(arguments='{"n": ' + "9" * 200 + "}")), result()),
     ["messages[1].tool_calls[0].function.arguments", "at n", "over the limit of 100"]),
    ("nan_in_arguments_text", openai(calls(call(arguments='{"x": NaN}')), result()),
     ["messages[1].tool_calls[0].function.arguments", "NaN is not a JSON number"]),
    ("infinity_in_arguments_text", openai(calls(call(arguments='{"x": -Infinity}')), result()),
     ["messages[1].tool_calls[0].function.arguments", "-Infinity"]),
    ("overflow_in_arguments_text", openai(calls(call(arguments='{"x": 1e400}')), result()),
     ["messages[1].tool_calls[0].function.arguments", "at x", "finite"]),
    ("arguments_not_an_object", openai(calls(call(arguments="[1, 2]")), result()),
     ["messages[1].tool_calls[0].function.arguments", "a JSON array, not an object"]),
]


@pytest.mark.parametrize("request_,fragments", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_request_gets_a_request_error_naming_the_field(request_, fragments):
    with pytest.raises(RequestError) as info:
        normalize(request_)
    msg = str(info.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    assert msg.startswith(fragments[0]), f"the message should start with where: {msg!r}"


@pytest.mark.parametrize("request_,fragments", [h[1:] for h in KEPT_ARGUMENTS], ids=[h[0] for h in KEPT_ARGUMENTS])
def test_arguments_openai_accepts_are_kept_with_a_warning(request_, fragments):
    conv, diags = normalize(request_)
    sent = request_["messages"][1]["tool_calls"][0]["function"]["arguments"]
    call_ = conv.messages[1].tool_calls[0]
    assert call_.arguments == sent and not call_.is_object
    warned = [d for d in diags if d.code.startswith("tool_arguments_not_")]
    assert len(warned) == 1 and warned[0].level == "warning" and warned[0].seq == 1
    for f in fragments[1:]:
        assert f in warned[0].message, f"{f!r} not in {warned[0].message!r}"
    assert warned[0].message.startswith(fragments[0])
    r = Assembler(template="qwen2.5", cache=None).assemble(request_)
    assert '"arguments": {}}' in r.text, "the template gets {} in their place"
    assert any(d.code == warned[0].code for d in r.diagnostics)


@pytest.mark.parametrize("request_,fragments", [h[1:] for h in HOSTILE[:8]], ids=[h[0] for h in HOSTILE[:8]])
def test_the_assembler_and_a_session_refuse_it_too(request_, fragments):
    """The same refusal through Assembler.assemble and the incremental session path (no UnicodeEncodeError)."""
    asm = Assembler(template="qwen2.5", cache=None)
    with pytest.raises(RequestError, match=fragments[1]):
        asm.assemble(request_)
    with pytest.raises(RequestError, match=fragments[1]):
        asm.session().assemble(request_)


# Honest twins: what each check must still let through.
HONEST = [
    ("paired_surrogates_are_emoji", openai(calls(call("call_\U0001F600", name="get_weather",
                                                      arguments='{"city": "\\ud83d\\ude00 Z\u00fcrich"}')),
                                           result("call_\U0001F600"))),
    ("anthropic_emoji_everywhere", anthropic(tool_use(tid="toolu_\U0001F600", inp={"c": "\U0001F600"}),
                                             tool_result("toolu_\U0001F600"))),
    ("deep_but_real_schema", {"messages": [USER], "tools": [{"type": "function", "function": {
        "name": "f", "parameters": nest(40, leaf={"type": "string"}, key="items")}}]}),
    ("big_but_sane_numbers", {"messages": [USER], "max_tokens": 2**63 - 1, "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"maximum": 18446744073709551615,
                                                                      "minimum": -1e308}}}]}),
    ("arguments_with_floats", openai(calls(call(arguments='{"x": 1.5e300, "y": -2e-400, "z": [1, true, null]}')),
                                     result())),
    ("an_id_reused_after_its_result", openai(calls(call("a")), result("a"), {"role": "assistant", "content": "ok"},
                                             {"role": "user", "content": "again"}, calls(call("a")), result("a"))),
    ("ordered_dict_and_numpy_float", {"messages": [USER], "temperature": np.float64(0.2),
                                      "variables": OrderedDict(a=OrderedDict(b=[1, 2.5]))}),
    ("options_with_their_types", {"messages": [USER], "context_window": 8192, "stream": False, "tool_choice": "auto",
                                  "response_format": {"type": "json_object"}, "title": "t"}),
    ("parts_and_unknown_fields", {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                            {"type": "image_url", "image_url": {
                                                                                "url": "https://example.com/a.png"}}],
                                                "audio": {"id": "x"}}]}),
]


@pytest.mark.parametrize("request_", [h[1] for h in HONEST], ids=[h[0] for h in HONEST])
def test_honest_twins_pass(request_):
    """Every message and tool of the request is read, in order (the roles read off the raw request:
    an Anthropic user turn made of tool results is a tool message)."""
    conv, _ = normalize(request_)
    roles = ["system"] if "system" in request_ else []
    for m in request_["messages"]:
        blocks = m["content"] if isinstance(m.get("content"), list) else []
        results = bool(blocks) and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
        roles.append("tool" if m["role"] == "user" and results else m["role"])
    assert [m.role for m in conv.messages] == roles
    assert len(conv.tool_schemas() or []) == len(request_.get("tools", []))


def test_honest_twins_assemble_to_valid_json_and_utf8():
    """What passed renders: the tool schema and arguments are JSON again (no NaN), the text encodes."""
    asm = Assembler(template="qwen2.5", cache=None)
    r = asm.assemble(HONEST[0][1])
    r.text.encode("utf-8")
    assert "\U0001F600" in r.text
    r = asm.assemble(HONEST[4][1])
    assert "NaN" not in r.text and "Infinity" not in r.text


def test_depth_limit_is_exact_and_configurable():
    """The request object is level 1, tools 2, the tool 3, function 4, parameters 5."""
    def req(levels: int) -> dict:
        return {"messages": [USER], "tools": [
            {"type": "function", "function": {"name": "f", "parameters": nest(levels - 4)}}]}
    normalize(req(200))
    with pytest.raises(RequestError, match="nested more than 200 levels deep"):
        normalize(req(201))
    tight = IntakeLimits(max_depth=12)
    normalize(req(12), tight)
    with pytest.raises(RequestError, match="nested more than 12 levels deep"):
        normalize(req(13), tight)


def test_a_request_at_the_depth_limit_renders_in_every_family():
    """The default limit leaves room for what renders the schema (tojson, the sandbox, gpt-oss's macros)."""
    schema: dict = {"type": "string"}
    for _ in range(97):   # 2 containers a level: parameters at 5 -> 199 levels
        schema = {"type": "object", "properties": {"a": schema}}
    req = {"messages": [USER], "tools": [{"type": "function", "function": {"name": "f", "description": "d",
                                                                          "parameters": schema}}]}
    normalize(req)
    for template in ("qwen2.5", "llama3.1", "gpt-oss", "mistral-v7"):
        r = Assembler(template=template, cache=None).assemble(req)
        assert r.total_tokens > 100, template


def test_int_digit_limit_is_configurable():
    limits = IntakeLimits(max_int_digits=5)
    normalize({"messages": [USER], "max_tokens": 99_999}, limits)
    with pytest.raises(RequestError, match="over the limit of 5"):
        normalize({"messages": [USER], "max_tokens": 100_000}, limits)
    with pytest.raises(RequestError, match="over the limit of 5"):
        normalize({"messages": [USER], "tools": [{"type": "function", "function": {
            "name": "f", "parameters": {"maximum": 1234567}}}]}, limits)
    # In arguments text (OpenAI takes any string there) the same number is kept, with a warning.
    _, diags = normalize(openai(calls(call(arguments='{"n": 1234567}')), result()), limits)
    assert any(d.code == "tool_arguments_not_json" and "over the limit of 5" in d.message for d in diags)


@pytest.mark.parametrize("bad", [{"max_depth": 3}, {"max_depth": "200"}, {"max_int_digits": 0},
                                 {"max_messages": 1.5}, {"max_message_bytes": True}])
def test_intake_limits_refuse_wrong_types(bad):
    with pytest.raises(WorkbenchError, match="IntakeLimits"):
        IntakeLimits(**bad)


def test_incremental_intake_sees_a_duplicate_id_across_head_and_tail():
    """The session path parses only the new tail; an id the head still waits on must be caught."""
    limits = IntakeLimits()
    first = openai(calls(call("a")))
    _, _, state = normalize_next(first, None, limits)
    with pytest.raises(RequestError, match="no result yet"):
        normalize_next(openai(calls(call("a")), calls(call("a"))), state, limits)
    # ...and an id reused once answered goes through, equal to a full parse.
    ok = openai(calls(call("a")), result("a"), {"role": "user", "content": "again"}, calls(call("a")))
    conv, diags, _ = normalize_next(ok, state, limits)
    assert conv == normalize(ok)[0]


def test_incremental_intake_with_a_shorter_request():
    """Messages removed from the end: nothing new to parse, and the result equals a full parse."""
    limits = IntakeLimits()
    long = openai({"role": "assistant", "content": "a"}, {"role": "user", "content": "b"})
    _, _, state = normalize_next(long, None, limits)
    short = {**long, "messages": long["messages"][:2]}
    conv, _, _ = normalize_next(short, state, limits)
    assert conv == normalize(short)[0]


# strict_json on its own: documents (files) and values (requests built in memory)
DOCUMENTS = [
    ("nan", '{"a": [1, NaN]}', "NaN is not a JSON number at line 1, column 11"),
    ("infinity", '{"a":\n  Infinity}', "Infinity is not a JSON number at line 2, column 3"),
    ("overflow", '{"a": 1E+400}', "a: not a finite number"),
    ("deep_10000", "[" * 10_000 + "]" * 10_000, "nested more than 200 levels deep at line 1, column 201"),
    ("deep_300", '{"x": ' + "[" * 300 + "]" * 300 + "}", "x[0][0]"),
    ("int_5000", "[" + "7" * 5000 + "]", "an integer longer than 100 digits at line 1, column 2"),
    ("int_150", '{"n": -' + "7" * 150 + "}", "n: an integer of about 150 digits"),
    ("lone_surrogate", '{"k": ["ok", "\\udead"]}', "k[1]: text is not valid Unicode"),
    ("lone_surrogate_key", '{"\\ud800x": 1}', "key is not valid Unicode"),
    ("raw_surrogate_in_text", '["\ud800"]', "[0]: text is not valid Unicode"),
]


@pytest.mark.parametrize("text,fragment", [d[1:] for d in DOCUMENTS], ids=[d[0] for d in DOCUMENTS])
def test_strict_loads_refuses_with_where(text, fragment):
    with pytest.raises(json.JSONDecodeError) as info:   # a JSONDecodeError: old callers keep catching it
        strict_json.loads(text)
    assert isinstance(info.value, strict_json.JSONValueError)
    assert fragment in str(info.value), str(info.value)


def test_strict_loads_passes_what_json_means():
    text = json.dumps({"a": [1, 2.5, -3e-300, 1e308, True, None, "\U0001F600 \\u00e9", {"b": "x" * 1000}],
                       "n": 10 ** 99, "deep": nest(150)})
    assert strict_json.loads(text) == json.loads(text)
    assert strict_json.loads('"NaN is fine as text"') == "NaN is fine as text"
    assert strict_json.loads('{"k": "\\ud83d\\ude00"}') == {"k": "\U0001F600"}


def test_strict_loads_errors_survive_pickling():
    """Errors cross process boundaries (render workers): the subclass must rebuild."""
    import pickle
    with pytest.raises(strict_json.JSONValueError) as caught:
        strict_json.loads("[NaN]")
    again = pickle.loads(pickle.dumps(caught.value))
    assert str(again) == str(caught.value) and isinstance(again, strict_json.JSONValueError)


def test_find_problem_on_values_built_in_memory():
    assert strict_json.find_problem({"a": [1, "x", None, True, 2.5, {"b": ()}]}) is None
    p = strict_json.find_problem({"a": [1, {"b c": [float("nan")]}]})
    assert p is not None and p.path == 'a[1]["b c"][0]' and "finite" in p.message
    p = strict_json.find_problem({"x": object()})
    assert p is not None and p.path == "x" and "not JSON" in p.message
    assert strict_json.find_problem(nest(10), max_depth=10) is None
    p = strict_json.find_problem(nest(11), max_depth=10)
    assert p is not None and "nested more than 10" in p.message


def test_strict_json_fast_and_slow_walks_agree():
    """The path-free walk decides; the walk with paths explains. On random values they agree."""
    hypothesis = need("hypothesis", "pip install -e .[test]")
    st = hypothesis.strategies
    scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10 ** 8, max_value=10 ** 8),
                        st.sampled_from([10 ** 101, -(10 ** 120)]), st.floats(allow_nan=True, allow_infinity=True),
                        st.text(alphabet=st.sampled_from(["a", "\u00e9", "\ud800", "\U0001F600"]), max_size=3))
    values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(st.text(max_size=2), inner, max_size=3)),
                          max_leaves=12)

    @hypothesis.settings(max_examples=300, deadline=None, database=None)
    @hypothesis.given(values, st.integers(min_value=1, max_value=4))
    def check(value, max_depth):
        problem = strict_json.find_problem(value, max_depth=max_depth)
        clean = strict_json._clean(value, 1, max_depth, 10 ** 100, True, True)
        assert (problem is None) == clean
        if problem is None:   # what passes is JSON that round-trips and encodes
            json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")

    check()


def test_the_legacy_function_call_form_openai_still_accepts_is_read_as_a_tool_call():
    legacy = {"messages": [USER, {"role": "assistant", "content": None,
                                  "function_call": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
                           {"role": "function", "name": "get_weather", "content": "3 C"}], "tools": [WEATHER]}
    modern = openai(calls(call("call_1_fn", arguments='{"city": "Oslo"}')), result("call_1_fn", "3 C"))
    asm = Assembler(template="qwen2.5", cache=None)
    got, want = asm.assemble(legacy), asm.assemble(modern)
    assert np.array_equal(got.token_ids, want.token_ids)
    assert {"legacy_function_call", "legacy_function_role"} <= {d.code for d in got.diagnostics}
    with pytest.raises(RequestError, match=r"messages\[1\]\.name"):
        normalize({"messages": [USER, {"role": "function", "content": "3 C"}]})
