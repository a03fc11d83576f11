"""Files a user names are checked before a byte is read (issue 34, item 3; workbench/files.py).

The probe's payloads: `workbench render /dev/zero` and `workbench analyze /dev/zero --aggregate`
printed `error: unexpected MemoryError`; a FIFO hung both; `analyze --aggregate` held every bad
line (10 M lines of `{}`: 1.9 GB). Each is driven here the way the user drives it: the CLI in
process, or, where the old code hung, in a subprocess with a generous timeout, asserting the exit
status and the error line (never a duration)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench import load_session
from workbench.analysis import logs
from workbench.analysis.aggregate import aggregate
from workbench.analysis.logs import KEPT_BAD_LINES, BadLine, BadLines, index_logs
from workbench.cli.main import main
from workbench.errors import LogFileError, SessionFileError, WorkbenchError
from workbench.files import check_user_file, read_user_file
from workbench.sessions import MAX_SESSION_BYTES

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(ROOT / "sample_sessions" / "tool_agent.json")
HANG_GUARD_S = 120      # only a hang reaches this; the command itself answers at once


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO nobody writes to: an ordinary open() of it waits forever."""
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    yield path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The real command in its own process: a hang is a TimeoutExpired, not a stuck test run."""
    return subprocess.run([sys.executable, "-m", "workbench.cli.main", *argv], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, cwd=ROOT)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# ------------------------------------------------------------------------- not a regular file

@pytest.mark.parametrize("argv", [
    ["render", "{fifo}"],
    ["analyze", "{fifo}", "--aggregate", "--no-progress"],
    ["render", SAMPLE, "--vars", "{fifo}"],
    ["import", "{fifo}", "--from", "otel"],
    ["verify", "{bundle}", "{fifo}"],
])
def test_a_fifo_named_on_the_command_line_is_an_error_not_a_hang(fifo: Path, tmp_path: Path, argv: list[str]) -> None:
    bundle = tmp_path / "bundle"
    if "{bundle}" in argv:
        assert main(["export", SAMPLE, "-o", str(bundle), "--turns", "last"]) == 0
    r = run_cli(*(a.format(fifo=fifo, bundle=bundle) for a in argv))
    assert r.returncode == 2
    line = one_error_line(r.stderr)
    assert f"{fifo} is a FIFO (named pipe), not a regular file" in line
    assert "save what the pipe carries to a file" in line


@pytest.mark.parametrize("argv, what", [
    (["render", "/dev/zero"], "session file /dev/zero"),
    (["variables", "/dev/zero"], "session file /dev/zero"),
    (["analyze", "/dev/zero", "--aggregate", "--no-progress"], "request log /dev/zero"),
    (["analyze", SAMPLE, "/dev/zero", "--aggregate", "--no-progress"], "request log /dev/zero"),
    (["simulate", SAMPLE, "--params", "/dev/zero"], "--params file /dev/zero"),
    (["kv", SAMPLE, "--config", "/dev/zero"], "model config /dev/zero"),
    (["import", "/dev/zero", "--from", "otel"], "file to import /dev/zero"),
    (["semantic", "eval", "--dataset", "/dev/zero"], "dataset file /dev/zero"),
    (["semantic", "eval", "--dataset", "eval", "--calibrate-on", "/dev/zero"], "dataset file /dev/zero"),
])
def test_a_device_is_refused_before_it_is_read(capsys: pytest.CaptureFixture[str], argv: list[str],
                                               what: str) -> None:
    """The issue's payload: `render /dev/zero` read until memory ran out (`unexpected MemoryError`)."""
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == ""
    assert f"{what} is a character device, not a regular file" in one_error_line(err)


