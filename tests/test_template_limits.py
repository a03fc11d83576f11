"""Bounded templates (issue 14, case 3): no template can hang, eat memory or feed the tokenizer
a huge prompt; every refusal is a TemplateLimitError naming the template line, made by a bound on
the operation (its size, its steps, the output cap) before any deadline: the deadline's own error
("ran longer than") is what a payload that slipped past the bounds would get, after seconds.

The issue's payloads are here as regression tests, in the thread sandbox and in the worker
process; next to them, the honest side: rendering stays byte-identical to Jinja's own sandbox
(what transformers uses) and the sandbox still stops the classic SSTI payloads.
"""

from __future__ import annotations

import importlib
import json
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from workbench import Assembler, VariableConfig
from workbench.cli.main import main
from workbench.conversation import Message
from workbench.errors import (
    TemplateError,
    TemplateLimitError,
    TemplateSecurityError,
    TemplateSyntaxError,
    VariableError,
    VariableLimitError,
    WorkbenchError,
)
from workbench.templates import RenderLimits, from_source, get_template, render, worker
from workbench.templates.render import FREE_OUTPUT_CHARS, compile_checked
from workbench.templates.sandbox import MAX_TEMPLATE_CHARS, compile_template, environment
from workbench.variables import expand_messages

ROOT = Path(__file__).resolve().parent.parent
MSGS = [{"role": "user", "content": "hi"}]
OVERTIME = "ran longer than"   # the render's (and a prompt template's) deadline error: never a bound's

# The issue's payloads, each on line 3 of a template, so the error must name that line.
ISSUE_PAYLOADS = [
    "{{ 9 ** 100000000 }}",                                            # hung at compile (constant folding)
    "{% set n = messages|length %}{{ ((n+8) ** 300000000) % 7 }}",    # ran > 60 s (327 s in the app)
    "{{ 'a' * 10**8 }}",                                               # passed the cap, tokenized > 60 s
    "{{ messages|tojson(indent=100000000) }}",                         # used 5 GB
    "{{ '%0100000000d' % 1 }}",
    "{{ 'x'|center(100000000) }}", "{{ 'x'|indent(100000000, true) }}", "{{ ('ab' * 400000)|wordwrap(1) }}",
    "{{ '%0100000000d'|format(1) }}", "{{ 'x'|truncate(10**9)|center(10**9) }}",
    "{% for i in range(10**9) %}{% endfor %}", "{{ [1] * 10**9 }}", "{{ (1, 2) * 10**9 }}",
    "{{ -(9 ** 100000000) }}", "{{ (9 ** 100000000) is number }}", "{% if 9 ** 100000000 %}x{% endif %}",
    "{{ 'x'.ljust(10**9) }}", "{{ '{:>1000000000}'.format(1) }}", "{{ '{:{}}'.format(1, 10**9) }}",
    "{{ '%*d' % (10**9, 1) }}", "{{ (1).to_bytes(10**9, 'big') }}", "{{ ('\t' * 1000).expandtabs(10**8) }}",
    "{{ ('x' * 1000)|replace('', 'y' * 100000) }}", "{{ [1]|batch(10**9, 0)|list }}",
    "{{ [1, 2]|slice(10**9)|list }}", "{{ lipsum(10**7) }}", "{{ 5|round(-10**8) }}",
    "{{ 5|round(10**8, 'ceil') }}", "{{ dict.fromkeys(range(100000), 'x' * 1000) }}",
    "{% set ns = namespace(v='x') %}{% for i in range(64) %}{% set ns.v = ns.v ~ ns.v %}{% endfor %}",
    "{% set ns = namespace(v='x') %}{% for i in range(64) %}{% set ns.v = ns.v + ns.v %}{% endfor %}",
    "{% set ns = namespace(v=[1]) %}{% for i in range(64) %}{% set ns.v = ns.v + ns.v %}{% endfor %}",
    "{% set ns = namespace(v=3) %}{% for i in range(64) %}{% set ns.v = ns.v * ns.v %}{% endfor %}",
    # a list holding one list twice, 40 times over: tiny in memory, 2^40 items once printed
    "{% set ns = namespace(v=['x' * 100]) %}{% for i in range(40) %}{% set ns.v = [ns.v, ns.v] %}{% endfor %}"
    "{{ ns.v }}",
    "{% set ns = namespace(v=['x' * 100]) %}{% for i in range(40) %}{% set ns.v = [ns.v, ns.v] %}{% endfor %}"
    "{{ ns.v|tojson }}",
    "{% set ns = namespace(v=['x' * 100]) %}{% for i in range(40) %}{% set ns.v = [ns.v, ns.v] %}{% endfor %}"
    "{{ ns.v ~ '' }}",
    "{% set ns = namespace(v=['x' * 100]) %}{% for i in range(40) %}{% set ns.v = [ns.v, ns.v] %}{% endfor %}"
    "{{ [ns.v]|select|join }}",
    "{% set s = 'x' * 1000000 %}{{ range(100)|map('string')|map('replace', '', s)|join }}",
    "{% set s = 'x' * 1000000 %}{{ ''.join(range(100)|map('string')|map('replace', '', s)) }}",
    # a macro buffer filling up (before the output cap could see it)
    "{% macro f() %}{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}{% endmacro %}{% set y = f() %}",
    "{% set y %}{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}{% endset %}",
    "{% autoescape true %}{% set ns = namespace(v='x') %}{% for i in range(64) %}{% set ns.v = ns.v ~ ns.v %}"
    "{% endfor %}{% endautoescape %}",
]


