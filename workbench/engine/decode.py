"""One chat request's generation on the shared engine, a turn at a time.

The engine serves one request at a time (the server's FairLock). A request here takes a turn per
prompt chunk and a turn per generated token, and keeps its own KV cache (a DynamicCache) between
its turns, so other requests run between two of its tokens and none waits for a whole reply. The
prompt's KV comes from the radix tree (the longest held prefix: the tokens reported as cached), and
the tree holds the prompt once it is prefilled, and the prompt plus the whole reply at the end, as
`Engine.generate` does: the next turn of the conversation reuses both.

Sampling: temperature 0 is greedy; otherwise softmax(logits / temperature), cut to the top_k most
likely and to the top_p probability mass, drawn from a seeded generator. Ids past the tokenizer's
vocabulary (padding rows of the model) and `suppress` are never drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .engine import Engine
from .models import device_errors

Turn = Callable[[float], AbstractContextManager[None]]     # a turn on the engine, waiting at most so long


@dataclass(frozen=True)
class Sampling:
    max_new_tokens: int
    stop_ids: frozenset[int] = frozenset()
    suppress_ids: tuple[int, ...] = ()
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0                       # 0: no cut
    seed: int = 0


class Decoding:
    def __init__(self, engine: Engine, ids: np.ndarray, keys: np.ndarray, sampling: Sampling, *,
                 vocab_limit: int, turn: Turn, engine_wait_s: float, chunk: int):
        self.engine, self.ids, self.keys, self.s = engine, ids, keys, sampling
        self.turn, self.engine_wait_s, self.chunk = turn, engine_wait_s, chunk
        torch = engine.torch
        self.limit = vocab_limit
        banned = [i for i in sampling.suppress_ids if 0 <= i < vocab_limit and i not in sampling.stop_ids]
        self.mask = None
        if banned:
            self.mask = torch.zeros(vocab_limit, dtype=torch.bool)
            self.mask[banned] = True
        self.gen = torch.Generator().manual_seed(int(sampling.seed))
        self.new_ids: list[int] = []
        self.cached = 0                      # prompt tokens the radix tree served
        self.finish: str | None = None       # "stop" or "length" once done
        self._cache: Any = None
        self._logits: Any = None

    @property
    def done(self) -> bool:
        return self.finish is not None

    def prefill(self, first_wait: float, check: Callable[[], None] | None = None) -> int:
        """Prefill the prompt, `chunk` tokens per turn, from its longest held prefix; the tokens served
        from the cache. `check()` runs between chunks (it raises to give up: a client gone)."""
        eng, n = self.engine, len(self.ids)
        with device_errors(eng.m.device, f"prefill of {n} tokens"):
            with self.turn(first_wait):
                match = eng.cache.match(self.keys)
                self.cached = min(match.length, n - 1)      # the last token always runs: its logits are the answer
                self._cache = eng._cache_from(match, self.cached)
                end = min(n, self.cached + self.chunk)
                out = eng._forward(self.ids[self.cached:end], self._cache)
                if end == n:
                    self._hold(self.keys)
            while end < n:
                if check is not None:
                    check()
                with self.turn(self.engine_wait_s):
                    start, end = end, min(n, end + self.chunk)
                    out = eng._forward(self.ids[start:end], self._cache)
                    if end == n:
                        self._hold(self.keys)
        self._logits = out.logits[0, -1]
        return self.cached

    def step(self) -> int:
        """Generate the next token (one turn on the engine) and return it."""
        if self.done or self._logits is None:
            raise RuntimeError("step() before prefill() or after the end")
        nxt = self._pick(self._logits)
        self.new_ids.append(nxt)
        if nxt in self.s.stop_ids:
            self.finish = "stop"
        elif len(self.new_ids) >= self.s.max_new_tokens:
            self.finish = "length"
        eng = self.engine
        with device_errors(eng.m.device, "generation"), self.turn(self.engine_wait_s):
            # The KV of every generated token is computed, the last one too: the tree then holds
            # the whole reply for the next turn of the conversation.
            self._logits = eng._forward(np.asarray([nxt], dtype=np.uint32), self._cache).logits[0, -1]
            if self.done:
                self._hold(self._sequence())
        return nxt

    def stop_early(self) -> None:
        """End the reply here (a stop string ended its text): the tree holds what was generated."""
        if self.done:
            return
        self.finish = "stop"
        if self.new_ids:
            with self.turn(self.engine_wait_s):
                self._hold(self._sequence())

    def _sequence(self) -> np.ndarray:
        return np.concatenate([self.keys, np.asarray(self.new_ids, dtype=np.uint32)])

    def _hold(self, keys: np.ndarray) -> None:
        self.engine.cache.insert(keys, [(layer.keys, layer.values) for layer in self._cache.layers])

    def _pick(self, logits: Any) -> int:
        torch, s = self.engine.torch, self.s
        scores = logits[: self.limit].float().cpu()
        if self.mask is not None:
            scores = scores.masked_fill(self.mask, float("-inf"))
        if s.temperature <= 0:
            return int(scores.argmax())
        scores = scores / float(s.temperature)
        if 0 < s.top_k < len(scores):
            kth = torch.topk(scores, s.top_k).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if s.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            # keep the most likely tokens until their mass reaches top_p (the first one always)
            drop = torch.cumsum(sorted_p, dim=-1) - sorted_p >= s.top_p
            probs = probs.clone()
            probs[order[drop]] = 0.0
        return int(torch.multinomial(probs, 1, generator=self.gen))


def vocab_limit(engine: Engine, tokenizer: Any) -> int:
    """Ids past the tokenizer's vocabulary are padding rows of the model: never generated."""
    size = int(getattr(tokenizer, "vocab_size", 0) or 0)
    return min(size, engine.m.vocab_size) if size else engine.m.vocab_size


def ids_of(tokenizer: Any, strings: Iterable[str | None]) -> set[int]:
    """The ids of those strings that are one special token of the tokenizer."""
    return {int(tokenizer.specials[s]) for s in strings if s and s in tokenizer.specials}
