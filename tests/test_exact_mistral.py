"""Exactness of the Mistral templates (mistral-v3, mistral-tekken, mistral-v7).

The authority is mistral-common's `encode_chat_completion`, the encoder Mistral's
own servers use: our token ids must equal its ids for every corpus case, and a
request it rejects must make our assembler raise a TemplateError too.

Mapping of our requests onto mistral-common's (the `to_mistral` helper):
- OpenAI-style messages become UserMessage / AssistantMessage / SystemMessage /
  ToolMessage; tool call arguments stay JSON text, as the client sent them.
- A conversation that ends with an assistant message is rendered without a
  generation prompt: that message is a prefix the model continues, which is
  mistral-common's `AssistantMessage(prefix=True)` (no </s> after it).
- `reasoning_content` is left out, as our templates leave it out (reported as
  reasoning_not_rendered). mistral-common's own `ChatCompletionRequest.from_openai` turns it into
  a ThinkChunk, which these tokenizer versions reject: there the two oracles differ, and
  `test_to_mistral_agrees_with_from_openai` pins that this is the only difference.

SentencePiece (v3, v7) puts its dummy prefix "▁" in front of every separately
encoded piece; our templates write it as a space after the control token and the
backend strips it again, so `tokenizer.decode(ids) == result.text` too.
"""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest
from mistral_common.protocol.instruct.chunk import TextChunk
from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool, ToolCall
from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
from transformers.utils.chat_template_utils import render_jinja_template

from tests.corpus import CASES, FLIGHTS, SYS, WEATHER, Case, _call
from tests.oracles import hf_chat, official_template
from workbench import Assembler
from workbench.errors import TemplateError
from workbench.templates import get_template, render
from workbench.tokenizers import get_tokenizer

TEMPLATES = ["mistral-v3", "mistral-tekken", "mistral-v7"]


# ----------------------------------------------------------------------------- oracle
@cache
def mistral(name: str) -> MistralTokenizer:
    if name == "mistral-v3":
        return MistralTokenizer.v3()
    if name == "mistral-tekken":
        return MistralTokenizer.v3(is_tekken=True)
    return MistralTokenizer.v7()


@cache
def assembler(name: str) -> Assembler:
    return Assembler(template=name)


def _content(c):  # type: ignore[no-untyped-def]
    if isinstance(c, list):
        return [TextChunk(text=p["text"]) for p in c if p.get("type") == "text"]
    return c


def to_mistral(messages: list[dict], tools: list[dict] | None, *, prefix_last: bool = True) -> ChatCompletionRequest:
    """An OpenAI-style request as mistral-common's ChatCompletionRequest."""
    out = []
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "system":
            out.append(SystemMessage(content=_content(m["content"])))
        elif role == "user":
            out.append(UserMessage(content=_content(m["content"])))
        elif role == "tool":
            out.append(ToolMessage(content=_content(m["content"]), tool_call_id=m.get("tool_call_id"),
                                   name=m.get("name")))
        else:
            calls = [ToolCall(id=tc["id"], function=FunctionCall(
                name=tc["function"]["name"],
                arguments=tc["function"]["arguments"] if isinstance(tc["function"]["arguments"], str)
                else json.dumps(tc["function"]["arguments"], ensure_ascii=False)))
                for tc in m.get("tool_calls") or []]
            out.append(AssistantMessage(content=_content(m.get("content")), tool_calls=calls or None,
                                        prefix=prefix_last and i == len(messages) - 1))
    return ChatCompletionRequest(messages=out, tools=[Tool(function=Function(**t["function"])) for t in tools]
                                 if tools else None)


def oracle_text(name: str, tokens: list[int]) -> str:
    return mistral(name).decode(tokens, special_token_policy=SpecialTokenPolicy.KEEP)


def oracle(name: str, messages: list[dict], tools: list[dict] | None):  # type: ignore[no-untyped-def]
    """mistral-common's tokens, or the exception it raises."""
    return _oracle(name, json.dumps([messages, tools]))


