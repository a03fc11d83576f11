"""Notebook widgets (anywidget): the token view, fed by patches over the widget's message channel.

The front end (`widgets/token_view.js` and `.css`, no build step) keeps the segments it was sent.
Each update sends only a patch: the segments after the first one that changed, with their token
ids, token ends and special-token flags as binary buffers. A newly displayed view asks for the
whole state ("sync") and gets a patch that keeps nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._optional import require
from ..assembler import Assembler
from ..result import AssemblyResult
from .viewmodel import Patch, PatchFeed

WIDGETS = Path(__file__).resolve().parent.parent.parent / "widgets"

_anywidget = require("anywidget", "the notebook widgets")
_traitlets = require("traitlets", "the notebook widgets")


class TokenView(PatchFeed, _anywidget.AnyWidget):  # type: ignore[misc, name-defined]
    """The rendered prompt as coloured segments, special tokens marked, token id and segment on hover."""

    _esm = WIDGETS / "token_view.js"
    _css = WIDGETS / "token_view.css"
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
        tok = self._assembler.tokenizer if self._assembler is not None and \
            self._assembler.tokenizer.version == result.tokenizer["version"] else get_tokenizer(result.tokenizer["name"])
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
