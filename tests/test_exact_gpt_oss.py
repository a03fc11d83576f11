"""Exactness of the shipped `gpt-oss` template (harmony format).

Text oracle: openai-gpt-oss-120b.jinja rendered by transformers, on the message dicts transformers
would hand it for the raw request (tests/oracles.py `hf_chat`: no workbench intake or cleaning on
the official side). It writes today's date (strftime_now) and has no date variable, so both
renderers' clocks are frozen to one day.

Id oracles: openai_harmony (OpenAI's reference renderer and tokenizer):
  * `encoding.encode(text, allowed_special="all")` on our rendered text, for every case;
  * `render_conversation_for_completion` / `_for_training` of a harmony Conversation built
    from the raw request (`harmony_ids`), for every corpus case. The template differs from harmony's own
    renderer in a few places, and there the Conversation is built the template's way so that
    the rest is compared: tool results are JSON-encoded by the template (so harmony gets the
    JSON text), instructions without tools end with a blank line in the template, the last
    assistant message keeps its reasoning (auto_drop_analysis off, the template already drops
    earlier reasoning), a call's `content_type` is "json" (the template writes
    `commentary json`, not `<|constrain|>json`), and of an assistant message with several tool
    calls only the first is given (the template renders `tool_calls[0]` alone: parallel_calls'
    second call is not in the prompt, official template and ours alike).
"""

from __future__ import annotations

import json
import os
from datetime import datetime

import numpy as np
import pytest
from corpus import CASES, FLIGHTS, WEATHER
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import hf_chat, official_template
from transformers.utils import chat_template_utils
from transformers.utils.chat_template_utils import render_jinja_template

import workbench.templates.sandbox as sandbox
from workbench.assembly import Assembler
from workbench.errors import TemplateError
from workbench.templates import get_template, render
from workbench.tokenizers.packs import checked_tiktoken_file

SRC = "openai-gpt-oss-120b.jinja"
DATE = "2025-03-14"


class _FrozenDatetime(datetime):
    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return cls(2025, 3, 14, 9, 30)


@pytest.fixture(scope="module", autouse=True)
def frozen_date():
    # Both renderers call datetime.now() through their module's `datetime` name.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sandbox, "datetime", _FrozenDatetime)
        mp.setattr(chat_template_utils, "datetime", _FrozenDatetime)
        yield


@pytest.fixture(scope="module")
def harmony(tmp_path_factory):
    import openai_harmony as oh
    folder = tmp_path_factory.mktemp("tiktoken")
    os.symlink(checked_tiktoken_file("o200k_base"), folder / "o200k_base.tiktoken")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_ENCODINGS_BASE", str(folder))
        enc = oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)
    return enc


@pytest.fixture(scope="module")
def asm():
    return Assembler(template="gpt-oss")


# ----------------------------------------------------------------------------- helpers
def official(msgs: list[dict], tools: list[dict] | None, agp: bool, **kw) -> str:
    return render_jinja_template(conversations=[msgs], tools=tools, chat_template=official_template(SRC),
                                 add_generation_prompt=agp, **kw)[0][0]


def ours(msgs: list[dict], tools: list[dict] | None, agp: bool, **kw) -> str:
    t = get_template("gpt-oss")
    return render(t.source, "gpt-oss", msgs, tools=tools, add_generation_prompt=agp,
                  kwargs={"bos_token": "", "eos_token": t.eos_token, **kw}).text


def check_segments(res) -> None:
    assert "".join(s.text for s in res.segments) == res.text
    assert np.array_equal(np.concatenate([s.token_ids for s in res.segments]), res.token_ids)


