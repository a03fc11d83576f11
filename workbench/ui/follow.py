"""Following a request log live (`workbench app --follow LOG`, `Workbench.follow(LOG)`): the log's
conversations in the session picker, newest first, and each new call shown as a new turn of its
conversation. No UI library here; the hosts (app.py, notebook.py) lay it out.

Three parts:

- `LogFollower`, one per log (one per app process, shared by its pages): a `LogTail`
  (analysis/logs.py) read by one background thread every POLL_S, which keeps the byte offset and
  reads only what was appended, and an index of the conversations. Per call it keeps where the
  line lies and the few logged fields shown (`LoggedCall`), never the request itself: a
  conversation's requests are read back from the file when it is opened, so a long log costs a few
  hundred bytes a line here. A reading error is kept and shown; the thread goes on polling.
- `FollowView`, one per page (or notebook widget): the conversation it shows, opened as a log
  session (`{"format": ..., "requests": [...]}`: its lines in timestamp order, ties in the order
  they were read), and `sync()`, run on the host's UI thread when the follower says it changed:
  the new calls of the conversation shown become its new turns (`WorkbenchState.extend_log`: the
  earlier turns keep their assembled records, only the new one is assembled), the selected turn
  follows to the newest if it was the newest and stays where it was otherwise.
- `TurnFigures`: what the log says of the selected turn's call (when, model, provider, latency,
  the provider's reported `usage`) beside the workbench's own figures for that turn, every one taken
  from the objects the CLI's JSON prints (the AssemblyResult, the prefix diff's TurnAnalysis, the
  provider simulations' TurnResults).

The followed log is read only. An edit of a followed conversation (a message, the budget boxes, a
Fix button) makes the page's document an edited copy: it keeps the turns it had, the log's later
calls are no longer added to it (they would land on a document the user changed under them), and
"Save to" writes it to the sessions folder as any session. Picking the conversation again follows it
anew from the log (the copy's edits are dropped unless saved).
"""

from __future__ import annotations

import bisect
import hashlib
import re
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING, Any

from ..analysis.logs import BadLine, LogTail, ReportedUsage, TailBatch, TailRef, parse_line, reported_usage
from ..errors import FileAccessError, LogFileError, WorkbenchError
from ..intake import detect_format
from ..templates import shipped_names
from .document import SessionDocument

if TYPE_CHECKING:
    from .controller import Controller
    from .state import Panels, WorkbenchState

POLL_S = 0.2              # the reader's interval: a stat of the file when nothing changed
BATCH_BYTES = 8 << 20     # read per step while catching up, so the picker fills as it reads
PICKER_LIMIT = 500        # conversations offered in the picker, newest first (a select of thousands is not browsed)
KEPT_DIAGNOSTICS = 100    # bad lines kept to show (the latest); all are counted
SHOWN_DIAGNOSTICS = 5
KEY = "follow:"           # a picker key: "follow:" and a conversation id, looked up, never a path
CSS = """
.wb-follow, .wb-follow-call { font-size: 13px; line-height: 1.45; border-left: 3px solid #4c78a8;
  padding: 4px 8px; margin: 2px 0; background: #f4f7fb; }
.wb-follow-copy { color: #8a5300; }
.wb-follow-diagnostics { margin: 2px 0 0 0; padding-left: 18px; font-family: monospace; font-size: 12px; }
.wb-follow-call-head { color: #444; }
"""


