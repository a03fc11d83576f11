"""Semantic-cache entries in Redis, shared by processes and surviving restarts: one hash per entry
(`vec`: the float32 bytes; `meta`: JSON; `tag`: the seal), expiring with the entry's TTL.

A safe format: nothing is unpickled, and the server is not trusted. Every record is sealed as the
prompt cache seals its values (workbench/cache/redis_tier.py `Sealer`, keyed by the cache secret,
WORKBENCH_CACHE_SECRET): an HMAC over the record's full key, the vector and the metadata. A record
that does not parse, or whose seal does not match (written without the secret, or moved from
another key), is skipped and counted (`skipped`, `forged`), never loaded into the index.

On a Redis Cluster (`redis+cluster://...`, workbench/cache/cluster.py) entries spread over every
shard by their id; loading scans every master, and deletes go key by key (no multi-key command
crosses slots).
"""

from __future__ import annotations

import hmac
import json
import struct
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._optional import require
from ..cache.cluster import is_cluster_url
from ..cache.redis_tier import Sealer
from ..cache.secret import resolve_secret
from ..errors import WorkbenchError
from ..redact import credentials_problem, leaks_credentials, redact_url

# What the seal covers besides the key: a label (a semantic record's tag never equals a prompt
# entry's, whose fields are framed differently), then the lengths, so vec|meta cannot be re-split.
_LABEL = b"semantic entry v1\x00"


class RedisSemanticStore:
    def __init__(self, url: str, *, namespace: str = "semantic", client: Any = None,
                 secret: bytes | str | None = None):
        redis = require("redis", "the semantic cache's Redis store")
        self.cluster = client is None and is_cluster_url(url)
        self._client = client
        self._factory: Any = None
        if client is None and self.cluster:
            from ..cache.cluster import parse_cluster_url
            from ..cache.cluster_client import ClusterClientFactory
            # Parsed now (a bad URL is an error at once), connected on first use, as the prompt cache.
            self._factory = ClusterClientFactory(parse_cluster_url(url), socket_timeout_s=2, connect_timeout_s=2,
                                                 max_value_bytes=64 << 20)
        elif client is None:
            self._client = _client_for(redis, url)
        self.prefix = f"wb:{namespace}:entry:"
        self._sealer = Sealer(resolve_secret(secret))
        self.skipped = 0     # records that do not parse or do not fit
        self.forged = 0      # of those, records whose seal does not match (counted in skipped too)

    @property
    def r(self) -> Any:
        """The client (a cluster client is built on first use: building it reads the topology)."""
        if self._client is None:
            self._client = self._factory.connect()
        return self._client

    def _seal(self, key: str, vec: bytes, meta: bytes) -> bytes:
        return self._sealer.tag(key.encode(), _LABEL, struct.pack("<II", len(vec), len(meta)), vec, meta)

    def save(self, entry: Any, vec: np.ndarray) -> None:
        ttl = max(1, int(entry.created + entry.ttl_s - time.time()))
        key = f"{self.prefix}{entry.id}"
        vec_b = np.asarray(vec, dtype="<f4").tobytes()
        meta_b = json.dumps(entry.to_json(), ensure_ascii=False).encode("utf-8")
        pipe = self.r.pipeline()
        pipe.hset(key, mapping={"vec": vec_b, "meta": meta_b, "tag": self._seal(key, vec_b, meta_b)})
        pipe.expire(key, ttl)
        pipe.execute()

    def delete(self, entry_id: int) -> None:
        self.r.delete(f"{self.prefix}{entry_id}")

    def _keys(self) -> Iterator[bytes]:
        """Every entry key: on a cluster, scanned on each master (a replica would repeat its master)."""
        match = f"{self.prefix}*"
        if not self.cluster:
            yield from self.r.scan_iter(match=match, count=500)
            return
        for node in self.r.get_primaries():
            yield from self.r.get_redis_connection(node).scan_iter(match=match, count=500)

    def load_all(self, dim: int) -> Iterator[tuple[dict, np.ndarray]]:
        for key in self._keys():
            rec = self.r.hgetall(key)
            try:
                vec_b, meta_b, tag = rec[b"vec"], rec[b"meta"], rec[b"tag"]
                if len(vec_b) != 4 * dim:
                    raise ValueError("shape")      # before the seal: a huge forged vector costs no HMAC
                if not hmac.compare_digest(self._seal(key.decode(), vec_b, meta_b), tag):
                    self.forged += 1
                    raise ValueError("seal")
                vec = np.frombuffer(vec_b, dtype="<f4").astype(np.float32)
                meta = json.loads(meta_b.decode("utf-8"))
                if vec.shape[0] != dim or not isinstance(meta, dict) or "id" not in meta:
                    raise ValueError("shape or fields")
            except (KeyError, ValueError, UnicodeDecodeError):
                self.skipped += 1
                continue
            yield meta, vec

    def clear(self) -> int:
        keys = list(self._keys())
        if keys:
            # One DEL per key, pipelined: a multi-key DEL would cross slots on a cluster.
            pipe = self.r.pipeline()
            for k in keys:
                pipe.delete(k)
            pipe.execute()
        return len(keys)


def _client_for(redis: Any, url: str) -> Any:
    """A client for a single-server URL whose credentials no error echoes (redact.py), with a
    blocking pool: threads past its 16 connections wait for one (redis-py's default pool refuses
    them: "Too many connections")."""
    problem = credentials_problem(url, numeric_path=not url.lower().startswith("unix:"))
    if problem is not None:
        raise WorkbenchError(f"the semantic cache's Redis URL is not valid: {problem} (in {redact_url(url)!r})",
                             hint="percent-encode the password")
    try:
        pool = redis.BlockingConnectionPool.from_url(url, max_connections=16, timeout=2, socket_timeout=2)
    except ValueError as exc:
        reason = str(exc) if not leaks_credentials(str(exc), url) else "redis-py cannot read it"
        raise WorkbenchError(f"the semantic cache's Redis URL is not valid: {redact_url(reason)} "
                             f"(in {redact_url(url)!r})", hint="use redis://[USER:PASSWORD@]HOST:PORT/DB") from None
    return redis.Redis(connection_pool=pool)
