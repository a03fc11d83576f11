"""Template arguments (issue 33, item 5): `--template-arg KEY=VALUE` on the commands that render,
checked against the official template rendered by transformers with the same keyword argument; an
argument is part of the cache key; what the shipped templates read is listed from their source."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
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
