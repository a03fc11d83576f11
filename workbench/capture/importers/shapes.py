"""The pieces every importer writes the same way: timestamps, tool-call arguments, data URLs, the
response object (in the shape its API returns it) and its usage.

A log line's `response` is the reply as the API returns it when not streaming, as `workbench record`
logs it: a Chat Completions response (`choices[].message`, `usage`) for an OpenAI-shaped request,
an Anthropic Messages response (`content` blocks, `stop_reason`, `usage`) for an Anthropic one.
A trace records usage as counts, not the provider's JSON; they are put back under the API's own
names, as the semantic conventions define them: `gen_ai.usage.input_tokens` includes cached
tokens, which is what OpenAI's `prompt_tokens` counts; Anthropic's `input_tokens` does not, so the
cached counts are taken off it (docs/importing.md)."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from ...media import sniff_format
from ..log_line import utc_timestamp

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_IMAGE_MIME = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


def iso_from_ns(ns: int) -> str:
    """Nanoseconds since the epoch as the ISO-8601 text a log line carries (microseconds: the
    nanoseconds are below any clock a client's timestamp has)."""
    return utc_timestamp(_EPOCH + timedelta(microseconds=ns // 1000))


def ns_from_iso(text: Any) -> int | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    delta = t - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def latency_ms(start_ns: int | None, end_ns: int | None) -> float | None:
    if start_ns is None or end_ns is None or end_ns < start_ns:
        return None
    return round((end_ns - start_ns) / 1e6, 3)


def arguments_text(args: Any) -> str:
    """Tool-call arguments as the string a Chat Completions message carries. A trace that parsed
    them into an object has lost their exact text; they are written back as compact JSON, the
    form the models' own replies use."""
    if isinstance(args, str):
        return args
    if args is None:
        return "{}"
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def arguments_object(args: Any) -> Any:
    """Tool-call arguments as the object an Anthropic `tool_use` block carries."""
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return {} if args is None else args


def text_of(value: Any) -> str:
    """A tool result or other content recorded as any JSON value, as the text a message carries."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def mime_of(b64: str, declared: Any, modality: Any) -> str:
    """The media type of base64 content: the one recorded, else the one its first bytes announce."""
    if isinstance(declared, str) and "/" in declared:
        return declared
    try:
        head = base64.b64decode(b64[:64] + "=" * (-len(b64[:64]) % 4), validate=False)
    except (binascii.Error, ValueError):
        head = b""
    fmt = sniff_format(head)
    if fmt is not None and fmt in _IMAGE_MIME:
        return _IMAGE_MIME[fmt]
    if head.startswith(b"%PDF"):
        return "application/pdf"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    return {"image": "image/png", "audio": "audio/wav"}.get(str(modality), "application/octet-stream")


def openai_usage(*, prompt: Any = None, completion: Any = None, total: Any = None, cache_read: Any = None,
                 cache_write: Any = None, reasoning: Any = None) -> dict[str, Any] | None:
    """Chat Completions usage from counts; only what was recorded (no total is made up)."""
    u: dict[str, Any] = {}
    for key, v in (("prompt_tokens", prompt), ("completion_tokens", completion), ("total_tokens", total)):
        if _count(v):
            u[key] = v
    if _count(cache_read):
        u["prompt_tokens_details"] = {"cached_tokens": cache_read}
    if _count(reasoning):
        u["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    if _count(cache_write):
        u["cache_creation_input_tokens"] = cache_write   # no Chat Completions field; the name proxies use
    return u or None


def anthropic_usage(*, prompt: Any = None, completion: Any = None, cache_read: Any = None,
                    cache_write: Any = None) -> dict[str, Any] | None:
    u: dict[str, Any] = {}
    if _count(prompt):
        cached = sum(v for v in (cache_read, cache_write) if _count(v))
        # The conventions count cached tokens in input_tokens, Anthropic does not. A recorded input
        # smaller than the cached counts was evidently recorded the Anthropic way: kept as it is.
        u["input_tokens"] = prompt - cached if prompt >= cached else prompt
    if _count(completion):
        u["output_tokens"] = completion
    if _count(cache_read):
        u["cache_read_input_tokens"] = cache_read
    if _count(cache_write):
        u["cache_creation_input_tokens"] = cache_write
    return u or None


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def openai_response(choices: list[tuple[dict[str, Any], Any]], *, usage: dict[str, Any] | None, model: str | None,
                    response_id: Any) -> dict[str, Any] | None:
    """A Chat Completions response: `choices` as (message, finish_reason) pairs."""
    if not choices and usage is None:
        return None
    r: dict[str, Any] = {}
    if isinstance(response_id, str) and response_id:
        r["id"] = response_id
    r["object"] = "chat.completion"
    if model:
        r["model"] = model
    r["choices"] = [{"index": i, "message": m, "finish_reason": fr if isinstance(fr, str) else None}
                    for i, (m, fr) in enumerate(choices)]
    if usage is not None:
        r["usage"] = usage
    return r


def anthropic_response(content: list[dict[str, Any]] | None, *, stop_reason: Any, usage: dict[str, Any] | None,
                       model: str | None, response_id: Any) -> dict[str, Any] | None:
    if content is None and usage is None:
        return None
    r: dict[str, Any] = {}
    if isinstance(response_id, str) and response_id:
        r["id"] = response_id
    r.update({"type": "message", "role": "assistant", "content": content or []})
    if model:
        r["model"] = model
    r["stop_reason"] = stop_reason if isinstance(stop_reason, str) else None
    if usage is not None:
        r["usage"] = usage
    return r


def first_str(*values: Any) -> str | None:
    for v in values:
        if isinstance(v, str) and v:
            return v
    return None
