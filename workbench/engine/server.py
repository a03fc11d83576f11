"""`workbench serve-engine`: the local engine behind the OpenAI-compatible endpoints a serving engine
offers (the subset the remote adapter uses), for demos and for testing the adapter against a real
model: `GET /v1/models`, `POST /v1/completions` (prompt as token ids or text, greedy, usage with
`prompt_tokens_details.cached_tokens` = the tokens its radix KV cache served), `POST /tokenize`
(vLLM's shape), `GET /health`. It binds to 127.0.0.1 unless told otherwise.

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
- a prompt over `max_prompt_tokens` (default: the model's window) is a 400 naming the limit.
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

from ..errors import EngineError, ServeRequestError, WorkbenchError
from .engine import Engine, PrefillReport
from .fair_lock import FairLock
from .http_wire import ClientGone, HttpRequest, answer, error_body, read_request
from .server_limits import ServerLimits
from .server_requests import CompletionRequest, completion_request, parse_body, tokenize_request

RETRY_AFTER_S = 1          # what a 503 tells the client to wait: turns are short, a retry soon may fit
POOL_ROUTES = ("/v1/completions", "/tokenize")
CHEAP_ROUTES = ("/v1/models", "/health")
BODY_DRAIN = 64 << 10     # bytes per read while draining a refused request

Answer = tuple[int, dict, "int | None"]      # status, JSON body, Retry-After


class EngineServer:
    def __init__(self, engine: Engine, tokenizer: Any, *, host: str = "127.0.0.1", port: int = 0,
                 limits: ServerLimits | None = None):
        self.engine, self.tokenizer = engine, tokenizer
        self.limits = limits or ServerLimits()
        self.vocab_size = int(getattr(tokenizer, "vocab_size", 0) or engine.m.vocab_size)
        self.window = int(engine.m.window or 0)
        self.prompt_cap = self.limits.prompt_cap(self.window)
        self.turns = FairLock()                 # the engine and its KV cache: one request's chunk at a time
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
        try:
            if self.open_connections > self.limits.connections:
                return await self._refuse(reader, writer, ServeRequestError(
                    f"the server holds {self.limits.connections} connections already", status=503,
                    retry_after=RETRY_AFTER_S, hint="retry shortly, or raise --max-connections"))
            try:
                async with asyncio.timeout(self.limits.request_deadline_s):
                    req = await read_request(reader, writer, self.limits)
            except ClientGone:
                return
            except TimeoutError:
                # the deadline of the whole request: a client dribbling a byte at a time ends here
                return await self._refuse(reader, writer, ServeRequestError(
                    f"the request did not arrive in full within {self.limits.request_deadline_s:g} s",
                    status=408))
            except ServeRequestError as exc:
                return await self._refuse(reader, writer, exc)
            await self._reply(writer, await self._route(req))
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

    async def _route(self, req: HttpRequest) -> Answer:
        route = req.path.rstrip("/") or "/"
        if route in CHEAP_ROUTES:
            if req.method != "GET":
                return _error(ServeRequestError(f"{route} takes GET, not {req.method}", status=405))
            return 200, (self.models() if route == "/v1/models" else {"status": "ok"}), None
        if route not in POOL_ROUTES:
            return _error(ServeRequestError(f"no route {req.path[:200]}", status=404,
                                            hint="routes: /v1/models, /v1/completions, /tokenize, /health"))
        if req.method != "POST":
            return _error(ServeRequestError(f"{route} takes POST, not {req.method}", status=405))
        if self.pending >= self.limits.workers + self.limits.queue:
            return _error(ServeRequestError(
                f"the server is busy: {self.pending} requests are running or waiting", status=503,
                retry_after=RETRY_AFTER_S, hint="retry shortly, or raise --workers / --queue"))
        self.pending += 1
        try:
            assert self._loop is not None
            return await self._loop.run_in_executor(self.pool, self._work, route, req.body, time.monotonic())
        finally:
            self.pending -= 1

    async def _reply(self, writer: asyncio.StreamWriter, ans: Answer) -> None:
        status, body, retry_after = ans
        writer.write(answer(status, body, retry_after=retry_after))
        try:
            await asyncio.wait_for(writer.drain(), self.limits.read_timeout_s)
        except (TimeoutError, ConnectionError, OSError):
            writer.transport.abort()                    # a client that does not read its answer

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      exc: ServeRequestError) -> None:
        """Answer an error before the request was read in full, then drain what the client still
        sends for a moment: closing with unread bytes resets the connection, and the client would
        see a dropped connection instead of the answer (nginx's lingering close)."""
        await self._reply(writer, _error(exc))
        if writer.transport.is_closing():
            return
        try:
            writer.write_eof()
            async with asyncio.timeout(self.limits.linger_s):
                while await reader.read(BODY_DRAIN):
                    pass
        except (TimeoutError, ConnectionError, OSError):
            pass

    # --- the work (on a worker thread) ----------------------------------------------------------
    def _work(self, route: str, raw: bytes, queued_at: float) -> Answer:
        try:
            body = parse_body(raw, max_depth=self.limits.max_json_depth)
            if route == "/tokenize":
                return 200, self.tokenize(body), None
            wait = max(0.0, queued_at + self.limits.engine_wait_s - time.monotonic())
            return 200, self._complete(self._completion(body), first_wait=wait), None
        except ServeRequestError as exc:
            return _error(exc)
        except EngineError as exc:                     # the engine failed on a valid request (out of memory)
            return _error(ServeRequestError(str(exc), status=500))
        except WorkbenchError as exc:
            return _error(ServeRequestError(str(exc)))
        except Exception as exc:
            _report(f"internal error on {route}: {type(exc).__name__}: {exc}")
            return _error(ServeRequestError("internal server error", status=500))

    def models(self) -> dict:
        return {"object": "list", "data": [{"id": self.engine.m.name, "object": "model", "owned_by": "prompt-workbench",
                                            "max_model_len": self.window}]}

    def complete(self, body: dict) -> dict:
        """A completion for a parsed body, checked as over HTTP (raises ServeRequestError)."""
        return self._complete(self._completion(body), first_wait=self.limits.engine_wait_s)

    def tokenize(self, body: dict) -> dict:
        req = tokenize_request(body, model=self.engine.m.name)
        ids = self._encode(req.text)     # special-token strings become their ids, as vLLM does
        return {"tokens": [int(i) for i in ids], "count": len(ids), "max_model_len": self.window}

    def _completion(self, body: dict) -> CompletionRequest:
        return completion_request(body, model=self.engine.m.name, vocab_size=self.vocab_size,
                                  max_new_tokens=self.limits.max_new_tokens)

    def _complete(self, req: CompletionRequest, *, first_wait: float) -> dict:
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


def _error(exc: ServeRequestError) -> Answer:
    return exc.status, error_body(exc), exc.retry_after


def _report(line: str) -> None:
    """One line on stderr for the operator; a client's bad request never gets here."""
    print(f"serve-engine: {line[:500]}", file=sys.stderr, flush=True)


def _one_line_report(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    exc = context.get("exception")
    _report(f"{context.get('message', 'event loop error')}"
            + (f": {type(exc).__name__}: {exc}" if exc is not None else ""))
