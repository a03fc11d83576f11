"""The chat routes of `serve-engine` in this process, where the server's state can be watched: a client
that vanishes mid-stream stops its generation; the queue bound, the engine wait and the request
deadline answer in each API's own shape; and replies with tool calls reach the SDKs in each API's
tool-call shape.

Tool calls need a model that writes them, which the synthetic model does not: there the engine's
decoding is replaced by a script of token ids (a reply tokenized with the template's vocabulary);
everything after it is the server's own code — the reply parsed as the template's family writes
calls, the API's events — and the bytes are read by the real SDKs (through an in-memory transport).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
import numpy as np
import openai
import pytest

from workbench.engine.chat_reply import ReplyText
from workbench.engine.chat_requests import ANTHROPIC, CHAT, RESPONSES, chat_request
from workbench.engine.chat_routes import REPLIES, ChatJob
from workbench.engine.decode import Sampling
from workbench.engine.engine import Engine
from workbench.engine.server import EngineServer
from workbench.engine.server_limits import ServerLimits
from workbench.tokenizers import get_tokenizer

LONG = 200                      # max_new_tokens of the servers here: a reply long enough to be cut


@pytest.fixture(scope="module")
def model() -> tuple[Engine, Any]:
    tok = get_tokenizer("qwen2.5")
    return Engine.load("tiny", vocab_size=tok.vocab_size), tok


@contextmanager
def serving(model: tuple[Engine, Any], **limits: Any) -> Iterator[EngineServer]:
    engine, tok = model
    srv = EngineServer(engine, tok, limits=ServerLimits(**{"max_new_tokens": LONG, **limits})).start()
    try:
        yield srv
    finally:
        srv.stop()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def clients(srv: EngineServer) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    return (openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120),
            anthropic.Anthropic(base_url=srv.url, api_key="unused", max_retries=0, timeout=120))


def open_stream(api: str, srv: EngineServer) -> Any:
    oai, claude = clients(srv)
    messages = [{"role": "user", "content": f"stream {api} {time.monotonic()}"}]
    if api == CHAT:
        return oai.chat.completions.create(model="tiny", messages=messages, max_tokens=LONG, stream=True)
    if api == RESPONSES:
        return oai.responses.create(model="tiny", input=messages[0]["content"], max_output_tokens=LONG, stream=True)
    return claude.messages.create(model="tiny", max_tokens=LONG, messages=messages, stream=True)


def is_text(api: str, event: Any) -> bool:
    if api == CHAT:
        return bool(event.choices and event.choices[0].delta.content)
    if api == RESPONSES:
        return bool(event.type == "response.output_text.delta")
    return bool(event.type == "content_block_delta")


# --- a client that vanishes ---------------------------------------------------------------------------
@pytest.mark.parametrize("api", [CHAT, RESPONSES, ANTHROPIC])
def test_a_client_gone_mid_stream_stops_its_generation(model: tuple[Engine, Any], api: str) -> None:
    with serving(model) as srv:
        stream = open_stream(api, srv)
        texts = 0
        for ev in stream:
            texts += is_text(api, ev)
            if texts == 3:
                break
        job = next(iter(srv.jobs))
        # The engine is held while the client goes: the reply cannot simply run out meanwhile.
        assert srv.turns.acquire(30)
        try:
            at_close = len(job.decoding.new_ids)
            stream.close()
            wait_for(lambda: job.cancelled, "the server to see the client gone")
        finally:
            srv.turns.release()
        wait_for(lambda: not srv.jobs, "the generation to end")
        assert srv.streams_cancelled == 1
        generated = len(job.decoding.new_ids)
        # stopped within a turn of the close (the one already waiting for the engine), not at 200
        assert not job.done and 3 <= at_close <= generated <= at_close + 2 < LONG, (at_close, generated)
        # and the server goes on serving
        oai, _ = clients(srv)
        r = oai.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        assert r.usage.completion_tokens == 2


def test_a_finished_stream_is_not_counted_as_cancelled(model: tuple[Engine, Any]) -> None:
    with serving(model) as srv:
        oai, _ = clients(srv)
        chunks = list(oai.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hey"}],
                                                  max_tokens=4, stream=True))
        assert chunks[-1].choices[0].finish_reason == "length"
        wait_for(lambda: not srv.jobs, "the job to end")
        assert srv.streams_cancelled == 0


# --- the limits, in each API's shape --------------------------------------------------------------
def test_a_full_queue_answers_503_in_the_apis_shape(model: tuple[Engine, Any]) -> None:
    with serving(model, workers=1, queue=1, engine_wait_s=120) as srv:
        oai, claude = clients(srv)
        assert srv.turns.acquire(5)
        done: list[Any] = []
        try:
            for _ in range(2):                # one on the worker, one waiting for it
                threading.Thread(target=lambda: done.append(oai.chat.completions.create(
                    model="tiny", messages=[{"role": "user", "content": "x"}], max_tokens=1)), daemon=True).start()
            wait_for(lambda: srv.pending == 2, "two requests taken in")
            with pytest.raises(anthropic.APIStatusError) as a:
                claude.messages.create(model="tiny", max_tokens=1, messages=[{"role": "user", "content": "x"}])
            assert a.value.status_code == 503 and a.value.response.headers["retry-after"] == "1"
            assert a.value.body["error"]["type"] == "overloaded_error" and "busy" in a.value.body["error"]["message"]
            with pytest.raises(openai.APIStatusError) as o:
                oai.responses.create(model="tiny", input="x", max_output_tokens=1)
            assert o.value.status_code == 503 and o.value.body["type"] == "overloaded_error"
        finally:
            srv.turns.release()
        wait_for(lambda: len(done) == 2, "the two queued requests to be answered")


def test_no_turn_on_the_engine_is_a_503_before_the_stream_starts(model: tuple[Engine, Any]) -> None:
    with serving(model, engine_wait_s=0.5) as srv:
        _, claude = clients(srv)
        assert srv.turns.acquire(5)
        try:
            with pytest.raises(anthropic.APIStatusError) as a:
                claude.messages.create(model="tiny", max_tokens=3, messages=[{"role": "user", "content": "x"}],
                                       stream=True)
        finally:
            srv.turns.release()
        assert a.value.status_code == 503 and "no turn within 0.5 s" in a.value.body["error"]["message"]


def test_a_prompt_over_the_cap_is_a_400_naming_the_limit(model: tuple[Engine, Any]) -> None:
    with serving(model, max_prompt_tokens=40) as srv:
        oai, claude = clients(srv)
        with pytest.raises(openai.BadRequestError) as o:
            oai.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "word " * 50}])
        assert o.value.body["param"] == "messages" and "over this server's limit of 40" in o.value.body["message"]
        with pytest.raises(anthropic.BadRequestError) as a:
            claude.messages.create(model="tiny", max_tokens=5, messages=[{"role": "user", "content": "word " * 50}])
        assert "--max-prompt-tokens" in a.value.body["error"]["message"]
        r = claude.messages.create(model="tiny", max_tokens=2, system="x", messages=[{"role": "user", "content": "y"}])
        assert r.usage.output_tokens == 2                       # a prompt under the cap is served


def test_a_dribbling_client_gets_408_in_the_anthropic_shape(model: tuple[Engine, Any]) -> None:
    with serving(model, read_timeout_s=1, request_deadline_s=2, linger_s=0.5) as srv:
        port = srv.sock.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408")
        err = json.loads(body)
        assert err["type"] == "error" and err["error"]["type"] == "timeout_error"
        assert "nothing for 1 s" in err["error"]["message"], err   # the read timeout's own words


# --- tool calls through the SDKs ------------------------------------------------------------------
class ScriptedDecoding:
    """The engine's part of a ChatJob, replaced by the token ids a model would have generated."""

    def __init__(self, prompt: np.ndarray, script: list[int], stop_id: int):
        self.ids, self.script = prompt, list(script) + [stop_id]
        self.s = Sampling(len(self.script) + 5, frozenset({stop_id}))
        self.new_ids: list[int] = []
        self.finish: str | None = None

    @property
    def done(self) -> bool:
        return self.finish is not None

    def prefill(self, first_wait: float, check: Callable[[], None]) -> int:
        return 3

    def step(self) -> int:
        token = self.script[len(self.new_ids)]
        self.new_ids.append(token)
        if token in self.s.stop_ids:
            self.finish = "stop"
        return token

    def stop_early(self) -> None:
        self.finish = "stop"


