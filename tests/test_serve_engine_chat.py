"""`workbench serve-engine --model tiny` as a real process on 127.0.0.1, driven by the official SDKs
(openai, anthropic): Chat Completions, Responses and Anthropic Messages, whole and streamed.

Oracles independent of the server:
- the prompt it ran is `workbench render` of the same request (token ids), and its reply is the
  reply the engine library generates, greedily, for those ids in this process;
- the cached tokens of the next turn are the common prefix of what the engine held after the first
  (its prompt, counted by the Assembler here, and its reply's ids, which decode to the reply text)
  and the next prompt (counted by the Assembler here): the radix cache holds single tokens, no
  blocks to round to;
- hostile bodies get typed 400s in each API's own error shape.
Each test's conversation starts with a nonce, so what other tests left in the cache does not count.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import numpy as np
import openai
import pytest
from engine_server import tiny_engine_server

from workbench.assembly import Assembler
from workbench.cli.main import main
from workbench.difference import first_difference
from workbench.engine.engine import Engine
from workbench.tokenizers import get_tokenizer

ROOT = Path(__file__).resolve().parent.parent
CAP = 12                         # the server's --max-new-tokens
SYNTHETIC = "x-workbench-synthetic-model"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The base URL of `workbench serve-engine --model tiny --max-new-tokens 12`, once it says it serves."""
    with tiny_engine_server("--max-new-tokens", str(CAP), clean_exit=True) as url:
        yield url.removesuffix("/v1")


