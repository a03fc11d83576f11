"""OpenTelemetry GenAI messages (`{"role", "parts": [...]}`) -> Chat Completions or Anthropic messages.

The current semantic conventions record a call's messages as JSON following their input and
output message schemas: each message a role and a list of typed parts. This module turns them
back into the request a client sends:

| part | Chat Completions | Anthropic |
|---|---|---|
| `text` | `content` (one part: a string; several: text parts) | a `text` block |
| `tool_call` | `tool_calls[]` (`arguments` as a string) | a `tool_use` block (`input` an object) |
| `tool_call_response` | a `tool` message | a `tool_result` block in a user message |
| `blob` (image) | an `image_url` part with a data URL | an `image` block, base64 source |
| `blob` (audio) | an `input_audio` part | (not sent to Anthropic: a warning) |
| `blob` (other) | a `file` part with a data URL | a `document` block, base64 source |
| `uri` (image) | an `image_url` part | an `image` block, url source |
| `uri` (other) | a `file` part (`file_url`) | a `document` block, url source |
| `file` | a `file` part (`file_id`) | an `image`/`document` block, file source |
| `reasoning` | the assistant's `reasoning_content` | a `thinking` block |

Images are never left out. A part of another type (a server tool call, a provider's own part)
has no place in these requests: it is left out with a warning, as is a message with no parts (an
instrumentation that records only text leaves a message of images or text parts empty)."""

from __future__ import annotations

from typing import Any

from .records import RecordError
from .shapes import arguments_object, arguments_text, mime_of, text_of

Warnings = list[str]
_AUDIO_FORMATS = {"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/wav": "wav", "audio/x-wav": "wav"}


def _check_messages(messages: Any, name: str) -> list[dict[str, Any]]:
    if not isinstance(messages, list):
        raise RecordError(f"{name}: a list of messages, got {type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise RecordError(f"{name}[{i}]: a message object, got {type(m).__name__}")
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise RecordError(f"{name}[{i}].role: a non-empty string, got {_shown(role)}")
        parts = m.get("parts")
        if parts is None and isinstance(m.get("content"), str):
            parts = [{"type": "text", "content": m["content"]}]     # written by hand, not by the schema
        if not isinstance(parts, list):
            raise RecordError(f"{name}[{i}].parts: a list of parts, got {_shown(parts)}")
        out.append({**m, "parts": parts})
    return out


def _check_part(p: Any, where: str) -> dict[str, Any]:
    if not isinstance(p, dict) or not isinstance(p.get("type"), str):
        raise RecordError(f"{where}: a part object with a string 'type', got {_shown(p)}")
    t = p["type"]
    need = {"text": ("content", str), "reasoning": ("content", str), "blob": ("content", str),
            "uri": ("uri", str), "file": ("file_id", str), "tool_call": ("name", str)}.get(t)
    if need is not None and not isinstance(p.get(need[0]), need[1]):
        raise RecordError(f"{where}.{need[0]}: a string, got {_shown(p.get(need[0]))}")
    if t in ("tool_call", "tool_call_response") and p.get("id") is not None and not isinstance(p.get("id"), str):
        raise RecordError(f"{where}.id: a string, got {_shown(p.get('id'))}")
    return p


def _shown(v: Any) -> str:
    if v is None:
        return "nothing"
    text = repr(v)
    return f"{type(v).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def _modality(p: dict[str, Any]) -> str:
    m = p.get("modality")
    mime = p.get("mime_type")
    if isinstance(m, str) and m:
        return m
    if isinstance(mime, str) and "/" in mime:
        return mime.split("/", 1)[0]
    return "image" if p["type"] in ("blob", "uri") else "file"


# ------------------------------------------------------------------ Chat Completions
def _openai_part(p: dict[str, Any], where: str, warnings: Warnings) -> dict[str, Any] | None:
    t = p["type"]
    if t == "text":
        return {"type": "text", "text": p["content"]}
    if t == "blob":
        modality = _modality(p)
        mime = mime_of(p["content"], p.get("mime_type"), modality)
        if modality == "audio":
            fmt = _AUDIO_FORMATS.get(mime, mime.removeprefix("audio/"))
            return {"type": "input_audio", "input_audio": {"data": p["content"], "format": fmt}}
        url = f"data:{mime};base64,{p['content']}"
        if modality == "image":
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"file_data": url}}
    if t == "uri":
        if _modality(p) == "image":
            return {"type": "image_url", "image_url": {"url": p["uri"]}}
        return {"type": "file", "file": {"file_url": p["uri"]}}
    if t == "file":
        return {"type": "file", "file": {"file_id": p["file_id"]}}
    warnings.append(f"{where}: a {t!r} part has no place in a Chat Completions message: left out")
    return None