REPLY = ('Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n'
         '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>')
WANT = [("get_weather", {"city": "Paris", "days": 2}), ("get_time", {"tz": "CET"})]
TOOL = {"name": "get_weather", "description": "weather", "parameters": {"type": "object", "properties": {}}}
BODIES = {CHAT: {"model": "tiny", "messages": [{"role": "user", "content": "Weather?"}],
                 "tools": [{"type": "function", "function": TOOL}]},
          RESPONSES: {"model": "tiny", "input": "Weather?", "tools": [{"type": "function", **TOOL}]},
          ANTHROPIC: {"model": "tiny", "max_tokens": 50, "messages": [{"role": "user", "content": "Weather?"}],
                      "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]}}


def scripted_transport(api: str, reply: str, family: str = "hermes") -> httpx2.MockTransport:
    """Answers one request as the server's ChatJob does, its tokens scripted."""
    tok = get_tokenizer("qwen2.5")

    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        req = chat_request(api, body, models=frozenset({"tiny"}))
        job = ChatJob(req, ScriptedDecoding(np.arange(10, dtype=np.uint32), [int(i) for i in tok.encode(reply)],
                                            tok.specials["<|im_end|>"]),
                      ReplyText(tok, family, tools=req.tools), REPLIES[api]("tiny", req, family), capped=False)
        frames = job.prefill(1.0)
        while not job.done:
            frames += job.step()
        if not req.stream:
            return httpx2.Response(200, json=job.api.body())
        return httpx2.Response(200, headers={"Content-Type": "text/event-stream"}, content=b"".join(frames))
    return httpx2.MockTransport(handle)


def scripted(api: str, reply: str, family: str = "hermes") -> Any:
    http = httpx2.Client(transport=scripted_transport(api, reply, family))
    if api == ANTHROPIC:
        return anthropic.Anthropic(base_url="http://engine", api_key="unused", http_client=http, max_retries=0)
    return openai.OpenAI(base_url="http://engine/v1", api_key="unused", http_client=http, max_retries=0)


def test_chat_completions_tool_calls_whole_and_streamed() -> None:
    client = scripted(CHAT, REPLY)
    r = client.chat.completions.create(**BODIES[CHAT])
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Checking."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == WANT
    assert all(c.id.startswith("call_") and c.type == "function" for c in choice.message.tool_calls)
    text, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(**BODIES[CHAT], stream=True):
        d = chunk.choices[0].delta
        text += d.content or ""
        for tc in d.tool_calls or []:
            calls.setdefault(tc.index, [tc.function.name, ""])[1] += tc.function.arguments
        finish = chunk.choices[0].finish_reason or finish
    assert text == "Checking." and finish == "tool_calls"
    assert [(n, json.loads(a)) for n, a in calls.values()] == WANT
    assert "<tool_call>" not in text, "call text was streamed as content"


def test_responses_function_calls_whole_and_streamed() -> None:
    client = scripted(RESPONSES, REPLY)
    r = client.responses.create(**BODIES[RESPONSES])
    assert r.status == "completed" and [o.type for o in r.output] == ["message", "function_call", "function_call"]
    assert r.output_text == "Checking."
    assert [(o.name, json.loads(o.arguments)) for o in r.output[1:]] == WANT
    with client.responses.stream(**BODIES[RESPONSES]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()        # the SDK's own accumulation of the events
    assert kinds.count("response.function_call_arguments.done") == 2 and kinds[-1] == "response.completed"
    assert [(o.name, json.loads(o.arguments)) for o in final.output if o.type == "function_call"] == WANT
    assert final.output_text == "Checking."


def test_anthropic_tool_use_whole_and_streamed() -> None:
    client = scripted(ANTHROPIC, REPLY)
    m = client.messages.create(**BODIES[ANTHROPIC])
    assert m.stop_reason == "tool_use" and [b.type for b in m.content] == ["text", "tool_use", "tool_use"]
    assert m.content[0].text == "Checking." and [(b.name, b.input) for b in m.content[1:]] == WANT
    assert all(b.id.startswith("toolu_") for b in m.content[1:])
    with client.messages.stream(**BODIES[ANTHROPIC]) as stream:
        final = stream.get_final_message()         # input_json_delta accumulated by the SDK
    assert final.stop_reason == "tool_use" and [(b.name, b.input) for b in final.content[1:]] == WANT


def test_reasoning_reaches_each_api_as_reasoning() -> None:
    reply = "<think>\nThe user greets me.\n</think>\n\nHello!"
    chat = scripted(CHAT, reply).chat.completions.create(**BODIES[CHAT])
    assert chat.choices[0].message.content == "Hello!"
    assert chat.choices[0].message.model_extra["reasoning_content"] == "The user greets me."
    resp = scripted(RESPONSES, reply).responses.create(**BODIES[RESPONSES])
    assert [o.type for o in resp.output] == ["reasoning", "message"]
    assert resp.output[0].content[0].text == "The user greets me." and resp.output_text == "Hello!"
    with scripted(ANTHROPIC, reply).messages.stream(**BODIES[ANTHROPIC]) as stream:
        m = stream.get_final_message()
    assert [b.type for b in m.content] == ["thinking", "text"] and m.content[0].thinking == "The user greets me."
    assert m.stop_reason == "end_turn" and m.content[1].text == "Hello!"


def test_malformed_call_text_reaches_the_client_as_text() -> None:
    broken = 'Sure <tool_call>\n{"name": "get_weather", "arguments": {"city": \n</tool_call>'
    r = scripted(CHAT, broken).chat.completions.create(**BODIES[CHAT])
    assert r.choices[0].finish_reason == "stop" and r.choices[0].message.tool_calls is None
    assert r.choices[0].message.content == broken
    m = scripted(ANTHROPIC, broken).messages.create(**BODIES[ANTHROPIC])
    assert m.stop_reason == "end_turn" and [b.type for b in m.content] == ["text"] and m.content[0].text == broken


def test_mistral_call_ids_survive_the_next_turn() -> None:
    """A call the model left unnamed gets nine letters and digits: the id Mistral's templates accept
    when the client sends the call back."""
    from workbench.assembly import Assembler
    reply = '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    for api in (CHAT, ANTHROPIC):
        client = scripted(api, reply, family="mistral")
        if api == CHAT:
            call_id = client.chat.completions.create(**BODIES[CHAT]).choices[0].message.tool_calls[0].id
        else:
            call_id = client.messages.create(**BODIES[ANTHROPIC]).content[0].id
        assert len(call_id) == 9 and call_id.isalnum()
        Assembler(template="mistral-v3", cache=None).assemble({"messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": "sunny"}]})
