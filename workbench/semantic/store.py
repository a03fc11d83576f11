"""Semantic-cache entries in Redis, shared by processes and surviving restarts: one hash per entry
(`vec`: the float32 bytes; `meta`: JSON), expiring with the entry's TTL. A safe format: nothing is
unpickled, and a record that does not parse is skipped and counted, never trusted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._optional import require


class RedisSemanticStore:
    def __init__(self, url: str, *, namespace: str = "semantic", client: Any = None):
        redis = require("redis", "the semantic cache's Redis store")
        self.r = client or redis.Redis.from_url(url, socket_timeout=2)
        self.prefix = f"wb:{namespace}:entry:"
        self.skipped = 0

    def save(self, entry: Any, vec: np.ndarray) -> None:
        ttl = max(1, int(entry.created + entry.ttl_s - time.time()))
        key = f"{self.prefix}{entry.id}"
        pipe = self.r.pipeline()
        pipe.hset(key, mapping={"vec": np.asarray(vec, dtype="<f4").tobytes(),
                                "meta": json.dumps(entry.to_json(), ensure_ascii=False)})
        pipe.expire(key, ttl)
        pipe.execute()

    def delete(self, entry_id: int) -> None:
        self.r.delete(f"{self.prefix}{entry_id}")

    def load_all(self, dim: int) -> Iterator[tuple[dict, np.ndarray]]:
        for key in self.r.scan_iter(match=f"{self.prefix}*", count=500):
            rec = self.r.hgetall(key)
            try:
                vec = np.frombuffer(rec[b"vec"], dtype="<f4").astype(np.float32)
                meta = json.loads(rec[b"meta"].decode("utf-8"))
                if vec.shape[0] != dim or not isinstance(meta, dict) or "id" not in meta:
                    raise ValueError("shape or fields")
            except (KeyError, ValueError, UnicodeDecodeError):
                self.skipped += 1
                continue
            yield meta, vec

    def clear(self) -> int:
        keys = list(self.r.scan_iter(match=f"{self.prefix}*", count=500))
        if keys:
            self.r.delete(*keys)
        return len(keys)


