"""The budget controls in both hosts: the context window, the reserve for the reply and the
truncation policy, each with a line beside it saying where its value came from, or why a value
typed there was refused (the views then keep the last good prompt). The logic is in
`WorkbenchState.set_budget` and budget_view.py; this module only lays the widgets out.

A box applies its value when it is committed (Enter, or leaving the box), not on every key: a
window typed digit by digit would otherwise re-assemble under 3, 32, 327... tokens.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from .._optional import require
from ..errors import WorkbenchError
from .budget_view import POLICIES, POLICY_LABELS, BudgetSettings

if TYPE_CHECKING:
    from .controller import Controller

CONTROLS = ("context_window", "reserve", "policy")


def notes_html(settings: BudgetSettings | None, errors: dict[str, str]) -> dict[str, str]:
    """Each control's line: its error, else where its value came from."""
    out = {}
    for c in CONTROLS:
        if errors.get(c):
            out[c] = f'<span class="wb-budget-error wb-diag-error">{escape(errors[c])}</span>'
        elif settings is None:
            out[c] = ""
        elif c == "context_window":
            out[c] = (f'<span class="wb-budget-source wb-muted">{settings.context_window:,} tokens · '
                      f'from {escape(settings.window_source)}</span>')
        elif c == "reserve":
            out[c] = (f'<span class="wb-budget-source wb-muted">{settings.reserve:,} tokens · '
                      f'{escape(settings.reserve_source)}</span>')
        else:
            out[c] = ""
    return out


class _Controls:
    """What both hosts' controls do; a host subclass makes the widgets and sets their text."""

    def __init__(self, controller: "Controller"):
        self.controller = controller
        self.errors: dict[str, str] = {}
        self._quiet = False

    def settings(self) -> BudgetSettings | None:
        try:
            return self.controller.state.budget_settings()
        except WorkbenchError:
            return None               # a broken custom template: the alert says so already

    def changed(self, control: str, value: Any) -> None:
        if self._quiet:
            return
        errors = self.controller.set_budget(**{control: value})
        # A value that applied clears every control's error (the combination is good now).
        self.errors = errors
        self.show()

    def values(self) -> tuple[str, str, str, dict[str, str]]:
        """The boxes' text (blank: the session's or template's own value), the placeholders' and the policy."""
        s = self.settings()
        if s is None:
            return "", "", self.controller.state.policy, {}
        return ("" if s.window_explicit is None else str(s.window_explicit),
                "" if s.reserve_explicit is None else str(s.reserve_explicit), s.policy,
                {"context_window": str(s.context_window), "reserve": str(s.reserve)})

    # Made by a host subclass: the three widgets, and a way to set a control's note.
    window: Any
    reserve: Any
    policy: Any

    def _note(self, control: str, text: str) -> None:
        raise NotImplementedError

    def show(self) -> None:
        s = self.settings()
        for c, text in notes_html(s, self.errors).items():
            self._note(c, text)
        if s is not None:
            _, _, _, holders = self.values()
            self.window.placeholder, self.reserve.placeholder = holders["context_window"], holders["reserve"]

    def reset(self) -> None:
        """The boxes as the document says (another session opened, or reverted)."""
        window, reserve, policy, _ = self.values()
        self._quiet = True
        try:
            self.window.value, self.reserve.value, self.policy.value = window, reserve, policy
        finally:
            self._quiet = False
        self.errors = {}
        self.show()


class PanelBudgetControls(_Controls):
    def __init__(self, controller: "Controller", label: str):
        super().__init__(controller)
        pn = require("panel", "the web app")
        window, reserve, policy, holders = self.values()
        self.window = pn.widgets.TextInput(**{label: "Context window (tokens)"}, value=window, width=140,
                                           placeholder=holders.get("context_window", ""),
                                           css_classes=["wb-window-input"])
        self.reserve = pn.widgets.TextInput(**{label: "Reserve for the reply (tokens)"}, value=reserve, width=160,
                                            placeholder=holders.get("reserve", ""), css_classes=["wb-reserve-input"])
        self.policy = pn.widgets.Select(**{label: "Truncation"}, options={POLICY_LABELS[p]: p for p in POLICIES},
                                        value=policy, width=160, css_classes=["wb-policy-select"])
        self.notes = {c: pn.pane.HTML("", css_classes=[f"wb-note-{c}"], width=w)
                      for c, w in zip(CONTROLS, (140, 160, 160))}
        self.window.param.watch(lambda e: self.changed("context_window", e.new), "value")
        self.reserve.param.watch(lambda e: self.changed("reserve", e.new), "value")
        self.policy.param.watch(lambda e: self.changed("policy", e.new), "value")
        self.layout = pn.Row(*(pn.Column(w, self.notes[c]) for c, w in
                               zip(CONTROLS, (self.window, self.reserve, self.policy))))
        self.show()

    def _note(self, control: str, text: str) -> None:
        if self.notes[control].object != text:
            self.notes[control].object = text


class NotebookBudgetControls(_Controls):
    def __init__(self, controller: "Controller"):
        super().__init__(controller)
        W = require("ipywidgets", "the notebook widgets")
        window, reserve, policy, holders = self.values()
        style = {"description_width": "initial"}
        self.window = W.Text(value=window, description="Context window", placeholder=holders.get("context_window", ""),
                             continuous_update=False, style=style)
        self.reserve = W.Text(value=reserve, description="Reserve", placeholder=holders.get("reserve", ""),
                              continuous_update=False, style=style)
        self.policy = W.Dropdown(options=[(POLICY_LABELS[p], p) for p in POLICIES], value=policy,
                                 description="Truncation", style=style)
        self.notes = {c: W.HTML() for c in CONTROLS}
        self.window.observe(lambda ch: self.changed("context_window", ch["new"]), "value")
        self.reserve.observe(lambda ch: self.changed("reserve", ch["new"]), "value")
        self.policy.observe(lambda ch: self.changed("policy", ch["new"]), "value")
        self.layout = W.HBox([W.VBox([w, self.notes[c]]) for c, w in
                              zip(CONTROLS, (self.window, self.reserve, self.policy))])
        self.show()

    def _note(self, control: str, text: str) -> None:
        if self.notes[control].value != text:
            self.notes[control].value = text
