"""The workbench's editable session document, its state and controller, without a browser: editor
operations, atomic saves, autosave and restore, and live assembly that stays exact under edits."""

from __future__ import annotations

import html
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import Assembler
from workbench.errors import EditError, SessionFileError
from workbench.ui import controller
from workbench.ui.controller import Controller
from workbench.ui.document import Autosave, SessionDocument, atomic_write
from workbench.ui.state import WorkbenchState, sample_sessions

SAMPLES = sample_sessions()


def doc(name: str) -> SessionDocument:
    return SessionDocument.load(SAMPLES[name])


# ------------------------------------------------------------------------------ operations
def test_set_insert_move_delete_and_the_turns_they_touch() -> None:
    d = doc("coding_corrections.json")
    n, turns = len(d.messages(1)), d.turn_count
    last = n - 1
    e = d.apply({"op": "set", "index": last, "field": "content", "value": "edited"}, turns)
    assert e.first_turn == turns and not e.structural
    assert d.request(turns)["messages"][-1]["content"] == "edited"
    e = d.apply({"op": "set", "index": 1, "field": "content", "value": "first user edit"}, turns)
    assert e.first_turn == 1                                     # the first request already holds it
    e = d.apply({"op": "insert", "index": n, "message": {"role": "assistant", "content": "reply"}}, turns)
    assert e.structural and d.turn_count == turns + 1          # an assistant message opens a turn
    d.apply({"op": "move", "index": n, "to": n - 1}, turns + 1)
    assert d.messages(1)[n - 1]["content"] == "reply" and d.messages(1)[n]["content"] == "edited"
    d.apply({"op": "delete", "index": n - 1}, turns + 1)
    assert len(d.messages(1)) == n and d.turn_count == turns
    e = d.apply({"op": "set", "index": last, "field": "role", "value": "assistant"}, turns)
    assert e.structural and d.request(d.turn_count)["messages"][-1]["role"] == "assistant"


def test_requests_handed_out_never_change_under_an_edit() -> None:
    # Copy on write: an assembler Session compares the next request with the one it was given.
    d = doc("support_chat.json")
    before = d.request(d.turn_count)
    frozen = json.dumps(before, sort_keys=True)
    d.apply({"op": "set", "index": len(d.messages(1)) - 1, "field": "content", "value": "changed"}, d.turn_count)
    d.apply({"op": "insert", "index": 0, "message": {"role": "user", "content": "x"}}, d.turn_count)
    assert json.dumps(before, sort_keys=True) == frozen


@pytest.mark.parametrize("op, says", [
    ({"op": "set", "index": 99, "field": "content", "value": "x"}, "index 99 is not a message"),
    ({"op": "set", "index": 0, "field": "tool_calls", "value": "[{", "json": True}, "line 1, column 3"),
    ({"op": "set", "index": 0, "field": "tool_calls", "value": '{"a": 1}', "json": True}, "JSON list of objects"),
    ({"op": "set", "index": 0, "field": "role", "value": "robot"}, "unknown role 'robot'"),
    ({"op": "set", "index": 0, "field": "colour", "value": "x"}, "cannot edit field 'colour'"),
    ({"op": "set", "index": 0, "field": "content", "value": "42", "json": True}, "string or a list of blocks"),
    ({"op": "insert", "index": 0, "message": {"content": "no role"}}, "needs a role"),
    ({"op": "explode"}, "unknown editor operation 'explode'"),
])
def test_bad_operations_say_what_and_where_and_change_nothing(op: dict, says: str) -> None:
    d = doc("openai_minimal.json")
    before = json.dumps(d.data, sort_keys=True)
    with pytest.raises(EditError, match=says.replace("(", r"\(").replace("[", r"\[")):
        d.apply(op, d.turn_count)
    assert json.dumps(d.data, sort_keys=True) == before


