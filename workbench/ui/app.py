"""The Panel app (`workbench app`): the workbench as a local web page, for demos.

Left: the session (picker, upload, save, revert), the turn, the template and tokenizer, and the
message editor; below it, tabs for a custom Jinja template, the tool schemas and the prompt-template
variables. Right: the summary line, the budget bar, and tabs for the token view, the cache panel,
the prefix diff, the teaching step-through and the diagnostics.

Files: every open, save and export goes through `AppFiles` (files.py), confined to the sessions
folder and the export folder chosen at start (`workbench app --sessions DIR --export-dir DIR`); a
refused name shows inline beside its box, and a taken one asks for confirmation (Overwrite, Replace).

What an edit does lives in `Controller` and `WorkbenchState` (shared with the notebook's
`Workbench`); this module only hosts it. The token view and the message editor are the same ES
modules as in the notebook (`widgets/`), hosted by Panel's AnyWidget-compatible component.

A page opened from a shared link (`?state=`) is built off the server's event loop, with a deadline
(opening.py): a link holds whatever its sender chose, and every other page's keystrokes wait for
what runs on the loop.

The keystroke path has its own websocket (channel.py): served by `serve`, each page gets a token,
and its editor sends operations and its token view receives patches over it. Where that socket does
not open (a page built by another server) or closes, both fall back to Panel's model sync, which
differs from anywidget in two places of the widgets' protocol:
- Panel passes a custom message as one argument, so a token-view patch's three binary buffers
  travel inside it (`msg.buffers`, as bytes: Bokeh's websocket carries them as binary frames);
- its model adapter has no `model.send`, so a new token view asks for the whole state by bumping
  the synced `sync` counter, and the message editor sends its operations through the synced `op`.
Patches carry their version and the one they apply to (`base`), so that a view never applies one
out of order when they switch from one way to the other: it asks for the whole view instead.
"""

from __future__ import annotations

import gc
import html
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._optional import require
from ..assembly.result import AssemblyResult
from ..assets import widget_file
from ..errors import ChannelError, ShareError, WorkbenchError
from ..sessions import load_session
from . import last_opened
from .budget_controls import PanelBudgetControls
from .channel import PATH, encode_patch, handlers, op_in_sequence, open_channel, refuse_malformed_origins
from .charts import budget_figure
from .compare import KINDS, CompareRunner, values_for
from .compare_html import CSS as COMPARE_CSS
from .compare_html import compare_html
from .controller import CANCELLED, Controller
from .document import Autosave, SessionDocument
from .files import AppFiles, OverwriteNeeded
from .fix_buttons import PanelFixBar
from .follow import CSS as FOLLOW_CSS
from .follow import KEY as FOLLOW_KEY
from .follow import FollowView, LogFollower, figures_html
from .html import CSS, cache_html, diagnostics_html, export_html, header_html, not_computed_html, prefix_diff_html
from .kv_panel import kv_figure, kv_html
from .model_choice import estimate_html
from .model_picker import PanelPickers
from .opening import Opening, deadline_s
from .run_panel import DEFAULT_MAX_NEW, ENGINES, MAX_NEW_LIMIT, RunOutcome, engine_spec, run_html
from .semantic_panel import label_html, neighbour_options, semantic_html
from .sharing import base_url, link, notebook_cell, open_text, share_text
from .state import NEEDS, Panels, WorkbenchState
from .teaching import StepThrough
from .viewmodel import Patch, PatchFeed, page_header

pn = require("panel", "the web app")
import param  # noqa: E402  (comes with panel)

# Widget captions: `label` in newer Panel (which deprecates `name` for them), `name` before.
LABEL = "label" if "label" in pn.widgets.Select.param else "name"
COLOR = "color" if "color" in pn.widgets.Button.param else "button_type"
MAX_TEXT = 1_000_000   # characters in an editor (Panel's default, 5000, cuts real chat templates)
UNSAVED = "unsaved:"     # the picker's entry for a session with no file (an upload, a link): never a path
MONOSPACE = "textarea { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }"


# Present: the Teach tab as a layer over the whole window, scrolling on its own.
# A class toggled, not inline styles: Bokeh keeps an inline style that a later update leaves out.
PRESENTING = (":host(.wb-presenting) { position: fixed; inset: 0; z-index: 1000; background: white; overflow-y: auto;"
              " padding: 12px 24px; height: 100vh !important; width: 100vw !important; box-sizing: border-box; }")


def wrapping(*objects: Any, **params: Any) -> Any:
    """A row of controls that wraps onto the next line where the column is narrower than they are
    (a plain Row keeps its width and pushes the page sideways: the Run tab's Cancel at x 1,410 on a
    1,280-pixel screen)."""
    return pn.FlexBox(*objects, flex_wrap="wrap", align_items="flex-end", **params)


# ---------------------------------------------------------------------------------------- the views
class TokenViewPane(PatchFeed, pn.custom.AnyWidgetComponent):  # type: ignore[misc, name-defined]
    """The notebook's token view (same ES module and CSS) in a Panel page, fed by patches."""

    _esm = widget_file("token_view.js")
    _stylesheets = [widget_file("token_view.css").read_text("utf-8")]

    error = param.String(default="", doc="shown inline; the view keeps the last good state")
    sync = param.Integer(default=0, doc="bumped by a newly rendered front end: send it everything")
    channel = param.Dict(default={}, doc="{path, token} of the page's keystroke channel; empty: none")

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.patches_sent: list[int] = []
        # Not synced: they travel inside each patch, so a keystroke sends one message, no property.
        self.header: dict[str, Any] = {}
        self._shown: dict[str, Any] = {}     # the header as the page has it (page_header)
        self.version = 0
        self._socket: Callable[[bytes], bool] | None = None   # the channel's view socket, when open
        self.param.watch(lambda _e: self._resync(), "sync")

    def show(self, result: AssemblyResult, tokenizer: Any, overflow: Any = None) -> Patch:
        return self._feed(result, tokenizer, overflow)

    def attach(self, send: Callable[[bytes], bool] | None) -> None:
        """Patches go to the channel's socket from now on (None: through the model again)."""
        self._socket = send

    def _deliver(self, patch: Patch) -> None:
        content, buffers = patch.message()
        # A patch that replaces everything applies to any state; any other only to the version before it.
        whole = patch.keep == 0 and patch.runs is None and not any("from" in s for s in patch.segments)
        shown = content["header"] = page_header(patch.header)
        if not whole:   # the header's parts that changed
            content["header_changes"] = {k: v for k, v in content.pop("header").items() if self._shown.get(k) != v}
        content.update(version=self.version + 1, base=None if whole else self.version)
        self.header, self._shown, self.version = patch.header, shown, self.version + 1
        if self.error:
            self.error = ""
        if self._socket is not None and self._socket(encode_patch(content, buffers)):
            return
        self._socket = None
        self.send({**content, "buffers": buffers})  # buffers: binary frames

    def _handle_msg(self, data: Any) -> None:
        # Should Panel's adapter gain model.send, the module's {"type": "sync"} arrives here instead.
        if isinstance(data, dict) and data.get("type") == "sync":
            self._resync()


class MessageEditorPane(pn.custom.AnyWidgetComponent):  # type: ignore[misc, name-defined]
    """The notebook's message editor (same ES module and CSS) in a Panel page."""

    _esm = widget_file("message_editor.js")
    _stylesheets = [widget_file("message_editor.css").read_text("utf-8")]

    # Panel waits 50 ms (its default debounce) before applying a change from the browser; an edit
    # is one small operation that the Controller coalesces itself, so it is applied at once.
    _debounce = 0

    messages = param.List(default=[], doc="the messages being edited (sent on load and structural edits)")
    turn_cut = param.Integer(default=0, doc="how many of them the selected turn's request holds")
    format = param.String(default="openai")
    error = param.Dict(default={}, doc="{index, field, message} of the last edit that failed")
    ops = param.List(default=[], doc="the front end's recent operations, numbered (see message_editor.js)")
    counts = param.List(default=[], doc="each message's tokens in the prompt shown (None: not in it)")
    parts = param.List(default=[], doc="per message: None, or its text parts and media chips (content_parts.py)")
    items = param.List(default=[], doc="per row of a Responses request: its kind and fields (responses_items.py)")
    channel = param.Dict(default={}, doc="{path, token} of the page's keystroke channel; empty: none")
    session = param.Integer(default=0, doc="bumped when another session opens: the editor drops the last one's state")

    def __init__(self, on_ops: Callable[[list[dict], float | None], None], **params: Any):
        super().__init__(**params)
        self.applied = 0     # the number of the last operation applied, whichever way it came
        self._apply = on_ops
        self.param.watch(lambda e: self.apply(e.new or []), "ops")

    def apply(self, ops: list[Any], received_at: float | None = None) -> None:
        """Apply the operations numbered after the last one applied: one assembly for the lot."""
        new = []
        for op in ops:
            n = op.get("n") if isinstance(op, dict) else None
            if isinstance(n, int) and n > self.applied and op_in_sequence(n, self.applied):
                self.applied = n
                new.append({k: v for k, v in op.items() if k != "n"})
        if new:
            self._apply(new, received_at)


