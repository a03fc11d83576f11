"""Template arguments (issue 33, item 5): `--template-arg KEY=VALUE` on the commands that render,
checked against the official template rendered by transformers with the same keyword argument; an
argument is part of the cache key; what the shipped templates read is listed from their source;
`analyze --aggregate` renders every logged request with the arguments, in this process and on Ray's
workers, to the token totals the single renders give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from needs import need
from oracles import official_template
from transformers.utils.chat_template_utils import render_jinja_template

from workbench.errors import TemplateError
from workbench.templates import SHIPPED, get_template
from workbench.templates.arguments import parse_template_arg, template_arguments

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Capital of France?"},
            {"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Spain?"}]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> str:
    p = tmp_path_factory.mktemp("targs") / "chat.json"
    p.write_text(json.dumps({"messages": MESSAGES}))
    return str(p)


@pytest.mark.parametrize("value, kw", [("false", False), ("true", True)])
def test_enable_thinking_reaches_the_template_as_transformers_passes_it(session: str, value: str, kw: bool) -> None:
    out = cli("render", session, "--template", "qwen3", "--template-arg", f"enable_thinking={value}", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = render_jinja_template(conversations=[MESSAGES], chat_template=official_template("Qwen-Qwen3-0.6B.jinja"),
                                 add_generation_prompt=True, enable_thinking=kw)[0][0]
    assert got["text"] == want
    assert got["text"].endswith("<think>\n\n</think>\n\n") is (not kw)


def test_an_argument_is_part_of_the_cache_key(session: str) -> None:
    keys = {}
    for extra in ([], ["--template-arg", "enable_thinking=false"], ["--template-arg", "enable_thinking=true"]):
        out = cli("render", session, "--template", "qwen3", *extra, "--json")
        assert out.returncode == 0, out.stderr
        keys[" ".join(extra)] = json.loads(out.stdout)["cache_key"]
    assert len(set(keys.values())) == 3


def test_reasoning_effort_for_gpt_oss(session: str) -> None:
    texts = {}
    for effort in ("low", "high"):
        out = cli("render", session, "--template", "gpt-oss", "--template-arg", f"reasoning_effort={effort}", "--json")
        assert out.returncode == 0, out.stderr
        texts[effort] = json.loads(out.stdout)["text"]
    assert "Reasoning: low" in texts["low"] and "Reasoning: high" in texts["high"]


def test_an_argument_the_template_does_not_read_is_named(session: str) -> None:
    out = cli("render", session, "--template", "qwen3", "--template-arg", "enable_thinkin=false", "--json")
    assert out.returncode == 0
    assert "template_arg_unused" in out.stderr and "'enable_thinkin'" in out.stderr and "enable_thinking" in out.stderr


@pytest.mark.parametrize("arg, says", [("=x", "expected KEY=VALUE"), ("no-equals", "expected KEY=VALUE"),
                                       ("1x=2", "expected KEY=VALUE"), ("messages=[]", "the renderer sets"),
                                       ("add_generation_prompt=false", "the renderer sets"),
                                       ("x=NaN", "NaN"), ("x=" + "a" * 10_001, "over 10,000")])
def test_bad_arguments_are_one_error_line(session: str, arg: str, says: str) -> None:
    out = cli("render", session, "--template", "qwen3", "--template-arg", arg)
    assert out.returncode == 2 and out.stderr.startswith("error:") and out.stderr.count("\n") == 1, out.stderr
    assert says in out.stderr


def test_one_key_twice_with_two_values_is_refused(session: str) -> None:
    out = cli("render", session, "--template", "qwen3", "--template-arg", "enable_thinking=false",
              "--template-arg", "enable_thinking=true")
    assert out.returncode == 2 and "given twice" in out.stderr


def test_values_are_json_where_they_are_json() -> None:
    assert parse_template_arg("a=false") == ("a", False)
    assert parse_template_arg("a=3") == ("a", 3)
    assert parse_template_arg('a={"k": [1, 2]}') == ("a", {"k": [1, 2]})
    assert parse_template_arg("a=high") == ("a", "high")
    assert parse_template_arg('a="false"') == ("a", "false")
    with pytest.raises(TemplateError):
        parse_template_arg("tools=[]")


def test_the_arguments_each_shipped_template_reads() -> None:
    """Read from each template's source: loop and `set` variables are not arguments, a variable the
    template asks about (`is defined`) is."""
    got = {n: template_arguments(get_template(n).source) for n in sorted(SHIPPED)}
    assert got["qwen3"] == ["enable_thinking"]
    assert got["gpt-oss"] == ["builtin_tools", "model_identity", "reasoning_effort"]
    assert got["llama3.1"] == ["builtin_tools", "custom_tools", "date_string", "tools_in_user_message"]
    assert got["qwen2.5-vl"] == ["add_vision_id"]
    assert all(not v for k, v in got.items() if k not in ("qwen3", "gpt-oss", "llama3.1", "qwen2.5-vl"))
    with pytest.raises(TemplateError, match="does not parse"):
        template_arguments("{% if %}")


# ------------------------------------------------------------------------------ analyze --aggregate
QUESTIONS = ["Capital of France?", "And of Spain?", "And of Italy?"]
ANSWERS = ["Paris.", "Madrid.", "Rome."]


def log_requests() -> list[dict]:
    """Two conversations of three turns each, every turn's request as sent (the history grows)."""
    out = []
    for system in ("You are terse.", "You answer in one word."):
        msgs: list[dict] = [{"role": "system", "content": system}]
        for q, a in zip(QUESTIONS, ANSWERS):
            msgs.append({"role": "user", "content": q})
            out.append({"messages": list(msgs)})
            msgs.append({"role": "assistant", "content": a})
    return out


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("targs-log") / "calls.jsonl"
    lines = [json.dumps({"conversation_id": f"c{k // 3}", "timestamp": f"2026-03-01T10:0{k}:00Z", "request": r})
             for k, r in enumerate(log_requests())]
    p.write_text("\n".join(lines) + "\n", "utf-8")
    return p


