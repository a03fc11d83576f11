"""`workbench serve-engine` against hostile clients (issue 14, case 9): the real server, the real
synthetic `tiny` model, real sockets. Raw socket clients send what an attacker would: ids of 2**40,
`Content-Length: abc`, deep JSON, stalled and dribbling connections, hundreds of them, and a long
prompt that used to hold the engine for minutes. Each ends in a typed OpenAI-style JSON error (or a
quick 503 with Retry-After), never a dropped connection or a traceback, and an honest request next
to it still succeeds."""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from browser import free_port

from workbench.cli.main import main
from workbench.engine.engine import Engine
from workbench.engine.fair_lock import FairLock
from workbench.engine.server import EngineServer
from workbench.engine.server_limits import ServerLimits
from workbench.tokenizers import get_tokenizer

ROOT = Path(__file__).resolve().parent.parent
CAP = 256                     # --max-prompt-tokens of the server most tests talk to


@pytest.fixture(scope="module")
def model() -> tuple[Engine, object]:
    tok = get_tokenizer("qwen2.5")        # the tokenizer serve-engine uses with --model tiny
    return Engine.load("tiny", vocab_size=tok.vocab_size), tok


@contextmanager
def serving(model: tuple[Engine, object], **limits: object) -> Iterator[EngineServer]:
    engine, tok = model
    srv = EngineServer(engine, tok, limits=ServerLimits(**limits)).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def server(model: tuple[Engine, object]) -> Iterator[EngineServer]:
    with serving(model, max_prompt_tokens=CAP, read_timeout_s=2, request_deadline_s=4, linger_s=1) as srv:
        yield srv


# --- a raw HTTP client: bytes in, the whole answer out (a reset connection raises) -----------------
@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: dict

    @property
    def error(self) -> dict:
        return self.body["error"]


def port_of(srv: EngineServer) -> int:
    return srv.sock.getsockname()[1]


def read_reply(sock: socket.socket) -> Reply:
    data = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    head, sep, body = data.partition(b"\r\n\r\n")
    assert sep, f"no complete answer, got {data[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    assert int(headers["content-length"]) == len(body), "the answer was cut short"
    assert headers["content-type"] == "application/json"
    return Reply(int(lines[0].split()[1]), headers, json.loads(body))


def exchange(srv: EngineServer | int, data: bytes, *, half_close: bool = True, timeout: float = 60) -> Reply:
    """Send `data` to a server (or a port), half-close, and read the whole answer."""
    port = srv if isinstance(srv, int) else port_of(srv)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        return read_reply(s)


def post_bytes(body: bytes, path: str = "/v1/completions") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def post(body: object, path: str = "/v1/completions") -> bytes:
    return post_bytes(json.dumps(body).encode(), path)


HONEST = post({"model": "tiny", "prompt": [9707, 11, 1879, 0], "max_tokens": 2})


def assert_honest_works(srv: EngineServer) -> None:
    r = exchange(srv, HONEST)
    assert r.status == 200, r.body
    assert r.body["usage"]["prompt_tokens"] == 4 and r.body["usage"]["completion_tokens"] == 2


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