def rendered(source, *, limits=RenderLimits(), messages=MSGS, tools=None, kwargs=None, **kw):
    return render(source, "evil.jinja", messages, tools=tools, add_generation_prompt=True, kwargs=kwargs or {},
                  limits=limits, **kw)


def refused(source, limits=RenderLimits(), line=3, **kw) -> TemplateLimitError:
    with pytest.raises(TemplateLimitError) as e:
        rendered(f"line one\nline two\n{source}", limits=limits, **kw)
    assert OVERTIME not in str(e.value), str(e.value)   # a bound stopped it, not the deadline
    assert f"evil.jinja, line {line}:" in str(e.value), str(e.value)
    return e.value


# ---- the issue's payloads ----------------------------------------------------------------------

def test_a_sum_of_many_sizeable_strings_is_refused():
    """Each step is under the cap; the total is not. Under a smaller cap, so the steps cost little
    (with the default cap they build 36 M characters first: 0.7 s here, seconds on a busy machine)."""
    refused("{% set s = ['x' * 100000] %}{{ range(150)|map('string')|map('list')|map('replace', '', s)"
            "|sum(start=[]) }}", RenderLimits(max_output_chars=4 << 20))


@pytest.mark.parametrize("payload", ISSUE_PAYLOADS[:4])
def test_the_issues_payloads_are_refused_quickly_under_the_default_limits(payload):
    refused(payload)


@pytest.mark.parametrize("payload", ISSUE_PAYLOADS[4:])
def test_payload_is_refused_quickly_with_its_line(payload):
    # Under a 4 MiB cap: a payload that only reaches the default cap after building tens of millions
    # of characters step by step costs seconds on a busy machine before the refusal; the bound that
    # refuses it is the same.
    refused(payload, RenderLimits(max_output_chars=4 << 20))


@pytest.mark.parametrize("payload", ISSUE_PAYLOADS[:5])
def test_payload_is_refused_in_the_worker_process(payload):
    refused(payload, RenderLimits(isolate=True))


@pytest.mark.parametrize("payload", ISSUE_PAYLOADS[:4])
def test_payload_through_the_assembler(payload):
    asm = Assembler(template=from_source(f"{{{{ messages[0].content }}}}\n{payload}", "evil.jinja"),
                    tokenizer="qwen2.5", cache=None)
    with pytest.raises(TemplateLimitError, match="evil.jinja, line 2") as e:
        asm.assemble({"messages": MSGS})
    assert OVERTIME not in str(e.value)


def test_a_spinning_template_is_stopped_at_its_line():
    # The loop budget stops this one first (tests/test_template_loop_budget.py); with the budget out
    # of the way, the deadline is still there behind it.
    spin = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    # (the deadline's own error: this spin is stopped by the watchdog, not by a bound)
    with pytest.raises(TemplateLimitError, match="evil.jinja, line 2: rendering ran longer than 0.5 s"):
        rendered(f"one\n{spin}", limits=RenderLimits(timeout_s=0.5, max_steps=10**12, steps_per_input=None))


