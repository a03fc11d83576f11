"""OpenAI Chat Completions requests -> Conversation."""

from __future__ import annotations

import json
from typing import Any

from ..conversation import ROLES, Conversation, MediaPart, Message, Part, ToolCall
from ..diagnostics import Diagnostic, info, warning
from ..errors import MediaError, RequestError
from . import parts as parts_mod
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


_TEXT_PARTS = ("text", "input_text", "output_text")


def parse_content(content: Any, *, index: int, limits: IntakeLimits, diags: list[Diagnostic],
                  container: str = "messages", field: str = "content") -> tuple[str | None, tuple[Part, ...]]:
    """A string, null, or a list of parts -> (the text, the parts when some are not text).

    Text parts are joined with a newline; an image, audio clip or file is kept as a MediaPart
    (workbench/intake/parts.py), so the template can place it and the budget count it."""
    if content is None or isinstance(content, str):
        return check_text(content, field=field, index=index, limits=limits, allow_none=True), ()
    if not isinstance(content, list):
        raise RequestError(f"content must be a string, null or a list of parts, got {type(content).__name__}",
                           field=field, index=index, container=container)
    texts: list[str] = []
    parts: list[Part] = []
    for j, part in enumerate(content):
        where = f"{field}[{j}]"
        if isinstance(part, str):
            texts.append(check_text(part, field=where, index=index, limits=limits))
            parts.append(texts[-1])
            continue
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise RequestError("a content part must be an object with a 'type'", field=where, index=index,
                               container=container)
        kind = part["type"]
        if kind in _TEXT_PARTS:
            texts.append(check_text(part.get("text"), field=f"{where}.text", index=index, limits=limits))
            parts.append(texts[-1])
        elif kind == "refusal":
            texts.append(check_text(part.get("refusal"), field=f"{where}.refusal", index=index, limits=limits))
            parts.append(texts[-1])
        else:
            parts.append(media_part(part, where=where, index=index, limits=limits, diags=diags,
                                    container=container))
    if len(texts) > 1:
        diags.append(info("parts_joined", f"{len(texts)} text parts joined with a newline", index))
    has_media = any(not isinstance(p, str) for p in parts)
    return "\n".join(texts), tuple(parts) if has_media else ()


def media_part(part: dict[str, Any], *, where: str, index: int, limits: IntakeLimits, diags: list[Diagnostic],
               container: str) -> MediaPart:
    """One non-text part of a Chat Completions or Responses message."""
    kind, seq = part["type"], index
    if kind == "image_url":       # Chat Completions: {"image_url": {"url": ..., "detail": ...}}
        spec = part.get("image_url")
        if isinstance(spec, str):
            spec = {"url": spec}
        if not isinstance(spec, dict) or not isinstance(spec.get("url"), str):
            raise MediaError("image_url needs a 'url' string", field=f"{where}.image_url", index=index,
                             container=container, hint='use {"type": "image_url", "image_url": {"url": "data:..."}}')
        return parts_mod.image(spec["url"], where=f"{where}.image_url", detail=spec.get("detail"), limits=limits,
                               seq=seq, diags=diags, index=index, container=container)
    if kind == "input_image":     # Responses: {"image_url": "...", "file_id": ..., "detail": ...}
        if part.get("image_url") is not None:
            url = part["image_url"]
            if not isinstance(url, str):
                raise MediaError("image_url must be a string", field=f"{where}.image_url", index=index,
                                 container=container)
            return parts_mod.image(url, where=where, detail=part.get("detail"), limits=limits, seq=seq,
                                   diags=diags, index=index, container=container)
        if part.get("file_id") is not None:
            return parts_mod.image_file_id(part["file_id"], where=where, limits=limits, seq=seq, diags=diags,
                                           index=index, container=container)
        raise MediaError("input_image needs image_url or file_id", field=where, index=index, container=container)
    if kind == "input_audio":     # {"input_audio": {"data": base64, "format": "wav"}}
        spec = part.get("input_audio")
        if not isinstance(spec, dict):
            raise MediaError("input_audio needs an object with 'data' and 'format'", field=f"{where}.input_audio",
                             index=index, container=container)
        return parts_mod.audio(spec.get("data"), spec.get("format"), where=f"{where}.input_audio", limits=limits,
                               seq=seq, diags=diags, index=index, container=container)
    if kind == "file":            # Chat Completions: {"file": {"file_data" | "file_id", "filename"}}
        spec = part.get("file")
        if not isinstance(spec, dict):
            raise MediaError("file needs an object with file_data or file_id", field=f"{where}.file", index=index,
                             container=container)
        return parts_mod.file(data=spec.get("file_data"), file_id=spec.get("file_id"), filename=spec.get("filename"),
                              where=f"{where}.file", limits=limits, seq=seq, diags=diags, index=index,
                              container=container)
    if kind == "input_file":      # Responses: {"file_data" | "file_id" | "file_url", "filename"}
        return parts_mod.file(data=part.get("file_data"), file_id=part.get("file_id"), url=part.get("file_url"),
                              filename=part.get("filename"), where=where, limits=limits, seq=seq, diags=diags,
                              index=index, container=container)
    raise RequestError(f"unknown content part type {kind!r}", field=f"{where}.type", index=index, container=container,
                       hint="use text, image_url, input_audio or file (Chat Completions); input_text, input_image "
                            "or input_file (Responses)")


