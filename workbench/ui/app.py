"""The Panel app (`workbench app`): pick a session, a template and a turn, edit the last message,
and watch the prompt, its tokens, the budget and the diagnostics follow.

Store -> views -> app. `AppState` owns the choices, the assembler session and the last good result
(no Panel in it). `TokenViewPane` hosts the notebook's ES module (`widgets/token_view.js` and
`.css`) with Panel's AnyWidget-compatible component and feeds it the same patches. `WorkbenchApp`
composes the widgets; `build_app()` makes one per browser session and `serve()` serves it.

Edits re-assemble through `Assembler.session()`, debounced, so only the changed tail is rendered
and tokenized. A template that fails (a custom Jinja with a syntax error) is shown inline, with its
line, and the view keeps the last good prompt.

The Panel host differs from anywidget in two places of the token view's protocol:
- Panel passes a custom message as one argument, so the patch's three binary buffers travel inside
  it (`msg.buffers`, as bytes: Bokeh's websocket carries them as binary frames, not base64);
- its model adapter has no `model.send`, so a newly rendered view asks for the whole state by
  bumping the synced `sync` counter, and the host answers with a patch that keeps nothing.
"""

from __future__ import annotations

import html
import socket
import sys
from functools import partial
from pathlib import Path
from typing import Any

from .._optional import require
from ..assembler import Assembler
from ..errors import WorkbenchError
from ..result import AssemblyResult
from ..session import Session
from ..sessions import SessionFile, load_session
from ..templates import from_source, get_template, shipped_names
from .charts import budget_figure
from .viewmodel import Patch, PatchFeed

pn = require("panel", "the web app")
import param  # noqa: E402  (comes with panel)

ROOT = Path(__file__).resolve().parent.parent.parent
WIDGETS = ROOT / "widgets"
SAMPLES = ROOT / "sample_sessions"
DEFAULT_SESSION = "support_chat.json"
DEFAULT_TEMPLATE = "qwen2.5"
DEBOUNCE_MS = 150
# Widget captions: `label` in newer Panel (which deprecates `name` for them), `name` before.
LABEL = "label" if "label" in pn.widgets.Select.param else "name"
MAX_TEXT = 1_000_000   # characters in an editor (Panel's default, 5000, cuts real chat templates)


def sample_sessions() -> dict[str, str]:
    """File name -> path of every session shipped in `sample_sessions/`."""
    return {p.name: str(p) for p in sorted(SAMPLES.glob("*.json"))}


