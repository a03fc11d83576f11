"""Exactness of the `qwen2.5` and `qwen3` templates and tokenizers.

Text oracle: the official chat templates (Qwen/Qwen2.5-7B-Instruct, Qwen/Qwen3-0.6B) rendered by
transformers' own `render_jinja_template`, on the message dicts transformers would hand them for the
raw request (tests/oracles.py `hf_chat`: no workbench intake or cleaning on the official side), with
the official tokenizer_config's special tokens (neither template reads bos_token or eos_token, and
Qwen's bos_token is null). Id oracles, both independent of our tokenizer code:
  - the Qwen2 GGUF vocabulary (.oracles/vocab/ggml-vocab-qwen2.gguf) turned into a Hugging Face
    `tokenizers` tokenizer by transformers' GGUF converter; that file predates Qwen2.5's added
    tokens (ids 151646+ are [PADn] placeholders), so the official added tokens are written into
    those slots, names and ids taken from quicktok's qwen3 vocabulary; the oracle is itself checked
    against the file's 46 test vectors;
  - for qwen3 also quicktok's own qwen3 encoding, with all its special tokens allowed.
transformers' `AutoTokenizer.from_pretrained(..., gguf_file=...)` needs torch, which this
environment lacks, so the GGUF metadata is read here (a few lines of struct parsing) and handed
to the same converter that `from_pretrained` uses.
"""

from __future__ import annotations

import struct
from functools import cache

import numpy as np
import pytest
from corpus import CASES, FLIGHTS, WEATHER, Case
from jinja2.exceptions import UndefinedError
from oracles import ensure, hf_chat, official_template, vocab_vectors
from transformers.utils.chat_template_utils import render_jinja_template

from workbench.assembly import Assembler
from workbench.errors import TemplateError
from workbench.templates import get_template
from workbench.tokenizers import get_tokenizer

QWEN25 = "Qwen-Qwen2.5-7B-Instruct.jinja"
QWEN3 = "Qwen-Qwen3-0.6B.jinja"


# ----------------------------------------------------------------------------- oracles
def _read_gguf_kv(path) -> dict:
    """The key/value metadata of a GGUF file (v2/v3), arrays as Python lists."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"GGUF"
    pos = 4
    version, = struct.unpack_from("<I", data, pos)
    pos += 4
    assert version in (2, 3)
    _, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def read_str():
        nonlocal pos
        n, = struct.unpack_from("<Q", data, pos)
        pos += 8
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def read_val(t):
        nonlocal pos
        if t == 8:
            return read_str()
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if et in scalar:
                arr = np.frombuffer(data, dtype=np.dtype("<" + scalar[et]), count=n, offset=pos)
                pos += arr.nbytes
                return arr.tolist()
            return [read_val(et) for _ in range(n)]
        v, = struct.unpack_from("<" + scalar[t], data, pos)
        pos += struct.calcsize(scalar[t])
        return v

    kv = {}
    for _ in range(n_kv):
        key = read_str()
        t, = struct.unpack_from("<I", data, pos)
        pos += 4
        kv[key] = read_val(t)
    return kv


def _official_added_tokens(last_id: int) -> dict[int, str]:
    """Qwen's added tokens by id (from quicktok's qwen3 vocabulary), up to `last_id`."""
    import quicktok
    enc = quicktok.get_encoding("qwen3")
    return {enc.encode_single_token(t): t for t in enc.special_tokens_set if enc.encode_single_token(t) <= last_id}


@cache
def gguf_tokenizer(last_special: int):
    """The Qwen2 GGUF vocabulary as a `tokenizers.Tokenizer`, with the official added tokens up to an id."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer
    kv = _read_gguf_kv(ensure() / "vocab" / "ggml-vocab-qwen2.gguf")
    td = {name: kv[f"tokenizer.{key}"] for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
          if f"tokenizer.{key}" in kv}
    tokens, types = list(td["tokens"]), list(td["token_type"])
    for i, t in _official_added_tokens(last_special).items():
        assert tokens[i] == t or tokens[i] == f"[PAD{i}]", (i, tokens[i])
        tokens[i], types[i] = t, 3  # CONTROL: added whole, at this id
    td["tokens"], td["token_type"] = tokens, types
    tok, _ = convert_gguf_tokenizer(kv["general.architecture"], td)
    return tok


