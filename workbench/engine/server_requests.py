"""The JSON bodies `serve-engine` accepts, checked field by field into typed requests.

Strict as OpenAI's and vLLM's validation: the body is one JSON object no deeper than the limit,
with no NaN or Infinity and no key twice; every field the server reads has the right type and
range, and token ids lie inside the tokenizer's vocabulary. Each refusal is a ServeRequestError
naming the field (`prompt[3]`, `max_tokens`), so the client can fix its call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ServeRequestError


@dataclass(frozen=True)
class CompletionRequest:
    ids: np.ndarray | None        # the prompt as token ids (uint32), or
    text: str | None              # as text, tokenized by the server
    max_tokens: int


@dataclass(frozen=True)
class TokenizeRequest:
    text: str


def parse_body(raw: bytes, *, max_depth: int) -> dict[str, Any]:
    """The body as a JSON object, or a 400 that says why not."""
    try:
        body = json.loads(raw, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ServeRequestError(f"the JSON is nested deeper than {max_depth} levels") from None
    except ServeRequestError:
        raise
    except (ValueError, TypeError) as exc:      # also bad UTF-8 and integers over 4,300 digits
        raise ServeRequestError(f"the body is not valid JSON: {_short(exc)}",
                                hint="send one JSON object, UTF-8 encoded") from None
    if not isinstance(body, dict):
        raise ServeRequestError(f"the body must be a JSON object, got {kind_of(body)}")
    depth = _depth(body)
    if depth > max_depth:
        raise ServeRequestError(f"the JSON is nested {depth} levels deep, over the limit of {max_depth}")
    return body


def completion_request(body: dict[str, Any], *, model: str, vocab_size: int, max_new_tokens: int) -> CompletionRequest:
    _check_model(body, model)
    _check_common(body)
    max_tokens = body.get("max_tokens", 16)
    if max_tokens is None:
        max_tokens = 16
    if type(max_tokens) is not int or not 0 <= max_tokens <= max_new_tokens:
        raise ServeRequestError(f"must be an integer from 0 to {max_new_tokens}, got {shown(max_tokens)}",
                                param="max_tokens")
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (list, str)):
        prompt = prompt[0]                     # a batch of one, as the OpenAI client sends it
        where = "prompt[0]"
    else:
        where = "prompt"
    if isinstance(prompt, str):
        return CompletionRequest(None, _text(prompt, where), max_tokens)
    if isinstance(prompt, list):
        return CompletionRequest(token_ids(prompt, vocab_size, where), None, max_tokens)
    if prompt is None:
        raise ServeRequestError("is required: a string or a list of token ids", param="prompt")
    raise ServeRequestError(f"must be a string or a list of token ids, got {kind_of(prompt)}", param="prompt")


def tokenize_request(body: dict[str, Any], *, model: str) -> TokenizeRequest:
    _check_model(body, model)
    if "add_special_tokens" in body and not isinstance(body["add_special_tokens"], bool):
        raise ServeRequestError(f"must be true or false, got {shown(body['add_special_tokens'])}",
                                param="add_special_tokens")
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise ServeRequestError(f"must be a string, got {kind_of(prompt)}", param="prompt",
                                hint="this server tokenizes text prompts only")
    return TokenizeRequest(_text(prompt, "prompt", allow_empty=True))


def token_ids(prompt: list, vocab_size: int, where: str = "prompt") -> np.ndarray:
    """A JSON list of token ids as uint32, each checked: an int (not a bool, not a float) from 0 to
    the vocabulary's last id. Checked before any conversion: 2**40 would overflow uint32."""
    if not prompt:
        raise ServeRequestError("is empty: send at least one token id", param=where)
    for i, x in enumerate(prompt):
        if type(x) is not int:
            if i == 0 and isinstance(x, (list, str)):
                raise ServeRequestError("a batch of several prompts is not supported: send one per request",
                                        param=where)
            raise ServeRequestError(f"must be a token id (an integer), got {kind_of(x)} {shown(x)}",
                                    param=f"{where}[{i}]")
        if not 0 <= x < vocab_size:
            raise ServeRequestError(f"token id {shown(x)} is outside the tokenizer's vocabulary (0 to "
                                    f"{vocab_size - 1})", param=f"{where}[{i}]",
                                    hint="send ids from the model's own tokenizer")
    return np.asarray(prompt, dtype=np.uint32)


def _text(prompt: str, where: str, *, allow_empty: bool = False) -> str:
    if not prompt and not allow_empty:
        raise ServeRequestError("is empty", param=where)
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as exc:      # a lone surrogate ("\ud800") reaches JSON, not UTF-8
        raise ServeRequestError(f"has a lone surrogate at character {exc.start}: not valid Unicode text",
                                param=where) from None
    return prompt


def _check_model(body: dict[str, Any], model: str) -> None:
    name = body.get("model")
    if name is None:
        return
    if not isinstance(name, str):
        raise ServeRequestError(f"must be a string, got {kind_of(name)}", param="model")
    if name != model:
        raise ServeRequestError(f"the model {name[:100]!r} does not exist here; this server has {model!r}",
                                status=404, param="model")


def _check_common(body: dict[str, Any]) -> None:
    if body.get("stream") not in (None, False):
        raise ServeRequestError(f"streaming is not supported, got {shown(body['stream'])}", param="stream")
    n = body.get("n")
    if n is not None and (type(n) is not int or n != 1):
        raise ServeRequestError(f"only one choice is generated: must be 1, got {shown(n)}", param="n")
    t = body.get("temperature")
    if t is not None and (type(t) not in (int, float) or not 0 <= t <= 2):
        raise ServeRequestError(f"must be a number from 0 to 2, got {shown(t)}", param="temperature",
                                hint="decoding here is always greedy")


def _no_constant(name: str) -> Any:
    raise ServeRequestError(f"{name} is not JSON (numbers must be finite)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ServeRequestError(f"the key {k[:60]!r} appears twice in one object")
        out[k] = v
    return out


def _depth(value: Any) -> int:
    """Nesting depth, without recursion (the parser's own limit already stopped the deepest)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        deepest = max(deepest, d)
        stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return deepest


def kind_of(v: Any) -> str:
    """What a JSON value is, in words, for an error message (shared by the chat routes' checks)."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def shown(v: Any) -> str:
    """A JSON value as an error message quotes it: short, and a huge integer by its length."""
    text = json.dumps(v) if not isinstance(v, int) or abs(v) < 10**30 else f"an integer of {len(str(abs(v)))} digits"
    return text if len(text) <= 60 else text[:57] + "…"


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:197] + "…"
