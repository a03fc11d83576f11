"""Exactness of the shipped `llama3` and `llama3.1` templates.

Text oracles (their input built from the raw request by tests/oracles.py `hf_chat`, as
transformers hands it to a template; no workbench intake or cleaning on the official side):
  llama3    Meta-Llama-3-8B-Instruct's chat template (the 3.0 format; quoted below, since
            llama.cpp's template folder does not carry it).
  llama3.1  meta-llama-Llama-3.1-8B-Instruct.jinja and -3.3-70B (identical), and -3.2-3B
            given the same `date_string` (3.2 otherwise writes today's date, and has no
            builtin_tools).
Id oracles (llama-models, Meta's reference code):
  * `Tokenizer.encode(text, allowed_special="all")` on the rendered text, for every case;
  * `ChatFormat.encode_dialog_prompt(...)` for conversations without tools, where the
    formats agree (ChatFormat does not trim, always adds the assistant header, writes no
    date line, and uses its own tool-call JSON and `ipython` header for tool results);
  * the ggml-vocab-llama-bpe test vectors against `encode_ordinary`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from corpus import CASES, FLIGHTS, WEATHER, Case
from oracles import hf_chat, official_template, vocab_vectors
from transformers.utils.chat_template_utils import render_jinja_template

from workbench.assembly import Assembler
from workbench.errors import TemplateError
from workbench.templates import get_template, render
from workbench.tokenizers import get_tokenizer

# Meta-Llama-3-8B-Instruct / 70B-Instruct tokenizer_config.json "chat_template" (the oracle only).
LLAMA3_OFFICIAL = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")
BOS, EOT = "<|begin_of_text|>", "<|eot_id|>"
DATE_LINE = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
L31 = "meta-llama-Llama-3.1-8B-Instruct.jinja"
L32 = "meta-llama-Llama-3.2-3B-Instruct.jinja"
L33 = "meta-llama-Llama-3.3-70B-Instruct.jinja"


# ----------------------------------------------------------------------------- helpers
def official(src: str, msgs: list[dict], tools: list[dict] | None, agp: bool, **kw) -> str:
    return render_jinja_template(conversations=[msgs], tools=tools, chat_template=src, add_generation_prompt=agp,
                                 bos_token=BOS, eos_token=EOT, **kw)[0][0]


def official_or_error(src: str, msgs, tools, agp, **kw) -> str | Exception:
    try:
        return official(src, msgs, tools, agp, **kw)
    except Exception as exc:  # the official template raised (raise_exception, undefined field, ...)
        return exc


def ours(name: str, msgs: list[dict], tools: list[dict] | None, agp: bool, **kw) -> str:
    """Our shipped template rendered directly (for message dicts the intake would not produce)."""
    t = get_template(name)
    return render(t.source, name, msgs, tools=tools, add_generation_prompt=agp,
                  kwargs={"bos_token": t.bos_token, "eos_token": t.eos_token, **kw}).text


def check_segments(res) -> None:
    assert "".join(s.text for s in res.segments) == res.text
    assert np.array_equal(np.concatenate([s.token_ids for s in res.segments]), res.token_ids)
    assert all(s.token_count == len(s.token_ids) for s in res.segments)


@pytest.fixture(scope="module")
def meta_tok():
    import llama_models.llama3 as pkg
    from llama_models.llama3.tokenizer import Tokenizer
    return Tokenizer(Path(pkg.__file__).parent / "tokenizer.model")


@pytest.fixture(scope="module")
def chat_format(meta_tok):
    from llama_models.llama3.chat_format import ChatFormat
    return ChatFormat(meta_tok)


@pytest.fixture(scope="module")
def asm3():
    return Assembler(template="llama3")


@pytest.fixture(scope="module")
def asm31():
    return Assembler(template="llama3.1")


def raw_messages(msgs: list[dict]):
    """llama-models' own message type from raw OpenAI-style text messages (the ChatFormat
    comparisons take conversations without tools, so content is a string)."""
    from llama_models.datatypes import RawMessage
    return [RawMessage(role=m["role"], content=m["content"]) for m in msgs]


def trimmed(msgs: list[dict]) -> list[dict]:
    # ChatFormat writes content untrimmed: give it the trimmed content the templates write.
    return [{**m, "content": m["content"].strip()} for m in msgs]


def has_tools(case: Case) -> bool:
    return bool(case.tools) or any(m["role"] == "tool" or m.get("tool_calls") for m in case.messages)


# ----------------------------------------------------------------------------- llama3 (3.0)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_llama3_text_ids_segments(case, asm3, meta_tok):
    msgs, tools, agp = hf_chat(case.request())
    res = asm3.assemble(case.request())
    # The 3.0 format has no tools: Meta's template ignores `tools` and tool_calls, and so does ours;
    # tool results keep their `tool` role. The text must still be the official one.
    assert res.text == official(LLAMA3_OFFICIAL, msgs, tools, agp)
    assert res.text.startswith(BOS) and res.text.count(BOS) == 1
    assert res.token_ids.dtype == np.uint32
    assert res.token_ids.tolist() == meta_tok.encode(res.text, bos=False, eos=False, allowed_special="all")
    check_segments(res)
    kinds = [(s.kind, s.seq) for s in res.segments]
    assert kinds[0] == ("bos", None)
    seqs = [s.seq for s in res.segments if s.kind in ("message", "system")]
    assert seqs == list(range(len(case.messages)))
    assert (kinds[-1][0] == "generation_prompt") == agp
    for s in res.segments:
        if s.seq is not None:
            assert s.text.startswith("<|start_header_id|>" + case.messages[s.seq]["role"] + "<|end_header_id|>\n\n")
            assert s.text.endswith(EOT)


@pytest.mark.parametrize("case", [c for c in CASES if not has_tools(c)], ids=lambda c: c.name)
def test_llama3_ids_match_chat_format(case, asm3, chat_format, meta_tok):
    res = asm3.assemble(case.request())
    agp = case.messages[-1]["role"] != "assistant"
    expected = chat_format.encode_dialog_prompt(raw_messages(trimmed(case.messages))).tokens
    ids = res.token_ids.tolist()
    if not agp:  # ChatFormat always opens an assistant turn
        ids += meta_tok.encode("<|start_header_id|>assistant<|end_header_id|>\n\n", bos=False, eos=False,
                               allowed_special="all")
    assert ids == expected


def test_llama3_ignores_tools_and_tool_calls(asm3):
    req = {"messages": [{"role": "user", "content": "Weather?"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function",
                             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
                        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
           "tools": [WEATHER]}
    res = asm3.assemble(req)
    assert "get_weather" not in res.text
    assert res.text.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n<|eot_id|>"
                             "<|start_header_id|>tool<|end_header_id|>\n\nsunny<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\n")


@pytest.mark.parametrize("msgs,agp", [
    ([], True), ([], False),
    ([{"role": "user", "content": [{"type": "text", "text": " a "}]}], True),
    ([{"role": "system", "content": "\n s \n"}, {"role": "user"}, {"role": "assistant", "content": " x "}], False),
    ([{"role": "ipython", "content": "r"}], True),
])
def test_llama3_direct_dicts(msgs, agp):
    assert ours("llama3", msgs, None, agp) == official(LLAMA3_OFFICIAL, msgs, None, agp)


# ----------------------------------------------------------------------------- llama3.1
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_llama31_text_ids_segments(case, asm31, meta_tok):
    msgs, tools, agp = hf_chat(case.request())
    want = official_or_error(official_template(L31), msgs, tools, agp)
    assert official_or_error(official_template(L33), msgs, tools, agp).__str__() == str(want)  # 3.3 == 3.1
    if isinstance(want, Exception):
        # e.g. parallel tool calls: "This model only supports single tool-calls at once!"
        with pytest.raises(TemplateError, match="single tool-calls"):
            asm31.assemble(case.request())
        assert "single tool-calls" in str(want)
        return
    res = asm31.assemble(case.request())
    assert res.text == want
    assert res.token_ids.tolist() == meta_tok.encode(res.text, bos=False, eos=False, allowed_special="all")
    check_segments(res)
    assert any(d.code == "template_date" and d.level == "info" for d in res.diagnostics)
    assert DATE_LINE in res.segments[1].text and res.segments[0].kind == "bos"
    assert res.segments[1].kind == "system"
    by_seq = {s.seq: s for s in res.segments if s.seq is not None}
    assert sorted(by_seq) == list(range(len(case.messages)))
    if case.messages[0]["role"] == "system":
        assert by_seq[0].text.endswith(case.messages[0]["content"].strip() + EOT)
    if tools:
        first = 1 if case.messages[0]["role"] == "system" else 0
        seg = by_seq[first]
        assert seg.role == "user" and seg.text.startswith("<|start_header_id|>user<|end_header_id|>\n\nGiven the")
        for t in case.tools:
            assert json.dumps(t, indent=4, ensure_ascii=False) in seg.text
        assert seg.text.endswith(case.messages[first]["content"].strip() + EOT)
        assert "Environment: ipython\n" in res.segments[1].text
    assert (res.segments[-1].kind == "generation_prompt") == agp


@pytest.mark.parametrize("case", [c for c in CASES if not has_tools(c)], ids=lambda c: c.name)
def test_llama31_ids_match_chat_format(case, asm31, chat_format):
    # ChatFormat has no date line: we hand it the system message the 3.1 template writes
    # (date lines + the trimmed system prompt); contents trimmed as the template does.
    res = asm31.assemble(case.request())
    msgs, agp = case.messages, case.messages[-1]["role"] != "assistant"
    system = ""
    if msgs[0]["role"] == "system":
        system, msgs = msgs[0]["content"].strip(), msgs[1:]
    dialog = [{"role": "system", "content": DATE_LINE + system}] + trimmed(msgs)
    expected = chat_format.encode_dialog_prompt(raw_messages(dialog)).tokens
    if agp:
        assert res.token_ids.tolist() == expected
    else:  # ChatFormat always opens an assistant turn; ours stops before it
        assert expected[:len(res.token_ids)] == res.token_ids.tolist()
        assert len(expected) - len(res.token_ids) == 4  # <|start_header_id|> assistant <|end_header_id|> \n\n


# (parallel_calls raises in every 3.x template; test_llama31_text_ids_segments covers that.)
@pytest.mark.parametrize("case", [c for c in CASES if "parallel" not in c.tags], ids=lambda c: c.name)
def test_llama32_with_fixed_date(case):
    # 3.2 writes strftime_now("%d %b %Y") unless date_string is given; with it, it is our format.
    asm = Assembler(template="llama3.1", template_kwargs={"date_string": "03 Mar 2025"})
    msgs, tools, agp = hf_chat(case.request())
    res = asm.assemble(case.request())
    assert res.text == official(official_template(L32), msgs, tools, agp, date_string="03 Mar 2025")
    assert "Today Date: 03 Mar 2025\n\n" in res.text


def test_vocab_vectors():
    tok = get_tokenizer("llama3")
    vectors = vocab_vectors("llama-bpe")
    assert len(vectors) == 46
    for text, expected in vectors:
        assert tok.encode_ordinary(text).tolist() == expected, text


# Conversations and options the corpus does not reach, rendered directly (ours vs official 3.1).
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
SEARCH = {"id": "c2", "type": "function", "function": {"name": "brave_search", "arguments": {"query": "llama 3"}}}
CODE = {"id": "c3", "type": "function", "function": {"name": "code_interpreter", "arguments": {"code": "1+1"}}}
DIRECT = {
    "string_arguments": ([{"role": "user", "content": "w"}, {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]}], [WEATHER], {}),
    "ipython_role_and_dict_result": ([{"role": "user", "content": "w"}, {"role": "assistant", "tool_calls": [CALL]},
                                      {"role": "ipython", "content": {"t": 3}},
                                      {"role": "tool", "content": ["a", 1]}], [WEATHER], {}),
    "call_content_is_dropped": ([{"role": "user", "content": "w"},
                                 {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL]}],
                                [WEATHER], {}),
    "tools_in_system": ([{"role": "system", "content": " S "}, {"role": "user", "content": " u "}],
                        [WEATHER, FLIGHTS], {"tools_in_user_message": False}),
    "tools_in_system_no_system": ([{"role": "user", "content": "u"}], [WEATHER], {"tools_in_user_message": False}),
    "first_after_system_is_assistant": ([{"role": "system", "content": "S"}, {"role": "assistant", "content": " a "},
                                         {"role": "user", "content": "u"}], [WEATHER], {}),
    "custom_tools": ([{"role": "user", "content": "u"}], None, {"custom_tools": [FLIGHTS]}),
    "date_string": ([{"role": "user", "content": "u"}], None, {"date_string": "01 Jan 2030"}),
    "builtin_tools": ([{"role": "system", "content": "S"}, {"role": "user", "content": "find"},
                       {"role": "assistant", "tool_calls": [SEARCH]}, {"role": "ipython", "content": "r"},
                       {"role": "assistant", "tool_calls": [CALL]}, {"role": "tool", "content": "sun"},
                       {"role": "assistant", "content": "done"}],
                      [WEATHER], {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}),
    "builtin_tools_only": ([{"role": "user", "content": "run"}, {"role": "assistant", "tool_calls": [CODE]}],
                           None, {"builtin_tools": ["code_interpreter"]}),
    "tool_message_with_tool_calls": ([{"role": "user", "content": "u"},
                                      {"role": "tool", "content": "x", "tool_calls": [CALL]}], None, {}),
}


@pytest.mark.parametrize("agp", [True, False])
@pytest.mark.parametrize("key", list(DIRECT))
def test_llama31_direct_dicts(key, agp):
    msgs, tools, kw = DIRECT[key]
    for src in (official_template(L31), official_template(L33)):
        assert ours("llama3.1", msgs, tools, agp, **kw) == official(src, msgs, tools, agp, **kw)


@pytest.mark.parametrize("msgs,tools,match", [
    ([{"role": "system", "content": "S"}], [WEATHER], "no first user message"),
    ([{"role": "user", "content": "u"}, {"role": "assistant", "tool_calls": [CALL, CALL]}], None, "single tool-calls"),
])
def test_llama31_raises_like_official(msgs, tools, match):
    with pytest.raises(Exception, match=match):
        official(official_template(L31), msgs, tools, True)
    with pytest.raises(TemplateError, match=match):
        ours("llama3.1", msgs, tools, True)