def test_errors_name_what_was_refused():
    assert "bits" in str(refused("{{ 9 ** 100000000 }}"))
    assert "100,000,000 characters" in str(refused("{{ 'a' * 10**8 }}"))
    assert "indent" in str(refused("{{ messages|tojson(indent=100000000) }}"))
    assert "max_output_chars" in str(refused("{{ '%0100000000d' % 1 }}"))
    assert "range()" in str(refused("{{ range(10**9)|list }}"))


# ---- compile time: nothing unbounded is folded -------------------------------------------------

CONSTANT_CONTEXTS = [
    "{{ 9 ** 100000000 }}", "{{ -(9 ** 100000000) }}", "{{ not 9 ** 100000000 }}", "{{ 'a' * 10**8 }}",
    "{{ ('a' * 10**8)|length }}", "{{ 'x' ~ 'a' * 10**8 }}", "{{ 'x' + 'a' * 10**8 }}",
    "{{ 'a'|center(100000000) }}", "{{ 'a'|indent(100000000, true) }}", "{{ {'a': 1}|tojson(indent=100000000) }}",
    "{{ '%0100000000d' % 1 }}", "{{ '%0100000000d'|format(1) }}", "{{ [1] * 10**9 }}",
    "{{ range(100000)|list|join('x' * 100000) }}", "{{ ('x' * 10000)|replace('', 'y' * 10000) }}",
    "{% if 9 ** 100000000 %}{% endif %}", "{% set x = 9 ** 100000000 %}", "{{ (9 ** 100000000) is odd }}",
    "{{ [9 ** 100000000][0] }}", "{{ 1 if 9 ** 100000000 else 2 }}", "{{ 'ab' in 'a' * 10**8 }}",
    "{{ range(10**9)|list|length }}", "{% for i in range(10**9) %}{% endfor %}", "{{ 5|round(-10**8) }}",
]


@pytest.mark.parametrize("source", CONSTANT_CONTEXTS)
def test_no_unbounded_expression_is_folded_at_compile_time(source):
    code = environment().compile(source, raw=True)
    compile_template(source)
    assert len(code) < 20_000  # no folded megabyte constant in the module
    with pytest.raises(TemplateLimitError, match="line 1"):
        rendered(source)


def test_compile_refuses_oversized_and_overnested_sources():
    with pytest.raises(TemplateSyntaxError, match="over the limit"):
        compile_checked("x" * (MAX_TEMPLATE_CHARS + 1), "big.jinja")
    with pytest.raises(TemplateSyntaxError, match="nested too deeply"):
        compile_checked("{{ " + "(" * 500 + "1" + ")" * 500 + " }}", "deep.jinja")
    with pytest.raises(TemplateSyntaxError, match="4300 digits"):  # Python's int-from-text limit
        compile_checked("{{ " + "9" * 5000 + " }}", "digits.jinja")


# ---- the output budget: a huge output never reaches the tokenizer ------------------------------

def test_output_past_the_expansion_budget_stops_before_the_sink():
    fed: list[str] = []
    src = "{% for i in range(100) %}{{ 'a' * 100000 }}{% endfor %}"  # 10M chars for a 2-char message
    with pytest.raises(TemplateLimitError, match="max_expansion") as e:
        rendered(src, sink=fed.append)
    assert "line 1" in str(e.value)
    assert sum(map(len, fed)) <= FREE_OUTPUT_CHARS  # the tokenizer saw no more than the free allowance


def test_output_cap_holds_without_the_expansion_budget():
    fed: list[str] = []
    with pytest.raises(TemplateLimitError, match="cap of 3,000,000") as e:
        rendered("{% for i in range(100) %}{{ 'a' * 100000 }}{% endfor %}", sink=fed.append,
                 limits=RenderLimits(max_output_chars=3_000_000, max_expansion=None))
    assert sum(map(len, fed)) <= 3_000_000 and "line 1" in str(e.value)


def test_a_long_honest_prompt_is_within_the_budget():
    messages = [{"role": "user", "content": "word " * 200_000} for _ in range(4)]  # 4M chars of input
    out = rendered("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
                   messages=messages)
    assert len(out.text) > 4_000_000
    tools = [{"name": f"t{i}", "parameters": {"a": {"b": {"c": "x" * 2000}}}} for i in range(400)]
    out = rendered("{% for t in tools %}{{ t|tojson(indent=4) }}{% endfor %}", tools=tools)
    assert len(out.text) > FREE_OUTPUT_CHARS / 3  # tools count as input too


