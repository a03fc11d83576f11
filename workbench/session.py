"""A session: successive requests of one conversation, keeping the previous result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .assembler import Assembler
    from .result import AssemblyResult


class Session:
    def __init__(self, assembler: "Assembler"):
        self.assembler = assembler
        self.results: list["AssemblyResult"] = []

    @property
    def last(self) -> "AssemblyResult | None":
        return self.results[-1] if self.results else None

    def assemble(self, request: Any) -> "AssemblyResult":
        # Incremental reuse of the unchanged prefix arrives with the segment cache.
        r = self.assembler.assemble(request)
        self.results.append(r)
        return r
