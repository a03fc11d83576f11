"""Session files (SPEC 7.1): a request, a conversation, or a log of requests -> turns.

A conversation's turns are the requests a client would send: turn k is every
message before the k-th assistant message, and the final request ends with the
last message. A log lists its requests explicitly.

Turns are built when asked for, not when the file loads: turn k of a conversation
holds k messages, so building every turn up front costs memory quadratic in the
length (a 100k-message file took about 20 GB). `SessionFile.turns` is a sequence
that keeps only where each turn ends and makes a turn's request on access.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, overload

from .errors import RequestError, SessionFileError
from .files import MiB, read_user_file
from .intake import detect_format
from .intake.chain import resolve_log
from .intake.detect import FORMATS
from .strict_json import JSONValueError, find_problem, loads, surrogate_problem

# A request (or a whole session file) as the JSON object it was read from, in its own format.
Request: TypeAlias = dict[str, Any]

# A session file is read and parsed whole: 100,000 messages of a few KB each fit many times over,
# and past this its parsed form alone would take gigabytes. Logs have no such cap: they are streamed.
MAX_SESSION_BYTES = 256 * MiB


class Turns(Sequence[Request]):
    """A session's requests, each built on access (see the module doc). Indexing, slicing (a list),
    len and iteration work as on the tuple this used to be; `map(fn)` gives the same turns with
    `fn` applied to each request as it is built, still lazily."""

    def __init__(self, count: int, build: Callable[[int], Request]):
        self._count = count
        self._build = build

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, k: int) -> Request: ...
    @overload
    def __getitem__(self, k: slice) -> list[Request]: ...

    def __getitem__(self, k: int | slice) -> Request | list[Request]:
        if isinstance(k, slice):
            return [self._build(i) for i in range(*k.indices(self._count))]
        if not isinstance(k, int):
            raise TypeError(f"turn indices must be integers or slices, not {type(k).__name__}")
        if k < 0:
            k += self._count
        if not 0 <= k < self._count:
            raise IndexError("turn index out of range")
        return self._build(k)

    def __iter__(self) -> Iterator[Request]:
        return (self._build(i) for i in range(self._count))

    def map(self, fn: Callable[[Request], Request]) -> "Turns":
        build = self._build
        return Turns(self._count, lambda i: fn(build(i)))

    def __repr__(self) -> str:
        return f"<{self._count} turns>"


@dataclass(frozen=True)
class SessionFile:
    path: str | None
    format: str
    title: str
    description: str
    turns: Turns                  # each a request in the file's format, built on access
    raw: Request

    def turn(self, n: int | None) -> Request:
        """Request for turn n (1-based); None = the last turn."""
        if n is None:
            return self.turns[-1]
        if not 1 <= n <= len(self.turns):
            raise SessionFileError(f"turn {n} does not exist: the session has {len(self.turns)} turns",
                                   hint=f"use --turn between 1 and {len(self.turns)}")
        return self.turns[n - 1]


def _is_assistant(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") == "assistant"


# Responses API items a model writes: a run of them is one model turn (its reasoning, its message,
# its calls), the way one assistant message is in Chat Completions.
_OUTPUT_ITEMS = frozenset(("reasoning", "function_call", "custom_tool_call"))


def is_output_item(item: Any) -> bool:
    """A Responses input item the model wrote (reasoning, a call, an assistant message)."""
    return isinstance(item, dict) and (item.get("type") in _OUTPUT_ITEMS or
                                       (item.get("type", "message") == "message" and item.get("role") == "assistant"))


def turn_ends(msgs: list[Any], key: str = "messages") -> "array[int]":
    """Where each turn's request ends in a conversation's list: its `messages` (a turn ends before
    each assistant message) or, with key "input", its Responses items (before each run of model
    output items); the last ends with the list. A compact array, not a copy of the list per turn.

        >>> list(turn_ends([{"role": "user"}, {"role": "assistant"}, {"role": "user"}]))
        [1, 3]
    """
    if key == "messages":
        ends = array("q", (i for i, m in enumerate(msgs) if i > 0 and _is_assistant(m)))
    else:
        ends = array("q", (i for i, m in enumerate(msgs) if i > 0 and is_output_item(m)
                           and not is_output_item(msgs[i - 1])))
    if not ends or ends[-1] != len(msgs):
        ends.append(len(msgs))
    return ends


def conversation_turns(req: Request) -> Turns:
    """The requests a client sends over a conversation: one per assistant message (a Responses
    request: per run of model output items), plus the last."""
    key = "messages" if "messages" in req else "input"
    msgs = req.get(key)
    if not isinstance(msgs, list):
        return Turns(1, lambda _: req)
    base = {k: v for k, v in req.items() if k not in (key, "title", "description")}
    ends = turn_ends(msgs, key)

    def build(k: int) -> Request:
        end = ends[k]
        return {**base, key: msgs if end == len(msgs) else msgs[:end]}

    return Turns(len(ends), build)


def _log_turns(reqs: list[Request], fmt: str) -> Turns:
    return Turns(len(reqs), lambda k: reqs[k] if "format" in reqs[k] else {"format": fmt, **reqs[k]})


def _text_field(data: Request, key: str, default: str) -> str:
    v = data.get(key)
    if v is None or v == "":
        return default
    if not isinstance(v, str):
        raise SessionFileError(f"{key}: must be a string, got {type(v).__name__}", hint=f'write "{key}": "..."')
    problem = surrogate_problem(v)
    if problem:
        raise SessionFileError(f"{key}: {problem}", hint="send UTF-8 text; pair or remove the surrogate")
    return v


def _check_options(data: Request) -> None:
    """Fields the workbench reads from the file itself; a wrong type is an error, not ignored."""
    cw = data.get("context_window")
    if cw is not None and (type(cw) is not int or cw <= 0):
        raise SessionFileError(f"context_window: must be a positive integer (tokens), got {cw!r}",
                               hint='write the number of tokens, e.g. "context_window": 8192')
    fmt = data.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise SessionFileError(f"format: unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")


def parse_session(data: Any, path: str | None = None) -> SessionFile:
    if not isinstance(data, dict):
        raise SessionFileError(f"a session file holds a JSON object, got {type(data).__name__}")
    # A value built in memory (not read by load_session) gets the same refusals as a file.
    problem = find_problem(data)
    if problem is not None:
        raise SessionFileError(f"{_name(path)}{problem.path or 'the session'}: {problem.message}", hint=problem.hint)
    return _parse(data, path)


def _name(path: str | None) -> str:
    return f"{Path(path).name}: " if path else ""


def _parse(data: Request, path: str | None) -> SessionFile:
    try:
        return _shape(data, path)
    except SessionFileError as exc:
        if path is None:
            raise
        raise SessionFileError(_name(path) + exc.message, hint=exc.hint) from None


def _shape(data: Request, path: str | None) -> SessionFile:
    title = _text_field(data, "title", Path(path).stem if path else "session")
    desc = _text_field(data, "description", "")
    _check_options(data)
    if "requests" in data:
        reqs = data["requests"]
        if not isinstance(reqs, list) or not reqs:
            raise SessionFileError("'requests' must be a non-empty list of requests")
        for i, r in enumerate(reqs):
            if not isinstance(r, dict):
                raise SessionFileError(f"requests[{i}] must be an object, got {type(r).__name__}")
        try:
            reqs = resolve_log(reqs)   # Responses requests that continue a logged response
        except RequestError as exc:
            raise SessionFileError(exc.message, hint=exc.hint) from None
        fmt = data.get("format") or detect_format(reqs[0])
        return SessionFile(path, fmt, title, desc, _log_turns(reqs, fmt), data)
    fmt = detect_format(data)
    req = {k: v for k, v in data.items() if k not in ("title", "description")}
    req["format"] = fmt
    return SessionFile(path, fmt, title, desc, conversation_turns(req), data)


def load_session(path: str | Path, *, max_bytes: int = MAX_SESSION_BYTES) -> SessionFile:
    """A session file, read whole (files.py: a regular file of at most `max_bytes`)."""
    p = Path(path)
    raw = read_user_file(p, cap=max_bytes, what="session file", error=SessionFileError, raise_hint=(
        "a conversation this long is a request log's work: write it as JSON lines (docs/logs.md), which "
        "`workbench analyze LOG --aggregate` reads streaming; from Python, load_session(path, max_bytes=N)"))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SessionFileError(f"{p.name} is not UTF-8 (bad byte at offset {exc.start})",
                               hint="save the file as UTF-8") from None
    try:
        data = loads(text)
    except JSONValueError as exc:
        raise SessionFileError(f"{p.name}: {exc}", hint=exc.hint or None) from None
    except json.JSONDecodeError as exc:
        raise SessionFileError(f"{p.name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                               hint="fix the JSON syntax there") from None
    if not isinstance(data, dict):
        raise SessionFileError(f"a session file holds a JSON object, got {type(data).__name__}",
                               hint="a session is a request, a conversation or a log of requests")
    return _parse(data, str(p))
