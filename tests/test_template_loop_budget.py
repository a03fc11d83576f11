"""The loop budget (issue 34, item 7): a template that loops without writing anything ends at once,
with a TemplateLimitError naming its line, instead of running to the render deadline.

Every hostile case below renders under a 2 s deadline and must be refused by the budget of steps
(the message says so, or names the macro nesting limit): had the deadline stopped it instead, the
message would say "ran longer than 2 s". The honest side: every
shipped template takes a number of steps that grows linearly with the conversation and stays far
inside the budget, and the count of steps is exact (a property test over generated loop nests).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import Assembler
from workbench.errors import TemplateError, TemplateLimitError, WorkbenchError
from workbench.templates import RenderLimits, from_source, get_template, render, shipped_names
from workbench.templates.bounds import weight
from workbench.templates.steps import DEFAULT_STEPS_PER_INPUT, MACRO_CALL_STEPS, MAX_MACRO_DEPTH

MSGS = [{"role": "user", "content": "hi"}]
DEADLINE = RenderLimits(timeout_s=2.0)      # the issue's bar: a hostile template ends well before it
BUDGET = "steps (loop iterations, items walked by filters, calls and attribute reads"


def rendered(source, *, limits=DEADLINE, messages=MSGS, tools=None):
    return render(source, "evil.jinja", messages, tools=tools, add_generation_prompt=True, kwargs={}, limits=limits)


def refused(payload, limits=DEADLINE) -> TemplateLimitError:
    """`payload` on line 3 is refused there (not by the deadline)."""
    with pytest.raises(TemplateLimitError) as e:
        rendered(f"line one\nline two\n{payload}", limits=limits)
    assert e.value.line == 3 and "evil.jinja, line 3:" in str(e.value), str(e.value)
    assert "longer than" not in str(e.value)
    return e.value


# ---- loop bombs ---------------------------------------------------------------------------------

LOOP_BOMBS = [
    # the issue's payload: 10^10 empty iterations ran to the 10 s deadline
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    # the items an `if` drops count too
    "{% for a in range(100000) if a >= 0 %}{% for b in range(100000) if false %}{% endfor %}{% endfor %}",
    # a loop over a huge string, and over a huge list a filter built from it
    "{% for c in 'x' * 30000000 %}{% endfor %}",
    "{% for c in ('x' * 20000000)|list %}{% endfor %}",
    # loops without a `for`: filters that walk their input item by item
    "{{ ('x' * 30000000)|map('upper')|list|length }}",
    "{{ range(1000000)|select|list|length }}",
    "{{ range(1000000)|map('string')|join|length }}",
    "{% for a in range(100000) %}{{ range(100000)|sum }}{% endfor %}",
    # a recursive loop: the items of every `loop(...)` call count
    "{% for x in [[range(100000)] * 100] recursive %}{% if x is iterable %}{{ loop(x) }}{% endif %}{% endfor %}",
    # macros calling themselves twice per level: 2^40 calls, no output, no loop
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
    # cycler and joiner called in a loop nest
    "{% set c = cycler('a', 'b') %}{% for a in range(100000) %}{% for b in range(100000) %}{% set x = c.next() %}"
    "{% endfor %}{% endfor %}",
    "{% set j = joiner('x') %}{% for a in range(100000) %}{% for b in range(100000) %}{% if j() %}{% endif %}"
    "{% endfor %}{% endfor %}",
    "{{ cycler(*range(1000000)).items|list|length }}",
    # a dict of a million keys, looped over twice nested
    "{% set d = dict.fromkeys(range(1000000)) %}{% for a in d %}{% for b in d %}{% endfor %}{% endfor %}",
    # loop.cycle, loop.length and the rest keep working, and count
    "{% for a in range(100000) %}{% for b in range(100000) %}{% set x = loop.cycle(1, 2) ~ loop.length %}"
    "{% endfor %}{% endfor %}",
]


@pytest.mark.parametrize("payload", LOOP_BOMBS)
def test_loop_bomb_is_refused_by_the_budget_at_its_line(payload):
    err = refused(payload)
    assert BUDGET in str(err) and "RenderLimits.max_steps" in str(err)
    assert err.hint and "loops or recurses" in err.hint


@pytest.mark.parametrize("payload", [
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}"
    "{{ g() }}",
])
def test_macro_recursion_is_refused_at_the_depth_limit(payload):
    assert f"macros nested more than {MAX_MACRO_DEPTH} calls deep" in str(refused(payload))


def test_a_huge_range_is_refused_before_any_loop():
    err = refused("{% for x in range(10**9) %}{% endfor %}")
    assert "range() of 1,000,000,000 items" in str(err)


@pytest.mark.parametrize("payload", [LOOP_BOMBS[0], LOOP_BOMBS[9]])
def test_loop_bombs_are_refused_in_the_worker_process(payload):
    refused(payload, RenderLimits(timeout_s=2.0, isolate=True))


def test_the_issue_payload_through_the_assembler():
    asm = Assembler(template=from_source(f"{{{{ messages[0].content }}}}\n{LOOP_BOMBS[0]}", "evil.jinja"),
                    tokenizer="qwen2.5", cache=None, render_limits=DEADLINE)
    with pytest.raises(TemplateLimitError, match=f"evil.jinja, line 2: the template took more than .* "
                                                 f"{re.escape(BUDGET)}"):
        asm.assemble({"messages": MSGS})


# ---- what counts, exactly -----------------------------------------------------------------------

@pytest.mark.parametrize("source, steps", [
    ("{% for x in [1, 2, 3, 4, 5, 6, 7] %}{% endfor %}", 7),
    ("{% for x in range(7) %}{% endfor %}", 1 + 7),                                 # range() is a call
    ("{% for a in range(3) %}{% for b in range(4) %}{% endfor %}{% endfor %}", 1 + 3 + 3 * (1 + 4)),
    ("{% for x in range(10) if x > 7 %}{{ x }}{% endfor %}", 1 + 10),              # the dropped items too
    ("{% for x in range(100) %}{% if x == 4 %}{% break %}{% endif %}{% endfor %}", 1 + 5),   # only what was taken
    # loop.length reads the range's length (an attribute read), and takes no item ahead
    ("{% for x in range(100) %}{{ loop.length if x == 0 }}{% if x == 2 %}{% break %}{% endif %}{% endfor %}",
     1 + 3 + 1),
    ("{% for x in [[1, 2], [3]] recursive %}{% if x is iterable %}{{ loop(x) }}{% endif %}{% endfor %}",
     2 + 2 + 1 + 2),                                                              # items, and two loop() calls
    ("{{ range(10)|map('string')|join }}", 1 + 10 + 10),   # map walks the range, join walks map's output
    ("{% set l = [3, 1, 2] %}{{ l|sort|first }}{{ l|list|length }}{{ l|length }}", 3 + 3),
    ("{{ [3, 1, 2]|sort|first }}{{ 'abc'|list|length }}", 0),   # constants: computed once, when compiled
    ("{% macro f() %}{% endmacro %}{{ f() }}{{ f() }}", 2 * MACRO_CALL_STEPS),
    ("{% set ns = namespace(a=1) %}{{ ns.a }}{{ messages[0]['role'] }}", 1),      # namespace(): a call
    # an item read as an attribute (`m.role`) is free; a method lookup goes through the checks, then its call
    ("{{ messages[0].role }}{{ 'a b'.split() }}", 1 + 1),
    ("{{ none|map('upper')|list }}{{ messages|length }}{{ 'no loop' }}", 0),
])
def test_steps_are_counted_exactly(source, steps):
    assert rendered(source).steps == steps


def test_loops_render_as_before():
    out = rendered("{% for x in range(3) %}{{ loop.index }}/{{ loop.length }}{{ '!' if loop.last }} {% endfor %}"
                   "{% for x in [] %}x{% else %}empty{% endfor %}|{{ none|map('upper')|list }}"
                   "{{ {'b': 1, 'a': 2}|sort|join }}{{ ['b', 'a']|max }}{{ [1, 1, 2]|unique|list }}")
    assert out.text == "1/3 2/3 3/3! empty|[]ab" + "b[1, 2]"


def test_the_budget_grows_with_the_input_and_not_past_it():
    chars = "{% for m in messages %}{% for c in m.content %}{% endfor %}{% endfor %}"
    messages = [{"role": "user", "content": "x" * 500} for _ in range(10)]
    base_only = RenderLimits(timeout_s=2.0, max_steps=1000, steps_per_input=None)
    with pytest.raises(TemplateLimitError, match=re.escape(f"more than 1,000 {BUDGET}; RenderLimits.max_steps)")):
        rendered(chars, messages=messages, limits=base_only)
    grown = RenderLimits(timeout_s=2.0, max_steps=1000, steps_per_input=1.0)
    assert rendered(chars, messages=messages, limits=grown).steps == 10 + 5000   # messages, then characters
    size = weight([messages, None, {}])
    with pytest.raises(TemplateLimitError, match=f"more than {1000 + size:,} .* 1,000 plus 1 per unit of input"):
        rendered(chars + chars, messages=messages, limits=grown)   # two passes: past 1 step per unit


@pytest.mark.parametrize("field, value", [
    ("max_steps", -1), ("max_steps", 1.5), ("max_steps", True), ("max_steps", 2**63),
    ("steps_per_input", -1.0), ("steps_per_input", float("nan")), ("steps_per_input", float("inf")),
    ("steps_per_input", "4"),
])
def test_bad_step_limits_are_refused_with_the_field_named(field, value):
    with pytest.raises(WorkbenchError, match=f"RenderLimits.{field} must be") as e:
        RenderLimits(**{field: value})
    assert e.value.hint and "default" in e.value.hint


# A loop nest, generated: (size, keep only even items?, iterate `range(size)|list`?) per level, the
# innermost body optionally calling a macro; the count of steps is computed here independently.
LEVEL = st.tuples(st.integers(0, 12), st.booleans(), st.booleans())
REACHED = {"rendered": 0, "refused": 0}


def _nest(levels: list[tuple[int, bool, bool]], call: bool) -> str:
    lines = ["{% macro f() %}{% endmacro %}"]
    for depth, (size, even, listed) in enumerate(levels):
        it = f"range({size})|list" if listed else f"range({size})"
        lines.append(f"{{% for x{depth} in {it}{f' if x{depth} % 2 == 0' if even else ''} %}}")
    lines.append("{{ f() }}" if call else "")
    lines += ["{% endfor %}"] * len(levels)
    return "\n".join(lines)


def _steps(levels: list[tuple[int, bool, bool]], call: bool) -> list[int]:
    """The template line of every step, in the order the render takes them."""
    out: list[int] = []

    def run(depth: int) -> None:
        if depth == len(levels):
            out.extend([2 + depth] * (MACRO_CALL_STEPS if call else 0))
            return
        size, even, listed = levels[depth]
        out.append(2 + depth)                        # the call to range()
        if listed:
            out.extend([2 + depth] * size)           # `list` walks the range on the loop's line
        for x in range(size):
            out.append(2 + depth)                    # the loop takes the item, kept or not
            if not even or x % 2 == 0:
                run(depth + 1)
    run(0)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(levels=st.lists(LEVEL, min_size=1, max_size=3), call=st.booleans(), budget=st.integers(0, 800))
def test_every_step_of_a_loop_nest_is_counted_at_its_line(levels, call, budget):
    source, taken = _nest(levels, call), _steps(levels, call)
    limits = RenderLimits(timeout_s=2.0, max_steps=budget, steps_per_input=None)
    if len(taken) <= budget:
        assert rendered(source, limits=limits).steps == len(taken)
        REACHED["rendered"] += 1
    else:
        with pytest.raises(TemplateLimitError, match=re.escape(f"more than {budget:,} {BUDGET}")) as e:
            rendered(source, limits=limits)
        assert e.value.line == taken[budget]         # the step past the budget, where it was taken
        REACHED["refused"] += 1


def test_the_loop_nest_property_reached_its_checks():
    print(f"loop nests: {REACHED}")
    assert REACHED["rendered"] >= 30 and REACHED["refused"] >= 30


# ---- honest templates: linear, and far inside the budget ----------------------------------------

def _session(n: int, *, tool_calls: bool) -> list[dict]:
    """n messages after a system prompt: alternating turns, with a tool call and its result in every
    fifth exchange when `tool_calls` (ids of 9 letters and digits, as Mistral's templates want)."""
    msgs: list[dict] = [{"role": "system", "content": "You are helpful."}]
    i = 0
    while len(msgs) <= n:
        msgs.append({"role": "user", "content": f"question {i}"})
        if tool_calls and i % 5 == 2:
            cid = f"c{i:08d}"
            msgs.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "get", "arguments": '{"q": "a\\"b"}'}}]})
            msgs.append({"role": "tool", "tool_call_id": cid, "name": "get", "content": '{"r": [1, 2]}'})
        msgs.append({"role": "assistant", "content": f"answer {i}"})
        i += 1
    return msgs[:n]