def single_renders(kwargs: dict) -> int:
    """The tokens of every logged request rendered on its own, as `render --template-arg` renders it."""
    from workbench import Assembler
    asm = Assembler(template="qwen3", cache=None, **({"template_kwargs": kwargs} if kwargs else {}))
    return sum(len(asm.assemble(r).token_ids) for r in log_requests())


def test_aggregate_totals_move_with_an_argument_as_single_renders_do(log: Path) -> None:
    from workbench.analysis.aggregate import aggregate
    got = {v: aggregate([str(log)], template="qwen3", template_args={"enable_thinking": v}).to_json()
           for v in (False, True)}
    plain = aggregate([str(log)], template="qwen3").to_json()
    for v in (False, True):
        assert got[v]["turns"] == 6 and got[v]["tokens"] == single_renders({"enable_thinking": v})
    assert plain["tokens"] == single_renders({})
    assert got[False]["tokens"] != got[True]["tokens"]
    # The CLI: the same figure, and a key the default template does not read is named.
    out = cli("analyze", str(log), "--aggregate", "--template", "qwen3", "--template-arg", "enable_thinking=false",
              "--template-arg", "enable_thinkin=1", "--json", "--no-progress")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["tokens"] == got[False]["tokens"]   # the unread key changes nothing
    assert "template_arg_unused" in out.stderr and "'enable_thinkin'" in out.stderr
    bad = cli("analyze", str(log), "--aggregate", "--template-arg", "tools=[]", "--no-progress")
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "the renderer sets" in bad.stderr


def test_aggregate_on_ray_carries_the_argument_to_its_workers(log: Path) -> None:
    need("ray", "pip install -e .[test] (ray[data] is a test dependency)")
    from workbench.analysis.aggregate import aggregate
    kw = {"enable_thinking": False}
    here = aggregate([str(log)], template="qwen3", template_args=kw).to_json()
    there = aggregate([str(log)], ray=True, template="qwen3", template_args=kw).to_json()
    assert there["runner"]["mode"] == "ray"
    assert {k: v for k, v in there.items() if k != "runner"} == {k: v for k, v in here.items() if k != "runner"}
    assert there["tokens"] == single_renders(kw) != single_renders({})
