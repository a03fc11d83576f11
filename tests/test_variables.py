"""Prompt templates with variables (SPEC 2.3): scopes, caps, safety, volatility, debug view."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.conversation import Message
from workbench.errors import VariableError, VariableLimitError, WorkbenchError
from workbench.variables import (
    Binding,
    VariableConfig,
    VariableSpec,
    expand_messages,
)

CLOCK = lambda: datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)  # noqa: E731


def tmsg(content, seq=0, role="system", local=None):
    return Message(role=role, content=content, sequence=seq, template=True,
                   variables=None if local is None else json.dumps(local))


def expand(content, request=None, local=None, **config):
    config.setdefault("clock", CLOCK)
    out, bindings, diags = expand_messages([tmsg(content, local=local)], request or {}, VariableConfig(**config))
    return out[0].content, {b.name: b for b in bindings}, diags


# ---- scopes and precedence ------------------------------------------------------------------

def test_each_scope_supplies_a_variable_and_is_reported():
    text, b, _ = expand("{{ a }} {{ b }} {{ c }} {{ today }} {{ d }}", request={"b": "R"}, local={"a": "L"},
                        constants={"c": "S"}, declarations={"d": VariableSpec(default="D")})
    assert text == "L R S 2024-05-06 D"
    assert {n: b[n].scope for n in b} == {"a": "local", "b": "request", "c": "system",
                                          "today": "builtin", "d": "default"}


def test_precedence_local_request_system_builtin_default():
    decl = {"now": VariableSpec(default="declared")}
    cases = [({"now": "L"}, {"now": "R"}, {"now": "S"}, "L", "local"),
             ({}, {"now": "R"}, {"now": "S"}, "R", "request"),
             ({}, {}, {"now": "S"}, "S", "system"),
             ({}, {}, {}, "2024-05-06T07:08:09Z", "builtin")]
    for local, request, constants, want, scope in cases:
        text, b, _ = expand("{{ now }}", request=request, local=local, constants=constants, declarations=decl)
        assert (text, b["now"].scope) == (want, scope)
    text, b, _ = expand("{{ now }}", builtins=False, declarations=decl)
    assert (text, b["now"].scope) == ("declared", "default")


def test_set_inside_template_is_local_and_not_looked_up():
    text, b, _ = expand("{% set x = 'inner' %}{{ x }}", request={"x": "outer"})
    assert text == "inner"
    assert "x" not in b


def test_set_from_outer_value():
    text, _, _ = expand("{% set x = x ~ '!' %}{{ x }}", request={"x": "hi"})
    assert text == "hi!"


# ---- missing and optional -------------------------------------------------------------------

def test_missing_required_names_variable_and_message():
    with pytest.raises(VariableError) as e:
        expand_messages([tmsg("ok"), tmsg("Hi {{ who }}", seq=7)], {}, VariableConfig())
    assert e.value.variable == "who" and e.value.seq == 7
    assert "'who'" in str(e.value) and "messages[7]" in str(e.value)
    assert "request variables" in str(e.value) and "optional" in str(e.value)


def test_declared_required_without_value_is_an_error():
    with pytest.raises(VariableError, match="'x'"):
        expand("{{ x }}", declarations={"x": VariableSpec(required=True)})


def test_declared_optional_renders_empty():
    text, b, _ = expand("[{{ x }}]{% if x %}yes{% endif %}", declarations={"x": VariableSpec(required=False)})
    assert text == "[]"
    assert b["x"].scope == "empty" and b["x"].value is None


def test_default_filter_makes_it_optional():
    text, b, _ = expand("{{ x | default('fallback') }}/{{ y | d('z') }}")
    assert text == "fallback/z"
    assert b["x"].scope == b["y"].scope == "empty"
    text, b, _ = expand("{{ x | default('fallback') }}", request={"x": "given"})
    assert text == "given" and b["x"].scope == "request"


def test_default_filter_does_not_cover_a_bare_use():
    with pytest.raises(VariableError, match="'x'"):
        expand("{{ x | default('f') }} {{ x }}")


# ---- conditionals, loops, whitespace --------------------------------------------------------

def test_conditionals_and_loops():
    src = "Rules:\n{% if strict %}\n- be strict\n{% endif %}\n{% for r in rules %}\n- {{ r }}\n{% endfor %}"
    text, _, _ = expand(src, request={"strict": True, "rules": ["a", "b"]})
    assert text == "Rules:\n- be strict\n- a\n- b\n"
    text, _, _ = expand(src, request={"strict": False, "rules": []})
    assert text == "Rules:\n"


def test_trailing_newline_is_kept():
    assert expand("Hi {{ n }}\n", request={"n": "Ada"})[0] == "Hi Ada\n"
    assert expand("Hi\n\n")[0] == "Hi\n\n"


def test_globals_are_not_variables():
    text, b, _ = expand("{{ range(3) | list | join(',') }}{% set ns = namespace(k=1) %}{{ ns.k }}")
    assert text == "0,1,21"
    assert b == {}


# ---- caps -----------------------------------------------------------------------------------

def test_range_bomb_is_refused():
    with pytest.raises(VariableLimitError, match="loop cap"):
        expand("{% for i in range(10**6) %}x{% endfor %}")


def test_nested_loop_bomb_is_stopped():
    src = ("{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
           "{% endfor %}{% endfor %}{% endfor %}")
    with pytest.raises(VariableLimitError, match="max_steps"):
        expand(src)


def test_loop_over_long_value_exceeds_cap_with_line():
    with pytest.raises(VariableLimitError, match="loop on line 2 exceeded 10 iterations") as e:
        expand("a\n{% for c in s %}{{ c }}{% endfor %}", request={"s": "x" * 11}, max_loop_iterations=10)
    assert e.value.seq == 0
    assert expand("{% for c in s %}{{ c }}{% endfor %}", request={"s": "x" * 10}, max_loop_iterations=10)[0] \
        == "x" * 10


def test_loop_cap_applies_inside_macros():
    src = "{% macro m(xs) %}{% for x in xs %}.{% endfor %}{% endmacro %}{{ m(s) }}"
    with pytest.raises(VariableLimitError, match="exceeded 5"):
        expand(src, request={"s": "123456"}, max_loop_iterations=5)


def test_macro_recursion_bomb_is_stopped():
    src = "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}"
    with pytest.raises(VariableLimitError):
        expand(src)


def test_recursive_loops_are_refused():
    with pytest.raises(VariableError, match="recursive"):
        expand("{% for x in xs recursive %}{{ loop(x.c) }}{% endfor %}", request={"xs": []})


def test_huge_collection_value_is_refused():
    with pytest.raises(VariableLimitError) as e:
        expand("{{ items | length }}", request={"items": list(range(1001))})
    assert e.value.variable == "items"
    with pytest.raises(VariableLimitError, match="items"):  # nested items count too
        expand("{{ items | length }}", request={"items": [[0] * 600, [0] * 600]})
    assert expand("{{ items | length }}", request={"items": list(range(1000))})[0] == "1000"


def test_output_cap():
    with pytest.raises(VariableLimitError, match="output"):
        expand("{% for i in range(100) %}{{ s }}{% endfor %}", request={"s": "x" * 100}, max_output_chars=5000)
    with pytest.raises(VariableLimitError):
        expand("{{ 'x' * 10**10 }}")
    with pytest.raises(VariableLimitError):
        expand("{{ 10 ** (10 ** 8) }}")


@pytest.mark.parametrize("src", [
    "{{ 'x' | center(10**9) }}", "{{ 'x'.ljust(10**9) }}", "{{ '%1000000000d' % 1 }}", "{{ '%*d' % (10**9, 1) }}",
    "{{ '{:>1000000000}'.format(1) }}", "{{ '{:{}}'.format(1, 10**9) }}", "{{ '%1000000000d' | format(1) }}",
    "{% set s = 'x' * 1000000 %}{{ [s] * 1000 }}", "{% set s = 'x' * 1000000 %}{{ [s, s] | join }}",
    "{% set s = 'x' * 1000000 %}{{ s ~ s }}", "{% set s = 'x' * 1000000 %}{{ s + s }}",
    "{% set s = 'x' * 1000000 %}{{ [s, s] }}", "{{ ('x' * 999999) | replace('', 'abc') }}",
    "{{ ('\n' * 999999) | indent(999999) }}", "{{ ('\t' * 999999).expandtabs(999999) }}",
    "{{ [1] | batch(10**9, 0) | list }}", "{{ range(1000) | list | tojson(indent=999999) }}",
    "{{ ('ab' * 400000) | wordwrap(1) }}", "{{ dict.fromkeys(range(1000), 'x' * 999999) }}",
    "{% set ns = namespace(v='x') %}{% for i in range(60) %}{% set ns.v = ns.v ~ ns.v %}{% endfor %}",
    "{% set s = 'x' * 999999 %}{% for i in range(1000) %}{{ s | upper | length }}{% endfor %}",
    "{{ range(1000) | map('center', 999999) | join }}", "{{ 2 ** 100000 }}",
])
def test_amplification_is_refused_before_it_allocates(src):
    # Prompt templates come with requests: a few characters must not build gigabytes.
    with pytest.raises(VariableLimitError):
        expand(src)


def test_guards_leave_ordinary_templates_alone():
    items = [{"name": f"n{i}", "d": "lorem ipsum " * 5} for i in range(300)]
    src = ("{% for it in items %}{{ it.name | upper }}:{{ it.d | trim | truncate(12) }}"
           "({{ loop.index }}/{{ items | length }}){% endfor %}|{{ items | map(attribute='name') | first }}"
           "|{{ '%05d' % 42 }}|{{ '{:>4}'.format('x') }}|{{ '%d' % 123456789 }}|{{ 'ab' ~ 'cd' }}|{{ 10 ** 3 }}")
    text, _, _ = expand(src, request={"items": items})
    assert text.startswith("N0:lorem...(1/300)N1:") and text.endswith("|n0|00042|   x|123456789|abcd|1000")


def test_lipsum_is_not_available():
    with pytest.raises(VariableError, match="'lipsum'"):
        expand("{{ lipsum(10**6) }}")


def test_deadline():
    with pytest.raises(VariableLimitError, match="max_seconds"):
        expand("{% for i in range(3) %}{{ i }}{% endfor %}", max_seconds=-1)


# ---- recursive definitions ------------------------------------------------------------------

def test_derived_definitions_expand_with_the_same_resolution():
    text, b, _ = expand("{{ greeting }}!", request={"name": "Ada"},
                        constants={"greeting": "Hello {{ name }} from {{ org }}", "org": "Acme"})
    assert text == "Hello Ada from Acme!"
    assert b["greeting"].value == "Hello Ada from Acme" and b["greeting"].scope == "system"
    assert b["name"].scope == "request" and b["name"].seqs == (0,)
    text, _, _ = expand("{{ g }}", local={"g": "{% if x %}yes{% endif %}", "x": 1})
    assert text == "yes"


def test_cycle_is_named_with_its_path():
    with pytest.raises(VariableError, match="a -> b -> a"):
        expand("{{ a }}", local={"a": "{{ b }}", "b": "{{ a }}"})
    with pytest.raises(VariableError, match="a -> b -> c -> a"):
        expand("{{ a }}", constants={"a": "{{ b }}", "b": "{{ c }}", "c": "{{ a }}"})


def test_self_reference_is_a_cycle():
    with pytest.raises(VariableError, match="a -> a") as e:
        expand("{{ a }}", local={"a": "x {{ a }}"})
    assert e.value.variable == "a"


def test_request_values_are_data_never_code():
    evil = "{{ secret }}{% for i in range(10**6) %}{% endfor %}"
    text, b, _ = expand("{{ q }}", request={"q": evil}, constants={"secret": "S3CRET"})
    assert text == evil
    assert b["q"].value == evil and "secret" not in b


@given(st.text(max_size=60))
@settings(max_examples=60, deadline=None)
def test_any_request_string_renders_verbatim(s):
    assert expand("<{{ q }}>", request={"q": s})[0] == f"<{s}>"


def test_non_template_messages_are_untouched():
    plain = Message(role="user", content="{{ 1/0 }} {% for %}", sequence=1)
    out, bindings, diags = expand_messages([plain], {"x": 1}, VariableConfig())
    assert out == [plain] and bindings == [] and diags == []
    out, _, _ = expand_messages([tmsg("{{ x }}"), plain], {"x": 1}, VariableConfig())
    assert out[1] is plain and out[0].content == "1"


def test_expanded_message_is_no_longer_a_template():
    out, _, _ = expand_messages([tmsg("{{ x }}", local={"x": "{{ y }}", "y": 1})], {}, VariableConfig())
    assert out[0].template is False and out[0].content == "1"
    assert json.loads(out[0].variables) == {"x": "{{ y }}", "y": 1}
    assert expand_messages(out, {}, VariableConfig())[0] == out  # not expanded twice


# ---- volatility -----------------------------------------------------------------------------

def test_builtins_are_deterministic_with_an_injected_clock():
    text, b, _ = expand("{{ now }}|{{ today }}|{{ strftime_now('%H:%M') }}|{{ request_id }}",
                        new_request_id=lambda: "f" * 32)
    assert text == "2024-05-06T07:08:09Z|2024-05-06|07:08|" + "f" * 32
    assert all(b[n].volatile and b[n].scope == "builtin" for n in ("now", "today", "strftime_now", "request_id"))


def test_request_id_is_shared_by_all_messages_of_one_request():
    out, bindings, _ = expand_messages([tmsg("{{ request_id }}"), tmsg("{{ request_id }}", seq=1)], {},
                                       VariableConfig())
    assert out[0].content == out[1].content and len(out[0].content) == 32
    int(out[0].content, 16)
    assert [(b.name, b.seqs) for b in bindings] == [("request_id", (0, 1))]


def test_volatile_in_prefix_warning_only_when_not_last():
    cfg = VariableConfig(clock=CLOCK)
    user = Message(role="user", content="hi", sequence=1)
    _, _, diags = expand_messages([tmsg("Date: {{ today }}"), user], {}, cfg)
    warn = [d for d in diags if d.code == "volatile_in_prefix"]
    assert len(warn) == 1 and warn[0].level == "warning" and warn[0].seq == 0 and "today" in warn[0].message
    _, _, diags = expand_messages([Message(role="system", content="s", sequence=0),
                                   tmsg("Date: {{ today }}", seq=1, role="user")], {}, cfg)
    assert not [d for d in diags if d.code == "volatile_in_prefix"]


def test_declared_and_derived_volatility():
    cfg = VariableConfig(clock=CLOCK, constants={"stamp": "at {{ now }}", "plain": "x {{ name }}"},
                         declarations={"session": VariableSpec(volatile=True)})
    msgs = [tmsg("{{ stamp }} {{ plain }} {{ session }}"), Message(role="user", content="q", sequence=1)]
    out, bindings, diags = expand_messages(msgs, {"name": "n", "session": "s1"}, cfg)
    b = {x.name: x for x in bindings}
    assert out[0].content == "at 2024-05-06T07:08:09Z x n s1"
    assert b["stamp"].volatile and b["session"].volatile and b["now"].volatile
    assert not b["plain"].volatile and not b["name"].volatile
    (warn,) = [d for d in diags if d.code == "volatile_in_prefix"]
    assert "stamp" in warn.message and "session" in warn.message and "plain" not in warn.message


def test_builtins_off_means_missing():
    with pytest.raises(VariableError, match="'now'"):
        expand("{{ now }}", builtins=False)
    with pytest.raises(VariableError, match="'strftime_now'"):
        expand("{{ strftime_now('%Y') }}", builtins=False)


# ---- diagnostics and bindings ---------------------------------------------------------------

def test_unused_variables_are_reported():
    _, _, diags = expand("{{ a }}", request={"a": 1, "b": 2}, constants={"c": 3, "d": "{{ a }}"})
    msgs = [d.message for d in diags if d.code == "unused_variable"]
    assert all(d.level == "info" for d in diags if d.code == "unused_variable")
    assert len(msgs) == 2 and "b" in msgs[0] and "a" not in msgs[0].split(":")[1]
    assert "c, d" in msgs[1]


def test_unused_needs_a_template_and_counts_indirect_use():
    plain = Message(role="user", content="x", sequence=0)
    assert expand_messages([plain], {"a": 1}, VariableConfig(constants={"b": 2}))[2] == []
    _, _, diags = expand("{{ g }}", request={"name": "n"}, constants={"g": "hi {{ name }}"})
    assert not [d for d in diags if d.code == "unused_variable"]


def test_shadowed_request_variable_is_unused():
    _, _, diags = expand("{{ a }}", request={"a": "R"}, local={"a": "L"})
    assert [d.code for d in diags] == ["unused_variable"]


def test_bindings_merge_seqs_and_keep_first_use_order():
    msgs = [tmsg("{{ b }}{{ a }}", seq=0), Message(role="user", content="u", sequence=1),
            tmsg("{{ a }}{{ c }}", seq=2, role="user"), tmsg("{{ a }}", seq=3, local={"a": "other"})]
    _, bindings, _ = expand_messages(msgs, {"a": 1, "b": 2, "c": 3}, VariableConfig())
    assert [(b.name, b.scope, b.seqs) for b in bindings] == [
        ("b", "request", (0,)), ("a", "request", (0, 2)), ("c", "request", (2,)), ("a", "local", (3,))]


def test_binding_to_json_shape_and_jsonable_values():
    when = datetime(2020, 1, 2, tzinfo=UTC)
    _, b, _ = expand("{{ t }} {{ xs }}", constants={"t": when}, request={"xs": (1, 2)})
    assert b["t"].to_json() == {"name": "t", "value": when.isoformat(), "scope": "system",
                                "volatile": False, "seqs": [0]}
    assert b["xs"].to_json()["value"] == [1, 2]
    json.dumps([x.to_json() for x in b.values()])
    assert Binding("n", 1, "local", False, (None,)).to_json()["seqs"] == [None]


# ---- errors are always WorkbenchErrors ------------------------------------------------------

@pytest.mark.parametrize("src", ["{{ ''.__class__ }}", "{{ x.__class__.__mro__ }}",
                                 "{{ ''.__class__.__base__.__subclasses__() }}",
                                 "{{ (1).__add__ }}", "{{ namespace(_hidden=1) }}"])
def test_sandbox_escape_is_a_variable_error(src):
    with pytest.raises(VariableError, match="sandbox|unsafe|underscore"):
        expand(src, request={"x": 1})


def test_syntax_error_has_the_line_number():
    with pytest.raises(VariableError, match="line 3") as e:
        expand("one\ntwo\n{% if %}")
    assert e.value.seq == 0
    with pytest.raises(VariableError, match="line 2") as e:
        expand("{{ g }}", constants={"g": "ok\n{{ broken"})
    assert e.value.variable == "g"


@pytest.mark.parametrize("src", ["{{ 1/0 }}", "{{ raise_exception('no') }}", "{% include 'x' %}",
                                 "{{ x.y.z }}", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
                                 "{{ [1] | map(attribute='__class__') | list }}"])
def test_runtime_failures_are_variable_errors(src):
    with pytest.raises(VariableError):
        expand(src, declarations={"x": VariableSpec(required=False)})


def test_runtime_error_line():
    with pytest.raises(VariableError, match="line 2"):
        expand("a\n{{ 1/0 }}")


def test_bad_local_variables():
    for bad in ("{not json", "[1]"):
        with pytest.raises(VariableError) as e:
            expand_messages([Message(role="user", content="x", sequence=4, template=True, variables=bad)], {},
                            VariableConfig())
        assert e.value.seq == 4


ARBITRARY = {"expanded": 0, "refused": 0}


@given(st.text(alphabet="{}%#-+x. ()'\n|_", max_size=30))
@settings(max_examples=300, deadline=None)
def test_arbitrary_template_text_raises_only_workbench_errors(src):
    """Any text: a typed refusal, or the text plain Jinja (a sandbox with the same block options,
    not ours) renders from it."""
    import jinja2.ext
    import jinja2.sandbox

    try:
        text, _, _ = expand(src, request={"x": "v"})
    except WorkbenchError:
        ARBITRARY["refused"] += 1
        return
    oracle = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                          keep_trailing_newline=True,
                                                          extensions=[jinja2.ext.loopcontrols],
                                                          undefined=jinja2.StrictUndefined)
    assert text == oracle.from_string(src).render(x="v")
    ARBITRARY["expanded"] += 1


def test_arbitrary_template_text_reached_both_outcomes():
    """The property above saw texts that expand, not only refusals (run after it, in file order)."""
    print(f"arbitrary template text: {ARBITRARY}")
    assert ARBITRARY["expanded"] >= 50 and ARBITRARY["refused"] >= 1


# ---- config ---------------------------------------------------------------------------------

def test_from_json_full_shape():
    cfg, request = VariableConfig.from_json({
        "constants": {"org": "Acme"}, "request": {"name": "Ada"},
        "declare": {"mood": {"required": False, "volatile": True, "default": "calm", "description": "d"}}})
    assert dict(cfg.constants) == {"org": "Acme"} and request == {"name": "Ada"}
    assert cfg.declarations["mood"] == VariableSpec(required=False, volatile=True, default="calm", description="d")


def test_from_json_plain_object_is_request_variables():
    cfg, request = VariableConfig.from_json({"name": "Ada", "n": 2})
    assert request == {"name": "Ada", "n": 2} and dict(cfg.constants) == {} and dict(cfg.declarations) == {}


@pytest.mark.parametrize("data, needle", [
    ({"declare": {"name": {"required": "yes"}}}, "declare.name.required must be true or false"),
    ({"declare": {"name": {"volatile": 1}}}, "declare.name.volatile must be true or false"),
    ({"declare": {"name": {"description": 3}}}, "declare.name.description"),
    ({"declare": {"name": {"requried": True}}}, "declare.name: unknown field 'requried'"),
    ({"declare": {"name": True}}, "declare.name must be an object"),
    ({"constants": [1]}, "constants must be an object"),
    ({"request": "x"}, "request must be an object"),
    ({"constants": {}, "name": "Ada"}, "unknown key 'name'"),
    ([1, 2], "must be a JSON object"),
])
def test_from_json_bad_shapes(data, needle):
    with pytest.raises(VariableError, match="^my.json: ") as e:
        VariableConfig.from_json(data, where="my.json")
    assert needle in str(e.value)


def test_version_tracks_constants_and_declarations_not_clock():
    base = VariableConfig(constants={"a": 1})
    assert len(base.version) == 16 and int(base.version, 16) >= 0
    assert base.version == VariableConfig(constants={"a": 1}, clock=CLOCK).version
    assert base.version != VariableConfig(constants={"a": 2}).version
    assert base.version != VariableConfig(constants={"a": 1}, declarations={"a": VariableSpec()}).version
    assert VariableConfig(declarations={"a": VariableSpec()}).version != \
        VariableConfig(declarations={"a": VariableSpec(volatile=True)}).version


def test_config_is_a_snapshot():
    constants = {"a": 1}
    cfg = VariableConfig(constants=constants)
    before = cfg.version
    constants["a"] = 2
    assert cfg.version == before and cfg.constants["a"] == 1


def test_chat_template_sandbox_is_unchanged():
    from workbench.templates.sandbox import environment as chat_env
    assert "strftime_now" in chat_env().globals and "workbench_loop_cap" not in chat_env().filters
    assert chat_env().from_string("{{ range(5) | list | length }}").render() == "5"


def test_template_without_content_is_left_empty():
    m = Message(role="assistant", content=None, sequence=2, template=True)
    out, bindings, _ = expand_messages([m], {}, VariableConfig())
    assert out[0].content is None and out[0].template is False and bindings == []


def test_non_string_variable_names_are_refused():
    with pytest.raises(VariableError, match="names must be strings"):
        expand_messages([tmsg("x")], {1: "a", "b": 2}, VariableConfig())
