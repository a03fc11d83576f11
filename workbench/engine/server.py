"""`workbench serve-engine`: the local engine behind the OpenAI-compatible endpoints a serving engine
offers, for demos and for testing clients against a real model: `GET /v1/models`,
`POST /v1/completions` (prompt as token ids or text, greedy, usage with
`prompt_tokens_details.cached_tokens` = the tokens its radix KV cache served), `POST /tokenize`
(vLLM's shape), `GET /health`, and chat: `POST /v1/chat/completions`, `POST /v1/responses` and
Anthropic's `POST /v1/messages`, whole or streamed as server-sent events (chat_routes.py). It binds
to 127.0.0.1 unless told otherwise. A synthetic model's answers all carry
`X-Workbench-Synthetic-Model: NAME`: its words are random.

Built to face untrusted clients (ServerLimits holds every bound):

- one asyncio loop reads every connection, under a read timeout per read and a deadline for the
  whole request, so a stalled client costs a socket, not a thread; past `max_connections`, 503;
- a fixed pool of `workers` threads runs complete requests; past `queue` waiting ones, 503 at once;
- every malformed request is an OpenAI-style JSON error with its status (400, 404, 405, 408, 411,
  413, 417, 431, 505), never a dropped connection or a traceback;
- the engine serves one request at a time, first come first served (FairLock); a prompt is
  prefilled `prefill_chunk` tokens per turn, so a long prompt holds the engine for one chunk at a
  time and a short request behind it waits one chunk, not the whole prompt; a request that cannot
  get a turn within `engine_wait_s` gets 503 with Retry-After;
- a prompt over `max_prompt_tokens` (default: the model's window) is a 400 naming the limit;
- a streamed chat reply takes a worker for one engine turn at a time, and ends as soon as its client
  is gone (the connection closed, or a write failed): generation stops there.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..assembly import Assembler
from ..errors import Cancelled, EngineError, ServeRequestError, WorkbenchError
from ..templates import DEFAULT_TEMPLATE
from ..truncation import TruncationPolicy
from .chat_requests import ANTHROPIC, ROUTES
from .chat_routes import ChatJob, ChatService
from .engine import Engine, PrefillReport
from .fair_lock import FairLock
from .http_wire import ClientGone, HttpRequest, answer, error_body, read_request
from .server_limits import ServerLimits
from .server_requests import CompletionRequest, completion_request, parse_body, tokenize_request
from .sse import Frame, anthropic_error, stream_head

RETRY_AFTER_S = 1          # what a 503 tells the client to wait: turns are short, a retry soon may fit
POOL_ROUTES = ("/v1/completions", "/tokenize", *ROUTES)
CHEAP_ROUTES = ("/v1/models", "/health")
BODY_DRAIN = 64 << 10     # bytes per read while draining a refused request
SYNTHETIC_HEADER = "X-Workbench-Synthetic-Model"
CAPPED_HEADER = "X-Workbench-Max-New-Tokens"

Answer = tuple[int, dict[str, Any], dict[str, str]]      # status, JSON body, headers of its own (Retry-After)


class EngineServer:
    def __init__(self, engine: Engine, tokenizer: Any, *, host: str = "127.0.0.1", port: int = 0,
                 limits: ServerLimits | None = None, assembler: Assembler | None = None,
                 names: tuple[str, ...] = ()):
        """`assembler` renders the chat routes' prompts (default: the default template with this
        tokenizer); `names`: other names a request's `model` may give (a catalog model's id)."""
        self.engine, self.tokenizer = engine, tokenizer
        self.limits = limits or ServerLimits()
        self.vocab_size = int(getattr(tokenizer, "vocab_size", 0) or engine.m.vocab_size)
        self.window = int(engine.m.window or 0)
        self.prompt_cap = self.limits.prompt_cap(self.window)
        self.turns = FairLock()                 # the engine and its KV cache: one request's chunk at a time
        if assembler is None:
            # A server prompt is never cut to fit silently: one over the cap or the window is a 400.
            assembler = Assembler(template=DEFAULT_TEMPLATE, tokenizer=tokenizer, cache=None,
                                  truncation=TruncationPolicy(enabled=False))
        self.chat = ChatService(engine, assembler, self.limits, self._turn, names=frozenset((engine.m.name, *names)),
                                prompt_cap=self.prompt_cap)
        # Random weights write random words: every answer says so, whatever client reads it.
        self.headers = {SYNTHETIC_HEADER: engine.m.name} if engine.m.source == "synthetic" else {}
        self.streams_cancelled = 0              # streams ended because their client was gone (tests read it)
        self.jobs: set[ChatJob] = set()         # chat replies being generated now
        self.pool = ThreadPoolExecutor(max_workers=self.limits.workers, thread_name_prefix="workbench-engine-worker")
        self.open_connections = 0               # read on the loop thread only (and by tests)
        self.pending = 0                        # requests handed to the pool, not answered yet
        backlog = max(128, min(self.limits.connections, 1024))
        try:
            self.sock = socket.create_server((host, port), backlog=backlog)
        except OSError as exc:
            raise WorkbenchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                 hint="pick another --port, or stop what holds this one") from None
        self.url = f"http://{host}:{self.sock.getsockname()[1]}"
        self._backlog = backlog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._closing = False                   # set by stop(): a long prompt ends at its next chunk

    # --- lifecycle ------------------------------------------------------------------------------
    def serve_forever(self, on_ready: Callable[[], None] | None = None) -> None:
        """Serve until stopped. `on_ready` runs once the server accepts connections: a line saying
        so printed before would let a Ctrl-C arrive while the event loop is still being built."""
        asyncio.run(self._main(on_ready))

    def start(self) -> "EngineServer":
        """Serve on a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.serve_forever, name="workbench-engine-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise EngineError("the engine server did not start within 30 s")
        return self

    def stop(self) -> None:
        self._closing = True
        loop, stop = self._loop, self._stop_event
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:              # the loop closed in between
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.sock.close()

    async def _main(self, on_ready: Callable[[], None] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(_one_line_report)
        self._stop_event = asyncio.Event()
        server = await asyncio.start_server(self._connection, sock=self.sock, backlog=self._backlog,
                                            limit=self.limits.max_header_bytes)
        async with server:
            self._ready.set()
            if on_ready is not None:
                on_ready()
            await self._stop_event.wait()

    # --- one connection (on the loop) -----------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        paths: list[str] = []                 # the request's path, once its line is read
        try:
            if self.open_connections > self.limits.connections:
                return await self._refuse(reader, writer, ServeRequestError(
                    f"the server holds {self.limits.connections} connections already", status=503,
                    retry_after=RETRY_AFTER_S, hint="retry shortly, or raise --max-connections"))
            try:
                async with asyncio.timeout(self.limits.request_deadline_s):
                    req = await read_request(reader, writer, self.limits, paths.append)
            except ClientGone:
                return
            except TimeoutError:
                # the deadline of the whole request: a client dribbling a byte at a time ends here
                return await self._refuse(reader, writer, ServeRequestError(
                    f"the request did not arrive in full within {self.limits.request_deadline_s:g} s",
                    status=408), _api(paths))
            except ServeRequestError as exc:
                return await self._refuse(reader, writer, exc, _api(paths))
            ans = await self._route(req, reader, writer)
            if ans is not None:                        # None: a stream, answered as it went
                await self._reply(writer, ans)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass                                       # the client went away: nobody to answer
        except Exception as exc:                       # a bug of ours: one line, and a 500 if we can
            _report(f"internal error while serving a connection: {type(exc).__name__}: {exc}")
            try:
                await self._reply(writer, _error(ServeRequestError("internal server error", status=500)))
            except Exception:
                pass
        finally:
            self.open_connections -= 1
            writer.close()

    async def _route(self, req: HttpRequest, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> Answer | None:
        route = req.path.rstrip("/") or "/"
        api = ROUTES.get(route)
        if route in CHEAP_ROUTES:
            if req.method != "GET":
                return _error(ServeRequestError(f"{route} takes GET, not {req.method}", status=405))
            return 200, (self.models() if route == "/v1/models" else {"status": "ok"}), {}
        if route not in POOL_ROUTES:
            return _error(ServeRequestError(f"no route {req.path[:200]}", status=404,
                                            hint="routes: /v1/models, /v1/completions, /v1/chat/completions, "
                                                 "/v1/responses, /v1/messages, /tokenize, /health"))
        if req.method != "POST":
            return _error(ServeRequestError(f"{route} takes POST, not {req.method}", status=405), api)
        if self.pending >= self.limits.workers + self.limits.queue:
            return _error(ServeRequestError(
                f"the server is busy: {self.pending} requests are running or waiting", status=503,
                retry_after=RETRY_AFTER_S, hint="retry shortly, or raise --workers / --queue"), api)
        self.pending += 1
        try:
            assert self._loop is not None
            if api is not None:
                return await self._chat(api, req.body, time.monotonic(), reader, writer)
            return await self._loop.run_in_executor(self.pool, self._work, route, req.body, time.monotonic())
        finally:
            self.pending -= 1

    async def _reply(self, writer: asyncio.StreamWriter, ans: Answer) -> None:
        status, body, headers = ans
        writer.write(answer(status, body, headers={**self.headers, **headers}))
        try:
            await asyncio.wait_for(writer.drain(), self.limits.read_timeout_s)
        except (TimeoutError, ConnectionError, OSError):
            writer.transport.abort()                    # a client that does not read its answer

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      exc: ServeRequestError, api: str | None = None) -> None:
        """Answer an error before the request was read in full, then drain what the client still
        sends for a moment: closing with unread bytes resets the connection, and the client would
        see a dropped connection instead of the answer (nginx's lingering close)."""
        await self._reply(writer, _error(exc, api))
        if writer.transport.is_closing():
            return
        try:
            writer.write_eof()
            async with asyncio.timeout(self.limits.linger_s):
                while await reader.read(BODY_DRAIN):
                    pass
        except (TimeoutError, ConnectionError, OSError):
            pass

    # --- chat (on the loop, each engine turn on a worker) -----------------------------------------
    async def _chat(self, api: str, raw: bytes, queued_at: float, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> Answer | None:
        """A chat request: checked and rendered on a worker; then generated whole on a worker, or
        streamed, one engine turn per worker call, each turn's events written before the next."""
        assert self._loop is not None
        run = self._loop.run_in_executor
        job, exc = await run(self.pool, self._guarded, self._chat_job, api, raw)
        if job is None:
            return _error(exc or ServeRequestError("no job"), api)
        headers = {CAPPED_HEADER: str(job.max_new_tokens)} if job.capped else {}
        wait = max(0.0, queued_at + self.limits.engine_wait_s - time.monotonic())
        self.jobs.add(job)
        try:
            if not job.req.stream:
                body, exc = await run(self.pool, self._guarded, job.run, wait)
                if body is None:
                    return _error(exc or ServeRequestError("internal server error", status=500), api)
                return 200, body, headers
            watch = asyncio.ensure_future(_watch_gone(reader, job))
            try:
                frames, exc = await run(self.pool, self._guarded, job.prefill, wait)
                if frames is None:            # refused before a byte was sent: a plain error answer
                    if exc is None:           # or the client went away while its prompt was prefilled
                        self.streams_cancelled += 1
                        return None
                    return _error(exc, api)
                writer.write(stream_head({**self.headers, **headers}))
                while await self._send(writer, frames) and not job.done and not job.cancelled:
                    frames, exc = await run(self.pool, self._guarded, job.step)
                    if exc is not None:        # the engine failed mid-reply: the API's error event ends it
                        await self._send(writer, job.api.error(exc))
                        return None
                    if frames is None:         # the client went away during the step
                        break
                if not job.done:               # the client is gone: its generation ends here
                    job.cancelled = True
                    self.streams_cancelled += 1
                return None
            finally:
                watch.cancel()
        finally:
            self.jobs.discard(job)

    async def _send(self, writer: asyncio.StreamWriter, frames: list[Frame]) -> bool:
        """Write a stream's frames; False when the client is gone or stopped reading."""
        if writer.transport.is_closing():
            return False
        writer.write(b"".join(frames))
        try:
            await asyncio.wait_for(writer.drain(), self.limits.read_timeout_s)
        except (TimeoutError, ConnectionError, OSError):
            writer.transport.abort()
            return False
        return True

    def _chat_job(self, api: str, raw: bytes) -> ChatJob:
        return self.chat.prepare(api, parse_body(raw, max_depth=self.limits.max_json_depth))

    def _guarded(self, fn: Callable[..., Any], *args: Any) -> tuple[Any, ServeRequestError | None]:
        """fn(*args) on a worker: (its result, None), or (None, the error to answer); (None, None)
        when the client is gone."""
        try:
            return fn(*args), None
        except Cancelled:
            return None, None
        except ServeRequestError as exc:
            return None, exc
        except EngineError as exc:                     # the engine failed on a valid request (out of memory)
            return None, ServeRequestError(str(exc), status=500)
        except WorkbenchError as exc:
            return None, ServeRequestError(exc.message, hint=exc.hint)
        except Exception as exc:
            _report(f"internal error in {getattr(fn, '__name__', 'chat')}: {type(exc).__name__}: {exc}")
            return None, ServeRequestError("internal server error", status=500)

    def _turn(self, wait: float) -> Any:
        return self.turns.turn(wait, self._busy())

    # --- the work (on a worker thread) ----------------------------------------------------------
    def _work(self, route: str, raw: bytes, queued_at: float) -> Answer:
        try:
            body = parse_body(raw, max_depth=self.limits.max_json_depth)
            if route == "/tokenize":
                return 200, self.tokenize(body), {}
            wait = max(0.0, queued_at + self.limits.engine_wait_s - time.monotonic())
            return 200, self._complete(self._completion(body), first_wait=wait), {}
        except ServeRequestError as exc:
            return _error(exc)
        except EngineError as exc:                     # the engine failed on a valid request (out of memory)
            return _error(ServeRequestError(str(exc), status=500))
        except WorkbenchError as exc:
            return _error(ServeRequestError(str(exc)))
        except Exception as exc:
            _report(f"internal error on {route}: {type(exc).__name__}: {exc}")
            return _error(ServeRequestError("internal server error", status=500))

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.engine.m.name, "object": "model", "owned_by": "prompt-workbench",
                                            "max_model_len": self.window}]}

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """A completion for a parsed body, checked as over HTTP (raises ServeRequestError)."""
        return self._complete(self._completion(body), first_wait=self.limits.engine_wait_s)

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        req = tokenize_request(body, model=self.engine.m.name)
        ids = self._encode(req.text)     # special-token strings become their ids, as vLLM does
        return {"tokens": [int(i) for i in ids], "count": len(ids), "max_model_len": self.window}

    def _completion(self, body: dict[str, Any]) -> CompletionRequest:
        return completion_request(body, model=self.engine.m.name, vocab_size=self.vocab_size,
                                  max_new_tokens=self.limits.max_new_tokens)

    def _complete(self, req: CompletionRequest, *, first_wait: float) -> dict[str, Any]:
        ids = req.ids if req.ids is not None else self._encode(req.text or "")
        n = len(ids)
        if n == 0:
            raise ServeRequestError("encodes to no tokens", param="prompt")
        if n > self.prompt_cap:
            raise ServeRequestError(
                f"has {n} tokens, over this server's limit of {self.prompt_cap} prompt tokens", param="prompt",
                hint="send a shorter prompt (the limit is --max-prompt-tokens, at most the model's window"
                     f" of {self.window})")
        if self.window and n + req.max_tokens > self.window:
            raise ServeRequestError(f"the prompt's {n} tokens plus max_tokens {req.max_tokens} exceed the model's "
                                    f"window of {self.window} tokens", param="max_tokens")
        cached, report = self._prefill(ids, first_wait)
        out: list[int] = []
        seq = ids
        for _ in range(req.max_tokens):
            # greedy over the tokenizer's ids only: a model may have padding rows past them
            nxt = int(report.logits[: self.vocab_size].argmax())
            out.append(nxt)
            seq = np.append(seq, np.uint32(nxt))
            if len(out) < req.max_tokens:
                _, report = self._prefill(seq, self.limits.engine_wait_s)   # reuses all of seq but the new token
        text = self.tokenizer.decode(out) if out else ""
        return {"id": f"cmpl-{uuid.uuid4().hex[:16]}", "object": "text_completion", "created": int(time.time()),
                "model": self.engine.m.name,
                "choices": [{"index": 0, "text": text, "finish_reason": "length", "logprobs": None}],
                "usage": {"prompt_tokens": n, "completion_tokens": len(out), "total_tokens": n + len(out),
                          "prompt_tokens_details": {"cached_tokens": cached}}}

    def _prefill(self, ids: np.ndarray, first_wait: float) -> tuple[int, PrefillReport]:
        """Prefill `ids` a chunk per turn on the engine; (tokens the cache served, the last report).

        Between turns another request may run, and may even evict part of this prompt's KV: the
        next chunk then reuses less, and the logits are still those of the whole prompt, because
        every chunk is a prefill of the prompt so far that reuses whatever the cache still holds."""
        n, chunk = len(ids), self.limits.prefill_chunk
        with self.turns.turn(first_wait, self._busy()):
            match = self.engine.cache.match(ids)
            held = min(match.length, n - 1)
            end = min(n, held + chunk)
            report = self.engine.prefill(ids[:end])
        cached = report.reused_tokens
        while end < n:
            if self._closing:
                raise ServeRequestError("the server is shutting down", status=503, retry_after=RETRY_AFTER_S)
            end = min(n, end + chunk)
            with self.turns.turn(self.limits.engine_wait_s, self._busy()):
                report = self.engine.prefill(ids[:end])
        return cached, report

    def _busy(self) -> ServeRequestError:
        return ServeRequestError(f"the engine was busy: no turn within {self.limits.engine_wait_s:g} s", status=503,
                                 retry_after=RETRY_AFTER_S, hint="retry shortly, or raise --engine-wait")

    def _encode(self, text: str) -> np.ndarray:
        try:
            return np.asarray(self.tokenizer.encode(text), dtype=np.uint32)
        except WorkbenchError:
            raise
        except (ValueError, UnicodeError) as exc:
            raise ServeRequestError(f"cannot be tokenized: {exc}", param="prompt") from None


def _error(exc: ServeRequestError, api: str | None = None) -> Answer:
    """The refusal in the route's own error shape: Anthropic's for /v1/messages, OpenAI's elsewhere."""
    body = anthropic_error(exc) if api == ANTHROPIC else error_body(exc)
    return exc.status, body, {} if exc.retry_after is None else {"Retry-After": str(exc.retry_after)}


def _api(paths: list[str]) -> str | None:
    return ROUTES.get(paths[0].rstrip("/")) if paths else None


async def _watch_gone(reader: asyncio.StreamReader, job: ChatJob) -> None:
    """Mark the job cancelled once its client closes the connection: the generation stops at its
    next turn. (A client that only half-closes its side while it reads a stream counts as gone.)"""
    try:
        while await reader.read(BODY_DRAIN):
            pass
    except (ConnectionError, OSError):
        pass
    job.cancelled = True


def _report(line: str) -> None:
    """One line on stderr for the operator; a client's bad request never gets here."""
    print(f"serve-engine: {line[:500]}", file=sys.stderr, flush=True)


def _one_line_report(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    _report(f"{context.get('message', 'event loop error')}"
            + (f": {type(exc).__name__}: {exc}" if exc is not None else ""))