def test_an_export_read_as_one_document_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON-lines export streams; one that is a single document is parsed whole, so it has a cap
    (lowered here to a few bytes: the real one is 256 MiB). A document at the cap is read."""
    from workbench.capture.importers import json_input
    doc = tmp_path / "export.json"
    doc.write_text('[\n  {"a": 1}\n]\n')
    monkeypatch.setattr(json_input, "MAX_DOCUMENT_BYTES", doc.stat().st_size)
    assert [d.value for d in json_input.read_documents(doc)] == [[{"a": 1}]]      # exactly at the cap
    cap = doc.stat().st_size - 1
    monkeypatch.setattr(json_input, "MAX_DOCUMENT_BYTES", cap)
    with pytest.raises(LogFileError, match=f"one JSON document of more than {cap} bytes, the cap") as info:
        list(json_input.read_documents(doc))
    assert "export as JSON lines" in (info.value.hint or "")


def test_a_directory_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "render", str(tmp_path))
    assert code == 2
    assert one_error_line(err) == (f"error: session file {tmp_path} is a directory, not a regular file "
                                   "(name a file in it)")
    code, _, err = cli(capsys, "analyze", str(tmp_path), "--aggregate", "--no-progress")
    assert code == 2 and f"request log {tmp_path} is a directory" in one_error_line(err)


def test_a_fifo_in_a_template_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An HF model folder whose chat_template.jinja is a FIFO: the template loader would wait on it."""
    folder = tmp_path / "model"
    folder.mkdir()
    os.mkfifo(folder / "chat_template.jinja")
    r = run_cli("render", SAMPLE, "--template", str(folder))
    assert r.returncode == 2
    assert f"template file {folder / 'chat_template.jinja'} is a FIFO" in one_error_line(r.stderr)


def test_a_missing_file_says_which_role_it_had(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "render", SAMPLE, "--vars", "no/such/vars.json")
    assert code == 2
    assert one_error_line(err) == ("error: cannot read no/such/vars.json: No such file or directory (check the "
                                   "--vars file's path)")


# ------------------------------------------------------------------------------------ the caps

def sparse(path: Path, size: int) -> Path:
    """A file of `size` bytes that takes no disk: the cap is judged on its size, nothing is read."""
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_a_session_file_over_the_cap_names_the_cap_and_the_way_round_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = sparse(tmp_path / "big.json", MAX_SESSION_BYTES + 1)
    code, _, err = cli(capsys, "render", str(big))
    assert code == 2
    line = one_error_line(err)
    assert f"session file {big} is larger than 268,435,456 bytes (256 MiB), the cap on a session file" in line
    assert "load_session(path, max_bytes=N)" in line and "--aggregate" in line
    # From Python the cap is a parameter: an ordinary session under a small cap is refused the same way.
    with pytest.raises(SessionFileError, match="larger than 1,000 bytes, the cap on a session file"):
        load_session(SAMPLE, max_bytes=1_000)
    assert load_session(SAMPLE, max_bytes=os.path.getsize(SAMPLE)).title


def test_vars_and_template_files_have_caps_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "render", SAMPLE, "--vars", str(sparse(tmp_path / "v.json", (16 << 20) + 1)))
    assert code == 2 and "the cap on a --vars file" in one_error_line(err)
    code, _, err = cli(capsys, "render", SAMPLE, "--template", str(sparse(tmp_path / "t.jinja", (16 << 20) + 1)))
    assert code == 2 and "the cap on a template file" in one_error_line(err)


def test_read_user_file_reads_exactly_the_file_and_refuses_past_the_cap(tmp_path: Path) -> None:
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 100)
    assert read_user_file(p, cap=100, what="test file") == b"x" * 100
    with pytest.raises(WorkbenchError, match="larger than 99 bytes, the cap on a test file"):
        read_user_file(p, cap=99, what="test file")
    with pytest.raises(WorkbenchError, match="the cap on a test file"):
        check_user_file(p, cap=99, what="test file")
    check_user_file(p, cap=None, what="test file")          # streamed by its reader: no cap on the whole
    link = tmp_path / "link.bin"
    link.symlink_to(p)
    assert read_user_file(link, cap=100, what="test file") == b"x" * 100
    with pytest.raises(WorkbenchError, match="cannot read"):       # a bundle's files: no link at the end
        read_user_file(link, cap=100, what="test file", follow_links=False)


# ------------------------------------------------------------------- logs: streamed, bad lines bounded

def bad_log(path: Path, n: int) -> Path:
    path.write_bytes(b"{}\n" * n)
    return path


