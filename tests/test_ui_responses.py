"""Responses API sessions in the workbench, without a browser: the editor lists a request's
instructions and input items and edits each in its own shape (workbench/ui/responses_items.py),
turns are the ones `sessions.conversation_turns` counts, saving keeps every field the editor does
not edit, bad edits show at the item they break, and what the views show follows the edits. The
oracle for "follows" is a cold `Assembler.assemble` of the saved file's request (parse_session of
the document's text: no UI code)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inline_host import InlineHost
from test_intake_responses import conversations, to_responses

from workbench import Assembler
from workbench.errors import EditError, WorkbenchError
from workbench.intake import next_request
from workbench.sessions import conversation_turns, parse_session
from workbench.ui.controller import Controller
from workbench.ui.document import SessionDocument
from workbench.ui.state import WorkbenchState

TEMPLATE = "qwen2.5"
SECRET = "gAAAAABo" + "s3cr3t" * 40
CONV: dict[str, Any] = {
    "title": "weather",
    "instructions": "You are a helpful assistant.",
    "tools": [{"type": "function", "name": "get_weather", "description": "Weather for a city",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
    "max_output_tokens": 400,
    "input": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Need the weather tool."}],
         "encrypted_content": SECRET},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
         "arguments": "{\"city\": \"Paris\"}", "status": "completed", "x_vendor": {"trace": [1, 2]}},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C, sunny"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "It is 18C and sunny in Paris.",
                      "annotations": [{"type": "url_citation", "url": "https://example.com"}]}]},
        {"role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]},
    ]}
ROWS = ["instructions", "message", "reasoning", "function_call", "function_call_output", "message", "message"]


class Recorder(InlineHost):
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.edit_errors: list[dict] = []

    def show_error(self, message: str) -> None:
        self.errors.append(message)

    def show_edit_error(self, error: dict) -> None:
        self.edit_errors.append(error)


def opened(data: dict | None = None) -> tuple[WorkbenchState, Controller, Recorder]:
    state = WorkbenchState(SessionDocument(copy.deepcopy(data or CONV), None, "weather.json"), template=TEMPLATE)
    host = Recorder()
    controller = Controller(state, host, background=False)
    controller.refresh()
    return state, controller, host


def cold(state: WorkbenchState, turn: int | None = None) -> Any:
    """The oracle: the document as saved, read back by the core, its turn assembled from scratch."""
    f = parse_session(json.loads(state.doc.to_text()))
    return Assembler(template=TEMPLATE, cache=None).assemble(f.turns[(turn or state.turn) - 1])


def same(live: Any, want: Any) -> None:
    assert live.text == want.text
    assert np.array_equal(live.token_ids, want.token_ids)
    assert [(s.kind, s.role, s.seq, s.start, s.end) for s in live.segments] == \
        [(s.kind, s.role, s.seq, s.start, s.end) for s in want.segments]


# ------------------------------------------------------------------------ turns and rows
@pytest.mark.parametrize("data", [
    CONV,
    {k: v for k, v in CONV.items() if k != "instructions"},
    {"instructions": "Be brief.", "input": "Hello there"},
    {"instructions": [{"role": "developer", "content": "Rules as items."}], "input": CONV["input"]},
    {"input": [*CONV["input"], {"role": "assistant", "content": "Tomorrow: rain."}]},
], ids=["conversation", "no-instructions", "string-input", "instructions-as-items", "ends-with-a-reply"])
def test_the_turns_are_the_sessions_turns_and_the_rows_are_instructions_then_items(data: dict) -> None:
    state, controller, host = opened(data)
    turns = conversation_turns({**data, "format": "responses"})
    assert state.doc.turn_count == len(turns) == len(parse_session(copy.deepcopy(data)).turns)
    inp = data["input"]
    instructions = "instructions" in data
    rows = state.doc.messages(state.turn)
    assert len(rows) == instructions + (len(inp) if isinstance(inp, list) else 1)
    for k in range(1, state.doc.turn_count + 1):
        state.select_turn(k)
        held = turns[k - 1]["input"]
        assert state.doc.turn_cut(k) == instructions + (len(held) if isinstance(held, list) else 1)
        assert state.doc.request(k) == {**turns[k - 1], "format": "responses"}
        controller.refresh()
        same(state.result, cold(state, k))
    assert not host.errors


def test_the_editor_shows_each_item_in_its_shape_and_never_the_encrypted_reasoning() -> None:
    state, controller, _ = opened()
    data = controller.editor_data()
    assert [s["kind"] for s in data["items"]] == ROWS
    assert data["format"] == "responses" and data["turn_cut"] == 7 and data["parts"] == [None] * 7
    fields = [[f.get("field") for f in s["fields"]] for s in data["items"]]
    assert fields == [["content"], ["content"], ["summary"], ["name", "arguments", "call_id"], ["call_id", "output"],
                      ["content"], ["content"]]
    assert data["items"][5]["fields"][0] == {"field": "content", "label": "output_text (part 0)", "part": 0}
    assert data["items"][1]["roles"] == ["user", "assistant", "system", "developer"]
    assert "roles" not in data["items"][3]                              # a call has no role to pick
    # The encrypted reasoning is kept in the document but never sent to the page.
    assert SECRET not in json.dumps(data) and state.doc.data["input"][1]["encrypted_content"] == SECRET
    kept = data["items"][2]["notes"][0]["chip"]
    assert kept.startswith("kept as is: id rs_1 · encrypted_content (") and "characters, not in the prompt" in kept
    assert "x_vendor" in data["items"][3]["notes"][0]["chip"]


def test_the_counts_are_the_messages_tokens_on_their_first_items_row() -> None:
    state, controller, _ = opened()
    counts = controller.token_counts()
    want = cold(state)
    by_seq: dict[int, int] = {}
    for s in want.segments:
        if s.kind in ("message", "system") and s.seq is not None:
            by_seq[s.seq] = by_seq.get(s.seq, 0) + s.token_count
    # messages: 0 instructions, 1 user, 2 the model turn (reasoning + call), 3 output, 4 reply, 5 user
    assert counts == [by_seq[0], by_seq[1], by_seq[2], None, by_seq[3], by_seq[4], by_seq[5]]
    assert sum(c for c in counts if c) == sum(by_seq.values())


# ----------------------------------------------------------------------- editing, saving
def test_each_item_is_edited_in_its_own_shape_and_saving_keeps_every_other_field(tmp_path: Path) -> None:
    state, controller, host = opened()
    ops = [
        {"op": "set", "index": 0, "field": "content", "value": "Be terse."},
        {"op": "set", "index": 1, "field": "content", "value": "Weather in Lyon?"},
        {"op": "set", "index": 2, "field": "summary", "part": 0, "value": "Call the tool for Lyon."},
        {"op": "set", "index": 3, "field": "name", "value": "get_forecast"},
        {"op": "set", "index": 3, "field": "arguments", "value": '{"city": "Ly'},   # cut JSON: kept, warned
        {"op": "set", "index": 4, "field": "output", "value": "12C, rain"},
        {"op": "set", "index": 5, "field": "content", "part": 0, "value": "12C and rain in Lyon."},
        {"op": "set", "index": 6, "field": "content", "part": 0, "value": "And on Sunday?"},
    ]
    for op in ops:
        controller.op(op)
        assert not host.errors, host.errors
        same(state.result, cold(state))
    assert "tool_arguments_not_json" in {d.code for d in state.result.diagnostics}
    path = tmp_path / "edited.json"
    controller.save(str(path))
    want = copy.deepcopy(CONV)
    want["instructions"] = "Be terse."
    inp = want["input"]
    inp[0]["content"] = "Weather in Lyon?"
    inp[1]["summary"][0]["text"] = "Call the tool for Lyon."
    inp[2].update(name="get_forecast", arguments='{"city": "Ly')
    inp[3]["output"] = "12C, rain"
    inp[4]["content"][0]["text"] = "12C and rain in Lyon."
    inp[5]["content"][0]["text"] = "And on Sunday?"
    assert json.loads(path.read_text("utf-8")) == want          # ids, status, annotations, unknown keys kept
    assert list(json.loads(path.read_text("utf-8"))) == list(CONV)   # the file's own key order


def test_insert_delete_move_and_role_change_renumber_the_turns_as_the_session_does() -> None:
    state, controller, host = opened()
    controller.op({"op": "insert", "index": 7, "role": "user"})      # the editor's "+ add": a user message item
    assert state.doc.data["input"][-1] == {"role": "user", "content": ""}
    controller.op({"op": "set", "index": 7, "field": "content", "value": "One more thing."})
    controller.op({"op": "insert", "index": 7, "message": {"role": "assistant", "content": "Rain on Sunday."}})
    assert state.doc.turn_count == 4 == len(conversation_turns({**state.doc.data, "format": "responses"}))
    same(state.result, cold(state))
    controller.op({"op": "move", "index": 8, "to": 7})                # the user message before the reply
    assert state.doc.turn_count == 4 and state.doc.data["input"][-1]["role"] == "assistant"
    same(state.result, cold(state))
    controller.op({"op": "set", "index": 8, "field": "role", "value": "user"})
    assert state.doc.turn_count == 3
    controller.op({"op": "delete", "index": 8})
    controller.op({"op": "delete", "index": 7})
    same(state.result, cold(state))
    assert json.loads(state.doc.to_text())["input"] == CONV["input"]
    with pytest.raises(EditError, match="the instructions stay first"):
        state.apply({"op": "move", "index": 1, "to": 0})
    before = state.doc.to_text()
    controller.op({"op": "move", "index": 0, "to": 0})                # a row dropped onto itself: nothing moves
    controller.op({"op": "move", "index": 3, "to": 3})
    assert state.doc.to_text() == before
    controller.op({"op": "delete", "index": 0})                       # the instructions row
    assert "instructions" not in state.doc.data and len(state.doc.messages(state.turn)) == 6
    same(state.result, cold(state))
    assert not host.errors


def test_a_string_input_stays_a_string_until_items_are_added() -> None:
    state, controller, _ = opened({"instructions": "Be brief.", "input": "Hello there"})
    controller.op({"op": "set", "index": 1, "field": "content", "value": "Hello again"})
    assert state.doc.data["input"] == "Hello again"
    same(state.result, cold(state))
    controller.op({"op": "insert", "index": 2, "message": {"role": "assistant", "content": "Hi!"}})
    assert state.doc.data["input"] == [{"role": "user", "content": "Hello again"},
                                       {"role": "assistant", "content": "Hi!"}]
    assert state.doc.turn_count == 2


@pytest.mark.parametrize("op, says", [
    ({"op": "set", "index": 3, "field": "content", "value": "x"}, "a function_call item has no field 'content'"),
    ({"op": "set", "index": 2, "field": "encrypted_content", "value": "x"}, "a reasoning item has no field"),
    ({"op": "set", "index": 3, "field": "id", "value": "fc_9"}, "a function_call item has no field 'id'"),
    ({"op": "set", "index": 1, "field": "role", "value": "tool"}, "unknown role 'tool'"),
    ({"op": "set", "index": 6, "field": "content", "part": 3, "value": "x"}, "part 3 is not a text part"),
    ({"op": "set", "index": 4, "field": "output", "value": "[1", "json": True}, "line 1, column 3"),
    ({"op": "set", "index": 9, "field": "content", "value": "x"}, "index 9 is not a row"),
    ({"op": "insert", "index": 1, "message": {"content": "no role"}}, "a message with a role"),
    ({"op": "move", "index": 0, "to": 2}, "the instructions stay first"),
])
def test_bad_operations_say_what_and_where_and_change_nothing(op: dict, says: str) -> None:
    doc = SessionDocument(copy.deepcopy(CONV))
    before = doc.to_text()
    with pytest.raises(EditError, match=says.replace("(", r"\(").replace("[", r"\[")):
        doc.apply(op, doc.turn_count)
    assert doc.to_text() == before


def test_requests_handed_out_never_change_under_an_edit() -> None:
    doc = SessionDocument(copy.deepcopy(CONV))
    before = doc.request(doc.turn_count)
    frozen = json.dumps(before, sort_keys=True)
    for op in ({"op": "set", "index": 3, "field": "arguments", "value": "{}"},
               {"op": "set", "index": 2, "field": "summary", "part": 0, "value": "changed"},
               {"op": "set", "index": 5, "field": "content", "part": 0, "value": "changed"},
               {"op": "insert", "index": 1, "message": {"role": "user", "content": "x"}}):
        doc.apply(op, doc.turn_count)
    assert json.dumps(before, sort_keys=True) == frozen


# ------------------------------------------------------------------- bad edits, inline
def test_an_item_that_no_longer_parses_is_shown_at_its_row_and_the_view_keeps_the_last_good_prompt() -> None:
    state, controller, host = opened()
    good = state.result
    controller.op({"op": "set", "index": 4, "field": "call_id", "value": "call_9"})
    assert state.result is good                                         # the last prompt that assembled
    assert host.errors and "input[3].call_id: no function call to answer" in host.errors[-1]
    err = host.edit_errors[-1]
    assert err["index"] == 4 and err["field"] == "call_id" and "call_9" in err["message"]
    controller.op({"op": "set", "index": 4, "field": "call_id", "value": "call_1"})
    assert host.edit_errors[-1] == {} and state.result is not good
    # Deleting the call breaks another row: its output, which is where the error shows.
    controller.op({"op": "delete", "index": 3})
    assert host.edit_errors[-1]["index"] == 3 and "no earlier call" in host.edit_errors[-1]["message"]
    controller.undo()
    assert host.edit_errors[-1] == {}                                   # assembles again: the row's error goes
    same(state.result, cold(state))


def test_a_chat_completions_edit_the_intake_refuses_shows_at_its_message_too() -> None:
    data = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                         {"role": "user", "content": "Bye"}]}
    state, controller, host = opened(data)
    controller.op({"op": "set", "index": 1, "field": "content", "value": {"not": "a string"}})
    assert host.edit_errors[-1]["index"] == 1 and host.edit_errors[-1]["message"].startswith("messages[1]")


# ------------------------------------------------------------------------- undo and redo
def test_undo_and_redo_restore_the_instructions_and_items_exactly() -> None:
    state, controller, _ = opened()
    original = state.doc.to_text()
    steps = [{"op": "set", "index": 0, "field": "content", "value": "Be terse."},
             {"op": "set", "index": 3, "field": "arguments", "value": '{"city": "Rome"}'},
             {"op": "delete", "index": 2},
             {"op": "insert", "index": 6, "role": "user"},
             {"op": "delete", "index": 0}]
    texts = []
    for op in steps:
        controller.op(op)
        texts.append(state.doc.to_text())
    for k in range(len(steps) - 1, -1, -1):
        assert controller.undo()
        assert state.doc.to_text() == (texts[k - 1] if k else original)
        same(state.result, cold(state))
    for k in range(len(steps)):
        assert controller.undo(redo=True)
        assert state.doc.to_text() == texts[k]
    same(state.result, cold(state))


def test_typing_in_arguments_is_one_undo_step() -> None:
    state, controller, _ = opened()
    for text in ('{"', '{"city', '{"city": "Rome"}'):
        controller.op({"op": "set", "index": 3, "field": "arguments", "value": text})
    assert controller.undo() == "edited message 3"
    assert state.doc.data["input"][2]["arguments"] == CONV["input"][2]["arguments"]


# ------------------------------------------------------------------ the incremental path
def test_a_keystroke_in_a_long_responses_session_parses_only_the_new_items(monkeypatch: pytest.MonkeyPatch) -> None:
    chat = json.loads((Path(__file__).parent.parent / "sample_sessions" / "bench_1000.json").read_text("utf-8"))
    data = to_responses(chat["messages"])
    assert "instructions" in data and len(data["input"]) == len(chat["messages"]) - 1 >= 998
    state, controller, _ = opened(data)
    controller.set_views(frozenset())          # the Tokens tab: no slower panel runs beside the typing
    whole: list[int] = []
    real = next_request._responses_whole
    monkeypatch.setattr(next_request, "_responses_whole", lambda *a: (whole.append(1), real(*a))[1])
    last = len(state.doc.messages(state.turn)) - 1
    for i in range(3):
        controller.op({"op": "set", "index": last, "field": "content", "part": 0, "value": f"edit {i}"})
    assert not whole                                                    # no whole parse on a keystroke
    assert state.item_stops() is not None
    assert state._session is not None and state._session.intake is not None
    # Every earlier message kept but the model turn before it (the item after a turn ends it: parsed again).
    assert state._session.intake.reused == len(state._session.intake.stops) - 2
    assert state.result.reused_segments > 0
    same(state.result, cold(state))


EDIT = st.tuples(st.sampled_from(["text", "insert", "delete", "move", "role", "call_id"]), st.integers(0, 60),
                 st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12))
TEXT_FIELD = {"message": "content", "function_call": "arguments", "function_call_output": "output",
              "reasoning": "summary", "instructions": "content"}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.lists(EDIT, min_size=1, max_size=8))
def test_property_live_assembly_after_any_edits_equals_a_cold_assembly_of_the_saved_file(messages: list,
                                                                                         edits: list) -> None:
    data = to_responses(messages)
    state = WorkbenchState(SessionDocument(data, None, "prop.json"), template=TEMPLATE)
    state.assemble()
    for kind, i, text in edits:
        rows = state.doc.messages(state.turn)
        i %= len(rows)
        shape = Controller(state, InlineHost(), background=False).editor_data()["items"][i]
        field = TEXT_FIELD.get(shape["kind"], "content")
        part = next((f.get("part") for f in shape["fields"] if f.get("field") == field), None)
        op = {"text": {"op": "set", "index": i, "field": field, "value": text,
                       **({"part": part} if part is not None else {})},
              "insert": {"op": "insert", "index": i, "role": "user"},
              "delete": {"op": "delete", "index": i},
              "move": {"op": "move", "index": i, "to": (i + len(text)) % len(rows)},
              "role": {"op": "set", "index": i, "field": "role", "value": "assistant" if len(text) % 2 else "user"},
              "call_id": {"op": "set", "index": i, "field": "call_id", "value": text or "x"}}[kind]
        if kind == "delete" and len(rows) == 1:
            continue
        try:
            state.apply(op)
        except EditError:
            continue                     # not a field of that row (a role on a call): nothing changed
        try:
            live = state.assemble()
        except WorkbenchError as exc:
            with pytest.raises(type(exc)):
                cold(state)
            continue
        same(live, cold(state))


# --------------------------------------------------------------------------- logs
OUT = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!"}]}
LOG = {"requests": [
    {"instructions": "Old rules.", "input": "Hi",
     "response": {"id": "resp_1", "output": [OUT, {"type": "function_call", "call_id": "c1", "name": "f",
                                                  "arguments": "{}"}]}},
    {"instructions": "New rules.", "previous_response_id": "resp_1", "max_output_tokens": 300,
     "input": [{"type": "function_call_output", "call_id": "c1", "output": "42"}, {"role": "user", "content": "Bye"}]}]}


def test_a_responses_log_is_edited_per_request_with_its_chain_resolved() -> None:
    state, controller, host = opened(LOG)
    assert state.doc.turn_count == 2 and state.turn == 2 and not host.errors
    data = controller.editor_data()
    assert [s["kind"] for s in data["items"]] == ["instructions", "function_call_output", "message"]
    assert data["turn_cut"] == 3 and data["counts"][1] is not None
    same(state.result, cold(state))
    controller.op({"op": "set", "index": 2, "field": "content", "value": "Bye now"})
    same(state.result, cold(state))
    # The output's call is in the logged response: an unknown call_id names the row, not input[k].
    controller.op({"op": "set", "index": 1, "field": "call_id", "value": "c9"})
    assert host.edit_errors[-1]["index"] == 1 and "input[3].call_id" in host.edit_errors[-1]["message"]
    controller.op({"op": "set", "index": 1, "field": "call_id", "value": "c1"})
    controller.select_turn(1)
    assert [r.get("content") for r in state.doc.messages(1)] == ["Old rules.", "Hi"]
    controller.op({"op": "set", "index": 1, "field": "content", "value": "Hello"})
    assert state.doc.data["requests"][0]["input"] == "Hello"
    assert state.doc.data["requests"][0]["response"] == LOG["requests"][0]["response"]   # kept as logged
    same(state.result, cold(state, 1))
    controller.select_turn(2)
    same(state.result, cold(state, 2))            # the chain now starts from the edited first request


def test_the_reserve_box_writes_max_output_tokens() -> None:
    state, _, _ = opened()
    assert state.budget_settings().reserve_explicit == 400
    state.set_budget(reserve=512)
    assert state.doc.data["max_output_tokens"] == 512 and "max_tokens" not in state.doc.data
    assert state.assemble().budget.reserve == cold(state).budget.reserve == 512


def test_generate_refuses_a_session_that_ends_with_the_models_turn() -> None:
    from workbench.ui.run_panel import Runner
    state, _, _ = opened({"input": [*CONV["input"][:3]]})
    with pytest.raises(EditError, match="ends with an assistant reply"):
        Runner().prepare(state)
    state, controller, _ = opened()
    Runner().prepare(state)                                     # ends with the user's message: fine
    assert controller.append_reply("Rain.", state.generation).startswith("appended to the session as message 7")
    assert state.doc.data["input"][-1] == {"role": "assistant", "content": "Rain."}
    same(state.result, cold(state))


# ----------------------------------------------------------------- the two hosts
def test_the_apps_upload_opens_a_responses_request_in_the_editor(tmp_path: Path) -> None:
    from workbench.ui.app import WorkbenchApp
    from workbench.ui.document import Autosave
    from workbench.ui.state import sample_sessions

    app = WorkbenchApp(sample_sessions()["openai_minimal.json"], autosave=Autosave(tmp_path))
    app.upload.filename = "weather.json"
    app.upload.value = json.dumps(CONV).encode("utf-8")
    assert app.state.doc.name == "weather.json" and app.state.doc.format == "responses"
    assert [s["kind"] for s in app.editor.items] == ROWS and len(app.editor.messages) == 7
    app.editor.ops = [{"op": "set", "index": 3, "field": "arguments", "value": '{"city": "Oslo"}', "n": 1}]
    same(app.state.result, cold(app.state))
    assert app.editor.counts == Controller.token_counts(app.controller)
    app.editor.ops = [{"op": "set", "index": 4, "field": "call_id", "value": "nope", "n": 2}]
    assert app.editor.error["index"] == 4 and app.alert.visible


def test_the_notebook_workbench_takes_a_responses_request_dict() -> None:
    from workbench.ui.notebook import Workbench

    wb = Workbench(copy.deepcopy(CONV))
    assert [s["kind"] for s in wb.editor.items] == ROWS and wb.editor.turn_cut == 7
    wb.edit(0, "Answer in French.")                                       # the instructions row
    assert wb.state.doc.data["instructions"] == "Answer in French."
    wb.apply({"op": "set", "index": 2, "field": "summary", "part": 0, "value": "Use the tool."})
    same(wb.state.result, cold(wb.state))
    with pytest.raises(WorkbenchError):
        wb.state.apply({"op": "set", "index": 3, "field": "content", "value": "x"})
    wb.editor._on_front_end(None, {"type": "op", "op": "set", "index": 5, "field": "content", "part": 0,
                                   "value": "Sunny."}, [])               # as the page sends it
    assert wb.state.doc.data["input"][4]["content"][0] == {"type": "output_text", "text": "Sunny.",
                                                          "annotations": CONV["input"][4]["content"][0]["annotations"]}
    same(wb.state.result, cold(wb.state))
    # The Share cell carries the edited Responses session: the same rows and ids.
    again = Workbench.from_share(wb.share().split('from_share("')[1].split('")')[0])
    assert [s["kind"] for s in again.editor.items] == ROWS
    same(again.state.result, wb.state.result)
