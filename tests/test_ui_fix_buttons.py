"""The prefix diff's Fix buttons through the controller (fix_buttons.py): the cause maps to its fix,
the fix applies to the session being edited as one undo step, and the cache panel's figures follow."""

from __future__ import annotations

from typing import Any

import numpy as np
from test_ui_undo import Host

from workbench.ui.controller import Controller
from workbench.ui.fix_buttons import buttons_for, run_fix
from workbench.ui.state import WorkbenchState, sample_sessions


def vllm_cached_now(state: WorkbenchState) -> int:
    panels = state.panels(parts=("cache", "diff"))
    return next(s.turns[-1].cached_tokens for s in panels.simulations if s.provider == "vllm")


def test_a_fix_button_applies_its_fix_undoably_and_the_cached_tokens_change() -> None:
    s = WorkbenchState(sample_sessions()["timestamp_system.json"], restore=False)
    host = Host()
    c = Controller(s, host, background=False)
    c.views = frozenset()
    original = s.doc.data
    ids = c.refresh().token_ids.copy()
    panels = s.panels(parts=("diff",))
    assert buttons_for(panels.prefix_diff) == [("volatile_content", "move-volatile")]
    before = vllm_cached_now(s)
    got: list[Any] = []
    run_fix(c, "move-volatile", lambda report, error: got.append((report, error)))
    report, error = got[-1]
    assert error == "" and report.applied and report.cached_after["vllm"] > report.cached_before["vllm"]
    assert report.cached_before["vllm"] == before
    assert "Current time" not in s.doc.data["requests"][0]["messages"][0]["content"]
    assert vllm_cached_now(s) == report.cached_after["vllm"] > before
    assert c.undo() == "fix move-volatile"                       # the whole session back, as it was
    assert s.doc.data is original and np.array_equal(host.results[-1].token_ids, ids)
    assert vllm_cached_now(s) == before
    assert c.undo(redo=True) == "fix move-volatile"
    assert vllm_cached_now(s) == report.cached_after["vllm"]


def test_a_fix_that_changes_the_rendering_only_leaves_the_session_alone() -> None:
    s = WorkbenchState(sample_sessions()["coding_corrections.json"], restore=False, template="qwen3")
    c = Controller(s, Host(), background=False)
    c.views = frozenset()
    data = s.doc.data
    got: list[Any] = []
    run_fix(c, "keep-reasoning", lambda report, error: got.append((report, error)))
    report, error = got[-1]
    assert error == "" and not report.applied and "no switch" in report.note
    assert s.doc.data is data and not s.history.can_undo
    run_fix(c, "no-such-fix", lambda report, error: got.append((report, error)))
    assert got[-1][0] is None and "unknown fix 'no-such-fix'" in got[-1][1]


def test_the_notebooks_fix_button_applies_the_fix() -> None:
    import time

    from workbench.ui.notebook import Workbench
    w = Workbench(sample_sessions()["timestamp_system.json"])
    w._show_panels(w.state.panels(parts=("diff",)))
    before = vllm_cached_now(w.state)
    (button,) = w.fix_bar.buttons.children
    assert button.description == "Fix volatile_content: move-volatile"
    button.click()                                   # measured on the controller's worker thread
    deadline = time.monotonic() + 120
    while "wb-fix-result" not in w.fix_bar.result.value and "wb-fix-error" not in w.fix_bar.result.value:
        assert time.monotonic() < deadline, w.fix_bar.result.value
        time.sleep(0.1)
    assert "applied (Undo takes it back)" in w.fix_bar.result.value
    assert vllm_cached_now(w.state) > before
    assert w.controller.undo() == "fix move-volatile" and vllm_cached_now(w.state) == before