def test_bad_lines_are_all_counted_and_the_first_100_kept_with_their_lines(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's payload, scaled down: lines of `{}`, none a logged request."""
    log = bad_log(tmp_path / "bad.jsonl", 5_000)
    code, out, _ = cli(capsys, "analyze", str(log), "--aggregate", "--no-progress", "--json")
    d = json.loads(out)
    assert code == 0 and d["bad_lines"] == 5_000
    assert [x["line"] for x in d["diagnostics"]] == list(range(1, KEPT_BAD_LINES + 1))
    assert {x["problem"] for x in d["diagnostics"]} == {"conversation_id: missing or not a non-empty string"}
    code, out, _ = cli(capsys, "analyze", str(log), "--aggregate", "--no-progress")
    assert code == 0 and f"bad lines: 5,000 (first: {log}:1: conversation_id: missing" in out


def test_the_index_holds_its_index_not_its_bad_lines(tmp_path: Path) -> None:
    """Ten times the bad lines, the same memory: before, every BadLine was kept (1.9 GB for 10 M)."""
    def peak(n: int) -> int:
        log = bad_log(tmp_path / f"bad{n}.jsonl", n)
        tracemalloc.start()
        try:
            index = index_logs([log])
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            assert index.bad.count == n and len(index.bad.kept) == KEPT_BAD_LINES

    small, large = peak(20_000), peak(200_000)
    # The old index held 180,000 more BadLines here: over 20 MB more.
    assert large < small + (1 << 20), (small, large)


def test_a_line_longer_than_the_cap_is_one_bad_line_never_held(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_LINE_BYTES", 1_000)
    monkeypatch.setattr(logs, "READ_CHUNK", 256)
    good = json.dumps({"conversation_id": "c", "timestamp": "2026-03-01T10:00:00Z",
                       "request": {"messages": [{"role": "user", "content": "hi"}]}})
    log = tmp_path / "long.jsonl"
    log.write_text(good + "\n" + "x" * 5_000 + "\n" + good + "\n" + "y" * 3_000)      # the last: no newline
    index = index_logs([log])
    assert index.requests == 2
    assert [(b.line, b.problem) for b in index.bad.kept] == [(2, "line longer than 1,000 bytes: skipped"),
                                                             (4, "line longer than 1,000 bytes: skipped")]
    [(_, refs)] = index.ordered()
    assert [r.line for r in refs] == [1, 3]
    # The offsets still point at the lines after the long one.
    assert logs.read_lines(index.paths, refs) == [good.encode() + b"\n"] * 2


def test_strict_raises_the_first_bad_line_in_the_order_the_files_were_given(tmp_path: Path) -> None:
    """Lines the index takes and the analysis refuses: the 100 listed are a.jsonl's (by file name),
    and the first of each file is kept beside them, so --strict still raises z.jsonl's."""
    def refused(n: int) -> str:
        return "".join(json.dumps({"conversation_id": f"c{k}", "timestamp": "2026-03-01T10:00:00Z",
                                   "request": "no"}) + "\n" for k in range(n))
    z, a = tmp_path / "z.jsonl", tmp_path / "a.jsonl"
    z.write_text(refused(1))
    a.write_text(refused(300))
    assert aggregate([z, a]).to_json()["diagnostics"][0]["file"] == str(a)
    with pytest.raises(LogFileError, match=r"z\.jsonl:1: request: must be an OpenAI or Anthropic request"):
        aggregate([z, a], strict=True)


def test_bad_lines_merge_as_if_added_one_by_one_and_travel_to_ray_whole() -> None:
    lines = [BadLine(f"f{i % 3}.jsonl", 1000 - i, f"problem {i}") for i in range(700)]
    whole = BadLines()
    whole.extend(lines)
    for cut in (0, 1, 99, 100, 350, 699):
        a, b = BadLines(), BadLines()
        a.extend(lines[:cut])
        b.extend(lines[cut:])
        a.merge(BadLines.from_wire(json.loads(json.dumps(b.to_wire()))))    # as a Ray worker sends it
        assert (a.count, a.kept, a.first) == (whole.count, whole.kept, whole.first)
    assert whole.count == 700 and len(whole.kept) == KEPT_BAD_LINES
    assert whole.kept == sorted(lines, key=lambda x: (x.file, x.line))[:KEPT_BAD_LINES]
    assert whole.earliest(["f2.jsonl", "f0.jsonl"]) == min((b for b in lines if b.file == "f2.jsonl"),
                                                          key=lambda x: x.line)