def parse_tool_call(tc: Any, *, index: int, j: int, limits: IntakeLimits, diags: list[Diagnostic],
                    container: str = "messages", field: str = "tool_calls") -> ToolCall:
    where = f"{field}[{j}]"
    if not isinstance(tc, dict):
        raise RequestError("a tool call must be an object", field=where, index=index, container=container)
    if tc.get("type") == "custom":
        spec = tc.get("custom")
        if not isinstance(spec, dict):
            raise RequestError("missing 'custom' object", field=where, index=index, container=container,
                               hint='use {"id": ..., "type": "custom", "custom": {"name": ..., "input": "..."}}')
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError("custom tool name must be a non-empty string", field=f"{where}.custom.name",
                               index=index, container=container)
        text = check_text(spec.get("input", ""), field=f"{where}.custom.input", index=index, limits=limits)
        return ToolCall(id=_call_id(tc.get("id"), index=index, j=j, where=where, container=container),
                        name=name, arguments=text, kind="custom", is_object=False)
    fn = tc.get("function")
    if not isinstance(fn, dict):
        raise RequestError("missing 'function' object", field=where, index=index, container=container,
                           hint='use {"id": ..., "type": "function", "function": {"name": ..., "arguments": "{...}"}}')
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError("function name must be a non-empty string", field=f"{where}.function.name", index=index,
                           hint="name the tool the call is for", container=container)
    args = fn.get("arguments", "{}")
    if isinstance(args, dict):
        args = json.dumps(args, ensure_ascii=False)  # the message was checked: plain JSON, dumps cannot fail
    args = check_text(args, field=f"{where}.function.arguments", index=index, limits=limits)
    path = f"{container}[{index}].{where}.function.arguments"
    ok = checked_arguments(args, path=path, seq=index, limits=limits, diags=diags)
    return ToolCall(id=_call_id(tc.get("id"), index=index, j=j, where=where, container=container), name=name,
                    arguments=args, is_object=ok)


