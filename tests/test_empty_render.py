"""Issue 17: a template that renders nothing says so (diagnostic `empty_render`), in the library and
in the app's Diagnostics tab and summary line."""

from __future__ import annotations

from workbench.ui.html import diagnostics_html
from workbench.ui.state import WorkbenchState, sample_sessions


def test_a_template_that_renders_nothing_warns_empty_render() -> None:
    state = WorkbenchState(sample_sessions()["openai_minimal.json"], autosave=None)
    state.choose(custom_source="{# nothing #}")
    result = state.assemble()
    assert result.total_tokens == 0
    codes = {d.code: d for d in result.diagnostics}
    assert "empty_render" in codes and codes["empty_render"].level == "warning"
    assert "empty_render" in diagnostics_html(result)
    state.choose(custom_source="")
    assert "empty_render" not in {d.code for d in state.assemble().diagnostics}   # a real template: no warning
