"""An editable session file, for the workbench's message editor (no UI library here).

`SessionDocument` holds the session file's JSON object and applies the editor's operations to it:
set a field of a message, insert, delete, move. A conversation file is edited as one list of
messages (its turns are the requests a client would send: SPEC 7.1); a log of requests is edited
one request at a time. Every operation says which turns it changed (`Edit.first_turn`), so a
host re-assembles only those.

Saving is atomic (a temporary file in the same folder, flushed, then renamed over the target):
a crash leaves the old file or the new one, never half of one. `Autosave` keeps the edits of each
session under WORKBENCH_HOME so that a reloaded page finds them again.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SessionFileError, WorkbenchError
from ..home import workbench_home
from ..intake import detect_format
from ..sessions import SessionFile, parse_session

ROLES = ("system", "user", "assistant", "tool", "developer")
TEXT_FIELDS = ("role", "tool_call_id", "name")   # plain strings
JSON_FIELDS = ("tool_calls",)                      # edited as JSON text, checked here


class EditError(WorkbenchError):
    """An editor operation that cannot apply: names the message and field, and what to write."""


@dataclass(frozen=True)
class Edit:
    first_turn: int      # the first turn (from 1) whose request changed
    structural: bool     # messages added, removed, moved or re-roled: turns may be renumbered


def atomic_write(path: str | Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a torn one."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise SessionFileError(f"cannot write {p}: {exc.strerror}", hint="choose a folder you can write to") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise SessionFileError(f"cannot write {p}: {exc.strerror}", hint="check the disk and permissions") from None


def parse_json_field(text: str, where: str) -> Any:
    """JSON typed into an editor box, or an EditError naming the box, line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise EditError(f"{where}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                        hint="fix the JSON there") from None


class SessionDocument:
    """A session file being edited. `data` is the JSON object; `path` where it was loaded from."""

    def __init__(self, data: dict, path: str | None = None, name: str | None = None):
        self.file: SessionFile = parse_session(data, path)   # checks the shape once, up front
        self.data = data
        self.path = path
        self.name = name or (Path(path).name if path else "session.json")
        self.is_log = "requests" in data
        self.format = self.file.format
        self._cuts: list[int] | None = None   # conversation: how many messages each turn's request holds
        self.dirty = False

    @classmethod
    def load(cls, path: str | Path) -> "SessionDocument":
        from ..sessions import load_session
        f = load_session(path)
        return cls(copy.deepcopy(f.raw), str(path))

    @classmethod
    def from_text(cls, text: str, name: str = "session.json") -> "SessionDocument":
        """A document from JSON text (an upload): errors name the line and column."""
        data = parse_json_field(text, name)
        if not isinstance(data, dict):
            raise SessionFileError(f"{name}: a session file holds a JSON object, got {type(data).__name__}")
        return cls(data, None, name)

    # turns ----------------------------------------------------------------------------------------
    @property
    def turn_count(self) -> int:
        return len(self.data["requests"]) if self.is_log else len(self._turn_cuts())

    def _turn_cuts(self) -> list[int]:
        if self._cuts is None:
            msgs = self.data.get("messages")
            if not isinstance(msgs, list):
                self._cuts = [0]
            else:
                cuts = [i for i, m in enumerate(msgs) if i > 0 and isinstance(m, dict) and m.get("role") == "assistant"]
                if not cuts or cuts[-1] != len(msgs):
                    cuts.append(len(msgs))
                self._cuts = cuts
        return self._cuts

    def turn_of(self, index: int) -> int:
        """The first turn whose request holds message `index` of the edited list (conversations)."""
        for k, cut in enumerate(self._turn_cuts(), start=1):
            if index < cut:
                return k
        return self.turn_count

    def request(self, turn: int) -> dict:
        """Turn `turn`'s request (from 1), in the file's format, as a client would send it."""
        if not 1 <= turn <= self.turn_count:
            raise EditError(f"turn {turn} does not exist: the session has {self.turn_count} turns")
        if self.is_log:
            req = self.data["requests"][turn - 1]
            return {**req} if "format" in req else {"format": self.format, **req}
        base = {k: v for k, v in self.data.items() if k not in ("messages", "title", "description")}
        base.setdefault("format", self.format)
        msgs = self.data.get("messages")
        if isinstance(msgs, list):
            base["messages"] = msgs[:self._turn_cuts()[turn - 1]]
        return base

    def requests(self) -> list[dict]:
        return [self.request(k) for k in range(1, self.turn_count + 1)]

    # what the editor edits --------------------------------------------------------------------------
    def _target(self, turn: int) -> dict:
        """The object whose `messages` (and tools, variables, system) the editor changes."""
        return self.data["requests"][turn - 1] if self.is_log else self.data

    def messages(self, turn: int) -> list:
        msgs = self._target(turn).get("messages")
        return msgs if isinstance(msgs, list) else []

    def field(self, turn: int, name: str) -> Any:
        """A request-level field: tools, variables, system (Anthropic)."""
        return self._target(turn).get(name)

    def set_field(self, turn: int, name: str, value: Any) -> Edit:
        """Set (or, with None, remove) a request-level field."""
        target = self._target(turn)
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value
        self.dirty = True
        return Edit(turn if self.is_log else 1, False)

    def apply(self, op: dict, turn: int) -> Edit:
        """Apply one editor operation to the messages edited at `turn`:
        {"op": "set", "index": i, "field": "content"|"role"|"tool_calls"|"tool_call_id"|"name", "value": ...}
        {"op": "insert", "index": i, "message": {...}}   {"op": "delete", "index": i}
        {"op": "move", "index": i, "to": j}
        `content` and `tool_calls` may come as JSON text ({"json": true}); an empty value removes
        an optional field."""
        # Copy on write: the list and the edited message are new objects, so a request handed out
        # before (which an assembler Session compares the next one with) never changes under it.
        target = self._target(turn)
        msgs = list(target.get("messages") or [])
        kind = op.get("op")
        n = len(msgs)

        def index(key: str = "index", limit: int = n) -> int:
            i = op.get(key)
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < max(limit, 0):
                raise EditError(f"{kind}: {key} {i!r} is not a message of this list (0..{limit - 1})")
            return i

        if kind == "set":
            i, name, value = index(), op.get("field"), op.get("value")
            edit = self._set(msgs, i, name, value, bool(op.get("json")))
            first = i
        elif kind == "insert":
            i = index(limit=n + 1)
            m = op.get("message") or {"role": "user", "content": ""}
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                raise EditError(f"insert: a message needs a role ({', '.join(ROLES)})")
            msgs.insert(i, m)
            first, edit = i, True
        elif kind == "delete":
            first = index()
            del msgs[first]
            edit = True
        elif kind == "move":
            i, j = index(), index("to")
            msgs.insert(j, msgs.pop(i))
            first, edit = min(i, j), True
        else:
            raise EditError(f"unknown editor operation {kind!r}", hint="use set, insert, delete or move")
        target["messages"] = msgs
        self.dirty = True
        if edit:
            self._cuts = None
        if self.is_log:
            return Edit(turn, edit)
        return Edit(self.turn_of(first) if first < len(msgs) else self.turn_count, edit)

    def _set(self, msgs: list, i: int, name: Any, value: Any, as_json: bool) -> bool:
        where = f"messages[{i}].{name}"
        if not isinstance(msgs[i], dict):
            raise EditError(f"messages[{i}] is not an object", hint="delete it and add a new message")
        m = msgs[i] = dict(msgs[i])
        if name == "content":
            if as_json:
                value = parse_json_field(value, where) if isinstance(value, str) and value.strip() else None
                if value is not None and not isinstance(value, (str, list)):
                    raise EditError(f"{where}: content is a string or a list of blocks")
            m["content"] = value if value is not None else ""
            return False
        if name in TEXT_FIELDS:
            if not isinstance(value, str):
                raise EditError(f"{where}: expected text")
            if name == "role":
                if value not in ROLES:
                    raise EditError(f"{where}: unknown role {value!r}", hint=f"use one of {', '.join(ROLES)}")
                m["role"] = value
                return True      # an assistant message starts a turn
            if value:
                m[name] = value
            else:
                m.pop(name, None)
            return False
        if name in JSON_FIELDS:
            parsed = parse_json_field(value, where) if isinstance(value, str) and value.strip() else None
            if parsed is None or parsed == []:
                m.pop(name, None)
            elif not isinstance(parsed, list) or not all(isinstance(c, dict) for c in parsed):
                raise EditError(f"{where}: tool calls are a JSON list of objects",
                                hint='[{"id": "call_1", "type": "function", "function": {"name": ..., "arguments": "{}"}}]')
            else:
                m[name] = parsed
            return False
        raise EditError(f"{where}: cannot edit field {name!r}",
                        hint="edit content, role, tool_calls, tool_call_id or name")

    def snapshot(self) -> dict:
        """The data as it is now, safe to serialize on another thread while edits go on: edits
        replace message lists and messages (copy on write), so copying the containers they are
        stored in is enough."""
        if self.is_log:
            return {**self.data, "requests": [dict(r) for r in self.data["requests"]]}
        return dict(self.data)

    # files ----------------------------------------------------------------------------------------
    def to_text(self) -> str:
        return json.dumps(self.data, ensure_ascii=False, indent=1) + "\n"

    def save(self, path: str | Path | None = None) -> Path:
        """Write the document (atomically) to `path`, or where it came from."""
        target = Path(path) if path else Path(self.path) if self.path else None
        if target is None:
            raise SessionFileError("this session has no file yet", hint="give a path to save it to")
        parse_session(self.data, str(target))   # never write a file that would not load again
        atomic_write(target, self.to_text())
        self.path, self.name, self.dirty = str(target), target.name, False
        return target


def new_message(role: str, fmt: str) -> dict:
    """A blank message of `role` in the document's format (a tool result in Anthropic's form is a user
    message with a tool_result block)."""
    if fmt == "anthropic" and role == "tool":
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "", "content": ""}]}
    if role == "tool":
        return {"role": "tool", "tool_call_id": "", "content": ""}
    return {"role": role, "content": ""}


