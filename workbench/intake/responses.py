"""OpenAI Responses API requests (`POST /v1/responses`) -> Conversation.

A Responses request carries `instructions` and `input`: a string, or a list of items — messages
(with `input_text` / `input_image` / `input_file` parts, or earlier assistant output as
`output_text` / `refusal`), `function_call` and `function_call_output` paired by `call_id`,
`reasoning` items, `custom_tool_call` and its output. It becomes the same `Conversation` as the
Chat Completions request that says the same thing, so both give identical token ids:

- `instructions` is a system message first (OpenAI: "a system (or developer) message inserted into
  the model's context");
- the output items of one model turn — reasoning, an assistant message, function calls — are one
  assistant message, as Chat Completions returns that turn (content, `tool_calls`, reasoning). A
  new reasoning item, or an assistant message after one with text, starts the next turn;
- a reasoning item's text is its `content` (`reasoning_text`, the reasoning as generated, which
  open-model servers return) or else its `summary`; `encrypted_content` is opaque: kept out of the
  prompt, reported with its size;
- `function_call_output` / `custom_tool_call_output` are tool messages; their call must come first.

What cannot be rebuilt offline is refused with an error naming the item: OpenAI's built-in tools
(web search, file search, computer use, code interpreter, MCP...) whose calls and results live in
OpenAI's records, an `item_reference`, and `previous_response_id` / `conversation` / `prompt`,
whose state lives on OpenAI's servers — unless the caller resolves the chain (a session file or a
log that holds the earlier response: workbench/intake/chain.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..conversation import Conversation, Message, Part, ToolCall
from ..diagnostics import Diagnostic, info, warning
from ..errors import RequestError
from .limits import MESSAGE_DEPTH, IntakeLimits, check_json, check_request_fields, check_text, check_total
from .openai import checked_arguments, parse_content, parse_tools
from .params import parse_params, parse_request_variables

C = "input"   # the container error paths count in: input[3].call_id

# Items of OpenAI's built-in tools: what they did is in OpenAI's records, not in the request.
BUILTIN_ITEMS = {
    "web_search_call": "web search", "file_search_call": "file search", "computer_call": "computer use",
    "computer_call_output": "computer use", "code_interpreter_call": "the code interpreter",
    "image_generation_call": "image generation", "local_shell_call": "the local shell tool",
    "local_shell_call_output": "the local shell tool", "shell_call": "the shell tool",
    "shell_call_output": "the shell tool", "apply_patch_call": "apply_patch",
    "apply_patch_call_output": "apply_patch", "mcp_call": "a remote MCP server",
    "mcp_list_tools": "a remote MCP server",
    "mcp_approval_request": "a remote MCP server", "mcp_approval_response": "a remote MCP server",
    "compaction": "compaction", "tool_search_call": "tool search", "tool_search_output": "tool search",
}
_OUTPUT_ITEMS = frozenset(("reasoning", "function_call", "custom_tool_call"))
_STATE_FIELDS = {
    "previous_response_id": "the earlier response's input and output are stored on OpenAI's servers",
    "conversation": "a Conversations API conversation is stored on OpenAI's servers",
    "prompt": "a reusable prompt is stored on OpenAI's dashboard",
}
# Request fields that mean the same in Chat Completions under another name (or shape): the
# Conversation's parameters are those of the equivalent Chat Completions request.
_PASSED = ("model", "temperature", "top_p", "tool_choice", "parallel_tool_calls", "stream", "store", "metadata",
           "prompt_cache_key", "safety_identifier", "user", "service_tier", "top_logprobs", "variables",
           "context_window", "title", "description")


def is_responses(req: dict[str, Any]) -> bool:
    return "messages" not in req and ("input" in req or "instructions" in req)


@dataclass
class _Turn:
    """The output items of one model turn, gathered into the assistant message they form."""

    first: int                            # the input index of its first item
    texts: list[str] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    has_message: bool = False

    def message(self, seq: int) -> Message:
        media = any(not isinstance(p, str) for p in self.parts)
        content = "\n".join(self.texts) if self.has_message else None
        return Message("assistant", content, seq, tool_calls=tuple(self.calls),
                       reasoning="\n\n".join(self.reasoning) if self.reasoning else None,
                       parts=tuple(self.parts) if media else ())


class ItemParser:
    """Input items -> messages, in order; resumable, so a session's next request parses only what
    is new (workbench/intake/next_request.py). For message j: `stops[j]`, the index of the item after
    its own; `needs[j]`, how many leading items must be unchanged for it to stand — its own, and for a
    model turn also the item that ended it (a changed one might have continued the turn)."""

    def __init__(self, limits: IntakeLimits, diags: list[Diagnostic],
                 head: tuple[Message, ...] = (), stops: tuple[int, ...] = (), needs: tuple[int, ...] = (),
                 calls: tuple[dict[str, int], set[str]] | None = None) -> None:
        """`head`: messages already parsed (with their stops and needs); `calls`: the open and the
        answered call ids after them, when known (else worked out from `head`)."""
        self.limits, self.diags = limits, diags
        self.out: list[Message] = list(head)
        self.stops: list[int] = list(stops)
        self.needs: list[int] = list(needs)
        self.turn: _Turn | None = None
        # call_id -> input index of the call that waits for its output (-1: index not known); answered ids
        self.open_calls: dict[str, int] = {}
        self.answered: set[str] = set()
        if calls is not None:
            self.open_calls, self.answered = calls
            return
        for m in head:
            for c in m.tool_calls:
                self.open_calls[c.id] = -1
            if m.tool_call_id is not None and self.open_calls.pop(m.tool_call_id, None) is not None:
                self.answered.add(m.tool_call_id)

    def calls_before(self, j: int) -> tuple[dict[str, int], set[str]]:
        """The open and answered call ids as they were after message j-1: undoes messages j.. (O(those))."""
        made = {c.id for m in self.out[j:] for c in m.tool_calls}
        answers = {m.tool_call_id for m in self.out[j:] if m.tool_call_id is not None}
        open_ = {i: k for i, k in self.open_calls.items() if i not in made}
        for a in answers - made:
            open_[a] = -1    # a call of the head, answered after j: open at j
        return open_, self.answered - made - answers

    def flush(self, end: int) -> None:
        """The model turn being gathered is complete: item `end` is not part of it."""
        if self.turn is not None:
            self.out.append(self.turn.message(len(self.out)))
            self.stops.append(end)
            self.needs.append(end + 1)
            self.turn = None

    def _own(self, k: int) -> None:
        self.stops.append(k + 1)
        self.needs.append(k + 1)

    def feed(self, items: list[Any], start: int = 0) -> None:
        """Parse `items`, the first of them being input[start]."""
        limits, diags = self.limits, self.diags
        for k, item in enumerate(items, start):
            if not isinstance(item, dict):
                raise RequestError(f"an input item must be an object, got {type(item).__name__}", index=k,
                                   container=C)
            check_json(item, field=None, index=k, limits=limits, depth=MESSAGE_DEPTH)
            kind = item.get("type", "message")
            if not isinstance(kind, str):
                raise RequestError("'type' must be a string", field="type", index=k, container=C)
            seq = len(self.out)
            if kind == "message" and item.get("role") == "assistant":
                if self.turn is not None and (self.turn.has_message or self.turn.calls):
                    self.flush(k)
                self.turn = self.turn or _Turn(k)
                _assistant_content(item, k, self.turn, limits, diags, seq)
            elif kind == "message":
                self.flush(k)
                self.out.append(_message(item, k, len(self.out), limits, diags))
                self._own(k)
            elif kind == "reasoning":
                if self.turn is not None and (self.turn.reasoning or self.turn.has_message or self.turn.calls):
                    self.flush(k)
                self.turn = self.turn or _Turn(k)
                _reasoning(item, k, self.turn, limits, diags, len(self.out))
            elif kind in ("function_call", "custom_tool_call"):
                self.turn = self.turn or _Turn(k)
                call = _call(item, k, kind, limits, diags, seq)
                if call.id in self.open_calls or call.id in self.answered:
                    first = self.open_calls.get(call.id)
                    by = f"input[{first}]" if first is not None and first >= 0 else "an earlier call"
                    raise RequestError(f"call_id {call.id!r} is already used by {by}", field="call_id", index=k,
                                       container=C, hint="give every call its own call_id")
                self.open_calls[call.id] = k
                self.turn.calls.append(call)
            elif kind in ("function_call_output", "custom_tool_call_output"):
                self.flush(k)
                self.out.append(_output(item, k, len(self.out), self.open_calls, self.answered, limits, diags))
                self._own(k)
            elif kind in BUILTIN_ITEMS:
                raise RequestError(f"a {kind!r} item records {BUILTIN_ITEMS[kind]}, a built-in tool OpenAI runs on "
                                   "its servers: what it did is in OpenAI's records, not in the request, so the "
                                   "prompt cannot be rebuilt offline", index=k, container=C,
                                   hint="replace it with the function_call / function_call_output pair it stands "
                                        "for, or drop it")
            elif kind == "item_reference":
                raise RequestError("an item_reference points at an item stored on OpenAI's servers: the prompt "
                                   "cannot be rebuilt offline", index=k, container=C, hint="send the item itself")
            else:
                raise RequestError(f"unknown input item type {kind!r}", field="type", index=k, container=C,
                                   hint="input items: message, function_call, function_call_output, reasoning, "
                                        "custom_tool_call, custom_tool_call_output")


def parse_responses(req: dict[str, Any], limits: IntakeLimits = IntakeLimits()
                    ) -> tuple[Conversation, list[Diagnostic]]:
    conv, diags, _ = parse_responses_resumable(req, limits)
    return conv, diags


def parse_responses_resumable(req: dict[str, Any], limits: IntakeLimits
                              ) -> tuple[Conversation, list[Diagnostic], ItemParser]:
    """parse_responses, and the parser (where each message's items end: for the next request of a session)."""
    diags: list[Diagnostic] = []
    check_state_fields(req)
    items = _items(req)
    check_request_fields({k: v for k, v in req.items() if k != "input"}, limits)
    head, items = instructions_message(req, items, limits)
    p = ItemParser(limits, diags, head, (0,) * len(head), (0,) * len(head))
    p.feed(items)
    p.flush(len(items))
    if not p.out:
        raise RequestError("no input: a request needs at least one item", field="input", hint="add the user's message")
    check_total(p.out, limits)
    return conversation(req, tuple(p.out), limits, diags), diags, p


def check_state_fields(req: dict[str, Any]) -> None:
    for key, why in _STATE_FIELDS.items():
        if req.get(key) is not None:
            raise RequestError(f"{why}: the prompt cannot be rebuilt offline", field=key,
                               hint="send the whole conversation in 'input', or load a session file or log that "
                                    "holds the earlier response (its chain is resolved from there)")


def instructions_message(req: dict[str, Any], items: list[Any], limits: IntakeLimits
                         ) -> tuple[tuple[Message, ...], list[Any]]:
    """The instructions as the first message (a string), or as items before the input (a list)."""
    instructions = req.get("instructions")
    if instructions is None:
        return (), items
    if isinstance(instructions, str):
        return (Message("system", check_text(instructions, field="instructions", index=None, limits=limits), 0),), \
            items
    if isinstance(instructions, list):
        return (), [*instructions, *items]
    raise RequestError(f"must be a string or a list of input items, got {type(instructions).__name__}",
                       field="instructions")


def conversation(req: dict[str, Any], messages: tuple[Message, ...], limits: IntakeLimits,
                 diags: list[Diagnostic]) -> Conversation:
    return Conversation(messages=messages, tools=parse_tools(_tools(req.get("tools"), diags), limits),
                        params=parse_params(chat_params(req), "openai"), source_format="responses",
                        variables=parse_request_variables(req))


def _items(req: dict[str, Any]) -> list[Any]:
    inp = req.get("input")
    if inp is None:
        return []
    if isinstance(inp, str):
        return [{"role": "user", "content": inp}]
    if not isinstance(inp, list):
        raise RequestError(f"must be a string or a list of items, got {type(inp).__name__}", field="input")
    return inp


def _message(item: dict[str, Any], k: int, seq: int, limits: IntakeLimits, diags: list[Diagnostic]) -> Message:
    role = item.get("role")
    if role == "developer":
        diags.append(info("developer_as_system", "role 'developer' is treated as 'system'", seq))
        role = "system"
    if role not in ("user", "system"):
        raise RequestError(f"unknown role {role!r}", field="role", index=k, container=C,
                           hint="use user, assistant, system or developer")
    content, parts = parse_content(item.get("content"), index=k, limits=limits, diags=diags, container=C)
    if content is None:
        raise RequestError(f"a {role} message needs content", field="content", index=k, container=C)
    return Message(role, content, seq, parts=parts)


def _assistant_content(item: dict[str, Any], k: int, turn: _Turn, limits: IntakeLimits, diags: list[Diagnostic],
                       seq: int) -> None:
    content, parts = parse_content(item.get("content"), index=k, limits=limits, diags=diags, container=C)
    turn.has_message = True
    if content is not None:
        turn.texts.append(content)
    turn.parts.extend(parts if parts else ([content] if content is not None else []))


def _reasoning(item: dict[str, Any], k: int, turn: _Turn, limits: IntakeLimits, diags: list[Diagnostic],
               seq: int) -> None:
    texts = []
    for key, part_type in (("content", "reasoning_text"), ("summary", "summary_text")):
        blocks = item.get(key)
        if blocks is None:
            continue
        if not isinstance(blocks, list):
            raise RequestError(f"must be a list of {part_type} parts", field=key, index=k, container=C)
        for j, b in enumerate(blocks):
            if not isinstance(b, dict) or b.get("type") != part_type:
                raise RequestError(f"expected a {part_type} part", field=f"{key}[{j}]", index=k, container=C)
            texts.append(check_text(b.get("text"), field=f"{key}[{j}].text", index=k, limits=limits))
        if texts:
            break   # the reasoning as generated when there is some; else its summary
    if texts:
        turn.reasoning.append("\n\n".join(texts))
    enc = item.get("encrypted_content")
    if enc is not None:
        if not isinstance(enc, str):
            raise RequestError("encrypted_content must be a string", field="encrypted_content", index=k, container=C)
        diags.append(info("encrypted_reasoning", f"input[{k}]: encrypted reasoning ({len(enc):,} characters) is "
                          "opaque: OpenAI decrypts it on its side, so it is not in the rendered prompt or its count",
                          seq))


def _call(item: dict[str, Any], k: int, kind: str, limits: IntakeLimits, diags: list[Diagnostic],
          seq: int) -> ToolCall:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise RequestError("call_id must be a non-empty string", field="call_id", index=k, container=C,
                           hint="copy the call_id the model's output gave this call")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError("name must be a non-empty string", field="name", index=k, container=C)
    if kind == "custom_tool_call":
        text = check_text(item.get("input", ""), field="input", index=k, limits=limits)
        return ToolCall(call_id, name, text, kind="custom", is_object=False)
    args = item.get("arguments", "")
    if isinstance(args, dict):
        args = json.dumps(args, ensure_ascii=False)
    args = check_text(args, field="arguments", index=k, limits=limits)
    ok = checked_arguments(args, path=f"input[{k}].arguments", seq=seq, limits=limits, diags=diags)
    return ToolCall(call_id, name, args, is_object=ok)


def _output(item: dict[str, Any], k: int, seq: int, open_calls: dict[str, int], answered: set[str],
            limits: IntakeLimits, diags: list[Diagnostic]) -> Message:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise RequestError("call_id must be a non-empty string", field="call_id", index=k, container=C,
                           hint="copy the call_id of the call this output answers")
    if call_id not in open_calls:
        why = "its call was already answered" if call_id in answered else "no earlier call has this call_id"
        raise RequestError(f"no function call to answer: {why} ({call_id!r})", field="call_id", index=k, container=C,
                           hint="send the function_call item before its output, with the same call_id")
    del open_calls[call_id]
    answered.add(call_id)
    content, parts = parse_content(item.get("output"), index=k, limits=limits, diags=diags, container=C,
                                   field="output")
    if content is None:
        raise RequestError("output must be a string or a list of parts", field="output", index=k, container=C)
    return Message("tool", content, seq, tool_call_id=call_id, parts=parts)


def _tools(tools: Any, diags: list[Diagnostic]) -> Any:
    """The Responses tools in Chat Completions' shape (function tools are flat here)."""
    if not isinstance(tools, list):
        return tools   # parse_tools refuses what is not a list
    out: list[Any] = []
    for j, t in enumerate(tools):
        if not isinstance(t, dict):
            out.append(t)
            continue
        kind = t.get("type")
        if kind == "function":
            out.append({"type": "function", "function": {k: v for k, v in t.items() if k != "type"}})
        elif kind == "custom":
            out.append({"type": "custom", "custom": {k: v for k, v in t.items() if k != "type"}})
        else:
            diags.append(warning("server_tool_skipped", f"tools[{j}]: a {kind!r} tool is one OpenAI runs on its "
                                 "servers; it has no chat-template form and is not rendered"))
    return out


def chat_params(req: dict[str, Any]) -> dict[str, Any]:
    """The request's parameters as the equivalent Chat Completions request names them."""
    out = {k: req[k] for k in _PASSED if k in req}
    if req.get("max_output_tokens") is not None:
        out["max_completion_tokens"] = req["max_output_tokens"]
    text = req.get("text")
    if text is not None:
        if not isinstance(text, dict):
            raise RequestError(f"must be an object, got {type(text).__name__}", field="text",
                               hint='use {"format": {"type": "json_schema", ...}}')
        fmt = text.get("format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            out["response_format"] = {"type": "json_schema",
                                      "json_schema": {k: v for k, v in fmt.items() if k != "type"}}
        elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
            out["response_format"] = {"type": "json_object"}
        elif fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
            raise RequestError("format must be {'type': 'text' | 'json_object' | 'json_schema', ...}",
                               field="text.format")
        if text.get("verbosity") is not None:
            out["verbosity"] = text["verbosity"]
    reasoning = req.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, dict):
            raise RequestError(f"must be an object, got {type(reasoning).__name__}", field="reasoning",
                               hint='use {"effort": "low" | "medium" | "high"}')
        if reasoning.get("effort") is not None:
            out["reasoning_effort"] = reasoning["effort"]
    return out