def harmony_ids(enc, request: dict) -> list[int]:
    """The raw OpenAI-style request as harmony Messages, through harmony's own renderer (see the
    module docstring for where the Conversation is built the template's way). The request's fields
    are read as sent: `reasoning_content` is the thinking, a call's `arguments` string is the
    call's message as the model wrote it."""
    import openai_harmony as oh
    msgs, tools = request["messages"], request.get("tools")
    agp = msgs[-1]["role"] != "assistant"
    out = [oh.Message.from_role_and_content(oh.Role.SYSTEM, oh.SystemContent.new().with_conversation_start_date(
        DATE).with_reasoning_effort(oh.ReasoningEffort.MEDIUM))]
    rest, instructions = msgs, None
    if msgs and msgs[0]["role"] in ("system", "developer"):
        instructions, rest = msgs[0].get("content"), msgs[1:]
    if instructions or tools:
        dev = oh.DeveloperContent.new()
        if instructions:
            # The template always ends the instructions with a blank line; harmony only when tools follow.
            dev = dev.with_instructions(instructions if tools else instructions + "\n\n")
        if tools:
            dev = dev.with_function_tools([oh.ToolDescription.new(t["function"]["name"], t["function"]["description"],
                                                                  parameters=t["function"].get("parameters"))
                                           for t in tools])
        out.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, dev))

    def say(text: str, channel: str):
        return oh.Message.from_role_and_content(oh.Role.ASSISTANT, text).with_channel(channel)

    last_call = None
    for i, m in enumerate(rest):
        thinking = m.get("reasoning_content")
        if m["role"] == "user":
            out.append(oh.Message.from_role_and_content(oh.Role.USER, m["content"]))
        elif m["role"] == "assistant" and m.get("tool_calls"):
            later_final = any(f["role"] == "assistant" and not f.get("tool_calls") for f in rest[i + 1:])
            if (m.get("content") or thinking) and not later_final:
                out.append(say(m.get("content") or thinking, "analysis"))
            call = m["tool_calls"][0]["function"]  # one call per message in this format
            out.append(say(call["arguments"], "commentary")
                       .with_recipient("functions." + call["name"]).with_content_type("json"))
            last_call = call["name"]
        elif m["role"] == "assistant":
            if i == len(rest) - 1 and not agp and thinking is not None:
                out.append(say(thinking, "analysis"))
            out.append(say(m["content"], "final"))
        elif m["role"] == "tool":
            out.append(oh.Message.from_author_and_content(oh.Author.new(oh.Role.TOOL, "functions." + last_call),
                                                          json.dumps(m["content"], ensure_ascii=False))
                       .with_channel("commentary").with_recipient("assistant"))
    conv = oh.Conversation.from_messages(out)
    cfg = oh.RenderConversationConfig(auto_drop_analysis=False)
    if agp:
        return enc.render_conversation_for_completion(conv, oh.Role.ASSISTANT, cfg)
    return enc.render_conversation_for_training(conv, cfg)  # the last final message ends with <|return|>


# ----------------------------------------------------------------------------- corpus
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_text_ids_segments(case, asm, harmony):
    msgs, tools, agp = hf_chat(case.request())
    res = asm.assemble(case.request())
    assert res.text == official(msgs, tools, agp)
    assert f"Current date: {DATE}\n" in res.text
    assert res.token_ids.tolist() == harmony.encode(res.text, allowed_special="all")
    check_segments(res)
    assert any(d.code == "template_date" for d in res.diagnostics)
    # Segments: harmony's system message first, then one segment per message, then the prompt.
    assert res.segments[0].kind == "system" and res.segments[0].seq is None
    assert res.segments[0].text.startswith("<|start|>system<|message|>You are ChatGPT")
    by_seq = {s.seq: s for s in res.segments if s.seq is not None}
    if case.messages[0]["role"] == "system":
        assert by_seq[0].text.startswith("<|start|>developer<|message|># Instructions\n\n")
        assert case.messages[0]["content"] in by_seq[0].text
    elif tools:
        assert res.segments[1].kind == "tools" and "namespace functions {" in res.segments[1].text
    if tools:
        assert "} // namespace functions<|end|>" in res.text
    for seq, m in enumerate(case.messages):
        if m["role"] == "user":
            assert by_seq[seq].text == f"<|start|>user<|message|>{m['content']}<|end|>"
        elif m["role"] == "tool":
            assert by_seq[seq].text.startswith("<|start|>functions.")
    assert (res.segments[-1].kind == "generation_prompt") == agp
    if agp:
        assert res.segments[-1].text == "<|start|>assistant"
    else:
        assert res.text.endswith("<|return|>")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_ids_match_harmony_renderer(case, asm, harmony):
    assert asm.assemble(case.request()).token_ids.tolist() == harmony_ids(harmony, case.request())


