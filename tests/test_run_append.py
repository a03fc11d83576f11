"""Nothing is written to a user's session without asking (issue 33): a generated reply (the synthetic
`tiny` model's is meaningless) is shown, marked synthetic, and appended only on an explicit click
(the app's "Append this reply", the notebook's button or `Workbench.append_reply()`). Both hosts,
in process, generating for real on `tiny`."""

from __future__ import annotations

from pathlib import Path

from workbench.ui.document import Autosave
from workbench.ui.state import sample_sessions

SESSION = sample_sessions()["openai_minimal.json"]


def roles(state) -> list[str]:  # type: ignore[no-untyped-def]
    return [m["role"] for m in state.doc.messages(state.doc.turn_count)]


def test_the_app_shows_a_reply_and_appends_it_only_on_the_click(tmp_path: Path) -> None:
    from workbench.ui.app import WorkbenchApp

    app = WorkbenchApp(SESSION, autosave=Autosave(tmp_path))       # no server: the work runs inline
    before, generation = roles(app.state), app.state.generation
    app.run.max_new.value = 4
    app.run.run()
    assert roles(app.state) == before and app.state.generation == generation and not app.state.doc.dirty
    assert app.run.append.visible
    assert "Synthetic model (random weights): this reply means nothing" in app.run.out.object
    assert not list(tmp_path.iterdir()), "an autosave was written without a click"
    app.run.append.clicks += 1
    assert roles(app.state) == [*before, "assistant"]
    assert "appended to the session as message" in app.run.out.object and not app.run.append.visible
    assert app.state.doc.messages(app.state.doc.turn_count)[-1]["content"] == app.run.last.text
    # A reply to a prompt that has changed since is not appended: the click says why.
    n = len(roles(app.state))
    app.controller.ops([{"op": "insert", "index": n, "message": {"role": "user", "content": "And then?"}}])
    app.run.run()
    assert app.run.append.visible
    app.controller.ops([{"op": "set", "index": n, "field": "content", "value": "Another question"}])
    app.run.append.clicks += 1
    assert "not appended: the session changed" in app.run.out.object
    assert roles(app.state) == [*before, "assistant", "user"]


def test_the_notebook_shows_a_reply_and_appends_it_only_when_asked(tmp_path: Path) -> None:
    from workbench.ui.notebook import Workbench

    wb = Workbench(SESSION, autosave=Autosave(tmp_path))
    before = roles(wb.state)
    outcome = wb.generate("tiny", max_new_tokens=4)
    assert outcome is not None and outcome.synthetic
    assert roles(wb.state) == before and not wb.state.doc.dirty
    assert wb.run_tab.append.layout.display is None                 # the button is offered
    said = wb.append_reply()
    assert said.startswith("appended to the session as message") and roles(wb.state) == [*before, "assistant"]
    assert wb.run_tab.append.layout.display == "none"
    assert wb.append_reply() == "no reply to append: Generate first"   # once
    # Another session: the reply shown answered the last one, and cannot be appended to this one.
    wb.generate("tiny", max_new_tokens=4)
    wb._open(sample_sessions()["coding_corrections.json"])
    assert wb.append_reply() == "no reply to append: Generate first"
    assert "Generate writes the next assistant reply" in wb.run_tab.out.value
