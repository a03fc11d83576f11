"""KV cache arithmetic, no torch needed: bytes per token, a session's KV growth, and the paged view a
serving engine keeps (fixed-size blocks, shared between requests that start alike, named by the
block-hash chain that the vLLM simulator uses too).

Per token every layer keeps one K and one V vector per KV head: bytes per token = layers × KV heads
× head dim × 2 × dtype bytes. Grouped-query attention (fewer KV heads than query heads) is why
Llama-3-8B holds 128 KiB per token in bf16, not 512 KiB.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NewType, Protocol

import numpy as np

from .. import strict_json
from ..catalog import ModelEntry, find
from ..difference import first_difference
from ..errors import EngineError

DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "float8": 1, "fp8": 1}
BLOCK_SIZE = 16   # vLLM's default block size, in tokens
HASH_ALGOS = ("sha256", "blake2b")   # what a block hash may be computed with (sha256: vLLM's default)

BlockHash = NewType("BlockHash", bytes)   # stands for a full block and every token before it


@dataclass(frozen=True)
class KVConfig:
    """The attention shape that sets the KV cache size."""

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2   # bf16 / fp16

    @property
    def bytes_per_token(self) -> int:
        return self.layers * self.kv_heads * self.head_dim * 2 * self.dtype_bytes

    def bytes_for(self, tokens: int) -> int:
        return tokens * self.bytes_per_token

    def with_dtype(self, dtype: str) -> "KVConfig":
        if dtype not in DTYPE_BYTES:
            raise EngineError(f"unknown dtype {dtype!r}", hint=f"use one of {', '.join(DTYPE_BYTES)}")
        return replace(self, dtype_bytes=DTYPE_BYTES[dtype])

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "layers": self.layers, "kv_heads": self.kv_heads, "head_dim": self.head_dim,
                "dtype_bytes": self.dtype_bytes, "bytes_per_token": self.bytes_per_token}


# From each model's published config.json (num_hidden_layers, num_key_value_heads, head_dim or
# hidden_size / num_attention_heads), bf16. `tiny` is the synthetic test model (engine/models.py).
KV_CONFIGS: dict[str, KVConfig] = {c.name: c for c in [
    KVConfig("Llama-3-8B", 32, 8, 128), KVConfig("Qwen2.5-7B", 28, 4, 128),
    KVConfig("Mistral-7B", 32, 8, 128), KVConfig("Gemma-3-1B", 26, 1, 256),
    KVConfig("tiny", 4, 2, 64, dtype_bytes=4)]}


def kv_config(name: str | KVConfig) -> KVConfig:
    """A named config, one read from a model's config.json (a file or the folder holding it), or a
    catalog model's KV shape (`Qwen/Qwen2.5-72B-Instruct`, workbench/catalog)."""
    if isinstance(name, KVConfig):
        return name
    if name in KV_CONFIGS:
        return KV_CONFIGS[name]
    path = Path(name)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        entry = find(name)
        if entry is not None:
            return from_catalog(entry)
        raise EngineError(f"unknown KV config {name!r}: not a named config, a catalog model or a config.json",
                          hint=f"use one of {', '.join(KV_CONFIGS)}, a model from `workbench models`, or a model "
                               "folder / config.json")
    try:
        cfg = strict_json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EngineError(f"{path}: cannot read the model config: {exc}") from None
    if not isinstance(cfg, dict):
        raise EngineError(f"{path}: a model config is a JSON object, got {type(cfg).__name__}")
    return config_from_dict(cfg, name=path.parent.name or str(path))


def from_catalog(entry: ModelEntry) -> KVConfig:
    """A catalog model's KV shape (its published config.json values). Hosted models have none."""
    if entry.kv is None:
        raise EngineError(f"{entry.id} is a hosted model: its KV shape is not public",
                          hint="give a KV shape with --config: a named config, a catalog model that has one, or "
                               "a config.json")
    return KVConfig(entry.id, entry.kv.layers, entry.kv.kv_heads, entry.kv.head_dim, entry.kv.dtype_bytes)