@cache
def _oracle(name: str, conversation: str):  # type: ignore[no-untyped-def]
    # Several tests ask for the same conversations: encode each once (keyed by its JSON text).
    messages, tools = json.loads(conversation)
    try:
        return mistral(name).encode_chat_completion(to_mistral(messages, tools))
    except Exception as exc:  # noqa: BLE001 - any rejection counts
        return exc


def request(messages: list[dict], tools: list[dict] | None = None) -> dict:
    r: dict = {"messages": json.loads(json.dumps(messages))}
    if tools:
        r["tools"] = tools
    return r


def check_exact(name: str, messages: list[dict], tools: list[dict] | None):  # type: ignore[no-untyped-def]
    expected = oracle(name, messages, tools)
    if isinstance(expected, Exception):
        with pytest.raises(TemplateError):
            assembler(name).assemble(request(messages, tools))
        return None
    result = assembler(name).assemble(request(messages, tools))
    assert result.token_ids.tolist() == expected.tokens, (result.text, oracle_text(name, expected.tokens))
    # The text is readable and is exactly what the ids spell (the "▁" prefixes as spaces).
    assert get_tokenizer(name).decode(result.token_ids) == result.text
    if name == "mistral-tekken":
        assert result.text == oracle_text(name, expected.tokens)
    return result


def check_segments(result) -> None:  # type: ignore[no-untyped-def]
    segs = result.segments
    assert "".join(s.text for s in segs) == result.text
    ids = np.concatenate([s.token_ids for s in segs]) if segs else np.zeros(0, np.uint32)
    assert ids.dtype == np.uint32 and np.array_equal(ids, result.token_ids)
    assert segs[0].kind == "bos" and segs[0].text == "<s>"
    assert [s.start for s in segs[1:]] == [s.end for s in segs[:-1]]


# ----------------------------------------------------------------------------- corpus
CORPUS = [pytest.param(name, case, id=f"{name}-{case.name}") for case in CASES for name in TEMPLATES]


@pytest.mark.parametrize("name,case", CORPUS)
def test_corpus_ids_equal_mistral_common(name: str, case: Case) -> None:
    """Every corpus case: the same ids as mistral-common, or an error where it rejects the case
    (empty_assistant: an assistant turn with neither text nor tool calls)."""
    check_exact(name, case.messages, case.tools)


def test_corpus_rejections_are_the_expected_ones() -> None:
    rejected = {(n, c.name) for c in CASES for n in TEMPLATES
                if isinstance(oracle(n, c.messages, c.tools), Exception)}
    assert rejected == {(n, "empty_assistant") for n in TEMPLATES}


@pytest.mark.parametrize("name,case", [p for p in CORPUS if "empty" not in p.values[1].tags])
def test_corpus_segments(name: str, case: Case) -> None:
    result = assembler(name).assemble(case.request())
    check_segments(result)
    by_seq = {s.seq: s for s in result.segments if s.seq is not None}
    msgs = case.messages
    for i, m in enumerate(msgs):
        if m["role"] == "system":
            continue
        seg = by_seq[i]
        assert seg.role == m["role"]
        if m["role"] == "user":
            assert "[INST]" in seg.text and seg.text.endswith("[/INST]")
            assert m["content"] in seg.text
        elif m["role"] == "tool":
            assert seg.text.startswith("[TOOL_RESULTS]") and seg.text.endswith("[/TOOL_RESULTS]")
            assert m["tool_call_id"] in seg.text
        elif m.get("tool_calls"):
            assert seg.text.startswith("[TOOL_CALLS]")
        else:
            assert m["content"].rstrip(" ") in seg.text
        # every turn but a final assistant prefix is closed
        if m["role"] == "assistant":
            assert seg.text.endswith("</s>") == (i != len(msgs) - 1)
    if case.tools:
        last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        assert by_seq[last_user].text.startswith("[AVAILABLE_TOOLS]")
        assert sum(s.text.count("[AVAILABLE_TOOLS]") for s in result.segments) == 1
    else:
        assert "[AVAILABLE_TOOLS]" not in result.text


