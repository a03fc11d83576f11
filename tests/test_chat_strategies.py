"""The limits the property tests' generators draw around (strategies_chat.LIMITS) are the templates'
real refusals, and the only ones: each limit, crossed, is a typed `TemplateError` from the template
itself, and the same request is rendered by a template without that limit; over requests drawn
without regard to any limit, a template refuses exactly those that cross one of its limits."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from strategies_chat import (
    LIMITS,
    WEATHER,
    WHY,
    Accepts,
    accepts,
    call,
    ids_cut_to_nine,
    limits_crossed,
    refused_by_template,
    unrestricted,
)

from workbench import Assembler
from workbench.errors import TemplateError
from workbench.templates import shipped_names
from workbench.truncation import TruncationPolicy

USER, REPLY = {"role": "user", "content": "Weather in Oslo?"}, {"role": "assistant", "content": "Sunny."}
NEXT = {"role": "user", "content": "And tomorrow?"}
NOTE = {"role": "system", "content": "Answer in French from now on."}
RESULT = {"role": "tool", "tool_call_id": "call00000", "content": '{"sky": "clear"}'}
LONG = "call_l2M69i7WdDqgNmO6SfsyNVcE"   # an OpenAI-style id, as the sample sessions have


_ASM: dict[str, Assembler] = {}


def asm(template: str) -> Assembler:
    if template not in _ASM:
        _ASM[template] = Assembler(template=template, cache=None)
    return _ASM[template]


def req(*msgs: dict) -> dict:
    return {"messages": list(msgs), "tools": [WEATHER]}


# (template, limit, a request that crosses it and nothing else of that template's limits)
CROSSING = [
    ("gemma3", "tool_rounds", req(USER, call(["call00000"], text="Let me check."), RESULT, REPLY, NEXT)),
    ("gemma3", "tool_rounds", req(USER, call(["call00000"]), RESULT, REPLY, NEXT)),
    ("gemma3", "system_note", req(USER, REPLY, NOTE, NEXT)),
    ("gemma3", "system_note", req(USER, NOTE, REPLY, NEXT)),
    ("phi4", "call_text", req(USER, call(["call00000"]), RESULT, REPLY, NEXT)),
    *[(t, "call_text", req(USER, call(["call00000"], text="Let me check."), RESULT, REPLY, NEXT))
      for t in ("mistral-v3", "mistral-tekken")],
    *[(t, "system_note", req(USER, REPLY, NOTE, NEXT)) for t in ("mistral-v3", "mistral-tekken", "mistral-v7")],
    *[(t, "system_note", req(USER, call(["call00000"]), RESULT, NOTE, REPLY, NEXT))
      for t in ("mistral-v3", "mistral-tekken", "mistral-v7")],
    *[(t, "empty_reply", req(USER, {"role": "assistant", "content": ""}, NEXT))
      for t in ("mistral-v3", "mistral-tekken", "mistral-v7")],
    *[(t, "long_call_ids", req(USER, call([LONG]), {**RESULT, "tool_call_id": LONG}, REPLY, NEXT))
      for t in ("mistral-v3", "mistral-tekken", "mistral-v7")],
    ("llama3.1", "parallel_calls", req(USER, call(["call00000", "call00001"]), RESULT,
                                       {**RESULT, "tool_call_id": "call00001"}, REPLY, NEXT)),
    ("llama3.1", "tools_need_user", req(NOTE)),
]


@pytest.mark.parametrize("template, limit, request_", CROSSING,
                         ids=[f"{t}-{k}-{i}" for i, (t, k, _) in enumerate(CROSSING)])
def test_each_limit_is_a_refusal_of_the_template(template: str, limit: str, request_: dict) -> None:
    assert limits_crossed(template, request_) == {limit}
    with pytest.raises(TemplateError, match=WHY[limit]) as caught:
        asm(template).assemble(request_)
    assert refused_by_template(caught.value)
    # The shape itself is a conversation other templates render: the refusal is this template's.
    others = [t for t in ("qwen2.5", "llama3", "deepseek-v3", "gpt-oss") if not limits_crossed(t, request_)]
    assert others
    for other in others:
        assert asm(other).assemble(request_).total_tokens > 0


def test_every_limit_is_shown_and_every_limited_template_has_a_crossing() -> None:
    defaults = Accepts()
    declared = {(t, k) for t, acc in LIMITS.items() for k in WHY if getattr(acc, k) != getattr(defaults, k)}
    assert {(t, k) for t, k, _ in CROSSING} == declared
    assert set(LIMITS) <= set(shipped_names())


@pytest.mark.parametrize("template", ["mistral-v3", "mistral-tekken", "mistral-v7"])
def test_ids_cut_as_vllm_cuts_them_are_accepted(template: str) -> None:
    """What the sample sessions' comparison for Mistral relies on: the last 9 characters of an
    OpenAI id are letters and digits, and the template renders the request with them."""
    request_ = req(USER, call([LONG]), {**RESULT, "tool_call_id": LONG}, REPLY, NEXT)
    cut = ids_cut_to_nine(request_)
    assert cut["messages"][1]["tool_calls"][0]["id"] == cut["messages"][2]["tool_call_id"] == "6SfsyNVcE"
    assert request_["messages"][1]["tool_calls"][0]["id"] == LONG     # the request given is left alone
    assert limits_crossed(template, cut) == set()
    assert "6SfsyNVcE" in asm(template).assemble(cut).text


@pytest.mark.parametrize("template", shipped_names())
def test_a_template_refuses_exactly_what_its_limits_say(template: str) -> None:
    """Requests drawn without regard to any limit: refused exactly when they cross one of the
    template's limits, with that limit's words; templates with limits refuse some, all render some."""
    a = asm(template)
    seen = {"refused": 0, "rendered": 0}

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(request_=unrestricted())
    def check(request_: dict) -> None:
        crossed = limits_crossed(template, request_)
        try:
            a.assemble(request_)
        except TemplateError as exc:
            assert refused_by_template(exc) and crossed, (str(exc), request_)
            assert any(re.search(WHY[k], str(exc)) for k in crossed), (str(exc), crossed)
            seen["refused"] += 1
            return
        assert not crossed, (crossed, request_)
        seen["rendered"] += 1

    check()
    print(f"{template}: {seen}")
    # both outcomes come up where a template has limits (each limit's own refusal: CROSSING above)
    assert seen["rendered"] >= 3, seen
    assert (seen["refused"] > 0) == (accepts(template) != Accepts()), seen


@pytest.mark.parametrize("system", [False, True])
def test_gemma3_refuses_a_summary_slot_beside_a_system_prompt(system: bool) -> None:
    """Why the incremental-truncation property draws Gemma 3's summary-slot sessions without a system
    prompt: the slot is a system message before the kept turns; alone it is the first message, which
    Gemma folds into the first user turn; after a system prompt it breaks the alternation."""
    turns = [{"role": r, "content": f"{r} message number {i} with a few more words"}
             for i, r in enumerate(["user", "assistant"] * 6)] + [NEXT]
    msgs = [NOTE, *turns] if system else turns
    slot = Assembler(template="gemma3", context_window=150, reserve=32, cache=None,
                     truncation=TruncationPolicy(strategy="summary-slot"))
    if not system:
        r = slot.assemble({"messages": msgs})
        assert r.dropped and [m.role for m in r.conversation.messages] == ["system", "user"]
        return
    with pytest.raises(TemplateError, match=WHY["system_note"]) as caught:
        slot.assemble({"messages": msgs})
    assert refused_by_template(caught.value)
