"""Property tests: segment invariants over random conversations and every shipped template.

For any conversation a template accepts:
- the segment texts concatenate to the full render;
- the segment ids concatenate to the full ids;
- the full ids equal tokenizing the full text;
- token offsets are contiguous and every message's text lands in some segment.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import Assembler
from workbench.errors import TemplateError
from workbench.templates import shipped_names

# Text a user could type: any printable character (no surrogates, no control chars besides \n \t).
TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), whitelist_characters="\n\t "), min_size=1,
               max_size=40)
WORDS = st.lists(st.sampled_from(["hello", " world", "café", "中文", "😀", "  ", "\n", "x=1;", "über", "ﬁ",
                                  "e\u0301", "tab\t", "[1,2]", "{\"k\": 2}"]), min_size=1, max_size=8).map("".join)
CONTENT = st.one_of(TEXT, WORDS)


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}}, "required": ["city"]}}}


@st.composite
def conversations(draw, tools: bool = True):
    msgs = []
    use_tools = tools and draw(st.booleans())
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(CONTENT)})
    turns = draw(st.integers(1, 4))
    calls = 0
    for i in range(turns):
        msgs.append({"role": "user", "content": draw(CONTENT)})
        if use_tools and draw(st.booleans()):
            # one tool round: a call (9-character id, as Mistral requires) and its result
            cid = f"call{calls:05d}"
            calls += 1
            city = draw(st.sampled_from(["Paris", "Zürich", "東京", "São Paulo"]))
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function",
                 "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'}}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "content": draw(CONTENT)})
        if i < turns - 1 or draw(st.booleans()):
            msgs.append({"role": "assistant", "content": draw(CONTENT)})
    req = {"messages": msgs}
    if use_tools:
        req["tools"] = [WEATHER]
    return req


ASSEMBLERS: dict[str, Assembler] = {}


def assembler(name: str) -> Assembler:
    if name not in ASSEMBLERS:
        ASSEMBLERS[name] = Assembler(template=name)
    return ASSEMBLERS[name]


def check_invariants(a: Assembler, r) -> None:  # type: ignore[no-untyped-def]
    assert "".join(s.text for s in r.segments) == r.text
    ids = np.concatenate([s.token_ids for s in r.segments]) if r.segments else np.zeros(0, np.uint32)
    assert ids.dtype == np.uint32 and r.token_ids.dtype == np.uint32
    assert np.array_equal(ids, r.token_ids)
    assert np.array_equal(a.tokenizer.encode(r.text, r.escaped), r.token_ids)
    pos = 0
    for s in r.segments:
        assert s.start == pos and s.end >= s.start
        pos = s.end
    assert pos == len(r.token_ids)


@pytest.mark.parametrize("name", shipped_names())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(req=conversations())
def test_segments_concatenate_to_the_render(name, req):
    a = assembler(name)
    try:
        r = a.assemble(req)
    except TemplateError:
        return  # the format refuses this conversation (e.g. Gemma/Mistral alternation); tested per family
    check_invariants(a, r)
    kinds = {s.kind for s in r.segments}
    assert kinds <= {"bos", "system", "tools", "message", "generation_prompt", "preamble"}
    gen = [i for i, s in enumerate(r.segments) if s.kind == "generation_prompt"]
    assert gen in ([], [len(r.segments) - 1])  # at most one, and last
    if req["messages"][-1]["role"] == "assistant":
        assert not gen
    else:
        expected = _gen_start_by_second_render(a, req)
        assert (r.text[expected:] if expected is not None else None) == (r.segments[-1].text if gen else None)


@pytest.mark.parametrize("name", shipped_names())
@settings(max_examples=25, deadline=None, derandomize=True)   # the same examples each run: a reach floor holds
@given(req=conversations(), data=st.data())
def test_adding_a_turn_keeps_earlier_segments(name, req, data):
    """Segments of messages before the last user turn render the same after one more turn,
    unless the template reports that it rewrites earlier turns."""
    a = assembler(name)
    msgs = req["messages"]
    if msgs[-1]["role"] != "assistant":
        msgs = msgs + [{"role": "assistant", "content": data.draw(CONTENT)}]
    nxt = {**req, "messages": msgs + [{"role": "user", "content": data.draw(CONTENT)}]}   # the same tools
    try:
        r1, r2 = a.assemble(req), a.assemble(nxt)
    except TemplateError:
        KEPT[name]["refused"] += 1
        return
    check_invariants(a, r2)
    assert r1.cache_key != r2.cache_key
    if {d.code for d in r2.diagnostics} & {"template_rewrite", "template_moved_content"}:
        KEPT[name]["rewritten"] += 1      # the template says it renders earlier turns anew
        return
    users = [m.sequence for m in r1.conversation.messages if m.role == "user"]
    cut = max(users) if users else 0

    def before(r):  # the earlier messages' segments: text and ids
        return [(s.seq, s.kind, s.text, s.token_ids.tolist()) for s in r.segments
                if s.seq is not None and s.seq < cut and s.kind in ("message", "image")]
    assert before(r2) == before(r1)
    KEPT[name]["compared"] += 1


KEPT: dict[str, dict[str, int]] = {n: {"compared": 0, "rewritten": 0, "refused": 0} for n in shipped_names()}


@pytest.mark.parametrize("name", shipped_names())
def test_adding_a_turn_reached_its_comparison(name):
    """Run after the property above (file order, derandomized): examples reached the comparison.
    Today's floor is low: llama3.1 and the mistral templates rewrite the history when a turn is
    added (a third to a half of their examples), gemma3 refuses the generator's tool turns and
    rewrites (only 5 of 25 compared); issue 35 asks generators that each template accepts, and 90 %."""
    k = KEPT[name]
    print(f"{name}: {k}")
    assert k["compared"] >= 0.15 * sum(k.values()) and k["compared"] >= 4


def _gen_start_by_second_render(a: Assembler, req: dict) -> int | None:
    from workbench.cleaning import clean
    from workbench.templates import render
    conv, _ = clean(a.normalize(req)[0], a.config.cleaning)
    kw = dict(a.context.kwargs)
    t = a.template
    args = (t.source, t.name, conv.to_template_messages())
    with_gp = render(*args, tools=conv.tool_schemas() or None, add_generation_prompt=True, kwargs=kw).text
    plain = render(*args, tools=conv.tool_schemas() or None, add_generation_prompt=False, kwargs=kw).text
    return len(plain) if with_gp.startswith(plain) and len(plain) < len(with_gp) else None


@pytest.mark.parametrize("name", shipped_names())
def test_generation_prompt_found_without_second_render(name):
    """Shipped templates locate the generation prompt from where they test add_generation_prompt;
    that must agree with what a second render without it shows, for every corpus case."""
    from corpus import CASES
    a = assembler(name)
    checked = 0
    for case in CASES:
        req = case.request()
        if req["messages"][-1]["role"] == "assistant":
            continue
        try:
            r = a.assemble(req)
        except TemplateError:
            continue
        expected = _gen_start_by_second_render(a, req)
        gen = [s for s in r.segments if s.kind == "generation_prompt"]
        if expected is None:
            assert not gen, case.name
        else:
            assert len(gen) == 1 and r.text[expected:] == gen[0].text, case.name
        checked += 1
    assert checked >= 5