@pytest.mark.parametrize("name", TEMPLATES)
@pytest.mark.parametrize("case", [c for c in CASES if "system" in c.tags], ids=lambda c: c.name)
def test_system_prompt_placement(name: str, case: Case) -> None:
    result = assembler(name).assemble(case.request())
    sys_text = case.messages[0]["content"]
    moved = [d for d in result.diagnostics if d.code == "template_moved_content"]
    last_user = max(i for i, m in enumerate(case.messages) if m["role"] == "user")
    seg = {s.seq: s for s in result.segments if s.seq is not None}
    if name == "mistral-v7":
        # its own block, where it was written
        assert seg[0].kind == "system" and seg[0].text == f"[SYSTEM_PROMPT] {sys_text}[/SYSTEM_PROMPT]"
        assert not moved
    else:
        # v3 / Tekken: in front of the LAST user message, and the move is reported
        sp = " " if name == "mistral-v3" else ""
        assert 0 not in seg
        assert f"[INST]{sp}{sys_text}\n\n{case.messages[last_user]['content']}[/INST]" in seg[last_user].text
        assert result.text.count(sys_text) == 1
        assert [(d.seq, d.level) for d in moved] == [(0, "info")]


@pytest.mark.parametrize("name", TEMPLATES)
def test_prefix_versus_closed_final_assistant(name: str) -> None:
    case = next(c for c in CASES if c.name == "ends_with_assistant")
    prefix = assembler(name).assemble(case.request())
    closed = assembler(name).assemble(case.request(), add_generation_prompt=True)
    assert not prefix.text.endswith("</s>")
    assert closed.text == prefix.text + "</s>"
    assert closed.token_ids.tolist() == prefix.token_ids.tolist() + [2]


# ----------------------------------------------------------------------------- beyond the corpus
def U(c):  # type: ignore[no-untyped-def]
    return {"role": "user", "content": c}


def A(c):  # type: ignore[no-untyped-def]
    return {"role": "assistant", "content": c}


def S(c):  # type: ignore[no-untyped-def]
    return {"role": "system", "content": c}


def T(cid, c):  # type: ignore[no-untyped-def]
    return {"role": "tool", "tool_call_id": cid, "content": c}


def AC(*calls, content=None):  # type: ignore[no-untyped-def]
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


C1 = _call("abcDEF123", "get_weather", '{"city": "Paris"}')
C2 = _call("xyz987654", "search_flights", '{"origin":"SFO","destination":"JFK","date":"2026-01-01"}')


def _tool_round(result: str) -> tuple[list[dict], list[dict]]:
    return [U("a"), AC(C1), T("abcDEF123", result)], [WEATHER]