@pytest.fixture(scope="module")
def qwen25_oracle():
    return gguf_tokenizer(151664)


@pytest.fixture(scope="module")
def qwen3_oracle():
    return gguf_tokenizer(151668)


@pytest.fixture(scope="module")
def quicktok_qwen3():
    import quicktok
    return quicktok.get_encoding("qwen3")


def oracle_ids(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def official_render(filename: str, messages: list[dict], tools, agp: bool, **kw) -> str:
    return render_jinja_template(conversations=[messages], tools=tools, chat_template=official_template(filename),
                                 add_generation_prompt=agp, **kw)[0][0]


def ours_render(name: str, messages: list[dict], tools, agp: bool, **kw) -> str:
    """Our shipped template rendered by transformers itself (no workbench code in the way)."""
    return render_jinja_template(conversations=[messages], tools=tools, chat_template=get_template(name).source,
                                 add_generation_prompt=agp, **kw)[0][0]


def options(case: Case) -> dict:
    # Assistant content holding <think>...</think> is how Qwen3 clients often send back reasoning,
    # and the official template parses it. Assistant text is model output, so under the default
    # policy its control tokens stay control tokens, reported as 'assistant_control_tokens'.
    return {}


def assembler(template: str, case: Case, **kw) -> Assembler:
    return Assembler(template=template, **options(case), **kw)


# Qwen2.5 and Qwen3 tokenizer_config.json: eos_token "<|im_end|>", bos_token null (unused by both templates).
SPECIALS = {"eos_token": "<|im_end|>"}


def with_empty_content(messages: list[dict]) -> list[dict]:
    # transformers leaves out `content` when it is null (an assistant turn with only tool calls;
    # `hf_chat` step 1); the official Qwen3-0.6B template then fails on `message.content`. Later
    # official Qwen3 templates (and ours) treat it as '', which is what the oracle is given here.
    return [m if "content" in m else dict(m, content="") for m in messages]


def check_segments(r) -> None:
    assert "".join(s.text for s in r.segments) == r.text
    ids = np.concatenate([s.token_ids for s in r.segments]) if r.segments else np.zeros(0, np.uint32)
    assert ids.dtype == np.uint32 and r.token_ids.dtype == np.uint32
    assert np.array_equal(ids, r.token_ids)
    pos = 0
    for s in r.segments:
        assert s.start == pos and s.end == pos + len(s.token_ids)
        pos = s.end


# ----------------------------------------------------------------------------- vocab vectors
VECTORS = vocab_vectors("qwen2")


def test_vector_count():
    assert len(VECTORS) == 46


@pytest.mark.parametrize("text,expected", VECTORS, ids=[f"v{i}" for i in range(len(VECTORS))])
def test_qwen25_tokenizer_vectors(text, expected):
    assert get_tokenizer("qwen2.5").encode_ordinary(text).tolist() == expected


@pytest.mark.parametrize("text,expected", VECTORS, ids=[f"v{i}" for i in range(len(VECTORS))])
def test_gguf_oracle_vectors(text, expected, qwen25_oracle):
    # The id oracle itself reproduces llama.cpp's expected ids.
    assert oracle_ids(qwen25_oracle, text) == expected


# ----------------------------------------------------------------------------- extra conversations
def _call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


EXTRA: list[Case] = [
    # several tool rounds, content next to tool calls, reasoning both as a field and inside content
    Case("multi_step_tools", [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Plan a trip: weather in Oslo, then flights OSL to ROM on 2026-05-01."},
        {"role": "assistant", "content": "Checking the weather first.", "reasoning_content": "Need weather.",
         "tool_calls": [_call("callA0001", "get_weather", '{"city": "Oslo"}')]},
        {"role": "tool", "tool_call_id": "callA0001", "content": '{"temperature": 4}'},
        {"role": "assistant", "content": "<think>\nNow the flights.\n</think>\n\n",
         "tool_calls": [_call("callA0002", "search_flights",
                              '{"origin": "OSL", "destination": "ROM", "date": "2026-05-01"}')]},
        {"role": "tool", "tool_call_id": "callA0002", "content": '[{"flight": "SK 4711"}]'},
        {"role": "assistant", "content": "It is 4 °C in Oslo; SK 4711 flies to Rome.",
         "reasoning_content": "Summarise both results."},
    ], tools=[WEATHER, FLIGHTS], tags={"system", "tools", "tool_calls", "reasoning", "ends_assistant",
                                       "think_in_content"}),
    Case("think_in_content", [
        {"role": "user", "content": "Pick a number."},
        {"role": "assistant", "content": "<think>\nAny will do.\n</think>\n\nSeven."},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "<think>Still any.</think>Three."},
    ], tags={"reasoning", "ends_assistant", "think_in_content"}),
    Case("system_later", [
        {"role": "system", "content": "First rules."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi."},
        {"role": "system", "content": "New rules: be brief."},
        {"role": "user", "content": "Bye"},
    ], tags={"system"}),
]


def _all_cases() -> list[Case]:
    return CASES + EXTRA


# Message lists rendered straight through both templates (no pipeline): forms the pipeline never
# produces but a template must handle the way the official one does.
RAW: dict[str, tuple[list[dict], list | None]] = {
    "string_arguments": ([
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c1", "get_weather", '{"city":"Paris"}')]},
        {"role": "tool", "content": "sunny"},
    ], [WEATHER]),
    "bare_tool_call_no_function_key": ([
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "Calling.", "tool_calls": [{"name": "get_weather",
                                                                  "arguments": {"city": "Rome"}}]},
        {"role": "tool", "content": "a"}, {"role": "tool", "content": "b"},
        {"role": "user", "content": "thanks"},
    ], [WEATHER]),
    "tool_response_as_user": ([
        {"role": "user", "content": "Question"},
        {"role": "assistant", "content": "", "reasoning_content": "call it",
         "tool_calls": [_call("c1", "get_weather", {"city": "Nice"})]},
        {"role": "user", "content": "<tool_response>\n18\n</tool_response>"},
        {"role": "assistant", "content": "18 degrees.", "reasoning_content": "read it"},
    ], None),
    "only_system": ([{"role": "system", "content": "Alone."}], None),
    "system_and_tools_only": ([{"role": "system", "content": "Alone."}], [WEATHER]),
}


