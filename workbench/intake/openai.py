"""OpenAI Chat Completions requests -> Conversation."""

from __future__ import annotations

import json
from typing import Any

from ..conversation import ROLES, Conversation, Message, ToolCall
from ..diagnostics import Diagnostic, info, warning
from ..errors import RequestError
from .limits import (
    ARGUMENTS_DEPTH,
    MESSAGE_DEPTH,
    IntakeLimits,
    check_json,
    check_text,
    check_total,
    checked_messages,
    parse_json_text,
)
from .params import parse_params, parse_request_variables, parse_template_flag

_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
_PLAIN_ROLES = frozenset(("user", "assistant", "system"))
_JSON_TYPE = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
_KNOWN_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name", "refusal", "audio",
               "function_call", "cache_control", "template", *_REASONING_KEYS}


def parse_content(content: Any, *, index: int, limits: IntakeLimits,
                  diags: list[Diagnostic]) -> str | None:
    """A string, null, or a list of parts; text parts are concatenated in order."""
    if content is None or isinstance(content, str):
        return check_text(content, field="content", index=index, limits=limits, allow_none=True)
    if not isinstance(content, list):
        raise RequestError(f"content must be a string, null or a list of parts, got {type(content).__name__}",
                           field="content", index=index)
    texts: list[str] = []
    for j, part in enumerate(content):
        where = f"content[{j}]"
        if isinstance(part, str):
            texts.append(check_text(part, field=where, index=index, limits=limits))
            continue
        if not isinstance(part, dict) or "type" not in part:
            raise RequestError("a content part must be an object with a 'type'", field=where, index=index)
        if part["type"] in ("text", "input_text", "output_text"):
            texts.append(check_text(part.get("text"), field=f"{where}.text", index=index, limits=limits))
        else:
            diags.append(warning("non_text_part_dropped",
                                 f"content part of type {part['type']!r} is not rendered (text only)", index))
    if len(texts) > 1:
        diags.append(info("parts_joined", f"{len(texts)} text parts joined with a newline", index))
    return "\n".join(texts)


def parse_tool_call(tc: Any, *, index: int, j: int, limits: IntakeLimits) -> ToolCall:
    where = f"tool_calls[{j}]"
    if not isinstance(tc, dict):
        raise RequestError("a tool call must be an object", field=where, index=index)
    fn = tc.get("function")
    if not isinstance(fn, dict):
        raise RequestError("missing 'function' object", field=where, index=index,
                           hint='use {"id": ..., "type": "function", "function": {"name": ..., "arguments": "{...}"}}')
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError("function name must be a non-empty string", field=f"{where}.function.name", index=index,
                           hint="name the tool the call is for")
    args = fn.get("arguments", "{}")
    if isinstance(args, dict):
        args = json.dumps(args, ensure_ascii=False)  # the message was checked: plain JSON, dumps cannot fail
    args = check_text(args, field=f"{where}.function.arguments", index=index, limits=limits)
    parsed = parse_json_text(args, field=f"{where}.function.arguments", index=index, limits=limits,
                             depth=ARGUMENTS_DEPTH)
    if not isinstance(parsed, dict):
        # Templates read the arguments as a mapping (transformers passes them as a dict), and a
        # function's parameters are always an object.
        raise RequestError(f"arguments must encode a JSON object, got a JSON {_JSON_TYPE[type(parsed)]}",
                           field=f"{where}.function.arguments", index=index,
                           hint='send the arguments as an object encoded as a string, e.g. "{}"')
    call_id = tc.get("id")
    if call_id is None:
        call_id = f"call_{index}_{j}"
    if not isinstance(call_id, str) or not call_id:
        raise RequestError("tool call id must be a non-empty string", field=f"{where}.id", index=index,
                           hint="give each tool call its own id, or leave the id out")
    return ToolCall(id=call_id, name=name, arguments=args)


def check_open_call(call: ToolCall, open_calls: dict[str, tuple[int, int]], *, index: int, j: int,
                    field: str) -> None:
    """A tool result answers the call with its id that still waits for one: two such calls with one
    id (parallel calls, or a call repeated before its result) would make that pairing a guess. An
    id may come back once its call was answered: real logs do that (clients that number calls per
    turn), and the pairing stays exact."""
    first = open_calls.setdefault(call.id, (index, j))
    if first != (index, j):
        raise RequestError(f"tool call id {call.id!r} is already used by messages[{first[0]}].{field}[{first[1]}], "
                           "which has no result yet", field=f"{field}[{j}].id", index=index,
                           hint="give every tool call its own id")