def test_default_cap_is_sane():
    assert 16 * 2**20 <= RenderLimits().max_output_chars <= 32 * 2**20


# ---- honest templates are untouched ------------------------------------------------------------

def _plain_jinja() -> ImmutableSandboxedEnvironment:
    """Jinja's own sandbox configured as transformers configures it: the reference."""
    from workbench.templates.sandbox import GenerationTag, TemplateDict, TemplateNamespace, raise_exception
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: \
        json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    env.globals.update(raise_exception=raise_exception, dict=TemplateDict(), namespace=TemplateNamespace)
    return env


HONEST = [
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}",
    "{% for m in messages %}{{ '[INST] ' ~ m.content ~ ' [/INST]' ~ m.role }}{{ loop.index0 % 2 }}{% endfor %}",
    "{% set ns = namespace(s='') %}{% for m in messages %}{% set ns.s = ns.s + m.content + m.role %}{% endfor %}"
    "{{ ns.s }}|{{ ns.s|length }}",
    "{{ tools|tojson(indent=4) }}{{ tools|tojson }}{{ tools|tojson(separators=(',', ':'), sort_keys=true) }}",
    "{% macro r(t) %}{% for k, v in t.items() %}{{ k }}={{ v }};{% endfor %}{% endmacro %}"
    "{% for t in tools %}{{ r(t) }}{% endfor %}{% set x %}{{ messages|length }}{% endset %}[{{ x }}]",
    "{{ '%05d|%-6s|%.2f' % (42, 'ab', 3.14159) }}{{ '{:>6}|{}'.format('x', 7) }}{{ 'x'|center(9) }}"
    "{{ 'a\nb'|indent(2, true) }}{{ ('ab ' * 30)|wordwrap(20) }}{{ 2 ** 10 }}{{ 3 * 'ab' }}{{ [1, 2] * 2 }}",
    "{% filter upper %}{{ messages[0].content }}{% endfilter %}{{ messages|map(attribute='role')|join(', ') }}"
    "{{ range(5)|list }}{{ [1, [2, {'a': 'b'}]] }}{{ {'k': none} }}{{ 10 // 3 }}{{ -7 % 3 }}{{ 'ab'|list }}",
    "{% autoescape true %}{{ '<b>' ~ messages[0].content }}{{ messages[0].content + '&' }}{% endautoescape %}",
    "{% for m in messages recursive %}{{ m.role }}{% endfor %}{{ namespace(a=1).a }}{{ dict(a=1) }}",
]


@pytest.mark.parametrize("source", HONEST)
def test_honest_templates_render_as_jinja_renders_them(source):
    messages = [{"role": "user", "content": "héllo <b>"}, {"role": "assistant", "content": "ok"}] * 3
    tools = [{"name": "get", "parameters": {"city": {"type": "string"}, "n": 3}}]
    expected = _plain_jinja().from_string(source).render(messages=messages, tools=tools)
    assert rendered(source, messages=messages, tools=tools).text == expected
    assert rendered(source, messages=messages, tools=tools, limits=RenderLimits(isolate=True)).text == expected


# ---- the worker process ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["qwen2.5", "llama3.1", "gpt-oss"])
def test_isolated_render_equals_the_thread_render(name):
    t = get_template(name)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "get", "arguments": {"city": "Paris"}}}]},
                {"role": "tool", "content": "sunny", "tool_call_id": "c1"}, {"role": "user", "content": "thanks"}]
    tools = [{"type": "function", "function": {"name": "get", "description": "weather",
                                               "parameters": {"type": "object", "properties": {
                                                   "city": {"type": "string"}}}}}]
    kw = dict(tools=tools, add_generation_prompt=True, kwargs={"bos_token": "", "eos_token": ""}, track=True,
              track_generation=True, now=datetime(2024, 7, 1))
    fed: list[str] = []
    here = render(t.source, name, messages, **kw)
    there = render(t.source, name, messages, limits=RenderLimits(isolate=True), sink=fed.append, **kw)
    assert (there.text, there.starts, there.tools_start, there.gen_reads) == \
        (here.text, here.starts, here.tools_start, here.gen_reads)
    assert fed == [here.text]  # the sink gets the whole text at the end


