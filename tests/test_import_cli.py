"""The `workbench import` command itself: where lines and summaries go, the atomic -o, usage
errors, and that what it writes is what `analyze --aggregate` reads."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from import_fixtures.harness import export, run_import, span, write_json

from workbench.capture.importers import import_files, write_log
from workbench.cli.main import main

FIXTURES = Path(__file__).resolve().parent / "import_fixtures"


def _two_turns(tmp_path: Path) -> Path:
    def msgs(*texts: str) -> str:
        roles = ["user", "assistant"]
        return json.dumps([{"role": roles[i % 2], "parts": [{"type": "text", "content": t}]}
                           for i, t in enumerate(texts)])
    return write_json(tmp_path / "t.json", export(
        span({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "session.id": "c1",
              "gen_ai.input.messages": msgs("Hello there"),
              "gen_ai.output.messages": json.dumps([{"role": "assistant", "finish_reason": "stop",
                                                     "parts": [{"type": "text", "content": "Hi!"}]}])},
             span_id="0000000000000001", start=1767225600000000000, end=1767225600500000000),
        span({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "session.id": "c1",
              "gen_ai.input.messages": msgs("Hello there", "Hi!", "How are you?")},
             span_id="0000000000000002", start=1767225610000000000, end=1767225611000000000)))


def test_lines_to_stdout_and_summary_to_stderr(tmp_path: Path) -> None:
    code, out, err = run_import(str(_two_turns(tmp_path)), "--from", "otel")
    assert code == 0
    lines = [json.loads(x) for x in out.splitlines()]
    assert [len(x["request"]["messages"]) for x in lines] == [1, 3]
    assert out.startswith('{"conversation_id":"c1","timestamp":"2026-01-01T00:00:00.000000+00:00","request":')
    assert err == "2 span(s) and event(s) read from 1 file(s), 2 line(s) written\n"


def test_the_command_in_its_own_process(tmp_path: Path) -> None:
    """Real stdout and exit status: lines on stdout as bytes, the summary and skips on stderr."""
    bad = write_json(tmp_path / "bad.json", export(span({"gen_ai.operation.name": "chat"}, span_id="00000000000000ff")))
    proc = subprocess.run([sys.executable, "-m", "workbench.cli.main", "import", str(_two_turns(tmp_path)),
                           str(bad), "--from", "otel"], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["conversation_id"] for x in proc.stdout.splitlines()] == ["c1", "c1"]
    err = proc.stderr.decode()
    assert "3 span(s) and event(s) read from 2 file(s), 2 line(s) written" in err
    assert f"1 skipped:\n  {bad}: span 1 (id 00000000000000ff): no messages recorded" in err
    proc = subprocess.run([sys.executable, "-m", "workbench.cli.main", "import", str(bad), "--from", "otel",
                           "--strict"], capture_output=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().startswith(f"error: {bad}: span 1 (id 00000000000000ff): no messages recorded")
    assert b"Traceback" not in proc.stderr


def test_json_summary_needs_a_log_and_usage_errors(tmp_path: Path) -> None:
    code, out, err = run_import(str(_two_turns(tmp_path)), "--from", "otel", "--json")
    assert code == 2 and err.startswith("error: --json prints the summary on stdout") and out == ""
    code, out, err = run_import(str(_two_turns(tmp_path)), "--from", "zipkin")
    assert code == 2 and "invalid choice: 'zipkin'" in err
    code, out, err = run_import(str(_two_turns(tmp_path)), "--from", "otel", "-o", str(tmp_path / "no" / "dir.jsonl"))
    assert code == 2 and err.startswith("error: ") and "cannot write there" in err


def test_output_replaces_the_log_whole(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    log.write_text("old line\n", encoding="utf-8")
    code, out, err = run_import(str(_two_turns(tmp_path)), "--from", "otel", "-o", str(log))
    assert code == 0 and out == ""
    text = log.read_text(encoding="utf-8")
    assert "old line" not in text and text.count("\n") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requests.jsonl", "t.json"]


def test_a_failed_write_leaves_no_part_file(tmp_path: Path) -> None:
    result = import_files([_two_turns(tmp_path)], "otel")

    class Boom(Exception):
        pass

    def calls():
        yield result.calls[0]
        raise Boom
    log = tmp_path / "requests.jsonl"
    try:
        write_log(calls(), log)
    except Boom:
        pass
    assert not log.exists() and [p.name for p in tmp_path.iterdir()] == ["t.json"]


def test_analyze_reads_what_import_writes(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    assert run_import(str(_two_turns(tmp_path)), "--from", "otel", "-o", str(log))[0] == 0
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["analyze", str(log), "--aggregate", "--no-progress", "--json"])
    assert code == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert report["requests"] == 2 and report["bad_lines"] == 0 and report["sessions"] == 1 and report["turns"] == 2
    assert os.path.getsize(log) > 0
