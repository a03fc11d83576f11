"""The prefix diff's Fix buttons through the controller (fix_buttons.py): the cause maps to its fix,
the fix applies to the session being edited as one undo step, and the cache panel's figures follow.
The buttons say the fix in words; once the session changes (Undo, Redo, an edit, another session)
the result no longer claims the fix is applied (issue 33)."""

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


LABEL = "Move the volatile text (a timestamp and an id) after the stable prefix"


def clicked_notebook() -> Any:
    """A notebook on timestamp_system.json whose one Fix button was clicked and whose result is shown."""
    import time

    from workbench.ui.notebook import Workbench
    w = Workbench(sample_sessions()["timestamp_system.json"])
    w._show_panels(w.state.panels(parts=("diff",)))
    (button,) = w.fix_bar.buttons.children
    assert button.description == LABEL and button.tooltip == "move-volatile"     # words, the name on hover
    button.click()                                   # measured on the controller's worker thread
    deadline = time.monotonic() + 120
    while "wb-fix-result" not in w.fix_bar.result.value and "wb-fix-error" not in w.fix_bar.result.value:
        assert time.monotonic() < deadline, w.fix_bar.result.value
        time.sleep(0.1)
    return w


def shown(w: Any) -> str:
    """The fix bar's result without the stylesheet it carries."""
    return str(w.fix_bar.result.value).split("</style>")[-1]


def test_the_notebooks_fix_button_applies_the_fix() -> None:
    w = clicked_notebook()
    after = vllm_cached_now(w.state)
    assert f"{LABEL}</b>: applied (Undo takes it back)" in shown(w)
    assert w.controller.undo() == "fix move-volatile" and vllm_cached_now(w.state) < after


def test_after_undo_redo_and_an_edit_the_notebooks_fix_result_no_longer_says_applied() -> None:
    w = clicked_notebook()
    assert "applied (Undo takes it back)" in shown(w) and "wb-fix-cached" in shown(w)
    assert w.undo() == "fix move-volatile"
    # At once (the controller's generation hook), not when the slower panels follow.
    assert "applied" not in shown(w) and "wb-fix-cached" not in shown(w), shown(w)
    assert f"{LABEL}</b>: undone: the session is as it was before the fix (Redo puts the fix back)." in shown(w)
    assert w.redo() == "fix move-volatile"
    assert "applied" not in shown(w)
    assert "redone: in the session again (Undo takes it back); the Cache tab shows its figures." in shown(w)
    w.controller.op({"op": "set", "index": 1, "field": "content", "value": "an edit after the fix"})
    assert "applied" not in shown(w)
    assert "in the session, with later edits after it: its figures no longer hold." in shown(w)
    w.controller.open(sample_sessions()["support_chat.json"])      # another session: the result was not for it
    assert shown(w) == ""


def test_a_panel_fix_bar_forgets_its_result_after_undo() -> None:
    from workbench.ui.fix_buttons import PanelFixBar
    from workbench.ui.html import CSS
    s = WorkbenchState(sample_sessions()["timestamp_system.json"], restore=False)
    c = Controller(s, Host(), background=False)
    c.views = frozenset()
    bar = PanelFixBar(c, CSS)
    bar.update(s.panels(parts=("diff",)).prefix_diff)
    (button,) = bar.buttons.objects
    assert button.name == LABEL
    bar.click("move-volatile", button.name)          # inline: the controller runs without a worker
    assert f"{LABEL}</b>: applied (Undo takes it back)" in bar.result.object
    c.undo()
    assert "applied" not in bar.result.object and "undone" in bar.result.object, bar.result.object
