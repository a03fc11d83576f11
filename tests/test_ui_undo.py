"""Undo and redo of the message editor's steps (workbench/ui/history.py), and the per-message token
counts the editor shows: exact restores, ids equal to a cold assembly, a burst of typing as one step."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from inline_host import InlineHost

from workbench import Assembler
from workbench.ui.controller import Controller, message_counts
from workbench.ui.history import COALESCE_S, History
from workbench.ui.state import WorkbenchState, sample_sessions

SAMPLES = sample_sessions()


def state(name: str = "support_chat.json", template: str = "qwen2.5") -> WorkbenchState:
    s = WorkbenchState(SAMPLES[name], autosave=None, template=template, restore=False)
    s.assemble()
    return s


def cold(s: WorkbenchState) -> np.ndarray:
    return Assembler(template=s.template, cache=None).assemble(s.doc.request(s.turn)).token_ids


@pytest.mark.parametrize("op", [
    {"op": "delete", "index": 3},
    {"op": "delete", "index": 219},                       # the last message: the turn count changes
    {"op": "insert", "index": 5, "role": "assistant"},
    {"op": "move", "index": 4, "to": 9},
    {"op": "set", "index": 2, "field": "role", "value": "user"},
    {"op": "set", "index": 7, "field": "content", "value": "rewritten"},
    {"op": "set", "index": 1, "field": "content", "value": '[{"type": "text", "text": "hey"}]', "json": True},
])
def test_undo_restores_exactly_and_redo_does_it_again(op: dict) -> None:
    s = state()
    data, turn, ids = copy.deepcopy(s.doc.data), s.turn, s.assemble().token_ids.copy()
    s.apply(op)
    edited_data, edited = copy.deepcopy(s.doc.data), s.assemble().token_ids.copy()
    assert not np.array_equal(edited, ids)
    step, _ = s.undo()
    assert s.doc.data == data and s.turn == turn
    got = s.assemble().token_ids                           # the live session, incremental
    assert got.dtype == np.uint32 and np.array_equal(got, ids) and np.array_equal(got, cold(s))
    assert step.label.split()[0] in ("deleted", "added", "moved", "changed", "edited")
    assert s.undo(redo=True) is not None
    assert s.doc.data == edited_data and np.array_equal(s.assemble().token_ids, edited)
    assert np.array_equal(s.assemble().token_ids, cold(s))


def test_a_burst_of_keystrokes_is_one_step_and_a_pause_starts_another() -> None:
    h = History()
    a, b, c, d = [1], [2], [3], [4]
    op = {"op": "set", "index": 1, "field": "content", "value": "x"}
    h.record(op, 1, a, b, now=10.0)
    h.record(op, 1, b, c, now=10.5)
    assert len(h.undo_steps) == 1 and h.undo_steps[0].before is a and h.undo_steps[0].after is c
    h.record(op, 1, c, d, now=10.5 + COALESCE_S + 0.1)     # after a pause
    h.record({**op, "index": 2}, 1, d, a, now=12.5)        # another message
    h.record({"op": "delete", "index": 2}, 1, a, b, now=12.6)
    h.record({"op": "delete", "index": 2}, 1, b, c, now=12.7)   # deletes never fold
    assert [st.label for st in h.undo_steps] == ["edited message 1", "edited message 1", "edited message 2",
                                                 "deleted message 2", "deleted message 2"]
    assert h.undo() is not None and h.can_redo
    h.record(op, 1, c, d, now=20.0)                        # a new edit drops the redo list
    assert not h.can_redo


def test_typing_in_the_workbench_undoes_in_one_step_to_the_text_before() -> None:
    s = state()
    i = len(s.doc.messages(s.turn)) - 1
    before = s.doc.messages(s.turn)[i]["content"]
    ids = s.assemble().token_ids.copy()
    for k in range(1, 6):                                  # five keystrokes, as the editor sends them
        s.apply({"op": "set", "index": i, "field": "content", "value": before + "abcde"[:k]})
        s.assemble()
    assert len(s.history.undo_steps) == 1
    s.undo()
    assert s.doc.messages(s.turn)[i]["content"] == before and np.array_equal(s.assemble().token_ids, ids)


def test_a_log_of_requests_undoes_in_the_turn_it_was_edited() -> None:
    s = state("timestamp_system.json")
    s.select_turn(1)
    data = copy.deepcopy(s.doc.data)
    s.apply({"op": "delete", "index": 0})
    s.select_turn(s.doc.turn_count)
    s.undo()
    assert s.turn == 1 and s.doc.data == data and np.array_equal(s.assemble().token_ids, cold(s))


def test_opening_another_session_forgets_the_steps() -> None:
    s = state()
    s.apply({"op": "delete", "index": 1})
    s.load(SAMPLES["openai_minimal.json"], restore=False)
    assert s.undo() is None and s.undo(redo=True) is None


class Host(InlineHost):
    def __init__(self) -> None:
        self.results: list[Any] = []
        self.editor: list[bool] = []

    def show_result(self, result: Any) -> None:
        self.results.append(result)

    def show_editor(self, structural: bool) -> None:
        self.editor.append(structural)


def test_the_editor_undo_operation_and_the_button_go_through_the_controller() -> None:
    s = state()
    host = Host()
    c = Controller(s, host, background=False)
    c.views = frozenset()
    ids = c.refresh().token_ids.copy()
    n = len(s.doc.messages(s.turn))
    c.ops([{"op": "delete", "index": 5}])
    assert len(s.doc.messages(s.turn)) == n - 1
    c.ops([{"op": "undo"}])                               # Ctrl+Z, or the notice's Undo, in the editor
    assert len(s.doc.messages(s.turn)) == n and host.editor[-1] is True
    assert np.array_equal(host.results[-1].token_ids, ids)
    c.ops([{"op": "redo"}])
    assert len(s.doc.messages(s.turn)) == n - 1
    assert c.undo() == "deleted message 5"                 # the Undo button
    assert np.array_equal(host.results[-1].token_ids, ids)
    assert c.undo() == "" and c.undo(redo=True) == "deleted message 5"
    assert c.undo(redo=True) == ""


def test_token_counts_per_message_come_from_the_segments() -> None:
    s = state()
    c = Controller(s, Host(), background=False)
    r = s.result
    counts = c.token_counts()
    n = len(s.doc.messages(s.turn))
    assert len(counts) == n and all(isinstance(k, int) and k > 0 for k in counts)
    other = sum(seg.token_count for seg in r.segments if seg.kind not in ("message", "system"))
    assert sum(counts) + other == r.total_tokens
    # Anthropic: the request's system field is seq 0, the list's first message seq 1.
    a = state("anthropic_minimal.json")
    counts = Controller(a, Host(), background=False).token_counts()
    by_seq = {seg.seq: seg.token_count for seg in a.result.segments if seg.kind == "message"}
    assert counts == [by_seq[k + 1] for k in range(len(counts))]
    # A turn before the last: the messages after it are not in the prompt.
    s.select_turn(3)
    s.assemble()
    later = c.token_counts()
    assert later[-1] is None and later[0] is not None
    assert message_counts(None, 3) == [None, None, None]
    assert c.editor_data()["counts"] == later