def config_from_dict(cfg: dict[str, Any], name: str = "config") -> KVConfig:
    """KV shape from a Hugging Face config dict (a multimodal one's text_config is used)."""
    c = cfg.get("text_config", cfg) if isinstance(cfg.get("text_config"), dict) else cfg
    try:
        layers = int(c["num_hidden_layers"])
        heads = int(c["num_attention_heads"])
        kv_heads = int(c.get("num_key_value_heads") or heads)
        head_dim = int(c.get("head_dim") or int(c["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError) as exc:
        raise EngineError(f"{name}: the model config lacks {exc} (num_hidden_layers, num_attention_heads, "
                          f"hidden_size or head_dim)") from None
    dtype = str(c.get("torch_dtype") or c.get("dtype") or cfg.get("torch_dtype") or "bfloat16")
    return KVConfig(name, layers, kv_heads, head_dim, DTYPE_BYTES.get(dtype, 2))


@dataclass(frozen=True)
class PagedTurn:
    turn: int
    tokens: int
    blocks: int             # blocks this prompt occupies (the last one may be partly filled)
    shared_blocks: int      # leading full blocks already held (the hash chain matches), at most (tokens - 1) // block
    new_blocks: int         # blocks computed for this prompt: blocks - shared_blocks, at least 1 (the last token's)
    kv_bytes: int           # of the whole prompt
    held_bytes: int         # held_blocks × block bytes
    held_blocks: int        # every distinct full block so far and this turn's partly filled last one, nothing
    #                         evicted; never fewer than an earlier turn's (the most held at once so far)
    reply_tokens_held: int  # tokens of the reply held after the turn, beyond the prompt (0: no reply known)

    def to_json(self) -> dict[str, int]:
        """The row `workbench kv --json` prints and the KV tab shows (the first seven keys are the ones it
        always printed; scripts read them)."""
        return {"turn": self.turn, "tokens": self.tokens, "blocks": self.blocks, "shared_blocks": self.shared_blocks,
                "new_blocks": self.new_blocks, "kv_bytes": self.kv_bytes, "held_bytes": self.held_bytes,
                "held_blocks": self.held_blocks, "reply_tokens_held": self.reply_tokens_held}


HELD_NOTE = "held: every distinct block so far, nothing evicted"


class HeldTurn(Protocol):
    """A turn as an engine sees it: the prompt, and what the engine holds after the turn (the prompt
    followed by the reply as generated, less its last sampled token where that has no KV).
    `analysis.providers.TurnPrompt` is one: its `held_ids` are what the vLLM simulator caches."""

    @property
    def token_ids(self) -> np.ndarray: ...

    @property
    def held_ids(self) -> np.ndarray: ...


def block_hashes(ids: np.ndarray, block_size: int = BLOCK_SIZE, *, algo: str = "sha256",
                 known: Sequence[BlockHash] = ()) -> list[BlockHash]:
    """The hash chain over the full blocks of `ids`, modelled on vLLM's prefix-caching key
    (kv_cache_utils.hash_block_tokens): the same blocks match, not the same bytes. Ours:
    hash[i] = H(hash[i-1] + block i's ids as little-endian uint32), the first parent the empty
    string; vLLM's hashes a pickled (parent or a per-process NONE_HASH, ids, extra keys) tuple
    (tests/test_one_tree_one_chain.py checks both group blocks alike). Equal hashes, equal
    prefixes: so equal KV. A partly filled last block has no hash (it is never shared).

    `known`: the hashes of the first blocks of `ids`, already computed (of a previous prompt that
    shares them); only the blocks after them are hashed.

        >>> ids = np.arange(40, dtype=np.uint32)
        >>> len(block_hashes(ids, 16)), block_hashes(ids, 16)[:1] == block_hashes(ids[:16], 16)
        (2, True)
    """
    if block_size < 1:
        raise EngineError(f"block size must be at least 1 (got {block_size})")
    if algo not in HASH_ALGOS:
        raise EngineError(f"unknown block hash {algo!r}", hint=f"use one of {', '.join(HASH_ALGOS)}")
    ids = np.asarray(ids, dtype=np.uint32)
    hashes = list(known[:len(ids) // block_size])
    parent = hashes[-1] if hashes else b""
    raw = memoryview(ids[len(hashes) * block_size:len(ids) // block_size * block_size].tobytes())
    step, h = block_size * ids.itemsize, getattr(hashlib, algo)
    for off in range(0, len(raw), step):
        parent = BlockHash(h(parent + raw[off:off + step]).digest())
        hashes.append(parent)
    return hashes


def paged_view(turns: Sequence[np.ndarray | HeldTurn], config: str | KVConfig,
               block_size: int = BLOCK_SIZE) -> list[PagedTurn]:
    """How a paged KV cache that evicts nothing holds a session: per turn, the prompt's blocks, the
    leading full blocks it shares with those already held (vLLM's rule: the hash chain matches,
    and at most (tokens - 1) // block_size, since the last token is always computed again for the
    logits), and the bytes of every distinct block held so far.

    Each turn is a prompt (token ids: the engine then holds the prompt alone) or a `HeldTurn`
    (a `TurnPrompt`): after it the engine also holds the reply as generated, whose blocks the next
    prompt shares. This is what the vLLM simulator (analysis/providers.py) does without a capacity:
    its cached tokens are `shared_blocks × block_size`, turn by turn.

    held_blocks: the distinct full blocks of every prompt and reply so far, and the partly filled
    last block of this turn's (the engine holds it while the request runs), never fewer than an
    earlier turn's. So held ≥ this prompt's KV, held ≥ shared, and held never falls."""
    if block_size < 1:
        raise EngineError(f"block size must be at least 1 (got {block_size})")
    cfg = kv_config(config)
    block_bytes = block_size * cfg.bytes_per_token
    held: set[BlockHash] = set()     # full blocks, by the hash of their whole prefix
    out = []
    most = 0                         # the most blocks held at once so far
    prev, prev_keys = np.empty(0, np.uint32), list[BlockHash]()
    for k, turn in enumerate(turns, 1):
        ids, kept = _prompt_and_held(turn, k)
        n = len(ids)
        # What the last turn held and this one shares hashes the same: only the rest is hashed. The
        # prompt's keys are the first of what is held after it (held starts with the prompt).
        same = first_difference(prev, kept) // block_size
        keys = block_hashes(kept, block_size, known=prev_keys[:same])
        reusable = max(n - 1, 0) // block_size
        shared = 0
        while shared < reusable and keys[shared] in held:
            shared += 1
        held.update(keys)
        # A partial block is never shared (it has no hash) but is held while the turn runs. A turn with
        # no partial block and no new full one would show one block fewer than a turn before it that
        # had one: the figure keeps the most held at once so far, so it never falls.
        most = max(most, len(held) + (1 if len(kept) % block_size else 0))
        blocks = -(-n // block_size)
        out.append(PagedTurn(k, n, blocks, shared, blocks - shared, cfg.bytes_for(n), most * block_bytes, most,
                             len(kept) - n))
        prev, prev_keys = kept, keys
    return out


def _prompt_and_held(turn: np.ndarray | HeldTurn, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The prompt's ids and what the engine holds after the turn (the prompt alone for bare ids)."""
    if isinstance(turn, np.ndarray) or not hasattr(turn, "held_ids"):
        ids = np.asarray(turn, dtype=np.uint32)
        return ids, ids
    ids = np.asarray(turn.token_ids, dtype=np.uint32)
    kept = np.asarray(turn.held_ids, dtype=np.uint32)
    if len(kept) < len(ids) or first_difference(ids, kept) < len(ids):
        raise EngineError(f"turn {k}: what the engine holds after the turn ({len(kept)} tokens) does not start with "
                          f"its prompt ({len(ids)} tokens)",
                          hint="held_ids are the prompt followed by the reply as generated (TurnPrompt.held_ids)")
    return ids, kept


def no_share_reason(turn: PagedTurn, block_size: int = BLOCK_SIZE) -> str:
    """Why a turn shares no block ("" where it shares some): said beside the zero."""
    if turn.shared_blocks:
        return ""
    if turn.turn == 1:
        return "the first turn: nothing is held yet"
    if turn.tokens < block_size:
        return f"shorter than one block ({turn.tokens} of {block_size} tokens): only full blocks are shared"
    if turn.tokens == block_size:
        return "a single block, computed again: its last token always is (for the logits)"
    return f"its first block is in nothing held: the prompt changed within its first {block_size} tokens"


BYTE_UNITS = (("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))


def byte_unit(largest: float) -> tuple[str, int]:
    """The unit a figure up to `largest` bytes reads best in: the largest one it reaches (KiB at least)."""
    name, size = BYTE_UNITS[0]
    for name_, size_ in BYTE_UNITS:
        if largest >= size_:
            name, size = name_, size_
    return name, size


def format_bytes(n: float) -> str:
    """`n` bytes in its own unit, three figures at least: 62.1 MiB, 1.33 TiB (never 1,391,132.0 MiB).

        >>> format_bytes(65_116_160), format_bytes(1_391_132 * 2**20), format_bytes(512), format_bytes(0)
        ('62.1 MiB', '1.33 TiB', '0.50 KiB', '0.00 KiB')
    """
    name, size = byte_unit(n)
    x = n / size
    return f"{x:,.{2 if x < 10 else 1}f} {name}"
