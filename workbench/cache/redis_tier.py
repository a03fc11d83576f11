"""The Redis tier: a safe binary wire format and a client that never raises into assembly.

Wire format (one Redis string per entry, never pickle):

    header  <4s H H I I I I>  magic b"WBSC", FORMAT_VERSION, flags (0),
                              meta length, text length, token count, CRC32 of the body
    body    meta as UTF-8 JSON (an object of scalars, sorted keys)
            text as UTF-8
            token ids as raw little-endian uint32

Anything that does not parse is a `WireError` ("garbage" or "version"); the tier turns
it into a miss and a counted fault. CRC32 catches truncation and corruption at ~25 µs
for a 10k-token entry; the writers are trusted, so no keyed digest is needed.

The client is imported lazily (`redis` is an optional extra). A failed call starts a
back-off: the tier is skipped for a short interval that doubles up to a cap, and one
caller at a time probes when it ends, so a dead or paused server costs about one
`socket_timeout_s` per interval instead of one per call.
"""

from __future__ import annotations

import json
import math
import re
import socket
import struct
import sys
import threading
import time
import zlib
from typing import Any, Mapping

import numpy as np
from numpy.typing import NDArray

from .._optional import require
from ..errors import WorkbenchError
from .metrics import CacheMetrics, FaultKind

# Bump when the layout below changes: it is in the header and in every key, so two
# versions of the workbench sharing one Redis never read each other's entries.
FORMAT_VERSION = 1
MAGIC = b"WBSC"
_HEAD = struct.Struct("<4sHHIIII")
_LE_U32 = np.dtype("<u4")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")

Meta = Mapping[str, "str | int | float | bool | None"]


class WireError(Exception):
    """A stored value that cannot be read; `kind` is the fault to count."""

    def __init__(self, kind: FaultKind, message: str):
        self.kind = kind
        super().__init__(message)


