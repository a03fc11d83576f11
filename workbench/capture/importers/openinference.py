"""`--from openinference`: OpenInference LLM spans (OTLP JSON) -> request-log calls.

OpenInference (Arize Phoenix's conventions) flattens messages into numbered attributes:

    llm.input_messages.N.message.role / .content / .name / .tool_call_id
    llm.input_messages.N.message.contents.M.message_content.type ("text" | "image")
        .message_content.text / .message_content.image.image.url
    llm.input_messages.N.message.tool_calls.M.tool_call.id / .function.name / .function.arguments
    llm.output_messages.N.message.*        the reply, the same way
    llm.tools.N.tool.json_schema           each tool as the request sent it (JSON text)
    llm.invocation_parameters              the rest of the request (JSON text: model, tool_choice, ...)
    llm.token_count.prompt / .completion / .total / .prompt_details.cache_read / .cache_write
    llm.model_name, llm.provider, llm.system, session.id

The request is the invocation parameters, the messages and the tools; spans of other kinds
(CHAIN, TOOL, AGENT, ...) are not calls. OpenInference keeps no image `detail` and no audio or
file parts (its OpenAI instrumentor records text and image URLs only): those cannot come back."""

from __future__ import annotations

import json
from typing import Any

from ... import strict_json
from .indexed import items, tree
from .otlp import Attrs
from .records import ImportedCall, NotACall, RecordError
from .shapes import (
    anthropic_response,
    anthropic_usage,
    arguments_object,
    first_str,
    iso_from_ns,
    latency_ms,
    openai_response,
    openai_usage,
)

SESSION_KEYS = ("session.id",)


def _json_attr(a: dict[str, Any], key: str) -> Any:
    v = a.get(key)
    if v is None or not isinstance(v, str):
        return v
    try:
        return strict_json.loads(v)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{key}: not valid JSON: {exc.msg} at column {exc.colno}") from None