class PresenterKeys(pn.custom.AnyWidgetComponent):  # type: ignore[misc, name-defined]
    """The keys a presenter's clicker sends (→, PageDown, Space: next; ←, PageUp: back; Escape: end
    the presentation), caught on the page while `active` and counted into `pressed` for Python. Not
    while a text box has the focus: there they type."""

    _esm = """
    const MOVES = { ArrowRight: "next", PageDown: "next", " ": "next", ArrowLeft: "back", PageUp: "back",
                    Escape: "stop" };
    function render({ model, el }) {
      const sent = [];
      let count = 0;
      const onKey = (e) => {
        const move = MOVES[e.key];
        const t = e.composedPath()[0] || e.target;
        if (!move || !model.get("active") || e.altKey || e.ctrlKey || e.metaKey) return;
        const typing = t && (["TEXTAREA", "INPUT", "SELECT"].includes(t.tagName) || t.isContentEditable);
        if (typing) return;
        e.preventDefault();
        // Numbered and sent with the last few: keys pressed faster than a round trip all arrive.
        sent.push({ n: ++count, move });
        model.set("pressed", sent.slice(-20));
        model.save_changes();
      };
      document.addEventListener("keydown", onKey);
      return () => document.removeEventListener("keydown", onKey);
    }
    export default { render };
    """
    _debounce = 0
    active = param.Boolean(default=False)
    pressed = param.List(default=[], doc="the latest keys, numbered: [{n, move}]")

    def __init__(self, on_move: Callable[[str], None], **params: Any):
        super().__init__(**params)
        self.applied = 0          # the number of the last key applied
        self.param.watch(lambda e: self._apply(e.new or []), "pressed")
        self._on_move = on_move

    def _apply(self, keys: list[Any]) -> None:
        for key in keys:
            n = key.get("n") if isinstance(key, dict) else None
            if isinstance(n, int) and n > self.applied:
                self.applied = n
                self._on_move(str(key.get("move")))


class TeachingPanel:
    """The teaching step-through: one step at a time, Back and Next, over the selected turn.

    Present shows the step-through over the whole window (a fixed layer over the page, which itself
    keeps its layout: hiding the rest made Bokeh keep the full width after Present went off) and
    follows a presenter's keys (PresenterKeys)."""

    def __init__(self) -> None:
        self.walk = StepThrough()
        self.title = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS])
        self.body = pn.pane.HTML("<i>the steps appear once every turn is assembled…</i>", sizing_mode="stretch_width",
                                 stylesheets=[CSS])
        self.back = pn.widgets.Button(**{LABEL: "◀ Back"}, width=90)
        self.next = pn.widgets.Button(**{LABEL: "Next ▶"}, width=90)
        self.back.on_click(lambda _e: self.go(-1))
        self.next.on_click(lambda _e: self.go(+1))
        # Presentation mode: large type, one idea per screen, and the rest of the page out of the way.
        self.present = pn.widgets.Toggle(**{LABEL: "Present"}, width=100, css_classes=["wb-present-toggle"])
        self.present.param.watch(lambda e: self._present(e.new), "value")
        self.keys = PresenterKeys(self._key, height=0, margin=0)
        self.layout = pn.Column(wrapping(self.back, self.next, self.present, self.title), self.body, self.keys,
                                sizing_mode="stretch_width", css_classes=["wb-teach"], stylesheets=[PRESENTING])

    def _present(self, on: bool) -> None:
        self.walk.presenting = on
        self.keys.active = on
        self.layout.css_classes = ["wb-teach", "wb-presenting"] if on else ["wb-teach"]
        self.go(0)

    def _key(self, move: str | None) -> None:
        if move == "stop":
            self.present.value = False
        elif move in ("next", "back"):
            self.go(+1 if move == "next" else -1)

    def update(self, state: WorkbenchState, panels: Panels, kv: Any = None) -> None:
        if self.walk.load(panels, panels.previous, kv):
            self.go(0)

    def not_computed(self, note: str) -> None:
        """The turn cannot be assembled: its reason instead of the steps of a prompt that is gone (the
        next panels that load put the steps back)."""
        self.title.object, self.body.object = "", note
        self.back.disabled = self.next.disabled = True

    def go(self, delta: int) -> None:
        if not self.walk.move(delta):
            return
        self.title.object, self.body.object = self.walk.title_html(), self.walk.body_html()
        self.back.disabled, self.next.disabled = self.walk.at_first, self.walk.at_last