def encode(text: str, token_ids: NDArray[np.uint32], meta: Meta) -> bytes:
    meta_b = json.dumps(dict(meta), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text_b = text.encode("utf-8")
    toks = token_ids if token_ids.dtype == _LE_U32 else token_ids.astype(_LE_U32)
    tok_b = memoryview(np.ascontiguousarray(toks)).cast("B")
    crc = zlib.crc32(tok_b, zlib.crc32(text_b, zlib.crc32(meta_b)))
    head = _HEAD.pack(MAGIC, FORMAT_VERSION, 0, len(meta_b), len(text_b), len(toks), crc)
    return b"".join((head, meta_b, text_b, tok_b))


def decode(raw: bytes) -> tuple[str, NDArray[np.uint32], dict[str, Any]]:
    """(text, read-only token ids, meta) or WireError; nothing else escapes."""
    if not isinstance(raw, (bytes, bytearray)) or len(raw) < 6 or raw[:4] != MAGIC:
        raise WireError("garbage", "not a workbench cache entry (bad magic)")
    # The version sits at a fixed offset so any future layout can still be recognised.
    (version,) = struct.unpack_from("<H", raw, 4)
    if version != FORMAT_VERSION:
        raise WireError("version", f"entry format {version}, this workbench reads {FORMAT_VERSION}")
    if len(raw) < _HEAD.size:
        raise WireError("garbage", "truncated header")
    _, _, flags, meta_n, text_n, tok_n, crc = _HEAD.unpack_from(raw)
    if flags != 0 or len(raw) != _HEAD.size + meta_n + text_n + 4 * tok_n:
        raise WireError("garbage", "lengths do not match the header")
    mv = memoryview(raw)[_HEAD.size:]
    if zlib.crc32(mv) != crc:
        raise WireError("garbage", "CRC32 mismatch")
    try:
        meta = json.loads(bytes(mv[:meta_n]).decode("utf-8"))
        text = bytes(mv[meta_n:meta_n + text_n]).decode("utf-8")
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError("garbage", f"undecodable meta or text: {exc}") from None
    if not isinstance(meta, dict) or not all(
            isinstance(v, (str, int, float, bool, type(None))) for v in meta.values()):
        raise WireError("garbage", "meta is not an object of scalars")
    # bytes() copies the token run out, so the array does not keep the whole value alive;
    # an array over immutable bytes can never be made writeable again.
    tokens = np.frombuffer(bytes(mv[meta_n + text_n:]), dtype=_LE_U32)
    if sys.byteorder != "little":
        tokens = np.frombuffer(tokens.astype(np.uint32).tobytes(), dtype=np.uint32)
    return text, tokens, meta


def check_name(what: str, value: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise WorkbenchError(f"cache {what} {value!r} may only use letters, digits, '_', '.' and '-'",
                             hint=f"pick another {what}: it becomes one ':'-separated part of every Redis key")
    return value


class RedisTier:
    """GET/SET of encoded entries under `workbench:{environment}:{FORMAT_VERSION}:{namespace}:`."""

    def __init__(self, url: str, *, environment: str, namespace: str, ttl_s: float,
                 socket_timeout_s: float, metrics: CacheMetrics,
                 backoff_initial_s: float = 0.1, backoff_max_s: float = 5.0):
        redis = require("redis", "the shared Redis cache tier (WORKBENCH_REDIS_URL)")
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        for name, value in (("ttl_s", ttl_s), ("socket_timeout_s", socket_timeout_s)):
            # A zero or missing socket timeout would let a hung server block assembly forever.
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise WorkbenchError(f"cache {name} must be a positive number of seconds, got {value!r}")
        self.prefix = f"workbench:{check_name('environment', environment)}:{FORMAT_VERSION}:" \
                      f"{check_name('namespace', namespace)}:"
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._metrics = metrics
        self._timeout_errors = (redis.exceptions.TimeoutError, socket.timeout, TimeoutError)
        self._connect_errors = (redis.exceptions.ConnectionError, OSError)
        self._protocol_errors = (redis.exceptions.InvalidResponse,)
        try:
            # No client-side retries: a retry multiplies the timeout we promised to pay at most once;
            # the back-off below decides when to try again.
            self._client = redis.Redis.from_url(
                url, socket_timeout=socket_timeout_s, socket_connect_timeout=socket_timeout_s,
                retry=Retry(NoBackoff(), 0), retry_on_timeout=False, health_check_interval=0)
        except ValueError as exc:
            raise WorkbenchError(f"the Redis URL is not valid: {exc}",
                                 hint="use redis://HOST:PORT/DB (WORKBENCH_REDIS_URL or redis_url=)") from None
        self._backoff_initial = backoff_initial_s
        self._backoff_max = backoff_max_s
        self._delay = backoff_initial_s
        self._retry_at = 0.0          # 0: healthy; else monotonic time before which calls are skipped
        self._lock = threading.Lock()

    def key(self, key_hex: str) -> str:
        return self.prefix + key_hex

    def get(self, key_hex: str) -> tuple[str, NDArray[np.uint32], dict[str, Any]] | None:
        if not self._admit():
            return None
        try:
            raw = self._client.get(self.prefix + key_hex)
        except Exception as exc:  # noqa: BLE001 - any client failure is a miss, never an error
            self._failed(exc)
            self._metrics.miss("redis")
            return None
        self._healthy()
        if raw is None:
            self._metrics.miss("redis")
            return None
        try:
            parts = decode(raw)
        except WireError as exc:
            self._metrics.fault(exc.kind)
            self._metrics.miss("redis")
            return None
        self._metrics.hit("redis")
        return parts

    def set(self, key_hex: str, blob: bytes) -> bool:
        if not self._admit():
            return False
        try:
            self._client.set(self.prefix + key_hex, blob, px=self._ttl_ms)
        except Exception as exc:  # noqa: BLE001
            self._failed(exc)
            return False
        self._healthy()
        return True

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # noqa: BLE001 - closing a dead connection is not news
            pass

    # --- back-off ------------------------------------------------------------------------

    def _admit(self) -> bool:
        if not self._retry_at:          # the healthy path takes no lock
            return True
        with self._lock:
            now = time.monotonic()
            if self._retry_at and now < self._retry_at:
                self._metrics.count("redis_skipped")
                return False
            if self._retry_at:
                # Half-open: this caller probes; the others keep skipping until it reports back.
                self._retry_at = now + self._delay
            return True

    def _healthy(self) -> None:
        if self._retry_at or self._delay != self._backoff_initial:
            with self._lock:
                self._retry_at = 0.0
                self._delay = self._backoff_initial

    def _failed(self, exc: BaseException) -> None:
        kind: FaultKind
        if isinstance(exc, self._timeout_errors):
            kind = "timeout"
        elif isinstance(exc, self._connect_errors):
            kind = "connect"
        elif isinstance(exc, self._protocol_errors):
            kind = "garbage"    # the peer does not speak RESP: not Redis, or a broken proxy
        else:
            kind = "other"      # e.g. WRONGTYPE at this key: the server is fine, no back-off
        self._metrics.fault(kind)
        if kind != "other":
            with self._lock:
                self._retry_at = time.monotonic() + self._delay
                self._delay = min(self._delay * 2, self._backoff_max)