def parse_tools(tools: Any, limits: IntakeLimits) -> tuple[str, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise RequestError("tools must be a list", field="tools")
    out = []
    for j, tool in enumerate(tools):
        where = f"tools[{j}]"
        if not isinstance(tool, dict):
            raise RequestError("a tool must be an object", field=where)
        fn = tool.get("function") if tool.get("type", "function") == "function" else None
        if not isinstance(fn, dict):
            raise RequestError("expected {'type': 'function', 'function': {'name': ..., 'parameters': {...}}}",
                               field=where)
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise RequestError("a tool's name must be a non-empty string", field=f"{where}.function.name",
                               hint="name the function the model may call")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise RequestError("parameters must be a JSON schema object", field=f"{where}.function.parameters")
        text = json.dumps(tool, ensure_ascii=False)
        check_text(text, field=where, index=None, limits=limits)
        out.append(text)
    return tuple(out)


def parse_openai(req: dict[str, Any], limits: IntakeLimits = IntakeLimits()) -> tuple[Conversation, list[Diagnostic]]:
    diags: list[Diagnostic] = []
    msgs = checked_messages(req, limits)
    out: list[Message] = []
    cap = limits.max_message_bytes
    open_calls: dict[str, tuple[int, int]] = {}   # call id -> where the call waiting for its result is
    for i, m in enumerate(msgs):
        # Fast path for the common shape {"role": ..., "content": "..."}: same checks, fewer calls. Its
        # only strings are a known role and the content, which check_text checks (surrogates, size).
        if type(m) is dict and len(m) == 2:
            role, content = m.get("role"), m.get("content")
            if type(content) is str and type(role) is str and role in _PLAIN_ROLES:
                if not (content.isascii() and len(content) <= cap):
                    check_text(content, field="content", index=i, limits=limits)
                out.append(Message(role, content, i))
                continue
        if not isinstance(m, dict):
            raise RequestError(f"a message must be an object, got {type(m).__name__}", index=i)
        check_json(m, field=None, index=i, limits=limits, depth=MESSAGE_DEPTH)
        role = m.get("role")
        if role == "developer":
            diags.append(info("developer_as_system", "role 'developer' is treated as 'system'", i))
            role = "system"
        elif role == "function":
            raise RequestError("the legacy 'function' role is not supported", field="role", index=i,
                               hint="send tool results as role 'tool' with a tool_call_id")
        if role not in ROLES:
            raise RequestError(f"unknown role {role!r}", field="role", index=i,
                               hint=f"use one of {', '.join(ROLES)}")
        for key in m:
            if key not in _KNOWN_KEYS:
                diags.append(info("unknown_field_ignored", f"field {key!r} is not rendered", i))
        content = parse_content(m.get("content"), index=i, limits=limits, diags=diags)
        tool_calls: tuple[ToolCall, ...] = ()
        if m.get("tool_calls") is not None:
            if role != "assistant":
                raise RequestError("only assistant messages carry tool_calls", field="tool_calls", index=i)
            if not isinstance(m["tool_calls"], list):
                raise RequestError("tool_calls must be a list", field="tool_calls", index=i)
            tool_calls = tuple(parse_tool_call(tc, index=i, j=j, limits=limits)
                               for j, tc in enumerate(m["tool_calls"]))
            for j, call in enumerate(tool_calls):
                check_open_call(call, open_calls, index=i, j=j, field="tool_calls")
        tool_call_id = None
        if role == "tool":
            tool_call_id = m.get("tool_call_id")
            if not isinstance(tool_call_id, str) or not tool_call_id:
                raise RequestError("a tool message needs a 'tool_call_id' string", field="tool_call_id", index=i,
                                   hint="copy the id of the assistant's tool call it answers")
            if content is None:
                raise RequestError("a tool message needs content", field="content", index=i)
            open_calls.pop(tool_call_id, None)
        name = check_text(m.get("name"), field="name", index=i, limits=limits, allow_none=True)
        reasoning = None
        for key in _REASONING_KEYS:
            if m.get(key) is not None:
                reasoning = check_text(m[key], field=key, index=i, limits=limits)
                break
        if role in ("user", "system") and content is None:
            raise RequestError(f"a {role} message needs content", field="content", index=i)
        is_template, local_vars = parse_template_flag(m.get("template"), field="template", index=i)
        out.append(Message(role=role, content=content, sequence=i, tool_calls=tool_calls,
                           tool_call_id=tool_call_id, name=name, reasoning=reasoning,
                           cache_control=isinstance(m.get("cache_control"), dict),
                           template=is_template, variables=local_vars))
    check_total(out, limits)
    conv = Conversation(messages=tuple(out), tools=parse_tools(req.get("tools"), limits),
                        params=parse_params(req, "openai"), source_format="openai",
                        variables=parse_request_variables(req))
    return conv, diags
