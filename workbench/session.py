"""A session: the successive requests of one conversation, each with its result.

The caching issue builds incremental assembly on this (reuse the previous result's
unchanged prefix); today every request is assembled cold, so results are exact by
construction.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .assembler import Assembler
    from .result import AssemblyResult


class Session:
    def __init__(self, assembler: "Assembler"):
        self.assembler = assembler
        self.requests: list[Any] = []
        self.results: list["AssemblyResult"] = []

    def __len__(self) -> int:
        return len(self.results)

    @property
    def last(self) -> "AssemblyResult | None":
        return self.results[-1] if self.results else None

    def assemble(self, request: Any, **kw: Any) -> "AssemblyResult":
        r = self.assembler.assemble(request, **kw)
        # Recorded only on success: a request that raised is not part of the conversation.
        self.requests.append(request)
        self.results.append(r)
        return r

    async def assemble_async(self, request: Any, **kw: Any) -> "AssemblyResult":
        return await asyncio.to_thread(self.assemble, request, **kw)