def openai_messages(system: Any, messages: Any, name: str = "gen_ai.input.messages") -> tuple[list[dict[str, Any]],
                                                                                               Warnings]:
    """The Chat Completions `messages` of a call: system instructions (if recorded apart) first."""
    warnings: Warnings = []
    out: list[dict[str, Any]] = []
    if system is not None:
        sys_parts = system if isinstance(system, list) else None
        if sys_parts is None:
            raise RecordError(f"gen_ai.system_instructions: a list of parts, got {_shown(system)}")
        content = _openai_content([_check_part(p, f"gen_ai.system_instructions[{j}]") for j, p in enumerate(sys_parts)],
                                  "gen_ai.system_instructions", warnings)
        out.append({"role": "system", "content": content if content is not None else ""})
    for i, m in enumerate(_check_messages(messages, name)):
        where = f"{name}[{i}]"
        parts = [_check_part(p, f"{where}.parts[{j}]") for j, p in enumerate(m["parts"])]
        role = m["role"]
        results = [p for p in parts if p["type"] == "tool_call_response"]
        calls = [p for p in parts if p["type"] == "tool_call"]
        reasoning = [p["content"] for p in parts if p["type"] == "reasoning"]
        rest = [p for p in parts if p["type"] not in ("tool_call_response", "tool_call", "reasoning")]
        for r in results:
            out.append({"role": "tool", "tool_call_id": r.get("id") or "", "content": text_of(r.get("response"))})
        if results and not rest and not calls:
            continue
        msg: dict[str, Any] = {"role": "user" if role == "tool" else role}
        content = _openai_content(rest, where, warnings)
        if role == "assistant":
            msg["content"] = content if content is not None or calls else ""
            if calls:
                msg["tool_calls"] = [{"id": c.get("id") or "", "type": "function",
                                      "function": {"name": c["name"], "arguments": arguments_text(c.get("arguments"))}}
                                     for c in calls]
            if reasoning:
                msg["reasoning_content"] = "".join(reasoning)
        else:
            if reasoning:
                warnings.append(f"{where}: reasoning in a {role} message has no place in a request: left out")
            if calls:
                warnings.append(f"{where}: tool calls in a {role} message have no place in a request: left out")
            if content is None and not parts:
                warnings.append(f"{where}: a {role} message with no parts (its content was not recorded): "
                                "imported as empty text")
            msg["content"] = content if content is not None else ""
        if isinstance(m.get("name"), str) and m["name"]:
            msg["name"] = m["name"]
        out.append(msg)
    return out, warnings


def _openai_content(parts: list[dict[str, Any]], where: str, warnings: Warnings) -> str | list[dict[str, Any]] | None:
    converted = [c for j, p in enumerate(parts) if (c := _openai_part(p, f"{where}.parts[{j}]", warnings)) is not None]
    if not converted:
        return None
    if len(converted) == 1 and converted[0]["type"] == "text":
        return str(converted[0]["text"])
    return converted


def openai_reply(m: Any, where: str, warnings: Warnings) -> tuple[dict[str, Any], Any]:
    """One output message as a Chat Completions choice's message, with its finish reason."""
    msg = _check_messages([m], where)[0]
    parts = [_check_part(p, f"{where}.parts[{j}]") for j, p in enumerate(msg["parts"])]
    texts = [p["content"] for p in parts if p["type"] == "text"]
    calls = [p for p in parts if p["type"] == "tool_call"]
    reply: dict[str, Any] = {"role": msg["role"] or "assistant", "content": "".join(texts) if texts else None}
    if calls:
        reply["tool_calls"] = [{"id": c.get("id") or "", "type": "function",
                                "function": {"name": c["name"], "arguments": arguments_text(c.get("arguments"))}}
                               for c in calls]
    reasoning = [p["content"] for p in parts if p["type"] == "reasoning"]
    if reasoning:
        reply["reasoning_content"] = "".join(reasoning)
    for j, p in enumerate(parts):
        if p["type"] not in ("text", "tool_call", "reasoning"):
            warnings.append(f"{where}.parts[{j}]: a {p['type']!r} part of the reply is left out")
    return reply, msg.get("finish_reason")