# ----------------------------------------------------------------------------- text: qwen2.5
@pytest.mark.parametrize("case", _all_cases(), ids=lambda c: c.name)
def test_qwen25_text(case):
    msgs, tools, agp = hf_chat(case.request())
    expected = official_render(QWEN25, msgs, tools, agp, **SPECIALS)
    r = assembler("qwen2.5", case).assemble(case.request())
    assert r.text == expected
    check_segments(r)


@pytest.mark.parametrize("name", sorted(RAW))
@pytest.mark.parametrize("agp", [True, False])
def test_qwen25_text_raw(name, agp):
    msgs, tools = RAW[name]
    assert ours_render("qwen2.5", msgs, tools, agp) == official_render(QWEN25, msgs, tools, agp)


def test_qwen25_default_system_segment():
    r = Assembler(template="qwen2.5").assemble({"messages": [{"role": "user", "content": "Hi"}]})
    first = r.segments[0]
    assert (first.kind, first.seq) == ("system", None)
    assert first.text == ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. "
                          "You are a helpful assistant.<|im_end|>\n")
    assert [(s.kind, s.seq) for s in r.segments[1:]] == [("message", 0), ("generation_prompt", None)]
    assert r.segments[-1].text == "<|im_start|>assistant\n"


def test_qwen25_own_system_and_tools_segments():
    case = next(c for c in CASES if c.name == "tool_call_round")
    r = Assembler(template="qwen2.5").assemble(case.request())
    kinds = [(s.kind, s.role, s.seq) for s in r.segments]
    assert kinds[:2] == [("system", "system", 0), ("tools", None, None)]
    assert r.segments[1].text.startswith("# Tools\n\n")
    assert r.segments[1].text.endswith("</tool_call><|im_end|>\n")
    assert [k[2] for k in kinds[2:]] == [1, 2, 3, 4, 5, None]
    assert r.segments[3].text.startswith("<|im_start|>assistant\n<tool_call>\n")


# ----------------------------------------------------------------------------- text: qwen3
@pytest.mark.parametrize("case", _all_cases(), ids=lambda c: c.name)
def test_qwen3_text(case):
    msgs, tools, agp = hf_chat(case.request())
    expected = official_render(QWEN3, with_empty_content(msgs), tools, agp, **SPECIALS)
    r = assembler("qwen3", case).assemble(case.request())
    assert r.text == expected
    check_segments(r)


