"""The incremental log reader (analysis/logs.py LogTail) and the parsing it relies on: lines appended
between polls are read once and only once (only the new bytes are read), a partial last line waits
for its newline, a rotated log is read to its end and then the new file is followed, a truncated
one starts over, bad lines are returned with their file and line and reading goes on, and 10,000
lines are read in one go and the next append alone after them. Lines are written with
capture/log_line.py, as `workbench record` writes them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workbench.analysis import logs
from workbench.analysis.logs import BadLine, LogTail, parse_line, reported_usage
from workbench.capture.log_line import log_line, utc_timestamp
from workbench.errors import LogFileError

T0 = 1_772_000_000.0


def request(cid: str, k: int) -> dict:
    """Turn k (from 0) of conversation `cid`: every earlier question and answer, then question k."""
    msgs: list[dict] = [{"role": "system", "content": "You answer in one line."}]
    for i in range(k):
        msgs += [{"role": "user", "content": f"{cid} question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    return {"messages": [*msgs, {"role": "user", "content": f"{cid} question {k}"}]}


def line(cid: str, k: int, t: float | None = None, **extra: object) -> bytes:
    return log_line(cid, utc_timestamp(T0 + k if t is None else t), request(cid, k), **extra)


def append(path: Path, *chunks: bytes) -> None:
    with open(path, "ab") as f:
        for c in chunks:
            f.write(c)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Every byte the reader reads (os.pread is its only read), and every path it opens."""
    seen = {"bytes": 0}
    opened: list[str] = []
    real_pread, real_open = os.pread, os.open

    def pread(fd: int, n: int, offset: int) -> bytes:
        data = real_pread(fd, n, offset)
        seen["bytes"] += len(data)
        return data

    def open_(path: str, *args: object, **kw: object) -> int:
        opened.append(os.fspath(path))
        return real_open(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(logs.os, "pread", pread)
    monkeypatch.setattr(logs.os, "open", open_)
    seen["opened"] = opened  # type: ignore[assignment]
    return seen


def test_appends_are_read_once_and_only_the_new_bytes(tmp_path: Path, counted: dict) -> None:
    log = tmp_path / "calls.jsonl"
    append(log, line("a", 0), line("b", 0), line("a", 1))
    tail = LogTail(log)
    first = tail.poll()
    assert [(x.conversation_id, x.ref.line) for x in first.lines] == [("a", 1), ("b", 2), ("a", 3)]
    assert not first.bad and not first.more and not tail.waiting
    size = log.stat().st_size
    assert counted["bytes"] == size
    assert tail.poll().lines == () and counted["bytes"] == size          # nothing new: nothing read
    append(log, line("b", 1, model="gpt-4o", provider="openai", latency_ms=812.5))
    second = tail.poll()
    assert [x.conversation_id for x in second.lines] == ["b"]
    assert counted["bytes"] == log.stat().st_size                     # only the appended line was read
    got = second.lines[0]
    assert (got.logged.model, got.logged.provider, got.logged.latency_ms) == ("gpt-4o", "openai", 812.5)
    assert got.logged.request == request("b", 1) and got.when == T0 + 1
    # each line reads back exactly, from where it was found
    assert tail.read(got.ref) == line("b", 1, model="gpt-4o", provider="openai", latency_ms=812.5)
    assert tail.read(first.lines[1].ref) == line("b", 0)
    assert counted["opened"] == [str(log)]                           # one open, of the given path
    tail.close()


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    whole = line("a", 2)
    append(log, line("a", 0), whole[:40])
    tail = LogTail(log)
    got = tail.poll()
    assert [x.ref.line for x in got.lines] == [1] and not got.bad    # the fragment is not a bad line yet
    append(log, whole[40:-1])                                         # still no newline
    assert tail.poll().lines == () and tail.poll().bad == ()
    append(log, b"\n", line("a", 3))
    got = tail.poll()
    assert [(x.ref.line, x.logged.request) for x in got.lines] == [(2, request("a", 2)), (3, request("a", 3))]
    assert tail.read(got.lines[0].ref) == whole
    assert got.lines[0].ref.offset == len(line("a", 0))


def test_rotation_reads_the_old_file_to_its_end_then_follows_the_new_one(tmp_path: Path, counted: dict) -> None:
    log = tmp_path / "calls.jsonl"
    append(log, line("a", 0), line("a", 1))
    tail = LogTail(log)
    before = tail.poll().lines
    append(log, line("a", 2))                                         # written just before the rotation
    os.replace(log, tmp_path / "calls.jsonl.1")                       # as capture/log_writer.py rotates
    append(log, line("a", 3), line("b", 0))
    got = tail.poll()
    assert [(x.conversation_id, x.logged.request) for x in got.lines] == [
        ("a", request("a", 2)), ("a", request("a", 3)), ("b", request("b", 0))]
    assert [x.ref.line for x in got.lines] == [3, 1, 2]               # line numbers are per file
    assert got.lines[0].file == str(log) and got.lines[1].file == f"{log} (file 2)"
    assert any("was rotated" in e for e in got.events) and tail.rotations == 1
    # The rotated file is read through the descriptor opened as LOG: gone from the disk, its lines
    # still read back, and no other path was ever opened.
    (tmp_path / "calls.jsonl.1").unlink()
    assert tail.read(before[0].ref) == line("a", 0) and tail.read(got.lines[0].ref) == line("a", 2)
    assert counted["opened"] == [str(log), str(log)]
    append(log, line("b", 1))
    assert [x.logged.request for x in tail.poll().lines] == [request("b", 1)]


def test_a_rotated_files_unfinished_line_is_one_bad_line(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    append(log, line("a", 0), line("a", 1)[:25])
    tail = LogTail(log)
    assert len(tail.poll().lines) == 1
    os.replace(log, tmp_path / "calls.jsonl.1")
    append(log, line("a", 1))
    got = tail.poll()
    assert [x.logged.request for x in got.lines] == [request("a", 1)]
    assert got.bad == (BadLine(str(log), 2, "incomplete last line (no newline) when the file was rotated"),)


def test_a_log_removed_and_made_again_is_followed(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    tail = LogTail(log)
    got = tail.poll()
    assert tail.waiting and got.lines == () and got.events == () and got.bad == ()
    append(log, line("a", 0))
    assert [x.conversation_id for x in tail.poll().lines] == ["a"] and not tail.waiting
    log.unlink()                                                      # rotation with no backups: unlinked
    assert tail.poll().lines == ()                                    # no file at the path: wait
    append(log, line("b", 0))
    got = tail.poll()
    assert [x.conversation_id for x in got.lines] == ["b"] and tail.rotations == 1


def test_a_file_truncated_in_place_starts_over(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    append(log, line("a", 0), line("a", 1))
    tail = LogTail(log)
    old = tail.poll().lines
    with open(log, "wb") as f:                                        # copytruncate
        f.write(line("c", 0))
    got = tail.poll()
    assert [x.conversation_id for x in got.lines] == ["c"] and got.lines[0].ref.line == 1
    assert any("was truncated" in e for e in got.events)
    with pytest.raises(LogFileError, match="no longer held"):
        tail.read(old[0].ref)                                         # its bytes are gone: said, not misread
    assert tail.read(got.lines[0].ref) == line("c", 0)


def test_bad_lines_are_named_and_reading_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    good = [line("a", 0), line("a", 1), line("a", 2)]
    bad_lines = [
        b'{"conversation_id": "a", "timestamp": \n',
        b'{"timestamp": "2026-03-01T10:00:00Z", "request": {"messages": []}}\n',
        b'{"conversation_id": "a", "timestamp": "yesterday", "request": {"messages": []}}\n',
        b'{"conversation_id": "a", "timestamp": "2026-03-01T10:00:00Z", "request": [1]}\n',
        log_line("a", "2026-03-01T10:00:00Z", request("a", 0), model=7),
        b'{"conversation_id":"a","timestamp":"2026-03-01T10:00:00Z","request":{"messages":[]},"latency_ms":-1}\n',
        b'{"conversation_id":"a","timestamp":"2026-03-01T10:00:00Z","request":{"messages":[]},"latency_ms":true}\n',
        b"\xff\xfe not utf-8\n",
    ]
    unrecorded = (b'{"timestamp":"2026-03-01T10:00:00+00:00","unrecorded":{"reason":"the body is not JSON",'
                  b'"api":"chat","path":"/v1/chat/completions","bytes":12,"status":null}}\n')
    append(log, good[0], *bad_lines[:4], b"\n", b"   \r\n", good[1], *bad_lines[4:], good[2], unrecorded)
    got = LogTail(log).poll()
    assert [x.logged.request for x in got.lines] == [request("a", k) for k in range(3)]
    assert [x.ref.line for x in got.lines] == [1, 8, 13]              # blank lines count, and are skipped
    problems = {b.line: b.problem for b in got.bad}
    assert sorted(problems) == [2, 3, 4, 5, 9, 10, 11, 12, 14]
    assert problems[14] == "a call the recorder could not read: the body is not JSON"
    assert problems[2].startswith("not valid JSON")
    assert problems[3] == "conversation_id: missing or not a non-empty string"
    assert problems[4] == "timestamp: 'yesterday' is not an ISO-8601 date and time"
    assert problems[5] == "request: must be an OpenAI or Anthropic request object, got a list"
    assert problems[9] == "model: must be a non-empty string, got 7"
    assert problems[10] == "latency_ms: must be a number of milliseconds >= 0, got -1"
    assert problems[11] == "latency_ms: must be a number of milliseconds >= 0, got true"
    assert problems[12].startswith("not UTF-8")
    assert str(got.bad[0]) == f"{log}:2: {problems[2]}"


def test_a_line_too_long_is_skipped_to_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    huge = b'{"conversation_id": "a", "timestamp": "2026-03-01T10:00:00Z", "x": "' + b"y" * 300
    append(log, line("a", 0), huge)
    tail = LogTail(log, max_line_bytes=200)
    got = tail.poll()
    assert len(got.lines) == 1 and got.bad == (BadLine(str(log), 2, "line longer than 200 bytes: skipped"),)
    append(log, b"y" * 500)                                           # still the same line: not held, not counted again
    assert tail.poll().bad == () and len(tail._partial) == 0
    append(log, b'"}\n', line("a", 1)[:150], line("a", 1)[150:])
    got = tail.poll()
    assert [(x.ref.line, x.logged.request) for x in got.lines] == [(3, request("a", 1))]
    assert tail.read(got.lines[0].ref) == line("a", 1)


def test_ten_thousand_lines_then_one_more(tmp_path: Path, counted: dict) -> None:
    log = tmp_path / "calls.jsonl"
    with open(log, "wb") as f:
        for n in range(10_000):
            f.write(line(f"c{n % 1000}", n // 1000, T0 + n))
    tail = LogTail(log)
    lines = []
    while True:
        got = tail.poll(max_bytes=1 << 20)                            # in steps, as the follower reads
        lines += got.lines
        assert not got.bad
        if not got.more:
            break
    assert len(lines) == 10_000 and len({x.conversation_id for x in lines}) == 1000
    assert [x.ref.line for x in lines] == list(range(1, 10_001))
    assert counted["bytes"] == log.stat().st_size
    append(log, line("c7", 10, T0 + 20_000))
    got = tail.poll()
    assert [(x.conversation_id, x.ref.line) for x in got.lines] == [("c7", 10_001)]
    assert counted["bytes"] == log.stat().st_size                    # the one line, not the file again
    assert tail.read(lines[-1].ref) == line("c999", 9, T0 + 9_999)


def test_a_folder_or_a_fifo_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LogFileError, match="not a plain file"):
        LogTail(tmp_path).poll()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(LogFileError, match="not a plain file"):    # never opened: a FIFO would block
        LogTail(fifo).poll()


def test_parse_line_takes_model_and_latency() -> None:
    raw = log_line("a", "2026-03-01T10:00:00Z", request("a", 0), model="claude-sonnet-4", latency_ms=12,
                   provider="anthropic", client="web", template="qwen2.5", response={"usage": {"input_tokens": 3}})
    got = parse_line(raw, "a", "f", 1)
    assert not isinstance(got, BadLine)
    assert (got.model, got.latency_ms, got.provider, got.client, got.template) == (
        "claude-sonnet-4", 12.0, "anthropic", "web", "qwen2.5")
    bare = parse_line(log_line("a", "2026-03-01T10:00:00Z", request("a", 0)), "a", "f", 1)
    assert not isinstance(bare, BadLine) and (bare.model, bare.latency_ms) == (None, None)
    assert parse_line(b'{"conversation_id":"a","timestamp":"x","request":{},"model":""}', "a", "f", 4) == BadLine(
        "f", 4, 'model: must be a non-empty string, got ""')


@pytest.mark.parametrize(("usage", "figures"), [
    ({"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
      "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0}},
     (1200, 1024, None, 30)),                                                       # Chat Completions
    ({"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 896}, "output_tokens": 9},
     (1200, 896, None, 9)),                                                         # Responses
    ({"input_tokens": 12, "cache_read_input_tokens": 4096, "cache_creation_input_tokens": 310,
      "output_tokens": 55, "service_tier": "standard"},
     (12, 4096, 310, 55)),                                                          # Anthropic
])
def test_reported_usage_keeps_what_the_provider_said(usage: dict, figures: tuple) -> None:
    got = reported_usage({"id": "x", "usage": usage})
    assert got is not None
    assert (got.prompt_tokens, got.cached_tokens, got.cache_write_tokens, got.output_tokens) == figures
    flat = dict(got.fields)
    assert "service_tier" not in flat and all(isinstance(v, int) for v in flat.values())
    assert json.loads(json.dumps(got.to_json()))["fields"] == flat


def test_no_usage_is_none() -> None:
    assert reported_usage(None) is None and reported_usage({"usage": "n/a"}) is None
    assert reported_usage({"choices": []}) is None and reported_usage({"usage": {"note": "x"}}) is None


def test_only_the_last_rotated_files_are_held(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    tail = LogTail(log, held_rotated=2)
    refs = []
    for k in range(4):                                 # four files: three rotated away
        append(log, line("a", k))
        refs += [x.ref for x in tail.poll().lines]
        os.replace(log, tmp_path / f"calls.jsonl.{k + 1}")
    append(log, line("a", 4))
    refs += [x.ref for x in tail.poll().lines]
    assert [r.handle for r in refs] == [0, 1, 2, 3, 4] and tail.rotations == 4
    for old in refs[:2]:                               # let go: said, never another file's bytes
        with pytest.raises(LogFileError, match="no longer held"):
            tail.read(old)
    assert [tail.read(r) for r in refs[2:]] == [line("a", k) for k in (2, 3, 4)]
    assert len(set(tail._fds.values())) == 3           # two rotated files and the current one open
    tail.close()
    assert tail._fds == {}
