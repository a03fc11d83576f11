"""Reading Redis replies with a byte cap and an overall deadline, below redis-py's parser.

Socket timeouts bound each `recv`, not a call: a server that sends one byte every 30 ms never
trips a 50 ms timeout and can hold a caller for minutes; and redis-py reads whatever length a
bulk reply declares, so a 500 MB value arrives whole before anyone can look at it. The parser
here (handed to redis-py as `parser_class`, so it works under every connection class: TCP,
TLS, Unix socket) refuses both at the source:

- a bulk reply that declares more than `max_value_bytes` is refused before one byte of it is
  read; any reply (a line without an end, a long array) stops once it has brought
  `max_value_bytes` + a small allowance from the socket, and no `recv` asks for more than that;
- while a `bounded_call(deadline_s)` is open on the calling thread, every `recv` waits at most
  until the deadline, so connect handshake, command and reply together end by then.

Both raise a subclass of redis-py's ConnectionError, so the connection is dropped (its stream
is mid-reply) and the caller's error handling applies. This module imports redis: import it
only when a Redis tier is configured.
"""

from __future__ import annotations

import builtins
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from io import SEEK_END
from typing import Any, cast

from redis._parsers.encoders import Encoder
from redis._parsers.resp2 import _RESP2Parser
from redis._parsers.socket import (
    NONBLOCKING_EXCEPTION_ERROR_NUMBERS,
    NONBLOCKING_EXCEPTIONS,
    SERVER_CLOSED_CONNECTION_ERROR,
    SocketBuffer,
)
from redis.exceptions import ConnectionError, InvalidResponse, TimeoutError
from redis.utils import SENTINEL

# What a reply may bring beyond the value itself: its `$<length>\r\n` header and `\r\n`, and the
# handshake's short status lines. Anything larger is not a reply to GET or SET.
REPLY_ALLOWANCE = 4096
# GET and SET never answer with an array; the handshake in RESP2 neither. A few small levels are
# tolerated so that an unexpected but honest reply is an error message, not a refusal to read.
MAX_ARRAY_ITEMS = 64
MAX_ARRAY_DEPTH = 4


class ReplyTooLarge(ConnectionError):
    """The server sent, or announced, more than the value cap."""


class DeadlineExceeded(ConnectionError):
    """The call outlived its overall deadline (however the server paced its bytes)."""


class _Call(threading.local):
    deadline: float = 0.0  # time.monotonic() by which the current call must end; 0: none open


_call = _Call()


@contextmanager
def bounded_call(deadline_s: float) -> Iterator[None]:
    """Every socket read this thread makes inside the block ends by now + `deadline_s`."""
    outer = _call.deadline
    _call.deadline = time.monotonic() + deadline_s
    try:
        yield
    finally:
        _call.deadline = outer


class BoundedSocketBuffer(SocketBuffer):
    """redis-py's SocketBuffer whose only reader, `_read_from_socket`, counts and times every byte."""

    def __init__(self, sock: socket.socket, socket_read_size: int, socket_timeout: float | None,
                 max_reply_bytes: int):
        # redis-py annotates socket_timeout as float, but its own parsers pass the connection's
        # socket_timeout, which is None for "no timeout" (socket.settimeout takes None).
        super().__init__(sock, socket_read_size, socket_timeout)  # type: ignore[arg-type]
        self.max_reply_bytes = max_reply_bytes
        self.received = 0   # bytes taken from the socket for the reply being read

    def _read_from_socket(self, length: int | None = None, timeout: Any = SENTINEL,
                          raise_on_timeout: bool | None = True) -> bool:
        custom = timeout is not SENTINEL    # can_read() polls with 0; reads use the socket timeout
        sock, buf = self._sock, self._buffer
        start = buf.tell()
        buf.seek(0, SEEK_END)
        deadline = _call.deadline
        marker = 0
        try:
            while True:
                wait = timeout if custom else self.socket_timeout
                if deadline and wait != 0:      # 0 is a non-blocking poll: it cannot overstay
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise DeadlineExceeded("the Redis call passed its deadline while reading the reply")
                    wait = left if wait is None else min(wait, left)
                sock.settimeout(wait)
                room = self.max_reply_bytes - self.received
                if room <= 0:
                    raise ReplyTooLarge(f"the Redis reply is over {self.max_reply_bytes} bytes")
                data = sock.recv(min(self.socket_read_size, room))
                if not data:
                    raise ConnectionError(SERVER_CLOSED_CONNECTION_ERROR)
                buf.write(data)
                marker += len(data)
                self.received += len(data)
                if length is not None and length > marker:
                    continue
                return True
        except builtins.TimeoutError:
            if deadline and time.monotonic() >= deadline:
                raise DeadlineExceeded("the Redis call passed its deadline while reading the reply") from None
            if raise_on_timeout:
                raise TimeoutError("Timeout reading from socket") from None
            return False
        except NONBLOCKING_EXCEPTIONS as ex:
            allowed = NONBLOCKING_EXCEPTION_ERROR_NUMBERS.get(ex.__class__, -1)
            if ex.errno == allowed:
                if not raise_on_timeout:
                    return False
                if timeout == 0:
                    raise TimeoutError("Timeout reading from socket") from None
            raise ConnectionError(f"Error while reading from socket: {ex.args}") from None
        finally:
            buf.seek(start)
            sock.settimeout(self.socket_timeout)


def _integer(line: bytes, what: str) -> int:
    # int() would take ' 5', '+5', '5_0' and 4,300 digits; RESP numbers are an optional '-' and
    # at most 19 ASCII digits (a signed 64-bit integer).
    digits = line[1:] if line[:1] == b"-" else line
    if not digits.isdigit() or len(digits) > 19:
        raise InvalidResponse(f"Protocol Error: bad {what} {line[:40]!r}")
    return int(line)


