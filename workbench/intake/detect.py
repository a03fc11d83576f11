"""Format detection and the one entry point: `normalize(request)`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from ..conversation import Conversation
from ..diagnostics import Diagnostic
from ..errors import FormatDetectionError, RequestError
from .anthropic import parse_anthropic
from .limits import IntakeLimits
from .openai import parse_openai
from .responses import is_responses, parse_responses

FORMATS = ("openai", "responses", "anthropic", "workbench")
# Content blocks only Anthropic's Messages API has (an image or document with a `source` too).
_ANTHROPIC_BLOCKS = frozenset(("tool_use", "tool_result", "thinking", "redacted_thinking"))


def detect_format(req: Any) -> str:
    """Name the request format: an explicit "format" wins, then structural evidence."""
    if not isinstance(req, dict):
        raise FormatDetectionError(f"a request must be a JSON object, got {type(req).__name__}")
    fmt = req.get("format")
    if fmt is not None:
        if fmt not in FORMATS:
            raise FormatDetectionError(f"unknown format {fmt!r}", field="format",
                                       hint=f"use one of {', '.join(FORMATS)}")
        return cast(str, fmt)  # one of FORMATS
    if is_responses(req):
        return "responses"
    if "messages" not in req:
        raise FormatDetectionError("no 'messages' list nor Responses 'input'", field="messages",
                                   hint="send a Chat Completions or Anthropic request with a 'messages' list, or a "
                                        "Responses request with 'input'")
    if "system" in req:
        return "anthropic"
    tools = req.get("tools") or []
    if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return "anthropic"
    msgs = req.get("messages")
    if isinstance(msgs, list):
        for m in msgs:
            if not isinstance(m, dict):
                continue
            if m.get("role") in ("system", "tool", "developer") or "tool_calls" in m or "tool_call_id" in m:
                return "openai"
            c = m.get("content")
            if isinstance(c, list) and any(isinstance(b, dict) and (b.get("type") in _ANTHROPIC_BLOCKS or (
                    b.get("type") in ("image", "document") and isinstance(b.get("source"), dict))) for b in c):
                return "anthropic"
    return "openai"  # plain user/assistant text reads the same in both


def normalize(req: Any, limits: IntakeLimits = IntakeLimits()) -> tuple[Conversation, list[Diagnostic]]:
    """Any supported request -> (Conversation, intake diagnostics)."""
    if isinstance(req, Conversation):
        return req, []
    fmt = detect_format(req)
    if fmt == "anthropic":
        return parse_anthropic(req, limits)
    if fmt == "responses":
        return parse_responses(req, limits)
    conv, diags = parse_openai(req, limits)
    if fmt == "workbench":
        conv = replace(conv, source_format="workbench")
    return conv, diags


__all__ = ["detect_format", "normalize", "FORMATS", "RequestError"]
