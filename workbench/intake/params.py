"""Model parameters carried with a request (part of the normalized conversation)."""

from __future__ import annotations

import json
import math
from typing import Any, overload

from ..conversation import ModelParams, canonical_json
from ..errors import RequestError

_MESSAGE_KEYS = {"messages", "tools", "system", "format", "title", "description", "requests",
                 "context_window", "tool_choice", "stream", "variables", "system_template"}


@overload
def _number(req: dict[str, Any], key: str, kind: type[int]) -> int | None: ...
@overload
def _number(req: dict[str, Any], key: str, kind: type[float]) -> float | None: ...


def _number(req: dict[str, Any], key: str, kind: type[int] | type[float]) -> float | int | None:
    v = req.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
        raise RequestError(f"must be {'an integer' if kind is int else 'a number'}, got {v!r}", field=key)
    if not math.isfinite(v):
        raise RequestError(f"must be a finite number, got {v!r}", field=key)
    if v < 0:
        raise RequestError(f"must not be negative, got {v!r}", field=key)
    return v


def check_options(req: dict[str, Any]) -> None:
    """Request fields the workbench reads itself (not model parameters) must have their type:
    a wrong one would otherwise be ignored, and the request rendered as if it were absent."""
    cw = req.get("context_window")
    if cw is not None and (type(cw) is not int or cw <= 0):
        raise RequestError(f"must be a positive integer (tokens), got {cw!r}", field="context_window",
                           hint='write the number of tokens, e.g. "context_window": 8192')
    stream = req.get("stream")
    if stream is not None and type(stream) is not bool:
        raise RequestError(f"must be true or false, got {stream!r}", field="stream")
    choice = req.get("tool_choice")
    if choice is not None and not isinstance(choice, (str, dict)):
        raise RequestError(f"must be a string or an object, got {type(choice).__name__}", field="tool_choice",
                           hint='use "auto", "none", "required" or {"type": "function", ...}')
    for key in ("title", "description"):
        if req.get(key) is not None and not isinstance(req[key], str):
            raise RequestError(f"must be a string, got {type(req[key]).__name__}", field=key)


def parse_params(req: dict[str, Any], fmt: str) -> ModelParams:
    check_options(req)
    model = req.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError("must be a string", field="model")
    max_key = "max_completion_tokens" if req.get("max_completion_tokens") is not None else "max_tokens"
    stop_key = "stop_sequences" if fmt == "anthropic" else "stop"
    stop = req.get(stop_key)
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)):
        raise RequestError("must be a string or a list of strings", field=stop_key)
    rf = req.get("response_format")
    if rf is not None and not isinstance(rf, dict):
        raise RequestError(f"must be an object, got {type(rf).__name__}", field="response_format",
                           hint='use {"type": "json_object"} or {"type": "json_schema", ...}')
    known = _MESSAGE_KEYS | {"model", "max_tokens", "max_completion_tokens", "temperature", "top_p",
                             stop_key, "response_format"}
    extra = tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in req.items() if k not in known))
    return ModelParams(
        model=model,
        max_tokens=_number(req, max_key, int),
        temperature=_number(req, "temperature", float),
        top_p=_number(req, "top_p", float),
        stop=tuple(stop or ()),
        response_format=None if rf is None else json.dumps(rf, sort_keys=True),
        extra=extra,
    )


def parse_template_flag(value: object, *, field: str, index: int | None) -> tuple[bool, str | None]:
    """A message's `template` key: true, or {"variables": {...}} with its template-local scope."""
    if value is None or value is False:
        return False, None
    if value is True:
        return True, None
    if isinstance(value, dict):
        unknown = set(value) - {"variables"}
        if unknown:
            raise RequestError(f"unknown key {sorted(unknown)[0]!r}", field=field, index=index,
                               hint='use "template": true or {"variables": {...}}')
        local = value.get("variables", {})
        if not isinstance(local, dict):
            raise RequestError("variables must be an object of name: value", field=f"{field}.variables",
                               index=index)
        return True, canonical_json(local) if local else None
    raise RequestError(f"must be true or an object, got {value!r}", field=field, index=index,
                       hint='use "template": true or {"variables": {...}}')


def parse_request_variables(req: dict[str, Any]) -> str | None:
    v = req.get("variables")
    if v is None:
        return None
    if not isinstance(v, dict):
        raise RequestError("must be an object of name: value", field="variables")
    return canonical_json(v) if v else None
