"""`--from langfuse`: Langfuse observation exports -> request-log calls.

A record is an observation as Langfuse's public API returns it (`ObservationV2`, camelCase):
GENERATION observations are model calls; every other type (SPAN, EVENT, AGENT, TOOL, ...) is
counted as ignored. Read from a generation:

- `input`: the messages, as the integrations record them: a list of Chat Completions messages,
  or an object with `messages` and the `tools` / `functions` (the OpenAI integration), or an
  Anthropic request's `system` and `messages`; the request's shape is detected from them;
- `output`: the reply (a message object, its text, or a list of choices);
- `usageDetails` (else the older `usage`): Langfuse's own usage types (`input`, `output`,
  `total`, `input_cached_tokens`, ...), carried over as they are: they are Langfuse's names, and
  how an integration split a provider's counts into them is not recorded;
- `model`, `startTime` / `endTime`, `sessionId` (the conversation; else `traceId`).

`modelParameters` are not read: the OpenAI integration fills in defaults the client never sent.
An image the SDK uploaded to Langfuse's media store is a reference string in the export, not
its bytes: such a generation is a bad record (the request cannot be rebuilt as sent)."""

from __future__ import annotations

from typing import Any

from ...errors import WorkbenchError
from ...intake import detect_format
from .records import ImportedCall, NotACall, RecordError
from .requests_check import find_string
from .shapes import anthropic_response, first_str, iso_from_ns, latency_ms, ns_from_iso, openai_response

MEDIA_REF = "@@@langfuseMedia:"


def record_id(rec: dict[str, Any]) -> str | None:
    return first_str(rec.get("id"))


def convert(rec: dict[str, Any]) -> tuple[ImportedCall, list[str]]:
    kind = rec.get("type")
    if not isinstance(kind, str) or kind.upper() != "GENERATION":
        raise NotACall(f"not a generation (type {kind if isinstance(kind, str) else 'missing'})")
    request = _request(rec.get("input"))
    ref = find_string(request, MEDIA_REF, "input")
    if ref is not None:
        raise RecordError(f"{ref}: an image or file stored in Langfuse's media store; the export holds a reference, "
                          "not the bytes, so the request cannot be rebuilt as sent")
    start = ns_from_iso(rec.get("startTime"))
    if start is None:
        raise RecordError(f"startTime: an ISO-8601 date and time, got {str(rec.get('startTime'))[:40]!r}")
    conv = first_str(rec.get("sessionId"), rec.get("traceId"))
    if conv is None:
        raise RecordError("no sessionId and no traceId: the call belongs to no conversation")
    usage = rec.get("usageDetails")
    if not isinstance(usage, dict) or not usage:
        old = rec.get("usage")
        usage = {k: v for k, v in old.items() if v is not None} if isinstance(old, dict) else None
    usage = usage or None
    model = first_str(rec.get("model"))
    try:
        anthropic = detect_format(request) == "anthropic"
    except WorkbenchError as exc:
        raise RecordError(f"input: {exc.message}") from None
    output = rec.get("output")
    if anthropic:
        blocks: list[dict[str, Any]] | None = None
        stop = None
        if isinstance(output, dict):
            c = output.get("content")
            blocks = c if isinstance(c, list) else [{"type": "text", "text": c}] if isinstance(c, str) else []
            stop = output.get("stop_reason")
        elif isinstance(output, str):
            blocks = [{"type": "text", "text": output}]
        response = anthropic_response(blocks, stop_reason=stop, usage=usage, model=model, response_id=None)
    else:
        outs = output if isinstance(output, list) else [] if output is None else [output]
        choices = [(o if isinstance(o, dict) else {"role": "assistant", "content": o if isinstance(o, str) else None},
                    o.get("finish_reason") if isinstance(o, dict) else None) for o in outs]
        response = openai_response(choices, usage=usage, model=model, response_id=None)
    call = ImportedCall(conv, iso_from_ns(start), request, start, model=model, provider=None, client=None,
                        latency_ms=latency_ms(start, ns_from_iso(rec.get("endTime"))), response=response)
    return call, []


def _request(value: Any) -> dict[str, Any]:
    if value is None:
        raise RecordError("input: not recorded")
    if isinstance(value, list):
        return {"messages": value}
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        req: dict[str, Any] = {}
        if "system" in value:
            req["system"] = value["system"]
        req["messages"] = value["messages"]
        for key in ("tools", "functions", "tool_choice", "function_call"):
            if value.get(key) is not None:
                req[key] = value[key]
        return req
    if isinstance(value, str):
        raise RecordError("input: a string, not chat messages (a text completion or a custom generation)")
    raise RecordError(f"input: a list of messages or an object with 'messages', got {type(value).__name__}")
