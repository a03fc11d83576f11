"""Anthropic Messages requests -> Conversation.

Anthropic keeps the system prompt at the top level and puts tool calls and tool
results in content blocks. Normalized: the system prompt becomes the first
message; `tool_use` blocks become the assistant's tool calls; each
`tool_result` block becomes a `tool` message, placed before any text the same
user turn carries (the results answer the previous assistant turn).
"""

from __future__ import annotations

import json
from typing import Any

from ..conversation import Conversation, MediaPart, Message, Part, ToolCall
from ..diagnostics import Diagnostic, info, warning
from ..errors import MediaError, RequestError
from . import parts
from .limits import MESSAGE_DEPTH, IntakeLimits, check_json, check_text, check_total, checked_messages
from .openai import check_open_call
from .params import parse_params, parse_request_variables, parse_template_flag

# Blocks of the provider's server tools (web search, code execution, MCP): results of work done on
# Anthropic's side.
_SERVER_BLOCKS = frozenset(("server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
                            "code_execution_tool_result", "bash_code_execution_tool_result",
                            "text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
                            "container_upload", "search_result"))


def _blocks(content: Any, *, index: int) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise RequestError(f"content must be a string or a list of blocks, got {type(content).__name__}",
                           field="content", index=index)
    for j, b in enumerate(content):
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            raise RequestError("a content block must be an object with a 'type'", field=f"content[{j}]",
                               index=index)
    return content


def _media_block(b: dict[str, Any], *, where: str, index: int, limits: IntakeLimits, seq: int,
                 diags: list[Diagnostic]) -> MediaPart:
    """An `image` or `document` block: its `source` is base64, a URL, or a file id (Files API)."""
    src = b.get("source")
    if not isinstance(src, dict) or not isinstance(src.get("type"), str):
        raise MediaError("needs a 'source' object with a 'type'", field=f"{where}.source", index=index,
                         hint='use {"type": "base64", "media_type": "image/png", "data": "..."}')
    kind = src["type"]
    if b["type"] == "image":
        if kind == "base64":
            return parts.image_base64(src.get("data"), src.get("media_type"), where=f"{where}.source", limits=limits,
                                      seq=seq, diags=diags, index=index)
        if kind == "url":
            url = src.get("url")
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise MediaError("a url source needs an http(s) 'url'", field=f"{where}.source.url", index=index)
            return parts.image(url, where=f"{where}.source", detail=None, limits=limits, seq=seq, diags=diags,
                               index=index)
        if kind == "file":
            return parts.image_file_id(src.get("file_id"), where=f"{where}.source", limits=limits, seq=seq,
                                       diags=diags, index=index)
        raise MediaError(f"unknown image source type {kind!r}", field=f"{where}.source.type", index=index,
                         hint="use base64, url or file")
    if kind in ("base64", "url", "file"):
        return parts.file(data=src.get("data") if kind == "base64" else None,
                          url=src.get("url") if kind == "url" else None,
                          file_id=src.get("file_id") if kind == "file" else None, filename=b.get("title"),
                          where=f"{where}.source", limits=limits, seq=seq, diags=diags, index=index)
    if kind == "text":   # a plain-text document: its text is what the model reads
        raise MediaError("a text document source is not supported yet; send its text as a text block",
                         field=f"{where}.source", index=index)
    raise MediaError(f"unknown document source type {kind!r}", field=f"{where}.source.type", index=index,
                     hint="use base64, url, file or text")


