"""An editable session file, for the workbench's message editor (no UI library here).

`SessionDocument` holds the session file's JSON object and applies the editor's operations to it:
set a field of a message, insert, delete, move. A conversation file is edited as one list of
messages (its turns are the requests a client would send: SPEC 7.1); a log of requests is edited
one request at a time. A Responses API request is edited as its instructions and input items, each
in its own shape (responses_items.py). Every operation says which turns it changed
(`Edit.first_turn`), so a host re-assembles only those.

Saving is atomic and durable (a temporary file in the same folder, written and fsynced, renamed over
the target, then the folder fsynced): a crash leaves the old file or the new one, never half of one,
and a save that returned survives a power cut. The replaced file keeps its mode. A crash mid-save
leaves the temporary file behind; its name says which machine, process and run wrote it, so that
`sweep_temp_files` (run when the app starts) removes exactly the stale ones and nothing else.
`Autosave` keeps the edits of each session under WORKBENCH_HOME so that a reloaded page finds them
again.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EditError, SessionFileError, WorkbenchError
from ..home import workbench_home
from ..intake.chain import resolve_log
from ..sessions import SessionFile, parse_session, turn_ends
from . import responses_items
from .content_parts import has_media, set_part_text, with_text
from .editor_input import op_index, parse_json_field

ROLES = ("system", "user", "assistant", "tool", "developer")
TEXT_FIELDS = ("role", "tool_call_id", "name")   # plain strings
JSON_FIELDS = ("tool_calls",)                      # edited as JSON text, checked here


@dataclass(frozen=True)
class Edit:
    first_turn: int      # the first turn (from 1) whose request changed
    structural: bool     # messages added, removed, moved or re-roled: turns may be renumbered


# Temporary files: ".{name}.{host}-{pid}-{run}-{random}.{kind}". The host is a digest of the machine's
# name (a folder may be shared between machines), `run` is random per process (in a container the
# app often gets the same pid at every start, so a pid alone cannot tell a dead writer from a live one).
_HOST = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
_RUN = secrets.token_hex(4)
_TEMP_RE = re.compile(r"\.(?P<stem>.+)\.(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]{1,10})-(?P<run>[0-9a-f]{8})-[0-9a-f]{8}"
                      r"\.(?P<kind>wbtmp|wbexport)", re.S)
STALE_AFTER_S = 3600.0    # no save or export takes an hour: older temporary files are left by a crash
NEW_FILE_MODE = 0o600     # a new autosave is private (the app's own record); a replaced file keeps its mode


def umask_mode() -> int:
    """The mode a plain new file gets here (0o666 less the umask), as an editor's save would give it."""
    try:    # Linux says it without changing it (os.umask sets it, process-wide, for a moment)
        with open("/proc/self/status", encoding="ascii") as f:
            mask = next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask
TEMP_STEM_BYTES = 96      # the target's name in its temporary file's, cut so that the whole stays under 255 bytes


def temp_name(name: str, kind: str = "wbtmp") -> str:
    """A temporary name for `name` in the same folder (kind: "wbtmp" a file being saved, "wbexport" a
    bundle being exported), in the pattern `sweep_temp_files` recognizes."""
    stem = name.encode("utf-8", "surrogatepass")[:TEMP_STEM_BYTES].decode("utf-8", "ignore") or "file"
    return f".{stem}.{_HOST}-{os.getpid()}-{_RUN}-{secrets.token_hex(4)}.{kind}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True     # someone else's process (or a pid we cannot ask about): assume it is alive
    return True


def is_stale_temp(name: str, mtime: float, now: float | None = None) -> bool:
    """Whether `name` is one of our temporary files whose writer is gone: this machine's, from a
    process no longer running or an earlier run of a reused pid; any machine's, once older than
    STALE_AFTER_S. A name outside the pattern is never stale: it is not ours."""
    m = _TEMP_RE.fullmatch(name)
    if m is None:
        return False
    if (time.time() if now is None else now) - mtime > STALE_AFTER_S:
        return True
    if m["host"] != _HOST:
        return False    # another machine's writer may be alive: only age tells
    pid = int(m["pid"])
    if pid == os.getpid():
        return m["run"] != _RUN    # our pid, an earlier run's file (pid reused after a restart)
    return not _pid_alive(pid)