TOOLS = [{"type": "function", "function": {"name": "get", "description": "Get it.", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]


def _render_session(name: str, n: int) -> tuple[int, int]:
    """(steps, input size) of `name` on an n-message session: with tool calls, or plain turns for a
    template that refuses tool messages (Gemma 3)."""
    t = get_template(name)
    kwargs = {**t.kwargs, "bos_token": t.bos_token or "", "eos_token": t.eos_token or ""}
    for tool_calls in (True, False):
        msgs, tools = _session(n, tool_calls=tool_calls), TOOLS if tool_calls else None
        try:
            out = render(t.source, name, msgs, tools=tools, add_generation_prompt=True, kwargs=kwargs,
                         limits=RenderLimits(timeout_s=60))
        except TemplateLimitError:
            raise
        except TemplateError:
            continue
        return out.steps, weight([msgs, tools, kwargs])
    raise AssertionError(f"{name} rendered neither session")


@pytest.mark.parametrize("name", shipped_names())
def test_shipped_templates_take_linear_steps_far_inside_the_budget(name):
    (s1, _), (s2, size) = _render_session(name, 400), _render_session(name, 800)
    # Twice the messages, twice the steps: before this issue gpt-oss scanned the rest of the
    # conversation at every tool call (2.3 M steps at 10k messages; 100k now).
    assert s2 <= 2.1 * s1, (s1, s2)
    # A few passes over the input, a quarter of what the budget grants per unit of it: at any length,
    # 100,000 messages included, the render stays inside its budget.
    assert s2 <= DEFAULT_STEPS_PER_INPUT / 4 * size, (s2, size)
