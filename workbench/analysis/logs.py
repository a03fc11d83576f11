"""Request logs (SPEC 7.1, docs/logs.md): JSON lines, one model call per line, grouped into sessions.

Files may be many and large, so they are read in two passes that never hold parsed requests in
the driver. `index_logs` streams every file once and keeps, per conversation, where each line lies
(file, byte offset, length, line number) and its timestamp: a few numbers a line. The analysis
(aggregate.py) reads a session's lines back from those offsets (`read_lines`), in whichever
process analyses it, and parses them there (`parse_line`).

`LogTail` follows one log as it grows (`workbench app --follow`, `Workbench.follow`): it keeps
the byte offset it has read to and reads only the bytes added since, line by line (below).

The index pass reads only the two fields it groups by. Where a line starts with them, as the
writers we know do (`{"conversation_id": "...", "timestamp": "...", ...`), they are taken from the
bytes without parsing the rest; any other line is parsed whole. The worker parses every line fully
and checks that it names the conversation it was grouped under (a later duplicate key wins in
JSON), so the shortcut cannot misfile a line unnoticed.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import stat
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .. import strict_json
from ..errors import LogFileError
from ..files import open_user_file

# The two grouping fields at the start of a line, as plain strings (no escapes: those go the slow way).
_HEAD = re.compile(rb'\{\s*"conversation_id"\s*:\s*"([^"\\]*)"\s*,\s*"timestamp"\s*:\s*"([^"\\]*)"\s*[,}]')
OPTIONAL_FIELDS = ("template", "client", "provider", "model")   # optional strings; latency_ms is a number


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


KEPT_BAD_LINES = 100   # bad lines kept to be listed (with their file and line); all of them are counted


@dataclass
class BadLines:
    """Lines that are not logged requests, in bounded memory whatever their number: every one
    counted; the first KEPT_BAD_LINES by file name and line kept to list; and the first of each
    file, so that --strict can raise the first in the order the files were given."""
    count: int = 0
    kept: list[BadLine] = field(default_factory=list)       # sorted by (file, line)
    first: dict[str, BadLine] = field(default_factory=dict)

    def add(self, b: BadLine) -> None:
        self.count += 1
        key = (b.file, b.line)
        if len(self.kept) < KEPT_BAD_LINES or key < (self.kept[-1].file, self.kept[-1].line):
            bisect.insort(self.kept, b, key=lambda x: (x.file, x.line))
            del self.kept[KEPT_BAD_LINES:]
        f = self.first.get(b.file)
        if f is None or b.line < f.line:
            self.first[b.file] = b

    def extend(self, items: Iterable[BadLine]) -> None:
        for b in items:
            self.add(b)

    def merge(self, other: "BadLines") -> None:
        """Add another count's lines (a batch's, the index's): the same as adding each of them."""
        extra = other.count - len(other.kept)
        self.extend(other.kept)
        for b in other.first.values():   # the first of a file may lie past the other's kept ones
            f = self.first.get(b.file)
            if f is None or b.line < f.line:
                self.first[b.file] = b
        self.count += extra

    def earliest(self, names: Sequence[str]) -> BadLine | None:
        """The first bad line in the order the files were `names`d, then by line."""
        rank = {n: i for i, n in enumerate(names)}
        return min(self.first.values(), key=lambda b: (rank.get(b.file, 0), b.line), default=None)

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def to_wire(self) -> list[Any]:
        return [self.count, [[b.file, b.line, b.problem] for b in self.kept],
                [[b.file, b.line, b.problem] for b in self.first.values()]]

    @classmethod
    def from_wire(cls, d: list[Any]) -> "BadLines":
        count, kept, first = d
        return cls(count, [BadLine(*b) for b in kept], {f: BadLine(f, n, p) for f, n, p in first})


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
    bad: BadLines = field(default_factory=BadLines)     # counted; memory bounded, not by their number
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
            head = _head(raw, name, ref.line) if isinstance(raw, bytes) else raw
            if isinstance(head, BadLine):
                if strict:
                    raise head.error()
                index.bad.add(head)
                continue
            index.add(head[0], head[1], ref)
    return index


