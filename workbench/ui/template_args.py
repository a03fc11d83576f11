"""The template arguments control, in both hosts: one box per argument the chosen template reads
(`enable_thinking` for qwen3, `reasoning_effort` for gpt-oss, found by reading the template's source:
templates/arguments.py `template_arguments`), each holding the value set as `--template-arg
KEY=VALUE` writes VALUE (JSON where it is JSON, else the text; blank: unset, the template's own
default). A value is applied when its box is committed (Enter, or leaving the box) through
`Controller.choose(template_args=...)`, so every view re-renders; a bad value is said beside its box
and changes nothing (the views keep the last good prompt). An argument set but not read by the
template now chosen keeps its box, marked, until it is cleared: switching back finds it set.

The logic (`rows`, `with_value`, the notes) is host-independent; the last two classes lay out the
widgets (Panel, ipywidgets), imported only by the host that shows them, as budget_controls.py does.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from .._optional import require
from ..errors import WorkbenchError
from ..templates import get_template
from ..templates.arguments import parse_value, template_arguments, value_text

if TYPE_CHECKING:
    from .controller import Controller
    from .state import WorkbenchState

HEADING = "Template arguments"
NONE_READ = "this template reads no arguments"
UNSET = "unset: the template's default"
WHERE = "argument"          # how an error names the source (`template: argument enable_thinking: ...`)


@dataclass(frozen=True)
class ArgRow:
    """One box: an argument the template reads, or one set that it does not read."""
    name: str
    text: str            # the value set, as VALUE text ("" unset)
    read: bool           # the chosen template reads it


def rows(state: WorkbenchState) -> tuple[list[ArgRow], str]:
    """The boxes for the state's template (its custom source where one is typed), sorted by name,
    and why its arguments cannot be listed ('' when they can: a custom source that does not parse)."""
    custom = state.custom_source.strip()
    try:
        read = template_arguments(state.custom_source if custom else get_template(state.template).source)
        error = ""
    except WorkbenchError as exc:
        read, error = [], f"the arguments cannot be listed: {exc}"
    given = state.template_args
    return [ArgRow(n, value_text(given[n]) if n in given else "", n in read)
            for n in sorted(set(read) | set(given))], error


def with_value(args: dict[str, Any], name: str, text: str) -> dict[str, Any]:
    """`args` with `name` set from its box's text (blank: unset). TemplateError for a bad value."""
    out = dict(args)
    if text.strip():
        out[name] = parse_value(name, text, where=WHERE)
    else:
        out.pop(name, None)
    return out


def summary_html(state: WorkbenchState, shown: list[ArgRow], listing_error: str) -> str:
    """The line above the boxes: the heading, whether the template reads any argument, the values set,
    and a share link's arguments refused (state.template_args_error)."""
    custom = bool(state.custom_source.strip())
    parts = [f"<b>{HEADING}</b>"]
    if listing_error:
        parts.append(f'<span class="wb-template-args-error wb-diag-error">{escape(listing_error)}</span>')
    elif not any(r.read for r in shown):
        parts.append(f'<span class="wb-template-args-none wb-muted">'
                     f'{"the custom template reads no arguments" if custom else NONE_READ}</span>')
    if state.template_args:
        set_ = ", ".join(f"{k}={value_text(v)}" for k, v in state.template_args.items())
        parts.append(f'<span class="wb-template-args-set wb-muted">set: <code>{escape(set_)}</code></span>')
    if state.template_args_error:
        parts.append(f'<span class="wb-template-args-error wb-diag-error">{escape(state.template_args_error)}</span>')
    return " · ".join(parts)


def note_html(row: ArgRow, error: str) -> str:
    """The line beside a box: its error, else whether the template reads it."""
    if error:
        return f'<span class="wb-template-arg-error wb-diag-error">{escape(error)}</span>'
    if not row.read:
        return '<span class="wb-template-arg-unread wb-muted">set, but this template does not read it</span>'
    return "" if row.text else f'<span class="wb-muted">{UNSET}</span>'