def _messages(a: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    out = []
    for i, node in enumerate(items(tree(a, prefix), prefix)):
        m = node.get("message") if isinstance(node, dict) else None
        if not isinstance(m, dict):
            raise RecordError(f"{prefix}.{i}: expected message.role and message.content")
        out.append(_message(m, f"{prefix}.{i}.message"))
    return out


def _s(v: Any, where: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise RecordError(f"{where}: a string, got {type(v).__name__}")


def _message(m: dict[str, Any], where: str) -> dict[str, Any]:
    role = _s(m.get("role"), f"{where}.role")
    if not role:
        raise RecordError(f"{where}.role: missing")
    msg: dict[str, Any] = {"role": role}
    content: Any = _s(m.get("content"), f"{where}.content")
    contents = items(m.get("contents"), f"{where}.contents")
    if contents:
        content = []
        for j, c in enumerate(contents):
            mc = c.get("message_content") if isinstance(c, dict) else None
            cw = f"{where}.contents.{j}.message_content"
            if not isinstance(mc, dict):
                raise RecordError(f"{cw}: expected .type")
            t = mc.get("type")
            if t == "text":
                content.append({"type": "text", "text": _s(mc.get("text"), f"{cw}.text") or ""})
            elif t == "image":
                img = mc.get("image")
                url = img.get("image", {}).get("url") if isinstance(img, dict) and isinstance(img.get("image"), dict) \
                    else None
                if not isinstance(url, str) or not url:
                    raise RecordError(f"{cw}.image.image.url: an image part without its URL")
                content.append({"type": "image_url", "image_url": {"url": url}})
            else:
                raise RecordError(f"{cw}.type: {t!r} is not a content type this importer knows (text, image)")
    calls = []
    for j, c in enumerate(items(m.get("tool_calls"), f"{where}.tool_calls")):
        tc = c.get("tool_call") if isinstance(c, dict) else None
        cw = f"{where}.tool_calls.{j}.tool_call"
        if not isinstance(tc, dict):
            raise RecordError(f"{cw}: expected .id and .function")
        fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else {}
        calls.append({"id": _s(tc.get("id"), f"{cw}.id") or "", "type": "function",
                      "function": {"name": _s(fn.get("name"), f"{cw}.function.name") or "",
                                   "arguments": _s(fn.get("arguments"), f"{cw}.function.arguments") or ""}})
    msg["content"] = content if content is not None else (None if calls else "")
    if calls:
        msg["tool_calls"] = calls
    for key in ("name", "tool_call_id"):
        v = _s(m.get(key), f"{where}.{key}")
        if v:
            msg[key] = v
    return msg


def convert(attrs: Attrs, *, start_ns: int | None, end_ns: int | None, conversation: str,
            client: str | None) -> tuple[ImportedCall, list[str]]:
    a = attrs.values
    if attrs.problems:
        raise RecordError(attrs.problems[0])
    kind = a.get("openinference.span.kind")
    has_messages = any(k.startswith("llm.input_messages.") for k in a)
    if isinstance(kind, str) and kind.upper() != "LLM":
        raise NotACall(f"not an LLM span (openinference.span.kind={kind})")
    if kind is None and not has_messages:
        raise NotACall("not an OpenInference LLM span")
    if not has_messages:
        raise RecordError("no llm.input_messages recorded (hide_inputs on? the instrumentation kept no content)")
    clash = [k for k in attrs.conflicts if k.startswith("llm.")]
    if clash:
        raise RecordError(f"{clash[0]}: given twice with different values")
    if start_ns is None:
        raise RecordError("no start time (startTimeUnixNano missing or not a positive number)")
    messages = _messages(a, "llm.input_messages")
    outputs = _messages(a, "llm.output_messages")
    tools = []
    for i, node in enumerate(items(tree(a, "llm.tools"), "llm.tools")):
        schema = node.get("tool", {}).get("json_schema") if isinstance(node, dict) and isinstance(node.get("tool"),
                                                                                                    dict) else None
        tool = _json_attr({"s": schema}, "s") if isinstance(schema, str) else schema
        if not isinstance(tool, dict):
            raise RecordError(f"llm.tools.{i}.tool.json_schema: a tool object (JSON), got {type(tool).__name__}")
        tools.append(tool)
    params = _json_attr(a, "llm.invocation_parameters")
    if params is not None and not isinstance(params, dict):
        raise RecordError(f"llm.invocation_parameters: a JSON object, got {type(params).__name__}")
    provider = first_str(a.get("llm.provider"), a.get("llm.system"))
    anthropic = provider is not None and provider.lower() == "anthropic"

    def count(key: str) -> Any:
        v = a.get(f"llm.token_count.{key}")
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    request: dict[str, Any] = {k: v for k, v in (params or {}).items() if k not in ("messages", "tools", "system")}
    model = first_str(a.get("llm.model_name"), request.get("model"))
    finish = a.get("llm.finish_reason")
    if anthropic:
        system, msgs = _to_anthropic(messages)
        if system is not None:
            request["system"] = system
        request["messages"] = msgs
        if tools:
            request["tools"] = tools
        reply = None
        if outputs:
            _, rmsgs = _to_anthropic(outputs[:1])
            c = rmsgs[0]["content"] if rmsgs else []
            reply = [{"type": "text", "text": c}] if isinstance(c, str) else c
        usage = anthropic_usage(prompt=count("prompt"), completion=count("completion"),
                                cache_read=count("prompt_details.cache_read"),
                                cache_write=count("prompt_details.cache_write"))
        response = anthropic_response(reply, stop_reason=finish, usage=usage, model=model, response_id=None)
    else:
        request["messages"] = messages
        if tools:
            request["tools"] = tools
        usage = openai_usage(prompt=count("prompt"), completion=count("completion"), total=count("total"),
                             cache_read=count("prompt_details.cache_read"),
                             cache_write=count("prompt_details.cache_write"),
                             reasoning=count("completion_details.reasoning") or None)
        choices = [(m, finish if i == 0 else None) for i, m in enumerate(outputs)]
        response = openai_response(choices, usage=usage, model=model, response_id=None)
    call = ImportedCall(conversation, iso_from_ns(start_ns), request, start_ns, model=model, provider=provider,
                        client=client, latency_ms=latency_ms(start_ns, end_ns), response=response)
    return call, []


def _to_anthropic(messages: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
    """OpenInference records an Anthropic call's messages the Chat Completions way (the system
    prompt as a system message, tool results as tool messages): put them back as Anthropic's."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content")
        if m["role"] == "system":
            system.append(content if isinstance(content, str) else "".join(
                p.get("text", "") for p in content or [] if isinstance(p, dict)))
            continue
        blocks: list[dict[str, Any]] = []
        if m["role"] == "tool":
            blocks.append({"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""),
                           "content": content if isinstance(content, str) else ""})
        elif isinstance(content, str) and content:
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            for p in content:
                if p["type"] == "text":
                    blocks.append({"type": "text", "text": p["text"]})
                else:
                    blocks.append({"type": "image", "source": _image_source(p["image_url"]["url"])})
        for c in m.get("tool_calls", []):
            blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                           "input": arguments_object(c["function"]["arguments"])})
        role = "user" if m["role"] == "tool" else m["role"]
        single = len(blocks) == 1 and blocks[0]["type"] == "text"
        out.append({"role": role, "content": blocks[0]["text"] if single else blocks})
    return ("\n".join(system) if system else None), out


def _image_source(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        head, data = url.split(",", 1)
        return {"type": "base64", "media_type": head[5:].split(";", 1)[0], "data": data}
    return {"type": "url", "url": url}
