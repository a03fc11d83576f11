"""The notebook's budget controls (the `Workbench` widget's window, reserve and truncation boxes),
driven as the front end drives them: by setting the widgets' synced values. Real ipywidgets and
anywidget models, real tokenizers; the views' state is what the kernel would send to the page."""

from __future__ import annotations

from workbench.ui.state import sample_sessions


def test_the_notebook_controls_strike_the_overflow_and_refuse_bad_values_inline() -> None:
    from workbench.ui.notebook import Workbench
    wb = Workbench(sample_sessions()["coding_corrections.json"])
    c = wb.budget_controls
    assert "32,768 tokens · from template qwen2.5" in c.notes["context_window"].value
    assert c.window.value == "" and c.window.placeholder == "32768"
    assert wb.view.header["overflow"] is None

    c.policy.value = "none"
    c.window.value = "2000"
    ov = wb.state.overflow
    assert ov is not None and ov.over == wb.result.budget.used - wb.result.budget.input_budget > 0
    assert wb.view.header["overflow"]["note"].startswith(f"{ov.over:,} tokens over the window: the struck-through")
    assert "2,000 tokens · from session file" in c.notes["context_window"].value
    assert wb.state.doc.data["context_window"] == 2000
    b = wb.result.budget
    marks = {sh.name: sh for sh in wb.budget.layout.shapes}
    assert (marks["context window"].x0, marks["input budget"].x0) == (b.context_window, b.input_budget)
    assert next(t for t in wb.budget.data if t.name == "over the window").x[0] == b.used - b.input_budget

    c.policy.value = "summary-slot"
    dropped = wb.view.header["overflow"]["dropped"]
    assert dropped == len(wb.result.dropped) > 0
    assert "summary-slot truncation drops" in wb.view.header["overflow"]["note"]
    assert any(t.name == "dropped (not sent)" for t in wb.budget.data)

    shown, version = wb.result, wb.view.version
    c.reserve.value = "2500"
    assert "the reserve (2,500) leaves no room for input" in c.notes["reserve"].value
    c.reserve.value = "12.5"
    assert "a whole number of tokens" in c.notes["reserve"].value
    assert wb.result is shown and wb.view.version == version and "max_tokens" not in wb.state.doc.data
    c.reserve.value = "300"
    assert c.notes["reserve"].value.count("wb-budget-error") == 0 and wb.result.budget.reserve == 300

    # From code, as a scripted notebook does: the boxes follow.
    assert wb.set_budget(context_window=8192, policy="chunked") == {}
    assert c.window.value == "8192" and c.policy.value == "chunked" and wb.result.budget.context_window == 8192
    assert "reserve" in wb.set_budget(reserve=9000) and "leaves no room" in c.notes["reserve"].value

    # Another session: the boxes show its own values.
    wb._open(sample_sessions()["overflow.json"])
    assert c.window.value == "32768" and c.reserve.value == ""
    assert "from session file" in c.notes["context_window"].value