EXTRA: dict[str, tuple[list[dict], list[dict] | None]] = {
    # consecutive messages are merged by mistral-common's normalizer; a system message breaks a run
    "users_merge": ([U("a"), U("b"), A("c"), U("d")], None),
    "users_merge_empty": ([U(""), U("b"), A("c"), U(""), U("")], None),
    "user_sys_user": ([U("a"), S("mid sys"), U("b")], None),
    "sys_sys_user": ([S("one"), S("two"), U("q")], None),
    "sys_empty": ([S(""), U("q")], None),
    "sys_user_sys_user": ([S("one"), U("a"), A("b"), U("c"), S("two"), U("d")], None),
    "asst_merge": ([U("a"), A("x  "), A("y  "), U("z")], None),
    "asst_merge_last": ([U("a"), A("x  "), A("y  ")], None),
    "asst_trailing_spaces": ([U("a"), A("x \n  "), U("z")], None),
    "asst_spaces_only": ([U("a"), A("   "), U("z")], None),
    # v3 puts an empty user turn first when the conversation does not start with one
    "starts_assistant": ([A("hello"), U("z")], None),
    "sys_assistant_user": ([S("sys"), A("hello"), U("z")], [WEATHER]),
    "only_system": ([S("sys")], None),
    "only_system_tools": ([S("sys")], [WEATHER]),
    "only_user_empty": ([U("")], None),
    "user_whitespace": ([U("   ")], None),
    "special_text": ([U("please print [INST] and </s> literally")], None),
    # tool calls and results
    "content_and_calls": ([U("a"), AC(C1, content="Let me check."), T("abcDEF123", "sunny"), U("thx")], [WEATHER]),
    "two_rounds": ([S("s"), U("a"), AC(C1, C2), T("abcDEF123", "1"), T("xyz987654", "2"), A("done"), U("b"),
                    AC(C1), T("abcDEF123", "3")], [WEATHER, FLIGHTS]),
    "ends_with_tool_calls": ([U("a"), AC(C1)], [WEATHER]),
    "args_unicode": ([U("a"), AC(_call("abcDEF123", "get_weather", '{"city": "Zürich 中文", "n": [1.5, true, null]}')),
                      T("abcDEF123", "ok")], [WEATHER]),
    "args_empty_object": ([U("a"), AC(_call("abcDEF123", "get_weather", "{}")), T("abcDEF123", "ok")], [WEATHER]),
    "result_plain_text": _tool_round("It is sunny, 20 C."),
    "result_compact_json": _tool_round('{"a":1,"b":[1,2,{"c":null}],"d":"x, y: z"}'),
    "result_pretty_json": _tool_round(json.dumps({"a": [1, 2], "b": {"c": "d e"}}, indent=2)),
    "result_escaped_quote": _tool_round('{"q": "he said \\"hi, there\\": ok", "p": "a\\\\"}'),
    "result_int": _tool_round("42"),
    "result_float": _tool_round(" 3.5 "),
    "result_true": _tool_round("true"),
    "result_empty": _tool_round(""),
    "result_spaces": _tool_round("  "),
    "result_json_string": _tool_round('"quoted"'),
    "result_brackets_not_json": _tool_round("[1, 2] and [3]"),
    "result_braces_not_json": _tool_round("{not json}"),
    "result_nan": _tool_round("nan"),
    "result_unicode": _tool_round('{"city": "Zürich", "t": "☀"}'),
    "result_with_name": ([U("a"), AC(C1), {"role": "tool", "tool_call_id": "abcDEF123", "name": "get_weather",
                                           "content": "x"}], [WEATHER]),
    "tool_no_description": ([U("a")], [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {}}}}]),
    "tool_extra_keys": ([U("a")], [{"type": "function", "function": {
        "name": "f", "description": 'd "q" é', "parameters": {"type": "object", "properties": {}}, "strict": True}}]),
    # rejected by mistral-common (and so by us)
    "bad_call_id_short": ([U("a"), AC(_call("abc", "get_weather", "{}")), T("abc", "x")], [WEATHER]),
    "bad_call_id_chars": ([U("a"), AC(_call("abc_DEF12", "get_weather", "{}")), T("abc_DEF12", "x")], [WEATHER]),
    "bad_function_name": ([U("a"), AC(_call("abcDEF123", "get weather", "{}")), T("abcDEF123", "x")], [WEATHER]),
    "bad_tool_name": ([U("a")], [{"type": "function", "function": {"name": "get.weather", "parameters": {}}}]),
    "assistant_then_system": ([U("a"), A("b"), S("c"), U("d")], None),
    "tool_then_system": ([U("a"), AC(C1), T("abcDEF123", "x"), S("c"), U("d")], [WEATHER]),
    "results_missing": ([U("a"), AC(C1, C2), T("abcDEF123", "x"), A("done"), U("b")], [WEATHER, FLIGHTS]),
    "results_extra": ([U("a"), AC(C1), T("abcDEF123", "x"), T("abcDEF123", "y"), A("done"), U("b")], [WEATHER]),
    "calls_then_text": ([U("a"), AC(C1), A("extra")], [WEATHER]),
    "single_assistant": ([A("hi")], None),
    "empty_final_assistant": ([U("a"), A("")], None),
    "empty_then_text_assistant": ([U("a"), A(""), A("x")], None),
}


