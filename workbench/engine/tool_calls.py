"""A model's reply text -> its content, its reasoning and its tool calls, the way the model's family
writes them (the chat template in use says which family):

- `hermes` (Qwen 2.5 / Qwen 3, ChatML): `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`,
  one block per call, after any text; a reply that opens with `<think>` reasons until `</think>`;
- `llama3-json` (Llama 3.1 / 3.2 / 3.3): the whole reply is `{"name": ..., "parameters": {...}}`
  (several joined by `;`), optionally after `<|python_tag|>`;
- `mistral`: `[TOOL_CALLS]` then a JSON list `[{"name", "arguments", "id"}]` (v3, Tekken, v7
  templates) or `name[ARGS]{...}` per call (the newer tokenizers), after any text;
- `harmony` (gpt-oss): messages `<|channel|>analysis<|message|>...<|end|>` (reasoning), `final`
  (the answer), and `to=functions.NAME ... <|message|>{json}` (a call);
- `plain`: no tool-call syntax: the text is the content.

Tool calls are read all or nothing: when any call of a reply is malformed (JSON that does not parse,
no name, an unclosed block), the reply keeps its whole text as content and has no calls, so a client
never runs half of a batch the model meant together. Nothing here raises on model output.

`settled(text)` is the part of a reply still being generated that no later token can change: the
content and reasoning a stream may already send. It is always a prefix of what `parse_reply` gives
for any continuation of `text` (the tests check this property).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..templates import ChatTemplate

FAMILIES = ("hermes", "llama3-json", "mistral", "harmony", "plain")
# The shipped templates by family; any other template is recognised by its source (`tool_family`).
_BY_TEMPLATE = {"chatml": "hermes", "qwen2.5": "hermes", "qwen3": "hermes", "qwen2.5-vl": "hermes",
                "llama3.1": "llama3-json", "mistral-v3": "mistral", "mistral-tekken": "mistral",
                "mistral-v7": "mistral", "gpt-oss": "harmony"}
# End-of-turn tokens a family writes besides the template's own eos: a harmony tool call ends with
# <|call|>; a Llama 3.1 call in ipython mode with <|eom_id|>.
EXTRA_STOPS = {"harmony": ("<|return|>", "<|call|>"), "llama3-json": ("<|eot_id|>", "<|eom_id|>")}

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"
MISTRAL_CALLS, MISTRAL_ARGS, MISTRAL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
H_START, H_MESSAGE, H_END, H_CHANNEL = "<|start|>", "<|message|>", "<|end|>", "<|channel|>"
_H_MARKERS = (H_START, H_END, "<|call|>", "<|return|>")
_RECIPIENT = re.compile(r"to=([^\s<]+)")
_CHANNEL = re.compile(re.escape(H_CHANNEL) + r"\s*(\w+)")


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: str                # a JSON object, as text
    id: str | None = None         # the id the model wrote (Mistral), else the server names it


@dataclass(frozen=True)
class ParsedReply:
    content: str
    reasoning: str = ""
    tool_calls: tuple[ParsedCall, ...] = ()


def tool_family(template: ChatTemplate) -> str:
    """The family whose tool-call syntax a template teaches its model."""
    if template.name in _BY_TEMPLATE:
        return _BY_TEMPLATE[template.name]
    src = template.source
    if CALL_OPEN in src:
        return "hermes"
    if MISTRAL_CALLS in src:
        return "mistral"
    if H_CHANNEL in src:
        return "harmony"
    if "<|start_header_id|>" in src and '"parameters"' in src:
        return "llama3-json"
    return "plain"


def parse_reply(text: str, family: str, *, tools: bool = True) -> ParsedReply:
    """The finished reply. `tools`: whether the request declared tools (and did not say
    tool_choice "none"): without them, tool-call syntax is left as text."""
    if family == "harmony":
        return _harmony(text, tools, final=True)
    reasoning, rest = _think(text, final=True) if family == "hermes" else ("", text)
    if not tools:
        return ParsedReply(rest, reasoning)
    if family == "hermes":
        return _hermes(rest, reasoning)
    if family == "llama3-json":
        return _llama(rest)
    if family == "mistral":
        return _mistral(rest)
    return ParsedReply(rest, reasoning)


def settled(text: str, family: str, *, tools: bool = True) -> tuple[str, str]:
    """(reasoning, content) of an unfinished reply that no later text can change."""
    if family == "harmony":
        r = _harmony(text, tools, final=False)
        return r.reasoning, r.content
    reasoning, rest = _think(text, final=False) if family == "hermes" else ("", text)
    if rest is None:                       # still reasoning (or not yet known whether it will)
        return reasoning, ""
    if not tools or family == "plain":
        return reasoning, rest
    if family == "llama3-json":
        head = rest.lstrip()
        # The whole reply is either a call or text; its first characters tell which.
        if not head or head.startswith("{") or PYTHON_TAG.startswith(head[:len(PYTHON_TAG)]):
            return reasoning, ""
        return reasoning, rest
    marker = CALL_OPEN if family == "hermes" else MISTRAL_CALLS
    cut = rest.find(marker)
    if cut < 0:
        cut = len(rest) - held_back(rest, (marker,))
    # Whitespace before a call is dropped from the content: hold it until text follows it.
    return reasoning, rest[:cut].rstrip()


# --- hermes ----------------------------------------------------------------------------------------
def _think(text: str, final: bool) -> tuple[str, Any]:
    """(reasoning, the rest) of a reply that opens with <think>; the rest is None while the reply
    is still inside (or may be opening) its reasoning."""
    head = text.lstrip()
    if not head.startswith(THINK_OPEN):
        if not final and THINK_OPEN.startswith(head):
            return "", None                # "", or "<thi": may still become <think>
        return "", text
    inner, closed, after = head[len(THINK_OPEN):].partition(THINK_CLOSE)
    if closed:
        return inner.strip(), after.lstrip()
    if final:                               # cut off while reasoning
        return inner.strip(), ""
    return inner[:len(inner) - held_back(inner, (THINK_CLOSE,))].strip(), None


def _hermes(text: str, reasoning: str) -> ParsedReply:
    start = text.find(CALL_OPEN)
    if start < 0:
        return ParsedReply(text, reasoning)
    calls, pos, trailing = [], start, ""
    while True:
        if not text.startswith(CALL_OPEN, pos):
            trailing = text[pos:].strip()
            break
        end = text.find(CALL_CLOSE, pos)
        call = _call_object(text[pos + len(CALL_OPEN):end], "arguments") if end >= 0 else None
        if call is None:
            return ParsedReply(text, reasoning)             # malformed: all of it stays text
        calls.append(call)
        pos = end + len(CALL_CLOSE)
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            break
    content = "\n\n".join(p for p in (text[:start].rstrip(), trailing) if p)
    return ParsedReply(content, reasoning, tuple(calls))


# --- llama 3.1 JSON --------------------------------------------------------------------------------
def _llama(text: str) -> ParsedReply:
    body = text.strip()
    if body.startswith(PYTHON_TAG):
        body = body[len(PYTHON_TAG):].strip()
    if not body.startswith("{"):
        return ParsedReply(text)
    calls, pos, decoder = [], 0, json.JSONDecoder()
    while pos < len(body):
        try:
            obj, pos = decoder.raw_decode(body, pos)
        except ValueError:
            return ParsedReply(text)
        call = _from_object(obj, "parameters")
        if call is None:
            return ParsedReply(text)
        calls.append(call)
        rest = body[pos:].lstrip()
        if rest.startswith(";"):            # Llama 3.2 joins parallel calls with semicolons
            rest = rest[1:].lstrip()
        elif rest:
            return ParsedReply(text)
        pos = len(body) - len(rest)
    return ParsedReply("", "", tuple(calls))


# --- mistral ---------------------------------------------------------------------------------------
def _mistral(text: str) -> ParsedReply:
    start = text.find(MISTRAL_CALLS)
    if start < 0:
        return ParsedReply(text)
    after = text[start + len(MISTRAL_CALLS):].strip()
    calls = _mistral_list(after) if after.startswith("[") else _mistral_named(after)
    if not calls:
        return ParsedReply(text)
    return ParsedReply(text[:start].rstrip(), "", tuple(calls))


def _mistral_list(body: str) -> list[ParsedCall]:
    """`[{"name": ..., "arguments": {...}, "id": "..."}, ...]`, as the v3, Tekken and v7 templates write it."""
    try:
        items, end = json.JSONDecoder().raw_decode(body)
    except ValueError:
        return []
    if body[end:].strip() or not isinstance(items, list) or not items:
        return []
    calls = []
    for x in items:
        call = _from_object(x, "arguments")
        if call is None:
            return []
        calls.append(call)
    return calls


def _mistral_named(body: str) -> list[ParsedCall]:
    """`name[ARGS]{...}` (or `name[CALL_ID]id[ARGS]{...}`) per call, joined by [TOOL_CALLS]."""
    calls = []
    for part in body.split(MISTRAL_CALLS):
        head, sep, args = part.partition(MISTRAL_ARGS)
        name, _, call_id = head.partition(MISTRAL_ID)
        name = name.strip()
        if not sep or not name:
            return []
        call = _from_object({"name": name, "arguments": _loads(args.strip())}, "arguments")
        if call is None:
            return []
        calls.append(ParsedCall(call.name, call.arguments, call_id.strip() or None))
    return calls


# --- harmony (gpt-oss) -----------------------------------------------------------------------------
def _harmony(text: str, tools: bool, final: bool) -> ParsedReply:
    """The reply after the generation prompt `<|start|>assistant`: messages separated by <|start|>,
    each a header (` to=functions.NAME`, `<|channel|>CHANNEL`, ` json`) and a body after <|message|>
    that ends at <|end|> (the stop tokens <|call|> and <|return|> are not part of the text)."""
    pieces = text.split(H_START)
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[ParsedCall] = []
    for k, piece in enumerate(pieces):
        last = k == len(pieces) - 1
        complete = final or not last
        if not complete:                    # the text may still grow a marker at its end
            piece = piece[:len(piece) - held_back(piece, _H_MARKERS + (H_MESSAGE,))]
        header, sep, body = piece.partition(H_MESSAGE)
        if not sep:
            if complete and piece.strip():
                content.append(piece)       # no <|message|>: not a harmony message, kept as text
            continue
        body, ended, tail = body.partition(H_END)
        complete = complete or bool(ended)
        recipient = _RECIPIENT.search(header)
        if recipient is not None:
            if not complete:
                continue                    # a call is whole or nothing
            call = _call_object(body, None, name=recipient.group(1).removeprefix("functions.")) \
                if tools and recipient.group(1).startswith("functions.") else None
            if call is None:
                content.append(header + H_MESSAGE + body)     # a malformed call stays text
            else:
                calls.append(call)
            continue
        channel = _CHANNEL.search(header)
        (reasoning if channel is not None and channel.group(1) == "analysis" else content).append(body)
        if tail.strip():
            content.append(tail)            # text after <|end|> that opens no message
    return ParsedReply("\n\n".join(content), "\n\n".join(reasoning), tuple(calls))


# --- shared ----------------------------------------------------------------------------------------
def _call_object(body: str, args_key: str | None, *, name: str | None = None) -> ParsedCall | None:
    """One call's JSON: {"name", args_key: {...}} (hermes), or the arguments alone (harmony, `name` given)."""
    obj = _loads(body.strip())
    if name is not None:
        return _from_object({"name": name, "arguments": obj}, "arguments")
    return _from_object(obj, args_key or "arguments")


def _from_object(obj: Any, args_key: str) -> ParsedCall | None:
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    args = obj.get(args_key, obj.get("arguments", {}))
    if isinstance(args, str):               # arguments sent as a JSON string of the object
        args = _loads(args)
    if not isinstance(name, str) or not name.strip() or not isinstance(args, dict):
        return None
    call_id = obj.get("id")
    return ParsedCall(name.strip(), json.dumps(args, ensure_ascii=False),
                      call_id if isinstance(call_id, str) and call_id else None)


_NOT_JSON = object()


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def held_back(text: str, markers: tuple[str, ...]) -> int:
    """The length of the longest end of `text` that is the start of a marker (still being written)."""
    best = 0
    for m in markers:
        for n in range(min(len(m) - 1, len(text)), best, -1):
            if text.endswith(m[:n]):
                best = n
                break
    return best
