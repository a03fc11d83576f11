"""HTTP/1.1 on the wire for `serve-engine`: read one request under limits and deadlines, and write
one answer. Read by asyncio, so a client that connects and stalls costs a socket and a coroutine,
never a thread; only a complete request goes on to the worker pool.

Deliberately small: one request per connection (every answer says `Connection: close`), bodies
sized by `Content-Length` only (no chunked bodies), and every way a request can be malformed is a
`ServeRequestError` with its status, never an exception out of the connection.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from ..errors import ServeRequestError
from .server_limits import ServerLimits

_REQUEST_LINE = re.compile(rb"([A-Z]{1,16}) (\S{1,8000}) HTTP/(\d)\.(\d)")
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_DIGITS = re.compile(r"[0-9]{1,18}")
BODY_PIECE = 64 << 10


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str                                   # without the query string
    headers: dict[str, str] = field(default_factory=dict)   # lower-case names
    body: bytes = b""


class ClientGone(Exception):
    """The client closed the connection before sending a request: nothing to answer."""


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       limits: ServerLimits, on_path: Callable[[str], None] | None = None) -> HttpRequest:
    """One request, or ServeRequestError (with `.status`) saying what was wrong with it. The caller
    bounds the whole call by `limits.request_deadline_s`; each read here waits at most
    `limits.read_timeout_s`. `on_path(path)` learns the path as soon as the request line is read, so
    that a refusal of the rest (a body too large) can answer in the route's own error shape."""
    line = b""
    for _ in range(4):          # RFC 9112 2.2: ignore empty lines before the request line
        line = await _line(reader, limits, first=True)
        if line.strip():
            break
    else:
        raise ServeRequestError("no request line, only empty lines", status=400)
    m = _REQUEST_LINE.fullmatch(line.rstrip(b"\r\n"))
    if m is None:
        raise ServeRequestError("malformed request line: expected METHOD /path HTTP/1.1, got "
                                f"{_show(line)}", status=400)
    method, target = m.group(1).decode(), m.group(2).decode("latin-1")
    if on_path is not None:
        on_path(target.split("?", 1)[0])
    if (m.group(3), m.group(4)) not in ((b"1", b"0"), (b"1", b"1")):
        raise ServeRequestError(f"HTTP/{m.group(3).decode()}.{m.group(4).decode()} is not supported: "
                                "speak HTTP/1.1", status=505)
    headers = await _headers(reader, limits, len(line))
    length = _content_length(headers, method)
    if length > limits.max_body_bytes:
        raise ServeRequestError(f"the body is {length} bytes, over the limit of {limits.max_body_bytes}",
                                status=413, param="Content-Length",
                                hint="send a shorter prompt, or start the server with a larger --max-body-mb")
    if headers.get("expect", "").lower() == "100-continue":
        # curl asks before sending a body over 1 KiB; say yes only once the size is known to be fine
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    elif "expect" in headers:
        raise ServeRequestError(f"Expect: {headers['expect']!r} is not supported", status=417, param="Expect")
    body = await _body(reader, limits, length)
    return HttpRequest(method, target.split("?", 1)[0], headers, body)


async def _line(reader: asyncio.StreamReader, limits: ServerLimits, *, first: bool = False) -> bytes:
    try:
        line = await asyncio.wait_for(reader.readline(), limits.read_timeout_s)
    except TimeoutError:
        raise ServeRequestError(f"no complete {'request' if first else 'header'} line within "
                                f"{limits.read_timeout_s:g} s", status=408) from None
    except ValueError:           # the StreamReader's limit: one line longer than all headers may be
        raise ServeRequestError(f"a header line is longer than {limits.max_header_bytes} bytes",
                                status=431) from None
    if not line.endswith(b"\n"):
        if first and not line:
            raise ClientGone()
        raise ServeRequestError("the connection ended inside the request headers", status=400)
    return line


async def _headers(reader: asyncio.StreamReader, limits: ServerLimits, used: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    count = 0
    while True:
        line = await _line(reader, limits)
        used += len(line)
        if used > limits.max_header_bytes:
            raise ServeRequestError(f"the request line and headers are over {limits.max_header_bytes} bytes",
                                    status=431)
        raw = line.rstrip(b"\r\n")
        if not raw:
            return headers
        count += 1
        if count > limits.max_headers:
            raise ServeRequestError(f"more than {limits.max_headers} header lines", status=431)
        if raw[:1] in (b" ", b"\t"):
            raise ServeRequestError("folded header lines (starting with a space) are not accepted", status=400)
        name, sep, value = raw.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise ServeRequestError(f"malformed header line {_show(raw)}: expected Name: value", status=400)
        key = name.decode("ascii").lower()
        text = value.strip().decode("latin-1")
        if key == "content-length" and key in headers and headers[key] != text:
            # two different lengths: the classic request-smuggling ambiguity
            raise ServeRequestError(f"two different Content-Length headers ({headers[key]!r}, {text!r})",
                                    status=400, param="Content-Length")
        headers[key] = text


def _content_length(headers: dict[str, str], method: str) -> int:
    if "transfer-encoding" in headers:
        raise ServeRequestError(f"Transfer-Encoding: {headers['transfer-encoding']!r} is not accepted",
                                status=411, param="Transfer-Encoding", hint="send the body with a Content-Length")
    raw = headers.get("content-length")
    if raw is None:
        if method == "POST":
            raise ServeRequestError("a POST needs a Content-Length header", status=411, param="Content-Length")
        return 0
    if not _DIGITS.fullmatch(raw):
        raise ServeRequestError(f"{raw[:40]!r} is not a number of bytes", status=400, param="Content-Length",
                                hint="send the body's length in bytes as a decimal integer")
    return int(raw)


async def _body(reader: asyncio.StreamReader, limits: ServerLimits, length: int) -> bytes:
    parts: list[bytes] = []
    got = 0
    while got < length:
        # piece by piece, so the read timeout is an idle timeout: a slow honest upload keeps going
        try:
            piece = await asyncio.wait_for(reader.read(min(BODY_PIECE, length - got)), limits.read_timeout_s)
        except TimeoutError:
            raise ServeRequestError(f"the body stalled after {got} of {length} bytes: nothing for "
                                    f"{limits.read_timeout_s:g} s", status=408) from None
        if not piece:
            raise ServeRequestError(f"the body ended after {got} of the {length} bytes Content-Length "
                                    "announced", status=400, param="Content-Length")
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)


def answer(status: int, body: dict[str, Any], *, headers: dict[str, str] | None = None) -> bytes:
    """The bytes of a whole JSON answer; every one closes the connection."""
    data = json.dumps(body).encode()
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Error"
    head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json", f"Content-Length: {len(data)}",
            "Connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data


def error_body(exc: ServeRequestError) -> dict[str, Any]:
    """OpenAI's error shape (vLLM's too): {"error": {"message", "type", "param", "code"}}."""
    return {"error": {"message": str(exc), "type": exc.type, "param": exc.param, "code": exc.status}}


def _show(raw: bytes) -> str:
    return repr(raw[:60].decode("latin-1")) + ("…" if len(raw) > 60 else "")