def test_reasoning_kept_only_where_the_format_keeps_it(asm):
    by_name = {c.name: c for c in CASES}
    last = asm.assemble(by_name["reasoning_last"].request()).text
    assert "<|channel|>analysis<|message|>19 has no divisors below 5.<|end|>" in last
    earlier = asm.assemble(by_name["reasoning"].request())
    assert "17 is not divisible" not in earlier.text
    assert any(d.code == "template_rewrite" for d in earlier.diagnostics)


# ----------------------------------------------------------------------------- beyond the corpus
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
CALL2 = {"id": "c2", "type": "function", "function": {"name": "search_flights",
                                                      "arguments": {"origin": "OSL", "destination": "NCE",
                                                                    "date": "2025-06-01"}}}
U = {"role": "user", "content": "hi"}
DIRECT = {
    "thinking_field_last": ([U, {"role": "assistant", "content": "a", "thinking": "t"}], None, {}),
    "reasoning_field_last": ([U, {"role": "assistant", "content": "a", "reasoning": "r"}], None, {}),
    "thinking_and_reasoning_content": ([U, {"role": "assistant", "content": "a", "thinking": "t",
                                            "reasoning_content": "rc"}], None, {}),
    "call_with_thinking_pending": ([U, {"role": "assistant", "thinking": "need weather", "tool_calls": [CALL]},
                                    {"role": "tool", "content": "sunny"}], [WEATHER], {}),
    "call_with_content_pending": ([U, {"role": "assistant", "content": "checking", "tool_calls": [CALL]},
                                   {"role": "tool", "content": "sunny"}], [WEATHER], {}),
    "call_analysis_dropped_by_final": ([U, {"role": "assistant", "thinking": "t", "tool_calls": [CALL]},
                                        {"role": "tool", "content": "sunny"},
                                        {"role": "assistant", "content": "Sunny."}, U], [WEATHER], {}),
    "two_calls_in_a_row": ([U, {"role": "assistant", "tool_calls": [CALL]}, {"role": "tool", "content": "s"},
                            {"role": "assistant", "tool_calls": [CALL2]}, {"role": "tool", "content": {"ok": 1}}],
                           [WEATHER, FLIGHTS], {}),
    "string_arguments_and_content_type": ([U, {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}',
                                          "content_type": "<|constrain|>json"}}]}], [WEATHER], {}),
    "call_without_function_wrapper": ([U, {"role": "assistant", "tool_calls": [
        {"name": "get_weather", "arguments": {"city": "Oslo"}}]}], [WEATHER], {}),
    "developer_role": ([{"role": "developer", "content": "Be terse."}, U], None, {}),
    "empty_system": ([{"role": "system", "content": ""}, U], None, {}),
    "later_system_is_skipped": ([U, {"role": "assistant", "content": "a"}, {"role": "system", "content": "x"}, U],
                                None, {}),
    "options": ([{"role": "system", "content": "S"}, U], [WEATHER],
                {"reasoning_effort": "high", "model_identity": "You are a test model.",
                 "builtin_tools": ["browser", "python"]}),
    "builtin_browser_only": ([U], None, {"builtin_tools": ["browser"]}),
    "builtin_python_only": ([U], None, {"builtin_tools": ["python"]}),
    "tool_without_parameters": ([U], [{"type": "function", "function": {"name": "now", "description": "Time."}},
                                      {"type": "function", "function": {"name": "noop", "description": "N.",
                                                                        "parameters": {"type": "object",
                                                                                       "properties": {}}}}], {}),
    "tool_schema_zoo": ([U], [{"type": "function", "function": {"name": "zoo", "description": "All kinds.",
                                                                "parameters": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
        "n": {"type": "integer", "default": 5},
        "xs": {"type": "array", "items": {"type": "number"}, "nullable": True},
        "flags": {"type": "array", "items": {"type": "boolean"}},
        "objs": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}},
                                           "required": ["k"]}},
        "any_list": {"type": "array"},
        "nested": {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}}},
        "bag": {"type": "object"},
        "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
        "maybe": {"type": "string", "nullable": True},
        "multi": {"type": ["string", "number", "null"]},
        "single": {"type": ["boolean"]},
        "choice": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "integer", "default": 1}],
                   "default": "x"},
        "union_objs": {"oneOf": [{"type": "object"}, {"type": "object"}]},
        "long": {"type": "array", "items": {"type": "object", "properties": {
            "first_property": {"type": "string"}, "second_property": {"type": "string"}}}},
        "pairs": {"type": "array", "items": {"type": ["object", "object"]}},
        "untyped": {}}, "required": ["tags", "mode"]}}}], {}),
}