# ---------------------------------------------------------------------------------------- the store
def editable_text(message: Any) -> str | None:
    """The text the editor shows for a message: its content, or its last text block; None if neither."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for block in reversed(content):
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                return block["text"]
    return None


def with_text(message: dict, text: str) -> dict:
    """`message` with the text `editable_text` reads replaced (a copy; the session file is untouched)."""
    content = message.get("content")
    if isinstance(content, list):
        blocks = list(content)
        for i in range(len(blocks) - 1, -1, -1):
            b = blocks[i]
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                blocks[i] = {**b, "text": text}
                return {**message, "content": blocks}
        return message
    return {**message, "content": text}


class AppState:
    """What the app shows: the session, turn, template and edited text; the assembler session that
    re-assembles only what changed; the last good result and the last error."""

    def __init__(self, session_path: str | None = None):
        self.sessions = sample_sessions()
        path = session_path or self.sessions.get(DEFAULT_SESSION) or next(iter(self.sessions.values()), None)
        if path is None:
            raise WorkbenchError("no session to show", hint="pass a session file: workbench app SESSION")
        if path not in self.sessions.values():
            self.sessions[Path(path).name] = path
        self.template = DEFAULT_TEMPLATE
        self.custom_source = ""
        self.result: AssemblyResult | None = None   # the last good one: what the view shows
        self.shown = ""                              # which session, turn and template that was
        self.error = ""
        self._assemblers: dict[tuple, Assembler] = {}
        self._session: Session | None = None
        self._session_path: str | None = None
        self.load(path)

    # choices ---------------------------------------------------------------------------------
    def load(self, path: str) -> None:
        self.file: SessionFile = load_session(path)
        self.path = path
        self._session = None   # another conversation: nothing to extend
        self.select_turn(len(self.file.turns))

    def select_turn(self, turn: int) -> None:
        self.turn = turn
        self.text = editable_text(self.last_message) or ""

    @property
    def last_message(self) -> dict | None:
        msgs = self.file.turn(self.turn).get("messages")
        return msgs[-1] if isinstance(msgs, list) and msgs else None

    @property
    def editable(self) -> bool:
        return editable_text(self.last_message) is not None

    def request(self) -> dict:
        """The selected turn's request with the editor's text in its last message."""
        req = self.file.turn(self.turn)
        msgs = req.get("messages")
        if not self.editable or not isinstance(msgs, list):
            return req
        return {**req, "messages": [*msgs[:-1], with_text(msgs[-1], self.text)]}

    # assembly --------------------------------------------------------------------------------
    def assembler(self) -> Assembler:
        cw = self.file.raw.get("context_window")
        cw = cw if isinstance(cw, int) and cw > 0 else None
        custom = self.custom_source.strip()
        key = (self.template, custom, cw)
        asm = self._assemblers.get(key)
        if asm is None:
            if custom:
                # A custom template counts with the selected template's tokenizer (its model's vocabulary).
                tmpl = from_source(self.custom_source, "custom")
                asm = Assembler(template=tmpl, tokenizer=get_template(self.template).tokenizer, context_window=cw)
                self._assemblers = {k: a for k, a in self._assemblers.items() if not k[1]}  # one custom at a time
            else:
                asm = Assembler(template=self.template, context_window=cw)
            self._assemblers[key] = asm
        return asm

    def assemble(self) -> AssemblyResult:
        """Assemble the current request; on a WorkbenchError keep the last good result and record
        the error (also raised, for the caller to show)."""
        try:
            asm = self.assembler()
            if self._session is None or self._session.assembler is not asm or self._session_path != self.path:
                self._session, self._session_path = asm.session(), self.path
            result = self._session.assemble(self.request())
        except WorkbenchError as exc:
            self.error = str(exc)
            raise
        self.result, self.error = result, ""
        self.shown = f"{Path(self.path).name}, turn {self.turn}, {result.template['name']}"
        return result


# ---------------------------------------------------------------------------------------- the views
class TokenViewPane(PatchFeed, pn.custom.AnyWidgetComponent):  # type: ignore[misc, name-defined]
    """The notebook's token view (same ES module and CSS) in a Panel page, fed by patches."""

    _esm = WIDGETS / "token_view.js"
    _stylesheets = [(WIDGETS / "token_view.css").read_text("utf-8")]

    header = param.Dict(default={}, doc="totals, budget, diagnostics: small, always sent")
    version = param.Integer(default=0, doc="bumps with each patch")
    error = param.String(default="", doc="shown inline; the view keeps the last good state")
    sync = param.Integer(default=0, doc="bumped by a newly rendered front end: send it everything")

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.patches_sent: list[int] = []
        self.param.watch(self._on_sync, "sync")

    def show(self, result: AssemblyResult, tokenizer: Any) -> Patch:
        return self._feed(result, tokenizer)

    def _deliver(self, patch: Patch) -> None:
        content, buffers = patch.message()
        self.param.update(header=patch.header, error="", version=self.version + 1)
        self.send({**content, "buffers": buffers})  # Panel's adapter carries them as binary frames

    def _handle_msg(self, data: Any) -> None:
        # Should Panel's adapter gain model.send, the module's {"type": "sync"} arrives here instead.
        if isinstance(data, dict) and data.get("type") == "sync":
            self._on_sync(None)

    def _on_sync(self, _event: Any) -> None:
        self._resync()


