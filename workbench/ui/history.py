"""Undo and redo for the message editor (no UI library here).

Each step keeps the messages list of the turn it changed as it was before and after. The document
is copy-on-write (`SessionDocument.apply` makes a new list and a new message object for every
change, and never changes one in place), so keeping a list is keeping pointers: the lists are the
very objects the document held, and restoring one gives back exactly what was there. The inverse of
a step is the restore of its `before` list, its redo the restore of `after`
(`SessionDocument.replace_messages`, which says which turns changed, as every edit does).

A burst of keystrokes in one field of one message is one step: a text edit to the same field as the
step before, within COALESCE_S of it, extends that step instead of making a new one. Any other
edit starts a new step, and a new step drops the redo list.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

COALESCE_S = 1.5     # a pause longer than this in typing starts a new undo step
LIMIT = 200          # steps kept; the oldest are dropped
TEXT_FIELDS = ("content", "tool_call_id", "name", "tool_calls",
               "arguments", "call_id", "output", "summary", "input")   # the last five: Responses items


@dataclass
class Step:
    turn: int            # the turn whose messages list changed (a log of requests has one list per turn)
    before: list[Any]    # the list as it was before the step (the very object: copy-on-write)
    after: list[Any]     # and after it
    label: str           # "deleted message 3", "edited message 2", for the page's notice
    key: tuple[Any, ...] | None = None   # (turn, index, field) of a text edit: the next one may coalesce
    at: float = 0.0      # monotonic time of the last edit folded in
    # A step that changed more than one messages list (a one-click fix: tools, every request of a
    # log): swap(redo) puts the whole document back as it was before (after, with redo).
    swap: Callable[[bool], Any] | None = None


def describe(op: dict[str, Any]) -> str:
    kind, i = op.get("op"), op.get("index")
    if kind == "set":
        return f"edited message {i}" if op.get("field") != "role" else f"changed the role of message {i}"
    if kind == "delete":
        return f"deleted message {i}"
    if kind == "insert":
        return f"added message {i}"
    if kind == "move":
        return f"moved message {i} to {op.get('to')}"
    return str(kind)


class History:
    """The undo and redo stacks of one document."""

    def __init__(self, limit: int = LIMIT):
        self.limit = limit
        self.undo_steps: list[Step] = []
        self.redo_steps: list[Step] = []

    def clear(self) -> None:
        self.undo_steps, self.redo_steps = [], []

    @property
    def can_undo(self) -> bool:
        return bool(self.undo_steps)

    @property
    def can_redo(self) -> bool:
        return bool(self.redo_steps)

    def record(self, op: dict[str, Any], turn: int, before: list[Any], after: list[Any],
               now: float | None = None) -> Step:
        """An edit applied at `turn`: `before` and `after` are its messages lists."""
        now = time.monotonic() if now is None else now
        key = (turn, op.get("index"), op.get("field"), op.get("part")) if op.get("op") == "set" and \
            op.get("field") in TEXT_FIELDS else None
        self.redo_steps = []
        last = self.undo_steps[-1] if self.undo_steps else None
        if key is not None and last is not None and last.key == key and now - last.at <= COALESCE_S:
            last.after, last.at = after, now
            return last
        step = Step(turn, before, after, describe(op), key, now)
        self.undo_steps.append(step)
        del self.undo_steps[:-self.limit]
        return step

    def push(self, step: Step) -> None:
        """A step made elsewhere (a one-click fix): undone and redone like an edit."""
        self.redo_steps = []
        self.undo_steps.append(step)
        del self.undo_steps[:-self.limit]

    def undo(self) -> Step | None:
        """The step to undo (its `before` is to be restored), moved to the redo stack."""
        if not self.undo_steps:
            return None
        step = self.undo_steps.pop()
        step.key = None        # an edit after an undo never folds into the undone step
        self.redo_steps.append(step)
        return step

    def redo(self) -> Step | None:
        """The step to redo (its `after` is to be restored), moved back to the undo stack."""
        if not self.redo_steps:
            return None
        step = self.redo_steps.pop()
        self.undo_steps.append(step)
        return step
