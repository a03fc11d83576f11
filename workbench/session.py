"""A session: the successive requests of one conversation, each with its result.

Each request reuses the previous result's unchanged prefix (workbench/incremental.py):
only what changed is rendered and tokenized, and the ids equal a cold assembly's.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from .intake.incremental import IntakeState, normalize_next

if TYPE_CHECKING:
    from .assembler import Assembler
    from .result import AssemblyResult


class Session:
    def __init__(self, assembler: "Assembler"):
        self.assembler = assembler
        self.requests: list[Any] = []
        self.results: list["AssemblyResult"] = []
        self._intake: IntakeState | None = None

    def __len__(self) -> int:
        return len(self.results)

    @property
    def last(self) -> "AssemblyResult | None":
        return self.results[-1] if self.results else None

    def assemble(self, request: Any, **kw: Any) -> "AssemblyResult":
        # Unchanged messages keep their parsed form, and the previous result lends its unchanged
        # prefix (text, ids, segments): incremental assembly.
        t = time.perf_counter()
        conv, diags, state = normalize_next(request, self._intake, self.assembler.config.intake)
        ms = (time.perf_counter() - t) * 1e3
        r = self.assembler.assemble(request, previous=self.last, normalized=(conv, diags), **kw)
        r.timings_ms["normalize"] = ms
        self._intake = state
        # Recorded only on success: a request that raised is not part of the conversation.
        self.requests.append(request)
        self.results.append(r)
        return r

    async def assemble_async(self, request: Any, **kw: Any) -> "AssemblyResult":
        return await asyncio.to_thread(self.assemble, request, **kw)