def header_html(h: dict[str, Any]) -> str:
    """The app's one-line summary, from a patch's header."""
    b = h["budget"]
    over = f" · <b>over by {-b['free']}</b>" if b["free"] < 0 else f" · {b['free']} free"
    dropped = f" · truncation dropped {len(h['dropped'])} message(s)" if h["dropped"] else ""
    return (f'<div class="wb-app-header"><b>{h["total_tokens"]} tokens</b> · {h["reused_segments"]} of '
            f'{h["segments"]} segments reused · budget {b["used"]}/{b["input_budget"]}{over}{dropped} · '
            f'{html.escape(h["template"])} / {html.escape(h["tokenizer"])} · '
            f'{h["timings_ms"].get("total", 0.0):.1f} ms</div>')


def diagnostics_html(result: AssemblyResult) -> str:
    if not result.diagnostics:
        return '<div class="wb-diags">no diagnostics</div>'
    rows = "".join(f'<li class="wb-diag-{d.level}"><b>{d.level}</b> {html.escape(d.code)}'
                   f'{"" if d.seq is None else f" (seq {d.seq})"}: {html.escape(d.message)}</li>'
                   for d in result.diagnostics)
    return f'<ul class="wb-diags">{rows}</ul>'


# ---------------------------------------------------------------------------------------- the app
class WorkbenchApp:
    """Widgets over one AppState. `layout` is the Panel object; edits are debounced."""

    def __init__(self, session_path: str | None = None):
        pn.extension("plotly")
        self.state = AppState(session_path)
        s = self.state
        self.session_select = pn.widgets.Select(**{LABEL: "Session"}, options=dict(s.sessions), value=s.path)
        self.template_select = pn.widgets.Select(**{LABEL: "Template"}, options=shipped_names(), value=s.template)
        self.turn_select = pn.widgets.Select(**{LABEL: "Turn"}, options=self._turns(), value=s.turn)
        self.editor = pn.widgets.TextAreaInput(**{LABEL: self._editor_label()}, value=s.text, height=180,
                                               placeholder="the last message's text", disabled=not s.editable,
                                               max_length=MAX_TEXT)
        self.custom = pn.widgets.TextAreaInput(
            **{LABEL: "Custom template (Jinja; overrides Template)"}, height=140,
            placeholder="paste a Jinja chat template here", max_length=MAX_TEXT)
        self.alert = pn.pane.Alert("", alert_type="danger", visible=False, sizing_mode="stretch_width")
        self.header = pn.pane.HTML("", sizing_mode="stretch_width")
        self.budget = pn.pane.Plotly({"data": [], "layout": {}}, height=200, sizing_mode="stretch_width",
                                     config={"displayModeBar": False})
        self.view = TokenViewPane(sizing_mode="stretch_width")
        self.diagnostics = pn.pane.HTML("", sizing_mode="stretch_width")
        self._pending = 0

        self.session_select.param.watch(self._on_session, "value")
        self.turn_select.param.watch(self._on_turn, "value")
        self.template_select.param.watch(lambda e: self._choose(template=e.new), "value")
        self.editor.param.watch(self._on_text, ["value_input", "value"])
        self.custom.param.watch(self._on_custom, ["value_input", "value"])

        controls = pn.Column("## Prompt Workbench", self.session_select, self.turn_select, self.template_select,
                             self.editor, self.custom, width=380)
        main = pn.Column(self.header, self.alert, self.budget, self.view, "#### Diagnostics", self.diagnostics,
                         sizing_mode="stretch_width")
        self.layout = pn.Row(controls, main, sizing_mode="stretch_width")
        self.refresh()

    def _turns(self) -> list[int]:
        return list(range(1, len(self.state.file.turns) + 1))

    def _editor_label(self) -> str:
        m = self.state.last_message or {}
        role = m.get("role", "?") if isinstance(m, dict) else "?"
        return f"Last message ({role}, turn {self.state.turn})" + ("" if self.state.editable else ": not text")

    # events --------------------------------------------------------------------------------------
    def _on_session(self, event: Any) -> None:
        try:
            self.state.load(event.new)
        except WorkbenchError as exc:
            self._show_error(str(exc))
            return
        self.turn_select.param.update(options=self._turns(), value=self.state.turn)
        self._sync_editor()
        self.refresh()

    def _on_turn(self, event: Any) -> None:
        if event.new is None or event.new == self.state.turn:
            return
        self.state.select_turn(int(event.new))
        self._sync_editor()
        self.refresh()

    def _sync_editor(self) -> None:
        s = self.state
        self.editor.param.update(**{LABEL: self._editor_label()}, value=s.text, value_input=s.text,
                                 disabled=not s.editable)

    def _choose(self, **changes: Any) -> None:
        for k, v in changes.items():
            setattr(self.state, k, v)
        self.refresh()

    def _on_text(self, *events: Any) -> None:   # value_input per keystroke, value on blur: one or both
        new = events[-1].new
        if new is None or new == self.state.text:
            return
        self.state.text = new
        self._debounced()

    def _on_custom(self, *events: Any) -> None:
        new = events[-1].new
        if new is None or new == self.state.custom_source:
            return
        self.state.custom_source = new
        self._debounced()

    def _debounced(self) -> None:
        """Re-assemble DEBOUNCE_MS after the last keystroke (at once outside a served page)."""
        self._pending += 1
        doc = pn.state.curdoc
        if doc is None or doc.session_context is None:
            self.refresh()
            return
        doc.add_timeout_callback(partial(self._fire, self._pending), DEBOUNCE_MS)

    def _fire(self, ticket: int) -> None:
        if ticket == self._pending:
            self.refresh()

    # output --------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Assemble and update the views; a failure shows inline and leaves the last good view."""
        try:
            result = self.state.assemble()
        except WorkbenchError as exc:
            self._show_error(str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - the page never dies: one line, last good view kept
            self._show_error(f"unexpected {type(exc).__name__}: {exc}")
            return
        self.alert.param.update(object="", visible=False)
        self.view.show(result, self.state.assembler().tokenizer)
        self.header.object = header_html(self.view.header)
        self.budget.object = budget_figure(result)
        self.diagnostics.object = diagnostics_html(result)

    def _show_error(self, message: str) -> None:
        shown = message if self.state.result is None else \
            f"{message} — the view shows the last prompt that assembled ({self.state.shown})"
        self.alert.param.update(object=html.escape(shown), visible=True)
        self.view.error = message


def build_app(session_path: str | None = None) -> Any:
    """The app's Panel object (one per browser session: each has its own state)."""
    return WorkbenchApp(session_path).layout


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def serve(session: str | None = None, host: str = "127.0.0.1", port: int = 0, show: bool = False) -> None:
    """Serve the app on http://HOST:PORT/ (a free port when 0) until interrupted; prints the URL first."""
    if session is not None:
        load_session(session)   # a bad file fails now, with its one-line error, not in every page
    try:
        port = port or free_port(host)
        if host in ("0.0.0.0", "::"):   # every interface: pages may come from any address of this machine
            origins = [f"*:{port}"]
        else:
            origins = [f"{host}:{port}"] + ([f"localhost:{port}"] if host in ("127.0.0.1", "::1") else [])
        def page() -> Any:  # a plain function: Panel calls it once per browser session
            return build_app(session)

        server = pn.serve({"/": page}, address=host, port=port, websocket_origin=origins,
                          show=False, start=False, title="Prompt Workbench", verbose=False)
    except OSError as exc:
        raise WorkbenchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                             hint="pick another --port, or --host") from None
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"
    print(f"serving on {url}", flush=True)
    if show:
        import webbrowser
        server.io_loop.add_callback(webbrowser.open, url)
    server.start()
    try:
        server.io_loop.start()
    finally:
        server.stop()
        sys.stdout.flush()
