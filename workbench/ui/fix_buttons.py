"""The Fix buttons of the prefix diff (both hosts): one per cause that a one-click fix addresses
(analysis/fixes.py), which applies the fix to the session being edited and says what it gained.

The fix is measured off the UI thread, on a snapshot of the document (`measure_fix`: the whole
session before and after, every provider's cached tokens), then adopted on the UI thread (`adopt`)
as one undo step that swaps the whole document: Undo puts the session back exactly as it was. A
fix that changes how the template renders rather than the session (a template argument, a pinned
clock, the projection) is reported with its gain but leaves the document alone: the app renders
the session with the template as chosen. The buttons and the result say the fix in words
(`fixes.fix_label`); a provider's figure of 0 carries the simulation's own reason.

The result is for one state of the document: once it changes (an undo or redo, an edit, another
template, another session: the controller's generation, `Controller.watch_generation`), the bar
no longer shows the figures and says where the fix stands instead (undone, in the session, gone).
The last two classes are the hosts' widgets (Panel, ipywidgets), imported only by the host that
shows them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any

from ..analysis.fixes import Measurement, fix_for_cause, fix_label, measure
from .history import History, Step

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
    label: str = ""                     # the fix in words (fixes.fix_label); the name when empty
    # provider -> why its figure after the fix is 0: the last turn's (TurnResult.why) and the
    # session's (Simulation.why), as the simulations said it (the providers with a reason only)
    why_after: dict[str, str] = field(default_factory=dict)
    total_why_after: dict[str, str] = field(default_factory=dict)
    step: Step | None = field(default=None, compare=False, repr=False)   # the undo step that applied it

    @property
    def title(self) -> str:
        return self.label or self.fix

    def _head(self, cls: str) -> str:
        return (f'<div class="{cls}" data-fix="{escape(self.fix)}"><b class="wb-fix-title" '
                f'title="{escape(self.fix)}">{escape(self.title)}</b>: ')

    def html(self) -> str:
        rows = "".join(f"<tr><td>{escape(p)}</td>"
                       f"<td>{self._cell(self.cached_before[p], self.cached_after[p], self.why_after.get(p))}</td>"
                       f"<td>{self._cell(self.total_before[p], self.total_after[p], self.total_why_after.get(p))}"
                       "</td></tr>" for p in self.cached_before)
        said = "applied (Undo takes it back)" if self.applied else "not applied to the session"
        return (f'{self._head("wb-fix-result")}{said}. '
                f"{escape(self.note)}.<br>Tokens reused over the session: {self.reused_before:,} → "
                f"{self.reused_after:,}"
                f'<table class="wb-table wb-fix-cached"><tr><th>provider</th><th>cached now (last turn)</th>'
                f"<th>cached over the session</th></tr>{rows}</table></div>")

    @staticmethod
    def _cell(before: int, after: int, why: str | None) -> str:
        """"0 → 0" with the simulation's reason for the 0 after the fix (a figure the fix raised needs none)."""
        note = f'<div class="wb-why">{escape(why)}</div>' if after == 0 and why else ""
        return f"{before:,} → {after:,}{note}"

    def status_html(self, history: History, redone: bool = False) -> str:
        """Where the fix stands once the document changed after it: its figures were for the document
        as it was, so they are not shown; never "applied" for a fix that Undo took back."""
        step = self.step
        if step is None:
            said = ("measured on the session as it was before the latest change (an edit, another template or "
                    "model): its figures no longer hold")
        elif any(s is step for s in history.redo_steps):
            said = "undone: the session is as it was before the fix (Redo puts the fix back)"
        elif not any(s is step for s in history.undo_steps):
            said = "no longer in the session: it was undone and the session edited since"
        elif history.undo_steps[-1] is step:
            said = ("redone: in the session again (Undo takes it back); the Cache tab shows its figures" if redone
                    else "in the session (Undo takes it back), but the session or its settings changed since it "
                         "was measured: the Cache tab shows the figures now")
        else:
            said = "in the session, with later edits after it: its figures no longer hold"
        return f'{self._head("wb-fix-result wb-fix-stale")}{said}.</div>'