@pytest.mark.parametrize("name", TEMPLATES)
@pytest.mark.parametrize("key", list(EXTRA))
def test_more_conversations(name: str, key: str) -> None:
    messages, tools = EXTRA[key]
    result = check_exact(name, messages, tools)
    if result is not None:
        check_segments(result)


def test_extra_cases_cover_both_outcomes() -> None:
    """The extra cases are not all accepted or all rejected; v7 accepts text with tool calls."""
    outcome = {(n, k): isinstance(oracle(n, *EXTRA[k]), Exception) for n in TEMPLATES for k in EXTRA}
    assert outcome[("mistral-v3", "content_and_calls")] and not outcome[("mistral-v7", "content_and_calls")]
    assert outcome[("mistral-v7", "empty_final_assistant")] and not outcome[("mistral-v7", "empty_then_text_assistant")]
    assert outcome[("mistral-v3", "empty_then_text_assistant")]
    assert sum(outcome.values()) == 3 * 11 + 2 * 2


# Fields our intake never produces but a raw HF-style caller may: string arguments and
# content as a list of text parts (mistral-common joins parts with a blank line).
def _call_args(args):  # type: ignore[no-untyped-def]
    return {"id": "abcDEF123", "type": "function", "function": {"name": "get_weather", "arguments": args}}


def _parts(*texts):  # type: ignore[no-untyped-def]
    return [{"type": "text", "text": t} for t in texts]


RAW = {
    "string_args_compact": [U("a"), {"role": "assistant", "tool_calls": [_call_args('{"city":"Paris","n":[1,2]}')]},
                            T("abcDEF123", "x")],
    "string_args_empty": [U("a"), {"role": "assistant", "tool_calls": [_call_args("")]}, T("abcDEF123", "x")],
    "dict_args": [U("a"), {"role": "assistant", "tool_calls": [_call_args({"city": "Paris"})]}, T("abcDEF123", "x")],
    "list_contents": [S(_parts("s1", "", "s2")), U(_parts("p1", "p2")), A(_parts("r1", "r2")), U(_parts("", "q"))],
    "list_tool_content": [U("a"), {"role": "assistant", "tool_calls": [_call_args({"city": "X"})]},
                          T("abcDEF123", _parts('{"a":', "1}"))],
}


@pytest.mark.parametrize("name", TEMPLATES)
@pytest.mark.parametrize("key", list(RAW))
def test_raw_template_fields(name: str, key: str) -> None:
    messages = RAW[key]
    expected = mistral(name).encode_chat_completion(to_mistral(messages, [WEATHER]))
    t = get_template(name)
    text = render(t.source, name, messages, tools=[WEATHER], add_generation_prompt=messages[-1]["role"] != "assistant",
                  kwargs={"bos_token": "<s>", "eos_token": "</s>"}).text
    assert get_tokenizer(name).encode(text).tolist() == expected.tokens, (text, oracle_text(name, expected.tokens))


