"""Reading the GenAI span attributes every convention version shares: usage and request parameters.

Usage counts: `gen_ai.usage.input_tokens` / `output_tokens` (formerly `prompt_tokens` /
`completion_tokens`), cached reads and writes (`gen_ai.usage.cache_read.input_tokens`, formerly
`gen_ai.usage.cache_read_input_tokens`; the same for `cache_creation`), reasoning tokens and a
total where one was recorded (shapes.py puts them back under the API's own names)."""

from __future__ import annotations

from typing import Any

from .shapes import anthropic_usage, openai_usage

# gen_ai.request.* -> the request field (Chat Completions; Anthropic names differ for two).
PARAMS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "max_tokens": "max_tokens",
          "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty", "seed": "seed",
          "stop_sequences": "stop", "choice.count": "n"}


def usage(a: dict[str, Any], anthropic: bool) -> dict[str, Any] | None:
    def pick(*keys: str) -> Any:
        return next((a[k] for k in keys if isinstance(a.get(k), int) and not isinstance(a.get(k), bool)), None)
    prompt = pick("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
    completion = pick("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
    cache_read = pick("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
    cache_write = pick("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens")
    if anthropic:
        return anthropic_usage(prompt=prompt, completion=completion, cache_read=cache_read, cache_write=cache_write)
    reasoning = pick("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens",
                     "llm.usage.reasoning_tokens")
    return openai_usage(prompt=prompt, completion=completion,
                        total=pick("gen_ai.usage.total_tokens", "llm.usage.total_tokens"), cache_read=cache_read,
                        cache_write=cache_write, reasoning=reasoning or None)


def params(request: dict[str, Any], a: dict[str, Any], anthropic: bool, model: str | None) -> None:
    """The request's model and sampling parameters, as recorded (`gen_ai.request.*`), first in the
    request as a client writes them."""
    head: dict[str, Any] = {}
    if model:
        head["model"] = model
    for key, field in PARAMS.items():
        v = a.get(f"gen_ai.request.{key}")
        if v is None or isinstance(v, (dict, list)) and key != "stop_sequences":
            continue
        if anthropic and field == "stop":
            field = "stop_sequences"
        if anthropic and field in ("n", "presence_penalty", "frequency_penalty", "seed"):
            continue
        head[field] = v
    rest = dict(request)
    request.clear()
    request.update(head)
    request.update(rest)
