"""Following a request log (workbench/ui/follow.py), without a browser: the follower's conversations,
newest first; a new call shown as a new turn of its conversation (only it assembled, the selected
turn following to it or staying where the user was), equal to a cold assembly of the logged
request; the figures beside the provider's reported usage; a call logged out of order; an edit
making a copy that no longer follows; the reader thread handing changes to a page; a picker key
that the follower did not offer refused; the app object and the notebook's `Workbench.follow`
driven as their hosts drive them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from test_follow_reader import T0, append, line, request

from workbench import Assembler
from workbench.errors import FileAccessError
from workbench.ui.controller import Controller
from workbench.ui.follow import KEY, FollowView, LogFollower, figures_html, file_name, shown_id
from workbench.ui.state import WorkbenchState

USAGE = {"prompt_tokens": 57, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 38}}


class Host:
    """The Controller's hooks, inline (no event loop): what each view was last given."""

    def __init__(self) -> None:
        self.editor: list[bool] = []
        self.errors: list[str] = []
        self.results: list[Any] = []

    def call_later(self, delay_ms: int, fn: Any) -> None:
        fn()

    def call_from_thread(self, fn: Any) -> None:
        fn()

    def show_result(self, result: Any) -> None:
        self.results.append(result)

    def show_summary(self, result: Any) -> None:
        pass

    def show_error(self, message: str) -> None:
        self.errors.append(message)

    def show_editor(self, structural: bool) -> None:
        self.editor.append(structural)

    def show_edit_error(self, error: dict) -> None:
        pass

    def show_panels(self, panels: Any) -> None:
        pass

    def show_autosaved(self) -> None:
        pass

    def show_progress(self, text: str) -> None:
        pass

    def show_panels_failed(self, error: str) -> None:
        self.errors.append(error)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "calls.jsonl"
    append(path, line("old", 0, T0), line("new", 0, T0 + 10), line("old", 1, T0 + 20, response={"usage": USAGE}),
           line("new", 1, T0 + 30), line("new", 2, T0 + 40, provider="openai", model="gpt-4o", latency_ms=640,
                                          response={"usage": USAGE}))
    return path


def opened(log: Path, cid: str = "new") -> tuple[LogFollower, FollowView, WorkbenchState, Controller, Host]:
    follower = LogFollower(log)
    follower.poll()
    state = WorkbenchState(None, autosave=None)
    host = Host()
    controller = Controller(state, host, background=False)
    view = FollowView(follower)
    controller.open(view.make(KEY + cid, state))
    view.attach(state)
    return follower, view, state, controller, host


def test_conversations_newest_first_and_each_opened_in_timestamp_order(log: Path) -> None:
    follower = LogFollower(log)
    assert follower.poll() == 5 and follower.caught_up
    assert [(c.id, c.calls) for c in follower.conversations()] == [("new", 3), ("old", 2)]
    append(log, line("old", 2, T0 + 50))
    follower.poll()
    assert [c.id for c in follower.conversations()] == ["old", "new"]     # by the latest call, not file order
    follower_view = FollowView(follower)
    state = WorkbenchState(None, autosave=None)
    doc = follower_view.make(KEY + "old", state)
    assert doc.is_log and doc.name == "old.json" and doc.turn_count == 3 and not doc.dirty
    assert [doc.request(k)["messages"] for k in (1, 2, 3)] == [request("old", k)["messages"] for k in range(3)]