def test_a_log_is_edited_one_request_at_a_time() -> None:
    d = doc("timestamp_system.json")
    assert d.is_log and d.turn_count == 5
    e = d.apply({"op": "set", "index": 0, "field": "content", "value": "no timestamp"}, 3)
    assert e.first_turn == 3 and d.request(3)["messages"][0]["content"] == "no timestamp"
    assert d.request(2)["messages"][0]["content"] != "no timestamp"


# ------------------------------------------------------------------------------ files
def test_save_is_atomic_and_round_trips(tmp_path: Path) -> None:
    d = doc("tool_agent.json")
    d.apply({"op": "set", "index": 1, "field": "content", "value": "Olá, edited"}, d.turn_count)
    target = d.save(tmp_path / "mine.json")
    again = SessionDocument.load(target)
    assert again.data == d.data and not d.dirty
    assert [p.name for p in tmp_path.iterdir()] == ["mine.json"]          # no temporary file left behind
    # A write that cannot happen leaves the old file as it was.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SessionFileError, match="cannot write"):
        atomic_write(blocker / "inside.json", "{}")
    # A document that would not load again is never written.
    d.data["requests"] = "nonsense"
    with pytest.raises(SessionFileError):
        d.save(target)
    assert SessionDocument.load(target).data == again.data


def test_autosave_restores_and_sets_a_damaged_one_aside(tmp_path: Path) -> None:
    auto = Autosave(tmp_path)
    source = str(Path(SAMPLES["support_chat.json"]).resolve())
    d = doc("support_chat.json")
    d.apply({"op": "set", "index": 1, "field": "content", "value": "autosaved edit"}, d.turn_count)
    f = auto.store(source, d)
    got = auto.restore(source)
    assert got is not None and got[0].messages(1)[1]["content"] == "autosaved edit" and got[0].dirty
    f.write_text('{"document": ')                                       # torn by something else
    assert auto.restore(source) is None and f.with_suffix(".bad").exists()
    auto.store(source, d)
    auto.discard(source)
    assert auto.restore(source) is None


def test_upload_text_errors_name_the_line() -> None:
    with pytest.raises(EditError, match="line 2, column 1"):
        SessionDocument.from_text('{"messages": [\n}', "up.json")


# ------------------------------------------------------------------------------ state and controller
class RecordingHost:
    def __init__(self) -> None:
        self.results: list[Any] = []
        self.errors: list[str] = []
        self.edit_errors: list[dict] = []
        self.panels: list[Any] = []
        self.progress: list[str] = []
        self.panels_failed: list[str] = []
        self.autosaved = 0

    def call_later(self, delay_ms: int, fn: Any) -> None:
        fn()

    def call_from_thread(self, fn: Any) -> None:
        fn()

    def show_result(self, result: Any) -> None:
        self.results.append(result)

    def show_summary(self, result: Any) -> None:
        assert result is self.results[-1]

    def show_error(self, message: str) -> None:
        self.errors.append(message)

    def show_editor(self, structural: bool) -> None:
        pass

    def show_edit_error(self, error: dict) -> None:
        self.edit_errors.append(error)

    def show_panels(self, panels: Any) -> None:
        self.panels.append(panels)

    def show_autosaved(self) -> None:
        self.autosaved += 1

    def show_progress(self, text: str) -> None:
        self.progress.append(text)

    def show_panels_failed(self, error: str) -> None:
        self.panels_failed.append(error)