def _length(line: bytes, what: str) -> int:
    n = _integer(line, f"{what} length")
    if n < -1:
        raise InvalidResponse(f"Protocol Error: bad {what} length {n}")
    return n


class BoundedRESP2Parser(_RESP2Parser):
    """redis-py's RESP2 parser with the value cap applied to what a reply declares and brings.

    `max_value_bytes` is set on a subclass per Redis tier (`bounded_parser`).
    """

    max_value_bytes = 64 << 20
    max_array_items = MAX_ARRAY_ITEMS
    max_array_depth = MAX_ARRAY_DEPTH
    gauge: Any = None           # the tier's ConnectionGauge (redis_pool.py): counts what connects
    _counted = False            # this parser's connection is counted open in the gauge

    def on_connect(self, connection: Any) -> None:
        super().on_connect(connection)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
        # on_connect has just set the socket (redis-py's attributes are typed "None until connected").
        sock = cast(socket.socket, self._sock)
        self._buffer = BoundedSocketBuffer(sock, self.socket_read_size, connection.socket_timeout,
                                           self.max_value_bytes + REPLY_ALLOWANCE)
        if self.gauge is not None and not self._counted:
            self._counted = True
            self.gauge.connected()

    def on_disconnect(self) -> None:
        super().on_disconnect()  # type: ignore[no-untyped-call]
        # (redis-py disconnects a connection more than once: on an error, on release, when collected)
        if self._counted:
            self._counted = False
            self.gauge.disconnected()

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self._buffer, BoundedSocketBuffer):
            self._buffer.received = 0   # the byte cap is per reply
        return super().read_response(*args, **kwargs)

    def _read_response(self, disable_decoding: bool = False, timeout: Any = SENTINEL, _depth: int = 0) -> Any:
        # Connected: redis-py's read_response refuses a parser without a buffer before calling this.
        buffer = cast(SocketBuffer, self._buffer)
        raw = buffer.readline()
        if not raw:
            raise ConnectionError(SERVER_CLOSED_CONNECTION_ERROR)
        byte = raw[:1]
        response: Any = raw[1:]     # the rest of the line; then the value it announces (bytes, int, list)
        if byte == b"-":
            # redis-py leaves parse_error unannotated; it returns a ResponseError (a subclass per code).
            error = self.parse_error(response.decode("utf-8", errors="replace"))  # type: ignore[no-untyped-call]
            if isinstance(error, ConnectionError):
                raise error
            return error
        if byte == b"+":
            pass
        elif byte == b":":
            return _integer(response, "integer")
        elif byte == b"$":
            n = _length(response, "bulk")
            if n == -1:
                return None
            if n > self.max_value_bytes:
                # Refused on the announcement: none of the value is read (the connection is dropped).
                raise ReplyTooLarge(f"the Redis reply announces {n} bytes, over the {self.max_value_bytes}-byte "
                                    "value cap")
            response = buffer.read(n)
        elif byte == b"*":
            n = _length(response, "array")
            if n == -1:
                return None
            if n > self.max_array_items or _depth >= self.max_array_depth:
                raise InvalidResponse(f"Protocol Error: an array of {n} items at depth {_depth} "
                                      "is not a reply to GET or SET")
            response = [self._read_response(disable_decoding, timeout, _depth + 1) for _ in range(n)]
        else:
            raise InvalidResponse(f"Protocol Error: {raw[:40]!r}")
        if disable_decoding is False:
            # Connected, so the encoder is set; redis-py leaves Encoder.decode unannotated.
            response = cast(Encoder, self.encoder).decode(response)  # type: ignore[no-untyped-call]
        return response


def bounded_parser(max_value_bytes: int, max_array_items: int = MAX_ARRAY_ITEMS,
                   max_array_depth: int = MAX_ARRAY_DEPTH, gauge: Any = None) -> type[BoundedRESP2Parser]:
    """A parser class for one Redis tier: redis-py builds one instance per connection. `gauge`
    (a redis_pool.ConnectionGauge) counts the connections as they open and close."""
    return type("BoundedRESP2Parser", (BoundedRESP2Parser,),
                {"max_value_bytes": max_value_bytes, "max_array_items": max_array_items,
                 "max_array_depth": max_array_depth, "gauge": gauge})


def bounded_connection(max_value_bytes: int, *, tls: bool = False, max_array_items: int = MAX_ARRAY_ITEMS,
                       max_array_depth: int = MAX_ARRAY_DEPTH, gauge: Any = None) -> type[Any]:
    """A redis-py connection class with the bounded parser whose connect ends by the open call's
    deadline. A cluster client opens connections inside a call (to the node a MOVED names, to each
    startup node when it reads the topology again); each must fit in what is left of the deadline,
    not take a fresh connect timeout of its own."""
    from redis.connection import Connection, SSLConnection

    parser = bounded_parser(max_value_bytes, max_array_items, max_array_depth, gauge)
    base: type[Any] = SSLConnection if tls else Connection

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["parser_class"] = parser
        base.__init__(self, *args, **kwargs)

    def _connect(self: Any) -> Any:
        deadline = _call.deadline
        if not deadline:
            return base._connect(self)
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded("the Redis call passed its deadline before connecting")
        saved = self.socket_connect_timeout
        self.socket_connect_timeout = left if saved is None else min(saved, left)
        try:
            return base._connect(self)
        finally:
            self.socket_connect_timeout = saved

    return type("BoundedConnection", (base,), {"__init__": __init__, "_connect": _connect})