@pytest.mark.parametrize("name", sorted(RAW))
@pytest.mark.parametrize("agp", [True, False])
def test_qwen3_text_raw(name, agp):
    msgs, tools = RAW[name]
    assert ours_render("qwen3", msgs, tools, agp) == official_render(QWEN3, msgs, tools, agp)


def test_qwen3_official_fails_where_content_is_missing():
    # Documents why `with_empty_content` exists: the official file cannot render a null content.
    msgs, tools, agp = hf_chat(next(c for c in CASES if c.name == "tool_call_round").request())
    assert any("content" not in m for m in msgs)
    with pytest.raises(UndefinedError, match="has no attribute 'content'"):
        official_render(QWEN3, msgs, tools, agp)


@pytest.mark.parametrize("case", [c for c in _all_cases() if c.messages[-1]["role"] != "assistant"],
                         ids=lambda c: c.name)
def test_qwen3_enable_thinking_false(case):
    a = assembler("qwen3", case, template_kwargs={"enable_thinking": False})
    assert a.context.kwargs["enable_thinking"] is False  # handed to the template as a variable, like transformers
    msgs, tools, agp = hf_chat(case.request())
    expected = official_render(QWEN3, with_empty_content(msgs), tools, agp, enable_thinking=False, **SPECIALS)
    r = a.assemble(case.request())
    assert r.text == expected and r.text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert r.segments[-1].kind == "generation_prompt"
    assert r.segments[-1].text == "<|im_start|>assistant\n<think>\n\n</think>\n\n"


def test_qwen3_enable_thinking_true_is_plain():
    case = CASES[0]
    r = assembler("qwen3", case, template_kwargs={"enable_thinking": True}).assemble(case.request())
    msgs, tools, agp = hf_chat(case.request())
    assert r.text == official_render(QWEN3, msgs, tools, agp, enable_thinking=True, **SPECIALS)
    assert r.text.endswith("<|im_start|>assistant\n")


def test_qwen3_dropped_reasoning_is_reported():
    case = next(c for c in CASES if c.name == "reasoning")
    r = Assembler(template="qwen3").assemble(case.request())
    assert "17 is not divisible" not in r.text
    rewrites = [d for d in r.diagnostics if d.code == "template_rewrite"]
    assert [d.seq for d in rewrites] == [1]


def test_qwen3_kept_reasoning_is_not_reported():
    case = next(c for c in CASES if c.name == "reasoning_last")
    r = Assembler(template="qwen3").assemble(case.request())
    assert "<think>\n19 has no divisors below 5.\n</think>\n\nYes." in r.text
    assert not [d for d in r.diagnostics if d.code == "template_rewrite"]
    seg = [s for s in r.segments if s.seq == 1]
    assert len(seg) == 1 and seg[0].text.startswith("<|im_start|>assistant\n<think>\n")


def test_qwen3_multi_step_keeps_reasoning_after_last_query():
    case = next(c for c in EXTRA if c.name == "multi_step_tools")
    r = assembler("qwen3", case).assemble(case.request())
    assert [d.seq for d in r.diagnostics if d.code == "assistant_control_tokens"] == [4]
    # every assistant turn follows the last real user query, so all reasoning stays
    for s in ("Need weather.", "Now the flights.", "Summarise both results."):
        assert s in r.text
    assert not [d for d in r.diagnostics if d.code == "template_rewrite"]


def test_qwen3_tool_results_share_one_user_turn():
    case = next(c for c in CASES if c.name == "parallel_calls")
    r = Assembler(template="qwen3").assemble(case.request())
    tools = [s for s in r.segments if s.role == "tool"]
    assert [s.seq for s in tools] == [2, 3]
    assert tools[0].text == '<|im_start|>user\n<tool_response>\n{"temperature": 18}\n</tool_response>'
    assert tools[1].text == '\n<tool_response>\n{"temperature": 11}\n</tool_response><|im_end|>\n'


def test_qwen3_no_system_no_tools_has_no_system_segment():
    r = Assembler(template="qwen3").assemble({"messages": [{"role": "user", "content": "Hi"}]})
    assert [(s.kind, s.seq) for s in r.segments] == [("message", 0), ("generation_prompt", None)]