def test_controller_edits_assemble_autosave_and_refresh_only_the_touched_turns(tmp_path: Path) -> None:
    state = WorkbenchState(SAMPLES["support_chat.json"], autosave=Autosave(tmp_path))
    host = RecordingHost()
    c = Controller(state, host, background=False)
    c.refresh()
    c.request_panels()
    first = host.panels[-1]
    # the live turn came from the view, the one before it from the prefix diff (computed first)
    assert first.turns_assembled == state.doc.turn_count - 2
    assert first.parts == {"diff", "cache", "policies"} and first.previous is state.turn_result(state.turn - 1)
    last = len(state.doc.messages(state.turn)) - 1
    c.op({"op": "set", "index": last, "field": "content", "value": "one more question"})
    assert host.results[-1].reused_segments > 100
    assert host.panels[-1].turns_assembled == 0                         # only the live turn had changed
    c.op({"op": "set", "index": 3, "field": "content", "value": "early edit"})
    assert host.panels[-1].turns_assembled > 100                        # every later turn holds message 3
    assert list((tmp_path / "autosave").glob("*.json"))
    assert c.autosaved and host.autosaved == 2                        # told once per written autosave
    c.op({"op": "set", "index": 0, "field": "tool_calls", "value": "[", "json": True})
    assert host.edit_errors[-1]["index"] == 0 and "not valid JSON" in host.edit_errors[-1]["message"]
    assert c.set_json("tools", "{}").startswith("tools: a JSON list")
    assert c.set_json("variables", "[]").startswith("variables: a JSON object")
    # Restored after a "reload": a new state over the same file finds the edits.
    again = WorkbenchState(SAMPLES["support_chat.json"], autosave=Autosave(tmp_path))
    assert again.restored_at is not None and again.doc.messages(1)[3]["content"] == "early edit"


def test_with_no_messages_left_the_panels_say_why_and_come_back_with_the_first_message(tmp_path: Path) -> None:
    state = WorkbenchState(SAMPLES["openai_minimal.json"], autosave=Autosave(tmp_path))
    host = RecordingHost()
    c = Controller(state, host, background=False)
    c.refresh()
    c.request_panels()
    assert host.panels and not host.panels_failed
    for _ in range(len(state.doc.messages(state.turn)) - 1):
        c.op({"op": "delete", "index": 0})
    assert not host.panels_failed
    shown = len(host.panels)
    c.op({"op": "delete", "index": 0})
    # Nothing to assemble: the panels are not the figures of the prompt that was deleted.
    assert len(host.panels) == shown and "add the user's message" in host.panels_failed[-1]
    assert c.panel_error == host.panels_failed[-1]
    c.op({"op": "insert", "index": 0, "message": {"role": "user", "content": "back again"}})
    assert len(host.panels) > shown and host.panels[-1].generation == state.generation
    assert c.panel_error == ""


class LaterHost(RecordingHost):
    """Timers held until the test runs them: what a page sees between an edit and its autosave."""

    def __init__(self) -> None:
        super().__init__()
        self.later: list[Any] = []

    def call_later(self, delay_ms: int, fn: Any) -> None:
        (fn() if delay_ms == 0 else self.later.append(fn))


def test_the_autosave_status_is_true_only_once_the_edit_is_on_disk(tmp_path: Path) -> None:
    state = WorkbenchState(SAMPLES["support_chat.json"], autosave=Autosave(tmp_path))
    host = LaterHost()
    c = Controller(state, host, background=False)
    c.op({"op": "set", "index": 1, "field": "content", "value": "pending"})
    assert not c.autosaved and not list((tmp_path / "autosave").glob("*.json"))
    c.op({"op": "set", "index": 1, "field": "content", "value": "pending, then more"})
    for fn in host.later:
        fn()                                  # the first timer is stale: only the second one writes
    assert c.autosaved and host.autosaved == 1
    c.op({"op": "set", "index": 1, "field": "content", "value": "saved before the timer"})
    c.save(str(tmp_path / "saved.json"))
    assert c.autosaved                        # saving settles it; the timer that follows writes nothing
    for fn in host.later[-1:]:
        fn()
    assert host.autosaved == 1


def returns(fn: Any) -> bool:
    """Whether `fn()` returned, run on a thread given a minute: a bound on a hang, not a measure."""
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(60)
    return not t.is_alive()