class Autosave:
    """Each session's edits, kept under WORKBENCH_HOME/autosave/ (one file per source session), so a
    reloaded page restores them. Written atomically; discarded when the user saves or reverts."""

    def __init__(self, home: Path | None = None):
        self.folder = (home or workbench_home()) / "autosave"

    def _file(self, source: str) -> Path:
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
        return self.folder / f"{Path(source).stem}-{digest}.json"

    def store(self, source: str, doc: SessionDocument | dict) -> Path:
        """Write the document (or a `snapshot()` of it: the write may run on another thread)."""
        f = self._file(source)
        data = doc.data if isinstance(doc, SessionDocument) else doc
        atomic_write(f, json.dumps({"source": source, "saved_at": time.time(), "document": data},
                                   ensure_ascii=False))
        return f

    def restore(self, source: str) -> tuple[SessionDocument, float] | None:
        """The autosaved document for `source` and when it was saved, or None. A damaged autosave is
        set aside (renamed .bad), never half-loaded."""
        f = self._file(source)
        if not f.exists():
            return None
        try:
            saved = json.loads(f.read_text("utf-8"))
            doc = SessionDocument(saved["document"], source)
            doc.dirty = True
            return doc, float(saved["saved_at"])
        except (OSError, ValueError, KeyError, TypeError, WorkbenchError):
            f.replace(f.with_suffix(".bad"))
            return None

    def discard(self, source: str) -> None:
        self._file(source).unlink(missing_ok=True)


def blank_session(fmt: str = "openai") -> SessionDocument:
    """A new conversation to start from."""
    data: dict[str, Any] = {"format": fmt, "title": "New session", "messages": [
        {"role": "user", "content": "Hello!"}]}
    if fmt == "openai":
        data["messages"].insert(0, {"role": "system", "content": "You are a helpful assistant."})
    else:
        data["system"] = "You are a helpful assistant."
    detect_format(data)
    return SessionDocument(data, None, "new_session.json")
