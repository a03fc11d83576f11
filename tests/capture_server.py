"""A local HTTP server that records what a client sends, for tests driving the official SDKs.

It binds to 127.0.0.1 on a free port, keeps every request body (path, JSON) in order, and answers
Chat Completions, Responses and Anthropic Messages calls with a minimal valid reply, so the SDKs
(`openai`, `anthropic`) return normally. What it records is exactly the JSON the SDK put on the
wire: the input the workbench must read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE_OPENAI = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def _reply(path: str, body: dict[str, Any]) -> dict[str, Any]:
    model = body.get("model", "m")
    if path.endswith("/chat/completions"):
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "ok"}}], "usage": USAGE_OPENAI}
    if path.endswith("/responses"):
        return {"id": "resp_1", "object": "response", "created_at": 0, "model": model, "status": "completed",
                "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}}}
    if path.endswith("/messages"):
        return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1}}
    raise KeyError(path)


class Capture:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def last(self, path_end: str) -> dict[str, Any]:
        with self.lock:
            return next(b for p, b in reversed(self.calls) if p.endswith(path_end))


@contextmanager
def capture_server() -> Iterator[Capture]:
    cap = Capture()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
            path = self.path.split("?")[0]
            with cap.lock:
                cap.calls.append((path, body))
            try:
                data = json.dumps(_reply(path, body)).encode()
                status = 200
            except KeyError:
                data, status = b'{"error": {"message": "not found"}}', 404
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    cap.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield cap
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