# ----------------------------------------------------------------------------- ids
@pytest.mark.parametrize("case", _all_cases(), ids=lambda c: c.name)
def test_qwen25_ids(case, qwen25_oracle):
    r = assembler("qwen2.5", case).assemble(case.request())
    assert r.tokenizer["name"] == "qwen2.5"
    assert r.token_ids.tolist() == oracle_ids(qwen25_oracle, r.text)


@pytest.mark.parametrize("case", _all_cases(), ids=lambda c: c.name)
def test_qwen3_ids(case, qwen3_oracle, quicktok_qwen3):
    r = assembler("qwen3", case).assemble(case.request())
    assert r.tokenizer["name"] == "qwen3"
    ids = r.token_ids.tolist()
    assert ids == quicktok_qwen3.encode(r.text, allowed_special="all")
    assert ids == oracle_ids(qwen3_oracle, r.text)


def test_qwen3_specials_are_single_ids():
    case = next(c for c in CASES if c.name == "reasoning_last")
    ids = Assembler(template="qwen3").assemble(case.request()).token_ids.tolist()
    assert 151667 in ids and 151668 in ids  # <think>, </think>
    case = next(c for c in CASES if c.name == "tool_call_round")
    ids = Assembler(template="qwen3").assemble(case.request()).token_ids.tolist()
    assert {151657, 151658, 151665, 151666} <= set(ids)  # <tool_call> </tool_call> <tool_response> </tool_response>
    # qwen2.5 has no <tool_response> token: the same text is spelled out in ordinary tokens
    ids25 = Assembler(template="qwen2.5").assemble(case.request()).token_ids.tolist()
    assert 151665 not in ids25 and {151657, 151658} <= set(ids25)


def test_qwen3_enable_thinking_ids(qwen3_oracle):
    r = Assembler(template="qwen3", template_kwargs={"enable_thinking": False}).assemble(CASES[1].request())
    assert r.token_ids.tolist() == oracle_ids(qwen3_oracle, r.text)
    assert r.segments[-1].token_ids.tolist() == [151644, 77091, 198, 151667, 271, 151668, 271]


# ----------------------------------------------------------------------------- failures
def test_user_without_content_fails_like_official():
    msgs = [{"role": "user"}]
    with pytest.raises(UndefinedError, match="has no attribute 'content'"):
        official_render(QWEN25, msgs, None, True)
    with pytest.raises(TemplateError):
        from workbench.templates.render import render
        render(get_template("qwen2.5").source, "qwen2.5", msgs, tools=None, add_generation_prompt=True, kwargs={})


# ----------------------------------------------------------------------------- random conversations
def _random_conversation(rng) -> tuple[list[dict], list | None]:
    """Any mix of roles and fields the official templates accept (string content everywhere)."""
    texts = ["", "Hi", "  spaced  ", "\nnl\n", "中文 😀", "<think>\nr\n</think>\n\nanswer", "<think>x</think>y",
             "<tool_response>\nok\n</tool_response>", "a\n\nb"]
    msgs: list[dict] = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": rng.choice(texts)})
    for _ in range(rng.randint(1, 7)):
        role = rng.choice(["user", "assistant", "assistant", "tool", "system"])
        m: dict = {"role": role, "content": rng.choice(texts)}
        if role == "assistant":
            if rng.random() < 0.4:
                m["reasoning_content"] = rng.choice(["", "why", "\nthink\n"])
            if rng.random() < 0.4:
                m["tool_calls"] = [_call(f"c{k}", rng.choice(["get_weather", "search_flights"]),
                                         rng.choice([{"city": "Paris"}, {}, {"a": [1, "é"]}]))
                                   for k in range(rng.randint(1, 3))]
        msgs.append(m)
    tools = rng.choice([None, [WEATHER], [WEATHER, FLIGHTS]])
    return msgs, tools


@pytest.mark.parametrize("seed", range(150))
def test_random_conversations_match_official(seed):
    import random
    rng = random.Random(seed)
    msgs, tools = _random_conversation(rng)
    agp = rng.random() < 0.6
    for name, official in (("qwen2.5", QWEN25), ("qwen3", QWEN3)):
        extra = {"enable_thinking": rng.random() < 0.5} if name == "qwen3" and rng.random() < 0.5 else {}
        assert ours_render(name, msgs, tools, agp, **extra) == official_render(official, msgs, tools, agp, **extra)
