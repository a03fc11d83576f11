"""The cache figures a logged call reports (`response.usage`), read strictly for reconciliation
(reconcile.py, docs/logs.md section 8).

`logs.reported_usage` keeps whatever numbers a usage object holds, for display. Reconciliation
compares them with predictions and counts the differences, so here a usage object must say what
it means: its API's shape is recognised, each figure it needs must be there, be an integer, not be
negative and not exceed the prompt. Anything else is a problem for that line (a per-line
diagnostic), never a guess: a wrong figure counted as a cache miss would be a false finding.

    >>> parse_reported({"usage": {"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1920}}}, 2000)
    Reported(cached=1920, written=None, prompt=2000, shape='chat')
    >>> parse_reported({"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 11}}}, 10)
    'usage.prompt_tokens_details.cached_tokens: 11 is larger than the prompt (10 tokens)'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reported:
    """What one call reported, in the provider's tokens. `written`: the cache-write tokens where the
    API reports them apart (Anthropic `cache_creation_input_tokens`), else None. `prompt`: the whole
    prompt as the provider counted it (OpenAI's `prompt_tokens` includes the cached tokens;
    Anthropic's three figures added up)."""
    cached: int
    written: int | None
    prompt: int | None
    shape: str            # chat | responses | anthropic

    def to_json(self) -> dict[str, Any]:
        return {"cached": self.cached, "written": self.written}


def _show(v: Any) -> str:
    try:
        return json.dumps(v)[:40]
    except (TypeError, ValueError):
        return repr(v)[:40]


def _figure(obj: dict[str, Any], path: str, *, required: bool) -> int | str | None:
    """The integer at `path` (dotted) in `obj`: an int, None when absent and not required, or the problem."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return f"usage.{path}: missing" if required else None
        cur = cur[part]
    if cur is None and not required:
        return None
    # bool is an int in Python, and JSON's 12.0 a float: neither is a token count as the APIs send it.
    if isinstance(cur, bool) or not isinstance(cur, int):
        return f"usage.{path}: must be an integer, got {_show(cur)}"
    if cur < 0:
        return f"usage.{path}: must not be negative, got {cur}"
    return cur


def parse_reported(response: Any, tokens: int) -> Reported | str | None:
    """The cache figures of a logged `response`: a Reported, a problem (str) for a usage object that
    is there but unusable, or None where the call logged no usage at all (no response, or no
    `usage` key: nothing to reconcile, nothing wrong). `tokens`: the prompt as rendered here, the
    bound for an Anthropic usage (whose own figures cannot contradict each other)."""
    if not isinstance(response, dict) or response.get("usage") is None:
        return None
    usage = response["usage"]
    if not isinstance(usage, dict):
        return f"usage: must be an object, got {_show(usage)}"
    anthropic = "cache_read_input_tokens" in usage or "cache_creation_input_tokens" in usage or (
        "input_tokens" in usage and "input_tokens_details" not in usage and "prompt_tokens" not in usage
        and "output_tokens" in usage and "total_tokens" not in usage)
    if anthropic:
        got = [_figure(usage, k, required=True) for k in ("input_tokens", "cache_read_input_tokens")]
        written = _figure(usage, "cache_creation_input_tokens", required=False)
        for g in (*got, written):
            if isinstance(g, str):
                return g
        inp, cached = int(got[0] or 0), int(got[1] or 0)
        w = int(written) if written is not None else 0
        if cached + w > tokens:
            return (f"usage: cache_read_input_tokens + cache_creation_input_tokens = {cached + w} is larger than "
                    f"the prompt ({tokens} tokens as rendered here)")
        return Reported(cached, w, inp + cached + w, "anthropic")
    if "input_tokens" in usage:
        shape, total_key, cached_key = "responses", "input_tokens", "input_tokens_details.cached_tokens"
    elif "prompt_tokens" in usage:
        shape, total_key, cached_key = "chat", "prompt_tokens", "prompt_tokens_details.cached_tokens"
    else:
        return "usage: no prompt token count (prompt_tokens, input_tokens)"
    total, cached_v = _figure(usage, total_key, required=True), _figure(usage, cached_key, required=True)
    for g in (total, cached_v):
        if isinstance(g, str):
            return g
    assert isinstance(total, int) and isinstance(cached_v, int)
    if cached_v > total:
        return f"usage.{cached_key}: {cached_v} is larger than the prompt ({total} tokens)"
    return Reported(cached_v, None, total, shape)


def reply_token_ids(response: Any) -> list[int] | None:
    """The reply's token ids as an engine returned them, where the call asked for them (vLLM's
    `return_token_ids` extension, which serve-engine supports, docs/engine.md): `choices[0].token_ids`
    in a Chat Completions response, `token_ids` in an Anthropic Messages or Responses one. None where
    absent or not a list of non-negative integers: the reply is then read from the next call's text.

    These are the ids the engine generated and holds; the reply's text, tokenized again, may differ
    (a reply cut at the length limit can end inside what the tokenizer would merge), so where the
    ids are there they are the better witness of what the next prompt may reuse."""
    if not isinstance(response, dict):
        return None
    ids = response.get("token_ids")
    choices = response.get("choices")
    if ids is None and isinstance(choices, list) and choices and isinstance(choices[0], dict):
        ids = choices[0].get("token_ids")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2 ** 32
                                            for i in ids):
        return None
    return ids
