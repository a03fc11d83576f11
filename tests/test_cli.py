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
    the overflow session's window hint is used and the overflow is reported."""
    d = run_json(capsys, "render", str(ROOT / "sample_sessions" / "rag_long.json"), "--template", template, "--json")
    check_contract(d)
    assert len(d["token_ids"]) > 30_000
    o = run_json(capsys, "render", str(ROOT / "sample_sessions" / "overflow.json"), "--template", template, "--json")
    check_contract(o)
    assert o["budget"]["context_window"] == 32768
    assert o["budget"]["used"] > o["budget"]["input_budget"]
    assert any(g["code"] == "over_budget" for g in o["diagnostics"])
