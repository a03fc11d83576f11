"""Issue 32, the classifier checked against our own engine: a few conversations of a generated request
log replayed through `workbench serve-engine --model tiny` (a real process, its chat routes, its radix
cache), the log written again with the usage the engine reported (tools/replay_through_engine.py),
then `workbench analyze --aggregate --json --reconcile-calls`. The engine's cache is exact and known:
every call must be reconciled with 0 unexplained and the predicted cached tokens equal to the
reported ones.

Two runs: one conversation per engine process (each starts from an empty cache, so only the
conversation's own turns and replies are held), and several conversations, OpenAI and Anthropic
shaped, through one process (they share its radix cache, as a serving engine's conversations do).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_server import tiny_engine_server

ROOT = Path(__file__).resolve().parent.parent
GENERATOR = ROOT / "tools" / "make_request_logs.py"
REPLAY = ROOT / "tools" / "replay_through_engine.py"


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("replay") / "gen"
    done = subprocess.run([sys.executable, str(GENERATOR), "--requests", "300", "--sessions", "40", "--seed", "3",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return out / "logs"


def replay(log: Path, url: str, out: Path, *args: str) -> list[dict]:
    done = subprocess.run([sys.executable, str(REPLAY), str(log), "--engine", url, "--out", str(out), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]


def reconcile(log: Path) -> tuple[dict, list[dict]]:
    calls = log.with_suffix(".calls.jsonl")
    done = subprocess.run([sys.executable, "-m", "workbench.cli.main", "analyze", str(log), "--aggregate", "--json",
                           "--no-progress", "--reconcile-calls", str(calls)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["reconciliation"], [json.loads(x) for x in calls.read_text().splitlines()]


def check_exact(lines: list[dict], rec: dict, calls: list[dict]) -> None:
    assert rec["calls"] == rec["with_usage"] == len(lines) == len(calls)
    assert rec["diagnostics"] == []
    assert rec["classes"]["unexplained"]["calls"] == 0, rec["unexplained"][:5]
    # What the engine reported, read from the replayed lines themselves (not from the classifier).
    engine = {(x["conversation_id"], x["timestamp"]): x["response"]["usage"] for x in lines}
    differ = []
    for c in calls:
        u = engine[(c["conversation_id"], c["timestamp"])]
        said = u["prompt_tokens_details"]["cached_tokens"] if "prompt_tokens" in u else u["cache_read_input_tokens"]
        assert c["reported"]["cached"] == said
        if c["predicted"]["cached"] != said:
            differ.append(c)
    assert not differ, f"{len(differ)} of {len(calls)} calls predicted otherwise than the engine reported: {differ[:4]}"


def test_one_conversation_per_engine(log, tmp_path):
    """Each conversation through a fresh engine: its first call reads nothing, later calls read their
    own earlier prompts and the engine's replies, exactly as predicted. Each engine's log is
    reconciled on its own: the reconciler takes the lines of one engine provider for one server
    with one shared cache (docs/logs.md section 8), and these are two servers."""
    for i, client in enumerate(("support-bot", "notes-app")):
        with tiny_engine_server() as url:
            lines = replay(log, url, tmp_path / f"one-{i}.jsonl", "--conversations", "1", "--max-calls", "5",
                           "--client", client)
        assert len(lines) >= 3, lines
        assert {x["provider"] for x in lines} == {"workbench-engine"}
        # The replay asked for the reply's ids, and the log keeps them where vLLM puts them.
        assert all((x["response"]["choices"][0] if "choices" in x["response"] else x["response"])["token_ids"]
                   for x in lines)
        rec, calls = reconcile(tmp_path / f"one-{i}.jsonl")
        check_exact(lines, rec, calls)


def test_several_conversations_share_one_engine(log, tmp_path):
    with tiny_engine_server() as url:
        lines = replay(log, url, tmp_path / "shared.jsonl", "--conversations", "2", "--max-calls", "4",
                       "--client", "support-bot", "--client", "notes-app")
    assert len({x["conversation_id"] for x in lines}) == 4
    # Both APIs: Chat Completions and Anthropic Messages.
    assert {"prompt_tokens" in x["response"]["usage"] for x in lines} == {True, False}
    rec, calls = reconcile(tmp_path / "shared.jsonl")
    check_exact(lines, rec, calls)