def test_now_fixes_the_clock_in_both_modes():
    src = "{{ strftime_now('%Y-%m-%d %H:%M') }}"
    when = datetime(2001, 2, 3, 4, 5, tzinfo=UTC)
    assert rendered(src, now=when).text == "2001-02-03 04:05"
    assert rendered(src, now=when, limits=RenderLimits(isolate=True)).text == "2001-02-03 04:05"
    before = datetime.now().strftime("%Y-%m-%d %H:%M")
    wall = rendered(src).text  # without `now`: the wall clock, as transformers reads it
    assert wall in (before, datetime.now().strftime("%Y-%m-%d %H:%M"))


def test_worker_kills_a_template_stuck_in_c_code_and_names_the_line():
    # time.sleep is C code: the worker's own watchdog cannot interrupt it; only the kill can.
    limits = RenderLimits(isolate=True, timeout_s=0.5)
    rendered("warm up", limits=limits)
    stuck = worker._POOL.idle[-1]                      # the warm worker the next render takes
    with pytest.raises(TemplateLimitError, match=r"evil.jinja, line 2: .*stopped") as e:
        rendered("line one\n{{ nap(60) }}", limits=limits, kwargs={"nap": time.sleep})
    assert "longer than 0.5 s" in str(e.value)
    assert stuck.proc.returncode == -signal.SIGKILL    # killed, not waited for: the nap was 60 s
    assert stuck not in worker._POOL.idle
    assert rendered("{{ messages[0].content }}!", limits=limits).text == "hi!"  # a fresh worker takes over


def test_worker_memory_is_capped():
    limits = RenderLimits(isolate=True, timeout_s=30, max_worker_bytes=512 * 2**20)
    src = "x\n{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + ['x' * 1000000 ~ i] %}" \
          "{% endfor %}"
    with pytest.raises(TemplateLimitError, match="line 2: .*out of memory"):   # the cap, not the 30 s deadline
        rendered(src, limits=limits)
    assert rendered("{{ messages[0].content }}!", limits=limits).text == "hi!"


def test_worker_stays_warm_between_renders(monkeypatch):
    limits = RenderLimits(isolate=True)
    rendered("a", limits=limits)
    started: list[object] = []

    class Counted(worker._Worker):                 # every process start goes through here
        def __init__(self) -> None:
            started.append(self)
            super().__init__()

    monkeypatch.setattr(worker, "_Worker", Counted)
    pids = set()
    for _ in range(20):
        assert rendered("{{ messages[0].content }}", limits=limits).text == "hi"
        pids.add(worker._POOL.idle[-1].proc.pid)  # the worker goes back to the pool after each render
    assert len(pids) == 1 and started == []         # a round trip each time, never a process start


def test_worker_errors_keep_their_kind_and_line():
    limits = RenderLimits(isolate=True)
    with pytest.raises(TemplateError, match="evil.jinja, line 2: the template raised: no") as e:
        rendered("a\n{{ raise_exception('no') }}", limits=limits)
    assert type(e.value) is TemplateError and e.value.line == 2
    with pytest.raises(TemplateSecurityError, match="line 1"):
        rendered("{{ ''.__class__.__mro__ }}", limits=limits)
    with pytest.raises(TemplateSyntaxError, match="line 1"):
        rendered("{% if %}", limits=limits)


def test_isolation_without_posix_renders_in_this_process_with_the_same_bounds(monkeypatch):
    """No POSIX pipes and signals (Windows): render() keeps an isolated render in this process."""
    def no_worker(*args, **kwargs):
        raise AssertionError("a worker process was asked for without POSIX")

    render_module = importlib.import_module("workbench.templates.render")  # (the package's `render` is the function)
    monkeypatch.setattr(render_module, "os", SimpleNamespace(name="nt"))
    monkeypatch.setattr(worker, "render_isolated", no_worker)
    limits = RenderLimits(isolate=True)
    fed: list[str] = []
    out = rendered("{% for m in messages %}{{ m.content }}{% endfor %}!", limits=limits, track=True, sink=fed.append)
    assert out.text == "hi!" and "".join(fed) == "hi!" and out.starts == {0: 0}
    refused("{{ 'a' * 10**8 }}", limits=limits)
    with pytest.raises(TemplateSyntaxError, match="line 1"):
        rendered("{% if %}", limits=limits)


# ---- the sandbox still holds (27 SSTI payloads found no escape; these are the classics) --------

