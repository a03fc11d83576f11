"""The keystroke path's own websocket (`workbench app`): the editor's operations in, the token
view's patches out, beside Panel's model sync.

Through Panel's model sync an operation is a property change (BokehJS serializes a document patch,
the server applies it and param runs its watchers) and a patch is a custom message that BokehJS
decodes and dispatches: each way costs milliseconds on every key. Here a key is one small text
frame in (a text edit travels as the change alone, a "splice") and one binary frame out (the patch:
its JSON part, then the token ids, ends and special flags as raw little-endian arrays).

Protocol: one socket per widget, at PATH on the app's own server.
  page -> server, text frames, each a JSON object:
    {"type": "hello", "token": T, "role": "editor" | "view"}     first, within HELLO_S
    editor: {"type": "op", "op": {..., "n": N}}   an editor operation (message_editor.js numbers them);
            {"op": "splice", "index", "field", "at", "remove", "text", "length"} replaces `remove`
            characters at `at` of a text field `length` long (UTF-16 units, as the page counts)
    view:   {"type": "sync"}                       send the whole view
  server -> page:
    {"type": "ready"}                              the hello was good
    {"type": "error", "code": C, "message": M}     a refused frame (ChannelError's codes); the socket
                                                   stays open, except after a bad hello
    view: binary frames, one patch each (encode_patch)

Who may use it: the handshake's Origin must be one of the app's own (the list Bokeh's websocket
checks too), and the first frame must carry the page's token: 32 random bytes made per page, handed
to it over Bokeh's own websocket, compared in constant time. Frames over MAX_FRAME are refused
with an error; over HARD_FRAME, Tornado closes the socket. Without this channel (a notebook, a
socket that does not open or closes) both widgets use the model sync, as they did before it.
"""

from __future__ import annotations

import hmac
import json
import secrets
import struct
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlparse

from .._optional import require
from ..errors import ChannelError
from ..strict_json import loads

_websocket = require("tornado.websocket", "the web app's keystroke channel")   # Tornado comes with Panel
IOLoop = require("tornado.ioloop").IOLoop
WebSocketClosedError, WebSocketHandler = _websocket.WebSocketClosedError, _websocket.WebSocketHandler
Matcher, Rule = require("tornado.routing").Matcher, require("tornado.routing").Rule
RequestHandler = require("tornado.web").RequestHandler

PATH = "/wb-channel"
MAX_FRAME = 8 * 1024 * 1024     # characters: a 1,000,000-character message, escaped, still fits
HARD_FRAME = 24 * 1024 * 1024   # bytes: Tornado closes the socket past this (code 1009)
HELLO_S = 10.0
# Bytes sent to one socket and not yet taken by its page: a page that asks for views and never
# reads them (a stalled or hostile client) is dropped at this, its buffers freed, instead of the
# server keeping every frame in memory. A whole view of the largest sample is a few MB.
SEND_CAP = 64 * 1024 * 1024
# How far ahead of the last applied operation a page's next one may be numbered. The page numbers
# its operations 1, 2, 3, ...; the model path drops a "set" that a later "set" of the same field
# replaced, so gaps happen, but only as many as the keys typed while the server was busy. An
# operation far ahead (2**70) would make every later one look old: refused instead.
OPS_AHEAD = 100_000
ROLES = ("editor", "view")
TEXT_FIELDS = ("content", "tool_call_id", "name")


class Endpoint(Protocol):
    """What a page's channel drives: the app behind it (app.py's AppEndpoint)."""

    def run(self, fn: Callable[[], None]) -> None: ...            # on the document's lock, in order
    def applied(self) -> int: ...                                 # the last operation number applied
    def text_of(self, index: int, field: str) -> Any: ...         # raises ChannelError(unknown-message)
    def apply_ops(self, ops: list[dict], received_at: float) -> None: ...
    def attach_view(self, send: Callable[[bytes], bool] | None) -> None: ...
    def resync_view(self) -> None: ...


