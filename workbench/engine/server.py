"""`workbench serve-engine`: the local engine behind the OpenAI-compatible endpoints a serving engine
offers (the subset the remote adapter uses), for demos and for testing the adapter against a real
model: `GET /v1/models`, `POST /v1/completions` (prompt as token ids or text, greedy, usage with
`prompt_tokens_details.cached_tokens` = the tokens its radix KV cache served), `POST /tokenize`
(vLLM's shape). It binds to 127.0.0.1 unless told otherwise; one request runs at a time.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from ..errors import WorkbenchError
from .engine import Engine

MAX_BODY = 64 << 20
MAX_NEW_TOKENS = 64


class EngineServer:
    def __init__(self, engine: Engine, tokenizer: Any, *, host: str = "127.0.0.1", port: int = 0):
        self.engine, self.tokenizer = engine, tokenizer
        self.lock = threading.Lock()          # the engine and its cache serve one request at a time
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:   # quiet: the CLI prints the URL only
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, code: int, message: str) -> None:
                self._send(code, {"error": {"message": message, "type": "invalid_request_error", "code": code}})

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": outer.engine.m.name, "object": "model",
                                                                 "owned_by": "prompt-workbench",
                                                                 "max_model_len": outer.engine.m.window}]})
                else:
                    self._error(404, f"no route {self.path}")

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                if n > MAX_BODY:
                    return self._error(413, f"body over {MAX_BODY} bytes")
                try:
                    body = json.loads(self.rfile.read(n) or b"{}")
                    if not isinstance(body, dict):
                        raise ValueError("the body must be a JSON object")
                except ValueError as exc:
                    return self._error(400, f"not JSON: {exc}")
                route = self.path.rstrip("/")
                try:
                    with outer.lock:
                        if route == "/v1/completions":
                            return self._send(200, outer.complete(body))
                        if route == "/tokenize":
                            return self._send(200, outer.tokenize(body))
                except WorkbenchError as exc:
                    return self._error(400, str(exc))
                self._error(404, f"no route {self.path}")

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"

    def complete(self, body: dict) -> dict:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
            prompt = prompt[0]
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(i, int) and i >= 0 for i in prompt):
            ids = np.asarray(prompt, dtype=np.uint32)
        else:
            raise WorkbenchError("prompt: a string or a non-empty list of token ids")
        want = body.get("max_tokens", 16)
        if not isinstance(want, int) or not 0 <= want <= MAX_NEW_TOKENS:
            raise WorkbenchError(f"max_tokens: an integer from 0 to {MAX_NEW_TOKENS}")
        first = self.engine.prefill(ids)
        out: list[int] = []
        seq = ids
        report = first
        for _ in range(want):
            nxt = int(report.logits.argmax())
            out.append(nxt)
            seq = np.append(seq, np.uint32(nxt))
            if len(out) < want:
                report = self.engine.prefill(seq)     # reuses all of seq but the new token
        text = self.tokenizer.decode(out) if out else ""
        return {"id": f"cmpl-{uuid.uuid4().hex[:16]}", "object": "text_completion", "created": int(time.time()),
                "model": self.engine.m.name,
                "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": None}],
                "usage": {"prompt_tokens": len(ids), "completion_tokens": len(out), "total_tokens": len(ids) + len(out),
                          "prompt_tokens_details": {"cached_tokens": first.reused_tokens}}}

    def tokenize(self, body: dict) -> dict:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise WorkbenchError("prompt: a string")
        ids = self.tokenizer.encode(prompt)      # special-token strings become their ids, as vLLM does
        return {"tokens": [int(i) for i in ids], "count": len(ids), "max_model_len": self.engine.m.window}

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def start(self) -> "EngineServer":
        threading.Thread(target=self.serve_forever, name="workbench-engine-server", daemon=True).start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
