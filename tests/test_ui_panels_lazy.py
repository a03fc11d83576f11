"""The slower panels (issue 17): computed only for the open tab, part by part, cancelled when
superseded or when the tab closes (the turns assembled by then are kept), with progress; and what a
cancelled or interrupted run leaves equals a fresh computation."""

from __future__ import annotations

from typing import Any

import pytest
from test_ui_document import RecordingHost

from workbench.errors import Cancelled
from workbench.ui.controller import Controller
from workbench.ui.state import NEEDS, PARTS, WorkbenchState, sample_sessions

SAMPLES = sample_sessions()


def figures(p: Any) -> dict:
    """What the cache panel and prefix diff show, comparable across runs."""
    return {"sims": [[(t.tokens, t.cached_tokens, t.cache_write_tokens) for t in s.turns] for s in p.simulations],
            "policies": [r.to_json() for r in p.policies],
            "diff": p.prefix_diff}    # not the segment sources: they depend on what the cache held before


def test_only_the_parts_asked_for_are_computed() -> None:
    state = WorkbenchState(SAMPLES["timestamp_system.json"], autosave=None)
    state.assemble()
    diff = state.panels(NEEDS["Prefix diff"])
    assert diff.parts == {"diff"} and diff.prefix_diff is not None and diff.simulations == ()
    # the prefix diff needs the turn before the selected one, and nothing else
    held = [state.turn_result(k) is not None for k in range(1, state.doc.turn_count + 1)]
    assert sum(held) == 2 and held[-2:] == [True, True]
    cache = state.panels(NEEDS["KV"])
    assert cache.parts == {"cache"} and len(cache.simulations) == 4
    assert cache.turns_assembled == state.doc.turn_count - 2
    assert state.panels(NEEDS["KV"]) is cache            # nothing changed: the same panels, nothing re-done


def test_a_cancelled_run_keeps_its_turns_and_the_next_run_equals_a_fresh_one() -> None:
    state = WorkbenchState(SAMPLES["overflow.json"], autosave=None)
    state.assemble()
    calls: list[int] = []

    def stop_after_five() -> None:
        calls.append(1)
        if len(calls) > 5:
            raise Cancelled("the tab closed")

    with pytest.raises(Cancelled):
        state.panels(PARTS, check=stop_after_five)
    n = state.doc.turn_count
    assert sum(state.turn_result(k) is not None for k in range(1, n + 1)) == 2 + 5
    done = state.panels(PARTS)
    assert done.turns_assembled == n - 2 - 5                 # only the turns the cancelled run had not reached
    fresh = WorkbenchState(SAMPLES["overflow.json"], autosave=None)
    fresh.assemble()
    assert figures(done) == figures(fresh.panels(PARTS))
    # cancelled while comparing the policies: the next run finishes them, with the same figures
    calls.clear()
    last = len(state.doc.messages(state.turn)) - 1
    state.apply({"op": "set", "index": last, "field": "content", "value": "one more question"})
    fresh.apply({"op": "set", "index": last, "field": "content", "value": "one more question"})

    def stop_in_the_policies() -> None:
        calls.append(1)
        if len(calls) > 1:      # the first: the edited turn; the second: in the chunked policy's turns
            raise Cancelled("superseded")

    with pytest.raises(Cancelled):
        state.panels(PARTS, check=stop_in_the_policies)
    assert figures(state.panels(PARTS)) == figures(fresh.panels(PARTS))


def test_an_edit_during_a_run_is_never_overwritten_by_the_stale_turns() -> None:
    state = WorkbenchState(SAMPLES["coding_corrections.json"], autosave=None)
    state.assemble()
    seen: list[int] = []

    def edit_early_message_midway() -> None:
        seen.append(1)
        if len(seen) == 4:     # the worker is on turn 4: an edit of message 1 touches every turn
            state.apply({"op": "set", "index": 1, "field": "content", "value": "changed mid-run"})

    stale = state.panels(NEEDS["Cache"], check=edit_early_message_midway)
    assert stale.generation < state.generation
    # none of the turns the run assembled after the edit was kept: they hold the old message
    for k in range(1, state.doc.turn_count + 1):
        r = state.turn_result(k)
        assert r is None or "changed mid-run" in r.text
    fresh = WorkbenchState(SAMPLES["coding_corrections.json"], autosave=None)
    fresh.apply({"op": "set", "index": 1, "field": "content", "value": "changed mid-run"})
    state.assemble()
    fresh.assemble()
    assert figures(state.panels(PARTS)) == figures(fresh.panels(PARTS))


def test_the_controller_computes_for_the_open_tab_only_and_reports_progress() -> None:
    state = WorkbenchState(SAMPLES["coding_corrections.json"], autosave=None)
    host = RecordingHost()
    c = Controller(state, host, background=False)
    c.views = frozenset()                          # the Tokens tab: no panel
    c.refresh()
    c.request_panels()
    last = len(state.doc.messages(state.turn)) - 1
    c.op({"op": "set", "index": last, "field": "content", "value": "typed on the Tokens tab"})
    assert host.panels == []
    c.set_views(NEEDS["Prefix diff"])               # the tab opens: brought up to date
    assert [p.parts for p in host.panels] == [{"diff"}]
    c.set_views(NEEDS["Teach"])                     # the same part, already current: nothing re-done
    assert len(host.panels) == 1
    c.set_views(NEEDS["Cache"])
    assert host.panels[-1].parts == {"cache", "policies"}
    # the worker's own loop (as a page runs it): progress lines, then "" when done
    c._progress_at = 0.0
    c.state.choose(template="llama3.1")
    c._panels_running = True
    c._panels_worker(c._panels_ticket, NEEDS["Cache"])
    assert host.progress[0].startswith("assembling every turn: turn 1 of ")
    assert host.progress[-1] == "" and host.panels[-1].assembler.template.name == "llama3.1"
    # a run for a tab that closed stops at its next turn, and shows nothing
    c.state.choose(template="qwen2.5")
    shown = len(host.panels)
    c.views = NEEDS["Cache"]
    c.yield_to_edits = lambda: setattr(c, "views", frozenset())  # type: ignore[method-assign]
    c._panels_running = True
    c._panels_worker(c._panels_ticket, NEEDS["Cache"])
    assert host.panels[shown:] == [] and host.progress[-1] == "" and not c.panel_error


def test_every_turn_is_assembled_through_one_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each turn extends (or refits) the previous one: a session per turn would assemble every turn
    cold (a Session of no turns yet is falsy: `sess or new` once made exactly that mistake)."""
    from workbench.assembly import Assembler
    state = WorkbenchState(SAMPLES["overflow.json"], autosave=None)
    made: list[int] = []
    real = Assembler.session
    monkeypatch.setattr(Assembler, "session", lambda self: (made.append(1), real(self))[1])
    p = state.panels(NEEDS["KV"])
    assert p.turns_assembled == state.doc.turn_count and len(made) == 1
