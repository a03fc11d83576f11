"""`workbench record` (issue 31): the recording proxy, run as the CLI runs it, between the official
`openai` and `anthropic` SDKs and an upstream (tests/record_upstream.py). The oracle for each log
line is what the upstream received and what it answered, never the recorder's own reading."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from record_upstream import TEXT, Upstream, upstream, usage
from recorder_process import ROOT, count, log_lines, recorder

SECRET = "sk-test-SECRET-never-logged-4711"


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with upstream() as u:
        yield u


@pytest.fixture(scope="module")
def rec(up: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("rec") / "calls.jsonl"
    with recorder(up.base, log) as url:
        yield url, log


# --------------------------------------------------------------------- the three APIs, SDK-driven
CASES = ["chat", "chat-stream", "responses", "responses-stream", "messages", "messages-stream"]


def call(kind: str, url: str) -> str:
    """One SDK call through the recorder; the reply text the SDK parsed."""
    if kind.startswith("messages"):
        claude = anthropic.Anthropic(base_url=url, api_key=SECRET, max_retries=0, timeout=60)
        args: dict[str, Any] = dict(model="claude-sonnet-4-5", max_tokens=64, system="Be brief.",
                                    messages=[{"role": "user", "content": f"Hi ({kind})"}])
        if kind.endswith("stream"):
            with claude.messages.stream(**args) as s:
                return "".join(s.text_stream)
        m = claude.messages.create(**args)
        return "".join(b.text for b in m.content if b.type == "text")
    oai = openai.OpenAI(base_url=url + "/v1", api_key=SECRET, max_retries=0, timeout=60)
    if kind.startswith("responses"):
        if kind.endswith("stream"):
            text = ""
            for ev in oai.responses.create(model="gpt-5-mini", instructions="Be brief.", input=f"Hi ({kind})",
                                           stream=True):
                if ev.type == "response.output_text.delta":
                    text += ev.delta
            return text
        return oai.responses.create(model="gpt-5-mini", instructions="Be brief.", input=f"Hi ({kind})").output_text
    msgs: Any = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"Hi ({kind})"}]
    if kind.endswith("stream"):
        chunks = oai.chat.completions.create(model="gpt-4o", messages=msgs, stream=True,
                                             stream_options={"include_usage": True})
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return oai.chat.completions.create(model="gpt-4o", messages=msgs).choices[0].message.content or ""


@pytest.mark.parametrize("kind", CASES)
def test_each_sdk_call_passes_through_and_is_logged_with_the_upstreams_usage(kind: str, up: Upstream,
                                                                              rec: tuple[str, Path]) -> None:
    url, log = rec
    before, seen = count(log), len(up.seen)
    assert call(kind, url) == "".join(TEXT)                   # the SDK parsed the reply the upstream sent
    (line,) = log_lines(log, before + 1)[before:]
    body = up.seen[seen].body
    assert line["request"] == json.loads(body)                  # the request as it reached the upstream
    api = "chat" if kind.startswith("chat") else kind.split("-")[0]
    assert line["response"]["usage"] == usage(api, up.usage_cached)     # exactly as reported
    assert line["stream"] is kind.endswith("stream") and line["status"] == 200
    assert line["api"] == {"chat": "chat.completions", "responses": "responses", "messages": "messages"}[api]
    assert line["latency_ms"] >= line["first_byte_ms"] > 0
    assert line["client"].startswith("Anthropic/Python" if api == "messages" else "OpenAI/Python")
    assert line["model"] and line["conversation_id"] and line["timestamp"]
    reply = line["response"]
    text = {"chat": lambda: reply["choices"][0]["message"]["content"],
            "responses": lambda: reply["output"][0]["content"][0]["text"],
            "messages": lambda: reply["content"][0]["text"]}[api]()
    assert text == "".join(TEXT)                                # a streamed reply, assembled whole
    # The credentials went upstream, and nowhere else.
    sent = {k.lower(): v for k, v in up.seen[seen].headers.items()}
    assert SECRET in (sent.get("authorization", "") + sent.get("x-api-key", ""))
    assert SECRET.encode() not in log.read_bytes()


def test_a_stream_reaches_the_client_event_by_event(up: Upstream, rec: tuple[str, Path]) -> None:
    url, log = rec
    before = count(log)
    up.gate = threading.Event()
    try:
        body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "gated"}]}
        with httpx.Client(timeout=60) as c, c.stream("POST", url + "/v1/chat/completions", json=body) as r:
            chunks = r.iter_raw()
            first = next(chunks)                  # arrives while the upstream holds the rest back
            assert first.startswith(b"data: ") and b'"role": "assistant"' in first
            assert not up.gate.is_set()
            up.gate.set()
            rest = b"".join(chunks)
        assert rest.endswith(b"data: [DONE]\n\n")
        assert log_lines(log, before + 1)[before]["request"]["messages"][0]["content"] == "gated"
    finally:
        up.gate = None


def test_other_paths_pass_through_and_are_not_logged(up: Upstream, rec: tuple[str, Path]) -> None:
    url, log = rec
    before = count(log)
    r = httpx.get(url + "/v1/models?limit=2", headers={"Authorization": f"Bearer {SECRET}"}, timeout=30)
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "m"
    assert up.seen[-1].path == "/v1/models?limit=2"
    health = httpx.get(url + "/__workbench__/health", timeout=30).json()
    assert health["passed"] >= 1 and health["calls"] == count(log) == before


# --------------------------------------------------------------------- conversations
def post(url: str, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(url + path, json=body, headers=headers, timeout=60)


def test_conversation_ids_come_from_the_header_the_request_then_the_prefix(up: Upstream, rec: tuple[str, Path]) -> None:
    url, log = rec
    before = count(log)
    q = {"role": "user", "content": "What is 2+2?"}
    post(url, "/v1/chat/completions", {"model": "m", "messages": [q]}, **{"X-Conversation-Id": "from-header"})
    post(url, "/v1/chat/completions", {"model": "m", "messages": [q], "prompt_cache_key": "pck-1"})
    post(url, "/v1/messages", {"model": "m", "max_tokens": 9, "messages": [q], "metadata": {"user_id": "u-9"}})
    post(url, "/v1/chat/completions", {"model": "m", "messages": [q], "user": "alice"})
    first = post(url, "/v1/chat/completions", {"model": "m", "messages": [q]}).json()
    # The next call sends the reply back as the SDKs do (nulls and key order changed), then a new question.
    back = {"content": first["choices"][0]["message"]["content"], "role": "assistant"}
    post(url, "/v1/chat/completions", {"model": "m", "messages": [{"role": "system", "content": "Now: 10:02"}, q, back,
                                                                  {"role": "user", "content": "And 3+3?"}]})
    post(url, "/v1/chat/completions", {"model": "m", "messages": [q]})      # same opening, a new conversation
    lines = log_lines(log, before + 7)[before:]
    got = [(x["conversation_id"], x["conversation_from"]) for x in lines]
    assert got[:4] == [("from-header", "header"), ("pck-1", "prompt_cache_key"), ("u-9", "metadata.user_id"),
                       ("alice", "user")]
    assert got[4][1] == "new" and got[5] == (got[4][0], "prefix") and got[6][1] == "new" and got[6][0] != got[4][0]


def test_a_responses_chain_joins_by_previous_response_id(up: Upstream, rec: tuple[str, Path]) -> None:
    url, log = rec
    before = count(log)
    r1 = post(url, "/v1/responses", {"model": "m", "input": "Tell me a joke"}).json()
    post(url, "/v1/responses", {"model": "m", "previous_response_id": r1["id"], "input": "Another"})
    a, b = log_lines(log, before + 2)[before:]
    assert b["conversation_id"] == a["conversation_id"] and b["conversation_from"] == "previous_response_id"
    assert a["response"]["id"] == r1["id"]


# --------------------------------------------------------------------- bad input
def test_a_body_that_is_not_a_request_passes_untouched_and_is_logged_as_a_bad_line(up: Upstream,
                                                                                 rec: tuple[str, Path]) -> None:
    url, log = rec
    before, seen = count(log), len(up.seen)
    raw = b'{"model": "m", "messages": [ oops'
    r = httpx.post(url + "/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["message"] == "not JSON"     # the upstream's own answer
    assert up.seen[seen].body == raw
    r = httpx.post(url + "/v1/messages", json={"model": "m", "prompt": "no messages"}, timeout=30)
    bad = log_lines(log, before + 2)[before:]
    assert "conversation_id" not in bad[0] and bad[0]["unrecorded"]["reason"].startswith("the body is not JSON")
    assert bad[1]["unrecorded"]["reason"] == "a messages request has a 'messages' list"
    assert bad[0]["unrecorded"]["path"] == "/v1/chat/completions"


def test_upstream_errors_reach_the_client_as_sent_and_are_logged(up: Upstream, rec: tuple[str, Path]) -> None:
    url, log = rec
    before = count(log)
    oai = openai.OpenAI(base_url=url + "/v1", api_key=SECRET, max_retries=0, timeout=60)
    with pytest.raises(openai.NotFoundError, match="The model does not exist"):
        oai.chat.completions.create(model="missing-model", messages=[{"role": "user", "content": "x"}])
    (line,) = log_lines(log, before + 1)[before:]
    assert line["status"] == 404 and line["response"]["error"]["code"] == "model_not_found"


def test_a_body_over_the_limit_is_refused_and_counted(up: Upstream, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with recorder(up.base, log, "--max-body-mb", "1") as url:
        seen = len(up.seen)
        big = {"model": "m", "messages": [{"role": "user", "content": "x" * (10 << 20)}]}
        r = httpx.post(url + "/v1/chat/completions", json=big, timeout=60)
        assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
        assert len(up.seen) == seen                                  # never sent on
        assert httpx.get(url + "/__workbench__/health", timeout=30).json()["too_large"] == 1
        (line,) = log_lines(log, 1)
        assert line["unrecorded"]["status"] == 413


def test_an_unreachable_upstream_is_a_502_and_a_silent_one_a_504(up: Upstream, tmp_path: Path) -> None:
    dead = Upstream(port=1)                         # nothing listens on port 1 here
    with recorder(dead.base, tmp_path / "a.jsonl") as url:
        r = post(url, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
        assert r.status_code == 502 and r.json()["error"]["type"] == "upstream_error"
        (line,) = log_lines(tmp_path / "a.jsonl", 1)
        assert line["status"] == 502 and line["error"]
    up.delay = 3.0
    try:
        with recorder(up.base, tmp_path / "b.jsonl", "--read-timeout", "0.5") as url:
            r = post(url, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
            assert r.status_code == 504 and r.json()["error"]["type"] == "upstream_timeout"
            (line,) = log_lines(tmp_path / "b.jsonl", 1)
            assert line["status"] == 504
    finally:
        up.delay = 0.0


def test_a_client_that_goes_away_mid_stream_ends_the_upstream_call(up: Upstream, rec: tuple[str, Path]) -> None:
    url, log = rec
    before = count(log)
    up.gate, up.gone = threading.Event(), threading.Event()
    try:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "leaving"}]}
        with httpx.Client(timeout=60) as c, c.stream("POST", url + "/v1/chat/completions", json=body) as r:
            next(r.iter_raw())
        # the client closed its connection with the upstream still holding the reply back
        (line,) = log_lines(log, before + 1)[before:]
        assert line["error"] == "the client went away before the reply ended"
        assert line["request"]["messages"][0]["content"] == "leaving"
        up.gate.set()
        assert up.gone.wait(30)               # the upstream's next write found its client gone
    finally:
        up.gate = None


LAST_EVENTS = [("/v1/chat/completions", b"data: [DONE]"), ("/v1/responses", b"event: response.completed"),
               ("/v1/messages", b"event: message_stop")]


def read_to_last_event_and_leave(url: str, path: str, last: bytes) -> None:
    """As an SDK does: a streamed call read up to its last event, then the connection closed."""
    body: dict[str, Any] = {"model": "m", "stream": True, "max_tokens": 9, "stream_options": {"include_usage": True}}
    body.update({"input": "bye"} if path.endswith("responses") else {"messages": [{"role": "user",
                                                                                    "content": "bye"}]})
    got = b""
    with httpx.Client(timeout=60) as c, c.stream("POST", url + path, json=body) as r:
        for chunk in r.iter_raw():
            got += chunk
            if last in got and got.endswith(b"\n\n"):
                break


@pytest.mark.parametrize("path, last", LAST_EVENTS)
def test_a_client_that_leaves_after_the_last_event_got_a_whole_reply(up: Upstream, rec: tuple[str, Path],
                                                                     path: str, last: bytes) -> None:
    """SDKs close the connection once they have read a stream's last event, which may be before the
    upstream's end of the reply: that call is whole, not cut."""
    url, log = rec
    before = count(log)
    up.hold_end = threading.Event()
    try:
        read_to_last_event_and_leave(url, path, last)
        (line,) = log_lines(log, before + 1)[before:]
        assert "error" not in line and line["response"]["usage"]
    finally:
        up.hold_end.set()
        up.hold_end = None