class RunPanel:
    """The Run tab: engine, max new tokens, Generate and Cancel; the reply streams in and is shown (a
    synthetic model's marked so); "Append this reply" writes it to the session, nothing before that
    click (run_panel.py, Controller.run_generate and append_reply)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.last: RunOutcome | None = None
        self.engine = pn.widgets.Select(**{LABEL: "Engine"}, options=list(ENGINES), width=280)
        self.target = pn.widgets.TextInput(**{LABEL: "Model folder, .gguf file or server URL"}, width=300,
                                           placeholder="http://127.0.0.1:8000")
        self.max_new = pn.widgets.IntInput(**{LABEL: "Max new tokens"}, value=DEFAULT_MAX_NEW, start=1,
                                           end=MAX_NEW_LIMIT, width=120)
        self.generate = pn.widgets.Button(**{LABEL: "Generate", COLOR: "primary"}, width=100, align="end")
        self.cancel = pn.widgets.Button(**{LABEL: "Cancel"}, width=80, align="end", disabled=True)
        self.append = pn.widgets.Button(**{LABEL: "Append this reply to the session"}, width=260, visible=False,
                                        css_classes=["wb-run-append"])
        self.out = pn.pane.HTML(run_html(None), sizing_mode="stretch_width", stylesheets=[CSS],
                                css_classes=["wb-run-pane"])
        self._unappended: tuple[RunOutcome, int] | None = None    # the reply shown, and its prompt's generation
        self.generate.on_click(lambda _e: self.run())
        self.cancel.on_click(lambda _e: self.controller.cancel_generate())
        self.append.on_click(lambda _e: self._append())
        self.layout = pn.Column(wrapping(self.engine, self.target, self.max_new, self.generate, self.cancel),
                                self.out, self.append, sizing_mode="stretch_width")

    def clear(self) -> None:
        """Another session: the reply shown answered the previous one; nothing of it stays."""
        self.last, self._unappended = None, None
        self.append.visible = False
        self.out.object = run_html(None)

    def run(self) -> None:
        try:
            spec = engine_spec(self.engine.value, self.target.value or "")
        except WorkbenchError as exc:          # said inline; the last reply stays shown
            self.out.object = run_html(self.last, error=str(exc))
            return
        self.generate.disabled, self.cancel.disabled = True, False
        self.append.visible, self._unappended = False, None
        self.out.object = run_html(None, status=f"generating on {spec}…")
        self.controller.run_generate(spec, int(self.max_new.value or DEFAULT_MAX_NEW), self._done,
                                     lambda text: setattr(self.out, "object", run_html(None, status=text)))

    def _done(self, result: Any, error: str) -> None:
        self.generate.disabled, self.cancel.disabled = False, True
        if result is None:
            self.out.object = run_html(self.last, error=f"no reply: {error}")
            return
        self.last, generation = result
        self._unappended = (self.last, generation)
        self.append.visible = True
        self.out.object = run_html(self.last)

    def _append(self) -> None:
        if self._unappended is None:
            return
        outcome, generation = self._unappended
        self._unappended, self.append.visible = None, False
        self.out.object = run_html(outcome, appended=self.controller.append_reply(outcome.text, generation))


class PanelHost:
    """The Controller's hooks in a Panel page: timers and thread hand-offs through the Bokeh document
    (`add_next_tick_callback` is its one thread-safe method); inline outside a server.

    `held`: the page is being built off the event loop (opening.py), where the document's timers may
    not be touched: every timer and hand-off waits in order until `release()`, on the loop."""

    def __init__(self, app: "WorkbenchApp", held: bool = False):
        self.app = app
        self.doc = pn.state.curdoc if pn.state.curdoc is not None and pn.state.curdoc.session_context else None
        self._held: list[Callable[[], Any]] | None = [] if held and self.doc is not None else None
        self._held_lock = threading.Lock()
        self._dropped = False

    def release(self) -> None:
        """On the loop, once the page is shown: what waited is scheduled now, in order."""
        with self._held_lock:
            held, self._held = self._held or [], None
        for add in held:
            self._hand_off(add)

    def drop(self) -> None:
        """The page will never be shown: what waited, and whatever comes later, goes nowhere."""
        with self._held_lock:
            self._held, self._dropped = None, True

    @property
    def closed(self) -> bool:
        """The page's session is gone (tab closed): Bokeh destroyed its document, whose callback
        methods then fail (AttributeError on its callback lists). Nothing is shown there anymore."""
        return self.doc is not None and self.doc.session_context is None

    def _hand_off(self, add: Callable[[], Any]) -> None:
        with self._held_lock:
            if self._held is not None:
                self._held.append(add)
                return
        if self.closed or self._dropped:
            return
        try:
            add()
        except AttributeError:
            # Destroyed between the check and the call (from a worker thread): the page is gone,
            # so what it would have shown has nowhere to go.
            if not self.closed:
                raise

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> None:
        doc = self.doc
        if doc is None:
            fn()
        elif delay_ms <= 0:
            self._hand_off(lambda: doc.add_next_tick_callback(fn))
        else:
            self._hand_off(lambda: doc.add_timeout_callback(fn, delay_ms))

    def call_from_thread(self, fn: Callable[[], None]) -> None:
        doc = self.doc
        if doc is None:
            fn()
        else:
            self._hand_off(lambda: doc.add_next_tick_callback(fn))

    def show_result(self, result: AssemblyResult) -> None:
        self.app.show_result(result)

    def show_summary(self, result: AssemblyResult) -> None:
        self.app.show_summary(result)

    def show_error(self, message: str) -> None:
        self.app.show_error(message)

    def show_editor(self, structural: bool) -> None:
        self.app.show_editor(structural)

    def show_edit_error(self, error: dict[str, Any]) -> None:
        if error or self.app.editor.error:
            self.app.editor.error = error

    def show_autosaved(self) -> None:
        self.app._file_status()

    def show_progress(self, text: str) -> None:
        self.app.panels_status.object = f'<div class="wb-muted">{html.escape(text)}</div>' if text else ""

    def show_panels_failed(self, error: str) -> None:
        self.app.show_panels_failed(error)

    def show_panels(self, panels: Panels) -> None:
        self.app.show_panels(panels)
        if self.doc is not None:
            # Every turn's result is held now, long-lived: without this, each full collection
            # walks them all (100-300 ms on the 1,000-message session, a pause in the middle of
            # typing). Frozen objects are still freed by reference counting when dropped.
            gc.freeze()


class AppEndpoint:
    """What a page's keystroke channel drives (channel.Endpoint): the editor's operations go to the
    Controller, the token view's patches to the page's socket."""

    def __init__(self, app: "WorkbenchApp"):
        self.app = app

    def run(self, fn: Callable[[], None]) -> None:
        self.app.host.call_from_thread(fn)      # the next tick, on the document's lock, in order

    def applied(self) -> int:
        return self.app.editor.applied

    def text_of(self, index: int, field: str) -> Any:
        msgs = self.app.state.doc.messages(self.app.state.turn)
        if not 0 <= index < len(msgs) or not isinstance(msgs[index], dict):
            raise ChannelError("unknown-message", f"no message {index} in this turn's list (0..{len(msgs) - 1})",
                               hint="reload the page")
        return msgs[index].get(field)

    def apply_ops(self, ops: list[dict], received_at: float) -> None:
        self.app.editor.apply(ops, received_at)

    def attach_view(self, send: Callable[[bytes], bool] | None) -> None:
        self.app.view.attach(send)

    def resync_view(self) -> None:
        self.app.view._resync()


# ---------------------------------------------------------------------------------------- the app
class WorkbenchApp:
    """Widgets over one WorkbenchState and Controller. `layout` is the Panel object."""

    def __init__(self, session_path: str | None = None, *, autosave: Autosave | None = None,
                 files: AppFiles | None = None, share: str | None = None, host_header: str | None = None,
                 model: str | None = None, follow: LogFollower | None = None, held: bool = False,
                 link_error: str = "", check: Callable[[], None] | None = None):
        """`held`: built off the server's event loop (opening.py); shown by the caller, then `release()`.
        `link_error`: why `share` is not opened (it did not open in time): the page opens as for a bad link.
        `check`: called between the slow steps (decoding, each assembly); raises Cancelled when the
        page is no longer wanted (past its deadline), so that a late build stops there."""
        check = check or (lambda: None)
        if not held:
            pn.extension("plotly")   # (build_app did, on the loop: the page's resources are chosen there)
        self.files = files if files is not None else AppFiles.create(given=session_path)
        autosave = autosave if autosave is not None else Autosave()
        if session_path is None and share is None and follow is None:   # the session a page last opened
            session_path = last_opened.recall(autosave.folder, self.files)
        self.state = WorkbenchState(session_path, autosave=autosave)
        self._base_url = base_url(host_header)
        share_error = link_error
        self._from_link = False   # the open session came from a shared link (until another one opens)
        if share is not None and not link_error:   # opened from a shared link (?state=): its content, never a path
            try:
                open_text(self.state, share)
                self._from_link = True
                check()
            except ShareError as exc:
                share_error = f"this link could not be opened: {exc} — showing the default session instead"
        self.host = PanelHost(self, held=held)
        self.controller = Controller(self.state, self.host, background=self.host.doc is not None, files=self.files)
        if model is not None and share is None:   # a catalog model to start with (a link carries its own)
            try:
                self.state.choose(model=model)
            except WorkbenchError as exc:         # unknown: said under the picker, the page opens
                self.state.model_error = str(exc)
        # A followed log (`--follow LOG`, follow.py): the page opens on its newest conversation.
        self.follow = FollowView(follow) if follow is not None else None
        if self.follow is not None:
            if share is None:
                self._follow_first()
            else:
                self.follow.chosen = True        # a shared link's session stays: nothing is opened over it
        s = self.state
        self._confirming = ("", "")                       # the names Overwrite and Replace were offered for
        self.session_select = pn.widgets.Select(**{LABEL: "Session"}, **self._picker())
        self.follow_status = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS, FOLLOW_CSS],
                                          visible=self.follow is not None, css_classes=["wb-follow-pane"])
        self.follow_call = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS, FOLLOW_CSS],
                                        visible=self.follow is not None, css_classes=["wb-follow-call-pane"])
        self.upload = pn.widgets.FileInput(accept=".json", multiple=False, sizing_mode="stretch_width")
        self.save_path = pn.widgets.TextInput(**{LABEL: "Save to (a .json name in the app's folder)"},
                                              value=self.files.default_save_name(s.doc), placeholder="my_session.json",
                                              sizing_mode="stretch_width")
        self.save_button = pn.widgets.Button(**{LABEL: "Save", COLOR: "primary"}, width=80)
        self.revert_button = pn.widgets.Button(**{LABEL: "Revert"}, width=80)
        self.overwrite_button = pn.widgets.Button(**{LABEL: "Overwrite", COLOR: "danger"}, width=100, visible=False)
        self.file_status = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS])
        self.export_path = pn.widgets.TextInput(**{LABEL: "Export a bundle to (production)"},
                                                value=self.files.default_export_name(s.doc),
                                                placeholder="a folder name in the export folder",
                                                sizing_mode="stretch_width")
        self.export_button = pn.widgets.Button(**{LABEL: "Export"}, width=80, align="end")
        self.replace_button = pn.widgets.Button(**{LABEL: "Replace", COLOR: "danger"}, width=90, align="end",
                                                visible=False)
        self.export_status = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS])
        self.turn_select = pn.widgets.Select(**{LABEL: "Turn"}, options=self._turns(), value=s.turn, width=150)
        # The model, template and tokenizer pickers, and the KV tab's shape (model_picker.py).
        self.pickers = PanelPickers(self.controller, LABEL, CSS)
        self.model_select, self.template_select = self.pickers.model, self.pickers.template
        self.tokenizer_select, self.kv_config = self.pickers.tokenizer, self.pickers.kv
        self.pickers.on_choice = self._chosen
        self.budget_controls = PanelBudgetControls(self.controller, LABEL)
        from .template_args import PanelTemplateArgs  # the template arguments control; follows every choice
        self.template_args = PanelTemplateArgs(self.controller, LABEL, CSS)
        # Assembled before the editor is made, so that it starts with each message's count: a count
        # sent before the page connects can be lost (a small session's summary comes that fast), and
        # the counts then stayed empty until the next edit.
        try:
            s.assemble()
        except WorkbenchError:
            pass                                   # said by the refresh below, inline
        check()                                    # (before the page's channel and timers exist)
        self.editor = MessageEditorPane(self.controller.ops, sizing_mode="stretch_width",
                                        **self.controller.editor_data())
        self.custom = pn.widgets.TextAreaInput(
            **{LABEL: "Custom template (Jinja; overrides Template)"}, height=220,
            placeholder="paste a Jinja chat template here", max_length=MAX_TEXT, sizing_mode="stretch_width",
            value=s.custom_source, stylesheets=[MONOSPACE], css_classes=["wb-custom-box"])
        self.custom_alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                          css_classes=["wb-custom-alert"])
        # JSON boxes in a monospace font, as code is (their errors name a line and a column).
        self.tools = pn.widgets.TextAreaInput(**{LABEL: "Tool schemas (JSON list)"}, height=220, max_length=MAX_TEXT,
                                              value=s.field_text("tools"), sizing_mode="stretch_width",
                                              placeholder='[{"type": "function", "function": {...}}]',
                                              stylesheets=[MONOSPACE], css_classes=["wb-tools-box"])
        self.tools_alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self.variables = pn.widgets.TextAreaInput(**{LABEL: "Prompt-template variables (JSON object)"}, height=160,
                                                  max_length=MAX_TEXT, value=s.field_text("variables"),
                                                  sizing_mode="stretch_width", placeholder='{"name": "value"}',
                                                  stylesheets=[MONOSPACE], css_classes=["wb-variables-box"])
        self.variables_alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self.alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width",
                                   css_classes=["wb-main-alert"])
        self.header = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS])
        self.budget = pn.pane.Plotly({"data": [], "layout": {}}, height=170, sizing_mode="stretch_width",
                                     config={"displayModeBar": False})
        self.view = TokenViewPane(sizing_mode="stretch_width")
        # The keystroke channel, where this page's server routes it (served by `serve`).
        self.channel = open_channel(AppEndpoint(self)) if self.host.doc is not None else None
        if self.channel is not None:
            self.editor.channel = self.view.channel = {"path": PATH, "token": self.channel.token}
            pn.state.on_session_destroyed(lambda _context, ch=self.channel: ch.close())
        if self.host.doc is not None:
            # A closed tab stops its page's background work (the panels' worker ends at its next turn).
            pn.state.on_session_destroyed(lambda _context: self.controller.close())
        self.cache = pn.pane.HTML('<div class="wb-cache">computing every turn…</div>', sizing_mode="stretch_width",
                                  stylesheets=[CSS])
        self.cache_chart = pn.pane.Plotly({"data": [], "layout": {}}, height=360, sizing_mode="stretch_width")
        self.diff = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS])
        self.fix_bar = PanelFixBar(self.controller, CSS)    # a Fix button per cause of the prefix diff
        self.kv_run = pn.widgets.Button(**{LABEL: "Prefill this turn (synthetic tiny model, CPU)"}, width=330,
                                        align="end")
        self.kv_cancel = pn.widgets.Button(**{LABEL: "Cancel the prefill"}, width=160, align="end", visible=False)
        self.kv_status = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS],
                                      css_classes=["wb-kv-status"])
        self.kv = pn.pane.HTML(kv_html(None), sizing_mode="stretch_width", stylesheets=[CSS])
        self.kv_chart = pn.pane.Plotly({"data": [], "layout": {}}, height=320, sizing_mode="stretch_width")
        self._prefill: Any = None
        self.semantic_run = pn.widgets.Button(**{LABEL: "Look this turn up in a semantic cache of the earlier turns"},
                                              width=420)
        self.semantic = pn.pane.HTML(semantic_html(None), sizing_mode="stretch_width", stylesheets=[CSS])
        semantic_labels = self._semantic_label_bar()
        self.teaching = TeachingPanel()
        self.run = RunPanel(self.controller)
        self.diagnostics = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS])
        compare_tab = self._compare_tab()

        self.session_select.param.watch(self._on_pick, "value")
        self.upload.param.watch(self._on_upload, "value")
        self.save_button.on_click(lambda _e: self._save())
        self.overwrite_button.on_click(lambda _e: self._save(overwrite=True))
        self.save_path.param.watch(lambda _e: self._unconfirm(), "value")
        self.kv_config.param.watch(lambda _e: self._kv_when_open(), "value")
        self.export_button.on_click(lambda _e: self._export())
        self.replace_button.on_click(lambda _e: self._export(overwrite=True))
        self.export_path.param.watch(lambda _e: self.replace_button.param.update(visible=False), "value")
        self.semantic_run.on_click(lambda _e: self._run_semantic())
        self.kv_run.on_click(lambda _e: self._run_prefill())
        self.kv_cancel.on_click(lambda _e: self.controller.cancel_prefill())
        self.revert_button.on_click(lambda _e: self._revert())
        self.turn_select.param.watch(lambda e: e.new and e.new != s.turn and self.controller.select_turn(int(e.new)),
                                     "value")
        self.custom.param.watch(self._on_custom, ["value_input", "value"])
        self.tools.param.watch(lambda *e: self._on_json("tools", e[-1].new, self.tools_alert), ["value_input", "value"])
        self.variables.param.watch(lambda *e: self._on_json("variables", e[-1].new, self.variables_alert),
                                   ["value_input", "value"])

        self._build_share(share_error)
        files = pn.Row(self.save_button, self.revert_button, self.overwrite_button, self.undo_button, self.redo_button,
                       self.share_button, sizing_mode="stretch_width")
        # Rendered when opened (dynamic): the template arguments' boxes are made anew for each template,
        # and new widgets in the page make the browser lay out the whole page again (400 ms on the
        # 1,000-message session's token view, on every template switch).
        extra = pn.Tabs(("Custom template", pn.Column(self.custom, self.custom_alert, sizing_mode="stretch_width")),
                        ("Template arguments", self.template_args.layout),
                        ("Tools", pn.Column(self.tools_alert, self.tools)),
                        ("Variables", pn.Column(self.variables_alert, self.variables)), sizing_mode="stretch_width",
                        dynamic=True)
        controls = pn.Column(pn.pane.HTML("<h2>Prompt Workbench</h2>"), self.session_select, self.follow_status,
                             "Or open a session file:", self.upload, self.save_path, files, self.file_status,
                             self.share_box,
                             pn.Row(self.export_path, self.export_button, self.replace_button,
                                    sizing_mode="stretch_width"),
                             self.export_status,
                             self.model_select, self.pickers.note,
                             pn.Row(self.turn_select, self.template_select, self.tokenizer_select),
                             self.budget_controls.layout,
                             "#### Messages", self.editor, extra, width=520)
        kv = pn.Column(wrapping(self.kv_config, self.kv_run, self.kv_cancel), self.kv_status, self.kv, self.kv_chart,
                       sizing_mode="stretch_width")
        self.panels_status = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS],
                                          css_classes=["wb-panels-status"])
        pages = [("Tokens", self.view), ("Cache", pn.Column(self.cache, self.cache_chart)),
                 ("Prefix diff", pn.Column(self.diff, self.fix_bar.layout, sizing_mode="stretch_width")), ("KV", kv),
                 ("Semantic", pn.Column(self.semantic_run, semantic_labels, self.semantic,
                                        sizing_mode="stretch_width")),
                 ("Teach", self.teaching.layout), ("Compare", compare_tab), ("Run", self.run.layout),
                 ("Diagnostics", self.diagnostics)]
        tabs = pn.Tabs(*pages, dynamic=False, sizing_mode="stretch_width")
        # The right column takes the width the left one leaves (flex, never a width of its own: Bokeh
        # kept Present's full width after it was switched off, 1,960 pixels on a 1,440 screen) and
        # stays in view while the messages on the left scroll (sticky, scrolling on its own).
        main = pn.Column(self.header, self.follow_call, self.alert, self.budget, self.panels_status, tabs,
                         sizing_mode="stretch_width", css_classes=["wb-main"],
                         styles={"flex": "1 1 0%", "min-width": "0", "position": "sticky", "top": "0",
                                 "align-self": "flex-start", "max-height": "100vh", "overflow-y": "auto"})
        self.layout = pn.Row(controls, main, sizing_mode="stretch_width")
        self._file_status()
        for k, (element, _reset) in enumerate(self._session_bound()):
            element.css_classes = [*element.css_classes, "wb-session-bound", f"wb-bound-{k}"]
        # The slower panels are computed for the open tab only (the Tokens tab needs none).
        names = [name for name, _ in pages]
        self.controller.views = NEEDS.get(names[tabs.active], frozenset())
        tabs.param.watch(lambda e: self.controller.set_views(NEEDS.get(names[e.new], frozenset())), "active")
        tabs.param.watch(lambda e: self.comparer.set_open(names[e.new] == "Compare"), "active")
        tabs.param.watch(lambda e: names[e.new] == "KV" and self._kv_stale and self._show_kv(), "active")
        self.tabs, self._tab_names, self._kv_stale = tabs, names, False
        self.controller.refresh()
        self.controller.request_panels()
        if follow is not None:
            # New calls are read on the follower's thread; it hands each change to this page's
            # document lock (call_from_thread), where `_follow_sync` applies it.
            self._follow_pending = False
            self._unsubscribe = unsubscribe = follow.subscribe(self._follow_wake)
            if self.host.doc is not None:
                pn.state.on_session_destroyed(lambda _context: unsubscribe())
            self._follow_sync()         # anything read between this page's start and its subscription

    def release(self) -> None:
        """Shown (built off the loop): its timers and hand-offs start now."""
        self.host.release()

    def close(self) -> None:
        """Never shown (built too late, or its tab closed meanwhile): its channel, its work and its
        followed log's updates stop, and what its host held is dropped."""
        self.host.drop()
        if self.channel is not None:
            self.channel.close()
        self.controller.close()
        if self.follow is not None:
            self._unsubscribe()

    def _turns(self) -> list[int]:
        return list(range(1, self.state.doc.turn_count + 1))

    def _build_share(self, error: str) -> None:
        """Undo and Redo (the editor's steps), and Share: the link and the notebook cell, shown on click."""
        self.undo_button = pn.widgets.Button(**{LABEL: "↶ Undo"}, width=80, css_classes=["wb-undo"])
        self.redo_button = pn.widgets.Button(**{LABEL: "↷ Redo"}, width=80, css_classes=["wb-redo"])
        self.share_button = pn.widgets.Button(**{LABEL: "Share"}, width=80, css_classes=["wb-share"])
        self.share_link = pn.widgets.TextInput(**{LABEL: "Link (this app opens it)"}, sizing_mode="stretch_width",
                                               css_classes=["wb-share-link"])
        self.share_copy = pn.widgets.Button(**{LABEL: "Copy"}, width=70, align="end", css_classes=["wb-share-copy"])
        # Copied in the page: the link can be long, and the clipboard is the browser's.
        self.share_copy.js_on_click(args={"box": self.share_link},
                                    code="navigator.clipboard && navigator.clipboard.writeText(box.value)")
        self.share_cell = pn.widgets.TextAreaInput(**{LABEL: "Notebook cell (rebuilds this state)"}, height=90,
                                                   max_length=MAX_TEXT, sizing_mode="stretch_width",
                                                   css_classes=["wb-share-cell"])
        self.share_status = pn.pane.HTML(self._share_note(error), sizing_mode="stretch_width", stylesheets=[CSS],
                                         css_classes=["wb-share-status"])
        self.share_fields = pn.Column(pn.Row(self.share_link, self.share_copy, sizing_mode="stretch_width"),
                                      self.share_cell, visible=False, sizing_mode="stretch_width")
        self.share_box = pn.Column(self.share_status, self.share_fields, sizing_mode="stretch_width")
        self.undo_button.on_click(lambda _e: self._undo())
        self.redo_button.on_click(lambda _e: self._undo(redo=True))
        self.share_button.on_click(lambda _e: self._share())

    @staticmethod
    def _share_note(error: str) -> str:
        return f'<div class="wb-share-error wb-diag-error">{html.escape(error)}</div>' if error else ""

    def _share(self) -> None:
        from ..share import MAX_CELL_CHARS
        try:
            cell = notebook_cell(share_text(self.state, max_chars=MAX_CELL_CHARS))
        except ShareError as exc:
            self.share_fields.visible = False
            self.share_status.object = self._share_note(f"not shared: {exc}")
            return
        try:
            text, note = share_text(self.state), ""
        except ShareError as exc:       # too long for a link: the cell still carries it
            text, note = "", f"no link: {exc}"
        self.share_link.value = link(self._base_url, text) if text else ""
        self.share_cell.param.update(value=cell, value_input=cell)
        self.share_fields.visible = True
        self.share_status.object = self._share_note(note)

    def _undo(self, redo: bool = False) -> None:
        did = self.controller.undo(redo=redo)
        self._file_status(f"{'redid' if redo else 'undid'}: {did}" if did else
                          f"nothing to {'redo' if redo else 'undo'}")

    def _file_status(self, note: str = "", error: str = "") -> None:
        s = self.state
        parts = [f"<b>{html.escape(s.doc.name)}</b> · {s.doc.turn_count} turns · {s.doc.format}"]
        if self._from_link:
            parts.append("opened from a shared link: its content, no file here (Save to keep it)")
        if s.restored_at is not None:
            parts.append("restored your unsaved edits (autosave); Revert drops them")
        elif s.doc.dirty:
            parts.append("edited (autosaved)" if self.controller.autosaved else "edited · autosaving…")
        if note:
            parts.append(html.escape(note))
        if error:
            parts.append(f'<span class="wb-file-error wb-diag-error">{html.escape(error)}</span>')
        shown = f'<div class="wb-file-status">{" · ".join(parts)}</div>'
        if self.file_status.object != shown:
            self.file_status.object = shown

    # events --------------------------------------------------------------------------------------
    def _on_pick(self, event: Any) -> None:
        if event.new is None or event.new == self._picked:
            return      # our own update (after a save or an upload), or nothing picked
        self._open(event.new)

    def _picker(self) -> dict[str, Any]:
        """The picker's options and value for the open session (`_picked`). A session with no file (an
        upload, a link) is offered as itself: a select with no value, the browser would send its
        first option back, and that session would open instead."""
        self._picked = self.files.key_of(self.state.doc.path)
        options = self.files.options()
        if self.follow is not None:      # the log's conversations first, newest first
            options = {**self.follow.options(self.state), **options}
            self._picked = self.follow.key(self.state) or self._picked
        if self._picked is None:
            self._picked = UNSAVED
            # A shared link's session is named as the link's, never as a file here of the same name.
            label = f"{self.state.doc.name} (from a shared link, not saved)" if self._from_link else \
                f"{self.state.doc.name} (not saved)"
            options = {label: UNSAVED, **options}
        return {"options": options, "value": self._picked}

    def _show_picked(self) -> None:
        """The picker's options and value as the folder and the open session are now, without opening."""
        self.session_select.param.update(**self._picker())

    def _open(self, target: str | SessionDocument) -> None:
        try:
            if self.follow is not None and isinstance(target, str) and target.startswith(FOLLOW_KEY):
                target = self.follow.make(target, self.state)    # a conversation of the log, read back
            self.controller.open(target)
        except WorkbenchError as exc:
            # Inline, beside the picker; the picker goes back to the session still open (a forged
            # value from the browser is refused the same way, whatever it names).
            self._show_picked()
            self._file_status(error=f"not opened: {exc}")
            return
        self._forget_session()
        self._from_link = False
        if self.follow is not None:
            self.follow.attach(self.state)
            self._show_follow()
        self._show_picked()
        self._compare_options()      # a snapshot pinned from the other session is not offered
        self.pickers.show()          # the note offers the model the new session's requests name
        self._remember()
        self.save_path.value = self.files.default_save_name(self.state.doc)
        self.export_path.value = self.files.default_export_name(self.state.doc)
        self._file_status()

    def _session_bound(self) -> list[tuple[Any, Callable[[], None]]]:
        """Every element that shows something of the open session beyond the session itself (what an
        action said: a share link, an export, a fix, an error, a prefill, a reply), with how it looks
        on a page just opened. Another session opening resets them all (`_forget_session`); each one
        carries the class `wb-session-bound`, which the browser test walks, so an element added here
        is checked without the test naming it."""
        computing = '<div class="wb-cache">computing every turn…</div>'

        def share() -> None:
            self.share_fields.visible = False
            self.share_link.value = ""
            self.share_cell.param.update(value="", value_input="")

        def hide(alert: Any) -> Callable[[], None]:
            return lambda: alert.param.update(object="", visible=False)

        def kv() -> None:
            self._prefill = None
            self._kv_status("")
            self.kv.object = kv_html(None)

        def semantic() -> None:
            self.semantic.object = semantic_html(None)
            self.semantic_label_row.visible = False
            self.semantic_label_status.object = ""

        return [
            (self.share_status, lambda: setattr(self.share_status, "object", "")),
            (self.share_fields, share),
            (self.export_status, lambda: setattr(self.export_status, "object", "")),
            (self.overwrite_button, lambda: setattr(self.overwrite_button, "visible", False)),
            (self.replace_button, lambda: setattr(self.replace_button, "visible", False)),
            (self.alert, hide(self.alert)), (self.custom_alert, hide(self.custom_alert)),
            (self.tools_alert, hide(self.tools_alert)), (self.variables_alert, hide(self.variables_alert)),
            (self.fix_bar.result, lambda: setattr(self.fix_bar.result, "object", "")),
            (self.cache, lambda: setattr(self.cache, "object", computing)),
            (self.diff, lambda: setattr(self.diff, "object", "")),
            (self.kv, kv), (self.kv_status, lambda: self._kv_status("")),
            (self.semantic, semantic), (self.semantic_label_status, semantic),
            (self.run.out, self.run.clear), (self.run.append, self.run.clear),
            (self.compare_status, lambda: self._compare_progress("")),
        ]

    def _forget_session(self) -> None:
        """Another session is open: nothing of the last one's stays on screen (see `_session_bound`)."""
        for _element, reset in self._session_bound():
            reset()

    def _remember(self) -> None:
        if self.state.autosave is not None:
            last_opened.remember(self.state.autosave.folder, self.files, self.state.doc.path)

    def _on_upload(self, event: Any) -> None:
        if not event.new:
            return
        # The browser names the upload: shown and proposed as a file name only once tamed (a name
        # like "../../x.json" is never a path here; saving it goes through the sessions folder).
        name = Path(str(self.upload.filename or "").replace("\\", "/")).name
        name = "".join(c for c in name if c.isprintable())[:100] or "upload.json"
        try:
            doc = SessionDocument.from_text(bytes(event.new).decode("utf-8"), name)
        except (WorkbenchError, UnicodeDecodeError) as exc:
            self._file_status(error=f"cannot open {name}: {exc}")
            return
        self._open(doc)

    def _unconfirm(self) -> None:
        if self.overwrite_button.visible:
            self.overwrite_button.visible = False
            self._file_status()

    def _save(self, overwrite: bool = False) -> None:
        name = self.save_path.value.strip()
        # Overwrite confirms the name it was shown for, not whatever the box holds by the time it is clicked.
        overwrite = overwrite and self.overwrite_button.visible and name == self._confirming[0]
        self.overwrite_button.visible = False
        try:
            target = self.controller.save(name or None, overwrite=overwrite)     # empty: the proposed name
        except OverwriteNeeded as exc:
            self._confirming = (exc.name, self._confirming[1])
            self.overwrite_button.visible = True     # the next click on it saves over that file
            self._file_status(error=f"not saved yet: {exc}")
            return
        except WorkbenchError as exc:
            self._file_status(error=f"not saved: {exc}")
            return
        self._show_picked()
        self._remember()
        # The session has a new name now: the proposed bundle follows it (the old one is another bundle).
        self.export_path.value = self.files.default_export_name(self.state.doc)
        self._file_status(f"saved to {target}")

    def _revert(self) -> None:
        if self.follow is not None and self.follow.copied(self.state) and self.follow.cid is not None:
            self._open(FOLLOW_KEY + self.follow.cid)     # an edited copy of a followed conversation: the log's
            self._file_status("reverted: following the log again")
            return
        self.controller.revert()
        self._file_status("reverted to the saved file")

    def _on_custom(self, *events: Any) -> None:
        new = events[-1].new
        if new is not None and new != self.state.custom_source:
            self.controller.choose(custom_source=new)
            self.pickers.show()      # a custom template overrides the model's: the note says so

    def _on_json(self, name: str, text: str | None, alert: Any) -> None:
        if text is None:
            return
        if text == self.state.field_text(name):   # back to what applies: its error (if any) is gone
            if alert.visible:
                alert.param.update(object="", visible=False)
            return
        error = self.controller.set_json(name, text)
        alert.param.update(object=html.escape(error), visible=bool(error))

    # output --------------------------------------------------------------------------------------
    def show_result(self, result: AssemblyResult) -> None:
        """The keystroke path: the token view's patch, and nothing else."""
        for alert in (self.alert, self.custom_alert):
            if alert.visible:
                alert.param.update(object="", visible=False)
        self.view.show(result, self.state.assembler().tokenizer, self.state.overflow)
        self.comparer.request()     # nothing unless the Compare tab is open

    def show_summary(self, result: AssemblyResult) -> None:
        self.header.object = self._header()
        self.budget.object = budget_figure(result, self.state.overflow)
        self.budget_controls.show()
        self.diagnostics.object = diagnostics_html(result)
        self.editor.counts = self.controller.token_counts()
        if self.state.doc.dirty and self.state.restored_at is None:
            self._file_status()
        if self.follow is not None:
            self._show_follow()

    def show_error(self, message: str) -> None:
        shown = message if self.state.result is None else \
            f"{message} — the view shows the last prompt that assembled ({self.state.shown})"
        if self.state.custom_failed:       # the box being typed in caused it: said there, not far above
            self.custom_alert.param.update(object=html.escape(shown), visible=True)
        else:
            self.alert.param.update(object=html.escape(shown), visible=True)
        self.view.error = message
        if self.view.header:
            # The summary line counts what the token view shows (the last good prompt), not an older one.
            self.header.object = self._header()

    def _header(self) -> str:
        """The summary line, and the chosen model's estimate label under it (hosted models)."""
        return header_html(self.view.header, estimate_html(self.state.model))

    def _chosen(self) -> None:
        """A model, template or tokenizer was chosen: the KV tab's shape and the summary line follow."""
        self._kv_when_open()
        if self.view.header:
            self.header.object = self._header()

    def show_editor(self, structural: bool) -> None:
        data = self.controller.editor_data()
        if not structural:
            data.pop("messages")
        self.editor.param.update(**data)
        if structural:
            self.budget_controls.reset()     # another session, or reverted: its own window and reserve
        if structural or self.turn_select.options != self._turns():
            self.turn_select.param.update(options=self._turns(), value=self.state.turn)
        elif self.turn_select.value != self.state.turn:
            self.turn_select.value = self.state.turn
        for name, box in (("tools", self.tools), ("variables", self.variables)):
            text = self.state.field_text(name)
            if box.value != text:
                box.param.update(value=text, value_input=text)

    def show_panels(self, panels: Panels) -> None:
        """The parts computed (the open tabs'); the others keep what they showed."""
        if self.follow is not None:
            self._show_follow()              # the logged call's line: the workbench's figures for its turn
        if "cache" in panels.parts:
            self.cache.object = cache_html(panels)
            self.cache_chart.object = panels.cache_figure
            if self._prefill is not None and self._prefill[0] != (panels.generation, panels.turn):
                self._prefill = None        # it was for another prompt
            # The KV tab's table is drawn when it is open (or opened): its paged view hashes every
            # turn's blocks, which a switch on the Cache tab would otherwise wait for.
            self._kv_when_open()
        if "diff" in panels.parts:
            self.diff.object = prefix_diff_html(panels.prefix_diff, panels.turn)
            self.fix_bar.update(panels.prefix_diff)
            self.teaching.update(self.state, panels, self.pickers.kv_choice())

    def show_panels_failed(self, error: str) -> None:
        """Every slower view says why it has nothing, rather than the figures of an older prompt."""
        note = not_computed_html(error)
        self.cache.object, self.diff.object = note, note
        self.fix_bar.update(None)
        self.cache_chart.object = None
        self.teaching.not_computed(note)

    # a followed log --------------------------------------------------------------------------------
    def _follow_first(self) -> None:
        """Open the log's newest conversation, if the follower has read the log (else `_follow_sync`
        opens it once it has)."""
        assert self.follow is not None
        newest = self.follow.newest() if self.follow.follower.caught_up else None
        if newest is None:
            return
        try:
            self.state.open(self.follow.make(newest, self.state))
        except WorkbenchError as exc:
            self.follow.note = f"not opened: {exc}"
            return
        self.follow.attach(self.state, chosen=False)

    def _follow_wake(self) -> None:
        """From the follower's thread: sync on this page's document lock, once however many changes came."""
        if not self._follow_pending:
            self._follow_pending = True
            self.host.call_from_thread(self._follow_sync)

    def _follow_sync(self) -> None:
        self._follow_pending = False
        assert self.follow is not None
        try:
            update = self.follow.sync(self.controller)
        except WorkbenchError as exc:        # shown in the status line; following goes on
            self.follow.note = str(exc)
            self._show_follow()
            return
        if update.open is not None:
            self._open(FOLLOW_KEY + update.open)
            self.follow.chosen = False       # opened for the user, not by them
            return
        if update.picker:
            self._show_picked()
        if update.reopened:
            self.pickers.show()              # the template the log names may have been chosen
        if update.added:
            self._file_status()
        self._show_follow()

    def _show_follow(self) -> None:
        assert self.follow is not None
        if self.follow.copied(self.state) and self.session_select.value != UNSAVED:
            self._show_picked()      # an edited copy: the picker says so; picking the log's entry follows it again
        status = self.follow.status_html(self.state)
        if self.follow_status.object != status:
            self.follow_status.object = status
        call = figures_html(self.follow.figures(self.state, self.controller.last_panels))
        if self.follow_call.object != call:
            self.follow_call.object = call

    # the Compare tab -----------------------------------------------------------------------------
    def _compare_tab(self) -> Any:
        """B differs from the live state in a template, a tokenizer or a version (the saved file, a
        pinned snapshot); computed on its own worker while the tab is open (compare.py)."""
        self.comparer = CompareRunner(self.state, self.host.call_later, self.host.call_from_thread,
                                      self._show_compare, self._compare_progress,
                                      background=self.host.doc is not None, hold=self.controller.yield_to_edits)
        choice = self.comparer.choice
        self.compare_kind = pn.widgets.Select(**{LABEL: "B differs in"}, options=list(KINDS), value=choice.kind,
                                              width=150)
        self.compare_value = pn.widgets.Select(**{LABEL: "B"}, options=values_for(choice.kind, self.state, choice),
                                               value=choice.value, width=180)
        self.compare_pin = pn.widgets.Button(**{LABEL: "Pin this version"}, width=140, align="end")
        self.compare_status = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS])
        self.compare_out = pn.pane.HTML(compare_html(None, note="comparing…"), sizing_mode="stretch_width",
                                        stylesheets=[CSS, COMPARE_CSS], css_classes=["wb-compare"])
        self.compare_kind.param.watch(lambda e: self._compare_choose(kind=e.new), "value")
        self.compare_value.param.watch(lambda e: e.new is not None and self._compare_choose(value=e.new), "value")
        self.compare_pin.on_click(lambda _e: self._compare_pin())
        return pn.Column(wrapping(self.compare_kind, self.compare_value, self.compare_pin), self.compare_status,
                         self.compare_out, sizing_mode="stretch_width")

    def _compare_choose(self, **choice: str) -> None:
        self.comparer.choose(**choice)
        self._compare_options()

    def _compare_pin(self) -> None:
        self.comparer.pin()
        self._compare_options()

    def _compare_options(self) -> None:
        c = self.comparer.choice
        options = values_for(c.kind, self.state, c)
        if self.compare_kind.value != c.kind:
            self.compare_kind.value = c.kind
        if list(self.compare_value.options) != options or self.compare_value.value != c.value:
            self.compare_value.param.update(options=options, value=c.value if c.value in options else None)

    def _show_compare(self, comparison: Any, error: str) -> None:
        self.compare_out.object = compare_html(comparison, error)

    def _compare_progress(self, text: str) -> None:
        self.compare_status.object = f'<div class="wb-muted">{html.escape(text)}</div>' if text else ""

    def _run_semantic(self) -> None:
        self.semantic_run.disabled = True
        self.semantic.object = semantic_html(None, note="loading the embedder, replaying the earlier turns…")

        def done(result: Any, error: str) -> None:
            self.semantic_run.disabled = False
            pairs = self._semantic_pairs = self.controller.semantic_pairs(result[0]) if result else None
            self.semantic.object = semantic_html(None, note=f"failed: {error}") if error else \
                semantic_html(*result, pairs=pairs)
            options = dict(neighbour_options(result[0], pairs)) if result else {}
            self.semantic_pick.param.update(options=options, value=next(iter(options.values()), None))
            self.semantic_label_row.visible = bool(options)
            self.semantic_label_status.object = ""

        self.controller.run_semantic(done)

    def _semantic_label_bar(self) -> Any:
        """Label a pair the Semantic tab shows (this turn and one neighbour) as should hit or should
        miss, into the user's labels file in the sessions folder (semantic_labels.py)."""
        from .semantic_labels import category_options
        self._semantic_pairs: Any = None
        self.semantic_pick = pn.widgets.Select(**{LABEL: "Neighbour to label"}, options={},
                                               width=300)
        self.semantic_category = pn.widgets.Select(**{LABEL: "Category of the label"}, options=dict(category_options()),
                                                   width=230)
        self.semantic_hit = pn.widgets.Button(**{LABEL: "Should reuse (hit)"}, width=150, align="end",
                                              css_classes=["wb-label-hit"])
        self.semantic_miss = pn.widgets.Button(**{LABEL: "Should not reuse (miss)"}, width=180, align="end",
                                               css_classes=["wb-label-miss"])
        self.semantic_label_status = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[CSS])
        self.semantic_hit.on_click(lambda _e: self._label_semantic(True))
        self.semantic_miss.on_click(lambda _e: self._label_semantic(False))
        self.semantic_label_row = wrapping(self.semantic_pick, self.semantic_category, self.semantic_hit,
                                         self.semantic_miss, visible=False)
        return pn.Column(self.semantic_label_row, self.semantic_label_status, sizing_mode="stretch_width")

    def _label_semantic(self, should_hit: bool) -> None:
        try:
            added = self.controller.label_semantic(self._semantic_pairs, self.semantic_pick.value, should_hit,
                                                   self.semantic_category.value or None)
        except WorkbenchError as exc:       # the pair is gone, the category does not fit, the file refused
            self.semantic_label_status.object = label_html(None, str(exc))
            return
        self.semantic_label_status.object = label_html(added)

    def _export(self, overwrite: bool = False) -> None:
        name = self.export_path.value.strip()
        overwrite = overwrite and self.replace_button.visible and name == self._confirming[1]
        self.replace_button.visible = False
        self.export_button.disabled = True

        def done(result: Any, error: str) -> None:
            self.export_button.disabled = False
            self.export_status.object = export_html(result, error)

        try:
            self.controller.run_export(name, done, overwrite=overwrite)
        except WorkbenchError as exc:     # refused or to confirm: said at once, nothing written
            self.export_button.disabled = False
            if isinstance(exc, OverwriteNeeded):
                self._confirming = (self._confirming[0], exc.name)
                self.replace_button.visible = True
            self.export_status.object = export_html(None, str(exc)).replace("export failed:", "not exported:")
            return
        if self.export_button.disabled:   # still running (a background export): say so meanwhile
            self.export_status.object = '<div class="wb-export">exporting: every turn assembled, then verified…</div>'

    def _kv_when_open(self) -> None:
        """The KV tab's table and chart now if the tab is open, else when it opens: its paged view hashes
        every turn's blocks (half a second on the 1,000-message session), on the page's thread."""
        self._kv_stale = True
        tabs = getattr(self, "tabs", None)           # (a choice made while the page is being built)
        if tabs is not None and tabs.active == self._tab_names.index("KV"):
            self._show_kv()

    def _show_kv(self, note: str = "") -> None:
        self._kv_stale = False
        p, kv = self.controller.last_panels, self.pickers.kv_choice()
        self.kv.object = kv_html(p, kv.config, self._prefill[1] if self._prefill else None, note, kv.note)
        self.kv_chart.object = kv_figure(p, kv.config)

    def _run_prefill(self) -> None:
        self.kv_run.disabled = True
        self.kv_cancel.visible = True
        self._kv_status("prefill: loading the model…")
        at = (self.state.generation, self.state.turn)

        def done(result: Any, error: str) -> None:
            self.kv_run.disabled = False
            self.kv_cancel.visible = False
            if result is not None:
                self._prefill = (at, result)
            self._kv_status("prefill cancelled" if error == CANCELLED else "")
            self._show_kv(f"prefill failed: {error}" if error and error != CANCELLED else "")

        self.controller.run_prefill(done, progress=self._kv_status)

    def _kv_status(self, text: str) -> None:
        self.kv_status.object = f'<div class="wb-muted">{html.escape(text)}</div>' if text else ""


