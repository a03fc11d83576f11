"""Fuzz: requests with control strings in every field, on every shipped template (issue 14).

Under "escape" for every source, no control id comes from the request: the prompt's control ids are
exactly those of the same request with each control string replaced by a stand-in ("X7Y"), and so is
its text once the escaped spans are read as those stand-ins. Under "reject" a request is refused
exactly when it holds a control string in a field the template may render. 500 examples here;
`pytest -m nightly` runs 10,000.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import Assembler
from workbench.errors import InjectionError, TemplateError
from workbench.templates import shipped_names

TEMPLATES = shipped_names()
NO_TOOL_CALLS = {"gemma3", "phi4"}
STRICT_NAMES = {"mistral-v3", "mistral-tekken", "mistral-v7"}   # ids of 9 letters/digits, names [a-zA-Z0-9_-]
ESCAPE_ALL = {"injection": "escape", "tool_injection": "escape", "assistant_injection": "escape"}
REJECT_ALL = {"injection": "reject", "tool_injection": "reject", "assistant_injection": "reject"}


@cache
def assembler(template: str, policy: str) -> Assembler:
    return Assembler(template=template, cache=None, **(ESCAPE_ALL if policy == "escape" else REJECT_ALL))


def fragments(template: str) -> list[str]:
    """The template's own control strings, pieces of them, and characters they are made of."""
    asm = assembler(template, "escape")
    own = [t for t in asm.tokenizer.specials if t in asm.template.source] or sorted(asm.tokenizer.specials)[:8]
    pieces = [t[: len(t) // 2] for t in own] + [t[len(t) // 2:] for t in own]
    return own + pieces + ["<|", "|>", "[", "]", "｜", "▁", "<", ">", "\n", " ", "x", "\\", '"', "/"]


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, dict]:
    template = draw(st.sampled_from(TEMPLATES))
    frag = st.sampled_from(fragments(template))
    text = st.lists(st.one_of(frag, st.text("ab _-", max_size=3)), min_size=1, max_size=6).map("".join)
    word = st.text("abcdefgh", min_size=1, max_size=6)
    name = word if template in STRICT_NAMES else text.filter(bool)
    strict = template in STRICT_NAMES

    def args() -> str:
        obj = draw(st.dictionaries(text, st.one_of(text, st.integers(0, 9)), max_size=2))
        return json.dumps(obj, ensure_ascii=draw(st.booleans()))

    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(text)})
    user: dict = {"role": "user", "content": draw(text)}
    if draw(st.booleans()):
        user["name"] = draw(name)
    msgs.append(user)
    assistant: dict = {"role": "assistant", "content": draw(text)}
    if draw(st.booleans()) and template not in STRICT_NAMES:
        assistant["reasoning_content"] = draw(text)
    msgs.append(assistant)
    if template not in NO_TOOL_CALLS and draw(st.booleans()):
        cid = draw(st.text("abcdefghi123", min_size=9, max_size=9)) if strict else draw(text.filter(bool))
        msgs += [{"role": "user", "content": draw(text)},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": cid, "type": "function", "function": {"name": draw(name), "arguments": args()}}]},
                 {"role": "tool", "tool_call_id": cid, "content": draw(text)}]
    msgs.append({"role": "user", "content": draw(text)})
    req: dict[str, Any] = {"messages": msgs}
    if draw(st.booleans()):
        req["tools"] = [{"type": "function", "function": {
            "name": draw(name), "description": draw(text),
            "parameters": {"type": "object",
                           "properties": {draw(text): {"type": "string", "description": draw(text)}}}}}]
    return template, req


def stand_in(template: str, token: str) -> str:
    """What stands for a control string in the sanitized request: one per token ("X7Y"), so two
    JSON keys that differ by their control strings stay two keys."""
    return f"X{sorted(assembler(template, 'escape').tokenizer.specials).index(token)}Y"


def sanitized(template: str, req: dict) -> dict:
    """The request with every control string of every field replaced by its stand-in (JSON texts
    decoded first)."""
    tok = assembler(template, "escape").tokenizer

    def sub(s: str) -> str:
        if tok.special_pattern is None:
            return s
        return tok.special_pattern.sub(lambda m: stand_in(template, m.group()), s)

    def deep(o: Any) -> Any:
        if isinstance(o, str):
            return sub(o)
        if isinstance(o, dict):
            return {sub(k): deep(v) for k, v in o.items()}
        if isinstance(o, list):
            return [deep(v) for v in o]
        return o

    out = json.loads(json.dumps(req))
    for m in out["messages"]:
        for k in ("content", "name", "reasoning_content", "tool_call_id"):
            if isinstance(m.get(k), str):
                m[k] = sub(m[k])
        for c in m.get("tool_calls") or []:
            c["id"] = sub(c["id"])
            c["function"]["name"] = sub(c["function"]["name"])
            a = c["function"]["arguments"]
            c["function"]["arguments"] = json.dumps(deep(json.loads(a)), ensure_ascii="\\u" in a)
    if "tools" in out:
        out["tools"] = deep(out["tools"])
    return out


def check(template: str, req: dict) -> None:
    asm = assembler(template, "escape")
    clean = sanitized(template, req)
    try:
        expected = asm.assemble(clean)
    except TemplateError:
        # the template refuses this conversation shape; the hostile one must not get further
        with pytest.raises(TemplateError):
            asm.assemble(req)
        return
    got = asm.assemble(req)
    special = asm.context.special_of_id
    assert [int(i) for i in got.token_ids if int(i) in special] == \
        [int(i) for i in expected.token_ids if int(i) in special]
    text, pos = [], 0
    for a, b in got.escaped:
        text += [got.text[pos:a], stand_in(template, got.text[a:b])]
        pos = b
    assert "".join(text + [got.text[pos:]]) == expected.text
    reported = any(d.code == "special_token_injection" for d in got.diagnostics)
    assert reported == (clean != req)
    if reported:
        with pytest.raises(InjectionError):
            assembler(template, "reject").assemble(req)
    else:
        assert assembler(template, "reject").assemble(req).token_ids.tolist() == got.token_ids.tolist()


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile())
def test_no_control_token_from_request_text(case: tuple[str, dict]):
    check(*case)


@pytest.mark.nightly
@settings(max_examples=10_000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile())
def test_no_control_token_from_request_text_long(case: tuple[str, dict]):
    check(*case)
