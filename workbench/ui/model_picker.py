"""The model, template and tokenizer pickers and the KV tab's shape picker, in both hosts: a model
chosen in the picker moves the other pickers to what it set (quietly: that is not a choice by hand),
a template or tokenizer chosen by hand overrides the model's, and the note under the picker says
what the model set, what is overridden, or why a name was refused (an unknown model: the closest
names). The logic is in `WorkbenchState.choose` and model_choice.py; this module lays the widgets
out and keeps them in step, as budget_controls.py does for the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._optional import require
from ..templates import shipped_names
from ..tokenizers import names as tokenizer_names
from .model_choice import NO_MODEL, kv_default, kv_options, model_note_html, model_options
from .state import AUTO

if TYPE_CHECKING:
    from .controller import Controller


class _Pickers:
    """What both hosts' pickers do; a host subclass makes the widgets (`model`, `template`,
    `tokenizer`, `kv`) and sets the note and a select's options."""

    model: Any
    template: Any
    tokenizer: Any
    kv: Any

    def __init__(self, controller: "Controller"):
        self.controller = controller
        self._quiet = False
        self._kv_for: str | None = None            # the model the KV picker's options were made for
        self.on_choice: Callable[[], None] = lambda: None   # the host: the KV tab, the summary line

    def picked(self, what: str, value: Any) -> str:
        """A picker changed (`what`: model, template, tokenizer): the error shown inline, '' if it applied."""
        if self._quiet or value is None:
            return ""
        error = self.controller.choose(**{what: value})
        self.show()
        self.on_choice()
        return error

    def show(self) -> None:
        """Every picker as the state is now, and the note."""
        s = self.controller.state
        mid = s.model.id if s.model is not None else None
        self._quiet = True
        try:
            self._value(self.model, mid or NO_MODEL)
            self._value(self.template, s.template)
            self._value(self.tokenizer, s.tokenizer)
            if mid != self._kv_for:                  # another model: its own shape (the one picked by hand goes)
                self._kv_for = mid
                self._options(self.kv, kv_options(s.model), kv_default(s.model))
        finally:
            self._quiet = False
        self._note(model_note_html(s))

    def kv_choice(self) -> Any:
        """The KV shape the KV tab shows: the one its picker names (the model's own by default)."""
        return self.controller.state.kv_choice(self.kv.value)

    # a host subclass: set a select's value or its options, and the note
    def _value(self, widget: Any, value: Any) -> None:
        if widget.value != value:
            widget.value = value

    def _options(self, widget: Any, options: list[str], value: str) -> None:
        raise NotImplementedError

    def _note(self, html: str) -> None:
        raise NotImplementedError


class PanelPickers(_Pickers):
    def __init__(self, controller: "Controller", label: str, css: str):
        super().__init__(controller)
        pn = require("panel", "the web app")
        s = controller.state
        self.model = pn.widgets.Select(**{label: "Model"}, options=model_options(),
                                       value=s.model.id if s.model is not None else NO_MODEL, width=420,
                                       css_classes=["wb-model-select"])
        self.template = pn.widgets.Select(**{label: "Template"}, options=shipped_names(), value=s.template, width=150)
        self.tokenizer = pn.widgets.Select(**{label: "Tokenizer"}, options=[AUTO, *tokenizer_names()],
                                           value=s.tokenizer, width=150)
        self.kv = pn.widgets.Select(**{label: "Model shape (KV)"}, options=kv_options(s.model),
                                    value=kv_default(s.model), width=260)
        self._kv_for = s.model.id if s.model is not None else None
        self.note = pn.pane.HTML(model_note_html(s), sizing_mode="stretch_width", stylesheets=[css],
                                 css_classes=["wb-model-note-pane"])
        for what in ("model", "template", "tokenizer"):
            getattr(self, what).param.watch(lambda e, w=what: self.picked(w, e.new), "value")

    def _options(self, widget: Any, options: list[str], value: str) -> None:
        widget.param.update(options=options, value=value)

    def _note(self, html: str) -> None:
        if self.note.object != html:
            self.note.object = html


class NotebookPickers(_Pickers):
    def __init__(self, controller: "Controller"):
        super().__init__(controller)
        W = require("ipywidgets", "the notebook widgets")
        s = controller.state
        self.model = W.Dropdown(description="Model", options=list(model_options().items()),
                                value=s.model.id if s.model is not None else NO_MODEL)
        self.template = W.Dropdown(description="Template", options=shipped_names(), value=s.template)
        self.tokenizer = W.Dropdown(description="Tokenizer", options=[AUTO, *tokenizer_names()], value=s.tokenizer)
        self.kv = W.Dropdown(description="KV shape", options=kv_options(s.model), value=kv_default(s.model))
        self._kv_for = s.model.id if s.model is not None else None
        self.note = W.HTML(model_note_html(s))
        for what in ("model", "template", "tokenizer"):
            getattr(self, what).observe(lambda c, w=what: self.picked(w, c["new"]), "value")

    def _options(self, widget: Any, options: list[str], value: str) -> None:
        widget.options = options       # (resets the value: quiet here)
        widget.value = value

    def _note(self, html: str) -> None:
        if self.note.value != html:
            self.note.value = html


__all__ = ["NotebookPickers", "PanelPickers"]