def _result_content(content: Any, *, index: int, field: str, limits: IntakeLimits,
                    diags: list[Diagnostic]) -> tuple[str, tuple[Part, ...]]:
    if content is None:
        return "", ()
    if isinstance(content, str):
        return check_text(content, field=field, index=index, limits=limits), ()
    if not isinstance(content, list):
        raise RequestError("tool_result content must be a string or a list of blocks", field=field, index=index)
    texts: list[str] = []
    out: list[Part] = []
    for j, b in enumerate(content):
        if isinstance(b, dict) and b.get("type") == "text":
            texts.append(check_text(b.get("text"), field=f"{field}[{j}].text", index=index, limits=limits))
            out.append(texts[-1])
        elif isinstance(b, dict) and b.get("type") in ("image", "document"):
            out.append(_media_block(b, where=f"{field}[{j}]", index=index, limits=limits, seq=index, diags=diags))
        else:
            kind = b.get("type") if isinstance(b, dict) else type(b).__name__
            raise RequestError(f"unknown tool_result block type {kind!r}", field=f"{field}[{j}]", index=index,
                               hint="tool_result content holds text, image and document blocks")
    media = any(not isinstance(p, str) for p in out)
    return "\n".join(texts), tuple(out) if media else ()


def _system(system: Any, limits: IntakeLimits) -> tuple[str | None, bool]:
    if system is None:
        return None, False
    if isinstance(system, str):
        return check_text(system, field="system", index=None, limits=limits), False
    if not isinstance(system, list):
        raise RequestError("must be a string or a list of text blocks", field="system")
    texts, cached = [], False
    for j, b in enumerate(system):
        if not isinstance(b, dict) or b.get("type") != "text":
            raise RequestError("system blocks must be text blocks", field=f"system[{j}]")
        texts.append(check_text(b.get("text"), field=f"system[{j}].text", index=None, limits=limits))
        cached = cached or isinstance(b.get("cache_control"), dict)
    # Anthropic concatenates system blocks; a blank line keeps them readable as one prompt.
    return "\n\n".join(texts), cached


