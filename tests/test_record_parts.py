"""The recorder's parts (issue 31): the event-stream decoder under any chunking, each API's stream
assembled into the response it returns unstreamed, conversations by prefix, and the log writer's
whole lines (a crash's fragment ended, rotation)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_upstream import events, reply

from workbench.capture.conversations import Conversations
from workbench.capture.log_line import log_line, utc_timestamp
from workbench.capture.log_writer import LogWriter
from workbench.capture.sse import ASSEMBLERS, EventDecoder
from workbench.errors import LogFileError

STREAMS = {"chat.completions": "chat", "responses": "responses", "messages": "messages"}
REACHED = {"chunkings": 0}


def decode(chunks: list[bytes]) -> list[tuple[str, str]]:
    d = EventDecoder()
    out = [(e.event, e.data) for c in chunks for e in d.feed(c)]
    return out + [(e.event, e.data) for e in d.close()]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(STREAMS)), st.sampled_from([b"\n", b"\r\n", b"\r"]),
       st.lists(st.integers(1, 400), min_size=1, max_size=40))
def test_any_chunking_and_line_ending_decodes_to_the_same_events(api: str, eol: bytes, cuts: list[int]) -> None:
    raw = b"".join(events(STREAMS[api], "m", 3, 5, include_usage=True)).replace(b"\n", eol)
    chunks, at = [], 0
    for c in cuts:
        chunks.append(raw[at:at + c])
        at += c
    chunks.append(raw[at:])
    whole = decode([raw])
    assert decode(chunks) == whole and len(whole) >= 6
    REACHED["chunkings"] += 1


def test_the_chunking_property_reached_its_check() -> None:
    print(f"chunkings checked: {REACHED['chunkings']}")
    assert REACHED["chunkings"] >= 100 or os.environ.get("PYTEST_XDIST_WORKER")


def test_comments_multi_line_data_and_a_stream_cut_without_its_blank_line() -> None:
    got = decode([b": keep-alive\n\nevent: x\ndata: a\ndata: b\n\ndata:c"])
    assert got == [("x", "a\nb"), ("message", "c")]


@pytest.mark.parametrize("api", sorted(STREAMS))
def test_a_stream_assembles_into_the_unstreamed_reply(api: str) -> None:
    a = ASSEMBLERS[api]()
    for e in EventDecoder().feed(b"".join(events(STREAMS[api], "m", 3, 5, include_usage=True))):
        a.add(e)
    got, want = a.response(), reply(STREAMS[api], "m", 3, 5)
    assert got is not None and a.bad == 0
    assert got["usage"] == want["usage"]
    if api == "chat.completions":
        assert got["choices"][0]["message"]["content"] == want["choices"][0]["message"]["content"]
        assert got["choices"][0]["finish_reason"] == "stop" and got["id"] == want["id"]
    else:
        assert {k: v for k, v in got.items() if k in want} == want


def test_chat_tool_call_arguments_in_pieces_are_joined() -> None:
    a = ASSEMBLERS["chat.completions"]()
    pieces = [{"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}},
              {"index": 0, "function": {"arguments": '{"ci'}}, {"index": 0, "function": {"arguments": 'ty": "Oslo"}'}},
              {"index": 1, "id": "call_2", "function": {"name": "now", "arguments": "{}"}}]
    raw = b"".join(b"data: " + json.dumps({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [p]}}]}).encode()
                   + b"\n\n" for p in pieces)
    for e in EventDecoder().feed(raw + b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}'
                                       b"\n\ndata: [DONE]\n\n"):
        a.add(e)
    msg = a.response()["choices"][0]["message"]          # type: ignore[index]
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]] == \
        [("call_1", "get_weather", {"city": "Oslo"}), ("call_2", "now", {})]


def test_anthropic_tool_use_input_in_pieces_and_an_error_event() -> None:
    a = ASSEMBLERS["messages"]()
    evs = [{"type": "message_start", "message": {"id": "m", "role": "assistant", "content": [],
                                                 "usage": {"input_tokens": 5, "cache_read_input_tokens": 3}}},
           {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "f",
                                                                         "input": {}}},
           {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a"'}},
           {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ": 1}"}},
           {"type": "content_block_stop", "index": 0},
           {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
           {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    raw = b"".join(b"data: " + json.dumps(x).encode() + b"\n\n" for x in evs) + b"data: {bad\n\n"
    for e in EventDecoder().feed(raw):
        a.add(e)
    r = a.response()
    assert r is not None and r["content"] == [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]
    assert r["usage"] == {"input_tokens": 5, "cache_read_input_tokens": 3, "output_tokens": 9}
    assert r["stop_reason"] == "tool_use" and a.error["type"] == "overloaded_error" and a.bad == 1


# ------------------------------------------------------------------ conversations
def q(text: str) -> dict:
    return {"role": "user", "content": text}


def test_prefix_chaining_follows_the_reply_as_clients_send_it_back() -> None:
    c = Conversations()
    r1 = reply("chat", "m", 1, 0)
    cid, how = c.identify("chat.completions", {"messages": [q("hi")]}, {})
    assert how == "new"
    c.record(cid, "chat.completions", {"messages": [q("hi")]}, r1)
    back = {"role": "assistant", "content": [{"type": "text", "text": "Hello there!"}]}   # parts, not a string
    assert c.identify("chat.completions", {"messages": [{"role": "system", "content": "t=2"}, q("hi"), back,
                                                        q("more")]}, {}) == (cid, "prefix")
    other = {"role": "assistant", "content": "Something else"}
    assert c.identify("chat.completions", {"messages": [q("hi"), other, q("more")]}, {})[1] == "new"


def test_tool_calls_chain_across_reserialised_arguments() -> None:
    c = Conversations()
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"b": 1, "a": 2}'}}
    r1 = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    c.record("A", "chat.completions", {"messages": [q("go")]}, r1)
    sent = {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                                                 "function": {"name": "f", "arguments": '{"a":2,"b":1}'}}]}
    nxt = {"messages": [q("go"), sent, {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]}
    assert c.identify("chat.completions", nxt, {}) == ("A", "prefix")


def test_anthropic_and_responses_chains() -> None:
    c = Conversations()
    c.record("B", "messages", {"messages": [q("hi")]}, reply("messages", "m", 1, 0))
    back = {"role": "assistant", "content": "Hello there!"}
    assert c.identify("messages", {"messages": [q("hi"), back, q("x")]}, {}) == ("B", "prefix")
    r = reply("responses", "m", 2, 0)
    c.record("C", "responses", {"input": "hi"}, r)
    assert c.identify("responses", {"previous_response_id": r["id"], "input": "x"}, {}) == ("C", "previous_response_id")
    stateless = {"input": [q("hi"), *r["output"], q("x")]}
    assert c.identify("responses", stateless, {}) == ("C", "prefix")


def test_remembered_calls_are_bounded() -> None:
    c = Conversations(remember=10)
    for k in range(50):
        c.record(f"c{k}", "chat.completions", {"messages": [q(str(k))]}, reply("chat", "m", k, 0))
    back = {"role": "assistant", "content": "Hello there!"}
    assert c.identify("chat.completions", {"messages": [q("49"), back, q("x")]}, {}) == ("c49", "prefix")
    assert c.identify("chat.completions", {"messages": [q("0"), back, q("x")]}, {})[1] == "new"


# ------------------------------------------------------------------ the log writer
def test_a_fragment_left_by_a_crash_is_ended_before_the_next_line(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    whole = log_line("c", utc_timestamp(0), {"messages": []})
    log.write_bytes(whole + whole[:25])                       # the crash cut the second line
    with LogWriter(log) as w:
        assert w.repaired == 1
        w.write(whole)
    lines = log.read_bytes().split(b"\n")
    assert lines == [whole[:-1], whole[:25], whole[:-1], b""]


def test_a_line_must_be_one_line(tmp_path: Path) -> None:
    with LogWriter(tmp_path / "x.jsonl") as w, pytest.raises(LogFileError, match="one line"):
        w.write(b'{"a": 1}\n{"b": 2}\n')
    with pytest.raises(LogFileError, match="latency_ms"):
        log_line("c", "t", {}, latency_ms=float("nan"))


def test_a_log_that_cannot_be_opened_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(LogFileError, match="cannot open the log"):
        LogWriter(tmp_path / "dir.jsonl")