# ------------------------------------------------------------------------------------- frames
def encode_patch(content: dict[str, Any], buffers: list[bytes]) -> bytes:
    """A patch as one binary frame: u32 length of the JSON part (padded with spaces so that the
    arrays after it start 4-byte aligned), the JSON (with "sizes" of the arrays), the arrays."""
    head = json.dumps({**content, "sizes": [len(b) for b in buffers]}, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")
    pad = -(4 + len(head)) % 4
    return struct.pack("<I", len(head) + pad) + head + b" " * pad + b"".join(buffers)


def decode_frame(data: str | bytes) -> dict[str, Any]:
    """A frame from the page as a JSON object with a "type", or ChannelError(bad-frame, too-large)."""
    if isinstance(data, bytes):
        raise ChannelError("bad-frame", "a binary frame from the page", hint="send a JSON object as text")
    if len(data) > MAX_FRAME:
        raise ChannelError("too-large", f"a frame of {len(data):,} characters (at most {MAX_FRAME:,})",
                           hint="paste long text in smaller parts")
    try:
        frame = loads(data, max_depth=20)
    except ValueError as exc:    # json.JSONDecodeError, and strict_json's JSONValueError (NaN, depth, ...)
        raise ChannelError("bad-frame", f"not JSON: {exc}", hint="send a JSON object") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise ChannelError("bad-frame", 'a frame is a JSON object with a "type"')
    return frame


def _count(op: dict, key: str) -> int:
    v = op.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ChannelError("bad-frame", f"splice: {key} must be a count, not {v!r}")
    return v


def expand_splice(op: dict, current: Any) -> dict[str, Any]:
    """A splice as the "set" of the field's whole new value. `current` is the field's text now; a
    length that does not match means the page edited something the server has not seen: out-of-sync
    (the page then sends the whole value)."""
    at, remove, length = _count(op, "at"), _count(op, "remove"), _count(op, "length")
    text, field = op.get("text"), op.get("field")
    if not isinstance(text, str) or field not in TEXT_FIELDS:
        raise ChannelError("bad-frame", f"splice: text must be a string and field one of {', '.join(TEXT_FIELDS)}")
    if at + remove > length:
        raise ChannelError("bad-frame", f"splice: at {at} + remove {remove} is past the length {length}")
    if current is None:
        current = ""
    if not isinstance(current, str):
        raise ChannelError("out-of-sync", f"messages[{op.get('index')}].{field} is not plain text here")
    units = current.encode("utf-16-le", "surrogatepass")
    if len(units) != 2 * length:
        raise ChannelError("out-of-sync", f"messages[{op.get('index')}].{field} is {len(units) // 2} units long "
                           f"here, not {length}", hint="send the whole value")
    value = (units[:2 * at] + text.encode("utf-16-le", "surrogatepass") + units[2 * (at + remove):]).decode(
        "utf-16-le", "surrogatepass")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ChannelError("bad-frame", "splice: it cuts a character in two (a lone surrogate)") from None
    return {"op": "set", "index": op.get("index"), "field": field, "value": value}


def error_frame(exc: ChannelError, **where: Any) -> str:
    """An error frame; `where` (index, field) lets the page answer an out-of-sync with the whole value."""
    return json.dumps({"type": "error", "code": exc.code, "message": str(exc), **where})


def op_in_sequence(n: int, applied: int) -> bool:
    """Whether an operation numbered `n` may follow the last applied one (an older one is
    answered by the caller: out-of-sync for a splice, ignored for a whole value)."""
    return n <= applied + OPS_AHEAD


# ------------------------------------------------------------------------------------- pages
class Channel:
    """One page's end: its token and the app it drives."""

    def __init__(self, endpoint: Endpoint):
        self.token = secrets.token_urlsafe(32)
        self.endpoint = endpoint
        self.view: ChannelSocket | None = None
        self.sockets: set[ChannelSocket] = set()
        self._sync_queued = False

    def receive(self, role: str, frame: dict[str, Any], reply: Callable[[str], None], received_at: float) -> None:
        kind = frame["type"]
        if role == "editor" and kind == "op":
            op = frame.get("op")
            n = op.get("n") if isinstance(op, dict) else None
            if not isinstance(n, int) or isinstance(n, bool):
                raise ChannelError("bad-frame", 'an "op" frame carries {"op": {"op": ..., "n": N}}')
            self.endpoint.run(lambda: self._apply(op, n, reply, received_at))
        elif role == "view" and kind == "sync":
            if not self._sync_queued:    # syncs asked faster than they are sent make one
                self._sync_queued = True
                self.endpoint.run(self._resync)
        else:
            raise ChannelError("bad-frame", f"unknown frame type {kind!r} for the {role}",
                               hint='the editor sends "op", the view "sync"')

    def _resync(self) -> None:
        self._sync_queued = False
        self.endpoint.resync_view()

    def _apply(self, op: dict, n: int, reply: Callable[[str], None], received_at: float) -> None:
        """On the document's lock, in arrival order."""
        try:
            if not op_in_sequence(n, self.endpoint.applied()):
                raise ChannelError("bad-frame", f"operation {n} is not the page's next (the last applied is "
                                   f"{self.endpoint.applied()})", hint="reload the page")
            if op.get("op") == "splice":
                if n <= self.endpoint.applied():
                    raise ChannelError("out-of-sync", f"operation {n} arrived after {self.endpoint.applied()}",
                                       hint="send the whole value")
                index = op.get("index")
                if not isinstance(index, int) or isinstance(index, bool):
                    raise ChannelError("bad-frame", f"splice: index must be a message number, not {index!r}")
                op = expand_splice(op, self.endpoint.text_of(index, str(op.get("field"))))
            self.endpoint.apply_ops([{**op, "n": n}], received_at)
        except ChannelError as exc:
            reply(error_frame(exc, index=op.get("index"), field=op.get("field")))

    def attach(self, socket: "ChannelSocket") -> None:
        self.sockets.add(socket)
        if socket.role == "view":
            old, self.view = self.view, socket
            if old is not None:
                old.close(1000, "another view took over")
            self.endpoint.run(lambda: self.endpoint.attach_view(socket.send_binary))

    def detach(self, socket: "ChannelSocket") -> None:
        self.sockets.discard(socket)
        if self.view is socket:
            self.view = None
            self.endpoint.run(lambda: self.endpoint.attach_view(None))

    def close(self) -> None:
        _CHANNELS.pop(self.token, None)
        for s in list(self.sockets):
            s.close(1001, "the page's session ended")


_CHANNELS: dict[str, Channel] = {}
_MOUNTED: list[bool] = [False]


def open_channel(endpoint: Endpoint) -> Channel | None:
    """A channel for a new page, if this server routes PATH (`handlers` was given to it)."""
    if not _MOUNTED[0]:
        return None
    ch = Channel(endpoint)
    _CHANNELS[ch.token] = ch
    return ch


def handlers(origins: list[str]) -> list[tuple[str, type, dict[str, Any]]]:
    """The Tornado route to give the app's server (`extra_patterns`); `origins` as Bokeh's
    `websocket_origin` ("host:port", or "*:port" for any host)."""
    _MOUNTED[0] = True
    return [(PATH, ChannelSocket, {"origins": [o.lower() for o in origins]})]


def _parses(origin: str) -> bool:
    try:
        return urlparse(origin).port is not None or True     # .port raises on a bad port
    except ValueError:
        return False


class _MalformedOrigin(Matcher):  # type: ignore[misc]
    """Requests whose Origin header does not parse ("http://[::1", a port past 65535)."""

    def match(self, request: Any) -> dict[str, Any] | None:
        origin = request.headers.get("Origin")
        return {} if origin is not None and not _parses(origin) else None


class _Refused(RequestHandler):  # type: ignore[misc]
    def prepare(self) -> None:
        self.set_status(403)
        self.finish("a malformed Origin header")


def refuse_malformed_origins(app: Any) -> None:
    """Answer a request with a malformed Origin with 403 before any handler sees it: Tornado's
    websocket handlers (Bokeh's /ws, this channel) parse the Origin themselves before their
    check_origin and raise on it (an HTTP 500 and a traceback in the log; still refused, but a
    request must not reach an unhandled error). `app` is the server's Tornado Application."""
    app.default_router.rules.insert(0, Rule(_MalformedOrigin(), _Refused))


def _origin_allowed(origin: str, allowed: list[str]) -> bool:
    try:      # a malformed Origin ("http://[::1", a port past 65535 or not a number) is refused (403)
        url = urlparse(origin)
        port = url.port
    except ValueError:
        return False
    if url.scheme not in ("http", "https") or not url.hostname:
        return False
    port = port or (443 if url.scheme == "https" else 80)
    host = url.hostname.lower()    # an IPv6 address: as the app lists it ("::1:PORT") or bracketed
    return any(f"{h}:{port}" in allowed for h in (host, f"[{host}]", "*"))


class ChannelSocket(WebSocketHandler):  # type: ignore[misc]
    """One widget's socket: a hello with the page's token first, then frames for its role."""

    def initialize(self, origins: list[str]) -> None:
        self.origins = origins
        self.channel: Channel | None = None
        self.role = ""
        self._timer: object | None = None
        self.pending = 0         # bytes written and not yet taken by the page (SEND_CAP)

    @property
    def max_message_size(self) -> int:
        return HARD_FRAME

    def check_origin(self, origin: str) -> bool:
        return _origin_allowed(origin, self.origins)

    def open(self, *args: Any, **kwargs: Any) -> None:
        self.set_nodelay(True)
        self._timer = IOLoop.current().call_later(HELLO_S, self._no_hello)

    def _no_hello(self) -> None:
        if self.channel is None:
            self.close(1008, "no hello")

    def on_message(self, message: str | bytes) -> None:
        received_at = time.time()
        try:
            frame = decode_frame(message)
            if self.channel is None:
                self._hello(frame)
            else:
                self.channel.receive(self.role, frame, self._reply, received_at)
        except ChannelError as exc:
            self._reply(error_frame(exc))
            if self.channel is None:
                self.close(1008, exc.code)

    def _hello(self, frame: dict[str, Any]) -> None:
        token, role = frame.get("token"), frame.get("role")
        ch = _CHANNELS.get(token) if frame["type"] == "hello" and isinstance(token, str) else None
        # Constant time on the token we hold (the dict lookup found it by hash; this says it is the same).
        if ch is None or not hmac.compare_digest(ch.token, token) or role not in ROLES:
            raise ChannelError("unauthorized", "the first frame must be a hello with this page's token and a role",
                               hint="reload the page")
        if self._timer is not None:
            IOLoop.current().remove_timeout(self._timer)
        self.channel, self.role = ch, str(role)
        ch.attach(self)
        self._reply(json.dumps({"type": "ready"}))

    def _reply(self, text: str) -> None:
        self._send(text, binary=False)

    def send_binary(self, data: bytes) -> bool:
        """False once the socket is gone (the caller then uses the model sync)."""
        return self._send(data, binary=True)

    def _send(self, data: str | bytes, *, binary: bool) -> bool:
        """Write a frame unless the page has SEND_CAP bytes it has not taken: then it is dropped."""
        size = len(data)
        if self.pending + size > SEND_CAP:
            self.close(1008, "the page does not read what it is sent")
            return False
        try:
            done = self.write_message(data, binary=binary)
        except WebSocketClosedError:
            return False
        self.pending += size

        def taken(f: Any) -> None:
            self.pending -= size
            if not f.cancelled():
                f.exception()    # a socket closed under it: retrieved here, not logged as never retrieved
        done.add_done_callback(taken)
        return True

    def on_close(self) -> None:
        if self.channel is not None:
            self.channel.detach(self)