@pytest.fixture(scope="module")
def oai(server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def claude(server: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server, api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def qwen() -> Assembler:
    """What serve-engine --model tiny renders with: the qwen2.5 template and vocabulary."""
    return Assembler(template="qwen2.5", cache=None)


def nonce() -> str:
    return uuid.uuid4().hex[:12]


GREEDY = {"temperature": 0}


def rendered(request: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> list[int]:
    """`workbench render REQUEST.json --json`: the token ids of the request's prompt."""
    path = tmp_path / f"req-{nonce()}.json"
    path.write_text(json.dumps(request), "utf-8")
    capsys.readouterr()
    assert main(["render", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["token_ids"]


# --- each API, whole and streamed -------------------------------------------------------------------
def test_chat_completions_whole_and_streamed(oai: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": f"{nonce()} Tell me about Paris."}]
    raw = oai.chat.completions.with_raw_response.create(model="tiny", messages=messages, max_tokens=6,
                                                        temperature=0)
    assert raw.headers[SYNTHETIC] == "tiny"          # gibberish, and the answer says so
    whole = raw.parse()
    choice = whole.choices[0]
    assert whole.object == "chat.completion" and whole.model == "tiny"
    assert choice.message.role == "assistant" and choice.message.content and choice.finish_reason == "length"
    assert whole.usage.completion_tokens == 6
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + 6

    pieces, finishes, usages = [], [], []
    stream = oai.chat.completions.create(model="tiny", messages=messages, max_tokens=6, temperature=0, stream=True,
                                         stream_options={"include_usage": True})
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk" and chunk.id
        if chunk.usage is not None:
            usages.append(chunk.usage)
        for c in chunk.choices:
            pieces.append(c.delta.content or "")
            finishes.append(c.finish_reason)
    assert "".join(pieces) == choice.message.content          # greedy: the same reply, streamed
    assert [f for f in finishes if f] == ["length"]
    assert len(usages) == 1 and usages[0].completion_tokens == 6
    assert usages[0].prompt_tokens == whole.usage.prompt_tokens
    # the same prompt again: all of it but the last token was held
    assert usages[0].prompt_tokens_details.cached_tokens == whole.usage.prompt_tokens - 1


def test_responses_whole_and_streamed(oai: openai.OpenAI) -> None:
    body: dict[str, Any] = {"model": "tiny", "instructions": "Answer briefly.", "input": f"{nonce()} Hello",
                            "max_output_tokens": 5, "temperature": 0}
    raw = oai.responses.with_raw_response.create(**body)
    assert raw.headers[SYNTHETIC] == "tiny"
    whole = raw.parse()
    assert whole.object == "response" and whole.status == "incomplete"
    assert whole.incomplete_details.reason == "max_output_tokens"
    assert [o.type for o in whole.output] == ["message"] and whole.output_text
    assert whole.usage.output_tokens == 5 and whole.usage.total_tokens == whole.usage.input_tokens + 5

    kinds, deltas, seqs = [], [], []
    with oai.responses.stream(**body) as stream:
        for ev in stream:
            kinds.append(ev.type)
            seqs.append(ev.sequence_number)
            if ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
            if ev.type == "response.incomplete":
                final = ev.response
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]
    assert seqs == list(range(len(seqs)))
    assert "".join(deltas) == final.output_text == whole.output_text
    assert final.usage.input_tokens_details.cached_tokens == whole.usage.input_tokens - 1


def test_anthropic_messages_whole_and_streamed(claude: anthropic.Anthropic) -> None:
    body: dict[str, Any] = {"model": "tiny", "max_tokens": 7, "system": "Be brief.",
                            "messages": [{"role": "user", "content": f"{nonce()} Hi"}], "extra_body": GREEDY}
    raw = claude.messages.with_raw_response.create(**body)
    assert raw.headers[SYNTHETIC] == "tiny"
    whole = raw.parse()
    assert whole.type == "message" and whole.role == "assistant" and whole.stop_reason == "max_tokens"
    assert [b.type for b in whole.content] == ["text"] and whole.content[0].text
    assert whole.usage.output_tokens == 7 and whole.usage.cache_creation_input_tokens == 0

    kinds = []
    with claude.messages.stream(**body) as stream:
        for ev in stream:
            kinds.append(ev.type)
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert final.content[0].text == whole.content[0].text and final.stop_reason == "max_tokens"
    # Anthropic's split: input_tokens excludes what the cache read; together they are the prompt
    prompt = whole.usage.input_tokens + whole.usage.cache_read_input_tokens
    assert final.usage.cache_read_input_tokens == prompt - 1 and final.usage.input_tokens == 1


# --- the prompt the engine ran, and the cache the next turn reused -----------------------------------
def test_the_prompt_is_workbench_render_and_the_reply_the_engines_greedy_reply(
        oai: openai.OpenAI, claude: anthropic.Anthropic, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    tag = nonce()
    system, user = f"{tag} You are terse.", "What is the capital of France?"
    chat = oai.chat.completions.create(model="tiny", max_tokens=8, temperature=0, extra_body={"return_token_ids": True},
                                       messages=[{"role": "system", "content": system},
                                                 {"role": "user", "content": user}])
    resp = oai.responses.create(model="tiny", instructions=system, input=user, max_output_tokens=8, temperature=0,
                                extra_body={"return_token_ids": True})
    msg = claude.messages.create(model="tiny", max_tokens=8, system=system,
                                 messages=[{"role": "user", "content": user}],
                                 extra_body={"return_token_ids": True, "temperature": 0})
    ids = rendered({"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]},
                   capsys, tmp_path)
    # the three APIs say the same thing: the same prompt, which is what `workbench render` makes of it
    for answer in (chat, resp, msg):
        assert answer.model_extra["prompt_token_ids"] == ids
    assert rendered({"instructions": system, "input": user}, capsys, tmp_path) == ids
    assert rendered({"system": system, "messages": [{"role": "user", "content": user}]}, capsys, tmp_path) == ids

    # The engine library, in this process, generating greedily for those ids: the same reply.
    tok = get_tokenizer("qwen2.5")
    engine = Engine.load("tiny", vocab_size=tok.vocab_size)
    stop = tok.specials["<|im_end|>"]
    local = engine.generate(np.asarray(ids, dtype=np.uint32), 8, stop_ids=[stop], tokenizer=tok,
                            suppress_ids=tok.special_ids)
    assert chat.choices[0].message.content == resp.output_text == msg.content[0].text == local.text
    assert chat.choices[0].model_extra["token_ids"] == [int(i) for i in local.new_ids]


def extend_chat(messages: list[dict], reply: str) -> list[dict]:
    return [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": "And Lyon?"}]


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_the_next_turn_reports_what_the_radix_cache_held(api: str, oai: openai.OpenAI, claude: anthropic.Anthropic,
                                                         qwen: Assembler) -> None:
    """Turn 1 whole, turn 2 streamed: the usage of each in the API's own fields."""
    messages = [{"role": "system", "content": f"{nonce()} You answer about cities."},
                {"role": "user", "content": "Tell me about Paris."}]
    extra = {"return_token_ids": True}
    if api == "chat":
        first = oai.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=0,
                                            extra_body=extra)
        reply, held_ids = first.choices[0].message.content, first.choices[0].model_extra["token_ids"]
        first_cached = first.usage.prompt_tokens_details.cached_tokens
        usage = [c.usage for c in oai.chat.completions.create(
            model="tiny", messages=extend_chat(messages, reply), max_tokens=3, temperature=0, stream=True,
            stream_options={"include_usage": True}) if c.usage is not None][0]
        prompt2, cached2 = usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens
    elif api == "responses":
        first = oai.responses.create(model="tiny", instructions=messages[0]["content"], input=messages[1]["content"],
                                     max_output_tokens=8, temperature=0, extra_body=extra)
        reply, held_ids = first.output_text, first.model_extra["token_ids"]
        first_cached = first.usage.input_tokens_details.cached_tokens
        items = [{"role": "user", "content": messages[1]["content"]},
                 {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": reply}]},
                 {"role": "user", "content": "And Lyon?"}]
        with oai.responses.stream(model="tiny", instructions=messages[0]["content"], input=items,
                                  max_output_tokens=3, temperature=0) as stream:
            done = [e for e in stream if e.type in ("response.completed", "response.incomplete")][0]
        prompt2, cached2 = done.response.usage.input_tokens, done.response.usage.input_tokens_details.cached_tokens
    else:
        first = claude.messages.create(model="tiny", system=messages[0]["content"], messages=messages[1:], max_tokens=8,
                                       extra_body={**extra, **GREEDY})
        reply, held_ids = first.content[0].text, first.model_extra["token_ids"]
        first_cached = first.usage.cache_read_input_tokens
        with claude.messages.stream(model="tiny", system=messages[0]["content"],
                                    messages=extend_chat(messages, reply)[1:], max_tokens=3,
                                    extra_body=GREEDY) as stream:
            start = next(e for e in stream if e.type == "message_start")
            final = stream.get_final_message()
        u = start.message.usage
        prompt2, cached2 = u.input_tokens + u.cache_read_input_tokens, u.cache_read_input_tokens
        assert final.usage.cache_read_input_tokens == cached2 and final.usage.input_tokens == prompt2 - cached2
    # independent counts: both prompts assembled here; the reply's ids are those of its text
    tok = qwen.tokenizer
    assert tok.decode(held_ids) == reply
    p1 = qwen.assemble({"messages": messages}).token_ids
    p2 = qwen.assemble({"messages": extend_chat(messages, reply)}).token_ids
    assert prompt2 == len(p2)
    held = np.concatenate([p1, np.asarray(held_ids, dtype=np.uint32)])
    expected = first_difference(held, p2)
    assert expected >= len(p1) and cached2 == expected > first_cached
    assert first_cached < 8, "the first turn's nonce parts it from every other held prompt within a few tokens"


# --- the request's own settings ---------------------------------------------------------------------
def test_max_tokens_are_honoured_and_capped(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    messages = [{"role": "user", "content": f"{nonce()} Count to ten."}]
    r = oai.chat.completions.create(model="tiny", messages=messages, max_completion_tokens=3, temperature=0)
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"
    r = oai.responses.create(model="tiny", input=messages[0]["content"], max_output_tokens=2, temperature=0)
    assert r.usage.output_tokens == 2
    raw = claude.messages.with_raw_response.create(model="tiny", max_tokens=1000, messages=messages,
                                                   extra_body=GREEDY)
    assert raw.headers["x-workbench-max-new-tokens"] == str(CAP)       # said, not silent
    assert raw.parse().usage.output_tokens == CAP and raw.parse().stop_reason == "max_tokens"
    raw = oai.chat.completions.with_raw_response.create(model="tiny", messages=messages, max_tokens=2)
    assert "x-workbench-max-new-tokens" not in raw.headers


def test_temperature_zero_is_greedy_and_sampling_follows_its_seed(oai: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": f"{nonce()} Say something."}]

    def reply(**kw: Any) -> str:
        r = oai.chat.completions.create(model="tiny", messages=messages, max_tokens=8, **kw)
        return r.choices[0].message.content
    greedy = reply(temperature=0)
    assert reply(temperature=0) == greedy
    one, again, two = reply(temperature=1.5, seed=1), reply(temperature=1.5, seed=1), reply(temperature=1.5, seed=2)
    assert one == again and one != two and greedy not in (one, two)


def test_a_stop_sequence_ends_the_reply_before_it(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    messages = [{"role": "user", "content": f"{nonce()} Go on."}]
    full = oai.chat.completions.create(model="tiny", messages=messages, max_tokens=CAP,
                                       temperature=0).choices[0].message.content
    stop = full[len(full) // 2:len(full) // 2 + 2]
    cut = full[:full.index(stop)]
    r = oai.chat.completions.create(model="tiny", messages=messages, max_tokens=CAP, temperature=0, stop=[stop])
    assert r.choices[0].message.content == cut and r.choices[0].finish_reason == "stop"
    pieces = [c.choices[0].delta.content or "" for c in oai.chat.completions.create(
        model="tiny", messages=messages, max_tokens=CAP, temperature=0, stop=stop, stream=True) if c.choices]
    assert "".join(pieces) == cut
    m = claude.messages.create(model="tiny", max_tokens=CAP, messages=messages, stop_sequences=[stop],
                               extra_body=GREEDY)
    assert (m.content[0].text if m.content else "") == cut
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop


# --- hostile bodies: typed 400s, each in its API's shape ------------------------------------------
OK_CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
OK_RESP = {"model": "tiny", "input": "hi", "max_output_tokens": 1}
OK_MSG = {"model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
HOSTILE = {
    "chat: not JSON": ("/v1/chat/completions", b"messages=hi", 400, None, "not valid JSON"),
    "chat: a list": ("/v1/chat/completions", [OK_CHAT], 400, None, "must be a JSON object"),
    "chat: no messages": ("/v1/chat/completions", {"model": "tiny"}, 400, "messages", "must be a list"),
    "chat: messages a string": ("/v1/chat/completions", {**OK_CHAT, "messages": "hi"}, 400, "messages",
                                "must be a list"),
    "chat: unknown role": ("/v1/chat/completions", {**OK_CHAT, "messages": [{"role": "robot", "content": "x"}]},
                           400, "messages[0].role", "use one of system, user, assistant, tool"),
    "chat: content a number": ("/v1/chat/completions", {**OK_CHAT, "messages": [{"role": "user", "content": 5}]},
                               400, "messages[0].content", "content must be a string, null or a list"),
    "chat: tool result with no call id": ("/v1/chat/completions", {**OK_CHAT, "messages": [
        {"role": "user", "content": "x"}, {"role": "tool", "content": "42"}]}, 400, "messages[1].tool_call_id",
        "copy the id of the assistant's tool call"),
    "chat: tools not a list": ("/v1/chat/completions", {**OK_CHAT, "tools": "all"}, 400, "tools", "must be a list"),
    "chat: max_tokens a string": ("/v1/chat/completions", {**OK_CHAT, "max_tokens": "8"}, 400, "max_tokens",
                                  'got "8"'),
    "chat: max_tokens 0": ("/v1/chat/completions", {**OK_CHAT, "max_tokens": 0}, 400, "max_tokens", "at least 1"),
    "chat: temperature hot": ("/v1/chat/completions", {**OK_CHAT, "temperature": "hot"}, 400, "temperature",
                              "from 0 to 2"),
    "chat: stream yes": ("/v1/chat/completions", {**OK_CHAT, "stream": "yes"}, 400, "stream", "true or false"),
    "chat: n 3": ("/v1/chat/completions", {**OK_CHAT, "n": 3}, 400, "n", "must be 1"),
    "chat: logprobs": ("/v1/chat/completions", {**OK_CHAT, "logprobs": True}, 400, "logprobs", "not returned"),
    "chat: stop a number": ("/v1/chat/completions", {**OK_CHAT, "stop": 5}, 400, "stop", "a list of strings"),
    "chat: another model": ("/v1/chat/completions", {**OK_CHAT, "model": "gpt-9"}, 404, "model", "does not exist"),
    "responses: no input": ("/v1/responses", {"model": "tiny"}, 400, "input", "add the user's message"),
    "responses: previous_response_id": ("/v1/responses", {**OK_RESP, "previous_response_id": "resp_1"}, 400,
                                        "previous_response_id", "send the whole conversation in 'input'"),
    "responses: a built-in tool call": ("/v1/responses", {**OK_RESP, "input": [{"type": "web_search_call"}]}, 400,
                                        "input[0]", "replace it with the function_call"),
    "responses: max_output_tokens -1": ("/v1/responses", {**OK_RESP, "max_output_tokens": -1}, 400,
                                        "max_output_tokens", "at least 1"),
    "messages: no max_tokens": ("/v1/messages", {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]},
                                400, "max_tokens", "is required"),
    "messages: system as a message": ("/v1/messages", {**OK_MSG, "messages": [{"role": "system", "content": "x"}]},
                                      400, "messages[0].role", "top-level 'system' field"),
    "messages: a tool_use from the user": ("/v1/messages", {**OK_MSG, "messages": [{"role": "user", "content": [
        {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}]}, 400, "messages[0].content[0]",
        "belong in assistant messages"),
    "messages: temperature 1.5": ("/v1/messages", {**OK_MSG, "temperature": 1.5}, 400, "temperature", "from 0 to 1"),
    "messages: NaN": ("/v1/messages", b'{"max_tokens": 1, "messages": [], "temperature": NaN}', 400, None,
                      "NaN is not JSON"),
    "messages: another model": ("/v1/messages", {**OK_MSG, "model": "claude-9"}, 404, "model", "does not exist"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_bodies_get_typed_errors_in_the_apis_shape(server: str, name: str) -> None:
    path, body, status, param, words = HOSTILE[name]
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = httpx.post(server + path, content=content, headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status_code == status, r.text
    assert r.headers[SYNTHETIC] == "tiny"
    err = r.json()
    if path == "/v1/messages":
        assert err["type"] == "error" and set(err) == {"type", "error"}
        assert err["error"]["type"] == {404: "not_found_error"}.get(status, "invalid_request_error")
        message = err["error"]["message"]
        if param is not None:
            assert message.startswith(param + ":"), message
    else:
        e = err["error"]
        assert e["code"] == status and e["param"] == param
        assert e["type"] == {404: "not_found_error"}.get(status, "invalid_request_error")
        message = e["message"]
    assert words in message, message
    honest = {"/v1/chat/completions": OK_CHAT, "/v1/responses": OK_RESP, "/v1/messages": OK_MSG}[path]
    assert httpx.post(server + path, json=honest, timeout=120).status_code == 200     # and it still serves


def test_the_sdks_raise_the_typed_error(oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"},
                                                            {"role": "tool", "content": "y"}])
    assert e.value.body["param"] == "messages[1].tool_call_id"
    with pytest.raises(openai.NotFoundError):
        oai.responses.create(model="o9", input="x")
    with pytest.raises(anthropic.BadRequestError) as a:
        claude.messages.create(model="tiny", max_tokens=5, messages=[{"role": "assistant", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "x"}]}])
    assert a.value.body["error"]["type"] == "invalid_request_error"
    assert "tool_result blocks belong in user messages" in a.value.body["error"]["message"]


def test_a_body_over_the_cap_is_refused_in_the_routes_shape(server: str) -> None:
    port = int(server.rsplit(":", 1)[1])
    for path in ("/v1/messages", "/v1/chat/completions"):
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 999999999\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413")
        err = json.loads(body)
        if path == "/v1/messages":
            assert err["error"]["type"] == "request_too_large" and "over the limit" in err["error"]["message"]
        else:
            assert err["error"]["param"] == "Content-Length" and err["error"]["code"] == 413


def test_every_answer_says_the_model_is_synthetic(server: str) -> None:
    streamed = httpx.post(server + "/v1/messages", json={**OK_MSG, "stream": True}, timeout=60)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.text.startswith("event: message_start\n") and streamed.text.endswith("event: message_stop\n"
                                                                                         'data: {"type": '
                                                                                         '"message_stop"}\n\n')
    for r in (httpx.get(server + "/v1/models", timeout=60), httpx.get(server + "/health", timeout=60),
              httpx.post(server + "/v1/completions", json={"prompt": [1, 2], "max_tokens": 1}, timeout=60), streamed):
        assert r.status_code == 200 and r.headers[SYNTHETIC] == "tiny"
