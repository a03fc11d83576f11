"""Session files (SPEC 7.1): a request, a conversation, or a log of requests -> turns.

A conversation's turns are the requests a client would send: turn k is every
message before the k-th assistant message, and the final request ends with the
last message. A log lists its requests explicitly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SessionFileError
from .intake import detect_format


@dataclass(frozen=True)
class SessionFile:
    path: str | None
    format: str
    title: str
    description: str
    turns: tuple[dict, ...]       # each a request in the file's format
    raw: dict

    def turn(self, n: int | None) -> dict:
        """Request for turn n (1-based); None = the last turn."""
        if n is None:
            return self.turns[-1]
        if not 1 <= n <= len(self.turns):
            raise SessionFileError(f"turn {n} does not exist: the session has {len(self.turns)} turns",
                                   hint=f"use --turn between 1 and {len(self.turns)}")
        return self.turns[n - 1]


def _is_assistant(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") == "assistant"


def conversation_turns(req: dict) -> list[dict]:
    msgs = req.get("messages")
    if not isinstance(msgs, list):
        return [req]
    base = {k: v for k, v in req.items() if k not in ("messages", "title", "description")}
    turns = []
    for i, m in enumerate(msgs):
        if _is_assistant(m) and i > 0:
            turns.append({**base, "messages": msgs[:i]})
    if not turns or len(turns[-1]["messages"]) != len(msgs):
        turns.append({**base, "messages": msgs})
    return turns


def parse_session(data: Any, path: str | None = None) -> SessionFile:
    if not isinstance(data, dict):
        raise SessionFileError(f"a session file holds a JSON object, got {type(data).__name__}")
    title = str(data.get("title") or (Path(path).stem if path else "session"))
    desc = str(data.get("description") or "")
    if "requests" in data:
        reqs = data["requests"]
        if not isinstance(reqs, list) or not reqs:
            raise SessionFileError("'requests' must be a non-empty list of requests")
        fmt = data.get("format") or detect_format(reqs[0])
        turns = []
        for i, r in enumerate(reqs):
            if not isinstance(r, dict):
                raise SessionFileError(f"requests[{i}] must be an object")
            turns.append({"format": fmt, **r} if "format" not in r else r)
        return SessionFile(path, fmt, title, desc, tuple(turns), data)
    fmt = detect_format(data)
    req = {k: v for k, v in data.items() if k not in ("title", "description")}
    req["format"] = fmt
    return SessionFile(path, fmt, title, desc, tuple(conversation_turns(req)), data)


def load_session(path: str | Path) -> SessionFile:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise SessionFileError(f"cannot read {p}: {exc.strerror}", hint="check the path") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SessionFileError(f"{p.name} is not UTF-8 (bad byte at offset {exc.start})",
                               hint="save the file as UTF-8") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SessionFileError(f"{p.name} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                               hint="fix the JSON syntax there") from None
    return parse_session(data, str(p))