SSTI = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}", "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}", "{{ joiner.__init__.__globals__['os'] }}",
    "{{ namespace.__init__.__globals__ }}", "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__ }}",
    "{{ raise_exception.__globals__['__builtins__'] }}", "{{ strftime_now.__globals__ }}",
    "{{ dict.__class__.__mro__ }}", "{{ messages|attr('__class__') }}", "{{ '{0.__class__}'.format('') }}",
    "{{ '%s'|format(''.__class__) }}", "{{ messages[0].__class__.__mro__ }}", "{{ range.__self__ }}",
    "{% set ns = namespace() %}{% set ns.__dict__ = 1 %}", "{{ messages.pop() }}",
    "{{ messages[0].update({'role': 'system'}) }}", "{{ dict.fromkeys.__self__.__class__ }}",
]


@pytest.mark.parametrize("isolate", [False, True])
@pytest.mark.parametrize("payload", SSTI)
def test_ssti_payloads_stay_in_the_sandbox(payload, isolate):
    try:
        out = rendered(payload, limits=RenderLimits(isolate=isolate)).text
    except TemplateSecurityError:
        return
    # transformers' sandbox prints an unsafe attribute as an empty Undefined: nothing leaks
    assert out == ""


# ---- prompt-template variables: the same payloads --------------------------------------------

@pytest.mark.parametrize("payload", ISSUE_PAYLOADS[:5] + [
    "{{ (1).to_bytes(10**9, 'big') }}",
    "{% set ns = namespace(v=3) %}{% for i in range(64) %}{% set ns.v = ns.v * ns.v %}{% endfor %}",
    "{{ (10 ** 10000) ** 10000 }}"])
def test_prompt_template_payloads_are_refused(payload):
    m = Message(role="system", content=payload.replace("messages", "[1, 2]"), template=True, sequence=0)
    with pytest.raises(VariableLimitError) as e:
        expand_messages([m], {}, VariableConfig())
    assert OVERTIME not in str(e.value)            # a bound, not the expansion's max_seconds


# ---- the app's custom-template box and the CLI: isolated ---------------------------------------

def test_app_custom_template_box_survives_a_hostile_template():
    from workbench.ui.state import WorkbenchState
    state = WorkbenchState(str(ROOT / "sample_sessions" / "support_chat.json"), autosave=None, restore=False)
    good = state.assemble()
    for payload in ISSUE_PAYLOADS[:4]:
        state.choose(custom_source=f"{{% for m in messages %}}{{{{ m.content }}}}{{% endfor %}}\n{payload}")
        assert state.assembler().config.render_limits.isolate
        with pytest.raises(WorkbenchError, match="custom, line 2"):
            state.assemble()
        assert OVERTIME not in state.error           # refused by a bound, in the worker process
        assert "custom, line 2" in state.error and state.result is good  # the last good result stays
    state.choose(custom_source=get_template("chatml").source)
    honest = state.assemble()
    assert state.error == "" and honest.text.startswith("<|im_start|>")
    state.choose(custom_source="")
    assert state.assemble().text == good.text


def test_cli_renders_a_template_file_isolated(tmp_path, capsys):
    session = str(ROOT / "sample_sessions" / "support_chat.json")
    evil = tmp_path / "evil.jinja"
    evil.write_text("{{ messages[0].content }}\n{{ 'a' * 10**8 }}\n", "utf-8")
    assert main(["render", session, "--template", str(evil), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "evil, line 2" in err and err.count("\n") == 1
    assert OVERTIME not in err
    honest = tmp_path / "mine.jinja"
    honest.write_text(get_template("chatml").source, "utf-8")
    assert main(["render", session, "--template", str(honest), "--tokenizer", "qwen2.5", "--json"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert main(["render", session, "--template", "chatml", "--json"]) == 0
    assert mine["text"] == json.loads(capsys.readouterr().out)["text"]


def test_prompt_templates_that_cost_seconds_to_compile_are_refused():
    for source, error, fragment in [("{{ x|upper|trim }}" * 50_000, VariableLimitError, "tags"),
                                    ("{{ " + "(" * 500 + "1" + ")" * 500 + " }}", VariableError, "too deeply"),
                                    ("{{ " + "9" * 5000 + " }}", VariableError, "cannot be compiled")]:
        m = Message(role="system", content=source, template=True, sequence=0)
        with pytest.raises(error, match=fragment) as e:      # refused before compiling, by what it is
            expand_messages([m], {"x": "y"}, VariableConfig())
        assert OVERTIME not in str(e.value)