def test_the_panels_worker_yields_to_an_edit_on_its_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker waits at most HOLD_S for an edit on its way; made an hour here, so that it returns
    # only because the edit was shown (or failed), never because the wait ran out.
    monkeypatch.setattr(controller, "HOLD_S", 3600.0)
    state = WorkbenchState(SAMPLES["coding_corrections.json"], autosave=Autosave(tmp_path))
    paused: list[int] = []
    state.panels(check=lambda: paused.append(1))
    # before each turn it assembles for the cache panel (the prefix diff assembled the last two)
    assert len(paused) == state.doc.turn_count - 2
    host = LaterHost()
    c = Controller(state, host, background=False)
    order: list[str] = []
    workers: list[threading.Thread] = []

    def show_result(result: Any) -> None:                       # the edit's patch is being made
        worker = threading.Thread(target=lambda: (c.yield_to_edits(), order.append("worker goes on")))
        workers.append(worker)
        worker.start()
        worker.join(0.15)                                       # (a chance to run past: it must not)
        order.append("shown")
        host.results.append(result)

    host.show_result = show_result  # type: ignore[method-assign]
    c.op({"op": "set", "index": 1, "field": "content", "value": "shown first"})
    workers[0].join(60)
    assert order == ["shown", "worker goes on"]                 # it waited for the edit, then went on
    assert returns(c.yield_to_edits)                            # shown: it goes on at once
    c.op({"op": "set", "index": 99, "field": "content", "value": "no such message"})
    assert host.edit_errors[-1]["index"] == 99
    assert returns(c.yield_to_edits)                            # a failed edit holds nothing either


def test_prefix_diff_of_the_selected_turn() -> None:
    state = WorkbenchState(SAMPLES["timestamp_system.json"], autosave=None)
    state.assemble()
    p = state.panels()
    assert p.prefix_diff is not None and p.analysis is not None
    assert p.analysis.first_divergence == p.prefix_diff["first_divergence"]
    assert "volatile_content" in {c["code"] for c in p.prefix_diff["causes"]}
    assert {s.provider for s in p.simulations} == {"openai", "anthropic", "vllm", "sglang"}


