"""A local upstream for the official `openai` SDK, and OTLP JSON as real exporters write it.

The upstream is a plain http.server on 127.0.0.1 that answers each POST with the next canned
Chat Completions reply and keeps every request body it received: what the SDK really sent, the
oracle the imported requests are compared with (never our own intake's view of them)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def completion(content: str | None = "ok", *, tool_calls: list[dict[str, Any]] | None = None,
               finish: str = "stop", usage: dict[str, Any] | None = None, model: str = "gpt-4o-2024-08-06",
               rid: str = "chatcmpl-1") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": rid, "object": "chat.completion", "created": 1767225600, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}


@dataclass
class Upstream:
    replies: list[dict[str, Any]]
    received: list[dict[str, Any]] = field(default_factory=list)   # Chat Completions bodies, in order
    other: list[str] = field(default_factory=list)                 # any other path asked for
    port: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextmanager
def upstream(*replies: dict[str, Any]) -> Iterator[Upstream]:
    state = Upstream(list(replies))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n)
            if not self.path.endswith("/chat/completions"):
                # Not a model call (a tracing SDK's own upload, say): never part of the oracle.
                with lock:
                    state.other.append(self.path)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = json.loads(raw)
            with lock:
                state.received.append(body)
                reply = state.replies[min(len(state.received), len(state.replies)) - 1]
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def client(up: Upstream) -> Any:
    import openai
    # No retries: a failed call must fail the test, not be sent twice (the oracle counts requests).
    return openai.OpenAI(base_url=up.base_url, api_key="test-key", max_retries=0)


@dataclass
class Tracing:
    tracer_provider: Any
    spans: Any
    logger_provider: Any
    logs: Any

    def traces_json(self) -> dict[str, Any]:
        """The finished spans as an OTLP JSON ExportTraceServiceRequest: the SDK's own protobuf
        encoding, turned into JSON by protobuf's json_format (what an OTLP JSON file holds)."""
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        return MessageToDict(encode_spans(self.spans.get_finished_spans()))

    def logs_json(self) -> dict[str, Any]:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
        return MessageToDict(encode_logs(self.logs.get_finished_logs()))


def tracing() -> Tracing:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    resource = Resource.create({"service.name": "support-bot"})
    tp = TracerProvider(resource=resource)
    spans = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    lp = LoggerProvider(resource=resource)
    logs = InMemoryLogRecordExporter()
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    return Tracing(tp, spans, lp, logs)


def write_json(path: Path, value: Any, *, lines: bool = False) -> Path:
    if lines:
        items = value if isinstance(value, list) else [value]
        path.write_text("".join(json.dumps(v) + "\n" for v in items), encoding="utf-8")
    else:
        path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return path


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def run_import(*args: str) -> tuple[int, str, str]:
    """`workbench import ARGS` in this process: (exit status, stdout, stderr)."""
    import contextlib
    import io

    from workbench.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["import", *args])
    return code, out.getvalue(), err.getvalue()


def value(v: Any) -> dict[str, Any]:
    """A Python value as an OTLP AnyValue, written by hand the way the OTLP/JSON spec shows it."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": value(x)} for k, x in v.items()]}}
    return {}


def span(attrs: dict[str, Any] | list[tuple[str, Any]], *, trace: str = "5b8efff798038103d269b633813fc60c",
         span_id: str = "eee19b7ec3c1b174", start: int | str = 1767225600000000000,
         end: int | str = 1767225601500000000, **extra: Any) -> dict[str, Any]:
    """One span as the OTLP/JSON spec writes it (hex ids, int64 as strings)."""
    pairs = attrs.items() if isinstance(attrs, dict) else attrs
    return {"traceId": trace, "spanId": span_id, "name": "chat gpt-4o", "kind": 3,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
            "attributes": [{"key": k, "value": value(v)} for k, v in pairs], **extra}


def export(*spans: dict[str, Any], service: str = "hand-written") -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                               "scopeSpans": [{"scope": {"name": "hand"}, "spans": list(spans)}]}]}


@contextmanager
def instrumented(instrumentor: Any) -> Iterator[Tracing]:
    """Fresh in-memory tracing with `instrumentor` (an instrumentation's OpenAIInstrumentor) on it,
    taken off again afterwards: the patch it puts on the openai package must not outlive the test."""
    t = tracing()
    instrumentor.instrument(tracer_provider=t.tracer_provider)
    try:
        yield t
    finally:
        instrumentor.uninstrument()
