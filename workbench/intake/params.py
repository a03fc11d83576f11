"""Model parameters carried with a request (part of the normalized conversation)."""

from __future__ import annotations

import json

from ..conversation import ModelParams
from ..errors import RequestError

_MESSAGE_KEYS = {"messages", "tools", "system", "format", "title", "description", "requests",
                 "context_window", "tool_choice", "stream"}


def _number(req: dict, key: str, kind: type) -> float | int | None:
    v = req.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
        raise RequestError(f"must be a {kind.__name__}, got {v!r}", field=key)
    if v < 0:
        raise RequestError(f"must not be negative, got {v!r}", field=key)
    return v


def parse_params(req: dict, fmt: str) -> ModelParams:
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
