"""Generation on the local engine: prefill the prompt reusing the radix KV cache, then decode one token
at a time with the KV cache, until an end-of-turn id or the token limit.

Afterwards the engine holds the prompt AND the reply (the KV of every generated token, the last one
included), so the next turn's prompt, which repeats the reply as the template renders it, prefills
only what follows their common prefix. `GenerateReport.held_before` and `break_at` say how far the
new prompt followed what the engine held, and where it parted: the teaching point of a chat engine's
prefix cache (a template that re-renders the reply differently, or a reply that does not
re-tokenize to the same ids, breaks the reuse there).

Greedy decoding (temperature 0) is deterministic, and decoding with a warm cache gives the same ids
as decoding from scratch (the tests check both).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..difference import first_difference
from ..errors import EngineError
from .models import device_errors


@dataclass
class GenerateReport:
    prompt_tokens: int
    reused_tokens: int                 # of the prompt, served by the engine's KV cache
    prefilled_tokens: int              # of the prompt, run through the model
    new_ids: np.ndarray                # the reply's ids (uint32), the stop id included when one ended it
    text: str                          # the reply decoded (without the stop id)
    finish_reason: str                 # "stop" (an end-of-turn id) or "length"
    prefill_ms: float
    decode_ms: float
    held_before: int                   # tokens of the sequence the engine held from the last generation
    common: int                        # of those, how many the new prompt starts with
    break_at: int | None = None        # where the prompt parted from the held sequence (None: it did not)
    held_token: int | None = None      # the held id there
    prompt_token: int | None = None    # the prompt's id there
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def completion_tokens(self) -> int:
        return int(len(self.new_ids))

    def to_json(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "reused_tokens": self.reused_tokens,
                "prefilled_tokens": self.prefilled_tokens, "completion_tokens": self.completion_tokens,
                "new_ids": [int(i) for i in self.new_ids], "text": self.text, "finish_reason": self.finish_reason,
                "prefill_ms": round(self.prefill_ms, 3), "decode_ms": round(self.decode_ms, 3),
                "held_before": self.held_before, "common": self.common, "break_at": self.break_at,
                "held_token": self.held_token, "prompt_token": self.prompt_token}


def generate(engine: Any, ids: np.ndarray, max_new_tokens: int, *, stop_ids: Iterable[int] = (),
             temperature: float = 0.0, seed: int = 0, reuse: bool = True, tokenizer: Any = None,
             suppress_ids: Iterable[int] = (), check: Callable[[], None] | None = None,
             on_token: Callable[[np.ndarray], None] | None = None, keys: np.ndarray | None = None) -> GenerateReport:
    """The next reply to prompt `ids` on `engine` (an engine.Engine: typed loosely, since the Engine
    imports this module for its `generate` method). `stop_ids`: end-of-turn ids (the first one generated ends the
    reply). `suppress_ids`: ids never generated (a synthetic model's control tokens). `check`, called
    before each decode step, may raise Cancelled; `on_token(new_ids)` sees the reply grow. `keys`: what
    the prompt's KV is held and looked up by when not its ids (`AssemblyResult.content_ids()`: an image
    as its content, see Engine.prefill)."""
    ids = _checked_prompt(engine, ids, max_new_tokens)
    lookup = ids if keys is None else np.asarray(keys, dtype=np.uint32)
    if len(lookup) != len(ids):
        raise EngineError(f"{len(lookup)} keys for {len(ids)} prompt tokens", hint="pass result.content_ids()")
    n, torch = len(ids), engine.torch
    limit = _vocab_limit(engine, tokenizer)
    stops = {int(i) for i in stop_ids}
    mask = _suppression(torch, limit, suppress_ids, stops)
    gen = torch.Generator().manual_seed(int(seed))
    held = getattr(engine, "held_ids", None)
    common = first_difference(held, lookup) if held is not None else 0
    match = engine.cache.match(lookup) if reuse else None
    reused = min(match.length, n - 1) if match is not None else 0
    out: list[int] = []
    with device_errors(engine.m.device, f"generation after a prompt of {n} tokens"):
        cache = engine._cache_from(match, reused)
        t0 = time.perf_counter()
        logits = engine._forward(ids[reused:], cache).logits[0, -1]
        prefill_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        finish = "length"
        while len(out) < max_new_tokens:
            if check is not None:
                check()
            nxt = _pick(torch, logits, limit, mask, temperature, gen)
            out.append(nxt)
            if on_token is not None:
                on_token(np.asarray(out, dtype=np.uint32))
            # The KV of every generated token is computed, the last one too: the engine then holds the
            # whole reply for the next turn.
            logits = engine._forward(np.asarray([nxt], dtype=np.uint32), cache).logits[0, -1]
            if nxt in stops:
                finish = "stop"
                break
        decode_ms = (time.perf_counter() - t0) * 1e3
        full = np.concatenate([lookup, np.asarray(out, dtype=np.uint32)])
        engine.cache.insert(full, [(layer.keys, layer.values) for layer in cache.layers])
    engine.held_ids = full
    new = np.asarray(out, dtype=np.uint32)
    text_ids = out[:-1] if finish == "stop" else out
    text = tokenizer.decode(text_ids) if tokenizer is not None else ""
    report = GenerateReport(n, reused, n - reused, new, text, finish, prefill_ms, decode_ms,
                            0 if held is None else len(held), common, model=engine.m.to_json())
    if held is not None and common < len(held):
        report.break_at = common
        report.held_token = int(held[common])
        report.prompt_token = int(ids[common]) if common < n else None
    return report


def _checked_prompt(engine: Any, ids: np.ndarray, max_new_tokens: int) -> np.ndarray:
    ids = np.asarray(ids, dtype=np.uint32)
    n = len(ids)
    if n == 0:
        raise EngineError("the prompt is empty")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise EngineError(f"max new tokens must be a whole number of at least 1 (got {max_new_tokens!r})")
    window = engine.m.window
    if window and n + max_new_tokens > window:
        raise EngineError(f"the prompt's {n} tokens plus {max_new_tokens} new ones exceed the model's window "
                          f"of {window}", hint="ask for fewer new tokens or truncate the prompt")
    top = int(ids.max())
    if top >= engine.m.vocab_size:
        raise EngineError(f"token id {top} is outside the model's vocabulary of {engine.m.vocab_size}",
                          hint="use the model's own tokenizer")
    return ids


def _vocab_limit(engine: Any, tokenizer: Any) -> int:
    """Ids past the tokenizer's vocabulary are padding rows of the model: never generated."""
    size = int(getattr(tokenizer, "vocab_size", 0) or 0)
    return min(size, engine.m.vocab_size) if size else engine.m.vocab_size


def _suppression(torch: Any, limit: int, suppress: Iterable[int], stops: set[int]) -> Any:
    banned = [int(i) for i in suppress if 0 <= int(i) < limit and int(i) not in stops]
    if not banned:
        return None
    mask = torch.zeros(limit, dtype=torch.bool)
    mask[banned] = True
    return mask


def _pick(torch: Any, logits: Any, limit: int, mask: Any, temperature: float, gen: Any) -> int:
    scores = logits[:limit].float().cpu()
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    if temperature <= 0:
        return int(scores.argmax())
    probs = torch.softmax(scores / float(temperature), dim=-1)
    return int(torch.multinomial(probs, 1, generator=gen))
