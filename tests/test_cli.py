"""The command line: the SPEC 7.2 JSON shape, listings, the human view and the exit-2 rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.templates import shipped_names
from workbench.tokenizers import names as tokenizer_names

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = sorted((ROOT / "sample_sessions").glob("*.json"))
SMALL = [p for p in SESSIONS if p.stat().st_size < 60_000]


def run_json(capsys, *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def check_contract(d: dict) -> None:
    assert set(d["template"]) >= {"name", "version"} and len(d["template"]["version"]) == 64
    assert set(d["tokenizer"]) >= {"name", "version"}
    assert isinstance(d["text"], str) and all(isinstance(i, int) for i in d["token_ids"])
    assert "".join(s["text"] for s in d["segments"]) == d["text"]
    ids = [i for s in d["segments"] for i in s["token_ids"]]
    assert ids == d["token_ids"]
    pos = 0
    for s in d["segments"]:
        assert set(s) >= {"kind", "role", "seq", "text", "token_ids", "start", "end", "source"}
        assert s["start"] == pos and s["end"] - s["start"] == len(s["token_ids"])
        assert s["source"] in ("fresh", "local", "redis")
        pos = s["end"]
    b = d["budget"]
    assert set(b) >= {"context_window", "reserve", "input_budget", "used", "by_kind"}
    assert b["input_budget"] == b["context_window"] - b["reserve"]
    assert b["used"] == len(d["token_ids"]) == sum(b["by_kind"].values())
    assert isinstance(d["dropped"], list)
    assert len(d["cache_key"]) == 64
    for g in d["diagnostics"]:
        assert g["level"] in ("info", "warning", "error") and set(g) >= {"code", "message", "seq"}


@pytest.mark.parametrize("template", shipped_names())
def test_render_json_every_template(capsys, template):
    """Every small session renders to the contract, or the format refuses it with one error line
    (Llama 3.1 takes one tool call at a time, Gemma has no tool role, ...)."""
    rendered = 0
    for session in SMALL:
        rc = main(["render", str(session), "--template", template, "--json"])
        out, err = capsys.readouterr()
        if rc == 0:
            d = json.loads(out)
            check_contract(d)
            assert d["template"]["name"] == template
            rendered += 1
        else:
            assert rc == 2 and err.startswith("error:") and "the template raised" in err, err
    assert rendered >= 3


@pytest.mark.parametrize("session", SMALL, ids=[p.stem for p in SMALL])
def test_render_json_every_small_session(capsys, session):
    check_contract(run_json(capsys, "render", str(session), "--json"))


def test_turns_and_budget_flags(capsys):
    path = str(ROOT / "sample_sessions" / "tool_agent.json")
    first = run_json(capsys, "render", path, "--turn", "1", "--json")
    last = run_json(capsys, "render", path, "--json", "--context-window", "50000", "--reserve", "1000")
    assert len(first["token_ids"]) < len(last["token_ids"])
    assert last["budget"]["context_window"] == 50000 and last["budget"]["input_budget"] == 49000


def test_tokenizer_override(capsys):
    d = run_json(capsys, "render", str(ROOT / "sample_sessions" / "openai_minimal.json"), "--template", "chatml",
                 "--tokenizer", "o200k_base", "--json")
    assert d["tokenizer"]["name"] == "o200k_base"


def test_listings(capsys):
    t = run_json(capsys, "templates", "--json")
    assert [r["name"] for r in t] == shipped_names()
    assert all(len(r["version"]) == 64 and r["description"] for r in t)
    k = run_json(capsys, "tokenizers", "--json")
    listed = {r["name"] for r in k}
    assert set(tokenizer_names()) <= listed and {"hf:", "tiktoken:"} <= listed
    assert all(r["available"] for r in k)


def test_human_view_shows_segments(capsys):
    assert main(["render", str(ROOT / "sample_sessions" / "openai_minimal.json"), "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "── system" in out and "── message · user · seq 1" in out and "── generation_prompt" in out
    assert main(["demo", "--color", "always"]) == 0
    assert "\x1b[" in capsys.readouterr().out


@pytest.mark.parametrize("args,fragment", [
    (["render", "no/such/file.json"], "cannot read"),
    (["render", "sample_sessions/tool_agent.json", "--template", "nope"], "nope"),
    (["render", "sample_sessions/tool_agent.json", "--turn", "99"], "turn 99"),
    (["render", "sample_sessions/tool_agent.json", "--context-window", "-3"], "--context-window"),
    (["render", "sample_sessions/tool_agent.json", "--bogus"], "unrecognized"),
    (["frobnicate"], "invalid choice"),
])
def test_errors_exit_2_with_one_line(args, fragment):
    p = subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("template", ["qwen2.5", "llama3.1", "deepseek-v3", "gpt-oss"])
def test_large_sessions_render(capsys, template):
    """The long RAG session (Anthropic, > 30k tokens) and the overflowing one render to the contract;
    the overflow session's window hint is used and the overflow is truncated (or, with --no-truncate,
    reported)."""
    rag = str(ROOT / "sample_sessions" / "rag_long.json")
    d = run_json(capsys, "render", rag, "--template", template, "--context-window", "65536", "--json")
    check_contract(d)
    assert len(d["token_ids"]) > 30_000 and d["dropped"] == []
    # Its document sits in the system prompt, which is never dropped: a 16k window cannot hold it.
    assert main(["render", rag, "--template", template, "--context-window", "16384", "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "never dropped" in err and "system" in err
    path = str(ROOT / "sample_sessions" / "overflow.json")
    o = run_json(capsys, "render", path, "--template", template, "--json")
    check_contract(o)
    assert o["budget"]["context_window"] == 32768
    assert o["dropped"] and o["budget"]["used"] <= o["budget"]["input_budget"]
    assert any(g["code"] == "truncated" for g in o["diagnostics"])
    n = run_json(capsys, "render", path, "--template", template, "--no-truncate", "--json")
    assert n["dropped"] == [] and n["budget"]["used"] > n["budget"]["input_budget"]
    assert any(g["code"] == "over_budget" for g in n["diagnostics"])


TEMPLATED = ROOT / "sample_sessions" / "templated_system.json"
VARS = ROOT / "sample_sessions" / "vars" / "templated_system.json"


def test_vars_file_scopes_and_debug_view(capsys):
    d = run_json(capsys, "render", str(TEMPLATED), "--vars", str(VARS), "--json")
    check_contract(d)
    rows = {v["name"]: v for v in d["variables"]}
    assert rows["company"]["scope"] == "system" and rows["company"]["value"] == "Northwind Outfitters"
    assert rows["deployment"]["value"] == "eu-prod" and "eu-prod deployment" in d["text"]
    assert rows["customer_tier"]["scope"] == "request" and "Gold member" in d["text"]
    assert rows["assistant_name"]["scope"] == "local" and "You are Nora" in d["text"]
    assert rows["today"]["scope"] == "builtin" and rows["today"]["volatile"] is True
    assert "{{" not in d["text"] and "{%" not in d["text"]
    warn = [g for g in d["diagnostics"] if g["code"] == "volatile_in_prefix"]
    assert warn and warn[0]["seq"] == 0 and "today" in warn[0]["message"]
    # without the file the optional defaults apply and the session still renders
    plain = run_json(capsys, "render", str(TEMPLATED), "--json")
    assert "demo deployment" in plain["text"]
    assert {v["name"]: v["scope"] for v in plain["variables"]}["deployment"] == "empty"
    # the debug view on its own
    v = run_json(capsys, "variables", str(TEMPLATED), "--vars", str(VARS), "--json")
    assert [r["name"] for r in v["variables"]] == [r["name"] for r in d["variables"]]
    assert main(["variables", str(TEMPLATED), "--vars", str(VARS)]) == 0
    out = capsys.readouterr().out
    assert "customer_tier" in out and "request" in out and "volatile" in out


def test_vars_file_errors_exit_2(capsys, tmp_path):
    cases = {
        "missing.json": None,
        "notjson.json": "{nope",
        "list.json": "[1, 2]",
        "unknown_field.json": json.dumps({"declare": {"loyalty_id": {"mandatory": True}}}),
        "unknown_key.json": json.dumps({"constants": {}, "globals": {}}),
        "baddecl.json": json.dumps({"declare": {"x": {"required": "yes"}}}),
    }
    for name, body in cases.items():
        path = tmp_path / name
        if body is not None:
            path.write_text(body, encoding="utf-8")
        assert main(["render", str(TEMPLATED), "--vars", str(path), "--json"]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("error:") and err.count("\n") == 1, (name, err)
    # a prompt template naming a variable nobody defines
    session = tmp_path / "s.json"
    session.write_text(json.dumps({"messages": [{"role": "system", "content": "Hi {{ who }}", "template": True},
                                                {"role": "user", "content": "x"}]}), encoding="utf-8")
    assert main(["render", str(session), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "who" in err


def test_human_view_shows_breakdown_and_drops(capsys):
    assert main(["render", str(ROOT / "sample_sessions" / "overflow.json"), "--context-window", "8192",
                 "--reserve", "1024", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "last user" in out and "reserve 1024" in out and "dropped" in out and "oldest first" in out