EDIT = st.one_of(
    st.tuples(st.just("text"), st.integers(0, 40), st.text(max_size=30)),
    st.tuples(st.just("insert"), st.integers(0, 40), st.sampled_from(["user", "assistant"])),
    st.tuples(st.just("delete"), st.integers(0, 40), st.just("")),
    st.tuples(st.just("move"), st.integers(0, 40), st.integers(0, 40)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(EDIT, min_size=1, max_size=8), template=st.sampled_from(["qwen2.5", "llama3.1", "gemma3"]))
def test_live_assembly_after_any_edits_equals_a_cold_assembly(edits: list, template: str) -> None:
    state = WorkbenchState(SAMPLES["coding_corrections.json"], autosave=None, template=template)
    state.assemble()
    for kind, i, arg in edits:
        n = len(state.doc.messages(state.turn))
        if n == 0:
            break
        i %= n
        op = {"text": {"op": "set", "index": i, "field": "content", "value": arg},
              "insert": {"op": "insert", "index": i, "role": arg},
              "delete": {"op": "delete", "index": i},
              "move": {"op": "move", "index": i, "to": (arg if isinstance(arg, int) else 0) % n}}[kind]
        if kind == "delete" and n == 1:
            continue
        state.apply(op)
        try:
            live = state.assemble()
        except Exception as exc:  # noqa: BLE001 - a conversation the cleaner refuses: so must cold
            with pytest.raises(type(exc)):
                Assembler(template=template, cache=None).assemble(state.doc.request(state.turn))
            continue
        cold = Assembler(template=template, cache=None).assemble(state.doc.request(state.turn))
        assert np.array_equal(live.token_ids, cold.token_ids)
        assert live.text == cold.text


def test_the_kv_panel_counts_blocks_and_a_prefill_reuses_the_previous_turn() -> None:
    from workbench.engine.kv import KV_CONFIGS
    from workbench.ui.kv_panel import kv_figure, kv_html, paged_rows

    state = WorkbenchState(SAMPLES["tool_agent.json"], autosave=None)
    state.assemble()
    p = state.panels()
    rows = paged_rows(p, "Llama-3-8B")
    vllm = next(s for s in p.simulations if s.provider == "vllm")
    assert [r["tokens"] for r in rows] == [t.tokens for t in vllm.turns]
    for k, (prev, r) in enumerate(zip(rows, rows[1:])):
        # Append-only: every full block the engine held after the last turn, its prompt and the reply
        # as generated (what the next prompt repeats), is shared.
        held = len(p.prompts[k].held_ids)
        assert held > prev["tokens"] and r["shared_blocks"] == held // 16
        assert r["blocks"] == -(-r["tokens"] // 16) and r["kv_bytes"] == r["tokens"] * 131072
        assert r["held_bytes"] >= prev["held_bytes"]
    html = kv_html(p, "Qwen2.5-7B")
    assert f"{KV_CONFIGS['Qwen2.5-7B'].bytes_per_token:,} bytes per token" in html
    assert len(kv_figure(p)["data"][0]["x"]) == state.doc.turn_count
    first, cur, model = state.prefill()
    previous = state.turn_result(state.turn - 1)
    assert first.tokens == previous.total_tokens and cur.reused_tokens == previous.total_tokens
    assert cur.prefilled_tokens == state.result.total_tokens - previous.total_tokens
    assert cur.baseline_ms is not None and model["synthetic"]
    shown = kv_html(p, "Llama-3-8B", (first, cur, model))
    assert f"{cur.reused_tokens:,} tokens reused" in shown and "synthetic" in shown
    assert len(cur.top) == 5 and "these words mean nothing" in shown      # top-k, labelled as synthetic


def test_export_from_the_workbench_state_and_the_notebook_widget(tmp_path: Path) -> None:
    from workbench.export.loader import load_bundle
    from workbench.ui.notebook import Workbench

    state = WorkbenchState(SAMPLES["coding_corrections.json"], autosave=None, template="llama3.1")
    state.apply({"op": "set", "index": 1, "field": "content", "value": "edited before the export"})
    result = state.assemble()
    folder, report = state.export(str(tmp_path / "from-state"))
    assert report.ok and report.checked[0]["turns"] == state.doc.turn_count
    again = load_bundle(folder).assemble(state.doc.request(state.turn))
    assert again.token_ids.tolist() == result.token_ids.tolist()        # the edit and the template travel
    wb = Workbench(SAMPLES["timestamp_system.json"], template="qwen3")
    folder, report = wb.export(str(tmp_path / "from-notebook"))
    assert report.ok and "identical ids" in wb.export_status.value
    (tmp_path / "not-a-bundle").mkdir()
    (tmp_path / "not-a-bundle" / "notes.txt").write_text("mine")
    assert wb.export(str(tmp_path / "not-a-bundle")) is None
    assert "not replacing a folder that is not a bundle" in wb.export_status.value
    assert (tmp_path / "not-a-bundle" / "notes.txt").read_text() == "mine"


def test_the_notebook_teach_presentation_mode() -> None:
    from workbench.ui.notebook import Workbench

    wb = Workbench(SAMPLES["timestamp_system.json"], template="qwen2.5")
    wb.wait()
    assert wb.teach_body.value.count('<p class="wb-t-summary">') == 1 and "wb-present" not in wb.teach_body.value
    wb.teach_present.value = True
    first = wb.teach_body.value
    assert 'class="wb-present"' in first and "wb-p-idea" in first and first.count("wb-p-dot wb-p-on") == 1
    assert wb.teach.steps[0].summary.split(",")[0] in html.unescape(first)
    wb.teach_next.click()
    assert "2 / 7 · Chat template" in html.unescape(wb.teach_body.value)
    wb.teach_present.value = False
    assert "wb-present" not in wb.teach_body.value and wb.teach_body.value == wb.teach.steps[1].html
