"""The workbench's behaviour, shared by both hosts (no UI library here): what an edit, a choice or a
save does, and when the views update. A host (the Panel app, the notebook widget) supplies a few
hooks: how to run something later on its UI thread, and how to show a result, an error, the
editor's list and the slower panels.

Timing, so that typing is never blocked and nothing is lost:
- an edit is applied to the document at once, and so is its assembly when the last one ended more
  than QUIET_MS ago: a keystroke after a pause repaints within one incremental assembly (no
  debounce delay, no waiting for a later tick). Edits arriving faster than that (a burst, a fast
  typist on a long prompt) assemble on the next tick instead, where those already queued fold into
  one. The edits one message brings (the page resends recent ones, numbered) assemble once;
- the summary views (header line, budget bar, diagnostics) follow SUMMARY_MS after the last
  assembly, so that a keystroke's own update is only the token view's patch;
- the slower panels (every turn, provider simulations, prefix diff) run on one worker thread,
  PANELS_MS after the last edit; edits made while they run start one more run when it ends. While
  an edit is being assembled and shown, the worker waits before its next turn (at most HOLD_S):
  on two cores, a keystroke then does not share its core and the interpreter with a cold run;
- the autosave is written AUTOSAVE_MS after the last edit (atomically), so a reload restores it;
  `autosaved` says whether the latest edit is on disk yet, and the host is told when it is (the
  file status says "autosaved" only then: a page reloaded before that would lose the edit).

Files: with `files` (an `AppFiles`, the Panel app), opening, saving and exporting go through it only:
a session is opened by a picker key, saved and exported under a plain name in its folders, and a
taken name raises `OverwriteNeeded` until the host confirms. Without it (the notebook, whose user
has Python anyway), paths are used as given.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..assembly.result import AssemblyResult
from ..errors import BudgetSettingError, Cancelled, EditError, WorkbenchError
from ..segments import originals
from .content_parts import editor_parts
from .document import SessionDocument
from .files import AppFiles
from .responses_items import editor_view
from .state import PARTS, Panels, WorkbenchState

SUMMARY_MS = 400
OVERFLOW_MS = 100      # after a switch, the struck rest of the prompt: once the kept part's frame is out
PANELS_MS = 500
AUTOSAVE_MS = 400
QUIET_MS = 40
CANCELLED = "cancelled"   # the error a `done` callback gets for work stopped on request
HOLD_S = 0.5          # the longest the panels' worker waits for a keystroke's update before going on
PROGRESS_S = 0.25     # the panels' progress line is updated at most this often
# WORKBENCH_TRACE=1: one line on stderr per assembly shown, wall-clock times (ms since the epoch) of
# the first edit it folds in, the start of the assembly and the patch handed to the host, so that
# benchmarks/bench_app_keystroke.py can split a keystroke's latency into browser, server and back.
TRACE = os.environ.get("WORKBENCH_TRACE") == "1"


class Host(Protocol):
    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> None: ...   # on the UI thread
    def call_from_thread(self, fn: Callable[[], None]) -> None: ...            # thread -> UI thread
    def show_result(self, result: AssemblyResult) -> None: ...                 # the token view
    def show_summary(self, result: AssemblyResult) -> None: ...                # header, budget, diagnostics
    def show_error(self, message: str) -> None: ...
    def show_editor(self, structural: bool) -> None: ...
    def show_edit_error(self, error: dict[str, Any]) -> None: ...
    def show_panels(self, panels: Panels) -> None: ...
    def show_autosaved(self) -> None: ...                                      # the latest edit is on disk
    def show_progress(self, text: str) -> None: ...                            # the panels' worker; "" when done
    def show_panels_failed(self, error: str) -> None: ...                      # the panels could not be computed


class Controller:
    def __init__(self, state: WorkbenchState, host: Host, *, background: bool = True, files: AppFiles | None = None):
        self.state = state
        self.host = host
        self.files = files                # the app's confined folders; None: paths as given (notebook)
        self.background = background      # False: panels computed inline (tests, no event loop)
        self._first_edit_at = 0.0         # for TRACE
        self._refresh_pending = False
        self._refreshed_at = 0.0          # monotonic, when the last assembly was shown
        self._panels_ticket = 0
        self._panels_running = False
        self._panels_again = False
        self._autosave_ticket = 0
        self.autosaved = True             # the latest edit is in the autosave file (or nothing to save)
        self._summary_ticket = 0
        self.last_panels: Panels | None = None
        self._publish_lock = threading.Lock()
        self.panel_error = ""
        self._shown = threading.Event()   # clear while an edit is on its way to the view: the worker waits
        self._shown.set()
        self.views: frozenset[str] = frozenset(PARTS)   # the panels' parts the open tabs show
        self._progress_at = 0.0
        self.runner: Any = None           # the Run tab's engines (run_panel.Runner), made on first use
        self._generating: threading.Event | None = None
        self._prefill_ticket = 0          # bumped by a new prefill and by cancel_prefill
        self.closed = False               # close(): the host is gone
        self._row_error = False           # an assembly error is shown at an editor row (the item it names)
        self._choice_watchers: list[Callable[[], None]] = []   # views that follow the choices (watch_choices)
        self._generation_watchers: list[Callable[[], None]] = []   # views of one document state (watch_generation)
        self._told_generation = -1        # the document generation they were last told of
        self.opened = 0                   # sessions opened (a switch, a revert): the editor drops the last one's state

    # from the views --------------------------------------------------------------------------------
    def op(self, op: dict) -> None:
        """One message-editor operation."""
        self.ops([op])

    def ops(self, ops: list[dict], received_at: float | None = None) -> None:
        """Message-editor operations, in order; then one assembly. A failing one is shown at its
        message and changes nothing; the others still apply. `received_at`: when they reached the
        server (time.time()), if earlier than now (for TRACE)."""
        if TRACE:
            self._first_edit_at = received_at or time.time()
        self._shown.clear()
        applied = structural = False
        for op in ops:
            if op.get("op") in ("undo", "redo"):    # the editor's Undo (Ctrl+Z, its notice): a step back
                done = self.state.undo(redo=op["op"] == "redo")
                if done is not None:
                    applied, structural = True, True   # the editor gets the list back as it is now
                continue
            try:
                edit = self.state.apply(op)
            except WorkbenchError as exc:
                self.host.show_edit_error({"index": op.get("index"), "field": op.get("field"),
                                           "message": str(exc)})
                continue
            self.host.show_edit_error({})
            applied, structural = True, structural or edit.structural
        if structural:
            self.host.show_editor(True)
        if applied:
            self.edited()
        elif not self._refresh_pending:
            self._shown.set()

    def undo(self, redo: bool = False) -> str:
        """The Undo (Redo) button: take back the last editor step, or do it again. Returns what it
        did ("deleted message 3"), '' when there was nothing to do."""
        done = self.state.undo(redo=redo)
        if done is None:
            return ""
        self.host.show_editor(True)
        self.edited()
        return done[0].label

    def set_json(self, name: str, text: str) -> str:
        """Tools or variables as JSON text; returns the error to show inline ('' when it applied)."""
        try:
            self.state.set_json_field(name, text)
        except EditError as exc:
            return str(exc)
        self.edited()
        return ""

    def choose(self, **choices: Any) -> str:
        """A model, template, tokenizer, custom template or template arguments (state.choose). Returns
        the error to show inline ('' when it applied): an unknown model name, with the closest names,
        a bad template argument; nothing changes."""
        try:
            self.state.choose(**choices)
        except WorkbenchError as exc:
            if "model" in choices:
                self.state.model_error = str(exc)
            return str(exc)
        # A switch paints what the model sees first; the struck rest (a long session's dropped turns:
        # the whole prompt, up to 9x the tokens, for the browser to take in) follows OVERFLOW_MS later.
        if self.refresh(defer_overflow=True) is not None and self.state.overflow_pending:
            self.host.call_later(OVERFLOW_MS, self._show_overflow)
        self.request_panels()
        for fn in self._choice_watchers:
            fn()
        return ""

    def watch_choices(self, fn: Callable[[], None]) -> None:
        """`fn()` after every choice that applied, from any control or from code: a view of what the
        chosen template reads (ui/template_args.py) follows a template, model or custom-source switch
        without each host wiring it to every picker."""
        self._choice_watchers.append(fn)

    def watch_generation(self, fn: Callable[[], None]) -> None:
        """`fn()`, on the UI thread, when a refresh finds the document changed since the last one (an
        edit, an undo or redo, a fix, another session or template): a view of a result measured on the
        earlier document (the Fix bar's "applied") says so at once, not when the slower panels follow."""
        self._generation_watchers.append(fn)

    def _tell_generation(self) -> None:
        if self.state.generation != self._told_generation:
            self._told_generation = self.state.generation
            for fn in self._generation_watchers:
                fn()

    def _show_overflow(self) -> None:
        try:
            if not self.state.complete_overflow():
                return
        except WorkbenchError as exc:
            self.host.show_error(str(exc))
            return
        if self.state.result is not None:
            self.host.show_result(self.state.result)
            self._summary_ticket += 1
            ticket = self._summary_ticket
            self.host.call_later(SUMMARY_MS, lambda: self._summary(ticket))

    def set_budget(self, **values: Any) -> dict[str, str]:
        """The budget controls (state.set_budget: context_window, reserve, policy). Returns the error
        to show beside each control that refused its value ({} when it applied); a refused value
        changes nothing, and the views keep what they show."""
        try:
            self.state.set_budget(**values)
        except BudgetSettingError as exc:
            return {exc.control: str(exc)}
        except WorkbenchError as exc:        # anything else: beside the control that was set
            return {next(iter(values), "context_window"): str(exc)}
        if set(values) == {"policy"}:
            self.refresh()            # a choice, like the template: nothing to autosave
            self.request_panels()
        else:
            self.edited()             # the window and reserve are the session file's fields
        return {}

    def select_turn(self, turn: int) -> None:
        self.state.select_turn(turn)
        self.host.show_editor(self.state.doc.is_log)   # a log's turn is another request: its own list
        self.refresh()
        self.request_panels()

    def followed(self, turn_moved: bool) -> None:
        """A followed log's new calls were added as turns (state.extend_log; ui/follow.py): the turn
        picker gains them; the selected turn, if it moved to the newest, is assembled and shown at
        once; the panels (every turn, the simulations) follow at once, not PANELS_MS later. Nothing
        to autosave: the log is not edited."""
        self.host.show_editor(turn_moved)     # a log's turn is its own request: the editor shows the new one
        if turn_moved:
            self.refresh()
        self.request_panels(0)

    def open(self, doc: SessionDocument | str) -> None:
        """Another session: a document (an upload), or a picker key (with `files`; anything it did not
        offer raises FileAccessError and changes nothing), or a file path (without)."""
        if isinstance(doc, SessionDocument):
            self.state.open(doc)
        elif self.files is not None:
            self.state.load(self.files.path_of(doc))     # any other value: refused, whatever it is
        else:
            self.state.load(doc)
        self.opened += 1
        self._settled()
        # Assembled first: the editor's rows then come with this session's counts, never with the
        # last session's (by row number) until the summary catches up.
        self.refresh()
        self.host.show_editor(True)
        self.request_panels()

    def save(self, path: str | None = None, *, overwrite: bool = False) -> Path:
        """Save the session: with `files`, as plain name `path` in the sessions folder (a taken name
        raises OverwriteNeeded unless `overwrite`); without, to `path` or where it came from."""
        if self.files is not None:
            target = self.files.save(self.state, path if path is not None else self.files.default_save_name(
                self.state.doc), overwrite=overwrite)
        else:
            target = self.state.save(path or None)
        self._settled()
        self.host.show_editor(False)
        return target

    def revert(self) -> None:
        self.state.revert()
        self.opened += 1
        self._settled()
        self.refresh()
        self.host.show_editor(True)
        self.request_panels()

    def _settled(self) -> None:
        """Nothing left to autosave (opened, saved or reverted): a pending autosave is dropped."""
        self._autosave_ticket += 1
        self.autosaved = True

    def edited(self) -> None:
        """The document changed: assemble now (or on the next tick, in a burst), the panels and the
        autosave later."""
        self._shown.clear()
        if time.monotonic() - self._refreshed_at > QUIET_MS / 1e3:
            self.refresh()
        elif not self._refresh_pending:
            self._refresh_pending = True
            self.host.call_later(0, self.refresh)
        self.request_panels()
        self._autosave_ticket += 1
        self.autosaved = False
        ticket = self._autosave_ticket
        self.host.call_later(AUTOSAVE_MS, lambda: self._autosave(ticket))

    # assembly --------------------------------------------------------------------------------------
    def refresh(self, defer_overflow: bool = False) -> AssemblyResult | None:
        """Assemble the selected turn and show it; a failure shows inline and keeps the last good view."""
        self._refresh_pending = False
        self._tell_generation()
        started = time.time()
        try:
            result = self.state.assemble(defer_overflow=defer_overflow)
            self.host.show_result(result)
        except WorkbenchError as exc:
            self.host.show_error(str(exc))
            self._show_row_error(exc)
            return None
        except Exception as exc:  # noqa: BLE001 - the page never dies: one line, last good view kept
            self.host.show_error(f"unexpected {type(exc).__name__}: {exc}")
            return None
        finally:
            if not self._refresh_pending:
                self._shown.set()     # the edit is shown (or failed): the panels' worker goes on
        self._refreshed_at = time.monotonic()
        if self._row_error:               # it assembles again: the item's error is gone
            self._row_error = False
            self.host.show_edit_error({})
        if TRACE:
            print(f"trace edit={self._first_edit_at * 1e3:.1f} assemble={started * 1e3:.1f} "
                  f"sent={time.time() * 1e3:.1f}", file=sys.stderr, flush=True)
            self._first_edit_at = 0.0
        self._summary_ticket += 1
        ticket = self._summary_ticket
        self.host.call_later(SUMMARY_MS, lambda: self._summary(ticket))
        return result

    def _show_row_error(self, exc: WorkbenchError) -> None:
        """An assembly error that names a message or item of the list being edited (`input[3].call_id:
        no function call to answer`) is shown at that row too, as an edit's own error is."""
        s = self.state
        try:
            row = s.doc.error_row(s.turn, exc)
        except WorkbenchError:
            row = None
        if row is not None:
            self._row_error = True
            self.host.show_edit_error({"index": row, "field": getattr(exc, "field", None), "message": str(exc)})

    def _summary(self, ticket: int) -> None:
        if ticket == self._summary_ticket and self.state.result is not None:
            self.host.show_summary(self.state.result)

    def _autosave(self, ticket: int) -> None:
        """Write the autosave from a snapshot on a thread: serializing a long session (and the
        fsync) never holds up the next keystroke."""
        s = self.state
        if ticket != self._autosave_ticket or s.autosave is None or not s.doc.dirty:
            return
        source, snap, store = s.source, s.doc.snapshot(), s.autosave.store

        def written() -> None:
            if ticket == self._autosave_ticket:       # no edit since the snapshot
                self.autosaved = True
                self.host.show_autosaved()

        def write() -> None:
            try:
                store(source, snap)
            except WorkbenchError as exc:
                message = f"autosave failed: {exc}"
                self.host.call_from_thread(lambda: self.host.show_error(message))
                return
            self.host.call_from_thread(written)

        if self.background:
            threading.Thread(target=write, name="workbench-autosave", daemon=True).start()
        else:
            write()

    # the slower panels -----------------------------------------------------------------------------
    def set_views(self, parts: frozenset[str]) -> None:
        """The parts of the slower panels the open tabs show (state.NEEDS): only those are computed;
        a run for a tab that closed stops at its next turn; opening one brings it up to date."""
        self.views = frozenset(parts)
        shown = self.last_panels
        s = self.state
        if self.views and (shown is None or (shown.generation, shown.turn) != (s.generation, s.turn)
                           or not self.views <= shown.parts):
            self.request_panels(0)

    def close(self) -> None:
        """The host is gone (a closed browser tab): a running panels' worker stops at its next turn
        and nothing new starts. Work already handed to a thread (an export) finishes unshown."""
        self.closed = True
        self.views = frozenset()
        self._panels_ticket += 1
        if TRACE:
            running = "running" if self._panels_running else "idle"
            print(f"closed page: the session was destroyed, its panels' worker {running}", file=sys.stderr, flush=True)

    def request_panels(self, delay_ms: int = PANELS_MS) -> None:
        if self.closed or not self.views:
            return                     # no tab shows them: computed when one opens (set_views)
        if not self.background:
            self.run_panels()
            return
        self._panels_ticket += 1
        ticket = self._panels_ticket
        self.host.call_later(delay_ms, lambda: self._start_panels(ticket))

    def _start_panels(self, ticket: int) -> None:
        if ticket != self._panels_ticket:
            return                     # a later edit scheduled its own run
        if self._panels_running:
            self._panels_again = True
            return
        self._panels_running = True
        views = self.views
        threading.Thread(target=lambda: self._panels_worker(ticket, views), name="workbench-panels",
                         daemon=True).start()

    def _panels_worker(self, ticket: int, views: frozenset[str]) -> None:
        def check() -> None:
            self.yield_to_edits()
            if ticket != self._panels_ticket or not views <= self.views:
                raise Cancelled("the panels' run was superseded")

        def publish(panels: Panels) -> None:
            self.host.call_from_thread(lambda: self._publish(panels))

        error = ""
        try:
            self.state.panels(views, check=check, progress=self._progress, publish=publish)
        except Cancelled:
            pass                       # a newer edit or a closed tab: the next run (if any) shows it
        except WorkbenchError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a panel failing must not take the page down
            error = f"unexpected {type(exc).__name__}: {exc}"
            traceback.print_exc()
        self.host.call_from_thread(lambda: self._panels_done(error))
        if TRACE and self.closed:     # not "trace ...": those lines are keystroke timings
            print("closed page: the panels' worker ended", file=sys.stderr, flush=True)

    def _progress(self, what: str, done: int, total: int) -> None:
        """From the worker: 'assembling every turn: 120 of 500', at most every PROGRESS_S."""
        now = time.monotonic()
        if now - self._progress_at < PROGRESS_S:
            return
        self._progress_at = now
        text = f"{what}: turn {done + 1} of {total}…"
        self.host.call_from_thread(lambda: self.host.show_progress(text))

    def _panels_done(self, error: str) -> None:
        self._panels_running = False
        self._progress_at = 0.0
        self.panel_error = error
        self.host.show_progress(f"failed: {error}" if error else "")
        if error:
            self.host.show_panels_failed(error)
        if self._panels_again:
            self._panels_again = False
            self._start_panels(self._panels_ticket)

    def yield_to_edits(self) -> None:
        """Where the panels' worker waits, between turns, while an edit is on its way to the view."""
        self._shown.wait(HOLD_S)

    def run_panels(self, parts: frozenset[str] | None = None) -> None:
        """Every part the open tabs show (or `parts`), here and now."""
        try:
            self.state.panels(self.views if parts is None else parts, publish=self._publish)
        except WorkbenchError as exc:
            self.panel_error = str(exc)
            self.host.show_panels_failed(self.panel_error)
            return
        self.panel_error = ""

    def _publish(self, panels: Panels) -> None:
        """Show panels unless newer ones are shown already. A notebook shows them from the worker's
        thread while a cell may run them too (`Workbench.wait`): one at a time (plotly's figure
        widgets break when two threads replace their traces at once), never older over newer."""
        with self._publish_lock:
            shown = self.last_panels
            if shown is not None and panels.generation < shown.generation:
                return
            self.last_panels = panels
            self.host.show_panels(panels)

    # slow work on request: the KV panel's prefill, the export ---------------------------------------
    def run_prefill(self, done: Callable[[Any, str], None], model: str = "tiny",
                    progress: Callable[[str], None] | None = None) -> None:
        """A real prefill of the selected turn after the previous one (forward passes: seconds to a
        minute); `done(result, error)` runs on the UI thread, with error CANCELLED after
        `cancel_prefill` (or a newer prefill) stopped it between two chunks. `progress(text)`, on the
        UI thread: 'prefill, the previous turn: 3,072 of 12,000 tokens', at most every PROGRESS_S."""
        self._prefill_ticket += 1
        ticket, said = self._prefill_ticket, [0.0]

        def check() -> None:
            self.yield_to_edits()
            if ticket != self._prefill_ticket:
                raise Cancelled("the prefill was cancelled")

        def report(what: str, tokens: int, total: int) -> None:
            now = time.monotonic()
            if progress is None or (now - said[0] < PROGRESS_S and tokens < total):
                return
            said[0] = now
            text = f"prefill, {what}: {tokens:,} of {total:,} tokens"
            self.host.call_from_thread(lambda: progress(text) if ticket == self._prefill_ticket else None)

        self._in_background("prefill", lambda: self.state.prefill(model, check=check, progress=report), done)

    def cancel_prefill(self) -> None:
        """Stop the running prefill at its next chunk (its `done` gets CANCELLED)."""
        self._prefill_ticket += 1

    def run_export(self, out: str, done: Callable[[Any, str], None], *, overwrite: bool = False) -> None:
        """Write the export bundle for the current settings and verify it; `done((path, report), error)`.
        With `files`, `out` is a plain name in the export folder, checked here at once (a refusal, or
        OverwriteNeeded unless `overwrite`, is raised before any work starts) and again when written."""
        if self.files is None:
            self._in_background("export", lambda: self.state.export(out), done)
            return
        files = self.files
        files.export_target(out, overwrite=overwrite)
        self._in_background("export", lambda: files.export(self.state, out, overwrite=overwrite), done)

    def run_semantic(self, done: Callable[[Any, str], None]) -> None:
        """Replay the earlier turns into a semantic cache and look this turn up; `done((decision, cache), error)`."""
        self._in_background("semantic", self.state.semantic, done)

    def semantic_pairs(self, decision: Any) -> Any:
        """The pairs of the lookup that made `decision` (None if another lookup came since)."""
        pairs = self.state.semantic_pairs()
        return pairs if pairs is not None and pairs.decision is decision else None

    def label_semantic(self, pairs: Any, entry: Any, should_hit: bool, category: str | None = None) -> Any:
        """Label a pair the Semantic tab shows (`pairs`, neighbour `entry`) into the user's labels file
        in the sessions folder (semantic_labels.py); returns its `Added`. A WorkbenchError, to show
        inline, when the pair is gone (the session changed) or the file cannot be written."""
        from .semantic_labels import LabelsFile, pair_label
        record = pair_label(pairs, entry, should_hit, category, generation=self.state.generation,
                            turn=self.state.turn)
        labels = LabelsFile(self.files.sessions) if self.files is not None else LabelsFile.default()
        return labels.add(record)

    def run_generate(self, engine: str, max_new_tokens: int, done: Callable[[Any, str], None],
                     progress: Callable[[str], None] | None = None) -> None:
        """Generate the next assistant reply on `engine` (run_panel.Runner): shown, never written to the
        session here (a synthetic model's words mean nothing, and a real model's reply is the user's to
        keep or not): `append_reply(outcome.text, generation)` appends it on an explicit click.
        `done((outcome, generation), error)` and `progress(text)` run on the UI thread, `generation`
        being the document's when the prompt was read. `cancel_generate` stops it between decode steps."""
        from .run_panel import Runner
        if self.runner is None:
            self.runner = Runner()
        if self._generating is not None:
            done(None, "a reply is being generated: wait for it, or Cancel it")
            return
        try:
            job = self.runner.prepare(self.state)     # read here, on the UI thread
        except WorkbenchError as exc:
            done(None, str(exc))
            return
        runner, stop = self.runner, threading.Event()
        self._generating = stop
        generation = self.state.generation
        shown_at = [0.0]

        def check() -> None:
            if stop.is_set():
                raise Cancelled("generation cancelled")

        held: list[str | None] = [None]   # the latest line held back by the rate limit

        def report(text: str) -> None:
            now = time.monotonic()
            if progress is not None and now - shown_at[0] >= PROGRESS_S / 2:
                shown_at[0] = now
                held[0] = None
                self.host.call_from_thread(lambda: progress(text))
            else:
                held[0] = text

        def finished(outcome: Any, error: str) -> None:
            self._generating = None
            last = held[0]
            if progress is not None and last is not None:
                progress(last)   # the final figures are shown however fast they came (on the UI thread here)
            done(None if outcome is None else (outcome, generation), error)

        self._in_background("generate", lambda: runner.run(job, engine, max_new_tokens, check=check,
                                                            progress=report), finished)

    def cancel_generate(self) -> None:
        if self._generating is not None:
            self._generating.set()

    def append_reply(self, text: str, generation: int) -> str:
        """The reply as the last message, through the editor's path (one undo step, autosaved); not
        when the session changed since its prompt was read (the reply answers a prompt that is gone)."""
        s = self.state
        if s.generation != generation:
            return "not appended: the session changed after the reply was generated"
        if s.turn != s.doc.turn_count:
            s.select_turn(s.doc.turn_count)
        index = len(s.doc.messages(s.turn))
        self.ops([{"op": "insert", "index": index, "message": {"role": "assistant", "content": text}}])
        return f"appended to the session as message {index} (assistant)"     # the editor's numbering

    def _in_background(self, name: str, fn: Callable[[], Any], done: Callable[[Any, str], None]) -> None:
        def work() -> None:
            try:
                result, error = fn(), ""
            except Cancelled as exc:
                # The KV tab tells a cancel by CANCELLED; the others show the reason.
                result, error = None, CANCELLED if name == "prefill" else str(exc)
            except WorkbenchError as exc:
                result, error = None, str(exc)
            except Exception as exc:  # noqa: BLE001 - the page stays up: the error shows where it was asked for
                result, error = None, f"unexpected {type(exc).__name__}: {exc}"
                traceback.print_exc()
            self.host.call_from_thread(lambda: done(result, error))

        if self.background:
            threading.Thread(target=work, name=f"workbench-{name}", daemon=True).start()
        else:
            work()

    # what the editor shows -------------------------------------------------------------------------
    def editor_data(self) -> dict[str, Any]:
        """The message editor's data: its rows, how many the turn holds, the format, the counts, and
        per row its media parts (`parts`) or, in a Responses request, its item's shape (`items`:
        responses_items.py)."""
        s = self.state
        msgs = list(s.doc.messages(s.turn))
        fmt = s.doc.format_of(s.turn)
        data = {"turn_cut": s.doc.turn_cut(s.turn), "format": fmt, "counts": self.token_counts(),
                "session": self.opened}
        if s.doc.is_responses(s.turn):
            shown, shapes = editor_view(msgs, s.doc.row_map(s.turn).first == 1)
            return {**data, "messages": shown, "parts": [None] * len(msgs), "items": shapes}
        return {**data, "messages": msgs, "parts": editor_parts(msgs, fmt), "items": []}

    def token_counts(self) -> list[int | None]:
        """Each message's tokens in the prompt shown (the editor's per-message counts), by the
        message's place in the request: None for one the prompt does not hold (after the turn,
        dropped by truncation). In a Responses request, a message's tokens are on the row of its
        first item (a model turn's reasoning, message and calls are one message)."""
        s = self.state
        n = len(s.doc.messages(s.turn))
        if s.error:      # the last assembly failed: the result shown is another prompt's, its counts are not these
            return [None] * n
        if s.doc.is_responses(s.turn):
            stops = s.item_stops()
            if stops is None:
                return [None] * n
            return s.doc.row_map(s.turn).counts(stops, message_counts(s.result, len(stops)), n)
        # An Anthropic request's `system` field is message 0 of the conversation: the list's first
        # message is then seq 1.
        offset = 1 if s.doc.format_of(s.turn) == "anthropic" and s.doc.request(s.turn).get("system") else 0
        return message_counts(s.result, n, offset)


def message_counts(result: AssemblyResult | None, n: int, offset: int = 0) -> list[int | None]:
    """Tokens per message of a result, from its segments (a message may render as more than one);
    message i is the request's seq i + offset."""
    counts: list[int | None] = [None] * n
    if result is None:
        return counts
    for seg in originals(result.segments):   # the segment objects, not per-call copies
        i = seg.seq - offset if seg.seq is not None else -1
        if seg.kind in ("message", "system", "image") and 0 <= i < n:   # a message's images count as its tokens
            counts[i] = (counts[i] or 0) + seg.token_count
    return counts
