"""The older GenAI span attributes: one attribute per field, numbered per message.

As opentelemetry-instrumentation-openai wrote them up to 0.54 (0.55 moved to
`gen_ai.input.messages`), and the Anthropic, Bedrock and other instrumentations of the same family:

    gen_ai.prompt.N.role / .content / .tool_call_id / .tool_calls.M.{id,name,arguments}
    gen_ai.completion.N.role / .content / .finish_reason / .tool_calls.M.{id,name,arguments}
    llm.request.functions.N.{name,description,parameters}

A message whose content was a list of parts is recorded as that list's JSON text: a content
string that parses as a list of Chat Completions parts (each an object whose `type` is one of
theirs) is read back as that list. A string that merely looks like one cannot be told apart;
docs/importing.md says so. The numbers must run without a gap (indexed.py)."""

from __future__ import annotations

import json
from typing import Any

from .genai_attrs import usage
from .indexed import items, tree
from .records import RecordError
from .semconv_parts import anthropic_tools
from .shapes import anthropic_response, arguments_object, openai_response

_OPENAI_PART_TYPES = frozenset(("text", "image_url", "input_audio", "file", "refusal"))
_ANTHROPIC_BLOCK_TYPES = frozenset(("text", "image", "document", "tool_use", "tool_result", "thinking",
                                    "redacted_thinking"))


def _parts(content: Any, types: frozenset[str]) -> Any:
    if isinstance(content, str) and content.startswith("[") and content.endswith("]"):
        try:
            value = json.loads(content)
        except ValueError:
            return content
        if isinstance(value, list) and value and all(isinstance(p, dict) and p.get("type") in types for p in value):
            return value
    return content


def _str(v: Any, where: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise RecordError(f"{where}: a string, got {type(v).__name__}")


def _calls(m: dict[str, Any], where: str) -> list[dict[str, Any]]:
    out = []
    for j, c in enumerate(items(m.get("tool_calls"), f"{where}.tool_calls")):
        if not isinstance(c, dict):
            raise RecordError(f"{where}.tool_calls.{j}: expected .id, .name and .arguments")
        out.append({"id": _str(c.get("id"), f"{where}.tool_calls.{j}.id") or "", "type": "function",
                    "function": {"name": _str(c.get("name"), f"{where}.tool_calls.{j}.name") or "",
                                 "arguments": _str(c.get("arguments"), f"{where}.tool_calls.{j}.arguments") or ""}})
    return out


def _messages(a: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    msgs = items(tree(a, prefix), prefix)
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise RecordError(f"{prefix}.{i}: expected .role and .content, got a single value")
    return msgs


def convert(a: dict[str, Any], anthropic: bool) -> tuple[dict[str, Any], dict[str, Any] | None, list[str]]:
    prompts = _messages(a, "gen_ai.prompt")
    if not prompts:
        raise RecordError("gen_ai.prompt: no messages recorded (only completions were)")
    tools = []
    for i, f in enumerate(items(tree(a, "llm.request.functions"), "llm.request.functions")):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise RecordError(f"llm.request.functions.{i}.name: a string")
        fn: dict[str, Any] = {"name": f["name"]}
        if f.get("description") is not None:
            fn["description"] = f["description"]
        params = f.get("parameters")
        if isinstance(params, str):
            try:
                params = json.loads(params)
            except ValueError:
                raise RecordError(f"llm.request.functions.{i}.parameters: not valid JSON") from None
        if params is not None:
            fn["parameters"] = params
        tools.append({"type": "function", "function": fn})
    completions = _messages(a, "gen_ai.completion")
    if anthropic:
        return _anthropic(a, prompts, completions, tools)
    messages = []
    warnings = []
    for i, m in enumerate(prompts):
        where = f"gen_ai.prompt.{i}"
        role = _str(m.get("role"), f"{where}.role")
        if not role:
            raise RecordError(f"{where}.role: missing")
        msg: dict[str, Any] = {"role": role}
        content = _parts(_str(m.get("content"), f"{where}.content"), _OPENAI_PART_TYPES)
        calls = _calls(m, where)
        if content is None and not calls and role != "assistant":
            warnings.append(f"{where}: a {role} message without content: it was empty, or the instrumentation "
                            "failed while recording it (opentelemetry-instrumentation-openai up to 0.54 stops at "
                            "a base64 image), and the messages after it may be missing")
        # The instrumentation leaves out an empty or null content: an assistant turn of tool calls
        # sent null, anything else an empty string.
        msg["content"] = content if content is not None else (None if calls else "")
        if calls:
            msg["tool_calls"] = calls
        tcid = _str(m.get("tool_call_id"), f"{where}.tool_call_id")
        if tcid:
            msg["tool_call_id"] = tcid
        messages.append(msg)
    request: dict[str, Any] = {"messages": messages}
    if tools:
        request["tools"] = tools
    choices = []
    for i, m in enumerate(completions):
        where = f"gen_ai.completion.{i}"
        reply: dict[str, Any] = {"role": _str(m.get("role"), f"{where}.role") or "assistant",
                                 "content": _str(m.get("content"), f"{where}.content")}
        calls = _calls(m, where)
        if calls:
            reply["tool_calls"] = calls
        if isinstance(m.get("refusal"), str):
            reply["refusal"] = m["refusal"]
        choices.append((reply, m.get("finish_reason")))
    response = openai_response(choices, usage=usage(a, False), model=a.get("gen_ai.response.model"),
                               response_id=a.get("gen_ai.response.id"))
    return request, response, warnings


def _anthropic(a: dict[str, Any], prompts: list[dict[str, Any]], completions: list[dict[str, Any]],
               tools: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any] | None, list[str]]:
    system: list[Any] = []
    messages = []
    for i, m in enumerate(prompts):
        where = f"gen_ai.prompt.{i}"
        role = _str(m.get("role"), f"{where}.role") or ""
        content = _parts(_str(m.get("content"), f"{where}.content"), _ANTHROPIC_BLOCK_TYPES)
        if role == "system":
            system.append(content)
            continue
        blocks = content if isinstance(content, list) else ([{"type": "text", "text": content}] if content else [])
        for c in _calls(m, where):
            blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                           "input": arguments_object(c["function"]["arguments"])})
        single = len(blocks) == 1 and blocks[0].get("type") == "text"
        messages.append({"role": role, "content": blocks[0]["text"] if single else blocks})
    request: dict[str, Any] = {}
    if system:
        request["system"] = system[0] if len(system) == 1 else [
            b for s in system for b in (s if isinstance(s, list) else [{"type": "text", "text": s}])]
    request["messages"] = messages
    if tools:
        request["tools"] = anthropic_tools(tools, "llm.request.functions")
    blocks_out = None
    stop = None
    if completions:
        m = completions[0]
        text = m.get("content")
        blocks_out = [{"type": "text", "text": text}] if isinstance(text, str) and text else []
        for c in _calls(m, "gen_ai.completion.0"):
            blocks_out.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                               "input": arguments_object(c["function"]["arguments"])})
        stop = m.get("finish_reason")
    response = anthropic_response(blocks_out, stop_reason=stop, usage=usage(a, True),
                                  model=a.get("gen_ai.response.model"), response_id=a.get("gen_ai.response.id"))
    return request, response, []
