"""Notebook widgets (anywidget): the token view, fed by patches over the widget's message channel.

The front end (`widgets/token_view.js` and `.css`, no build step) keeps the segments it was sent.
Each update sends only a patch: the segments after the first one that changed, with their token
ids, token ends and special-token flags as binary buffers. A newly displayed view asks for the
whole state ("sync") and gets a patch that keeps nothing.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from .._optional import require
from ..assembly import Assembler
from ..assembly.result import AssemblyResult
from ..assets import widget_file
from .teaching import StepThrough
from .viewmodel import Patch, PatchFeed

_anywidget = require("anywidget", "the notebook widgets")
_traitlets = require("traitlets", "the notebook widgets")


class TokenView(PatchFeed, _anywidget.AnyWidget):  # type: ignore[misc, name-defined]
    """The rendered prompt as coloured segments, special tokens marked, token id and segment on hover."""

    _esm = widget_file("token_view.js")
    _css = widget_file("token_view.css")
    header = _traitlets.Dict().tag(sync=True)          # small: totals, budget, diagnostics
    version = _traitlets.Int(0).tag(sync=True)         # bumps with each patch
    error = _traitlets.Unicode("").tag(sync=True)      # shown inline; the view keeps the last good state

    def __init__(self, result: AssemblyResult | None = None, *, assembler: Assembler | None = None, **kw: Any):
        super().__init__(**kw)
        self._assembler = assembler
        self.patches_sent: list[int] = []   # bytes of each patch sent (for tests and the benchmark)
        self.on_msg(self._on_front_end)
        if result is not None:
            self.show(result)

    def show(self, result: AssemblyResult) -> Patch:
        """Show a result: send the front end what changed since the last one."""
        from ..tokenizers import get_tokenizer
        if self._assembler is not None and self._assembler.tokenizer.version == result.tokenizer["version"]:
            tok = self._assembler.tokenizer
        else:
            tok = get_tokenizer(result.tokenizer["name"])
        return self._feed(result, tok)

    def _deliver(self, patch: Patch) -> None:
        content, buffers = patch.message()
        self.header = patch.header
        self.error = ""
        self.version += 1
        self.send(content, buffers)

    def _on_front_end(self, _widget: Any, content: dict, _buffers: list) -> None:
        if content.get("type") == "sync":
            self._resync()


# The tab strip wraps onto a second line rather than shrinking its titles: in a narrow JupyterLab
# cell, Lumino cut nine tabs down until "Diagnostics" no longer showed.
TAB_CSS = """
.wb-tabs > .lm-TabBar { height: auto !important; min-height: var(--jp-widgets-horizontal-tab-height, 24px); }
.wb-tabs > .lm-TabBar .lm-TabBar-content { flex-wrap: wrap; }
.wb-tabs > .lm-TabBar .lm-TabBar-tab { flex: 0 0 auto !important; min-width: fit-content; }
"""


class MessageEditor(_anywidget.AnyWidget):  # type: ignore[misc, name-defined]
    """The messages of a session: add, delete, reorder, edit role, content, tool calls and results.
    Each edit arrives as an operation and goes to `on_op`; text edits are not echoed back."""

    _esm = widget_file("message_editor.js")
    _css = widget_file("message_editor.css")
    messages = _traitlets.List().tag(sync=True)
    turn_cut = _traitlets.Int(0).tag(sync=True)
    format = _traitlets.Unicode("openai").tag(sync=True)
    error = _traitlets.Dict().tag(sync=True)
    counts = _traitlets.List().tag(sync=True)          # each message's tokens in the prompt shown
    parts = _traitlets.List().tag(sync=True)           # per message: None, or its text parts and media chips
    items = _traitlets.List().tag(sync=True)           # per row of a Responses request: its kind and fields
    session = _traitlets.Int(0).tag(sync=True)         # bumped when another session opens

    def __init__(self, on_op: Any = None, data: dict | None = None, **kw: Any):
        super().__init__(**(data or {}), **kw)
        self._on_op = on_op
        self._data = data
        self.on_msg(self._on_front_end)

    def _on_front_end(self, _widget: Any, content: dict, _buffers: list) -> None:
        if content.get("type") == "op" and self._on_op is not None:
            self._on_op({k: v for k, v in content.items() if k != "type"})
        elif content.get("type") == "sync":
            # A newly displayed view: text edits were not echoed, so send the current list.
            self.send_state("messages")


def budget_bar(result: AssemblyResult) -> Any:
    """The budget bar alone (a Plotly FigureWidget)."""
    from .charts import budget_figure
    go = require("plotly.graph_objects", "the notebook charts")
    return go.FigureWidget(budget_figure(result))


def _panels(session: Any, template: str, turn: int | None) -> Any:
    from .document import SessionDocument
    from .state import WorkbenchState
    if isinstance(session, dict):
        session = SessionDocument(session, None, str(session.get("title") or "session") + ".json")
    state = WorkbenchState(session if isinstance(session, SessionDocument) else str(session),
                           autosave=None, template=template, restore=False)
    if turn is not None:
        state.select_turn(turn)
    state.assemble()
    return state.panels()


def cache_panel(session: Any, *, template: str = "qwen2.5", turn: int | None = None) -> Any:
    """The cache panel alone for a session file (or request dict): where this turn's segments came
    from, hit rates, and the cached tokens per turn under each provider simulation (Plotly)."""
    from .html import CSS, cache_html
    W = require("ipywidgets", "the notebook widgets")
    go = require("plotly.graph_objects", "the notebook charts")
    p = _panels(session, template, turn)
    return W.VBox([W.HTML(f"<style>{CSS}</style>{cache_html(p)}"), go.FigureWidget(p.cache_figure)])


def prefix_diff_view(session: Any, *, template: str = "qwen2.5", turn: int | None = None) -> Any:
    """The prefix diff alone: this turn against the previous one, the first diverging token
    highlighted in both, with the cause and the advice."""
    from .html import CSS, prefix_diff_html
    W = require("ipywidgets", "the notebook widgets")
    p = _panels(session, template, turn)
    return W.HTML(f"<style>{CSS}</style>{prefix_diff_html(p.prefix_diff, p.turn)}")


def _replace_figure(widget: Any, figure: dict) -> None:
    with widget.batch_update():
        widget.data = []
        widget.add_traces(figure["data"])
        widget.layout = figure["layout"]


class _NotebookHost:
    """The Controller's hooks in a kernel: edits from the front end assemble on the kernel's event
    loop (coalesced); the panels' worker updates its widgets from its own thread (ipywidgets sends
    from any thread), so a cell can wait for it."""

    def __init__(self, wb: "Workbench"):
        self.wb = wb

    def call_later(self, delay_ms: int, fn: Any) -> None:
        import asyncio
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            loop = None
        if loop is None or not loop.is_running() or self.wb.synchronous:
            fn()    # no event loop to come back to (a script), or a scripted call: now
        else:
            loop.call_later(delay_ms / 1000, fn)

    def call_from_thread(self, fn: Any) -> None:
        fn()

    def show_result(self, result: AssemblyResult) -> None:
        self.wb._show_result(result)

    def show_summary(self, result: AssemblyResult) -> None:
        self.wb._show_summary(result)

    def show_error(self, message: str) -> None:
        self.wb._show_error(message)

    def show_editor(self, structural: bool) -> None:
        self.wb._show_editor(structural)

    def show_edit_error(self, error: dict) -> None:
        if error or self.wb.editor.error:
            self.wb.editor.error = error

    def show_panels(self, panels: Any) -> None:
        self.wb._show_panels(panels)

    def show_panels_failed(self, error: str) -> None:
        self.wb._show_panels_failed(error)

    def show_progress(self, text: str) -> None:
        self.wb.panels_status.value = f'<span class="wb-muted">{escape(text)}</span>' if text else ""

    def show_autosaved(self) -> None:
        pass    # a notebook keeps its edits in the kernel; an autosave, when asked for, needs no notice


class _NotebookRun:
    """The Run tab in a notebook (run_panel.py): engine, max new tokens, Generate, Cancel; the reply is
    shown, and written to the session only by "Append this reply" (or `Workbench.append_reply()`)."""

    def __init__(self, wb: "Workbench"):
        from .run_panel import DEFAULT_MAX_NEW, ENGINES, run_html
        W = wb._W
        self.wb, self.last = wb, None
        self.engine = W.Dropdown(description="Engine", options=list(ENGINES), layout=W.Layout(width="auto"))
        self.target = W.Text(placeholder="model folder, .gguf file or http://127.0.0.1:8000",
                             layout=W.Layout(width="auto"))
        self.max_new = W.BoundedIntText(value=DEFAULT_MAX_NEW, min=1, max=512, description="Max new")
        self.generate, self.cancel = W.Button(description="Generate"), W.Button(description="Cancel", disabled=True)
        self.append = W.Button(description="Append this reply to the session", layout=W.Layout(width="auto",
                                                                                              display="none"))
        self.out = W.HTML(run_html(None))
        self._unappended: tuple[Any, int] | None = None      # the reply shown, and its prompt's generation
        self.generate.on_click(lambda _b: self.run(None, None, wait=False))
        self.cancel.on_click(lambda _b: wb.controller.cancel_generate())
        self.append.on_click(lambda _b: self.append_reply())
        self.widget = W.VBox([W.HBox([self.engine, self.target, self.max_new, self.generate, self.cancel]), self.out,
                              self.append])

    def _offer(self, pending: "tuple[Any, int] | None") -> None:
        self._unappended = pending
        self.append.layout.display = None if pending is not None else "none"

    def append_reply(self) -> str:
        """Append the reply shown to the session (one undo step); what was done, in words."""
        from .run_panel import run_html
        if self._unappended is None:
            return "no reply to append: Generate first"
        outcome, generation = self._unappended
        self._offer(None)
        said = self.wb.controller.append_reply(outcome.text, generation)
        self.out.value = run_html(outcome, appended=said)
        return said

    def clear(self) -> None:
        """Another session: the reply shown answered the previous one."""
        from .run_panel import run_html
        self.last = None
        self._offer(None)
        self.out.value = run_html(None)

    def run(self, engine: str | None, max_new: int | None, wait: bool) -> Any:
        from ..errors import WorkbenchError
        from .run_panel import engine_spec, run_html
        try:
            spec = engine if engine is not None else engine_spec(self.engine.value, self.target.value)
        except WorkbenchError as exc:
            self.out.value = run_html(self.last, error=str(exc))
            return None

        def show(result: Any, error: str) -> None:
            self.generate.disabled, self.cancel.disabled = False, True
            if result is None:
                self.out.value = run_html(self.last, error=f"no reply: {error}")
                return
            self.last, generation = result
            self._offer((self.last, generation))
            self.out.value = run_html(self.last)

        def progress(text: str) -> None:
            self.out.value = run_html(None, status=text)

        self._offer(None)
        self.generate.disabled, self.cancel.disabled = True, False
        self.out.value = run_html(None, status=f"generating on {spec}…")
        got = self.wb._request(lambda done: self.wb.controller.run_generate(
            spec, int(max_new or self.max_new.value), done, progress), show, wait)
        return got[0] if got else None


class Workbench:
    """The whole workbench in a notebook cell: session, turn, template and tokenizer pickers, the
    message editor, tool-schema and variable editors, a custom template box, and the token view,
    budget bar, cache panel, prefix diff, teaching step-through and diagnostics. Display it (it is
    the last value of a cell, or `display(wb)`); `wb.widget` is the ipywidgets box.

    `session`: a session file path (default: the shipped support chat), or a request/conversation
    dict. `template_args`: the chat template's arguments (`{"enable_thinking": False}`), as
    `--template-arg` gives them (a bad one raises TemplateError); the Template arguments box sets
    them in the page, `choose(template_args=...)` from code, `template_args` reads them. Edits made
    in the page update the views live; the Python methods (`edit`, `choose`, `select_turn`) update
    them before they return, for scripted notebooks."""

    def __init__(self, session: Any = None, *, template: str = "qwen2.5", autosave: Any = None,
                 shared: Any = None, model: str | None = None, follow: Any = None,
                 template_args: dict[str, Any] | None = None):
        from ..errors import WorkbenchError
        from .controller import Controller
        from .document import SessionDocument
        from .model_picker import NotebookPickers
        from .state import WorkbenchState

        W = require("ipywidgets", "the notebook widgets")
        self._W = W
        self.synchronous = False
        if isinstance(session, dict):
            session = SessionDocument(session, None, str(session.get("title") or "session") + ".json")
        elif session is not None:
            session = str(session)
        self.state = WorkbenchState(session, autosave=autosave, template=template)
        if shared is not None:      # a SharedState (from_share): its session, choices and turn
            from .sharing import apply_shared
            apply_shared(self.state, shared)
        self.controller = Controller(self.state, _NotebookHost(self), background=True)
        if model is not None:        # a catalog model: an unknown name is said under the picker
            try:
                self.state.choose(model=model)
            except WorkbenchError as exc:    # ModelNotFoundError: shown inline, the widget opens
                self.state.model_error = str(exc)
        if template_args is not None:  # given in code: a bad one is the caller's TemplateError, now
            self.state.choose(template_args=template_args)
        # A followed log (`Workbench.follow`, follow.py): the widget opens on its newest conversation.
        self.follower = follow
        self.follow_view: Any = None
        if follow is not None:
            from .follow import FollowView
            self.follow_view = FollowView(follow)
            newest = self.follow_view.newest() if follow.caught_up else None
            if newest is not None:
                try:
                    self.state.open(self.follow_view.make(newest, self.state))
                    self.follow_view.attach(self.state, chosen=False)
                except WorkbenchError as exc:
                    self.follow_view.note = f"not opened: {exc}"
        s = self.state
        self._picker_quiet = False
        self.session_select = W.Dropdown(description="Session", options=self._session_options(),
                                         value=self._session_value())
        self.follow_status, self.follow_call = W.HTML(), W.HTML()
        self.turn_select = W.Dropdown(description="Turn", options=self._turns(), value=s.turn)
        # The model, template and tokenizer pickers, and the KV tab's shape (model_picker.py).
        self.pickers = NotebookPickers(self.controller)
        self.model_select, self.template_select = self.pickers.model, self.pickers.template
        self.tokenizer_select, self.kv_config = self.pickers.tokenizer, self.pickers.kv
        self.pickers.on_choice = self._chosen
        self.editor = MessageEditor(self.controller.op, self.controller.editor_data())
        from .budget_controls import NotebookBudgetControls
        self.budget_controls = NotebookBudgetControls(self.controller)
        from .template_args import NotebookTemplateArgs
        self.template_args_control = NotebookTemplateArgs(self.controller)   # follows every choice itself
        box = dict(layout=W.Layout(width="100%", height="160px"))
        self.custom = W.Textarea(value=s.custom_source, placeholder="paste a Jinja chat template here", **box)
        self.tools = W.Textarea(value=s.field_text("tools"), **box)
        self.variables = W.Textarea(value=s.field_text("variables"), **box)
        self.tools_error, self.variables_error = W.HTML(), W.HTML()
        self.alert = W.HTML()
        self.header = W.HTML()
        self.budget = None
        self.view = TokenView()
        self.cache = W.HTML("computing every turn…")
        self.cache_chart = None
        self.diff = W.HTML()
        from .kv_panel import kv_html
        self.kv_run = W.Button(description="Prefill this turn (synthetic tiny, CPU)",
                               layout=W.Layout(width="auto"))
        self.kv_cancel = W.Button(description="Cancel the prefill", layout=W.Layout(width="auto", display="none"))
        self.kv_status = W.HTML()
        self.kv = W.HTML(kv_html(None))
        from ..home import workbench_home
        self.export_path = W.Text(value=str(workbench_home() / "exports" / Path(s.doc.name).stem),
                                  description="Export to", layout=W.Layout(width="100%"))
        self.export_button = W.Button(description="Export bundle")
        self.export_status = W.HTML()
        from .semantic_panel import semantic_html
        self.semantic_run = W.Button(description="Look this turn up in a semantic cache", layout=W.Layout(width="auto"))
        self.semantic_out = W.HTML(semantic_html(None))
        semantic_labels = self._semantic_label_bar()
        self.kv_chart = None
        self._prefill: Any = None
        self.teach_title, self.teach_body = W.HTML(), W.HTML()
        self.teach_back, self.teach_next = W.Button(description="◀ Back"), W.Button(description="Next ▶")
        self.teach_present = W.ToggleButton(description="Present", tooltip="large type, one idea per screen")
        self.teach = StepThrough()
        self.diagnostics = W.HTML()
        compare_tab = self._compare_tab()
        self.run_tab = _NotebookRun(self)

        self.session_select.observe(lambda c: c["new"] and not self._picker_quiet and self._open(c["new"]), "value")
        self._quiet = False
        self.turn_select.observe(lambda c: not self._quiet and c["new"] and c["new"] != s.turn and
                                 self.controller.select_turn(c["new"]),
                                 "value")
        self.custom.observe(lambda c: c["new"] != s.custom_source and self._custom(c["new"]), "value")
        self.tools.observe(lambda c: self._on_json("tools", c["new"], self.tools_error), "value")
        self.variables.observe(lambda c: self._on_json("variables", c["new"], self.variables_error), "value")
        self.kv_config.observe(lambda _c: self._show_kv(), "value")
        self.kv_run.on_click(lambda _b: self.prefill(wait=False))
        self.kv_cancel.on_click(lambda _b: self.cancel_prefill())
        self.export_button.on_click(lambda _b: self.export(wait=False))
        self.semantic_run.on_click(lambda _b: self.semantic(wait=False))
        self.teach_back.on_click(lambda _b: self._teach(-1))
        self.teach_next.on_click(lambda _b: self._teach(+1))
        self.teach_present.observe(lambda c: self._present(c["new"]), "value")

        self.controller.refresh()
        result = s.result
        go = require("plotly.graph_objects", "the notebook charts")
        from .charts import budget_figure
        self.budget = go.FigureWidget(budget_figure(result) if result is not None else {"data": [], "layout": {}})
        self.cache_chart = go.FigureWidget({"data": [], "layout": {}})
        self.kv_chart = go.FigureWidget({"data": [], "layout": {}})
        from .html import CSS
        extra = W.Tab(children=[self.custom, W.VBox([self.tools_error, self.tools]),
                                W.VBox([self.variables_error, self.variables]),
                                W.VBox([self.export_path, self.export_button, self.export_status])])
        for i, t in enumerate(("Custom template", "Tools", "Variables", "Export")):
            extra.set_title(i, t)
        from .fix_buttons import NotebookFixBar
        self.fix_bar = NotebookFixBar(self.controller, CSS)    # a Fix button per cause of the prefix diff
        tabs = W.Tab(children=[self.view, W.VBox([self.cache, self.cache_chart]), W.VBox([self.diff,
                                                                                          self.fix_bar.layout]),
                               W.VBox([W.HBox([self.kv_config, self.kv_run, self.kv_cancel]), self.kv_status, self.kv,
                                       self.kv_chart]),
                               W.VBox([self.semantic_run, semantic_labels, self.semantic_out]),
                               W.VBox([W.HBox([self.teach_back, self.teach_next, self.teach_present, self.teach_title]),
                                       self.teach_body]),
                               compare_tab, self.run_tab.widget, self.diagnostics])
        names = ("Tokens", "Cache", "Prefix diff", "KV", "Semantic", "Teach", "Compare", "Run", "Diagnostics")
        for i, t in enumerate(names):
            tabs.set_title(i, t)
        # The slower panels are computed for the open tab only (`wait()` computes them all).
        from .state import NEEDS
        self.controller.views = NEEDS.get(names[tabs.selected_index or 0], frozenset())
        tabs.observe(lambda c: self.controller.set_views(NEEDS.get(names[c["new"] or 0], frozenset())),
                     "selected_index")
        tabs.observe(lambda c: self.comparer.set_open(names[c["new"] or 0] == "Compare"), "selected_index")
        tabs.add_class("wb-tabs")
        self.tabs = tabs
        self.panels_status = W.HTML()
        self.undo_button, self.redo_button = W.Button(description="↶ Undo"), W.Button(description="↷ Redo")
        self.undo_button.on_click(lambda _b: self.undo())
        self.redo_button.on_click(lambda _b: self.redo())
        left = W.VBox([self.session_select, self.follow_status, self.model_select, self.pickers.note, self.turn_select,
                       self.template_select, self.tokenizer_select,
                       self.budget_controls.layout, self.template_args_control.layout,
                       W.HBox([self.undo_button, self.redo_button]), self.editor, extra],
                      layout=W.Layout(width="40%"))
        from .follow import CSS as FOLLOW_CSS
        right = W.VBox([W.HTML(f"<style>{CSS}{FOLLOW_CSS}{TAB_CSS}</style>"), self.header, self.follow_call, self.alert,
                        self.budget,
                        self.panels_status, tabs],
                       layout=W.Layout(width="60%"))
        self.widget = W.HBox([left, right])
        self.controller.request_panels()

    @classmethod
    def follow(cls, log: Any, **kw: Any) -> "Workbench":
        """The workbench on a request log followed live (docs/workbench.md, "Following a request
        log"): the session picker lists its conversations, newest first; each call logged from now on
        becomes a new turn of its conversation. The log as it is now is read here, then a background
        thread polls it every 0.2 s. In a running kernel each change is applied on the kernel's event
        loop (after the running cell, or while a cell awaits); `wb.poll()` reads and applies at once
        (a script). The log is only read; an edit makes the shown conversation a copy.
        `wb.stop_following()` ends it."""
        from .follow import LogFollower
        follower = LogFollower(log)
        follower.poll()
        wb = cls(follow=follower, **kw)
        wb._follow_start()
        return wb

    def _follow_start(self) -> None:
        import asyncio
        assert self.follower is not None
        try:
            loop: Any = asyncio.get_event_loop()
        except RuntimeError:
            loop = None
        self._follow_pending = False
        if loop is not None and loop.is_running():
            def wake() -> None:          # from the reader thread: hand off to the kernel's loop, once
                if not self._follow_pending:
                    self._follow_pending = True
                    try:
                        loop.call_soon_threadsafe(self._follow_sync)
                    except RuntimeError:     # the loop is closed: the kernel is going away
                        pass
            self._unsubscribe = self.follower.subscribe(wake)
        self.follower.start()
        self._follow_sync()

    def poll(self) -> Any:
        """Read what the followed log gained and show it now; returns the FollowUpdate (follow.py)."""
        if self.follower is None:
            from ..errors import WorkbenchError
            raise WorkbenchError("this Workbench follows no log", hint="Workbench.follow(LOG)")
        self.follower.poll()
        self.synchronous = True       # the refresh and panels it starts run here, before this returns
        try:
            return self._follow_sync()
        finally:
            self.synchronous = False

    def stop_following(self) -> None:
        """Stop following the log (the reader thread ends; what is shown stays)."""
        if self.follower is not None:
            unsubscribe = getattr(self, "_unsubscribe", None)
            if unsubscribe is not None:
                unsubscribe()
            self.follower.stop()

    def _follow_sync(self) -> Any:
        from ..errors import WorkbenchError
        from .follow import KEY
        self._follow_pending = False
        view = self.follow_view
        try:
            update = view.sync(self.controller)
        except WorkbenchError as exc:        # shown in the status line; following goes on
            view.note = str(exc)
            self._show_follow()
            return None
        if update.open is not None:
            self._open(KEY + update.open)
            view.chosen = False              # opened for the user, not by them
        elif update.picker:
            self._show_picker()
        if update.reopened:
            self.pickers.show()              # the template the log names may have been chosen
        self._show_follow()
        return update

    def _show_follow(self) -> None:
        from .follow import figures_html
        if self.follow_view is None:
            return
        status = self.follow_view.status_html(self.state)
        if self.follow_status.value != status:
            self.follow_status.value = status
        call = figures_html(self.follow_view.figures(self.state, self.controller.last_panels))
        if self.follow_call.value != call:
            self.follow_call.value = call

    def _session_options(self) -> list[tuple[str, str]]:
        opts = list(self.state.samples.items())
        if self.follow_view is not None:
            opts = [*self.follow_view.options(self.state).items(), *opts]
        return opts

    def _session_value(self) -> str | None:
        s = self.state
        key = self.follow_view.key(s) if self.follow_view is not None else None
        return key or (s.doc.path if s.doc.path in s.samples.values() else None)

    def _show_picker(self) -> None:
        opts, value = self._session_options(), self._session_value()
        self._picker_quiet = True     # setting options resets the value: not a choice of the user's
        try:
            if list(self.session_select.options) != opts:
                self.session_select.options = opts
            if self.session_select.value != value:
                self.session_select.value = value
        finally:
            self._picker_quiet = False

    @classmethod
    def from_share(cls, text: str, **kw: Any) -> "Workbench":
        """The workbench on a shared state (the app's Share button, `Workbench.share()`): the same
        session, template or custom template, template arguments, tokenizer and turn. The string is
        checked as the app checks a link (workbench/share.py); a bad one raises ShareError."""
        from ..share import MAX_CELL_CHARS, decode
        return cls(shared=decode(text, max_chars=MAX_CELL_CHARS), **kw)

    def share(self) -> str:
        """A notebook cell that rebuilds this state (`Workbench.from_share`)."""
        from ..share import MAX_CELL_CHARS
        from .sharing import notebook_cell, share_text
        return notebook_cell(share_text(self.state, max_chars=MAX_CELL_CHARS))

    def undo(self, redo: bool = False) -> str:
        """Take back the last editor step (a burst of typing in one message is one; with `redo`, do
        again the last one taken back) and update the views; returns what it did ("deleted message
        3"), '' when there was nothing to do."""
        did: list[str] = []
        self._sync(lambda: did.append(self.controller.undo(redo=redo)))
        return did[0]

    def redo(self) -> str:
        return self.undo(redo=True)

    # display ----------------------------------------------------------------------------------------
    def _ipython_display_(self) -> None:
        from IPython.display import display
        display(self.widget)

    @property
    def result(self) -> AssemblyResult | None:
        return self.state.result

    # scripted use -----------------------------------------------------------------------------------
    def edit(self, index: int, text: str) -> AssemblyResult | None:
        """Set message `index`'s text (of the selected turn's list), and update the views. A message
        whose content holds images, audio or files keeps them: the text goes into its text part
        (`apply({"op": "set", ..., "part": k})` names one where there are several). In a Responses
        request the rows are its instructions and input items: `index` names the instructions or a
        message item; other items' fields by name (`apply({"op": "set", "index": i, "field":
        "arguments", "value": ...})`: responses_items.FIELDS)."""
        return self.apply({"op": "set", "index": index, "field": "content", "value": text})

    def apply(self, op: dict) -> AssemblyResult | None:
        """Any message-editor operation (see SessionDocument.apply), then update the views."""
        result = self._sync(lambda: self.controller.op(op))
        # The page echoes none of its own text edits; one made from code must reach the editor.
        self._show_editor(True)
        return result

    def choose(self, **choices: Any) -> AssemblyResult | None:
        """Switch `model` (a catalog name, "" for none: it sets template, tokenizer, window, KV shape
        and image rule), `template`, `tokenizer`, `custom_source` or `template_args` (the whole set,
        {} for none), and update the views. An unknown model is shown under the picker
        (ModelNotFoundError, with the closest names; also `model_error`) and changes nothing; a bad
        template argument raises TemplateError and changes nothing."""
        if "template_args" in choices:
            from ..templates.arguments import template_kwargs
            template_kwargs(choices["template_args"], where="argument")   # raised here, not only shown
        result = self._sync(lambda: self.controller.choose(**choices))
        self.pickers.show()
        self._chosen()
        return result

    @property
    def model(self) -> Any:
        """The chosen catalog model (a ModelEntry), or None."""
        return self.state.model

    @property
    def template_args(self) -> dict[str, Any]:
        """The chat template's arguments in use (a deep copy: changing it changes nothing; use
        `choose(template_args=...)`)."""
        import copy
        return copy.deepcopy(self.state.template_args)

    @property
    def model_error(self) -> str:
        """Why the last model name was refused ('' when it applied)."""
        return self.state.model_error

    def _chosen(self) -> None:
        """A model, template or tokenizer was chosen: the KV tab's shape and the summary line follow."""
        from .html import header_html
        from .model_choice import estimate_html
        self._show_kv()
        if self.view.header:
            self.header.value = header_html(self.view.header, estimate_html(self.state.model))

    def select_turn(self, turn: int) -> AssemblyResult | None:
        return self._sync(lambda: self.controller.select_turn(turn))

    def set_budget(self, **values: Any) -> dict[str, str]:
        """The context window, reserve or truncation policy from code (`context_window=8192`,
        `reserve=None`, `policy="none"`), as the boxes set them; returns the errors by control ({}: applied)."""
        errors: dict[str, str] = {}
        self._sync(lambda: errors.update(self.controller.set_budget(**values)))
        if not errors:
            self.budget_controls.reset()     # the boxes show what applied
        self.budget_controls.errors = errors
        self.budget_controls.show()
        return errors

    def prefill(self, wait: bool = True) -> Any:
        """A real prefill of the selected turn after the previous one (synthetic tiny model, CPU),
        shown in the KV tab; with `wait`, here and now, returning (previous, this turn, model)."""
        at = (self.state.generation, self.state.turn)

        from .controller import CANCELLED

        def show(result: Any, error: str) -> None:
            self.kv_run.disabled = False
            self.kv_cancel.layout.display = "none"
            if result is not None:
                self._prefill = (at, result)
            self._kv_status("prefill cancelled" if error == CANCELLED else "")
            self._show_kv(f"prefill failed: {error}" if error and error != CANCELLED else "")

        self.kv_run.disabled = True
        self.kv_cancel.layout.display = None
        self._kv_status("prefill: loading the model…")
        return self._request(lambda done: self.controller.run_prefill(done, progress=self._kv_status), show, wait)

    def cancel_prefill(self) -> None:
        """Stop a prefill started with `prefill(wait=False)` (or the KV tab's button) at its next
        chunk; the KV tab says "prefill cancelled"."""
        self.controller.cancel_prefill()

    def _kv_status(self, text: str) -> None:
        self.kv_status.value = f'<span class="wb-muted">{escape(text)}</span>' if text else ""

    def generate(self, engine: str = "tiny", max_new_tokens: int = 24, wait: bool = True) -> Any:
        """Generate the next assistant reply on `engine` (tiny, gemma3-270m, a model folder or .gguf
        file, or a server URL), shown in the Run tab, not written to the session (`append_reply`
        does that); with `wait`, here and now, returning the RunOutcome (None on an error, which the
        tab shows)."""
        return self.run_tab.run(engine, max_new_tokens, wait)

    def append_reply(self) -> str:
        """Append the reply `generate` last showed to the session, as the Run tab's "Append this
        reply" does; refused (said in the returned text) when the session changed since."""
        return self.run_tab.append_reply()

    def export(self, out: str | None = None, wait: bool = True) -> Any:
        """Write the production bundle for the current settings (this session's turns as goldens) and
        verify it from disk; shown in the Export tab. With `wait`, returns (folder, VerifyReport)."""
        from .html import export_html
        if out is not None:
            self.export_path.value = str(out)

        def show(result: Any, error: str) -> None:
            self.export_button.disabled = False
            self.export_status.value = export_html(result, error)

        self.export_button.disabled = True
        self.export_status.value = "exporting: every turn assembled, then verified…"
        return self._request(lambda done: self.controller.run_export(self.export_path.value, done), show, wait)

    def semantic(self, wait: bool = True) -> Any:
        """Replay the earlier turns into a semantic cache and look the selected turn up (the Semantic
        tab); with `wait`, returns (Decision, SemanticCache)."""
        from .semantic_panel import neighbour_options, semantic_html

        def show(result: Any, error: str) -> None:
            self.semantic_run.disabled = False
            pairs = self._semantic_pairs = self.controller.semantic_pairs(result[0]) if result else None
            self.semantic_out.value = semantic_html(None, note=f"failed: {error}") if error else \
                semantic_html(*result, pairs=pairs)
            options = neighbour_options(result[0], pairs) if result else []
            self.semantic_pick.options = options
            self.semantic_label_row.layout.display = None if options else "none"
            self.semantic_label_status.value = ""

        self.semantic_run.disabled = True
        self.semantic_out.value = semantic_html(None, note="loading the embedder, replaying the earlier turns…")
        return self._request(self.controller.run_semantic, show, wait)

    def label_semantic(self, should_hit: bool, neighbour: int = 1, category: str | None = None) -> Any:
        """Label the pair the Semantic tab shows, this turn and its `neighbour`-th nearest entry (from
        1), as should hit or should miss, with a shipped category or none; appended to
        WORKBENCH_HOME/sessions/semantic_labels.jsonl (a second label of the pair replaces the first).
        Returns what was written (semantic_labels.Added); the tab says so, or why not (None)."""
        values = [v for _label, v in self.semantic_pick.options]
        return self._label(values[neighbour - 1] if 1 <= neighbour <= len(values) else None, should_hit, category)

    def _semantic_label_bar(self) -> Any:
        """The Semantic tab's label bar (as the app's): a neighbour, a category, hit or miss."""
        from .semantic_labels import category_options
        W = self._W
        self._semantic_pairs: Any = None
        self.semantic_pick = W.Dropdown(description="Neighbour", options=[], layout=W.Layout(width="auto"))
        self.semantic_category = W.Dropdown(description="Category", options=category_options(),
                                            layout=W.Layout(width="auto"))
        self.semantic_hit = W.Button(description="Should reuse (hit)", layout=W.Layout(width="auto"))
        self.semantic_miss = W.Button(description="Should not reuse (miss)", layout=W.Layout(width="auto"))
        self.semantic_label_status = W.HTML()
        for button, hit in ((self.semantic_hit, True), (self.semantic_miss, False)):
            button.on_click(lambda _b, h=hit: self._label(self.semantic_pick.value, h, self.semantic_category.value))
        self.semantic_label_row = W.HBox([self.semantic_pick, self.semantic_category, self.semantic_hit,
                                          self.semantic_miss], layout=W.Layout(display="none"))
        return W.VBox([self.semantic_label_row, self.semantic_label_status])

    def _label(self, entry: Any, should_hit: bool, category: str | None) -> Any:
        from ..errors import WorkbenchError
        from .semantic_panel import label_html
        try:
            added = self.controller.label_semantic(self._semantic_pairs, entry, should_hit, category)
        except WorkbenchError as exc:     # the pair is gone, the category does not fit, the file refused
            self.semantic_label_status.value = label_html(None, str(exc))
            return None
        self.semantic_label_status.value = label_html(added)
        return added

    def compare(self, kind: str | None = None, value: str | None = None, *, pin: bool = False) -> Any:
        """The Compare tab: B differs from the live state in `kind` (template, tokenizer, version)
        taking `value` (a template, a tokenizer; "saved file" or "pinned snapshot"); `pin` pins the
        session as it is now first. Computed here and now (with the cache figures) and shown in the
        tab; returns the Comparison (None when there is nothing to compare with, shown in the tab)."""
        if pin:
            self.comparer.pin()
        if kind is not None or value is not None:
            self.comparer.choose(kind, value)
        self._compare_options()
        return self.comparer.run()

    def _compare_tab(self) -> Any:
        """B differs from the live state in a template, a tokenizer or a version (the saved file, a
        pinned snapshot); computed on its own worker while the tab is open (compare.py)."""
        from .compare import KINDS, CompareRunner, values_for
        from .compare_html import CSS as COMPARE_CSS
        from .compare_html import compare_html
        W = self._W
        host = _NotebookHost(self)
        self.comparer = CompareRunner(self.state, host.call_later, host.call_from_thread, self._show_compare,
                                      lambda text: setattr(self.compare_status, "value", escape(text)),
                                      hold=self.controller.yield_to_edits)
        c = self.comparer.choice
        self.compare_kind = W.Dropdown(description="B differs in", options=list(KINDS), value=c.kind)
        self.compare_value = W.Dropdown(description="B", options=values_for(c.kind, self.state, c), value=c.value)
        self.compare_pin = W.Button(description="Pin this version")
        self.compare_status = W.HTML()
        self.compare_out = W.HTML(compare_html(None, note="comparing…"))
        self._compare_css = f"<style>{COMPARE_CSS}</style>"
        self._compare_quiet = False
        self.compare_kind.observe(lambda ch: self._compare_choose(kind=ch["new"]), "value")
        self.compare_value.observe(lambda ch: ch["new"] is not None and self._compare_choose(value=ch["new"]), "value")
        self.compare_pin.on_click(lambda _b: self._compare_choose(pin=True))
        return W.VBox([W.HBox([self.compare_kind, self.compare_value, self.compare_pin]), self.compare_status,
                       self.compare_out])

    def _compare_choose(self, kind: str | None = None, value: str | None = None, pin: bool = False) -> None:
        if self._compare_quiet:
            return
        if pin:
            self.comparer.pin()
        else:
            self.comparer.choose(kind, value)
        self._compare_options()

    def _compare_options(self) -> None:
        from .compare import values_for
        c = self.comparer.choice
        options = values_for(c.kind, self.state, c)
        self._compare_quiet = True     # setting options resets the value: not a choice of the user's
        try:
            if self.compare_kind.value != c.kind:
                self.compare_kind.value = c.kind
            if list(self.compare_value.options) != options or self.compare_value.value != c.value:
                self.compare_value.options = options
                self.compare_value.value = c.value if c.value in options else None
        finally:
            self._compare_quiet = False

    def _show_compare(self, comparison: Any, error: str) -> None:
        from .compare_html import compare_html
        self.compare_out.value = self._compare_css + compare_html(comparison, error)

    def _request(self, start: Any, show: Any, wait: bool) -> Any:
        """Start slow work through the controller, `show` its outcome; with `wait`, run it here and
        return its result (None on an error, which `show` displays)."""
        got: list[Any] = []

        def done(result: Any, error: str) -> None:
            show(result, error)
            got.append(result)

        if not wait:
            start(done)
            return None
        background, self.controller.background = self.controller.background, False
        try:
            start(done)
        finally:
            self.controller.background = background
        return got[0] if got else None

    def _show_kv(self, note: str = "") -> None:
        from .kv_panel import kv_figure, kv_html
        p, kv = self.controller.last_panels, self.pickers.kv_choice()
        self.kv.value = kv_html(p, kv.config, self._prefill[1] if self._prefill else None, note, kv.note)
        if self.kv_chart is not None:
            _replace_figure(self.kv_chart, kv_figure(p, kv.config))

    def wait(self, timeout: float = 60.0) -> Any:
        """Compute the cache panel, prefix diff and teaching steps now (also what a background run
        would show); returns the Panels."""
        from .state import PARTS
        self.synchronous = True
        try:
            self.controller.run_panels(frozenset(PARTS))
        finally:
            self.synchronous = False
        return self.controller.last_panels

    def _sync(self, fn: Any) -> AssemblyResult | None:
        self.synchronous = True
        try:
            fn()
            self.controller.refresh()
        finally:
            self.synchronous = False
        return self.state.result

    # events -----------------------------------------------------------------------------------------
    def _turns(self) -> list[int]:
        return list(range(1, self.state.doc.turn_count + 1))

    def _open(self, path: str) -> None:
        from .follow import KEY
        try:
            if self.follow_view is not None and path.startswith(KEY):
                self.controller.open(self.follow_view.make(path, self.state))   # a conversation of the log
            else:
                self.controller.open(path)
        except Exception as exc:  # noqa: BLE001 - shown inline, the widget keeps running
            self._show_error(str(exc))
            if self.follow_view is not None:
                self._show_picker()          # back to what is still shown
        else:
            self._forget_session()
            if self.follow_view is not None:
                self.follow_view.attach(self.state)
                self._show_picker()
                self._show_follow()
        self._compare_options()      # a snapshot pinned from the other session is not offered
        self.pickers.show()          # the note offers the model the new session's requests name

    def _forget_session(self) -> None:
        """Another session is open: what actions said of the last one goes (the app's `_session_bound`)."""
        from .kv_panel import kv_html
        from .semantic_panel import semantic_html
        for w in (self.tools_error, self.variables_error, self.alert, self.export_status, self.kv_status,
                  self.semantic_label_status, self.compare_status):
            w.value = ""
        self._prefill = None
        self.kv.value = kv_html(None)
        self.cache.value = "computing every turn…"
        self.diff.value = ""
        self.semantic_out.value = semantic_html(None)
        self.run_tab.clear()

    def _custom(self, source: str) -> None:
        self.controller.choose(custom_source=source)
        self.pickers.show()          # a custom template overrides the model's: the note says so

    def _on_json(self, name: str, text: str, out: Any) -> None:
        if text == self.state.field_text(name):   # back to what applies: its error (if any) is gone
            out.value = ""
            return
        error = self.controller.set_json(name, text)
        out.value = f'<span class="wb-diag-error">{escape(error)}</span>' if error else ""

    def _present(self, on: bool) -> None:
        self.teach.presenting = on
        self._teach(0)

    def _teach(self, delta: int) -> None:
        if self.teach.move(delta):
            self.teach_title.value, self.teach_body.value = self.teach.title_html(), self.teach.body_html()

    # output -----------------------------------------------------------------------------------------
    def _show_result(self, result: AssemblyResult) -> None:
        self.alert.value = ""
        self.view.error = ""
        self.view._feed(result, self.state.assembler().tokenizer, self.state.overflow)
        self.comparer.request()     # nothing unless the Compare tab is open

    def _show_summary(self, result: AssemblyResult) -> None:
        from .charts import budget_figure
        from .html import diagnostics_html, header_html
        from .model_choice import estimate_html
        self.header.value = header_html(self.view.header, estimate_html(self.state.model))
        if self.budget is not None:
            _replace_figure(self.budget, budget_figure(result, self.state.overflow))
        self.budget_controls.show()
        self.diagnostics.value = diagnostics_html(result)
        self.editor.counts = self.controller.token_counts()
        if self.follow_view is not None:
            if self.follow_view.copied(self.state) and self.session_select.value is not None:
                self._show_picker()      # an edited copy: no longer the log's entry, which follows it again
            self._show_follow()

    def _show_error(self, message: str) -> None:
        shown = message if self.state.result is None else \
            f"{message} — the view shows the last prompt that assembled ({self.state.shown})"
        self.alert.value = f'<div class="wb-diag-error"><b>error:</b> {escape(shown)}</div>'
        self.view.error = message

    def _show_editor(self, structural: bool) -> None:
        data = self.controller.editor_data()
        if not structural:
            data.pop("messages")
        for k, v in data.items():
            setattr(self.editor, k, v)
        if structural:
            self.budget_controls.reset()     # another session, or reverted: its own window and reserve
        self._quiet = True   # setting options resets the value: not a choice of the user's
        try:
            if self.turn_select.options != tuple(self._turns()):
                self.turn_select.options = self._turns()
            self.turn_select.value = self.state.turn
        finally:
            self._quiet = False
        for name, box in (("tools", self.tools), ("variables", self.variables)):
            text = self.state.field_text(name)
            if box.value != text:
                box.value = text

    def _show_panels(self, panels: Any) -> None:
        """The parts computed (the open tabs'); the others keep what they showed."""
        from .html import cache_html, prefix_diff_html
        self._show_follow()
        if "cache" in panels.parts:
            self.cache.value = cache_html(panels)
            if self.cache_chart is not None:
                _replace_figure(self.cache_chart, panels.cache_figure)
            if self._prefill is not None and self._prefill[0] != (panels.generation, panels.turn):
                self._prefill = None        # it was for another prompt
            self._show_kv()
        if "diff" in panels.parts:
            self.diff.value = prefix_diff_html(panels.prefix_diff, panels.turn)
            self.fix_bar.update(panels.prefix_diff)
            if self.teach.load(panels, panels.previous, self.pickers.kv_choice()):
                self._teach(0)

    def _show_panels_failed(self, error: str) -> None:
        """Every slower view says why it has nothing, rather than the figures of an older prompt."""
        from .html import not_computed_html
        note = not_computed_html(error)
        self.cache.value = self.diff.value = note
        self.fix_bar.update(None)
        if self.cache_chart is not None:
            _replace_figure(self.cache_chart, {"data": [], "layout": {}})
        self.teach_title.value, self.teach_body.value = "", note