def checked_arguments(args: str, *, path: str, seq: int | None, limits: IntakeLimits,
                      diags: list[Diagnostic]) -> bool:
    """Whether tool-call arguments are a JSON object; when not, they are kept as sent, with a warning.

    OpenAI takes any string as the arguments of a call in a request's history (a reply cut at
    max_tokens leaves `{"city": "Par`), and production logs hold many. Templates read arguments as a
    mapping: such arguments render as {}, as vLLM's chat preprocessing does. Arguments that are JSON
    but that plain JSON parsers cannot carry (NaN, nesting past the depth limit, a 5,000-digit
    number) are treated the same: the text is the client's, the prompt gets {}."""
    if not args.strip():
        return True   # "" means no arguments: {} for vLLM and for the templates alike
    try:
        parsed = parse_json_text(args, field="arguments", index=None, limits=limits, depth=ARGUMENTS_DEPTH)
    except RequestError as exc:
        problem = exc.message.removeprefix("arguments: ")
        diags.append(warning("tool_arguments_not_json",
                             f"{path}: {problem} — kept as sent; templates read arguments as a mapping and get {{}} "
                             "in its place, as vLLM gives them (a reply cut at max_tokens ends like this)", seq))
        return False
    if not isinstance(parsed, dict):
        diags.append(warning("tool_arguments_not_object",
                             f"{path}: the arguments are a JSON {_JSON_TYPE[type(parsed)]}, not an object — kept as "
                             "sent; templates read arguments as a mapping and get {} in its place, as vLLM gives "
                             "them", seq))
        return False
    return True


def _call_id(call_id: Any, *, index: int, j: int, where: str, container: str) -> str:
    if call_id is None:
        return f"call_{index}_{j}"
    if not isinstance(call_id, str) or not call_id:
        raise RequestError("tool call id must be a non-empty string", field=f"{where}.id", index=index,
                           hint="give each tool call its own id, or leave the id out", container=container)
    return call_id


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
        if tool.get("type") == "custom":
            spec = tool.get("custom")
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
                raise RequestError("a custom tool needs {'custom': {'name': ...}}", field=f"{where}.custom.name")
            text = json.dumps(tool, ensure_ascii=False)
            check_text(text, field=where, index=None, limits=limits)
            out.append(text)
            continue
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
    legacy: dict[str, str] = {}                    # function name -> id given to its open legacy function_call
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
            # The legacy form OpenAI still accepts: a function result answers the latest call of its name.
            role = "tool"
            fname = m.get("name")
            if not isinstance(fname, str) or not fname:
                raise RequestError("a 'function' message needs the 'name' of the function it answers", field="name",
                                   index=i)
            m = {**m, "tool_call_id": legacy.pop(fname, f"call_{i}_fn"), "name": fname}
            diags.append(info("legacy_function_role", "role 'function' is read as a tool result", i))
        if role not in ROLES:
            raise RequestError(f"unknown role {role!r}", field="role", index=i,
                               hint=f"use one of {', '.join(ROLES)}")
        for key in m:
            if key not in _KNOWN_KEYS:
                diags.append(info("unknown_field_ignored", f"field {key!r} is not rendered", i))
        content, parts = parse_content(m.get("content"), index=i, limits=limits, diags=diags)
        tool_calls: tuple[ToolCall, ...] = ()
        if m.get("tool_calls") is not None:
            if role != "assistant":
                raise RequestError("only assistant messages carry tool_calls", field="tool_calls", index=i)
            if not isinstance(m["tool_calls"], list):
                raise RequestError("tool_calls must be a list", field="tool_calls", index=i)
            tool_calls = tuple(parse_tool_call(tc, index=i, j=j, limits=limits, diags=diags)
                               for j, tc in enumerate(m["tool_calls"]))
            for j, call in enumerate(tool_calls):
                check_open_call(call, open_calls, index=i, j=j, field="tool_calls")
        elif m.get("function_call") is not None:
            # The legacy single call (before tool_calls): one call, answered by a 'function' message.
            fc = m["function_call"]
            if role != "assistant" or not isinstance(fc, dict):
                raise RequestError("function_call must be an object on an assistant message", field="function_call",
                                   index=i)
            call = parse_tool_call({"id": f"call_{i}_fn", "type": "function", "function": fc}, index=i, j=0,
                                   limits=limits, diags=diags, field="function_call")
            legacy[call.name] = call.id
            tool_calls = (call,)
            diags.append(info("legacy_function_call", "function_call is read as a tool call", i))
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
                           template=is_template, variables=local_vars, parts=parts))
    check_total(out, limits)
    conv = Conversation(messages=tuple(out), tools=parse_tools(req.get("tools"), limits),
                        params=parse_params(req, "openai"), source_format="openai",
                        variables=parse_request_variables(req))
    return conv, diags
