"""The chat bodies `serve-engine` accepts — Chat Completions, Responses, Anthropic Messages — checked
into one typed `ChatRequest`.

Only the fields the server acts on are checked here (type and range, named in the error as the API
names them); the conversation itself (messages, input, system, tools) is the workbench intake's to
judge, when the Assembler reads `request`. Fields the server does not act on pass through to the
intake, which keeps them as parameters; fields that would change the reply and cannot be honoured
here (several choices, log probabilities) are refused rather than ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ServeRequestError
from .server_requests import kind_of, shown

CHAT, RESPONSES, ANTHROPIC = "chat", "responses", "anthropic"
ROUTES = {"/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/messages": ANTHROPIC}
INTAKE_FORMAT = {CHAT: "openai", RESPONSES: "responses", ANTHROPIC: "anthropic"}
MAX_STOPS = {CHAT: 4, ANTHROPIC: 16}          # OpenAI's limit; Anthropic publishes none, 16 bounds the work
MAX_STOP_CHARS = 200


@dataclass(frozen=True)
class ChatRequest:
    api: str                          # CHAT, RESPONSES or ANTHROPIC
    request: dict[str, Any]           # what the Assembler reads (the body, its format named)
    stream: bool
    max_tokens: int | None            # as asked (None: up to the server's cap)
    temperature: float
    top_p: float
    top_k: int
    seed: int | None
    stop: tuple[str, ...]
    tools: bool                       # tools declared and tool_choice not "none": parse tool calls
    include_usage: bool               # Chat Completions stream_options.include_usage
    return_token_ids: bool            # vLLM's extension: the prompt's and the reply's token ids


def chat_request(api: str, body: dict[str, Any], *, models: frozenset[str]) -> ChatRequest:
    """`models`: the names this server answers to (a request naming another is a 404)."""
    _model(body, models)
    stream = _optional(body, "stream", bool, False)
    temp_max = 1.0 if api == ANTHROPIC else 2.0
    temperature = _number(body, "temperature", 0.0, temp_max, default=1.0)
    top_p = _number(body, "top_p", 0.0, 1.0, default=1.0)
    if top_p == 0.0:
        raise ServeRequestError("must be more than 0, got 0", param="top_p")
    top_k = 0
    seed = None
    include_usage = False
    stop: tuple[str, ...] = ()
    if api == CHAT:
        key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        max_tokens = _count(body, key, required=False)
        n = body.get("n")
        if n is not None and (type(n) is not int or n != 1):
            raise ServeRequestError(f"only one choice is generated: must be 1, got {shown(n)}", param="n")
        if body.get("logprobs") not in (None, False) or body.get("top_logprobs") not in (None, 0):
            raise ServeRequestError("log probabilities are not returned by this server", param="logprobs")
        seed = _optional(body, "seed", int, None)
        options = _optional(body, "stream_options", dict, None)
        if options is not None:
            include_usage = _optional(options, "include_usage", bool, False, where="stream_options.include_usage")
        stop = _stops(body, "stop", api)
    elif api == RESPONSES:
        max_tokens = _count(body, "max_output_tokens", required=False)
    else:
        max_tokens = _count(body, "max_tokens", required=True)
        top_k = _optional(body, "top_k", int, 0) or 0
        if top_k < 0:
            raise ServeRequestError(f"must be at least 0, got {top_k}", param="top_k")
        stop = _stops(body, "stop_sequences", api)
    tools = isinstance(body.get("tools"), list) and bool(body["tools"]) and _choice(body.get("tool_choice")) != "none"
    return ChatRequest(api, {**body, "format": INTAKE_FORMAT[api]}, stream, max_tokens, temperature, top_p, top_k,
                       seed, stop, tools, include_usage,
                       _optional(body, "return_token_ids", bool, False))


def _model(body: dict[str, Any], models: frozenset[str]) -> None:
    name = body.get("model")
    if name is None:
        return
    if not isinstance(name, str):
        raise ServeRequestError(f"must be a string, got {kind_of(name)}", param="model")
    if name not in models:
        raise ServeRequestError(f"the model {name[:100]!r} does not exist here; this server has "
                                + ", ".join(repr(m) for m in sorted(models)), status=404, param="model")


def _optional(body: dict[str, Any], key: str, kind: type, default: Any, *, where: str | None = None) -> Any:
    value = body.get(key)
    if value is None:
        return default
    if type(value) is not kind:            # not isinstance: true is not an integer here
        want = {bool: "true or false", int: "an integer", dict: "an object"}[kind]
        raise ServeRequestError(f"must be {want}, got {kind_of(value)} {shown(value)}", param=where or key)
    return value


def _number(body: dict[str, Any], key: str, low: float, high: float, *, default: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if type(value) not in (int, float) or not math.isfinite(value) or not low <= value <= high:
        raise ServeRequestError(f"must be a number from {low:g} to {high:g}, got {shown(value)}", param=key)
    return float(value)


def _count(body: dict[str, Any], key: str, *, required: bool) -> int | None:
    value = body.get(key)
    if value is None:
        if required:
            raise ServeRequestError("is required: the most tokens the reply may have", param=key)
        return None
    if type(value) is not int or value < 1:
        raise ServeRequestError(f"must be an integer of at least 1, got {shown(value)}", param=key)
    return value


def _stops(body: dict[str, Any], key: str, api: str) -> tuple[str, ...]:
    value = body.get(key)
    if value is None:
        return ()
    items = [value] if isinstance(value, str) and api == CHAT else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        raise ServeRequestError(f"must be {'a string or ' if api == CHAT else ''}a list of strings, got "
                                f"{kind_of(value)}", param=key)
    if len(items) > MAX_STOPS[api]:
        raise ServeRequestError(f"at most {MAX_STOPS[api]} stop sequences, got {len(items)}", param=key)
    for i, s in enumerate(items):
        if not s or len(s) > MAX_STOP_CHARS:
            raise ServeRequestError(f"a stop sequence must have 1 to {MAX_STOP_CHARS} characters, got {len(s)}",
                                    param=f"{key}[{i}]")
    return tuple(items)


def _choice(choice: Any) -> str | None:
    """tool_choice as a word: "none", "auto", "required"/"any", or "named" (a function named)."""
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict):
        kind = choice.get("type")
        return kind if kind in ("none", "auto", "any") else "named"
    return None