def buttons_for(diff: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(cause code, fix name) for each cause of the prefix diff that a fix addresses."""
    return [(code, fix) for code, fix, _ in _fixable(diff)]


def labelled_buttons(diff: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(label in words, fix name) for each button: the fix said with what its cause found ("Move the
    volatile text (a timestamp) after the stable prefix")."""
    return [(fix_label(fix, message), fix) for _, fix, message in _fixable(diff)]


def _fixable(diff: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    if not diff:
        return []
    out: list[tuple[str, str, str]] = []
    for c in diff.get("causes", ()):
        fix = fix_for_cause(c["code"], c.get("message", ""))
        if fix is not None and all(fix != f for _, f, _ in out):
            out.append((c["code"], fix, c.get("message", "")))
    return out


def measure_fix(state: "WorkbenchState", name: str) -> tuple[Measurement, int]:
    """The fix measured on the document as it is now (off the UI thread): and that document's generation."""
    generation = state.generation
    return measure(state.assembler(), state.doc.snapshot(), [name]), generation


def adopt(state: "WorkbenchState", name: str, m: Measurement, generation: int, label: str = "") -> FixReport:
    """On the UI thread: the fixed session becomes the document (one undo step), unless the document
    changed while the fix was measured or the fix changes the rendering, not the session."""
    out = m.applied.outcomes[-1]
    step = None
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
        step = Step(state.turn, [], [], f"fix {name}", swap=swap)
        state.history.push(step)
        state._edited(swap(True), was_last)   # the turns, the records: as after any edit
    last = len(m.before.turns) - 1
    return FixReport(name, changes_doc, note, dict(m.before.turns[last].cached_tokens),
                     dict(m.after.turns[last].cached_tokens), m.before.totals()["cached_tokens"],
                     m.after.totals()["cached_tokens"], m.before.totals()["reused_tokens"],
                     m.after.totals()["reused_tokens"], label or fix_label(name),
                     dict(m.after.turns[last].why), dict(m.after.why), step)


def run_fix(controller: "Controller", name: str, done: Callable[[FixReport | None, str], None],
            label: str = "") -> None:
    """Measure on the controller's worker, adopt on the UI thread, then refresh like an edit.
    `label`: the fix in words as its button said it (else the fix's own label)."""
    def finished(result: Any, error: str) -> None:
        if error or result is None:
            done(None, error or "the fix could not be measured")
            return
        m, generation = result
        report = adopt(controller.state, name, m, generation, label=label)
        if report.applied:
            controller.host.show_editor(True)
            controller.edited()
        done(report, "")

    controller._in_background("fix", lambda: measure_fix(controller.state, name), finished)


class _FixBar:
    """What both hosts' Fix buttons do: one button per fixable cause of the prefix diff, and the
    last fix's result, for as long as the document is the one it was measured on. A host makes its
    buttons and shows HTML (`_button`, `_set_buttons`, `_show`)."""

    def __init__(self, controller: "Controller"):
        self.controller = controller
        self._shown: list[tuple[str, str]] = []
        self._report: FixReport | None = None     # the result shown, while it is shown
        self._generation = -1                     # the document generation it was last checked against
        self._doc: Any = None                     # the document it was measured on
        self._undone = False                      # its step was last seen undone (a redo follows)
        controller.watch_generation(self.recheck)

    def update(self, diff: dict[str, Any] | None) -> None:
        self.recheck()
        wanted = labelled_buttons(diff)
        if wanted == self._shown:
            return
        self._shown = wanted
        self._set_buttons([self._button(label, fix) for label, fix in wanted])

    def click(self, fix: str, label: str = "") -> None:
        self._report = None
        self._show(f'<div class="wb-fix-running">measuring “{escape(label or fix)}” over every turn…</div>')
        run_fix(self.controller, fix, self._done, label)

    def _done(self, report: FixReport | None, error: str) -> None:
        s = self.controller.state
        self._report, self._generation, self._doc, self._undone = report, s.generation, s.doc, False
        self._show(report.html() if report else f'<div class="wb-fix-error">{escape(error)}</div>')

    def recheck(self) -> None:
        """The document changed since the result was shown (an undo or redo, an edit, another
        template or session): say where the fix stands instead of its figures; nothing for another
        session, which the fix was never applied to."""
        r, s = self._report, self.controller.state
        if r is None or s.generation == self._generation:
            return
        self._generation = s.generation
        if s.doc is not self._doc:
            self._report = None
            self._show("")
            return
        undone = r.step is not None and any(x is r.step for x in s.history.redo_steps)
        self._show(r.status_html(s.history, redone=self._undone and not undone))
        self._undone = undone

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
        b.on_click(lambda _e: self.click(fix, label))
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
        b = self._W.Button(description=label, tooltip=fix, button_style="primary",
                           layout=self._W.Layout(width="auto"))
        b.on_click(lambda _b: self.click(fix, label))
        return b

    def _set_buttons(self, buttons: list[Any]) -> None:
        self.buttons.children = buttons

    def _show(self, html: str) -> None:
        self.result.value = f"<style>{self._css}</style>{html}"