def _utc(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One logged call, as the follower keeps it: where its line lies and the fields shown."""
    conversation_id: str
    when: float                       # its timestamp, seconds since the epoch
    seq: int                          # the order lines were read in (ties of `when`)
    ref: TailRef
    file: str
    format: str                       # the request's format, detected from the line
    model: str | None = None
    provider: str | None = None
    client: str | None = None
    template: str | None = None
    latency_ms: float | None = None
    usage: ReportedUsage | None = None
    seen_at: float = 0.0              # time.monotonic() when the line was read (for the latency)
    # `response.usage` as logged (a few numbers), for the Cache tab's reconciliation, which reads
    # it strictly (a wrong type is a diagnostic there, so the object is kept, not `usage`'s numbers).
    usage_json: Any = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.ref.line}"

    def to_json(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "timestamp": _utc(self.when), "where": self.where,
                "format": self.format, "model": self.model, "provider": self.provider, "client": self.client,
                "template": self.template, "latency_ms": self.latency_ms,
                "usage": self.usage.to_json() if self.usage is not None else None}


@dataclass
class FollowedConversation:
    id: str
    calls: list[LoggedCall] = field(default_factory=list)   # timestamp order, ties in read order
    version: int = 0          # the follower's version when a call was last added
    reordered: int = 0        # ... when a call was last added before its latest one (not at the end)

    @property
    def latest(self) -> float:
        return self.calls[-1].when


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    id: str
    calls: int
    latest: float

    @property
    def label(self) -> str:
        latest = datetime.fromtimestamp(self.latest, UTC).strftime("%Y-%m-%d %H:%M:%S")
        return f"{shown_id(self.id)} — {self.calls} call{'s' if self.calls != 1 else ''}, latest {latest} UTC"


def shown_id(cid: str) -> str:
    """A conversation id as the picker shows it: printable, and a long one cut with a digest of the
    whole (labels are the picker's keys in the page: two ids must not share one)."""
    text = "".join(c if c.isprintable() else "?" for c in cid)
    if len(text) <= 80 and text == cid:
        return cid
    return f"{text[:60]}…{hashlib.sha256(cid.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


@dataclass(frozen=True)
class FollowStatus:
    """The follower at one moment, for the status line."""
    name: str
    version: int
    calls: int
    conversations: int
    bad_lines: int
    diagnostics: tuple[BadLine, ...]   # the latest bad lines, newest last
    events: tuple[str, ...]            # rotations, truncations, a file awaited
    error: str                         # the last read failed (retried at the next poll)
    waiting: bool                      # the file does not exist yet
    caught_up: bool                    # the log as it was at start is read
    read_s: float | None               # how long that took

    def to_json(self) -> dict[str, Any]:
        return {"log": self.name, "calls": self.calls, "conversations": self.conversations,
                "bad_lines": self.bad_lines, "diagnostics": [d.to_json() for d in self.diagnostics],
                "events": list(self.events), "error": self.error, "waiting": self.waiting,
                "caught_up": self.caught_up, "read_s": self.read_s}


class LogFollower:
    """One log followed: its reader thread and its conversations (see the module doc)."""

    def __init__(self, path: Any, *, poll_s: float = POLL_S):
        self.tail = LogTail(path)
        self.name = self.tail.name
        self.poll_s = poll_s
        self._lock = threading.Lock()             # the index, between the reader thread and the pages
        self._poll_lock = threading.Lock()        # one poll at a time (the thread, or a scripted poll())
        self._conversations: dict[str, FollowedConversation] = {}
        self._sorted: tuple[int, list[ConversationSummary]] = (-1, [])
        self.version = 0                          # bumps with every change a page may show
        self.calls = 0
        self.bad_lines = 0
        self._diagnostics: deque[BadLine] = deque(maxlen=KEPT_DIAGNOSTICS)
        self._events: deque[str] = deque(maxlen=SHOWN_DIAGNOSTICS)
        self.error = ""
        self.caught_up = False
        self.read_s: float | None = None
        self._seq = 0
        self._listeners: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at = time.perf_counter()

    # reading ---------------------------------------------------------------------------------------
    def poll(self) -> int:
        """Read what the log gained since the last poll and index it; returns the new calls. The
        listeners are told after each step that changed something."""
        with self._poll_lock:
            new = 0
            while True:
                try:
                    batch = self.tail.poll(BATCH_BYTES)
                    error = ""
                except LogFileError as exc:
                    batch, error = TailBatch(), str(exc)
                except OSError as exc:     # the disk, a file gone under a read: said, retried at the next poll
                    batch, error = TailBatch(), f"cannot read {self.name}: {exc.strerror or exc}"
                changed = self._apply(batch, error)
                new += len(batch.lines)
                if not batch.more and not self.caught_up and not error:
                    with self._lock:
                        self.caught_up, self.read_s = True, time.perf_counter() - self._started_at
                        self.version += 1
                    changed = True
                if changed:
                    self._notify()
                if not batch.more:
                    return new

    def _apply(self, batch: TailBatch, error: str) -> bool:
        now = time.monotonic()
        calls: list[LoggedCall] = []
        bad = list(batch.bad)
        for line in batch.lines:
            logged = line.logged
            try:
                fmt = detect_format(logged.request)
            except WorkbenchError as exc:        # a line whose request no intake takes: a bad line, as in aggregate
                bad.append(BadLine(line.file, line.ref.line, f"request: {exc}"))
                continue
            self._seq += 1
            calls.append(LoggedCall(line.conversation_id, line.when, self._seq, line.ref, line.file, fmt,
                                    logged.model, logged.provider, logged.client, logged.template,
                                    logged.latency_ms, reported_usage(logged.response), now,
                                    logged.response.get("usage") if isinstance(logged.response, dict) else None))
        if not calls and not bad and not batch.events and error == self.error:
            return False
        with self._lock:
            self.version += 1
            v = self.version
            for call in calls:
                conv = self._conversations.get(call.conversation_id)
                if conv is None:
                    conv = self._conversations[call.conversation_id] = FollowedConversation(call.conversation_id)
                if not conv.calls or call.when >= conv.calls[-1].when:
                    conv.calls.append(call)
                else:                            # logged out of order: its place by timestamp
                    keys = [(c.when, c.seq) for c in conv.calls]
                    conv.calls.insert(bisect.bisect(keys, (call.when, call.seq)), call)
                    conv.reordered = v
                conv.version = v
            self.calls += len(calls)
            self.bad_lines += len(bad)
            self._diagnostics.extend(bad)
            self._events.extend(batch.events)
            self.error = error
        return True

    def start(self) -> "LogFollower":
        """Poll on a background thread, every `poll_s` (at once first), until `stop()`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="workbench-follow", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - following never stops: said in the status line
                traceback.print_exc()
                with self._lock:
                    self.error, self.version = f"unexpected {type(exc).__name__}: {exc}", self.version + 1
                self._notify()
            if self._stop.wait(self.poll_s):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self.tail.close()

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener()` (from the reader thread: it must only hand off) after each change;
        returns the function that unsubscribes it."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)
        return unsubscribe

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn()
            except Exception:  # noqa: BLE001 - one page gone wrong must not stop the others' updates
                traceback.print_exc()

    # what the pages read ---------------------------------------------------------------------------
    def conversations(self, limit: int | None = PICKER_LIMIT) -> list[ConversationSummary]:
        """The conversations, newest first (by their latest call's timestamp; ties: the one logged last)."""
        with self._lock:
            if self._sorted[0] != self.version:
                rows = sorted(self._conversations.values(), key=lambda c: (c.latest, c.calls[-1].seq), reverse=True)
                self._sorted = (self.version, [ConversationSummary(c.id, len(c.calls), c.latest) for c in rows])
            out = self._sorted[1]
        return out if limit is None else out[:limit]

    def conversation(self, cid: str) -> FollowedConversation | None:
        """A snapshot: the calls list is a copy."""
        with self._lock:
            conv = self._conversations.get(cid)
            return None if conv is None else FollowedConversation(conv.id, list(conv.calls), conv.version,
                                                                 conv.reordered)

    def status(self) -> FollowStatus:
        with self._lock:
            return FollowStatus(self.name, self.version, self.calls, len(self._conversations), self.bad_lines,
                                tuple(self._diagnostics)[-SHOWN_DIAGNOSTICS:], tuple(self._events), self.error,
                                self.tail.waiting, self.caught_up, self.read_s)

    def diagnostics(self) -> list[BadLine]:
        """The latest bad lines (up to KEPT_DIAGNOSTICS), oldest first."""
        with self._lock:
            return list(self._diagnostics)

    def requests(self, calls: list[LoggedCall], fmt: str) -> tuple[list[dict[str, Any]], list[LoggedCall], list[str]]:
        """The calls' requests read back from the log, for a log session in format `fmt`: (requests,
        the calls they are, problems: a line that can no longer be read, `file:line: why`)."""
        reqs: list[dict[str, Any]] = []
        kept: list[LoggedCall] = []
        problems: list[str] = []
        for call in calls:
            try:
                raw = self.tail.read(call.ref)
            except (LogFileError, OSError) as exc:
                problems.append(f"{call.where}: {exc}")
                continue
            logged = parse_line(raw, call.conversation_id, call.file, call.ref.line)
            if isinstance(logged, BadLine):       # the bytes changed under the reader (an editor, not a logger)
                problems.append(str(logged))
                continue
            req = dict(logged.request)
            if call.format != fmt and "format" not in req:
                req["format"] = call.format
            resp = logged.response
            # A Responses API response that a later request continues (previous_response_id): the
            # log session carries it as the session files do (sessions.py resolves the chain).
            if isinstance(resp, dict) and isinstance(resp.get("id"), str) and isinstance(resp.get("output"), list):
                req["response"] = resp
            reqs.append(req)
            kept.append(call)
        return reqs, kept, problems


# ------------------------------------------------------------------------------------ one page's view
@dataclass(frozen=True)
class FollowUpdate:
    """What one `FollowView.sync` did."""
    version: int
    picker: bool = False          # the conversations changed: the picker's options follow
    added: int = 0                # turns added to the conversation shown
    turn_moved: bool = False      # the selected turn moved to the newest
    reopened: bool = False        # rebuilt: a call was logged out of order
    open: str | None = None       # the host should open this conversation (the first one, nothing open yet)
    latency_s: float | None = None  # from reading the newest added call to its turn assembled
    error: str = ""               # the new calls could not be added (shown; the view keeps what it had)


@dataclass(frozen=True)
class TurnFigures:
    """The selected turn's logged call beside the workbench's figures for that turn. The workbench's
    come from the objects the CLI's JSON prints: `tokens` from the AssemblyResult (`render`),
    `reused_tokens` and `held_tokens` from the prefix diff's TurnAnalysis (`analyze`), `cached` from
    each provider simulation's TurnResult (`simulate`); None (or empty) while not computed (the Cache
    and Prefix diff tabs compute theirs when open). `reported` is the provider's `usage`, as logged."""
    turn: int
    call: LoggedCall
    tokens: int | None
    reused_tokens: int | None
    held_tokens: int | None
    cached: tuple[tuple[str, int], ...]
    reported: ReportedUsage | None

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "call": self.call.to_json(), "tokens": self.tokens,
                "reused_tokens": self.reused_tokens, "held_tokens": self.held_tokens, "cached": dict(self.cached),
                "reported": self.reported.to_json() if self.reported is not None else None}


def file_name(cid: str) -> str:
    """A session name for a conversation id: the id's tame characters, `.json` (a label and the name
    "Save to" proposes; the id itself may hold anything)."""
    return (re.sub(r"[^\w.-]", "_", cid).strip("._")[:80] or "conversation") + ".json"


class FollowView:
    """One page's view of a followed log (see the module doc)."""

    def __init__(self, follower: LogFollower):
        self.follower = follower
        self.cid: str | None = None            # the conversation the document was made from
        self.doc: SessionDocument | None = None
        self.calls: list[LoggedCall] = []      # turn k's call is calls[k - 1]
        self.known: list[int] = []             # the conversation's calls (their seq) as last read, turns or not
        self.synced = 0                        # the conversation's version the document holds
        self.seen = -1                         # the follower's version last synced to
        self.chosen = False                    # the user opened something: nothing is opened for them
        self.note = ""                         # unreadable lines, or why new calls could not be added
        self._made: tuple[str, SessionDocument, list[LoggedCall], list[int], int] | None = None

    # which document --------------------------------------------------------------------------------
    def following(self, state: "WorkbenchState") -> bool:
        """The page shows the conversation as logged: new calls become its turns."""
        return self.doc is not None and state.doc is self.doc and not self.doc.dirty

    def copied(self, state: "WorkbenchState") -> bool:
        """The page shows an edited copy of a followed conversation: it no longer follows."""
        return self.doc is not None and state.doc is self.doc and self.doc.dirty

    def key(self, state: "WorkbenchState") -> str | None:
        """The picker key of what the page shows, when that is the followed conversation."""
        return KEY + self.cid if self.cid is not None and self.following(state) else None

    def options(self, state: "WorkbenchState") -> dict[str, str]:
        """The picker's entries for the log, label -> key, newest first (the one shown always among them)."""
        rows = self.follower.conversations()
        opts = {r.label: KEY + r.id for r in rows}
        shown = self.key(state)
        if shown is not None and shown not in opts.values():
            conv = self.follower.conversation(shown[len(KEY):])
            if conv is not None:
                opts[ConversationSummary(conv.id, len(conv.calls), conv.latest).label] = shown
        return opts

    def newest(self) -> str | None:
        rows = self.follower.conversations(1)
        return rows[0].id if rows else None

    def make(self, key: str, state: "WorkbenchState") -> SessionDocument:
        """The document for picker key `key` (or a conversation id): its calls as a log session, read
        back from the log. Anything not offered is refused as the picker refuses it, whatever it names.
        The template the newest call names (a shipped one) is chosen, as `analyze --aggregate` renders
        it, unless a model or a custom template is chosen."""
        cid = key[len(KEY):] if key.startswith(KEY) else key
        conv = self.follower.conversation(cid)
        if conv is None or not conv.calls:
            raise FileAccessError("the session picker offers no such session", hint="pick one from its list")
        fmt = conv.calls[0].format
        reqs, calls, problems = self.follower.requests(conv.calls, fmt)
        if not reqs:
            raise LogFileError(f"conversation {cid!r}: none of its calls can be read back: {problems[0]}",
                               hint="pick a conversation logged since")
        doc = SessionDocument({"format": fmt, "title": cid, "requests": reqs}, None, file_name(cid))
        self._made = (cid, doc, calls, [c.seq for c in conv.calls], conv.version)
        self.note = self._unread(problems)
        template = calls[-1].template
        if template is not None and state.model is None and not state.custom_source.strip() \
                and template != state.template and template in shipped_names():
            state.choose(template=template)
        return doc

    @staticmethod
    def _unread(problems: list[str]) -> str:
        if not problems:
            return ""
        return f"{len(problems)} call(s) of this conversation could not be read back: {problems[0]}"

    def attach(self, state: "WorkbenchState", *, chosen: bool = True) -> None:
        """After the host opened a document: the one `make` gave (followed from now on), or another
        (nothing followed; `chosen`: by the user, so nothing is opened for them later)."""
        made = self._made
        self._made = None
        if made is not None and state.doc is made[1]:
            self.cid, self.doc, self.calls, self.known, self.synced = made
        else:
            self.cid, self.doc, self.calls, self.known, self.note = None, None, [], [], ""
        self.chosen = self.chosen or chosen
        state.set_logged_usage(self.logged_usage)

    def logged_usage(self, doc: SessionDocument) -> list[tuple[str | None, Any, str | None]] | None:
        """Per turn of the followed conversation `doc` (also an edited copy: it keeps its turns),
        its call's (timestamp, `response.usage`, provider) as logged: what the Cache tab reconciles,
        which the requests read back from the log do not carry. None for any other document."""
        if self.doc is None or doc is not self.doc:
            return None
        return [(datetime.fromtimestamp(c.when, UTC).isoformat(), c.usage_json, c.provider) for c in self.calls]

    # live updates -----------------------------------------------------------------------------------
    def sync(self, controller: "Controller") -> FollowUpdate:
        """On the host's UI thread, after the follower changed: the calls added to the conversation
        shown become its new turns, assembled and shown at once (panels too, for the open tab)."""
        f, state = self.follower, controller.state
        version = f.version
        if version == self.seen:
            return FollowUpdate(version)
        self.seen = version
        if self.doc is None and not self.chosen and f.caught_up:
            newest = self.newest()
            if newest is not None:
                return FollowUpdate(version, picker=True, open=newest)
        if self.cid is None or not self.following(state):
            return FollowUpdate(version, picker=True)
        conv = f.conversation(self.cid)
        if conv is None or conv.version <= self.synced:
            return FollowUpdate(version, picker=True)
        # Appended at the end (the usual case): only the new turns. A call logged before the
        # conversation's latest one changes later turns: the document is made again.
        if conv.reordered > self.synced or [c.seq for c in conv.calls[:len(self.known)]] != self.known:
            return self._rebuild(controller, version)
        fresh = conv.calls[len(self.known):]
        reqs, calls, problems = f.requests(fresh, self.doc.format if self.doc is not None else "openai")
        self.synced, self.known = conv.version, [c.seq for c in conv.calls]
        if problems:
            self.note = self._unread(problems)
        if not reqs:
            return FollowUpdate(version, picker=True, error=self.note)
        try:
            moved = state.extend_log(reqs)
        except WorkbenchError as exc:
            self.note = f"the new calls could not be added: {exc}"
            return FollowUpdate(version, picker=True, error=self.note)
        self.calls += calls
        controller.followed(moved)
        return FollowUpdate(version, picker=True, added=len(reqs), turn_moved=moved,
                            latency_s=time.monotonic() - calls[-1].seen_at)

    def _rebuild(self, controller: "Controller", version: int) -> FollowUpdate:
        state = controller.state
        was_last, turn = state.turn == state.doc.turn_count, state.turn
        assert self.cid is not None
        try:
            doc = self.make(self.cid, state)
        except WorkbenchError as exc:
            self.note = str(exc)
            return FollowUpdate(version, picker=True, error=self.note)
        added = doc.turn_count - state.doc.turn_count
        controller.open(doc)
        self.attach(state, chosen=False)
        if not was_last and turn <= state.doc.turn_count:
            controller.select_turn(turn)
        return FollowUpdate(version, picker=True, added=max(added, 0), turn_moved=was_last, reopened=True,
                            latency_s=time.monotonic() - max(c.seen_at for c in self.calls) if self.calls else None)

    # what the page shows ------------------------------------------------------------------------------
    def call_of(self, turn: int) -> LoggedCall | None:
        return self.calls[turn - 1] if self.doc is not None and 1 <= turn <= len(self.calls) else None

    def figures(self, state: "WorkbenchState", panels: "Panels | None") -> TurnFigures | None:
        """The selected turn's call and the workbench's figures for it (None: not a followed turn)."""
        if self.doc is None or state.doc is not self.doc:
            return None
        turn = state.turn
        call = self.call_of(turn)
        if call is None:
            return None
        result = state.turn_result(turn)
        current = panels is not None and (panels.generation, panels.turn) == (state.generation, turn)
        analysis = panels.analysis if current and panels is not None else None
        cached: tuple[tuple[str, int], ...] = ()
        if current and panels is not None and "cache" in panels.parts:
            cached = tuple((s.provider, s.turns[turn - 1].cached_tokens) for s in panels.simulations
                           if len(s.turns) >= turn)
        return TurnFigures(turn, call, len(result.token_ids) if result is not None else None,
                           analysis.reused_tokens if analysis is not None else None,
                           analysis.held_tokens if analysis is not None else None, cached, call.usage)

    def status_html(self, state: "WorkbenchState") -> str:
        """The status line: the log, its counts and bad lines, what the page follows."""
        s = self.follower.status()
        head = f"following <b>{escape(s.name)}</b> · {s.calls:,} call(s) in {s.conversations:,} conversation(s)"
        if s.bad_lines:
            head += f' · <span class="wb-diag-warning">{s.bad_lines:,} bad line(s)</span>'
        if not s.caught_up and not s.waiting:
            head += " · reading…"
        elif s.read_s is not None:
            head += f" · read in {s.read_s:.1f} s"
        parts = [f'<div class="wb-follow-head">{head}</div>']
        if s.waiting:
            parts.append(f'<div class="wb-follow-event">waiting for {escape(s.name)} to be created</div>')
        if s.error:
            parts.append(f'<div class="wb-follow-error wb-diag-error">{escape(s.error)} — still following</div>')
        parts += [f'<div class="wb-follow-event wb-muted">{escape(e)}</div>' for e in s.events[-2:]]
        if self.cid is not None and self.doc is not None:
            name = escape(shown_id(self.cid))
            if self.following(state):
                newest = " (the newest call)" if state.turn == state.doc.turn_count else ""
                parts.append(f'<div class="wb-follow-mode">{name}: following live, turn {state.turn} of '
                             f'{state.doc.turn_count}{newest}</div>')
            elif self.copied(state):
                parts.append(f'<div class="wb-follow-mode wb-follow-copy">{name}: you edited this conversation, so '
                             'this is a copy: the log is read only and its new calls are not added here. Save it '
                             'to keep it; pick the conversation again to follow it.</div>')
        if self.note:
            parts.append(f'<div class="wb-follow-note wb-diag-warning">{escape(self.note)}</div>')
        if s.diagnostics:
            rows = "".join(f"<li>{escape(str(d))}</li>" for d in s.diagnostics)
            parts.append(f'<ul class="wb-follow-diagnostics">{rows}</ul>')
        return f'<div class="wb-follow">{"".join(parts)}</div>'


def _num(v: float) -> str:
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,.1f}"


def figures_html(fig: TurnFigures | None) -> str:
    """The selected turn's logged call, what the provider reported and the workbench's own figures."""
    if fig is None:
        return ""
    c = fig.call
    said = [f"turn {fig.turn}", f"logged {_utc(c.when)}", escape(c.where)]
    said += [f"{k} {escape(v)}" for k, v in (("model", c.model), ("provider", c.provider), ("client", c.client),
                                              ("template", c.template)) if v]
    if c.latency_ms is not None:
        said.append(f"{_num(c.latency_ms)} ms")
    if fig.reported is not None:
        reported = " · ".join(f"{escape(k)} {_num(v)}" for k, v in fig.reported.fields)
    else:
        reported = "no usage logged"
    ours = [f"{fig.tokens:,} prompt tokens" if fig.tokens is not None else "prompt tokens: not assembled yet"]
    if fig.reused_tokens is not None and fig.held_tokens is not None:
        ours.append(f"reuses {fig.reused_tokens:,} of the {fig.held_tokens:,} tokens held after turn {fig.turn - 1}"
                    if fig.turn > 1 else "first turn: nothing held before it")
    if fig.cached:
        ours.append("simulated cached: " + ", ".join(f"{escape(p)} {n:,}" for p, n in fig.cached))
    else:
        ours.append("simulated cache: computed while the Cache or KV tab is open")
    return (f'<div class="wb-follow-call"><div class="wb-follow-call-head">{" · ".join(said)}</div>'
            f'<div class="wb-follow-reported"><b>reported by the provider:</b> {reported}</div>'
            f'<div class="wb-follow-ours"><b>the workbench:</b> {" · ".join(ours)}</div></div>')
