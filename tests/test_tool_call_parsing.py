"""A model's reply text -> tool calls, per model family (workbench/engine/tool_calls.py).

Oracles: the literal syntax each family's documentation and chat template give, and the template
itself — each shipped template renders an assistant turn with tool calls (the form its model was
trained to write); that text, cut at the end-of-turn token, must parse back into the same calls.
Malformed call text stays text, and nothing raises. Streaming: what `settled` hands out early is
always a prefix of the final parse, for every cut of every text (hypothesis), so a stream never
takes back what it sent.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.assembly import Assembler
from workbench.engine.chat_reply import ReplyText
from workbench.engine.tool_calls import FAMILIES, ParsedCall, ParsedReply, parse_reply, settled, tool_family
from workbench.templates import get_template
from workbench.tokenizers import get_tokenizer
from workbench.truncation import TruncationPolicy


def calls(text: str, family: str) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in parse_reply(text, family).tool_calls]


PARIS = ("get_weather", {"city": "Paris", "days": 2})


# --- each family's syntax, written out -------------------------------------------------------------
def test_hermes_calls_after_text_and_in_parallel() -> None:
    text = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
            '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>')
    r = parse_reply(text, "hermes")
    assert r.content == "Let me check." and r.reasoning == ""
    assert calls(text, "hermes") == [PARIS, ("get_time", {"tz": "CET"})]
    # arguments sent as a JSON string of the object, as some fine-tunes write them
    assert calls('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', "hermes") == [("f", {"a": 1})]


def test_hermes_reasoning_then_answer() -> None:
    r = parse_reply("<think>\nThe user wants weather.\n</think>\n\nIt is sunny.", "hermes")
    assert (r.reasoning, r.content, r.tool_calls) == ("The user wants weather.", "It is sunny.", ())
    cut = parse_reply("<think>\nstill thinking", "hermes")                  # cut by max_tokens
    assert (cut.reasoning, cut.content) == ("still thinking", "")


def test_llama_json_calls() -> None:
    assert calls('{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}', "llama3-json") == [PARIS]
    assert calls('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}',
                 "llama3-json") == [PARIS]
    two = '{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": [1]}}'      # Llama 3.2
    assert calls(two, "llama3-json") == [("a", {}), ("b", {"x": [1]})]
    assert parse_reply('{"name": "a", "parameters": {}}', "llama3-json").content == ""
    assert parse_reply("The weather is fine.", "llama3-json") == parse_reply("The weather is fine.", "plain")


def test_mistral_list_and_named_forms() -> None:
    text = 'Sure.[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}, "id": "abcDEF123"}]'
    r = parse_reply(text, "mistral")
    assert r.content == "Sure." and calls(text, "mistral") == [PARIS]
    assert r.tool_calls[0].id == "abcDEF123"                    # the model's own id is kept
    named = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}[TOOL_CALLS]get_time[CALL_ID]x1Y2z3W4v[ARGS]{}'
    r = parse_reply(named, "mistral")
    assert calls(named, "mistral") == [PARIS, ("get_time", {})]
    assert [c.id for c in r.tool_calls] == [None, "x1Y2z3W4v"]


def test_harmony_channels() -> None:
    answer = ("<|channel|>analysis<|message|>Need the weather tool.<|end|><|start|>assistant<|channel|>final"
              "<|message|>Sunny in Paris.")
    r = parse_reply(answer, "harmony")
    assert (r.reasoning, r.content, r.tool_calls) == ("Need the weather tool.", "Sunny in Paris.", ())
    call = ("<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant to=functions.get_weather"
            '<|channel|>commentary json<|message|>{"city": "Paris", "days": 2}')
    r = parse_reply(call, "harmony")
    assert r.reasoning == "Call it." and r.content == "" and calls(call, "harmony") == [PARIS]
    # the recipient after the channel, with a constrain token, as gpt-oss also writes it
    other = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "days": 2}'
    assert calls(other, "harmony") == [PARIS]


def test_without_declared_tools_call_syntax_stays_text() -> None:
    text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    assert parse_reply(text, "hermes", tools=False) == parse_reply(text, "plain")
    assert parse_reply(text, "hermes", tools=False).content == text


# --- malformed call text: kept as text, never an exception -----------------------------------------
MALFORMED = [
    ("hermes", 'Hi <tool_call>\n{"name": "f", "arguments": {"a": 1}\n</tool_call>'),        # JSON cut short
    ("hermes", '<tool_call>\n{"name": "f", "arguments": {"a": 1}}'),                         # never closed
    ("hermes", '<tool_call>{"arguments": {}}</tool_call>'),                                  # no name
    ("hermes", '<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>'),                 # not an object
    ("hermes", '<tool_call>{"name": "ok", "arguments": {}}</tool_call><tool_call>oops</tool_call>'),  # one of two
    ("hermes", "<tool_call>" + "[" * 5000 + "</tool_call>"),                                 # deeper than json takes
    ("llama3-json", '{"name": "f", "parameters": {"a": 1}'),
    ("llama3-json", '{"name": "f", "parameters": {}} and then some text'),
    ("llama3-json", '{"parameters": {}}'),
    ("llama3-json", '{"name": "f", "parameters": "not json"}'),
    ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": {}'),
    ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": {}}] trailing'),
    ("mistral", "[TOOL_CALLS] []"),
    ("mistral", "[TOOL_CALLS]f[ARGS]{oops}"),
    ("mistral", "[TOOL_CALLS][ARGS]{}"),
]


@pytest.mark.parametrize("family, text", MALFORMED)
def test_malformed_tool_call_text_is_kept_as_text(family: str, text: str) -> None:
    r = parse_reply(text, family)
    assert r.tool_calls == () and r.content == text


def test_a_malformed_harmony_call_stays_text_beside_the_rest() -> None:
    text = ("<|channel|>analysis<|message|>thinking<|end|><|start|>assistant to=functions.f<|channel|>commentary"
            " json<|message|>{not json")
    r = parse_reply(text, "harmony")
    assert r.tool_calls == () and r.reasoning == "thinking"
    assert r.content == "assistant to=functions.f<|channel|>commentary json<|message|>{not json"   # as written
    plain = parse_reply("random words, no harmony header at all", "harmony")
    assert (plain.content, plain.reasoning, plain.tool_calls) == ("random words, no harmony header at all", "", ())


# --- the templates' own rendering of a call parses back ---------------------------------------------
CITY = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather", "parameters": CITY}}]


def template_reply(template: str, message: dict) -> str:
    """What the template's model writes for `message`: the rendered turn after the generation
    prompt, up to its end-of-turn token."""
    asm = Assembler(template=template, cache=None, truncation=TruncationPolicy(enabled=False))
    user = [{"role": "user", "content": "Weather in Paris?"}]
    prompt = asm.assemble({"messages": user, "tools": TOOLS}, add_generation_prompt=True).text
    full = asm.assemble({"messages": [*user, message], "tools": TOOLS}, add_generation_prompt=False).text
    assert full.startswith(prompt), "the template is not prefix-stable here: no reply to cut out"
    reply = full[len(prompt):]
    for end in ("<|im_end|>", "<|eot_id|>", "<|call|>", "</s>"):
        reply = reply.split(end, 1)[0]
    return reply


def call_message(*pairs: tuple[str, dict], content: str | None = None) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": f"abcDEF12{k}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for k, (n, a) in enumerate(pairs)]}


@pytest.mark.parametrize("template", ["qwen2.5", "qwen3", "llama3.1", "mistral-v3", "mistral-tekken", "mistral-v7",
                                      "gpt-oss"])
def test_each_template_call_parses_back(template: str) -> None:
    family = tool_family(get_template(template))
    reply = template_reply(template, call_message(PARIS))
    assert calls(reply, family) == [PARIS], reply
    assert parse_reply(reply, family).content == ""
    if family == "mistral":
        assert parse_reply(reply, family).tool_calls[0].id == "abcDEF120"


@pytest.mark.parametrize("template", ["qwen2.5", "mistral-v3"])
def test_parallel_calls_and_text_parse_back(template: str) -> None:
    family = tool_family(get_template(template))
    pairs = (PARIS, ("get_time", {"tz": "CET"}))
    assert calls(template_reply(template, call_message(*pairs)), family) == list(pairs)
    if template == "qwen2.5":           # Mistral's templates take content or calls, not both
        r = parse_reply(template_reply(template, call_message(*pairs, content="Checking both.")), family)
        assert r.content == "Checking both." and len(r.tool_calls) == 2


def test_families_of_the_shipped_templates() -> None:
    assert {t: tool_family(get_template(t)) for t in ("qwen2.5", "qwen3", "chatml", "llama3.1", "mistral-v7",
                                                      "gpt-oss", "gemma3", "deepseek-v3")} == {
        "qwen2.5": "hermes", "qwen3": "hermes", "chatml": "hermes", "llama3.1": "llama3-json",
        "mistral-v7": "mistral", "gpt-oss": "harmony", "gemma3": "plain", "deepseek-v3": "plain"}


# --- streaming: nothing sent early is ever taken back -----------------------------------------------
CALL_JSON = '{"name": "f", "arguments": {"a": 1}}'
NOISE = ["hello ", " ", "\n", "é", "🤔", "{", "}", "[", "]", "<", "|", ";", "<|end|>", "<|start|>"]
# Whole constructs of each family (so that valid calls and reasoning do occur), their markers alone
# (so that broken and unclosed ones occur too), and noise.
PIECES = {
    "hermes": [f"<tool_call>\n{CALL_JSON}\n</tool_call>", "<think>\nhmm\n</think>\n\n", "<think>", "</think>",
               "<tool_call>", "</tool_call>", CALL_JSON],
    "llama3-json": ['{"name": "g", "parameters": {"b": 2}}', "<|python_tag|>", "; ", CALL_JSON],
    "mistral": [f"[TOOL_CALLS] [{CALL_JSON}]", '[TOOL_CALLS]f[ARGS]{"a": 1}', "[TOOL_CALLS]", "[ARGS]", CALL_JSON],
    "harmony": ["<|channel|>analysis<|message|>think<|end|><|start|>assistant", "<|channel|>final<|message|>done",
                ' to=functions.f<|channel|>commentary json<|message|>{"a": 1}', "<|channel|>", "<|message|>",
                "analysis", "final", " to=functions.f"],
    "plain": ["<tool_call>", CALL_JSON],
}


@settings(max_examples=300, deadline=None)
@given(data=st.data(), family=st.sampled_from(FAMILIES), tools=st.booleans())
def test_settled_text_is_a_prefix_of_every_continuation(data: st.DataObject, family: str, tools: bool) -> None:
    parts = data.draw(st.lists(st.sampled_from(PIECES[family] + NOISE), max_size=8))
    text = "".join(parts)
    final = parse_reply(text, family, tools=tools)
    for cut in range(len(text) + 1):            # every point a stream could have reached
        reasoning, content = settled(text[:cut], family, tools=tools)
        assert final.reasoning.startswith(reasoning), (text[:cut], reasoning, final)
        assert final.content.startswith(content), (text[:cut], content, final)


CRAFTED = [
    ("hermes", f"Let me look. \n\n<tool_call>\n{CALL_JSON}\n</tool_call>\n"),
    ("hermes", f"  <think>\n plan \n</think>\n\n Answer: <tool_call>{CALL_JSON}</tool_call>"),
    ("hermes", "<think>unfinished reasoning </thi"),
    ("llama3-json", f"  <|python_tag|>{CALL_JSON}"),
    ("llama3-json", "  Plain words after spaces."),
    ("mistral", f"Sure thing.  [TOOL_CALLS] [{CALL_JSON}]"),
    ("harmony", "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|end|>c"),
    ("harmony", '<|channel|>final<|message|>x<|end|><|start|>assistant to=functions.f<|channel|>commentary'
                ' json<|message|>{"a": 1}'),
]


@pytest.mark.parametrize("family, text", CRAFTED)
def test_settled_text_is_a_prefix_at_every_cut_of_these_replies(family: str, text: str) -> None:
    final = parse_reply(text, family)
    for cut in range(len(text) + 1):
        reasoning, content = settled(text[:cut], family)
        assert final.reasoning.startswith(reasoning) and final.content.startswith(content), (text[:cut], final)
    # and nothing is held back for nothing: a reply with content or reasoning sends some before its end
    assert settled(text, family) != ("", "") or final == ParsedReply("", "", final.tool_calls)


@pytest.mark.parametrize("family, text", [
    ("hermes", 'Checking é→ü.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
               "</tool_call>"),
    ("hermes", "<think>\nhmm 🤔\n</think>\n\nDone: 北京"),
    ("harmony", "<|channel|>analysis<|message|>Thinking 🤔<|end|><|start|>assistant<|channel|>final<|message|>Sunny."),
    ("llama3-json", '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}'),
])
def test_a_reply_streamed_token_by_token_adds_up_to_its_parse(family: str, text: str) -> None:
    tokenizer = get_tokenizer({"harmony": "gpt-oss", "llama3-json": "llama3"}.get(family, "qwen2.5"))
    stream = ReplyText(tokenizer, family, tools=True)
    reasoning = content = ""
    for token in tokenizer.encode(text):
        d = stream.feed(int(token))
        assert "\ufffd" not in d.content + d.reasoning, "half a character was sent"
        reasoning, content = reasoning + d.reasoning, content + d.content
    d, parsed = stream.finish()
    assert (reasoning + d.reasoning, content + d.content) == (parsed.reasoning, parsed.content)
    assert parsed == parse_reply(text, family)
    if family == "hermes" and parsed.tool_calls:
        assert content == "Checking é→ü." and parsed.tool_calls == (ParsedCall(*PARIS[:1], json.dumps(PARIS[1])),)


def test_stop_strings_end_the_reply_and_are_held_back_while_they_may_come() -> None:
    tok = get_tokenizer("qwen2.5")
    stream = ReplyText(tok, "hermes", stop=("STOP here",))
    sent = ""
    for token in tok.encode("one two STOP here three"):
        sent += stream.feed(int(token)).content
        assert "STOP" not in sent
    d, parsed = stream.finish()
    assert sent + d.content == parsed.content == "one two " and stream.stop_hit == "STOP here"