def test_a_new_call_becomes_a_new_turn_assembled_alone(log: Path) -> None:
    follower, view, state, controller, host = opened(log)
    assert (state.doc.turn_count, state.turn) == (3, 3)
    controller.run_panels()
    held = [state.turn_result(k) for k in (1, 2, 3)]
    assert all(r is not None for r in held)
    append(log, line("new", 3, T0 + 60, response={"usage": USAGE}))
    follower.poll()
    update = view.sync(controller)
    assert (update.added, update.turn_moved, update.picker) == (1, True, True)
    assert update.latency_s is not None and update.latency_s < 5
    assert (state.doc.turn_count, state.turn) == (4, 4) and not state.doc.dirty
    # the earlier turns keep their records: only the new one was assembled
    assert [state.turn_result(k) for k in (1, 2, 3)] == held and state.turn_result(4) is state.result
    cold = Assembler().assemble({"format": "openai", **request("new", 3)})
    assert state.result.token_ids.tolist() == cold.token_ids.tolist()
    assert host.editor[-1] is True and host.results[-1] is state.result
    assert view.sync(controller).added == 0                            # nothing new: nothing done


def test_the_users_turn_is_kept_when_they_are_not_on_the_newest(log: Path) -> None:
    follower, view, state, controller, _ = opened(log)
    controller.select_turn(2)
    shown = state.result
    append(log, line("new", 3, T0 + 60), line("old", 2, T0 + 61))
    follower.poll()
    update = view.sync(controller)
    assert (update.added, update.turn_moved) == (1, False)
    assert (state.turn, state.doc.turn_count) == (2, 4) and state.result is shown
    assert [c.id for c in follower.conversations()] == ["old", "new"]


def test_figures_beside_the_reported_usage_come_from_the_results(log: Path) -> None:
    follower, view, state, controller, _ = opened(log)
    controller.run_panels()
    panels = controller.last_panels
    fig = view.figures(state, panels)
    assert fig is not None and fig.turn == 3
    assert fig.call.provider == "openai" and fig.call.model == "gpt-4o" and fig.call.latency_ms == 640
    assert fig.reported is not None and (fig.reported.prompt_tokens, fig.reported.cached_tokens) == (57, 38)
    assert fig.tokens == len(state.result.token_ids)
    assert fig.reused_tokens == panels.analysis.reused_tokens and fig.held_tokens == panels.analysis.held_tokens
    assert dict(fig.cached) == {s.provider: s.turns[2].cached_tokens for s in panels.simulations}
    html = figures_html(fig)
    assert "prompt_tokens_details.cached_tokens 38" in html and f"{fig.tokens:,} prompt tokens" in html
    assert "640 ms" in html and f"{log}:5" in html
    assert fig.to_json()["reported"]["cached_tokens"] == 38
    controller.select_turn(1)                            # inline here: its panels are computed at once
    first = view.figures(state, controller.last_panels)
    assert first is not None and first.reported is None and (first.reused_tokens, first.held_tokens) == (0, 0)
    assert "no usage logged" in figures_html(first) and "first turn: nothing held before it" in figures_html(first)
    stale = view.figures(state, panels)                  # the turn-3 panels are not this turn's: not shown
    assert stale is not None and stale.reused_tokens is None and stale.cached == ()


def test_a_call_logged_out_of_order_takes_its_place_by_timestamp(log: Path) -> None:
    follower, view, state, controller, _ = opened(log)
    append(log, line("new", 9, T0 + 35))                    # between turn 2 (T0+30) and turn 3 (T0+40)
    follower.poll()
    update = view.sync(controller)
    assert update.reopened and update.added == 1 and state.doc.turn_count == 4 and state.turn == 4
    assert state.doc.request(3)["messages"] == request("new", 9)["messages"]
    assert state.doc.request(4)["messages"] == request("new", 2)["messages"]
    assert [c.when for c in view.calls] == sorted(c.when for c in view.calls)


def test_an_edit_makes_a_copy_that_no_longer_follows(log: Path) -> None:
    follower, view, state, controller, _ = opened(log)
    controller.op({"op": "set", "index": 1, "field": "content", "value": "my own question"})
    assert state.doc.dirty and view.copied(state) and not view.following(state) and view.key(state) is None
    append(log, line("new", 3, T0 + 60))
    follower.poll()
    assert view.sync(controller).added == 0 and state.doc.turn_count == 3
    assert "this is a copy" in view.status_html(state)
    assert log.read_bytes().count(b"my own question") == 0                     # the log is never written
    controller.open(view.make(KEY + "new", state))                             # picked again: followed anew
    view.attach(state)
    assert view.following(state) and state.doc.turn_count == 4