def build_app(session_path: str | None = None, files: AppFiles | None = None, model: str | None = None,
              follow: LogFollower | None = None) -> Any:
    """The app's Panel object (one per browser session: each has its own state). A page opened
    with `?state=` (a shared link) starts on that state; otherwise on `model` (a catalog name), if given.
    `follow`: the followed log (one follower for every page)."""
    _serve_panel_files_locally()
    share, host = _request_share()
    doc = pn.state.curdoc
    if share is None or doc is None or doc.session_context is None:
        return WorkbenchApp(session_path, files=files, share=share, host_header=host, model=model,
                            follow=follow).layout
    pn.extension("plotly")      # before the page is first sent: its resources (plotly.js) are chosen then

    # A link's page is built off the event loop, with a deadline (opening.py): what it holds is the
    # sender's choice (megabytes of messages, a template that loops), and every other page's
    # keystrokes wait for whatever runs on the loop.
    def page(link_error: str = "", check: Callable[[], None] | None = None) -> WorkbenchApp:
        return WorkbenchApp(session_path, files=files, share=share, host_header=host, model=model,
                            follow=follow, held=True, link_error=link_error, check=check)

    def late(seconds: float) -> str:
        return (f"this link did not open within {seconds:g} s (its {len(share or ''):,} characters were still "
                "being decoded, rendered and assembled on the server) — showing the default session instead; share a "
                "shorter session, or save it to a file and open that (the server's WORKBENCH_OPEN_DEADLINE_S "
                "sets this limit)")

    note = f"opening the shared link ({len(share):,} characters): decoding and assembling its session…"
    opening = Opening(doc, lambda check: page(check=check), page, note=note, late=late, deadline=deadline_s())
    return opening.start().layout