class _Control:
    """What both hosts' controls do; a host subclass makes the widgets (`_build`) and sets their text."""

    def __init__(self, controller: Controller):
        self.controller = controller
        self.errors: dict[str, str] = {}      # argument -> why the text in its box was refused
        self._names: tuple[str, ...] | None = None
        self._quiet = False
        self._applying = False                # a box's own value on its way through the controller
        controller.watch_choices(self._chosen)  # a template, model or custom source switch: its own arguments

    def changed(self, name: str, text: Any) -> None:
        """A box was committed: apply its value (every view follows), or say why not beside it."""
        if self._quiet or text is None:
            return
        try:
            new = with_value(self.controller.state.template_args, name, str(text))
        except WorkbenchError as exc:
            self.errors[name] = str(exc)
            self.show()
            return
        self.errors.pop(name, None)
        self._applying = True
        try:
            error = self.controller.choose(template_args=new)
        finally:
            self._applying = False
        if error:
            self.errors[name] = error
        self.show()

    def _chosen(self) -> None:
        """A choice made elsewhere (a picker, code, a link): it supersedes any text refused here."""
        if not self._applying:
            self.errors = {}
        self.show()

    def show(self) -> None:
        """The boxes for the template chosen now, their values as set (a box whose text was refused
        keeps that text, to be fixed), the notes and the summary line."""
        state = self.controller.state
        shown, listing_error = rows(state)
        names = tuple(r.name for r in shown)
        self.errors = {k: v for k, v in self.errors.items() if k in names}
        self._quiet = True
        try:
            if names != self._names:
                self._names = names
                self._build(shown)
            for r in shown:
                if r.name not in self.errors:
                    self._set_text(r.name, r.text)
                self._note(r.name, note_html(r, self.errors.get(r.name, "")))
        finally:
            self._quiet = False
        self._summary(summary_html(state, shown, listing_error))

    # a host subclass: the boxes and notes for `shown`, a box's text, a note, the summary line
    def _build(self, shown: list[ArgRow]) -> None:
        raise NotImplementedError

    def _set_text(self, name: str, text: str) -> None:
        raise NotImplementedError

    def _note(self, name: str, html: str) -> None:
        raise NotImplementedError

    def _summary(self, html: str) -> None:
        raise NotImplementedError


class PanelTemplateArgs(_Control):
    def __init__(self, controller: Controller, label: str, css: str):
        pn = require("panel", "the web app")
        self._pn, self._label, self._css = pn, label, css
        self.boxes: dict[str, Any] = {}
        self.notes: dict[str, Any] = {}
        self.summary = pn.pane.HTML("", stylesheets=[css], sizing_mode="stretch_width",
                                    css_classes=["wb-template-args-summary"])
        self.rows = pn.Column(sizing_mode="stretch_width")
        self.layout = pn.Column(self.summary, self.rows, sizing_mode="stretch_width", css_classes=["wb-template-args"])
        super().__init__(controller)
        self.show()

    def _build(self, shown: list[ArgRow]) -> None:
        pn = self._pn
        self.boxes, self.notes, children = {}, {}, []
        for r in shown:
            box = pn.widgets.TextInput(**{self._label: r.name}, value=r.text, placeholder="unset", width=200,
                                       css_classes=["wb-template-arg", f"wb-template-arg-{r.name}"])
            box.param.watch(lambda e, n=r.name: self.changed(n, e.new), "value")
            note = pn.pane.HTML("", stylesheets=[self._css], sizing_mode="stretch_width", align="end",
                                css_classes=[f"wb-template-arg-note-{r.name}"])
            self.boxes[r.name], self.notes[r.name] = box, note
            children.append(pn.Row(box, note, sizing_mode="stretch_width"))
        self.rows.objects = children

    def _set_text(self, name: str, text: str) -> None:
        if self.boxes[name].value != text:
            self.boxes[name].value = text

    def _note(self, name: str, html: str) -> None:
        if self.notes[name].object != html:
            self.notes[name].object = html

    def _summary(self, html: str) -> None:
        if self.summary.object != html:
            self.summary.object = html


class NotebookTemplateArgs(_Control):
    def __init__(self, controller: Controller):
        W = require("ipywidgets", "the notebook widgets")
        self._W = W
        self.boxes: dict[str, Any] = {}
        self.notes: dict[str, Any] = {}
        self.summary = W.HTML()
        self.rows = W.VBox()
        self.layout = W.VBox([self.summary, self.rows])
        super().__init__(controller)
        self.show()

    def _build(self, shown: list[ArgRow]) -> None:
        W = self._W
        self.boxes, self.notes, children = {}, {}, []
        for r in shown:
            # continuous_update=False: the value is applied when the box is committed, not per key.
            box = W.Text(value=r.text, description=r.name, placeholder="unset", continuous_update=False,
                         style={"description_width": "initial"})
            box.observe(lambda c, n=r.name: self.changed(n, c["new"]), "value")
            note = W.HTML()
            self.boxes[r.name], self.notes[r.name] = box, note
            children.append(W.HBox([box, note]))
        self.rows.children = children

    def _set_text(self, name: str, text: str) -> None:
        if self.boxes[name].value != text:
            self.boxes[name].value = text

    def _note(self, name: str, html: str) -> None:
        if self.notes[name].value != html:
            self.notes[name].value = html

    def _summary(self, html: str) -> None:
        if self.summary.value != html:
            self.summary.value = html


__all__ = ["ArgRow", "NotebookTemplateArgs", "PanelTemplateArgs", "rows", "summary_html", "with_value"]