def parse_tools(tools: Any, limits: IntakeLimits, diags: list[Diagnostic]) -> tuple[str, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise RequestError("tools must be a list", field="tools")
    out = []
    for j, t in enumerate(tools):
        if not isinstance(t, dict):
            raise RequestError("a tool needs a 'name' and an 'input_schema'", field=f"tools[{j}]")
        if not isinstance(t.get("name"), str) or not t["name"]:
            raise RequestError("a tool's name must be a non-empty string", field=f"tools[{j}].name",
                               hint="name the tool the model may call")
        if "input_schema" not in t:
            diags.append(warning("server_tool_skipped", f"tool {t['name']!r} has no input_schema (server tool)"))
            continue
        if not isinstance(t["input_schema"], dict):
            raise RequestError("input_schema must be a JSON schema object", field=f"tools[{j}].input_schema")
        fn: dict[str, Any] = {"name": t["name"]}
        if t.get("description") is not None:
            fn["description"] = t["description"]
        fn["parameters"] = t["input_schema"]
        text = json.dumps({"type": "function", "function": fn}, ensure_ascii=False)
        check_text(text, field=f"tools[{j}]", index=None, limits=limits)
        out.append(text)
    return tuple(out)


def parse_anthropic(req: dict[str, Any],
                    limits: IntakeLimits = IntakeLimits()) -> tuple[Conversation, list[Diagnostic]]:
    diags: list[Diagnostic] = []
    msgs = checked_messages(req, limits)
    out: list[Message] = []
    open_calls: dict[str, tuple[int, int]] = {}   # tool_use id -> where the call waiting for its result is
    seq = 0
    system, sys_cached = _system(req.get("system"), limits)
    if system is not None:
        is_template, local_vars = parse_template_flag(req.get("system_template"), field="system_template", index=None)
        out.append(Message(role="system", content=system, sequence=seq, cache_control=sys_cached,
                           template=is_template, variables=local_vars))
        seq += 1
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise RequestError(f"a message must be an object, got {type(m).__name__}", index=i)
        check_json(m, field=None, index=i, limits=limits, depth=MESSAGE_DEPTH)
        role = m.get("role")
        if role not in ("user", "assistant"):
            hint = "put the system prompt in the top-level 'system' field" if role == "system" else \
                "Anthropic messages have role 'user' or 'assistant'"
            raise RequestError(f"unknown role {role!r}", field="role", index=i, hint=hint)
        blocks = _blocks(m.get("content"), index=i)
        texts: list[str] = []
        content_parts: list[Part] = []
        calls: list[ToolCall] = []
        results: list[Message] = []
        thinking: str | None = None
        cached = False
        for j, b in enumerate(blocks):
            kind, where = b["type"], f"content[{j}]"
            cached = cached or isinstance(b.get("cache_control"), dict)
            if kind == "text":
                texts.append(check_text(b.get("text"), field=f"{where}.text", index=i, limits=limits))
                content_parts.append(texts[-1])
            elif kind in ("image", "document"):
                content_parts.append(_media_block(b, where=where, index=i, limits=limits, seq=seq, diags=diags))
            elif kind == "tool_use":
                if role != "assistant":
                    raise RequestError("tool_use blocks belong in assistant messages", field=where, index=i)
                for key in ("id", "name"):
                    if not isinstance(b.get(key), str) or not b[key]:
                        raise RequestError(f"tool_use needs a non-empty string {key!r}", field=f"{where}.{key}",
                                           index=i, hint="copy the id and the tool name the model produced")
                inp = b.get("input", {})
                if not isinstance(inp, dict):
                    raise RequestError("tool_use input must be an object", field=f"{where}.input", index=i)
                # The message was checked: plain JSON, so dumps cannot fail.
                calls.append(ToolCall(id=b["id"], name=b["name"], arguments=json.dumps(inp, ensure_ascii=False)))
                check_open_call(calls[-1], open_calls, index=i, j=j, field="content")
            elif kind == "tool_result":
                if role != "user":
                    raise RequestError("tool_result blocks belong in user messages", field=where, index=i)
                if not isinstance(b.get("tool_use_id"), str) or not b["tool_use_id"]:
                    raise RequestError("tool_result needs a non-empty 'tool_use_id' string",
                                       field=f"{where}.tool_use_id", index=i,
                                       hint="copy the id of the tool_use block it answers")
                text, result_parts = _result_content(b.get("content"), index=i, field=f"{where}.content",
                                                     limits=limits, diags=diags)
                if b.get("is_error"):
                    diags.append(info("tool_error_result", "tool_result marked is_error", seq))
                open_calls.pop(b["tool_use_id"], None)
                results.append(Message(role="tool", content=text, sequence=0, tool_call_id=b["tool_use_id"],
                                       cache_control=isinstance(b.get("cache_control"), dict), parts=result_parts))
            elif kind in ("thinking", "redacted_thinking"):
                if kind == "thinking":
                    thinking = check_text(b.get("thinking"), field=f"{where}.thinking", index=i, limits=limits)
            elif kind in _SERVER_BLOCKS:
                # The provider's own tools ran on its side: their blocks are its record, not the model's input
                # text as a template would write it.
                diags.append(warning("server_block_skipped", f"messages[{i}].{where}: a {kind!r} block (a tool the "
                                     "provider runs itself) has no chat-template form and is not rendered", seq))
            else:
                raise RequestError(f"unknown content block type {kind!r}", field=f"{where}.type", index=i,
                                   hint="Anthropic content blocks: text, image, document, tool_use, tool_result, "
                                        "thinking, redacted_thinking")
        for r in results:
            out.append(r.with_(sequence=seq))
            seq += 1
        if role == "assistant" or content_parts or not results:
            if len(texts) > 1:
                diags.append(info("parts_joined", f"{len(texts)} text blocks joined with a blank line", seq))
            content = "\n\n".join(texts) if texts else (None if role == "assistant" and not content_parts else "")
            media = any(not isinstance(p, str) for p in content_parts)
            is_template, local_vars = parse_template_flag(m.get("template"), field="template", index=i)
            out.append(Message(role=role, content=content, sequence=seq, tool_calls=tuple(calls),
                               reasoning=thinking, cache_control=cached, template=is_template,
                               variables=local_vars, parts=tuple(content_parts) if media else ()))
            seq += 1
    check_total(out, limits)
    conv = Conversation(messages=tuple(out), tools=parse_tools(req.get("tools"), limits, diags),
                        params=parse_params(req, "anthropic"), source_format="anthropic",
                        variables=parse_request_variables(req))
    return conv, diags
