"""`--from litellm`: LiteLLM proxy spend logs (rows of `LiteLLM_SpendLogs`) -> request-log calls.

A row as the proxy's `/spend/logs` endpoint returns it or as a database export holds it (JSON
columns as objects or as JSON text; schema: LiteLLM's `schema.prisma`, model LiteLLM_SpendLogs):

- the request: `proxy_server_request`, the body the client sent the proxy, else the older
  `messages` column. LiteLLM stores either only with `store_prompts_in_spend_logs` on; a row
  without them is a bad record. LiteLLM cuts every string longer than
  MAX_STRING_LENGTH_PROMPT_IN_DB (`... (litellm_truncated skipped N chars) ...`): such a row is
  imported with a warning, since its text is not what was sent;
- the shape: `call_type` (`completion`/`acompletion`: Chat Completions; `anthropic_messages`:
  Anthropic; `responses`/`aresponses`: a Responses request, kept as sent); other call types
  (embeddings, images, audio) are no chat call and are counted as ignored, as are failed calls;
- the reply and usage: `response` as stored (the response object LiteLLM returned), else the
  usage LiteLLM recorded (`metadata.usage_object`, else the token columns, with
  `cache_read_input_tokens` where the row has it);
- `session_id` (the conversation; else `litellm_session_id` / `litellm_trace_id` in the request,
  else the request id), `startTime` / `endTime` (or `request_duration_ms`), `model`,
  `custom_llm_provider`, and the key alias (`metadata.user_api_key_alias`) as the client."""

from __future__ import annotations

import json
from typing import Any

from ... import strict_json
from .records import ImportedCall, NotACall, RecordError
from .requests_check import find_string
from .shapes import first_str, iso_from_ns, latency_ms, ns_from_iso

TRUNCATED = "litellm_truncated skipped"
CHAT = frozenset(("completion", "acompletion"))
ANTHROPIC = frozenset(("anthropic_messages", "aanthropic_messages"))
RESPONSES = frozenset(("responses", "aresponses"))


def record_id(rec: dict[str, Any]) -> str | None:
    return first_str(rec.get("request_id"))


def _column(rec: dict[str, Any], key: str) -> Any:
    """A JSON column: an object as the API returns it, or JSON text as the table stores it."""
    v = rec.get(key)
    if isinstance(v, str) and v.strip()[:1] in ("{", "["):
        try:
            return strict_json.loads(v)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{key}: not valid JSON: {exc.msg} at column {exc.colno}") from None
    return v


def convert(rec: dict[str, Any]) -> tuple[ImportedCall, list[str]]:
    call_type = rec.get("call_type")
    if not isinstance(call_type, str) or not call_type:
        raise RecordError("call_type: missing")
    if call_type not in CHAT | ANTHROPIC | RESPONSES:
        raise NotACall(f"not a chat call (call_type {call_type})")
    if rec.get("status") == "failure":
        raise NotACall("failed call (status failure)")
    metadata = _column(rec, "metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    body = _column(rec, "proxy_server_request")
    request: dict[str, Any] | None = None
    if isinstance(body, dict) and ("messages" in body or "input" in body):
        request = dict(body)
    else:
        msgs = _column(rec, "messages")
        if isinstance(msgs, list) and msgs:
            request = {"messages": msgs}
    if request is None:
        raise RecordError("no request stored (proxy_server_request and messages are empty): LiteLLM keeps them "
                          "only with store_prompts_in_spend_logs on")
    if call_type in RESPONSES and "input" not in request:
        raise RecordError(f"proxy_server_request: a Responses request has 'input' (call_type {call_type})")
    if call_type not in RESPONSES and not isinstance(request.get("messages"), list):
        raise RecordError("proxy_server_request.messages: a list of messages")
    warnings = []
    cut = find_string(request, TRUNCATED)
    if cut is not None:
        warnings.append(f"{cut}: LiteLLM cut this text to MAX_STRING_LENGTH_PROMPT_IN_DB before storing it; the "
                        "imported request is not what was sent (raise that limit to keep whole prompts)")
    start = ns_from_iso(rec.get("startTime"))
    if start is None:
        raise RecordError(f"startTime: an ISO-8601 date and time, got {str(rec.get('startTime'))[:40]!r}")
    end = ns_from_iso(rec.get("endTime"))
    duration = rec.get("request_duration_ms")
    latency = float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) \
        and duration >= 0 else latency_ms(start, end)
    conv = first_str(rec.get("session_id"), request.get("litellm_session_id"), request.get("litellm_trace_id"),
                     rec.get("request_id"))
    if conv is None:
        raise RecordError("no session_id and no request_id: the call belongs to no conversation")
    response = _column(rec, "response")
    if not isinstance(response, dict) or not response:
        response = None
    if response is None or "usage" not in response:
        usage = _usage(rec, metadata)
        if usage is not None:
            response = {**(response or {}), "usage": usage}
    call = ImportedCall(conv, iso_from_ns(start), request, start, model=first_str(rec.get("model")),
                        provider=first_str(rec.get("custom_llm_provider")),
                        client=first_str(metadata.get("user_api_key_alias")), latency_ms=latency, response=response)
    return call, warnings


def _usage(rec: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any] | None:
    obj = metadata.get("usage_object")
    if isinstance(obj, dict) and obj:
        return obj
    u: dict[str, Any] = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        v = rec.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            u[key] = v
    cached = rec.get("cache_read_input_tokens")
    if isinstance(cached, int) and not isinstance(cached, bool):
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    written = rec.get("cache_creation_input_tokens")
    if isinstance(written, int) and not isinstance(written, bool):
        u["cache_creation_input_tokens"] = written
    # A row of zeros is what LiteLLM writes when it saw no usage: nothing was reported.
    return u if any(isinstance(v, int) and v for v in u.values()) or "prompt_tokens_details" in u else None