# --- malformed requests: each a typed status and an OpenAI-style JSON error -----------------------
DEEP = b"[" * 100_000 + b"]" * 100_000
MALFORMED = {
    # the three payloads
    "id 2**40": (post({"prompt": [2**40]}), 400, "prompt[0]", "outside the tokenizer's vocabulary"),
    "Content-Length abc": (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n{}", 400,
                           "Content-Length", "not a number of bytes"),
    "deep JSON": (post_bytes(b'{"prompt": ' + DEEP + b"}"), 400, None, "nested deeper than 32"),
    # the body
    "deep JSON the parser takes": (post_bytes(b'{"prompt": ' + b"[" * 500 + b"1" + b"]" * 500 + b"}"), 400, None,
                                   "nested 501 levels deep"),
    "deep JSON alone": (post_bytes(DEEP), 400, None, "nested deeper"),
    "not JSON": (post_bytes(b"prompt=hello"), 400, None, "not valid JSON"),
    "not UTF-8": (post_bytes(b'{"prompt": "\xff\xfe"}'), 400, None, "not valid JSON"),
    "a list body": (post([1, 2, 3]), 400, None, "must be a JSON object"),
    "NaN": (post_bytes(b'{"prompt": [1], "temperature": NaN}'), 400, None, "NaN is not JSON"),
    "Infinity": (post_bytes(b'{"prompt": [1], "max_tokens": -Infinity}'), 400, None, "-Infinity is not JSON"),
    "a key twice": (post_bytes(b'{"prompt": [1], "prompt": "x"}'), 400, None, "appears twice"),
    "a 5,000-digit integer": (post_bytes(b'{"prompt": [' + b"9" * 5000 + b"]}"), 400, None, "not valid JSON"),
    "empty body": (post_bytes(b""), 400, None, "not valid JSON"),
    # the prompt
    "negative id": (post({"prompt": [1, -1]}), 400, "prompt[1]", "outside the tokenizer's vocabulary"),
    "id one past the vocabulary": (post({"prompt": [151665]}), 400, "prompt[0]", "0 to 151664"),
    "id 2**64": (post({"prompt": [1, 2, 2**64]}), 400, "prompt[2]", "outside"),
    "float id": (post({"prompt": [1.0]}), 400, "prompt[0]", "must be a token id"),
    "bool id": (post({"prompt": [True]}), 400, "prompt[0]", "must be a token id"),
    "string id": (post({"prompt": [1, "2"]}), 400, "prompt[1]", 'got a string "2"'),
    "string batch": (post({"prompt": ["a", "b"]}), 400, "prompt", "batch of several prompts"),
    "id batch": (post({"prompt": [[1], [2]]}), 400, "prompt", "batch of several prompts"),
    "nested ids": (post({"prompt": [[[1]]]}), 400, "prompt[0]", "batch"),
    "empty ids": (post({"prompt": []}), 400, "prompt", "is empty"),
    "empty text": (post({"prompt": ""}), 400, "prompt", "is empty"),
    "no prompt": (post({"max_tokens": 1}), 400, "prompt", "is required"),
    "prompt object": (post({"prompt": {"not": "ids"}}), 400, "prompt", "got an object"),
    "lone surrogate": (post_bytes(b'{"prompt": "hi \\ud800"}'), 400, "prompt", "lone surrogate"),
    "prompt over the cap (ids)": (post({"prompt": [1] * (CAP + 1)}), 400, "prompt", f"limit of {CAP} prompt tokens"),
    "prompt over the cap (text)": (post({"prompt": "word " * (CAP + 10)}), 400, "prompt", f"limit of {CAP}"),
    # the other fields
    "negative max_tokens": (post({"prompt": [1], "max_tokens": -1}), 400, "max_tokens", "from 0 to 64"),
    "huge max_tokens": (post({"prompt": [1], "max_tokens": 10**12}), 400, "max_tokens", "from 0 to 64"),
    "max_tokens 2**40": (post({"prompt": [1], "max_tokens": 2**40}), 400, "max_tokens", "from 0 to 64"),
    "string max_tokens": (post({"prompt": [1], "max_tokens": "8"}), 400, "max_tokens", 'got "8"'),
    "float max_tokens": (post({"prompt": [1], "max_tokens": 1.5}), 400, "max_tokens", "got 1.5"),
    "bool max_tokens": (post({"prompt": [1], "max_tokens": True}), 400, "max_tokens", "got true"),
    "stream": (post({"prompt": [1], "stream": True}), 400, "stream", "not supported"),
    "n 2": (post({"prompt": [1], "n": 2}), 400, "n", "must be 1"),
    "temperature string": (post({"prompt": [1], "temperature": "hot"}), 400, "temperature", "number"),
    "model of another type": (post({"prompt": [1], "model": 7}), 400, "model", "must be a string"),
    "unknown model": (post({"prompt": [1], "model": "gpt-9"}), 404, "model", "does not exist"),
    "tokenize an int": (post({"prompt": 5}, "/tokenize"), 400, "prompt", "must be a string"),
    "tokenize add_special_tokens": (post({"prompt": "x", "add_special_tokens": "no"}, "/tokenize"), 400,
                                    "add_special_tokens", "true or false"),
    # the HTTP around it
    "negative Content-Length": (b"POST /v1/completions HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400,
                                "Content-Length", "not a number"),
    "Content-Length 1e3": (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n", 400, "Content-Length",
                           "not a number"),
    "two Content-Lengths": (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
                            400, "Content-Length", "two different"),
    "Content-Length over the body cap": (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n",
                                         413, "Content-Length", "over the limit"),
    "oversize body with Expect": (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 5000000\r\n"
                                  b"Expect: 100-continue\r\n\r\n", 413, "Content-Length", "over the limit"),
    "no Content-Length": (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n\r\n", 411, "Content-Length", "needs"),
    "chunked body": (b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                     411, "Transfer-Encoding", "not accepted"),
    "body cut short": (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{}", 400, "Content-Length",
                       "ended after 2 of the 100 bytes"),
    "garbage request line": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, None,
                             "malformed request line"),
    "HTTP/2": (b"POST /v1/completions HTTP/2.0\r\n\r\n", 505, None, "not supported"),
    "header without colon": (b"GET /v1/models HTTP/1.1\r\nno colon here\r\n\r\n", 400, None, "malformed header"),
    "folded header": (b"GET /v1/models HTTP/1.1\r\nA: b\r\n  c\r\n\r\n", 400, None, "folded"),
    "a 20 KiB header": (b"GET /v1/models HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n", 431, None, "longer than"),
    "200 headers": (b"GET /v1/models HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n", 431, None, "more than 100"),
    "Expect other": (b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nExpect: 200-ok\r\n\r\n{}", 417,
                     "Expect", "not supported"),
    "ends in the headers": (b"GET /v1/models HTTP/1.1\r\nHost: t\r\n", 400, None, "ended inside"),
    "unknown path": (post({"prompt": [1]}, "/admin"), 404, None, "no route"),
    "GET on completions": (b"GET /v1/completions HTTP/1.1\r\n\r\n", 405, None, "takes POST"),
    "DELETE on models": (b"DELETE /v1/models HTTP/1.1\r\n\r\n", 405, None, "takes GET"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_each_malformed_request_is_a_typed_json_error(server: EngineServer, name: str,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    data, status, param, words = MALFORMED[name]
    r = exchange(server, data)
    assert r.status == status, r.body
    assert r.error["code"] == status and r.error["param"] == param
    assert words in r.error["message"], r.error["message"]
    assert r.error["type"] == {404: "not_found_error"}.get(status, "invalid_request_error")
    assert r.headers["connection"] == "close"   # (answered for what it is: a timeout would be a 408)
    assert_honest_works(server)                               # and the server still serves
    err = capfd.readouterr().err
    assert "Traceback" not in err and "serve-engine:" not in err, err


def test_honest_requests_next_to_the_hostile_ones(server: EngineServer) -> None:
    """The good twins of the payloads above: ids at the vocabulary's edge, a batch of one, text, a
    prompt exactly at the cap, max_tokens 0, a body announced with Expect: 100-continue."""
    for body in ({"prompt": [0, 151664]}, {"prompt": [[1, 2, 3]], "max_tokens": 1}, {"prompt": ["hello"]},
                 {"prompt": [5] * CAP, "max_tokens": 0}, {"prompt": "hello <|im_end|>", "temperature": 0, "n": 1,
                                                          "stream": False, "model": "tiny", "max_tokens": None}):
        r = exchange(server, post(body))
        assert r.status == 200, (body, r.body)
    data = json.dumps({"prompt": [1, 2]}).encode()
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=60) as s:
        s.sendall(f"POST /v1/completions HTTP/1.1\r\nContent-Length: {len(data)}\r\nExpect: 100-continue\r\n\r\n"
                  .encode())
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(data)
        assert read_reply(s).status == 200
    tokens = exchange(server, post({"prompt": "hi<|im_end|>", "add_special_tokens": False}, "/tokenize"))
    assert tokens.status == 200 and tokens.body["tokens"][-1] == 151645
    assert exchange(server, b"GET /health HTTP/1.1\r\n\r\n").status == 200


def test_the_prompt_cap_defaults_to_the_model_window(model: tuple[Engine, object]) -> None:
    with serving(model) as srv:
        window = model[0].m.window
        assert srv.prompt_cap == window == 32768
        r = exchange(srv, post({"prompt": [1] * (window + 1)}))
        assert r.status == 400 and f"limit of {window} prompt tokens" in r.error["message"]
        # the prompt fits, the tokens it asks for do not: named like vLLM's "maximum context length"
        r = exchange(srv, post({"prompt": [1] * (window - 1), "max_tokens": 2}))
        assert r.status == 400 and r.error["param"] == "max_tokens" and "window of 32768" in r.error["message"]


# --- stalled and slow clients ---------------------------------------------------------------------
def os_threads() -> int:
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else threading.active_count()


def test_300_stalled_clients_hold_no_threads_and_an_honest_request_still_succeeds(
        model: tuple[Engine, object]) -> None:
    workers = 4
    model[1].encode("warm up the tokenizer's own thread pool")
    py_before, os_before = threading.active_count(), os_threads()
    with serving(model, workers=workers, read_timeout_s=5, request_deadline_s=8, linger_s=1) as srv:
        assert_honest_works(srv)
        stalls = [b"", b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n",             # silent; headers half sent
                  b"POST /v1/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"prompt\": "]  # body half sent
        socks = []
        try:
            for i in range(300):
                s = socket.create_connection(("127.0.0.1", port_of(srv)), timeout=60)
                s.sendall(stalls[i % 3])
                socks.append(s)
            wait_for(lambda: srv.open_connections >= 300, "the server to hold all 300 connections")
            # a fixed pool: the loop thread and the workers, whatever the number of connections
            assert threading.active_count() <= py_before + 1 + workers
            assert os_threads() <= os_before + 1 + workers + 4
            assert_honest_works(srv)
            assert srv.open_connections >= 300, "the honest request was served while they stalled"
            for s in socks:                      # each ends with a 408, by the read timeout or the deadline
                r = read_reply(s)
                assert r.status == 408 and r.error["type"] == "timeout_error", r.body
                # said by the read timeout (5 s) or the request's deadline (8 s): no other path
                assert re.search(r"(within|nothing for) [58] s", r.error["message"]), r.error["message"]
        finally:
            for s in socks:
                s.close()
        wait_for(lambda: srv.open_connections == 0, "the stalled connections to close")
        assert_honest_works(srv)


def test_a_dribbling_client_ends_at_the_request_deadline(model: tuple[Engine, object]) -> None:
    """Slowloris: every read gets a byte in time, so only the deadline of the whole request stops it."""
    with serving(model, read_timeout_s=3, request_deadline_s=4, linger_s=1) as srv:
        with socket.create_connection(("127.0.0.1", port_of(srv)), timeout=60) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length: 100000\r\n\r\n")
            s.settimeout(0.2)
            first, sent = b"", 0
            while not first:
                # (a bound on a hang only: 150 bytes at one per 0.2 s is 30 s, far past the deadline)
                assert sent < 150, "the dribbling client was never cut off"
                try:
                    s.sendall(b" ")                 # a byte every 0.2 s: never idle for a read timeout
                    sent += 1
                    first = s.recv(65536)
                except TimeoutError:
                    continue
            s.settimeout(60)
            rest = read_reply_from(s, first)
        # the request's deadline said it (the read timeout never could: a byte came every 0.2 s)
        assert rest.status == 408 and "did not arrive in full within 4 s" in rest.error["message"], rest.body
        assert_honest_works(srv)


def read_reply_from(s: socket.socket, first: bytes) -> Reply:
    class Prefixed:
        def __init__(self) -> None:
            self.pending = first

        def recv(self, n: int) -> bytes:
            if self.pending:
                out, self.pending = self.pending, b""
                return out
            try:
                return s.recv(n)
            except ConnectionResetError:            # we kept sending after its answer: fine once it is read
                return b""
    return read_reply(Prefixed())                   # type: ignore[arg-type]


def test_connections_past_the_limit_get_503_at_once(model: tuple[Engine, object]) -> None:
    with serving(model, max_connections=5, read_timeout_s=10, request_deadline_s=20) as srv:
        socks = [socket.create_connection(("127.0.0.1", port_of(srv)), timeout=60) for _ in range(5)]
        try:
            wait_for(lambda: srv.open_connections >= 5, "5 open connections")
            r = exchange(srv, HONEST)
            assert r.status == 503 and r.headers["retry-after"] == "1"
            assert r.error["type"] == "overloaded_error" and "--max-connections" in r.error["message"]
        finally:
            for s in socks:
                s.close()
        wait_for(lambda: srv.open_connections == 0, "the connections to close")
        assert_honest_works(srv)


# --- the engine: bounded waits, and a long prompt does not shut out a short one --------------------
def test_a_request_that_cannot_get_the_engine_gets_503_with_retry_after(model: tuple[Engine, object]) -> None:
    with serving(model, engine_wait_s=0.5) as srv:
        assert srv.turns.acquire(5)               # something else holds the engine
        try:
            r = exchange(srv, HONEST)
        finally:
            srv.turns.release()
        assert r.status == 503 and r.headers["retry-after"] == "1", r.body
        assert r.error["type"] == "overloaded_error" and "no turn within 0.5 s" in r.error["message"]  # its wait's end
        assert_honest_works(srv)


def test_a_full_queue_answers_503_at_once(model: tuple[Engine, object]) -> None:
    with serving(model, workers=1, queue=1, engine_wait_s=120) as srv:
        assert srv.turns.acquire(5)
        answers: queue.Queue[Reply] = queue.Queue()
        try:
            for _ in range(2):                      # one on the worker, one in the queue
                threading.Thread(target=lambda: answers.put(exchange(srv, HONEST)), daemon=True).start()
            wait_for(lambda: srv.pending == 2 and srv.turns.waiting == 1, "two requests taken in")
            r = exchange(srv, HONEST)
            # refused for the full queue ("busy"), not after a wait for the engine (120 s, and the
            # engine is held until this answer is read: a request that queued would never get one)
            assert r.status == 503 and r.headers["retry-after"] == "1" and "busy" in r.error["message"]
        finally:
            srv.turns.release()
        assert [answers.get(timeout=120).status for _ in range(2)] == [200, 200]


def completion(srv: EngineServer, ids: np.ndarray, max_tokens: int = 1) -> Reply:
    return exchange(srv, post({"prompt": [int(i) for i in ids], "max_tokens": max_tokens}))


def test_a_long_prompt_does_not_block_a_short_request(model: tuple[Engine, object]) -> None:
    engine, tok = model
    rng = np.random.default_rng(14)
    long_ids = rng.integers(0, tok.vocab_size, 8192).astype(np.uint32)
    chunk = 64
    with serving(model, prefill_chunk=chunk, engine_wait_s=60) as srv:
        start = engine.processed_tokens
        long_reply: queue.Queue[Reply] = queue.Queue()
        long_thread = threading.Thread(target=lambda: long_reply.put(completion(srv, long_ids)), daemon=True)
        long_thread.start()
        wait_for(lambda: engine.processed_tokens >= start + chunk, "the long prompt's first chunk")
        short = exchange(srv, HONEST)
        # served between two chunks of the long prompt, not after all of it
        assert short.status == 200, short.body
        assert long_thread.is_alive() and engine.processed_tokens < start + len(long_ids), \
            "the short request waited for the whole long prompt"
        r = long_reply.get(timeout=600)
    assert r.status == 200 and r.body["usage"]["prompt_tokens"] == len(long_ids)
    # chunked prefill gives the answer of a whole one
    full = engine.prefill(long_ids, reuse=False)
    assert r.body["choices"][0]["text"] == tok.decode([int(full.logits.argmax())])


def test_cached_tokens_stay_exact_with_chunked_prefill(model: tuple[Engine, object]) -> None:
    engine, tok = model
    rng = np.random.default_rng(7)
    first = rng.integers(0, tok.vocab_size, 300).astype(np.uint32)
    longer = np.concatenate([first, rng.integers(0, tok.vocab_size, 200)]).astype(np.uint32)
    with serving(model, prefill_chunk=64) as srv:
        before = engine.processed_tokens
        a = completion(srv, first, max_tokens=0)
        b = completion(srv, longer, max_tokens=0)
        again = completion(srv, longer, max_tokens=0)
    assert a.body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert b.body["usage"]["prompt_tokens_details"]["cached_tokens"] == 300
    assert again.body["usage"]["prompt_tokens_details"]["cached_tokens"] == 499   # the last token always runs
    assert engine.processed_tokens - before == 300 + 200 + 1                        # nothing ran twice


def test_fair_lock_serves_in_arrival_order_and_gives_up_at_its_deadline() -> None:
    lock = FairLock()
    assert lock.acquire(1)
    order: list[int] = []

    def waiter(k: int) -> None:
        if lock.acquire(60):
            order.append(k)
            lock.release()

    threads = []
    for k in range(3):
        threads.append(threading.Thread(target=waiter, args=(k,)))
        threads[-1].start()
        wait_for(lambda k=k: lock.waiting == k + 1, f"waiter {k} queued")
    assert not lock.acquire(0.2)                                      # a fourth gives up, and leaves the queue
    assert lock.waiting == 3
    lock.release()
    for t in threads:
        t.join(60)
    assert order == [0, 1, 2]


# --- the CLI: options checked before the model loads; a real process keeps stderr clean ------------
@pytest.mark.parametrize("argv, words", [
    (["--workers", "0"], "--workers must be at least 1"),
    (["--queue", "-1"], "--queue must be at least 0"),
    (["--read-timeout", "nan"], "--read-timeout must be a finite number"),
    (["--read-timeout", "0"], "--read-timeout must be more than 0"),
    (["--read-timeout", "20", "--request-deadline", "5"], "--request-deadline (5.0 s) is shorter"),
    (["--max-body-mb", "0"], "--max-body-mb must be more than 0"),
    (["--max-body-mb", "inf"], "--max-body-mb must be more than 0"),
    (["--prefill-chunk", "0"], "--prefill-chunk must be at least 1"),
    (["--max-prompt-tokens", "-5"], "--max-prompt-tokens must be at least 0"),
    (["--kv-cap-mb", "nan"], "--kv-cap-mb must be from 0"),
])
def test_serve_engine_options_are_checked(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-engine", "--model", "no-such-model", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err, err


def test_serve_engine_cli_applies_its_limits_and_prints_no_traceback() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli.main", "serve-engine", "--model", "tiny",
                             "--port", str(port), "--max-prompt-tokens", "64", "--workers", "2",
                             "--read-timeout", "1", "--request-deadline", "2"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] and lines.put(None), daemon=True).start()
    try:
        line = lines.get(timeout=180)
        assert line and line.startswith("serving tiny"), line
        r = exchange(port, post({"prompt": [1] * 65}))
        assert r.status == 400 and "limit of 64 prompt tokens" in r.error["message"]
        for name in ("id 2**40", "Content-Length abc", "deep JSON"):
            assert exchange(port, MALFORMED[name][0]).status == 400
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:    # a stalled client
            assert read_reply(s).status == 408
        assert exchange(port, post({"prompt": [1, 2, 3], "max_tokens": 1})).status == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "serve-engine:" not in err, err
