"""An upstream for the recorder's tests: an aiohttp server on 127.0.0.1 in its own thread that
answers Chat Completions, Responses and Anthropic Messages calls, streamed (in each API's own
event format, one event per write) or not, and keeps what reached it: the path, the headers and
the body bytes exactly as they arrived. That is the oracle the recorder's log is checked against.

A test can hold a streamed reply after its first event (`gate`): the client then sees that event
before the upstream has sent the rest, which only a proxy that passes chunks on as they come can
show. `delay` makes every reply wait (for timeouts); `gone` is set when a client went away
mid-stream (the upstream's write failed or its handler was cancelled)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TEXT = ["Hel", "lo ", "there", "!"]


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Upstream:
    port: int = 0
    seen: list[Seen] = field(default_factory=list)
    delay: float = 0.0
    gate: threading.Event | None = None        # set: the streamed reply goes on after its first event
    gone: threading.Event = field(default_factory=threading.Event)
    hold_end: threading.Event | None = None    # set: the streamed reply ends (after its last event)
    usage_cached: int = 7
    counter: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def usage(api: str, cached: int) -> dict[str, Any]:
    if api == "chat":
        return {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34,
                "prompt_tokens_details": {"cached_tokens": cached}}
    if api == "responses":
        return {"input_tokens": 30, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": 4,
                "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 34}
    return {"input_tokens": 30 - cached, "output_tokens": 4, "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0}


def reply(api: str, model: str, n: int, cached: int) -> dict[str, Any]:
    text = "".join(TEXT)
    if api == "chat":
        return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1700000000 + n, "model": model,
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": text, "refusal": None}}],
                "usage": usage(api, cached)}
    if api == "responses":
        return {"id": f"resp_{n}", "object": "response", "created_at": 1700000000 + n, "model": model,
                "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "output": [{"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                "usage": usage(api, cached)}
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": usage(api, cached)}


def events(api: str, model: str, n: int, cached: int, include_usage: bool) -> list[bytes]:
    """The reply as its API streams it: one SSE event per element."""
    def data(obj: Any, name: str | None = None) -> bytes:
        return (f"event: {name}\n" if name else "").encode() + b"data: " + json.dumps(obj).encode() + b"\n\n"

    full = reply(api, model, n, cached)
    if api == "chat":
        head = {"id": full["id"], "object": "chat.completion.chunk", "created": full["created"], "model": model}
        out = [data({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                          "finish_reason": None}]})]
        out += [data({**head, "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]})
                for t in TEXT]
        out.append(data({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        if include_usage:
            out.append(data({**head, "choices": [], "usage": full["usage"]}))
        return out + [b"data: [DONE]\n\n"]
    if api == "responses":
        started = {**full, "status": "in_progress", "output": [], "usage": None}
        out = [data({"type": "response.created", "sequence_number": 0, "response": started}, "response.created")]
        out += [data({"type": "response.output_text.delta", "sequence_number": k + 1, "item_id": f"msg_{n}",
                      "output_index": 0, "content_index": 0, "delta": t, "logprobs": []},
                     "response.output_text.delta") for k, t in enumerate(TEXT)]
        out.append(data({"type": "response.output_item.done", "sequence_number": 9, "output_index": 0,
                         "item": full["output"][0]}, "response.output_item.done"))
        out.append(data({"type": "response.completed", "sequence_number": 10, "response": full},
                        "response.completed"))
        return out
    start = {**full, "content": [], "stop_reason": None,
             "usage": {**full["usage"], "output_tokens": 1}}
    out = [data({"type": "message_start", "message": start}, "message_start"),
           data({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                "content_block_start")]
    out += [data({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
                 "content_block_delta") for t in TEXT]
    out += [data({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            data({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                  "usage": {"output_tokens": 4}}, "message_delta"),
            data({"type": "message_stop"}, "message_stop")]
    return out


def _api(path: str) -> str:
    return "chat" if path.endswith("/chat/completions") else "responses" if path.endswith("/responses") \
        else "messages"


@contextmanager
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    loop = asyncio.new_event_loop()

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        up.seen.append(Seen(request.path_qs, dict(request.headers), body))
        up.counter += 1
        n = up.counter
        if up.delay:
            await asyncio.sleep(up.delay)
        if request.path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
        try:
            req = json.loads(body)
        except ValueError:
            return web.json_response({"error": {"message": "not JSON", "type": "invalid_request_error"}}, status=400)
        if not isinstance(req, dict):
            return web.json_response({"error": {"message": "not an object"}}, status=400)
        api, model = _api(request.path), str(req.get("model", "m"))
        if req.get("model") == "missing-model":
            return web.json_response({"error": {"message": "The model does not exist", "type": "invalid_request_error",
                                                "code": "model_not_found"}}, status=404)
        if not req.get("stream"):
            return web.json_response(reply(api, model, n, up.usage_cached))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        evs = events(api, model, n, up.usage_cached,
                     include_usage=bool((req.get("stream_options") or {}).get("include_usage")))
        try:
            for k, ev in enumerate(evs):
                await resp.write(ev)
                if k == 0 and up.gate is not None:
                    while not up.gate.is_set():
                        await asyncio.sleep(0.01)
            while up.hold_end is not None and not up.hold_end.is_set():
                await asyncio.sleep(0.01)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            up.gone.set()
            raise
        return resp

    async def start() -> web.AppRunner:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        up.port = runner.addresses[0][1]
        return runner

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield up
    finally:
        if up.gate is not None:
            up.gate.set()
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
