"""A session: the successive requests of one conversation, each with its result.

Each request reuses the previous result's unchanged prefix (workbench/assembly/incremental.py):
only what changed is rendered and tokenized, and the ids equal a cold assembly's.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from operator import attrgetter
from typing import Any, Protocol

from ..cleaning import CleaningPolicy, CleanState, clean_next
from ..conversation import Conversation
from ..diagnostics import Diagnostic
from ..errors import WorkbenchError
from ..intake import IntakeLimits
from ..intake.next_request import IntakeState, normalize_next
from .result import AssemblyResult

_TEMPLATE_FLAG = attrgetter("template")


class _Config(Protocol):
    @property
    def intake(self) -> IntakeLimits: ...
    @property
    def cleaning(self) -> CleaningPolicy: ...


class Assembles(Protocol):
    """What a session needs of its assembler (workbench/assembly/assembler.py is one)."""

    @property
    def config(self) -> _Config: ...

    def assemble(self, request: Any, *, add_generation_prompt: bool | None = None,
                 previous: AssemblyResult | None = None,
                 normalized: tuple[Conversation, list[Diagnostic]] | None = None,
                 cleaned: tuple[Conversation, list[Diagnostic]] | None = None) -> AssemblyResult: ...


class Session:
    """`keep`: how many of the latest requests and results to hold. Only the last is needed to
    extend; holding every result of a long conversation would keep every turn's token array alive
    (memory, and garbage-collector time that grows with the history)."""

    def __init__(self, assembler: Assembles, keep: int = 16):
        if keep < 1:
            raise WorkbenchError(f"a session keeps at least its last result, got keep={keep}")
        self.assembler = assembler
        self.requests: deque[Any] = deque(maxlen=keep)
        self.results: deque[AssemblyResult] = deque(maxlen=keep)
        self.count = 0  # requests assembled so far
        self._intake: IntakeState | None = None
        self._clean: CleanState | None = None
        # The last request's conversation as the chat template saw it, before truncation (what
        # `Assembler.prepare(request)[0]` returns): None when prompt templates expanded in it (the
        # assembler did that), then `prepare` says. The analysis reads it instead of preparing each
        # request again from its first message.
        self.prepared: Conversation | None = None
        self._templated: bool | None = None   # whether the last request had prompt-template messages

    def __len__(self) -> int:
        return self.count

    @property
    def last(self) -> AssemblyResult | None:
        return self.results[-1] if self.results else None

    @property
    def intake(self) -> IntakeState | None:
        """What the last request parsed to (a Responses request: where each message's items stop)."""
        return self._intake

    def assemble(self, request: Any, **kw: Any) -> AssemblyResult:
        # Unchanged messages keep their parsed form, and the previous result lends its unchanged
        # prefix (text, ids, segments): incremental assembly.
        asm = self.assembler
        t = time.perf_counter()
        conv, diags, state = normalize_next(request, self._intake, asm.config.intake)
        t1 = time.perf_counter()
        # Messages the intake kept from the previous request were looked at then: only the new ones
        # are (a long conversation would otherwise be read whole on every turn).
        k = state.reused if state is not None and self._templated is False else 0
        templated = any(map(_TEMPLATE_FLAG, conv.messages[k:] if k else conv.messages))
        if templated:
            # Prompt templates expand before cleaning, and their values change per request.
            r = asm.assemble(request, previous=self.last, normalized=(conv, diags), **kw)
            self._clean = None
            prepared = None
        else:
            k = state.reused if state is not None else 0
            # The intake kept the first k messages of the request the last cleaning saw (the same
            # objects): cleaning need not compare them again.
            known = self._clean is not None and self._intake is not None and \
                self._clean.messages is self._intake.conversation.messages
            cleaned, cdiags, self._clean = clean_next(conv, asm.config.cleaning, self._clean, k, known)
            t2 = time.perf_counter()
            r = asm.assemble(request, previous=self.last, cleaned=(cleaned, diags + cdiags), **kw)
            r.timings_ms["clean"] = (t2 - t1) * 1e3
            prepared = cleaned
        r.timings_ms["normalize"] = (t1 - t) * 1e3
        self._intake = state
        self._templated = templated
        self.prepared = prepared
        # Recorded only on success: a request that raised is not part of the conversation.
        self.requests.append(request)
        self.results.append(r)
        self.count += 1
        return r

    async def assemble_async(self, request: Any, **kw: Any) -> AssemblyResult:
        return await asyncio.to_thread(self.assemble, request, **kw)
