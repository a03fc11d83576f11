"""`workbench record`: a recording reverse proxy for Chat Completions, Responses and Anthropic
Messages (docs/capture.md).

Built on aiohttp, one library for both sides: its server parses what clients send (bounded header
lines, header counts and body sizes), its client streams the upstream's reply, and both run on one
event loop, so a streamed reply goes on to the client chunk by chunk as it arrives, and a client
that goes away cancels its handler, which closes the upstream call (`handler_cancellation`).

Everything is passed on as the client sent it, bar the hop-by-hop headers and Accept-Encoding (the
upstream is asked for an uncompressed reply, which the recorder can read as it passes). Each call
to one of the three APIs appends one line to the log once it ends (log_line.py); the credentials
(Authorization, x-api-key, api-key, cookies) go upstream and are never written anywhere."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientError, ClientSession, ClientTimeout, TCPConnector, web
from multidict import CIMultiDict
from yarl import URL

from ..errors import LogFileError, WorkbenchError
from ..redact import redact_url
from . import apis
from .conversations import Conversations
from .log_line import log_line, utc_timestamp
from .log_writer import LogWriter
from .sse import ASSEMBLERS, EventDecoder, StreamAssembler

HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding",
                        "content-encoding"))
HEALTH = "/__workbench__/health"     # the recorder's own: its counters, for readiness and monitoring
CLIENT_HEADER = "x-workbench-client"
LOGGED_RESPONSE_CAP = 64 << 20       # a reply larger than this passes through whole but is logged without it


class RecordError(WorkbenchError):
    """`workbench record` cannot start as configured."""


@dataclass(frozen=True)
class RecordConfig:
    upstream: str                        # scheme://host[:port][/prefix]: the request's path is appended
    log: str
    host: str = "127.0.0.1"
    port: int = 8080
    provider: str | None = None          # `provider` in each line; by default from the upstream's host
    max_body_bytes: int = 32 << 20       # requests (images as base64 make them large)
    connect_timeout: float = 10.0
    read_timeout: float = 600.0          # between two pieces of the upstream's reply (a model may think long)
    body_timeout: float = 60.0           # for a client to send its whole request body
    max_inflight: int = 256              # calls in progress; past it, 503 at once
    rotate_bytes: int = 256 << 20
    backups: int = 5

    def __post_init__(self) -> None:
        u = urlsplit(self.upstream)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise RecordError(f"--upstream {redact_url(self.upstream)!r}: not an http(s) URL",
                              hint="give the provider's or engine's root, e.g. https://api.openai.com")
        if self.max_body_bytes <= 0 or self.max_inflight <= 0:
            raise RecordError("--max-body-mb and --max-inflight must be positive")


@dataclass
class Stats:
    calls: int = 0                 # lines written for calls to the three APIs
    passed: int = 0                # other requests passed through (model lists, files, ...)
    counts: Counter[str] = field(default_factory=Counter)   # bad bodies, refusals, upstream failures, ...

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "passed": self.passed, **dict(sorted(self.counts.items()))}


class Recorder:
    def __init__(self, config: RecordConfig, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.writer = LogWriter(config.log, max_bytes=config.rotate_bytes, backups=config.backups)
        self.conversations = Conversations()
        self.stats = Stats()
        self._clock = clock
        self._inflight = 0
        self._session: ClientSession | None = None
        u = urlsplit(config.upstream)
        self._base = config.upstream.rstrip("/")
        self._provider = config.provider or apis.HOSTS.get(u.hostname or "")

    # ------------------------------------------------------------------ the aiohttp application
    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.max_body_bytes)
        app.router.add_get(HEALTH, self._health)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, app: web.Application) -> None:
        # No pool-wide total timeout (a streamed reply may run long); connect and the gap between
        # two reads are bounded. auto_decompress: the reply reaches the client decoded, its
        # Content-Encoding dropped (the upstream was asked for none anyway).
        self._session = ClientSession(
            timeout=ClientTimeout(total=None, sock_connect=self.config.connect_timeout,
                                  connect=self.config.connect_timeout, sock_read=self.config.read_timeout),
            connector=TCPConnector(limit=self.config.max_inflight), auto_decompress=True, trust_env=False)

    async def _stop(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()
        self.writer.close()

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"upstream": self._base, "log": self.config.log, **self.stats.to_json()})

    # ------------------------------------------------------------------ one call
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self._inflight >= self.config.max_inflight:
            self.stats.counts["refused_busy"] += 1
            return _error(503, "overloaded", f"{self._inflight} calls in progress (--max-inflight)")
        self._inflight += 1
        try:
            return await self._proxy(request)
        finally:
            self._inflight -= 1

    async def _proxy(self, request: web.Request) -> web.StreamResponse:
        if not request.raw_path.startswith("/"):
            # An absolute or authority-form target ("GET http://elsewhere/ ..."; "@host/x" appended
            # to the upstream would name another host): only paths go on to the one upstream.
            self.stats.counts["bad_target"] += 1
            return _error(400, "bad_request_target", "the request target must be a path starting with /")
        started = self._clock()
        stamp = utc_timestamp(started)
        api = apis.api_of(request.method, request.path)
        try:
            body = await asyncio.wait_for(request.read(), self.config.body_timeout)
        except web.HTTPRequestEntityTooLarge:
            self.stats.counts["too_large"] += 1
            self._bad(stamp, api, request, "the body is over --max-body-mb", status=413)
            return _error(413, "request_too_large", f"the body is over {self.config.max_body_bytes} bytes",
                          hint="raise --max-body-mb")
        except TimeoutError:
            self.stats.counts["slow_client"] += 1
            self._bad(stamp, api, request, f"the body took over {self.config.body_timeout:g} s to arrive",
                      status=408)
            return _error(408, "request_timeout", "the request body did not arrive in time")

        parsed: dict[str, Any] | None = None
        if api is not None:
            problem: str | None
            try:
                value = json.loads(body)
                problem = apis.request_problem(api, value)
            except (ValueError, UnicodeDecodeError) as exc:
                problem = f"the body is not JSON ({exc})"
            if problem is None:
                parsed = value
            else:
                self.stats.counts["bad_body"] += 1
                self._bad(stamp, api, request, problem, size=len(body))
        else:
            self.stats.passed += 1

        cid, how = ("", "")
        if parsed is not None and api is not None:
            cid, how = self.conversations.identify(api, parsed, request.headers)
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP)
        url = URL(self._base + request.raw_path, encoded=True)    # the path and query as the client sent them
        assert self._session is not None
        assembler: StreamAssembler | None = None
        decoder: EventDecoder | None = None
        kept: list[bytes] | None = [] if parsed is not None else None
        kept_size = 0
        out: web.StreamResponse | None = None
        status: int | None = None
        error: str | None = None
        first_byte: float | None = None
        length: int | None = None        # the upstream's Content-Length, when it sent one
        delivered = False                # the client has been sent a whole reply (its last event or byte)
        try:
            async with self._session.request(request.method, url, headers=headers, data=body,
                                             allow_redirects=False) as up:
                status = up.status
                out = web.StreamResponse(status=up.status, reason=up.reason)
                for k, v in up.headers.items():
                    if k.lower() not in HOP_BY_HOP:
                        out.headers.add(k, v)
                streamed = up.content_type == "text/event-stream"
                length = up.content_length
                if parsed is not None and api is not None and streamed:
                    assembler, decoder, kept = ASSEMBLERS[api](), EventDecoder(), None
                await out.prepare(request)
                async for chunk in up.content.iter_any():
                    if first_byte is None:
                        first_byte = self._clock()
                    if decoder is not None and assembler is not None:
                        for ev in decoder.feed(chunk):
                            assembler.add(ev)
                    elif kept is not None:
                        kept_size += len(chunk)
                        if kept_size <= LOGGED_RESPONSE_CAP:
                            kept.append(chunk)
                    await out.write(chunk)
                    delivered = _whole(assembler, length, kept_size)
                if decoder is not None and assembler is not None:
                    for ev in decoder.close():
                        assembler.add(ev)
                delivered = _whole(assembler, length, kept_size)     # every chunk is written by now
                await out.write_eof()
        except asyncio.CancelledError:
            # The client went away: leaving the `async with` closed the upstream call. Logged, then
            # the cancellation goes on. An SDK closes its connection as soon as it has read the
            # stream's last event ([DONE], message_stop, response.completed) or the whole body,
            # which may be before the upstream's end reaches here: that reply is whole.
            if not delivered:
                self.stats.counts["client_gone"] += 1
            if parsed is not None and api is not None:
                self._log(cid, how, stamp, started, first_byte, api, parsed, status, assembler, kept,
                          kept_size, request,
                          error=None if delivered else "the client went away before the reply ended")
            raise
        except (ConnectionResetError, ClientError, TimeoutError) as exc:
            if delivered and isinstance(exc, ConnectionResetError):
                # The same race seen from the other side: the SDK closed after the last event while
                # the rest (the chunked body's end) was being written. The client has its reply.
                if parsed is not None and api is not None:
                    self._log(cid, how, stamp, started, first_byte, api, parsed, status, assembler, kept,
                              kept_size, request, error=None)
                assert out is not None
                return out
            error = redact_url(_describe(exc))     # an upstream URL with credentials is never echoed
            kind = "upstream_timeout" if isinstance(exc, TimeoutError) else \
                "client_gone" if isinstance(exc, ConnectionResetError) else "upstream_error"
            self.stats.counts[kind] += 1
            if out is None or not out.prepared:
                resp = _error(504 if kind == "upstream_timeout" else 502, kind, f"{redact_url(self._base)}: {error}")
                status = resp.status
                if parsed is not None and api is not None:
                    self._log(cid, how, stamp, started, first_byte, api, parsed, status, None, None, 0,
                              request, error=error)
                return resp
            # Mid-reply: the status is sent. Closing the connection tells the client the reply was
            # cut (an ended chunked body would read as a whole one).
            if request.transport is not None:
                request.transport.close()
        if parsed is not None and api is not None:
            self._log(cid, how, stamp, started, first_byte, api, parsed, status, assembler, kept, kept_size,
                      request, error=error)
        assert out is not None
        return out

    # ------------------------------------------------------------------ the log
    def _log(self, cid: str, how: str, stamp: str, started: float, first_byte: float | None, api: str,
             req: dict[str, Any], status: int | None, assembler: StreamAssembler | None,
             kept: list[bytes] | None, kept_size: int, request: web.Request, *, error: str | None) -> None:
        response: Any = None
        if assembler is not None:
            response = assembler.response()
            if assembler.error is not None and error is None:
                error = f"the stream carried an error: {json.dumps(assembler.error)[:300]}"
        elif kept is not None and kept_size > LOGGED_RESPONSE_CAP:
            error = error or f"the reply ({kept_size} bytes) is over the logged size; passed on, not logged"
        elif kept:
            try:
                response = json.loads(b"".join(kept))
            except (ValueError, UnicodeDecodeError):
                response = None
                error = error or "the reply is not JSON"
        ended = self._clock()
        if response is not None and status == 200:
            self.conversations.record(cid, api, req, response)
        client = request.headers.get(CLIENT_HEADER) or request.headers.get("User-Agent")
        line = log_line(cid, stamp, req, model=apis.response_model(response, req), provider=self._provider,
                        client=client[:200] if client else None,
                        latency_ms=round((ended - started) * 1000, 3), response=response, api=api,
                        status=status, stream=assembler is not None,
                        first_byte_ms=round((first_byte - started) * 1000, 3) if first_byte else None,
                        conversation_from=how, error=error)
        self._write(line)
        self.stats.calls += 1

    def _write(self, line: bytes) -> None:
        # The call itself is done (the client has its reply): a log that cannot take the line (the
        # disk full) is counted and said on stderr, not turned into an error for the client.
        try:
            self.writer.write(line)
        except (LogFileError, OSError) as exc:
            self.stats.counts["log_write_failed"] += 1
            print(f"workbench record: a line was not written: {exc}", file=sys.stderr, flush=True)

    def _bad(self, stamp: str, api: str | None, request: web.Request, reason: str, *, size: int | None = None,
             status: int | None = None) -> None:
        """A call the recorder could not read: a line without a conversation (readers count it as
        a bad line and show the reason), so that nothing that passed goes unrecorded."""
        record = {"timestamp": stamp, "unrecorded": {"reason": reason, "api": api, "path": request.path,
                                                     "bytes": size, "status": status}}
        self._write(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")


def _whole(assembler: StreamAssembler | None, length: int | None, kept_size: int) -> bool:
    """Whether what has passed is a whole reply: a stream's last event, or a body's every byte."""
    return assembler.finished if assembler is not None else length is not None and kept_size >= length


def _error(status: int, kind: str, message: str, hint: str | None = None) -> web.Response:
    """The recorder's own answers, in the JSON error shape both OpenAI and Anthropic clients read."""
    err = {"type": kind, "message": message + (f" ({hint})" if hint else ""), "source": "workbench record"}
    return web.json_response({"type": "error", "error": err}, status=status)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def serve(config: RecordConfig, ready: Callable[[str], None] | None = None) -> None:
    """Run the recorder until cancelled."""
    recorder = Recorder(config)
    runner = web.AppRunner(recorder.app(), handler_cancellation=True, access_log=None, keepalive_timeout=75,
                           max_line_size=8190, max_field_size=8190, max_headers=100)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, shutdown_timeout=5)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise RecordError(f"cannot listen on {config.host}:{config.port} ({exc.strerror})",
                          hint="choose another --port") from None
    if ready is not None:
        host, port = runner.addresses[0][:2]           # the port the system chose, for --port 0
        ready(f"http://{host}:{port}")
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