def _serve_panel_files_locally() -> None:
    """Point this page's stylesheets at the app's own server, never at Panel's CDN (the app works
    offline). Panel sets that for a session it renders into the page's HTML; when the session
    expires before the page connects (a slow page, a short WORKBENCH_SESSION_EXPIRY_MS), Bokeh makes
    a new one for the websocket, and Panel, finding no setting there, falls back to its CDN."""
    from panel.io.resources import LOCAL_DIST
    doc = pn.state.curdoc
    if doc is not None and doc.session_context is not None and "dist_url" not in doc._template_variables:
        doc._template_variables["dist_url"] = f"{pn.state.rel_path}/{LOCAL_DIST}" if pn.state.rel_path else LOCAL_DIST


def _request_share() -> tuple[str | None, str | None]:
    """The page request's `state` argument (a shared link) and Host header, where a server built it."""
    ctx = pn.state.curdoc.session_context if pn.state.curdoc is not None else None
    request = getattr(ctx, "request", None)
    if request is None:
        return None, None
    values = (getattr(request, "arguments", None) or {}).get("state") or []
    share = values[0].decode("latin-1") if values and isinstance(values[0], bytes) else None
    host = (getattr(request, "headers", None) or {}).get("Host")
    return share, host if isinstance(host, str) else None


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def session_expiry() -> dict[str, int]:
    """How soon a closed tab's session is destroyed (its state freed, its background work stopped):
    Bokeh's defaults (15 s after the last connection, checked every 17 s) unless
    WORKBENCH_SESSION_EXPIRY_MS names one delay for both (the tests, a machine short of memory)."""
    value = os.environ.get("WORKBENCH_SESSION_EXPIRY_MS", "")
    if not value.isdigit() or int(value) <= 0:
        return {}
    return {"unused_session_lifetime_milliseconds": int(value), "check_unused_sessions_milliseconds": int(value)}