def test_a_client_that_leaves_as_the_reply_ends_got_a_whole_reply(up: Upstream, rec: tuple[str, Path]) -> None:
    """The race behind a CI failure: the SDK closes its connection after the last event while the
    recorder is still writing the reply's end (the chunked body's last chunk). Whichever side sees
    the close first, that call is whole: no error on its line, not counted as a client gone. (The
    race is narrow: this drives that ending 45 times; it did not fail here before the fix.)"""
    url, log = rec
    gone = httpx.get(url + "/__workbench__/health", timeout=30).json().get("client_gone", 0)
    before = count(log)
    for path, last in LAST_EVENTS * 15:
        read_to_last_event_and_leave(url, path, last)
    lines = log_lines(log, before + 45)[before:]
    assert [line.get("error") for line in lines] == [None] * 45 and all(line["response"]["usage"] for line in lines)
    assert httpx.get(url + "/__workbench__/health", timeout=30).json().get("client_gone", 0) == gone


def test_the_log_rotates_by_size_and_every_line_stays_whole(up: Upstream, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with recorder(up.base, log, "--rotate-mb", str(4096 / 2**20), "--backups", "2") as url:
        for k in range(24):                      # about 660 bytes a line: six to a file
            post(url, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": f"q{k}"}]})
        deadline = time.monotonic() + 30
        files = [log, log.with_name("calls.jsonl.1"), log.with_name("calls.jsonl.2")]
        while time.monotonic() < deadline and not all(f.exists() for f in files):
            time.sleep(0.05)
    assert not log.with_name("calls.jsonl.3").exists()
    lines = [json.loads(x) for f in files for x in f.read_bytes().splitlines()]
    assert all(f.read_bytes().endswith(b"\n") and f.stat().st_size <= 4096 for f in files)
    asked = {m["request"]["messages"][0]["content"] for m in lines}
    assert asked <= {f"q{k}" for k in range(24)} and "q23" in asked and len(lines) == len(asked) >= 12


def test_the_cli_refuses_bad_options_with_one_error_line(tmp_path: Path) -> None:
    for args, says in ((["--upstream", "ftp://x"], "not an http(s) URL"),
                       (["--upstream", "http://x", "--read-timeout", "nan"], "--read-timeout must be a positive"),
                       (["--upstream", "http://x", "--port", "70000"], "--port must be between"),
                       (["--upstream", "http://x", "--max-body-mb", "0"], "--max-body-mb must be")):
        p = subprocess.run([sys.executable, "-m", "workbench.cli.main", "record", *args, "--log",
                            str(tmp_path / "x.jsonl")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={**os.environ})
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("error:"), p.stderr
        assert says in p.stderr


def test_only_a_path_goes_on_to_the_upstream(up: Upstream, rec: tuple[str, Path]) -> None:
    """A request target that is not a path (absolute form, or "@host" that would turn the upstream's
    host into a user name) is refused before anything is sent."""
    url, _ = rec
    host, port = url.removeprefix("http://").split(":")
    seen = len(up.seen)
    for target in ("@127.0.0.1:1/v1/models", "http://127.0.0.1:1/v1/models"):
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.split(b"\r\n")[0].split()[1] in (b"400",), answer[:200]
    assert len(up.seen) == seen


def raw_exchange(url: str, data: bytes) -> bytes:
    """Send `data` on a fresh connection; the answer's head."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(data)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer and (chunk := s.recv(65536)):
                answer += chunk          # the status line and headers are enough (the server may linger)
        except OSError:
            pass
    return answer


def test_a_header_flood_and_a_slow_body_are_bounded(up: Upstream, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    with recorder(up.base, log, "--body-timeout", "1") as url:
        seen = len(up.seen)
        flood = b"".join(b"X-H%d: v\r\n" % k for k in range(500))
        answer = raw_exchange(url, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + flood + b"\r\n")
        assert answer.split(b"\r\n")[0].split()[1] in (b"400", b"431"), answer[:200]
        long_line = b"X-Long: " + b"a" * 20_000 + b"\r\n"
        answer = raw_exchange(url, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + long_line + b"\r\n")
        assert answer.split(b"\r\n")[0].split()[1] in (b"400", b"431"), answer[:200]
        # A body that trickles: 408 once --body-timeout has passed, nothing sent on.
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" \
               b"Content-Length: 100\r\nConnection: close\r\n\r\n{"
        answer = raw_exchange(url, head)
        assert answer.split(b"\r\n")[0].split()[1] == b"408", answer[:200]
        assert len(up.seen) == seen
        health = httpx.get(url + "/__workbench__/health", timeout=30).json()
        assert health["slow_client"] == 1
        (line,) = log_lines(log, 1)
        assert line["unrecorded"]["status"] == 408
        # and the recorder still serves
        r = post(url, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "still here"}]})
        assert r.status_code == 200 and len(up.seen) == seen + 1
