"""Prefill with prefix reuse: the engine keeps the KV cache of earlier prompts in a radix tree
(byte-capped, LRU) and a new prompt prefills only what follows its longest cached prefix.

`processed_tokens` counts every token the model ran over: the proof that the reuse path does not
re-run the cached prefix is a count, not a timing.

A long prompt is prefilled in chunks (`chunk` tokens per forward pass, the KV cache carried from one
to the next: the same logits and KV as one pass, within float rounding), so that a caller can show
progress and stop between two chunks (`check` raising Cancelled). The times count the forward
passes only, not the waits in `check`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._optional import require
from ..errors import EngineError
from .models import LoadedModel, device_errors, load_model
from .radix import RadixKVCache

DEFAULT_KV_CAP = 2 << 30    # 2 GiB of KV held across prompts
# Tokens per forward pass: small enough on a CPU for a Cancel to act within a second or so, large
# enough on a GPU to keep it busy. WORKBENCH_PREFILL_CHUNK overrides both (0: one pass).
CHUNK_CPU, CHUNK_GPU = 512, 2048
Progress = Callable[[str, int, int], None]     # (pass: "prefill" or "baseline", tokens done, tokens in the pass)


def default_chunk(device: str) -> int:
    env = os.environ.get("WORKBENCH_PREFILL_CHUNK", "").strip()
    if env:
        try:
            return max(int(env), 0)
        except ValueError:
            raise EngineError(f"WORKBENCH_PREFILL_CHUNK must be a number of tokens, got {env!r}") from None
    return CHUNK_GPU if device.startswith("cuda") else CHUNK_CPU


@dataclass(frozen=True)
class TopToken:
    id: int
    text: str
    prob: float


@dataclass
class PrefillReport:
    tokens: int
    reused_tokens: int
    prefilled_tokens: int
    prefill_ms: float
    kv_bytes: int                     # the KV of this prompt
    cache_bytes: int                  # everything the engine holds after it
    baseline_ms: float | None = None  # a full prefill of the same prompt, same run (on request)
    top: list[TopToken] = field(default_factory=list)
    logits: Any = None                # the last position's logits (torch, float32, on the CPU)

    def to_json(self) -> dict:
        out = {"tokens": self.tokens, "reused_tokens": self.reused_tokens, "prefilled_tokens": self.prefilled_tokens,
               "prefill_ms": round(self.prefill_ms, 3), "kv_bytes": self.kv_bytes, "cache_bytes": self.cache_bytes}
        if self.baseline_ms is not None:
            out["baseline_ms"] = round(self.baseline_ms, 3)
            out["saved_ms"] = round(self.baseline_ms - self.prefill_ms, 3)
        if self.top:
            out["top"] = [{"id": t.id, "text": t.text, "prob": round(t.prob, 6)} for t in self.top]
        return out


class Engine:
    def __init__(self, model: LoadedModel, *, kv_cap_bytes: int = DEFAULT_KV_CAP):
        self.m = model
        self.cache = RadixKVCache(kv_cap_bytes)
        self.processed_tokens = 0            # tokens the model ran over, reuse path and baselines alike
        self.held_ids: np.ndarray | None = None   # the last generation's prompt + reply (generate.py)
        self.torch = require("torch", "the prefill engine")
        self.transformers = require("transformers", "the prefill engine")

    @classmethod
    def load(cls, name: str, *, vocab_size: int, device: str | None = None, dtype: str | None = None,
             kv_cap_bytes: int = DEFAULT_KV_CAP) -> "Engine":
        return cls(load_model(name, vocab_size=vocab_size, device=device, dtype=dtype), kv_cap_bytes=kv_cap_bytes)

    def prefill(self, ids: np.ndarray, *, reuse: bool = True, baseline: bool = False, top_k: int = 0,
                tokenizer: Any = None, chunk: int | None = None, check: Callable[[], None] | None = None,
                progress: Progress | None = None, keys: np.ndarray | None = None) -> PrefillReport:
        """Run the model over prompt `ids`, reusing the longest cached prefix (at least the last
        token is always run: its logits are the answer). Holds the prompt's KV afterwards. `chunk`:
        tokens per forward pass (default `default_chunk`, 0: one pass); `check()` runs between
        chunks and may raise Cancelled (nothing of this prompt is then held); `progress(pass, done,
        total)` after each chunk. `keys`: what the KV is held and looked up by, when not the ids
        themselves — `AssemblyResult.content_ids()`, where an image's tokens stand for its content,
        so that the KV of one image is never reused for another of the same size (as vLLM keys
        its blocks by the image's hash)."""
        ids = np.asarray(ids, dtype=np.uint32)
        n = len(ids)
        held = ids if keys is None else np.asarray(keys, dtype=np.uint32)
        if len(held) != n:
            raise EngineError(f"{len(held)} keys for {n} prompt tokens", hint="pass result.content_ids()")
        if n == 0:
            raise EngineError("the prompt is empty")
        if self.m.window and n > self.m.window:
            raise EngineError(f"the prompt has {n} tokens, more than the model's window of {self.m.window}",
                              hint="truncate it (a smaller --context-window) or pick a model with a longer window")
        top_id = int(ids.max())
        if top_id >= self.m.vocab_size:
            raise EngineError(f"token id {top_id} is outside the model's vocabulary of {self.m.vocab_size}",
                              hint="use the model's own tokenizer")
        reused = 0
        match = self.cache.match(held) if reuse else None
        if match is not None:
            reused = min(match.length, n - 1)
        step = default_chunk(self.m.device) if chunk is None else chunk
        with device_errors(self.m.device, f"prefill of {n} tokens"):
            out, ms = self._forward_chunks(ids[reused:], self._cache_from(match, reused), step, check, progress,
                                           "prefill")
            layers = [(layer.keys, layer.values) for layer in out.cache.layers]
            kv_bytes = sum(int(k.nbytes) + int(v.nbytes) for k, v in layers)
            self.cache.insert(held, layers)
            base = None
            if baseline:
                base = self._forward_chunks(ids, self._cache_from(None, 0), step, check, progress, "baseline")[1]
        logits = out.logits[0, -1].float().cpu()
        return PrefillReport(n, reused, n - reused, ms, kv_bytes, self.cache.nbytes, base,
                             self._top(logits, top_k, tokenizer), logits)

    def _cache_from(self, match: Any, length: int) -> Any:
        cache = self.transformers.DynamicCache()
        if match is not None and length > 0:
            for i, (k, v) in enumerate(self.cache.gather(match, length)):
                cache.update(k, v, i)
        return cache

    def _forward_chunks(self, ids: np.ndarray, cache: Any, chunk: int, check: Callable[[], None] | None,
                        progress: Progress | None, what: str) -> tuple[Any, float]:
        """`ids` after what `cache` holds, `chunk` tokens per pass (0: one pass): the last pass's
        output (its logits are the last position's; its cache holds them all) and the time, in ms,
        spent in the forward passes."""
        total, step = len(ids), chunk if chunk > 0 else len(ids)
        out, ms = None, 0.0
        for start in range(0, total, step):
            if check is not None:
                check()
            t0 = time.perf_counter()
            out = self._forward(ids[start:start + step], cache)
            ms += (time.perf_counter() - t0) * 1e3
            if progress is not None:
                progress(what, min(start + step, total), total)
        return out, ms

    def _forward(self, ids: np.ndarray, cache: Any) -> Any:
        torch = self.torch
        past = cache.get_seq_length()
        x = torch.from_numpy(ids.astype(np.int64)).unsqueeze(0).to(self.m.device)
        positions = torch.arange(past, past + len(ids), device=self.m.device).unsqueeze(0)
        with torch.inference_mode():
            out = self.m.model(input_ids=x, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1)
        if self.m.device.startswith("cuda"):
            torch.cuda.synchronize()
        self.processed_tokens += len(ids)
        return out

    def _top(self, logits: Any, k: int, tokenizer: Any) -> list[TopToken]:
        if k <= 0:
            return []
        probs = self.torch.softmax(logits, dim=-1)
        p, i = self.torch.topk(probs, min(k, probs.shape[-1]))
        out = []
        for pid, pp in zip(i.tolist(), p.tolist()):
            text = tokenizer.decode([pid]) if tokenizer is not None and pid < getattr(tokenizer, "vocab_size", 0) \
                else f"<{pid}>"
            out.append(TopToken(int(pid), text, float(pp)))
        return out

    def generate(self, ids: np.ndarray, max_new_tokens: int, **kw: Any) -> Any:
        """The next reply to prompt `ids`, decoded with the KV cache (see generate.py for the options)."""
        from .generate import generate
        return generate(self, ids, max_new_tokens, **kw)

    def clear(self) -> None:
        self.cache.clear()
        self.held_ids = None
