"""The Fix buttons of the prefix diff (both hosts): one per cause that a one-click fix addresses
(analysis/fixes.py), which applies the fix to the session being edited and says what it gained.

The fix is measured off the UI thread, on a snapshot of the document (`measure_fix`: the whole
session before and after, every provider's cached tokens), then adopted on the UI thread (`adopt`)
as one undo step that swaps the whole document: Undo puts the session back exactly as it was. A
fix that changes how the template renders rather than the session (a template argument, a pinned
clock, the projection) is reported with its gain but leaves the document alone: the app renders
the session with the template as chosen. The last two classes are the hosts' widgets (Panel,
ipywidgets), imported only by the host that shows them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from ..analysis.fixes import Measurement, fix_for_cause, measure
from .history import Step

if TYPE_CHECKING:
    from .controller import Controller
    from .state import WorkbenchState


@dataclass(frozen=True)
class FixReport:
    fix: str
    applied: bool                       # the document changed (one undo step)
    note: str
    cached_before: dict[str, int]       # provider -> cached tokens on the last turn
    cached_after: dict[str, int]
    total_before: dict[str, int]        # provider -> cached tokens over the session
    total_after: dict[str, int]
    reused_before: int
    reused_after: int

    def html(self) -> str:
        rows = "".join(f"<tr><td>{escape(p)}</td><td>{self.cached_before[p]:,} → {self.cached_after[p]:,}</td>"
                       f"<td>{self.total_before[p]:,} → {self.total_after[p]:,}</td></tr>" for p in self.cached_before)
        said = "applied (Undo takes it back)" if self.applied else "not applied to the session"
        return (f'<div class="wb-fix-result" data-fix="{escape(self.fix)}"><b>{escape(self.fix)}</b>: {said}. '
                f"{escape(self.note)}.<br>Tokens reused over the session: {self.reused_before:,} → "
                f"{self.reused_after:,}"
                f'<table class="wb-table wb-fix-cached"><tr><th>provider</th><th>cached now (last turn)</th>'
                f"<th>cached over the session</th></tr>{rows}</table></div>")


def buttons_for(diff: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(cause code, fix name) for each cause of the prefix diff that a fix addresses."""
    if not diff:
        return []
    out: list[tuple[str, str]] = []
    for c in diff.get("causes", ()):
        fix = fix_for_cause(c["code"], c.get("message", ""))
        if fix is not None and all(fix != f for _, f in out):
            out.append((c["code"], fix))
    return out


def measure_fix(state: "WorkbenchState", name: str) -> tuple[Measurement, int]:
    """The fix measured on the document as it is now (off the UI thread): and that document's generation."""
    generation = state.generation
    return measure(state.assembler(), state.doc.snapshot(), [name]), generation


def adopt(state: "WorkbenchState", name: str, m: Measurement, generation: int) -> FixReport:
    """On the UI thread: the fixed session becomes the document (one undo step), unless the document
    changed while the fix was measured or the fix changes the rendering, not the session."""
    out = m.applied.outcomes[-1]
    note = out.note
    changes_doc = out.changed and m.applied.session is not m.applied.original
    if out.changed and not m.applied.settings.empty:
        note += ("; it changes how the template renders, which the app does not: apply it with "
                 f"`workbench analyze --fix {name}` or `workbench export --fix {name}`")
    if changes_doc and state.generation != generation:
        changes_doc, note = False, "the session changed while the fix was measured: click it again"
    if changes_doc:
        before, after = state.doc.data, copy.deepcopy(m.applied.session)

        def swap(redo: bool) -> Any:
            return state.doc.replace_data(after if redo else before)

        was_last = state.turn == state.doc.turn_count
        state.history.push(Step(state.turn, [], [], f"fix {name}", swap=swap))
        state._edited(swap(True), was_last)   # the turns, the records: as after any edit
    last = len(m.before.turns) - 1
    return FixReport(name, changes_doc, note, dict(m.before.turns[last].cached_tokens),
                     dict(m.after.turns[last].cached_tokens), m.before.totals()["cached_tokens"],
                     m.after.totals()["cached_tokens"], m.before.totals()["reused_tokens"],
                     m.after.totals()["reused_tokens"])


def run_fix(controller: "Controller", name: str, done: Callable[[FixReport | None, str], None]) -> None:
    """Measure on the controller's worker, adopt on the UI thread, then refresh like an edit."""
    def finished(result: Any, error: str) -> None:
        if error or result is None:
            done(None, error or "the fix could not be measured")
            return
        report = adopt(controller.state, name, *result)
        if report.applied:
            controller.host.show_editor(True)
            controller.edited()
        done(report, "")

    controller._in_background("fix", lambda: measure_fix(controller.state, name), finished)


class _FixBar:
    """What both hosts' Fix buttons do: one button per fixable cause of the prefix diff, and the
    last fix's result. A host makes its buttons and shows HTML (`_button`, `_set_buttons`, `_show`)."""

    def __init__(self, controller: "Controller"):
        self.controller = controller
        self._shown: list[tuple[str, str]] = []

    def update(self, diff: dict[str, Any] | None) -> None:
        wanted = buttons_for(diff)
        if wanted == self._shown:
            return
        self._shown = wanted
        self._set_buttons([self._button(f"Fix {code}: {fix}", fix) for code, fix in wanted])

    def click(self, fix: str) -> None:
        self._show(f'<div class="wb-fix-running">measuring {escape(fix)} over every turn…</div>')
        run_fix(self.controller, fix, self._done)

    def _done(self, report: FixReport | None, error: str) -> None:
        self._show(report.html() if report else f'<div class="wb-fix-error">{escape(error)}</div>')

    def _button(self, label: str, fix: str) -> Any:
        raise NotImplementedError

    def _set_buttons(self, buttons: list[Any]) -> None:
        raise NotImplementedError

    def _show(self, html: str) -> None:
        raise NotImplementedError


class PanelFixBar(_FixBar):
    """The Panel app's buttons under the prefix diff, and the last fix's result."""

    def __init__(self, controller: "Controller", css: str):
        import panel as pn
        super().__init__(controller)
        self._pn = pn
        self.buttons = pn.Row(sizing_mode="stretch_width", css_classes=["wb-fix-buttons"])
        self.result = pn.pane.HTML("", sizing_mode="stretch_width", stylesheets=[css], css_classes=["wb-fix-status"])
        self.layout = pn.Column(self.buttons, self.result, sizing_mode="stretch_width")

    def _button(self, label: str, fix: str) -> Any:
        b = self._pn.widgets.Button(name=label, button_type="primary", css_classes=["wb-fix-button"])
        b.on_click(lambda _e: self.click(fix))
        return b

    def _set_buttons(self, buttons: list[Any]) -> None:
        self.buttons.objects = buttons

    def _show(self, html: str) -> None:
        self.result.object = html


class NotebookFixBar(_FixBar):
    """The notebook's buttons under the prefix diff (ipywidgets), and the last fix's result."""

    def __init__(self, controller: "Controller", css: str):
        import ipywidgets as W
        super().__init__(controller)
        self._W, self._css = W, css
        self.buttons = W.HBox()
        self.result = W.HTML()
        self.layout = W.VBox([self.buttons, self.result])

    def _button(self, label: str, fix: str) -> Any:
        b = self._W.Button(description=label, button_style="primary", layout=self._W.Layout(width="auto"))
        b.on_click(lambda _b: self.click(fix))
        return b

    def _set_buttons(self, buttons: list[Any]) -> None:
        self.buttons.children = buttons

    def _show(self, html: str) -> None:
        self.result.value = f"<style>{self._css}</style>{html}"
