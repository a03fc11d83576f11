"""Server-sent events on the wire, and what the three chat APIs' replies share.

A stream is the answer's head (no Content-Length: the body ends when the connection closes, as every
answer of this server closes it), then one frame per event: `data: {json}` for Chat Completions,
`event: NAME` + `data: {json}` for Responses and Anthropic, each ended by a blank line.
"""

from __future__ import annotations

import json
import secrets
import string
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import ServeRequestError
from .chat_reply import ReplyEnd, Usage
from .tool_calls import ParsedReply

DONE = b"data: [DONE]\n\n"
Frame = bytes
_ALNUM = string.ascii_letters + string.digits


def data(obj: dict[str, Any]) -> Frame:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def event(name: str, obj: dict[str, Any]) -> Frame:
    return f"event: {name}\n".encode() + data(obj)


def stream_head(headers: dict[str, str]) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream; charset=utf-8", "Cache-Control: no-cache",
            "Connection: close", "X-Accel-Buffering: no", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def call_id_maker(family: str, prefix: str) -> Callable[[str | None], str]:
    """Names a tool call the model did not name. Mistral's templates accept only ids of nine letters
    and digits (the next request sends the id back through them), so that family gets those in every
    API; the others get the API's own prefix (call_, toolu_)."""
    def make(given: str | None) -> str:
        if given:
            return given
        if family == "mistral":
            return "".join(secrets.choice(_ALNUM) for _ in range(9))
        return new_id(prefix)
    return make


class ApiReply(Protocol):
    """One API's reply, built as the reply is generated. Each call returns the frames a stream sends
    for it; a non-streaming answer calls the same, drops the frames and sends `body()`."""

    def start(self, usage: Usage) -> list[Frame]: ...

    def delta(self, reasoning: str, content: str) -> list[Frame]: ...

    def finish(self, reply: ParsedReply, end: ReplyEnd, usage: Usage) -> list[Frame]: ...

    def body(self) -> dict[str, Any]: ...

    def error(self, exc: ServeRequestError) -> list[Frame]: ...


ANTHROPIC_TYPES = {400: "invalid_request_error", 404: "not_found_error", 413: "request_too_large",
                   408: "timeout_error", 500: "api_error", 503: "overloaded_error"}


def anthropic_error(exc: ServeRequestError) -> dict[str, Any]:
    """Anthropic's error shape: {"type": "error", "error": {"type", "message"}}."""
    return {"type": "error", "error": {"type": ANTHROPIC_TYPES.get(exc.status, "invalid_request_error"),
                                       "message": str(exc)}}
