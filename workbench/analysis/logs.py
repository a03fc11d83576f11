"""Request logs (SPEC 7.1, docs/logs.md): JSON lines, one model call per line, grouped into sessions.

Files may be many and large, so they are read in two passes that never hold parsed requests in
the driver. `index_logs` streams every file once and keeps, per conversation, where each line lies
(file, byte offset, length, line number) and its timestamp: a few numbers a line. The analysis
(aggregate.py) reads a session's lines back from those offsets (`read_lines`), in whichever
process analyses it, and parses them there (`parse_line`).

The index pass reads only the two fields it groups by. Where a line starts with them, as the
writers we know do (`{"conversation_id": "...", "timestamp": "...", ...`), they are taken from the
bytes without parsing the rest; any other line is parsed whole. The worker parses every line fully
and checks that it names the conversation it was grouped under (a later duplicate key wins in
JSON), so the shortcut cannot misfile a line unnoticed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import strict_json
from ..errors import LogFileError

# The two grouping fields at the start of a line, as plain strings (no escapes: those go the slow way).
_HEAD = re.compile(rb'\{\s*"conversation_id"\s*:\s*"([^"\\]*)"\s*,\s*"timestamp"\s*:\s*"([^"\\]*)"\s*[,}]')
OPTIONAL_FIELDS = ("template", "client", "provider")


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a logged request: where it is and what is wrong with it."""
    file: str
    line: int            # from 1
    problem: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "problem": self.problem}

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.problem}"

    def error(self) -> LogFileError:
        return LogFileError(str(self), hint="fix or remove the line, or leave out --strict to count it and go on")


@dataclass(frozen=True, slots=True)
class LineRef:
    """Where one logged request lies: enough to read it back and to order it."""
    file: int            # index into the index's paths
    offset: int
    length: int
    line: int            # from 1


@dataclass
class LogIndex:
    paths: tuple[str, ...]                       # absolute: a worker of a cluster opens them too
    sessions: dict[str, list[tuple[float, int, int, int, int]]] = field(default_factory=dict)
    bad: list[BadLine] = field(default_factory=list)
    requests: int = 0

    def add(self, cid: str, when: float, ref: LineRef) -> None:
        self.sessions.setdefault(cid, []).append((when, ref.file, ref.line, ref.offset, ref.length))
        self.requests += 1

    def ordered(self) -> Iterator[tuple[str, list[LineRef]]]:
        """Each conversation with its lines in turn order: by timestamp, ties in file order (the
        order the paths were given, then line numbers). Conversations in order of first appearance."""
        for cid, rows in self.sessions.items():
            rows.sort()
            yield cid, [LineRef(f, off, n, line) for _, f, line, off, n in rows]


def index_logs(paths: Sequence[str | os.PathLike[str]], *, strict: bool = False) -> LogIndex:
    """Stream every file once; group its lines by conversation. A bad line is recorded (or, with
    `strict`, raised as a LogFileError); a file that cannot be read is an error either way."""
    if not paths:
        raise LogFileError("no log files given", hint="name one or more JSONL request logs")
    index = LogIndex(tuple(os.path.abspath(os.fspath(p)) for p in paths))
    for i, path in enumerate(index.paths):
        name = os.fspath(paths[i])
        for ref, raw in _lines(path, name, i):
            head = _head(raw, name, ref.line)
            if isinstance(head, BadLine):
                if strict:
                    raise head.error()
                index.bad.append(head)
                continue
            index.add(head[0], head[1], ref)
    return index


def _lines(path: str, name: str, i: int) -> Iterator[tuple[LineRef, bytes]]:
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise LogFileError(f"cannot read {name}: {exc.strerror}", hint="check the path") from None
    with f:
        offset = 0
        for n, raw in enumerate(f, start=1):
            if raw.strip():
                yield LineRef(i, offset, len(raw), n), raw
            offset += len(raw)


def _head(raw: bytes, name: str, line: int) -> tuple[str, float] | BadLine:
    """The conversation id and the timestamp (seconds) of one line, or what is wrong with it."""
    m = _HEAD.match(raw.lstrip())
    if m is not None:
        try:
            cid, ts = m.group(1).decode("utf-8"), m.group(2).decode("utf-8")
        except UnicodeDecodeError:
            return BadLine(name, line, "not UTF-8")
        return _fields(cid, ts, name, line)
    data = _parse(raw, name, line)
    if isinstance(data, BadLine):
        return data
    return _fields(data.get("conversation_id"), data.get("timestamp"), name, line)


def _fields(cid: Any, ts: Any, name: str, line: int) -> tuple[str, float] | BadLine:
    if not isinstance(cid, str) or not cid:
        return BadLine(name, line, "conversation_id: missing or not a non-empty string")
    when = parse_timestamp(ts)
    if when is None:
        return BadLine(name, line, f"timestamp: {'missing' if ts is None else repr(ts)[:60]} is not an ISO-8601 "
                                   f"date and time")
    return cid, when


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an ISO-8601 string (no zone: UTC); None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def _parse(raw: bytes, name: str, line: int) -> dict[str, Any] | BadLine:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadLine(name, line, f"not UTF-8 (bad byte at column {exc.start + 1})")
    try:
        data = strict_json.loads(text)
    except strict_json.JSONValueError as exc:
        return BadLine(name, line, str(exc))
    except json.JSONDecodeError as exc:
        return BadLine(name, line, f"not valid JSON: {exc.msg} at column {exc.colno}")
    if not isinstance(data, dict):
        return BadLine(name, line, f"a log line holds a JSON object, got {type(data).__name__}")
    return data


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    """One line, parsed and checked: the request and the optional fields (docs/logs.md)."""
    request: dict[str, Any]
    template: str | None
    client: str | None
    provider: str | None
    response: Any = None   # the reply as logged (a Responses API response resolves later previous_response_ids)


def parse_line(raw: bytes, cid: str, name: str, line: int) -> LoggedRequest | BadLine:
    """A line read back for analysis: the whole line parsed, its fields checked."""
    data = _parse(raw, name, line)
    if isinstance(data, BadLine):
        return data
    if data.get("conversation_id") != cid:
        return BadLine(name, line, "conversation_id: given more than once, with different values")
    req = data.get("request")
    if not isinstance(req, dict):
        got = "missing" if req is None else f"a {type(req).__name__}"
        return BadLine(name, line, f"request: must be an OpenAI or Anthropic request object, got {got}")
    extra: dict[str, str | None] = {}
    for key in OPTIONAL_FIELDS:
        v = data.get(key)
        if v is not None and (not isinstance(v, str) or not v):
            return BadLine(name, line, f"{key}: must be a non-empty string, got {json.dumps(v)[:60]}")
        extra[key] = v
    return LoggedRequest(req, extra["template"], extra["client"], extra["provider"], data.get("response"))


def read_lines(paths: Sequence[str], refs: Sequence[LineRef]) -> list[bytes]:
    """The bytes of each line, read back from the offsets the index found (files opened once)."""
    out: list[bytes] = []
    handles: dict[int, Any] = {}
    try:
        for r in refs:
            f = handles.get(r.file)
            if f is None:
                try:
                    f = handles[r.file] = open(paths[r.file], "rb")
                except OSError as exc:
                    raise LogFileError(f"cannot read {paths[r.file]}: {exc.strerror}",
                                       hint="with a Ray cluster, every worker must see the log files at the "
                                            "same path (shared storage)") from None
            f.seek(r.offset)
            out.append(f.read(r.length))
    finally:
        for f in handles.values():
            f.close()
    return out