def serve(session: str | None = None, host: str = "127.0.0.1", port: int = 0, show: bool = False, *,
          sessions: str | None = None, export_dir: str | None = None, model: str | None = None,
          follow: str | None = None) -> None:
    """Serve the app on http://HOST:PORT/ (a free port when 0) until interrupted; prints the URL first.
    Its files: `sessions` (default WORKBENCH_HOME/sessions) and `export_dir` (default `exports/` in it),
    made now if missing; what crashed saves left there (and in the autosave folder) is removed first.
    `follow`: a request log to follow live (follow.py): read on one background thread from the start,
    its conversations in every page's picker."""
    if session is not None:
        load_session(session)   # a bad file fails now, with its one-line error, not in every page
    if model is not None:
        from ..catalog import lookup
        lookup(model)           # an unknown model too (ModelNotFoundError, the closest names)
    files = AppFiles.create(sessions, export_dir, given=session)
    files.prepare()             # a folder that cannot be made fails the command, not the first save
    removed = files.sweep(Autosave().folder)
    if removed:
        print(f"removed {len(removed)} temporary file(s) left by an interrupted save", file=sys.stderr, flush=True)
    follower = LogFollower(follow).start() if follow is not None else None
    try:
        port = port or free_port(host)
        if host in ("0.0.0.0", "::"):   # every interface: pages may come from any address of this machine
            origins = [f"*:{port}"]
        else:
            origins = [f"{host}:{port}"] + ([f"localhost:{port}"] if host in ("127.0.0.1", "::1") else [])
        def page() -> Any:  # a plain function: Panel calls it once per browser session
            return build_app(session, files, model, follower)

        server = pn.serve({"/": page}, address=host, port=port, websocket_origin=origins,
                          extra_patterns=handlers(origins), show=False, start=False, title="Prompt Workbench",
                          verbose=False, **session_expiry())
    except OSError as exc:
        if follower is not None:
            follower.stop()
        raise WorkbenchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                             hint="pick another --port, or --host") from None
    refuse_malformed_origins(server._tornado)   # Bokeh's Server keeps its Tornado Application there
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
    # Said once the loop runs: a Ctrl-C right after the line then always meets a running server.
    server.io_loop.add_callback(lambda: print(f"serving on {url}", flush=True))
    if show:
        import webbrowser
        server.io_loop.add_callback(webbrowser.open, url)
    server.start()
    try:
        server.io_loop.start()
    finally:
        server.stop()
        if follower is not None:
            follower.stop()
        sys.stdout.flush()
