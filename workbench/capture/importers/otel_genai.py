"""`--from otel`: OpenTelemetry GenAI spans and events (OTLP JSON) -> request-log calls.

Read, per span (docs/importing.md has the whole mapping):

- the current conventions: `gen_ai.input.messages`, `gen_ai.output.messages`,
  `gen_ai.system_instructions`, `gen_ai.tool.definitions`, as span attributes (a JSON string or a
  structured value) or on the `gen_ai.client.inference.operation.details` event, either a span
  event or a log record tied to the span by its ids (an event alone, without its span, is a call
  too: its time is when it was emitted, the call's end);
- the older indexed attributes, `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` with
  `llm.request.functions.N.*` (opentelemetry-instrumentation-openai up to 0.54): otel_legacy.py;
- usage (`gen_ai.usage.*`), models (`gen_ai.request.model`, `gen_ai.response.model`), the provider
  (`gen_ai.provider.name`, formerly `gen_ai.system`) and the request's sampling parameters.

A span whose provider is `anthropic` gives an Anthropic Messages request; any other, a Chat
Completions request. Spans of other operations (agents, tools, embeddings) are not calls and are
counted as ignored; a chat span without messages (content capture off) is a bad record."""

from __future__ import annotations

import json
from typing import Any

from ... import strict_json
from . import otel_legacy
from .genai_attrs import params, usage
from .otlp import Attrs, LogEvent, Span
from .records import ImportedCall, NotACall, RecordError
from .semconv_parts import (
    anthropic_reply,
    anthropic_request,
    anthropic_tools,
    openai_messages,
    openai_reply,
    openai_tools,
)
from .shapes import (
    anthropic_response,
    first_str,
    iso_from_ns,
    latency_ms,
    openai_response,
)

EVENT = "gen_ai.client.inference.operation.details"
SESSION_KEYS = ("gen_ai.conversation.id", "session.id", "langfuse.session.id",
                "traceloop.association.properties.session_id")
# Operations that are one model call. Others (invoke_agent, execute_tool, embeddings, ...) are not.
CALL_OPERATIONS = frozenset(("chat", "text_completion", "generate_content", "completion"))
CONTENT = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions")


def merged(span: Span | None, events: list[LogEvent]) -> Attrs:
    """The span's attributes with its inference event's content filled in: an instrumentation may
    put the messages on the event only (`event_only`), or on both."""
    attrs = Attrs(dict(span.attrs.values), list(span.attrs.conflicts), list(span.attrs.problems)) if span else Attrs()
    extra: list[Attrs] = [e.attrs for e in (span.events if span else []) if e.name == EVENT]
    extra += [e.attrs for e in events if e.event_name == EVENT]
    for a in extra:
        for key, value in a.values.items():
            attrs.values.setdefault(key, value)
    return attrs


def convert(attrs: Attrs, *, start_ns: int | None, end_ns: int | None, conversation: str,
            client: str | None) -> tuple[ImportedCall, list[str]]:
    """One call from a span's (merged) attributes; raise NotACall or RecordError."""
    a = attrs.values
    if attrs.problems:
        raise RecordError(attrs.problems[0])
    op = first_str(a.get("gen_ai.operation.name"), a.get("llm.request.type"))
    has_new = any(k in a for k in CONTENT)
    has_old = any(k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in a)
    if op is not None and op not in CALL_OPERATIONS:
        raise NotACall(f"not a model call (gen_ai.operation.name={op})")
    if not has_new and not has_old:
        if op is None and not any(k.startswith("gen_ai.") for k in a):
            raise NotACall("not a GenAI span")
        raise RecordError("no messages recorded (gen_ai.input.messages or gen_ai.prompt.N): the instrumentation "
                          "captured no content; turn content capture on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_"
                          "MESSAGE_CONTENT) and trace again")
    clash = [k for k in attrs.conflicts if k.startswith(("gen_ai.", "llm."))]
    if clash:
        raise RecordError(f"{clash[0]}: given twice with different values")
    if start_ns is None:
        raise RecordError("no start time (startTimeUnixNano missing or not a positive number)")
    provider = first_str(a.get("gen_ai.provider.name"), a.get("gen_ai.system"))
    anthropic = provider is not None and provider.lower() == "anthropic"
    if has_new:
        request, response, warnings = _current(a, anthropic)
    else:
        request, response, warnings = otel_legacy.convert(a, anthropic)
    model = first_str(a.get("gen_ai.request.model"))
    params(request, a, anthropic, model)
    call = ImportedCall(conversation, iso_from_ns(start_ns), request, start_ns,
                        model=first_str(a.get("gen_ai.response.model"), model), provider=provider, client=client,
                        latency_ms=latency_ms(start_ns, end_ns), response=response)
    return call, warnings


def _json(a: dict[str, Any], key: str) -> Any:
    """A content attribute: structured, or a JSON string (how spans carry it)."""
    v = a.get(key)
    if not isinstance(v, str):
        return v
    try:
        return strict_json.loads(v, max_depth=strict_json.MAX_DEPTH)
    except json.JSONDecodeError as exc:
        cut = " (cut short: an attribute length limit?)" if exc.pos >= len(v.rstrip()) else ""
        raise RecordError(f"{key}: not valid JSON: {exc.msg} at column {exc.colno}{cut}") from None


def _current(a: dict[str, Any], anthropic: bool) -> tuple[dict[str, Any], dict[str, Any] | None, list[str]]:
    messages = _json(a, "gen_ai.input.messages")
    if messages is None:
        raise RecordError("gen_ai.input.messages: not recorded (only the output or the tools were): the request "
                          "cannot be rebuilt")
    system = _json(a, "gen_ai.system_instructions")
    tools = _json(a, "gen_ai.tool.definitions")
    output = _json(a, "gen_ai.output.messages")
    if output is not None and not isinstance(output, list):
        raise RecordError(f"gen_ai.output.messages: a list of messages, got {type(output).__name__}")
    usage_ = usage(a, anthropic)
    rid, rmodel = a.get("gen_ai.response.id"), first_str(a.get("gen_ai.response.model"))
    request: dict[str, Any]
    if anthropic:
        sys_value, msgs, warnings = anthropic_request(system, messages)
        request = {}
        if sys_value is not None:
            request["system"] = sys_value
        request["messages"] = msgs
        if tools is not None:
            request["tools"] = anthropic_tools(tools)
        blocks, stop = None, None
        if output:
            blocks, stop = anthropic_reply(output[0], "gen_ai.output.messages[0]", warnings)
        return request, anthropic_response(blocks, stop_reason=stop, usage=usage_, model=rmodel, response_id=rid), \
            warnings
    msgs, warnings = openai_messages(system, messages)
    request = {"messages": msgs}
    if tools is not None:
        request["tools"] = openai_tools(tools)
    choices = [openai_reply(m, f"gen_ai.output.messages[{i}]", warnings) for i, m in enumerate(output or [])]
    return request, openai_response(choices, usage=usage_, model=rmodel, response_id=rid), warnings