def open_log(path: str, name: str) -> Any:
    """A log opened for reading: a regular file only (files.py), so a FIFO or a device named as a
    log is an error, not a read that never ends."""
    return open_user_file(path, what="request log", error=LogFileError, name=name)


def _lines(path: str, name: str, i: int) -> Iterator[tuple[LineRef, bytes | BadLine]]:
    """Each non-blank line with where it lies; a line longer than MAX_LINE_BYTES is a BadLine,
    skipped to its end without being held (a file with no newline at all is one such line)."""
    with open_log(path, name) as f:
        offset, n = 0, 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            n += 1
            start, length = offset, len(raw)
            if length > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):     # the rest of the line, a chunk at a time
                    raw = f.readline(READ_CHUNK)
                    length += len(raw)
                yield LineRef(i, start, length, n), BadLine(name, n, f"line longer than {MAX_LINE_BYTES:,} bytes: "
                                                                     "skipped")
            elif raw.strip():
                yield LineRef(i, start, length, n), raw
            offset += length


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
    unrecorded = data.get("unrecorded")
    if "conversation_id" not in data and isinstance(unrecorded, dict):
        # `workbench record`'s line for a call it could not read (capture/record.py): its reason, not
        # a missing conversation_id, is what a reader needs to see.
        reason = unrecorded.get("reason")
        said = reason[:200] if isinstance(reason, str) and reason else "no reason given"
        return BadLine(name, line, f"a call the recorder could not read: {said}")
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
    model: str | None = None          # the model the call named, as logged
    latency_ms: float | None = None   # how long the call took, as logged
    timestamp: str | None = None      # as logged (reconciliation reports it, and measures gaps with `when`)
    when: float | None = None         # the timestamp in seconds since the epoch


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
    latency = data.get("latency_ms")
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, int | float) or latency < 0):
        return BadLine(name, line, f"latency_ms: must be a number of milliseconds >= 0, got {json.dumps(latency)[:60]}")
    ts = data.get("timestamp")
    return LoggedRequest(req, extra["template"], extra["client"], extra["provider"], data.get("response"),
                         extra["model"], float(latency) if latency is not None else None,
                         ts if isinstance(ts, str) else None, parse_timestamp(ts))


def read_lines(paths: Sequence[str], refs: Sequence[LineRef]) -> list[bytes]:
    """The bytes of each line, read back from the offsets the index found (files opened once)."""
    out: list[bytes] = []
    handles: dict[int, Any] = {}
    try:
        for r in refs:
            f = handles.get(r.file)
            if f is None:
                try:
                    f = handles[r.file] = open_log(paths[r.file], paths[r.file])
                except LogFileError as exc:
                    raise LogFileError(exc.message, hint="with a Ray cluster, every worker must see the log files "
                                                         "at the same path (shared storage)") from None
            f.seek(r.offset)
            out.append(f.read(r.length))
    finally:
        for f in handles.values():
            f.close()
    return out