def test_to_mistral_agrees_with_from_openai() -> None:
    """The hand-written `to_mistral` against mistral-common's own reading of a raw OpenAI request
    (`ChatCompletionRequest.from_openai`): the same ids, or a rejection of the same type, on every
    conversation of this module, except reasoning: from_openai makes `reasoning_content` a
    ThinkChunk, which v3 / Tekken / v7 reject, where we (and `to_mistral`) leave it out."""
    convs = [(c.name, c.messages, c.tools) for c in CASES] + [(k, m, t) for k, (m, t) in EXTRA.items()] \
        + [(k, m, [WEATHER]) for k, m in RAW.items()]
    reached, think = 0, set()
    for key, messages, tools in convs:
        ends_assistant = messages[-1]["role"] == "assistant"
        for name in TEMPLATES:
            hand = oracle(name, messages, tools)
            try:
                theirs = mistral(name).encode_chat_completion(ChatCompletionRequest.from_openai(
                    messages, tools, continue_final_message=ends_assistant))
            except Exception as exc:  # noqa: BLE001 - compared by type below
                if "ThinkChunk" in str(exc):
                    think.add(key)
                    continue
                assert type(hand) is type(exc), (name, key, hand, exc)
                reached += 1
                continue
            assert not isinstance(hand, Exception), (name, key, hand)
            assert hand.tokens == theirs.tokens, (name, key)
            reached += 1
    assert think == {c.name for c in CASES if any("reasoning_content" in m for m in c.messages)} \
        == {"reasoning", "reasoning_last"}
    assert reached == 3 * len(convs) - 3 * len(think)


# ----------------------------------------------------------------------------- official Nemo template
# mistralai/Mistral-Nemo-Instruct-2407 uses Tekken. Its chat template agrees with
# mistral-common (and so with our mistral-tekken) on plain conversations and tool
# rounds, and differs where mistral-common is the authority for the ids:
#   - the system prompt: Nemo writes it only when the LAST message is a user message
#     (dropped after a tool result or before an assistant prefix); mistral-common always
#     puts it in front of the last user message;
#   - a final assistant message: Nemo closes it with </s>; mistral-common treats it as a
#     prefix to continue (no </s>);
#   - an assistant turn with empty content: Nemo renders "</s>"; mistral-common rejects it;
#   - tool results that are not JSON: Nemo pastes them unquoted, mistral-common quotes them;
#     string arguments: Nemo quotes them as a JSON string, mistral-common parses them;
#   - tool schemas: Nemo copies every key but "return" (unescaped strings), mistral-common
#     writes name, description ("" if missing) and parameters only.
NEMO = "mistralai-Mistral-Nemo-Instruct-2407.jinja"


def nemo_render(case: Case) -> str:
    """The official Nemo template on the raw request as transformers hands it over (tests/oracles.py
    `hf_chat`), with Nemo's tokenizer_config special tokens."""
    msgs, tools, agp = hf_chat(case.request())
    return render_jinja_template(conversations=[msgs], tools=tools, chat_template=official_template(NEMO),
                                 add_generation_prompt=agp, bos_token="<s>", eos_token="</s>")[0][0]


def _nemo_agrees(case: Case) -> bool:
    ends_user = case.messages[-1]["role"] == "user"
    return not case.tags & {"empty", "ends_assistant"} and ("system" not in case.tags or ends_user)


@pytest.mark.parametrize("case", [c for c in CASES if _nemo_agrees(c)], ids=lambda c: c.name)
def test_tekken_text_equals_official_nemo(case: Case) -> None:
    assert assembler("mistral-tekken").assemble(case.request()).text == nemo_render(case)


@pytest.mark.parametrize("case", [c for c in CASES if not _nemo_agrees(c)], ids=lambda c: c.name)
def test_tekken_differs_from_nemo_where_documented(case: Case) -> None:
    nemo = nemo_render(case)
    if "empty" in case.tags:
        assert "[/INST]</s>" in nemo  # Nemo renders the empty turn; mistral-common (and we) reject it
        with pytest.raises(TemplateError):
            assembler("mistral-tekken").assemble(case.request())
        return
    ours = assembler("mistral-tekken").assemble(case.request()).text
    expected = ours
    if case.messages[-1]["role"] == "assistant":
        expected += "</s>"
    if "system" in case.tags:
        expected = expected.replace(SYS["content"] + "\n\n", "")
    assert nemo == expected
    assert nemo != ours