def sweep_temp_files(folder: str | Path) -> list[Path]:
    """Remove the stale temporary files (and export folders) that a crashed save left in `folder`
    (not below it); returns what was removed. Anything else, ours still in use included, stays."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed      # no folder yet: nothing to clean
    for e in entries:
        if not e.name.startswith("."):
            continue
        try:
            st = e.stat(follow_symlinks=False)
            if not is_stale_temp(e.name, st.st_mtime):
                continue
            kind = e.name.rsplit(".", 1)[-1]
            if kind == "wbtmp" and stat.S_ISREG(st.st_mode):
                os.unlink(e.path)
            elif kind == "wbexport" and stat.S_ISDIR(st.st_mode):
                shutil.rmtree(e.path)
            else:
                continue    # the pattern, but not what we create (a link, a folder named like a file): leave it
        except OSError:
            continue        # gone meanwhile, or not ours to remove: the next start tries again
        removed.append(Path(e.path))
    return removed


def _fsync_folder(dir_fd: int) -> None:
    try:
        os.fsync(dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise       # some filesystems cannot sync a folder: the rename is as durable as they allow


def atomic_write(path: str | Path, text: str | bytes, *, make_folder: bool = True,
                 new_mode: int = NEW_FILE_MODE) -> None:
    """Write `text` (str: as UTF-8) to `path` so that readers see the old file or the new one, never a torn one, and
    the new one survives a crash once this returns. An existing file keeps its mode (and owner,
    where allowed); a link or a folder at `path` is refused, never followed or replaced.
    `make_folder`: create the folder (and its parents) if missing; `new_mode`: a new file's mode
    (set on the temporary file before the rename, which is created 0600)."""
    p = Path(path)
    try:
        if make_folder:
            p.parent.mkdir(parents=True, exist_ok=True)
        dir_fd = os.open(p.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (OSError, ValueError) as exc:
        raise SessionFileError(f"cannot write {p}: {getattr(exc, 'strerror', None) or exc}",
                               hint="choose a folder you can write to") from None
    try:
        _write_in(dir_fd, p, text, new_mode)
    finally:
        os.close(dir_fd)


def _write_in(dir_fd: int, p: Path, text: str | bytes, new_mode: int) -> None:
    name = p.name
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    except (OSError, ValueError) as exc:
        raise SessionFileError(f"cannot write {p}: {getattr(exc, 'strerror', None) or exc}") from None
    if old is not None and not stat.S_ISREG(old.st_mode):
        raise SessionFileError(f"cannot write {p}: it is not a plain file (a folder or a link)",
                               hint="choose another name")
    tmp = temp_name(name)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, NEW_FILE_MODE,
                     dir_fd=dir_fd)
    except (OSError, ValueError) as exc:
        raise SessionFileError(f"cannot write {p}: {getattr(exc, 'strerror', None) or exc}",
                               hint="choose a folder you can write to") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
            f.flush()
            # The replaced file's mode, not the temporary file's 0600 or the umask's: a save must not
            # change who may read the file.
            os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode) if old is not None else new_mode)
            if old is not None and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(f.fileno(), old.st_uid, old.st_gid)
                except OSError:
                    pass    # only root may give a file away: the new file is ours, as any save makes it
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        if isinstance(exc, (OSError, ValueError)):   # ValueError: text that is not valid Unicode
            raise SessionFileError(f"cannot write {p}: {getattr(exc, 'strerror', None) or exc}",
                                   hint="check the disk and permissions") from None
        raise
    # The rename is an entry in the folder: until the folder is on disk, a crash may bring the old file back.
    try:
        _fsync_folder(dir_fd)
    except OSError as exc:
        raise SessionFileError(f"saved {p}, but the folder could not be synced: {exc.strerror}",
                               hint="check the disk") from None


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

    @property
    def _key(self) -> str:
        """The list a conversation's turns are cut from: its messages, or its Responses input items."""
        return "input" if self.format == "responses" else "messages"

    def _turn_cuts(self) -> list[int]:
        if self._cuts is None:
            msgs = self.data.get(self._key)
            self._cuts = list(turn_ends(msgs, self._key)) if isinstance(msgs, list) else [0]
        return self._cuts

    def turn_of(self, index: int) -> int:
        """The first turn whose request holds message (Responses: input item) `index` of the edited
        list (conversations)."""
        for k, cut in enumerate(self._turn_cuts(), start=1):
            if index < cut:
                return k
        return self.turn_count

    def request(self, turn: int) -> dict:
        """Turn `turn`'s request (from 1), in the file's format, as a client would send it (a log's
        Responses request that continues a logged response: with its chain spelled out)."""
        if not 1 <= turn <= self.turn_count:
            raise EditError(f"turn {turn} does not exist: the session has {self.turn_count} turns")
        if self.is_log:
            req = resolve_log(self.data["requests"][:turn])[-1]
            return {**req} if "format" in req else {"format": self.format, **req}
        key = self._key
        base = {k: v for k, v in self.data.items() if k not in (key, "title", "description")}
        base.setdefault("format", self.format)
        msgs = self.data.get(key)
        if isinstance(msgs, list):
            base[key] = msgs[:self._turn_cuts()[turn - 1]]
        elif key in self.data:
            base[key] = msgs            # a Responses input given as a string: one turn
        return base

    def requests(self) -> list[dict]:
        return [self.request(k) for k in range(1, self.turn_count + 1)]

    # what the editor edits --------------------------------------------------------------------------
    def _target(self, turn: int) -> dict:
        """The object whose `messages` (and tools, variables, system) the editor changes."""
        return self.data["requests"][turn - 1] if self.is_log else self.data

    def format_of(self, turn: int) -> str:
        """The format of the request edited at `turn` (a log's request may name its own)."""
        fmt = self._target(turn).get("format") if self.is_log else None
        return fmt if isinstance(fmt, str) else self.format

    def is_responses(self, turn: int) -> bool:
        """Whether the request edited at `turn` is a Responses API request (its rows are its
        instructions and input items: responses_items.py)."""
        return self.format_of(turn) == "responses"

    def messages(self, turn: int) -> list:
        """The editor's rows at `turn`: the messages (the very objects), or a Responses request's
        instructions and input items."""
        if self.is_responses(turn):
            return responses_items.rows(self._target(turn))
        msgs = self._target(turn).get("messages")
        return msgs if isinstance(msgs, list) else []

    def turn_cut(self, turn: int) -> int:
        """How many of the editor's rows turn `turn`'s request holds (later ones are shown dimmed)."""
        if self.is_log:
            return len(self.messages(turn))
        if self.is_responses(turn):
            inp = self.data.get("input")
            held = self._turn_cuts()[turn - 1] if isinstance(inp, list) else responses_items.item_count(self.data)
            return responses_items.offset(self.data) + held
        return self._turn_cuts()[turn - 1] if isinstance(self.data.get("messages"), list) else 0

    def row_map(self, turn: int) -> responses_items.RowMap:
        """Where turn `turn`'s Responses items stand among the editor's rows (a log's request that
        continues a logged response: after the items its chain brings)."""
        target = self._target(turn)
        chain = 0
        if self.is_log and target.get("previous_response_id") is not None:
            resolved = self.request(turn).get("input")
            chain = len(resolved) - responses_items.item_count(target) if isinstance(resolved, list) else 0
        return responses_items.RowMap.of(target, chain)

    def error_row(self, turn: int, exc: Exception) -> int | None:
        """The editor's row that an intake error of turn `turn`'s request names (`messages[3]...`,
        `input[3]...`, `instructions`), or None."""
        if self.is_responses(turn):
            return self.row_map(turn).error_row(exc)
        index = getattr(exc, "index", None)
        if getattr(exc, "container", None) == "messages" and isinstance(index, int) \
                and 0 <= index < len(self.messages(turn)):
            return index
        return None

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
        ({"part": k} with "content": the text of content part k, a list's text part)
        {"op": "insert", "index": i, "message": {...}}   {"op": "delete", "index": i}
        {"op": "move", "index": i, "to": j}
        `content` and `tool_calls` may come as JSON text ({"json": true}); an empty value removes
        an optional field. Text set as the content of a message whose content holds images, audio
        or files goes into its text part: those parts are never dropped (content_parts.py)."""
        # Copy on write: the list and the edited message are new objects, so a request handed out
        # before (which an assembler Session compares the next one with) never changes under it.
        target = self._target(turn)
        if self.is_responses(turn):
            n_items = responses_items.item_count(target)
            first, structural = responses_items.apply(target, op)
            return self._edit(turn, first, structural, max(n_items, responses_items.item_count(target)))
        msgs = list(target.get("messages") or [])
        kind = op.get("op")
        n = len(msgs)

        def index(key: str = "index", limit: int = n) -> int:
            return op_index(op, key, limit)

        if kind == "set":
            i, name, value = index(), op.get("field"), op.get("value")
            edit = self._set(msgs, i, name, value, bool(op.get("json")), op.get("part"))
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
        return self._edit(turn, first, edit, len(msgs))

    def _edit(self, turn: int, first: int, structural: bool, n: int) -> Edit:
        """What an edit of the list at `turn` changed, from its first changed row or item (-1: a
        Responses request's instructions, in every turn); `n`: the list's length after it."""
        self.dirty = True
        if structural:
            self._cuts = None
        if self.is_log:
            return Edit(turn, structural)
        return Edit(1 if first < 0 else self.turn_of(first) if first < n else self.turn_count, structural)

    def edited(self, turn: int) -> Any:
        """What the editor changes at `turn`, for undo (history.py): the messages list, or a
        Responses request's instructions and input (the very objects: copy on write)."""
        if self.is_responses(turn):
            return responses_items.edited(self._target(turn))
        return self.messages(turn)

    def restore(self, turn: int, before: Any) -> Edit:
        """Put back what `edited(turn)` returned before (undo, redo). The objects are the very ones
        the document held (copy-on-write), so the messages are what they were."""
        target = self._target(turn)
        if self.is_responses(turn):
            first, structural = responses_items.restore(target, before)
            return self._edit(turn, first, structural, responses_items.item_count(target))
        old = self.messages(turn)
        msgs = before
        first = next((i for i, (a, b) in enumerate(zip(old, msgs)) if a is not b), min(len(old), len(msgs)))
        structural = len(old) != len(msgs) or any(
            (a.get("role") if isinstance(a, dict) else None) != (b.get("role") if isinstance(b, dict) else None)
            for a, b in zip(old[first:], msgs[first:]))
        target["messages"] = msgs
        return self._edit(turn, first, structural, len(msgs))

    def replace_data(self, data: dict) -> Edit:
        """The whole session replaced (a one-click fix, or its undo): checked like a file, every turn
        changed."""
        self.file = parse_session(data, self.path)
        self.data, self.is_log, self._cuts, self.dirty = data, "requests" in data, None, True
        self.format = self.file.format
        return Edit(1, True)

    def _set(self, msgs: list, i: int, name: Any, value: Any, as_json: bool, part: Any = None) -> bool:
        where = f"messages[{i}].{name}"
        if not isinstance(msgs[i], dict):
            raise EditError(f"messages[{i}] is not an object", hint="delete it and add a new message")
        if name == "content" and part is not None:
            new = set_part_text(msgs[i].get("content"), part, value, f"{where}[{part!r}]")
            msgs[i] = {**msgs[i], "content": new}
            return False
        if name == "content" and not as_json and isinstance(value, str) and has_media(msgs[i].get("content")):
            msgs[i] = {**msgs[i], "content": with_text(msgs[i]["content"], value, where)}
            return False
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
                                hint='[{"id": "call_1", "type": "function", '
                                     '"function": {"name": ..., "arguments": "{}"}}]')
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
        atomic_write(target, self.to_text(), new_mode=umask_mode())   # the user's file: the usual mode
        self.path, self.name, self.dirty = str(target), target.name, False
        return target


def new_message(role: str, fmt: str) -> dict:
    """A blank message of `role` in the document's format (a tool result in Anthropic's form is a user
    message with a tool_result block; in a Responses request, a function call's output item)."""
    if fmt == "responses":
        return responses_items.new_item(role)
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
        # `source` may be an upload's name, as the browser sent it: only its digest and a tame
        # version of its stem make the file name (no separator, NUL or over-long name can get in).
        digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        stem = re.sub(r"[^\w-]", "_", Path(source.replace("\\", "/")).stem)[:48] or "session"
        return self.folder / f"{stem}-{digest}.json"

    def store(self, source: str, doc: SessionDocument | dict) -> Path:
        """Write the document (or a `snapshot()` of it: the write may run on another thread)."""
        f = self._file(source)
        data = doc.data if isinstance(doc, SessionDocument) else doc
        saved = {"source": source, "saved_at": time.time(), "document": data}
        try:
            raw = json.dumps(saved, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (an upload's name, a pasted string): not UTF-8, but JSON escapes it.
            raw = json.dumps(saved).encode("ascii")
        atomic_write(f, raw)
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