def test_bad_lines_are_counted_and_shown_while_following(log: Path) -> None:
    follower, view, state, controller, _ = opened(log)
    append(log, b"{oops\n", line("new", 3, T0 + 60))
    follower.poll()
    assert view.sync(controller).added == 1
    status = follower.status()
    assert status.bad_lines == 1 and str(status.diagnostics[0]).startswith(f"{log}:6: not valid JSON")
    assert f"{log}:6: not valid JSON" in view.status_html(state) and "1 bad line(s)" in view.status_html(state)


def test_the_picker_key_is_looked_up_never_a_path(log: Path) -> None:
    follower, view, state, _, _ = opened(log)
    for key in ("follow:nobody", "follow:../../etc/passwd", "follow:", str(log), "saved:x.json"):
        with pytest.raises(FileAccessError, match="offers no such session"):
            view.make(key, state)
    assert file_name("../../etc/passwd") == "etc_passwd.json" and file_name("ü 1") == "ü_1.json"
    # ids as the picker shows them: printable, and two long ones that share a start stay apart
    a, b = "x" * 200 + "a", "x" * 200 + "b"
    assert shown_id("new") == "new" and shown_id("a\nb").startswith("a?b…") and shown_id(a) != shown_id(b)
    assert len(shown_id(a)) < 80
    assert list(view.options(state).values())[:2] == ["follow:new", "follow:old"]


def test_the_reader_thread_hands_each_change_to_the_page(log: Path) -> None:
    follower = LogFollower(log, poll_s=0.05)
    woke = threading.Event()
    unsubscribe = follower.subscribe(woke.set)
    follower.start()
    try:
        assert woke.wait(30) and follower.caught_up
        woke.clear()
        version = follower.version
        append(log, line("new", 3, T0 + 60))
        assert woke.wait(30), "the reader thread did not see the appended line"
        assert follower.version > version and follower.conversation("new").calls[-1].when == T0 + 60
        unsubscribe()
        woke.clear()
        other = threading.Event()
        follower.subscribe(other.set)
        append(log, line("new", 4, T0 + 70))
        assert other.wait(30)                           # the change was handed out...
        assert not woke.is_set()                        # ...but not to the listener that unsubscribed
    finally:
        follower.stop()


def test_the_app_object_follows(log: Path, tmp_path: Path) -> None:
    from workbench.ui.app import WorkbenchApp
    from workbench.ui.document import Autosave
    follower = LogFollower(log)
    follower.poll()
    app = WorkbenchApp(autosave=Autosave(tmp_path / "home"), follow=follower)   # no server: inline
    assert app.session_select.value == "follow:new" and list(app.session_select.options.values())[:2] == [
        "follow:new", "follow:old"]
    assert app.state.doc.turn_count == 3 and "following live, turn 3 of 3" in app.follow_status.object
    assert "gpt-4o" in app.follow_call.object
    append(log, line("new", 3, T0 + 60), b"not json\n")
    follower.poll()                                     # the reader thread would; its listener syncs the page
    assert app.state.doc.turn_count == 4 and app.turn_select.value == 4 and list(app.turn_select.options)[-1] == 4
    assert "1 bad line(s)" in app.follow_status.object and f"{log}:7: not valid JSON" in app.follow_status.object
    app.session_select.value = "follow:old"
    assert app.state.doc.name == "old.json" and app.state.doc.turn_count == 2
    app.session_select.value = "follow:forged"          # not offered: refused inline, nothing changes
    assert app.state.doc.name == "old.json" and "offers no such session" in app.file_status.object
    app.editor.ops = [{"op": "set", "index": 1, "field": "content", "value": "mine", "n": 1}]
    assert "this is a copy" in app.follow_status.object and "(not saved)" in str(app.session_select.options)
    app._revert()                                        # Revert: the log's conversation again, followed
    assert app.follow.following(app.state) and app.session_select.value == "follow:old"