@pytest.mark.parametrize("agp", [True, False])
@pytest.mark.parametrize("key", list(DIRECT))
def test_direct_dicts(key, agp):
    msgs, tools, kw = DIRECT[key]
    assert ours(msgs, tools, agp, **kw) == official(msgs, tools, agp, **kw)


@pytest.mark.parametrize("msgs,match", [
    ([U, {"role": "tool", "content": "x"}], "no previous assistant message with a tool call"),
    ([U, {"role": "assistant", "content": "<|channel|>analysis<|message|>x"}], "content field"),
    ([U, {"role": "assistant", "content": "a", "thinking": "x<|channel|>final<|message|>"}], "thinking field"),
    ([U, {"role": "assistant", "content": "c", "thinking": "t", "tool_calls": [CALL]}], "both content and thinking"),
])
def test_raises_like_official(msgs, match):
    with pytest.raises(Exception, match=match):
        official(msgs, [WEATHER], True)
    with pytest.raises(TemplateError, match=match):
        ours(msgs, [WEATHER], True)


def test_assembler_rejects_what_the_template_rejects(asm):
    # A final answer between a call and its result resets the template's "last call", so the
    # result has no call to name: the official template raises, and so does the assembler.
    req = {"messages": [{"role": "user", "content": "w"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function",
                             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
                        {"role": "assistant", "content": "Hmm."},
                        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
           "tools": [WEATHER]}
    msgs, tools, agp = hf_chat(req)
    with pytest.raises(Exception, match="no previous assistant message with a tool call"):
        official(msgs, tools, agp)
    with pytest.raises(TemplateError, match="no previous assistant message with a tool call"):
        asm.assemble(req)


# Random JSON schemas: the TypeScript rendering of parameters must match the official macro.
_leaf = st.sampled_from([{"type": t} for t in ("string", "number", "integer", "boolean", "object", "array", "null")]
                        + [{"type": "string", "enum": ["a", "b"]}, {}, {"type": "string", "nullable": True},
                           {"type": ["string", "null"]}])


def _extend(children):
    props = st.dictionaries(st.sampled_from(["p", "q", "r_s", "t1"]), children, min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda i, n: {"type": "array", "items": i, **({"nullable": True} if n else {})}, children,
                  st.booleans()),
        st.builds(lambda p, req: {"type": "object", "properties": p, "required": [k for k in p if k in req]},
                  props, st.sets(st.sampled_from(["p", "q"]))),
        st.builds(lambda vs, d: {"oneOf": [dict(v, description=d) if d else v for v in vs]},
                  st.lists(children, min_size=1, max_size=3), st.sampled_from(["", "desc"])),
    )


_schema = st.recursive(_leaf, _extend, max_leaves=8)
_param = st.one_of(_schema, st.builds(lambda s, d: dict(s, description=d), _schema, st.text("abc ", min_size=1)),
                   st.builds(lambda s, v: dict(s, default=v), _schema, st.sampled_from([1, 2.5, True, None, [1]])))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["alpha", "beta", "gamma", "delta"]), _param, min_size=1, max_size=4),
       st.sets(st.sampled_from(["alpha", "beta", "gamma"])))
def test_random_schemas(props, required):
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": props, "required": sorted(required)}}}
    msgs = [U]
    try:
        want = official(msgs, [tool], True)
    except Exception:
        # e.g. a non-string default on an enum or oneOf parameter: "…" + 1 fails in both.
        with pytest.raises(TemplateError):
            ours(msgs, [tool], True)
        return
    assert ours(msgs, [tool], True) == want