# ---------------------------------------------------------------------------------- usage as logged
# The usage counts a provider or engine reports, by the names each gives them (flattened: a nested
# object's fields as `parent.child`). Only numbers are kept: this is what the provider said, shown
# beside the workbench's own figures, never mixed into them.
_PROMPT = ("prompt_tokens", "input_tokens")                                   # OpenAI, Responses / Anthropic
_CACHED = ("prompt_tokens_details.cached_tokens", "input_tokens_details.cached_tokens", "cache_read_input_tokens")
_WRITTEN = ("cache_creation_input_tokens",)
_OUTPUT = ("completion_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class ReportedUsage:
    """`response.usage` of a logged call, as the provider reported it. `fields`: every numeric field,
    flattened (`prompt_tokens_details.cached_tokens`), in the order given; the named figures are
    those fields under the names the providers use (None where the usage has none of them).
    `prompt_tokens` is the provider's own input figure: OpenAI's counts the cached tokens in it,
    Anthropic's `input_tokens` does not (its cache reads and writes are apart)."""
    fields: tuple[tuple[str, float], ...]
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"fields": dict(self.fields), "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                "cache_write_tokens": self.cache_write_tokens, "output_tokens": self.output_tokens}


def reported_usage(response: Any) -> ReportedUsage | None:
    """The usage a logged `response` carries (`response.usage`), or None when it has none."""
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    fields: list[tuple[str, float]] = []

    def walk(obj: dict[str, Any], prefix: str, depth: int) -> None:
        for k, v in obj.items():
            if isinstance(v, bool):
                continue
            if isinstance(v, int | float):
                fields.append((prefix + str(k), v))
            elif isinstance(v, dict) and depth < 3:
                walk(v, f"{prefix}{k}.", depth + 1)

    walk(usage, "", 0)
    if not fields:
        return None
    got = dict(fields)

    def first(names: tuple[str, ...]) -> int | None:
        v = next((got[n] for n in names if n in got), None)
        return int(v) if v is not None else None

    return ReportedUsage(tuple(fields), first(_PROMPT), first(_CACHED), first(_WRITTEN), first(_OUTPUT))


# ------------------------------------------------------------------------- following a growing log
MAX_LINE_BYTES = 64 << 20   # a line still unfinished past this is skipped to its newline (one bad line), not held
READ_CHUNK = 1 << 20
HELD_ROTATED = 8            # rotated files kept open, so their lines can be read back; older ones are let go


@dataclass(frozen=True, slots=True)
class TailRef:
    """Where a line a LogTail read lies: the file (`handle`: 0 the first opened, one more per
    rotation or truncation), the byte offset and length, and the line number in that file."""
    handle: int
    offset: int
    length: int
    line: int


@dataclass(frozen=True, slots=True)
class TailLine:
    """One good line: its conversation, its timestamp (seconds since the epoch), where it lies, and
    the line parsed and checked (`parse_line`)."""
    conversation_id: str
    when: float
    ref: TailRef
    file: str              # the file's name in diagnostics (LogTail.name, and which rotation)
    logged: LoggedRequest


@dataclass(frozen=True, slots=True)
class TailBatch:
    """What one `LogTail.poll` read: the good lines, the bad ones, and what happened to the file."""
    lines: tuple[TailLine, ...] = ()
    bad: tuple[BadLine, ...] = ()
    events: tuple[str, ...] = ()      # "LOG was rotated: following the new file", "LOG was truncated: ..."
    more: bool = False                # stopped at max_bytes with more to read: poll again


class LogTail:
    """One request log followed as it grows. `poll()` reads the bytes added since the last call
    (never the whole file again): complete lines are parsed and checked (`parse_line`), a last line
    with no newline yet waits for a later poll, a bad line is returned as a BadLine and reading goes
    on. Cheap when nothing changed: an fstat of the open file and a stat of the path.

    Rotation (the writer renames LOG to LOG.1 and starts a new LOG: capture/log_writer.py): the
    path then names another file. The old file, still open here, is read to its end first, then
    the new one from its start. Only the given path is ever opened; the rotated file is read through
    the descriptor opened as LOG, and kept open (the last HELD_ROTATED of them) so that `read` can
    read its lines back. A file truncated in place starts over from 0; its earlier lines are gone.

    Thread-safe between one poller and any number of `read` callers."""

    def __init__(self, path: str | os.PathLike[str], *, max_line_bytes: int = MAX_LINE_BYTES,
                 held_rotated: int = HELD_ROTATED):
        self.name = os.fspath(path)
        self.path = os.path.abspath(self.name)
        self.max_line_bytes = max_line_bytes
        self.held_rotated = held_rotated
        self._lock = threading.Lock()            # the descriptors, between poll() and read()
        self._fds: dict[int, int] = {}           # handle -> descriptor: the current file and the held rotated ones
        self._held: deque[int] = deque()         # rotated handles still open, oldest first
        self._handle = -1                        # the current file's handle; -1 before it is opened
        self._fd = -1
        self._id: tuple[int, int] | None = None  # (st_dev, st_ino) of the current file
        self._file = self.name                   # the current file's name in diagnostics
        self._read = 0                           # bytes of the current file read
        self._start = 0                          # where the line being read starts (its bytes so far: _partial)
        self._partial = bytearray()
        self._skipping = False                   # inside a line over max_line_bytes, up to its newline
        self._line = 0                           # lines of the current file, complete or skipped
        self.rotations = 0
        self.truncations = 0
        self.waiting = True                      # the file does not exist (yet)

    # reading -------------------------------------------------------------------------------------
    def poll(self, max_bytes: int = 64 << 20) -> TailBatch:
        """The lines added since the last poll (up to about `max_bytes` of them; `more` says when
        there are more). A file that cannot be read raises LogFileError; a missing one is waited for."""
        lines: list[TailLine] = []
        bad: list[BadLine] = []
        events: list[str] = []
        if self._fd < 0 and not self._open():
            return TailBatch(events=tuple(events))
        done = self._drain(lines, bad, events, max_bytes)
        if done >= max_bytes:
            return TailBatch(tuple(lines), tuple(bad), tuple(events), more=True)
        try:
            st: os.stat_result | None = os.stat(self.path)
        except FileNotFoundError:
            st = None          # renamed, the new file not made yet: the old one is still read
        except OSError as exc:
            raise LogFileError(f"cannot read {self.name}: {exc.strerror}", hint="check the path") from None
        if st is not None and (st.st_dev, st.st_ino) != self._id:
            # Rotated: the rest of the old file first (its writer wrote them before renaming it).
            self._drain(lines, bad, events, None)
            self._end_of_file(bad, "the file was rotated")
            self._retire()
            self.rotations += 1
            events.append(f"{self.name} was rotated: following the new file")
            if self._open():
                done = self._drain(lines, bad, events, max_bytes)
                return TailBatch(tuple(lines), tuple(bad), tuple(events), more=done >= max_bytes)
        return TailBatch(tuple(lines), tuple(bad), tuple(events))

    def read(self, ref: TailRef) -> bytes:
        """The bytes of a line `poll` returned, read back from its file (a rotated one included)."""
        with self._lock:
            fd = self._fds.get(ref.handle)
            if fd is None:
                raise LogFileError(f"{self.name}: line {ref.line} of an earlier file is no longer held: that file "
                                   "was truncated, or rotated away more than "
                                   f"{self.held_rotated} rotations ago", hint="open a conversation logged since")
            data = os.pread(fd, ref.length, ref.offset)
        if len(data) != ref.length:
            raise LogFileError(f"{self.name}: line {ref.line} is no longer there (the file shrank)")
        return data

    def close(self) -> None:
        with self._lock:
            for fd in set(self._fds.values()) | ({self._fd} if self._fd >= 0 else set()):
                os.close(fd)
            self._fds.clear()
            self._held.clear()
            self._fd = -1

    def __enter__(self) -> "LogTail":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the current file ----------------------------------------------------------------------------
    def _open(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.waiting = True              # a state, not an event: `waiting` says it while it lasts
            return False
        except OSError as exc:
            raise LogFileError(f"cannot read {self.name}: {exc.strerror}", hint="check the path") from None
        if not stat.S_ISREG(st.st_mode):
            # A FIFO or a device would block or never end: a log is a plain file.
            raise LogFileError(f"{self.name} is not a plain file", hint="follow a JSON-lines log file")
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            self.waiting = True
            return False
        except OSError as exc:
            raise LogFileError(f"cannot read {self.name}: {exc.strerror}", hint="check the permissions") from None
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):    # replaced between the stat and the open
            os.close(fd)
            raise LogFileError(f"{self.name} is not a plain file", hint="follow a JSON-lines log file")
        self._new_handle(fd, (fst.st_dev, fst.st_ino))
        self.waiting = False
        return True

    def _new_handle(self, fd: int, ident: tuple[int, int]) -> None:
        with self._lock:
            self._handle += 1
            self._fds[self._handle] = fd
        self._fd, self._id = fd, ident
        self._file = self.name if self._handle == 0 else f"{self.name} (file {self._handle + 1})"
        self._read = self._start = self._line = 0
        self._partial.clear()
        self._skipping = False

    def _retire(self) -> None:
        """The current file was rotated: held open for `read`, the oldest held one let go."""
        with self._lock:
            self._held.append(self._handle)
            while len(self._held) > self.held_rotated:
                fd = self._fds.pop(self._held.popleft(), None)
                if fd is not None and fd not in self._fds.values():   # (a truncated file's handles share one)
                    os.close(fd)
        self._fd, self._id = -1, None

    def _drain(self, lines: list[TailLine], bad: list[BadLine], events: list[str], limit: int | None) -> int:
        """Read the current file's new bytes (up to `limit`); returns how many were read."""
        size = os.fstat(self._fd).st_size
        if size < self._read:
            # Truncated in place (copytruncate): its earlier lines are gone; read it from the start.
            self._end_of_file(bad, "the file was truncated")
            with self._lock:
                self._fds.pop(self._handle, None)    # its lines cannot be read back: the bytes are gone
            self._new_handle(self._fd, self._id or (0, 0))
            self.truncations += 1
            events.append(f"{self.name} was truncated: reading it from the start")
        todo = size - self._read if limit is None else min(size - self._read, limit)
        done = 0
        while done < todo:
            chunk = os.pread(self._fd, min(READ_CHUNK, todo - done), self._read)
            if not chunk:
                break
            base = self._read
            self._read += len(chunk)
            done += len(chunk)
            self._split(chunk, base, lines, bad)
        return done

    def _split(self, chunk: bytes, base: int, lines: list[TailLine], bad: list[BadLine]) -> None:
        """Cut the bytes read at file offset `base` into lines; the unfinished end waits in _partial."""
        at = 0
        while True:
            nl = chunk.find(b"\n", at)
            if nl < 0:
                if not self._skipping:
                    self._partial += chunk[at:]
                    if len(self._partial) > self.max_line_bytes:
                        self._line += 1
                        bad.append(BadLine(self._file, self._line, f"line longer than {self.max_line_bytes:,} "
                                                                   "bytes: skipped"))
                        self._partial.clear()
                        self._skipping = True
                return
            end = base + nl + 1
            if self._skipping:               # the end of a line already counted as too long
                self._skipping = False
            else:
                raw = bytes(self._partial) + chunk[at:nl + 1] if self._partial else chunk[at:nl + 1]
                self._partial.clear()
                self._line += 1
                if raw.strip():
                    self._take(raw, TailRef(self._handle, self._start, end - self._start, self._line), lines, bad)
            self._start = end
            at = nl + 1

    def _take(self, raw: bytes, ref: TailRef, lines: list[TailLine], bad: list[BadLine]) -> None:
        head = _head(raw, self._file, ref.line)
        if isinstance(head, BadLine):
            bad.append(head)
            return
        logged = parse_line(raw, head[0], self._file, ref.line)
        if isinstance(logged, BadLine):
            bad.append(logged)
            return
        lines.append(TailLine(head[0], head[1], ref, self._file, logged))

    def _end_of_file(self, bad: list[BadLine], why: str) -> None:
        """No more bytes will come to the current file: an unfinished last line is a bad line."""
        if self._partial.strip():
            self._line += 1
            bad.append(BadLine(self._file, self._line, f"incomplete last line (no newline) when {why}"))
        self._partial.clear()
        self._skipping = False