def test_the_notebook_workbench_follows_from_a_script(log: Path) -> None:
    from workbench.ui.notebook import Workbench
    wb = Workbench.follow(log)
    try:
        assert wb.session_select.value == "follow:new" and wb.state.doc.turn_count == 3
        append(log, line("new", 3, T0 + 60), line("third", 0, T0 + 70))
        update = wb.poll()
        assert update.added == 1 and wb.state.turn == 4 and wb.turn_select.value == 4
        assert [v for _, v in wb.session_select.options][:3] == ["follow:third", "follow:new", "follow:old"]
        assert "following live, turn 4 of 4" in wb.follow_status.value
        wb.session_select.value = "follow:third"
        assert wb.state.doc.turn_count == 1 and wb.follow_view.cid == "third"
    finally:
        wb.stop_following()


@pytest.mark.parametrize(("argv", "says"), [
    (["sample_sessions/support_chat.json", "--follow", "{log}"], "give a SESSION or --follow LOG, not both"),
    (["--follow", "{tmp}/no-such-folder/calls.jsonl"], "its folder does not exist"),
    (["--follow", "{tmp}"], "is not a plain file"),
])
def test_follow_errors_are_one_line_and_exit_2(argv: list[str], says: str, log: Path, tmp_path: Path) -> None:
    import subprocess

    from browser import ROOT, app_command
    args = [a.replace("{log}", str(log)).replace("{tmp}", str(tmp_path)) for a in argv]
    r = subprocess.run([*app_command(), *args, "--no-show"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert says in r.stderr and r.stdout == ""


def test_a_log_not_made_yet_is_waited_for_then_its_first_conversation_opened(tmp_path: Path) -> None:
    from workbench.ui.app import WorkbenchApp
    from workbench.ui.document import Autosave
    log = tmp_path / "later.jsonl"
    follower = LogFollower(log)
    follower.poll()
    app = WorkbenchApp(autosave=Autosave(tmp_path / "home"), follow=follower)
    assert app.state.doc.name == "support_chat.json"                     # the default sample meanwhile
    assert f"waiting for {log} to be created" in app.follow_status.object
    append(log, line("first", 0, T0), line("first", 1, T0 + 1))
    follower.poll()
    assert app.state.doc.name == "first.json" and app.state.doc.turn_count == 2
    assert app.session_select.value == "follow:first" and "waiting" not in app.follow_status.object
    # once the user has opened something, a newer conversation is offered, not opened for them
    app.session_select.value = "sample:openai_minimal.json"
    append(log, line("second", 0, T0 + 2))
    follower.poll()
    assert app.state.doc.name == "openai_minimal.json"
    assert list(app.session_select.options.values())[0] == "follow:second"


def test_calls_that_cannot_be_read_back_are_said_and_the_rest_follows(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    append(log, line("a", 0, T0), line("a", 1, T0 + 1))
    follower = LogFollower(log)
    follower.poll()
    with open(log, "wb") as f:                          # truncated in place: those two lines are gone
        f.write(line("a", 2, T0 + 2))
    follower.poll()
    state = WorkbenchState(None, autosave=None)
    controller = Controller(state, Host(), background=False)
    view = FollowView(follower)
    controller.open(view.make(KEY + "a", state))
    view.attach(state)
    assert state.doc.turn_count == 1 and state.doc.request(1)["messages"] == request("a", 2)["messages"]
    assert view.note.startswith("2 call(s) of this conversation could not be read back:")
    assert "2 call(s) of this conversation could not be read back" in view.status_html(state)
    assert "truncated" in view.status_html(state)
    append(log, line("a", 3, T0 + 3))
    follower.poll()
    update = view.sync(controller)
    assert (update.added, update.reopened) == (1, False) and state.doc.turn_count == 2
    assert view.call_of(2) is not None and view.call_of(2).when == T0 + 3