# ------------------------------------------------------------------ Anthropic
def _anthropic_block(p: dict[str, Any], where: str, warnings: Warnings) -> dict[str, Any] | None:
    t = p["type"]
    if t == "text":
        return {"type": "text", "text": p["content"]}
    if t == "reasoning":
        return {"type": "thinking", "thinking": p["content"]}
    if t == "tool_call":
        return {"type": "tool_use", "id": p.get("id") or "", "name": p["name"],
                "input": arguments_object(p.get("arguments"))}
    if t == "tool_call_response":
        return {"type": "tool_result", "tool_use_id": p.get("id") or "", "content": text_of(p.get("response"))}
    modality = _modality(p)
    kind = "image" if modality == "image" else "document"
    if t == "blob":
        if modality == "audio":
            warnings.append(f"{where}: an audio part has no place in an Anthropic request: left out")
            return None
        return {"type": kind, "source": {"type": "base64", "media_type": mime_of(p["content"], p.get("mime_type"),
                                                                                 modality), "data": p["content"]}}
    if t == "uri":
        return {"type": kind, "source": {"type": "url", "url": p["uri"]}}
    if t == "file":
        return {"type": kind, "source": {"type": "file", "file_id": p["file_id"]}}
    warnings.append(f"{where}: a {t!r} part has no place in an Anthropic message: left out")
    return None


def _blocks(parts: list[Any], where: str, warnings: Warnings) -> list[dict[str, Any]]:
    return [b for j, p in enumerate(parts)
            if (b := _anthropic_block(_check_part(p, f"{where}.parts[{j}]"), f"{where}.parts[{j}]", warnings))
            is not None]


def anthropic_request(system: Any, messages: Any, name: str = "gen_ai.input.messages"
                      ) -> tuple[Any, list[dict[str, Any]], Warnings]:
    """(system, messages) of an Anthropic request. System-role messages join the system prompt
    (Anthropic has no system role); a tool-role message becomes a user message of tool results."""
    warnings: Warnings = []
    system_blocks: list[dict[str, Any]] = []
    if system is not None:
        if not isinstance(system, list):
            raise RecordError(f"gen_ai.system_instructions: a list of parts, got {_shown(system)}")
        system_blocks = _blocks(system, "gen_ai.system_instructions", warnings)
    out: list[dict[str, Any]] = []
    for i, m in enumerate(_check_messages(messages, name)):
        where = f"{name}[{i}]"
        blocks = _blocks(m["parts"], where, warnings)
        if m["role"] in ("system", "developer"):
            system_blocks.extend(blocks)
            continue
        role = "user" if m["role"] == "tool" else m["role"]
        if not blocks:
            warnings.append(f"{where}: a {role} message with no parts (its content was not recorded): "
                            "imported as empty text")
        content: Any = blocks[0]["text"] if len(blocks) == 1 and blocks[0]["type"] == "text" else blocks
        out.append({"role": role, "content": content if blocks else ""})
    sys_value: Any = None
    if system_blocks:
        texts = all(b["type"] == "text" for b in system_blocks)
        sys_value = system_blocks[0]["text"] if texts and len(system_blocks) == 1 else system_blocks
    return sys_value, out, warnings


def anthropic_reply(m: Any, where: str, warnings: Warnings) -> tuple[list[dict[str, Any]], Any]:
    msg = _check_messages([m], where)[0]
    return _blocks(msg["parts"], where, warnings), msg.get("finish_reason")


# ------------------------------------------------------------------ tools
def openai_tools(defs: Any, name: str = "gen_ai.tool.definitions") -> list[dict[str, Any]]:
    if not isinstance(defs, list):
        raise RecordError(f"{name}: a list of tool definitions, got {_shown(defs)}")
    tools = []
    for i, d in enumerate(defs):
        if not isinstance(d, dict):
            raise RecordError(f"{name}[{i}]: a tool definition object, got {_shown(d)}")
        if isinstance(d.get("function"), dict):          # already in Chat Completions shape
            tools.append(d)
            continue
        if not isinstance(d.get("name"), str):
            raise RecordError(f"{name}[{i}].name: a string, got {_shown(d.get('name'))}")
        fn: dict[str, Any] = {"name": d["name"]}
        if d.get("description") is not None:
            fn["description"] = d["description"]
        if d.get("parameters") is not None:
            fn["parameters"] = d["parameters"]
        tools.append({"type": d.get("type") if isinstance(d.get("type"), str) else "function", "function": fn})
    return tools


def anthropic_tools(defs: Any, name: str = "gen_ai.tool.definitions") -> list[dict[str, Any]]:
    out = []
    for t in openai_tools(defs, name):
        fn = t["function"]
        tool: dict[str, Any] = {"name": fn["name"]}
        if "description" in fn:
            tool["description"] = fn["description"]
        tool["input_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append(tool)
    return out
