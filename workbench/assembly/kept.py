"""What a truncated result remembers for the next request of its session.

A truncated prompt is an exact assembly of the kept messages: the mandatory ones before the kept
history (system messages), perhaps a summary slot, then every message from `start` on. The next
request keeps the same start while it can; what it needs to prove that without re-tokenizing the
window is here (workbench/assembly/refit.py reads it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..conversation import Conversation, Message


@dataclass(frozen=True, slots=True)
class KeptWindow:
    full: Conversation            # the request's whole conversation, after cleaning
    head: tuple[int, ...]         # the mandatory messages kept from before `start` (indices in `full`)
    start: int                    # index in `full` of the first kept history message
    units: int                    # droppable units dropped
    dropped: int                  # messages dropped
    budget: int                   # the input budget it was fitted to
    # Tokens that keeping the units back to the last one known not to fit would add, counted in a
    # proven splice: while the kept prompt plus this stays over the budget, no fewer drops fit.
    # None: not known (the template renders messages differently by position), so never reused.
    witness: int | None
    spacing: float = 0.0          # chunked: the chunk spacing (estimate units), from the oldest history
    before: float = 0.0           # chunked: estimated size of the units before the one ahead of start
    at: float = 0.0               # chunked: estimated size of the units before start
    slot: Message | None = None   # summary-slot: the message standing in for the dropped ones
    slot_tokens: int = 0          # the prompt's tokens with the slot, less its tokens without it

    def kept(self, conv: Conversation) -> Conversation:
        """`conv` with this window's drops: the head, the slot, and everything from `start` on."""
        msgs = conv.messages
        head = tuple(msgs[i] for i in self.head)
        slot = (self.slot,) if self.slot is not None else ()
        return conv.with_messages(head + slot + msgs[self.start:])
