"""The Redis tier: a safe binary wire format, keyed digests, and a client that never raises into assembly.

Wire format (one Redis string per entry, never pickle):

    header  <4s H H I I I I 32s>  magic b"WBSC", FORMAT_VERSION, flags (0), meta length,
                                  text length, token count, CRC32 of tag + body, tag
    body    meta as UTF-8 JSON (an object of scalars, sorted keys)
            text as UTF-8
            token ids as raw little-endian uint32

    tag     HMAC-SHA256, keyed by the cache secret (workbench/cache/secret.py), over the full
            Redis key and every field of the value but the CRC and the tag themselves

Whoever can write to the Redis is not trusted: the server may be shared, exposed or replayed
from a backup. A value is data only once its tag proves that a holder of the secret stored
exactly these bytes under exactly this key, so a value copied from key B to key A, or forged
with a valid CRC, is a miss ("integrity"), never a prompt. Checked in this order, each failure
a `WireError` that the tier counts as a fault and turns into a miss: magic and lengths
("garbage"), format version ("version"), tag (compared in constant time; on a mismatch the
CRC32 tells accidental damage, "garbage", from forgery, "integrity"), and only then the meta
JSON and the text. The HMAC of a 10k-token entry (80 KB) takes about 45 µs; a good tag makes
the CRC redundant, so a read computes the CRC only on failure and a write computes both.

The client is imported lazily (`redis` is an optional extra). Every call has an overall
deadline and every reply a byte cap, enforced below redis-py's parser (redis_reply.py): a
server that dribbles bytes or sends a huge value costs at most the deadline and the cap, and
counts as a "deadline" or "oversize" fault. A failed call starts a back-off: the tier is
skipped for a short interval that doubles up to a cap, and one caller at a time probes when it
ends, so a dead, paused or hostile server costs about one deadline per interval instead of one
per call. On a Redis Cluster (`redis+cluster://`, cluster.py, cluster_client.py) the back-off is
per shard, and the key holds the conversation's hash tag, `{tag}digest` (docs/scaling.md).

Threads share one client whose connections are bounded (redis_pool.py): at most `max_connections`
calls at once, each waiting for a slot within its deadline, so any number of threads against a
healthy server see no fault, and the server sees at most that many connections from the tier.
"""

from __future__ import annotations

import hmac
import json
import math
import re
import socket
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from hashlib import sha256
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._optional import require
from ..errors import WorkbenchError
from ..redact import credentials_problem, leaks_credentials, redact_url
from .cluster import is_cluster_url, parse_cluster_url
from .keys import CacheKey
from .metrics import CacheMetrics, FaultKind
from .redis_pool import DEFAULT_MAX_CONNECTIONS, CallSlots, ConnectionGauge, check_max_connections
from .secret import CacheSecret

# Bump when the layout below changes: it is in the header and in every key, so two
# versions of the workbench sharing one Redis never read each other's entries.
# 2: the HMAC tag over key and value. 3: keys carry the conversation's hash tag, `{tag}digest`.
FORMAT_VERSION = 3
MAGIC = b"WBSC"
TAG_BYTES = 32
_HEAD = struct.Struct("<4sHHIIII32s")
_FIELDS = struct.Struct("<4sHHIII")   # what the tag covers of the header: all but the CRC and the tag
_LE_U32 = np.dtype("<u4")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_NO_TAG = bytes(TAG_BYTES)

Meta = Mapping[str, "str | int | float | bool | None"]


class WireError(Exception):
    """A stored value that cannot be read; `kind` is the fault to count."""

    def __init__(self, kind: FaultKind, message: str):
        self.kind = kind
        super().__init__(message)


class Sealer:
    """HMAC-SHA256 over (Redis key, value fields), keyed by the cache secret."""

    __slots__ = ("_base",)

    def __init__(self, secret: CacheSecret | bytes):
        key = secret.key if isinstance(secret, CacheSecret) else bytes(secret)
        # A key of its own for this use, so the same secret serving elsewhere never yields these tags.
        derived = hmac.new(key, b"prompt-workbench cache entry tag", sha256).digest()
        self._base = hmac.new(derived, digestmod=sha256)

    def tag(self, redis_key: bytes, *parts: bytes | memoryview) -> bytes:
        m = self._base.copy()          # the keyed pads are computed once, not per value
        m.update(struct.pack("<I", len(redis_key)))
        m.update(redis_key)
        for p in parts:
            m.update(p)
        return m.digest()


def encode(text: str, token_ids: NDArray[np.uint32], meta: Meta, *,
           sealer: Sealer | None = None, redis_key: bytes | None = None) -> bytes:
    """The stored form of an entry; tagged for `redis_key` when a `sealer` is given (the tier
    always gives one: an untagged value never passes its check)."""
    meta_b = json.dumps(dict(meta), sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    text_b = text.encode("utf-8")
    toks = token_ids if token_ids.dtype == _LE_U32 else token_ids.astype(_LE_U32)
    tok_b = np.ascontiguousarray(toks).data.cast("B")   # .data: the array's buffer, as memoryview(array)
    fields = _FIELDS.pack(MAGIC, FORMAT_VERSION, 0, len(meta_b), len(text_b), len(toks))
    if sealer is None:
        tag = _NO_TAG
    else:
        if redis_key is None:
            raise ValueError("a sealed value needs the Redis key it is stored under")
        tag = sealer.tag(redis_key, fields, meta_b, text_b, tok_b)
    crc = zlib.crc32(tok_b, zlib.crc32(text_b, zlib.crc32(meta_b, zlib.crc32(tag))))
    head = _HEAD.pack(MAGIC, FORMAT_VERSION, 0, len(meta_b), len(text_b), len(toks), crc, tag)
    return b"".join((head, meta_b, text_b, tok_b))


def decode(raw: bytes, *, sealer: Sealer | None = None,
           redis_key: bytes | None = None) -> tuple[str, NDArray[np.uint32], dict[str, Any]]:
    """(text, read-only token ids, meta) or WireError; nothing else escapes.

    With a `sealer`, the tag must prove the value was stored under `redis_key` by a holder of
    the secret. Without one only the framing is checked: never use that on a value read from
    a server (the tier does not).
    """
    if not isinstance(raw, (bytes, bytearray)) or len(raw) < 6 or raw[:4] != MAGIC:
        raise WireError("garbage", "not a workbench cache entry (bad magic)")
    # The version sits at a fixed offset so any future layout can still be recognised.
    (version,) = struct.unpack_from("<H", raw, 4)
    if version != FORMAT_VERSION:
        raise WireError("version", f"entry format {version}, this workbench reads {FORMAT_VERSION}")
    if len(raw) < _HEAD.size:
        raise WireError("garbage", "truncated header")
    _, _, flags, meta_n, text_n, tok_n, crc, tag = _HEAD.unpack_from(raw)
    if flags != 0 or len(raw) != _HEAD.size + meta_n + text_n + 4 * tok_n:
        raise WireError("garbage", "lengths do not match the header")
    mv = memoryview(raw)
    body = mv[_HEAD.size:]
    meta_v, text_v, tok_v = body[:meta_n], body[meta_n:meta_n + text_n], body[meta_n + text_n:]
    if sealer is None:
        if zlib.crc32(body, zlib.crc32(tag)) != crc:
            raise WireError("garbage", "CRC32 mismatch")
    else:
        if redis_key is None:
            raise ValueError("checking a value's tag needs the Redis key it was read from")
        want = sealer.tag(redis_key, mv[:_FIELDS.size], meta_v, text_v, tok_v)
        if not hmac.compare_digest(want, tag):
            # A valid tag proves every byte, so the CRC is computed only to name the failure:
            # damaged on the way (garbage) or written by someone without the secret (integrity).
            if zlib.crc32(body, zlib.crc32(tag)) != crc:
                raise WireError("garbage", "CRC32 mismatch")
            raise WireError("integrity", "the value's HMAC does not match its key and content "
                                         "(written without the cache secret, or moved from another key)")
    try:
        meta = json.loads(bytes(meta_v).decode("utf-8"))
        text = bytes(text_v).decode("utf-8")
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError("garbage", f"undecodable meta or text: {exc}") from None
    if not isinstance(meta, dict) or not all(
            isinstance(v, (str, int, float, bool, type(None))) for v in meta.values()):
        raise WireError("garbage", "meta is not an object of scalars")
    # bytes() copies the token run out, so the array does not keep the whole value alive;
    # an array over immutable bytes can never be made writeable again.
    tokens = np.frombuffer(bytes(tok_v), dtype=_LE_U32)
    if sys.byteorder != "little":
        tokens = np.frombuffer(tokens.astype(np.uint32).tobytes(), dtype=np.uint32)
    return text, tokens, meta


def check_name(what: str, value: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise WorkbenchError(f"cache {what} {value!r} may only use letters, digits, '_', '.' and '-'",
                             hint=f"pick another {what}: it becomes one ':'-separated part of every Redis key")
    return value


# The largest value a tier stores or reads unless told otherwise. An entry is one prompt: its
# text and 4 bytes per token (plus the segment table). The intake caps a request's text at
# 64 MiB (IntakeLimits.max_request_bytes) and real context windows are far below that: 1M
# tokens are about 4 MB of ids and 4-8 MB of text. Beyond the cap a value is not stored, and a
# server announcing more is not read.
DEFAULT_MAX_VALUE_BYTES = 64 << 20
# The overall bound on one Redis call: connect (its timeout is at most this), handshake and reply
# reads all end by it; only a send that blocks (redis-py's sendall, bounded by socket_timeout_s)
# can add to it, so a call ends within deadline + socket timeout at worst. A hit on loopback
# takes ~0.15 ms for a 10k-token entry and a value at the cap ~0.5 s over 1 Gbit/s; beyond
# this the local tier and a fresh build are the faster answer anyway.
DEFAULT_DEADLINE_S = 0.5


class Backoff:
    """When a failing server may be tried again: skipped for an interval that doubles up to a cap,
    then one caller at a time probes (half-open) until a call succeeds.

    `clock` (monotonic seconds) is what the intervals are measured on: a schedule only, no socket
    waits on it, so a test can step it by hand and count the probes of each interval."""

    __slots__ = ("_initial", "_max", "_delay", "_retry_at", "_lock", "_clock")

    def __init__(self, initial_s: float, max_s: float, clock: Callable[[], float] = time.monotonic):
        self._initial, self._max, self._delay = initial_s, max_s, initial_s
        self._retry_at = 0.0          # 0: healthy; else the clock's time before which calls are skipped
        self._lock = threading.Lock()
        self._clock = clock

    def admit(self) -> bool:
        if not self._retry_at:          # the healthy path takes no lock
            return True
        with self._lock:
            now = self._clock()
            if self._retry_at and now < self._retry_at:
                return False
            if self._retry_at:
                # Half-open: this caller probes; the others keep skipping until it reports back.
                self._retry_at = now + self._delay
            return True

    def healthy(self) -> None:
        if self._retry_at or self._delay != self._initial:
            with self._lock:
                self._retry_at = 0.0
                self._delay = self._initial

    def failed(self) -> None:
        with self._lock:
            self._retry_at = self._clock() + self._delay
            self._delay = min(self._delay * 2, self._max)


class RedisTier:
    """GET/SET of sealed entries under `workbench:{environment}:{FORMAT_VERSION}:{namespace}:`, on one
    server (`redis://`, `rediss://`, `unix://`) or a cluster (`redis+cluster://`, cluster.py).

    In a cluster the back-off is per shard (the master that owns the key's slot, as the client last
    saw the topology): a lost or paused shard is skipped while the others keep serving, and once a
    replica is promoted its slots map to another node name, which starts healthy.

    `clock` times the back-off only (Backoff); a call's deadline is always time.monotonic, since it
    bounds real waits on sockets.
    """

    def __init__(self, url: str, *, environment: str, namespace: str, ttl_s: float,
                 socket_timeout_s: float, metrics: CacheMetrics, secret: CacheSecret,
                 backoff_initial_s: float = 0.1, backoff_max_s: float = 5.0,
                 max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES, deadline_s: float = DEFAULT_DEADLINE_S,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, clock: Callable[[], float] = time.monotonic):
        redis = require("redis", "the shared Redis cache tier (WORKBENCH_REDIS_URL)")
        from .redis_reply import DeadlineExceeded, ReplyTooLarge, bounded_call

        _check_limits(ttl_s, socket_timeout_s, deadline_s, max_value_bytes)
        max_connections = check_max_connections(max_connections)
        self.prefix = f"workbench:{check_name('environment', environment)}:{FORMAT_VERSION}:" \
                      f"{check_name('namespace', namespace)}:"
        self.max_value_bytes = max_value_bytes
        self.deadline_s = float(deadline_s)
        self.secret_source = secret.source
        self._sealer = Sealer(secret)
        self._bounded_call = bounded_call
        self._ttl_ms = max(1, int(ttl_s * 1000))
        self._metrics = metrics
        self._limit_errors: dict[type[BaseException], FaultKind] = {
            DeadlineExceeded: "deadline", ReplyTooLarge: "oversize"}
        self._timeout_errors = (redis.exceptions.TimeoutError, socket.timeout, TimeoutError)
        self._connect_errors = (redis.exceptions.ConnectionError, OSError,
                                redis.exceptions.ClusterError, redis.exceptions.RedisClusterException)
        self._protocol_errors = (redis.exceptions.InvalidResponse,)
        self._response_errors = (redis.exceptions.ResponseError,)
        self._lua = True          # the nearest-prefix lookup runs as a script until a server refuses it
        self._backoff_args = (backoff_initial_s, backoff_max_s, clock)
        self._backoffs: dict[str, Backoff] = {}
        self._backoffs_lock = threading.Lock()
        self._cluster = is_cluster_url(url)
        self._client_lock = threading.Lock()
        self._client: Any = None
        self.connections = ConnectionGauge()
        if self._cluster:
            from .cluster_client import ClusterClientFactory
            # Parsed now (a bad URL is an error at once); connected on first use, under a call's
            # deadline: building a cluster client reads the topology, and a cluster that is down
            # must cost a miss, not a failed start.
            self._factory = ClusterClientFactory(parse_cluster_url(url), socket_timeout_s=socket_timeout_s,
                                                 connect_timeout_s=min(socket_timeout_s, deadline_s),
                                                 max_value_bytes=max_value_bytes, max_connections=max_connections,
                                                 gauge=self.connections)
        else:
            self._client = _single_client(redis, url, socket_timeout_s, deadline_s, max_value_bytes,
                                          max_connections, self.connections)
            # A URL may ask for a smaller pool (?max_connections=N): never more slots than connections.
            max_connections = min(max_connections, self._client.connection_pool.max_connections)
        self.slots = CallSlots(max_connections)

    # --- keys ----------------------------------------------------------------------------

    def key(self, key: CacheKey) -> str:
        """`{tag}` before the digest: the keys of one conversation share a cluster hash slot."""
        return f"{self.prefix}{{{key.tag}}}{key.hex}" if key.tag else self.prefix + key.hex

    # --- calls ---------------------------------------------------------------------------

    def get(self, key: CacheKey) -> tuple[str, NDArray[np.uint32], dict[str, Any]] | None:
        rkey = self.key(key)
        raw = self._call(rkey, lambda c: c.get(rkey))
        if raw is _SKIPPED:
            return None
        if raw is _FAILED or raw is None:
            self._metrics.miss("redis")
            return None
        parts = self._checked(rkey, raw)
        if parts is None:
            self._metrics.miss("redis")
        return parts

    def nearest(self, keys: Sequence[CacheKey]) -> tuple[int, tuple[str, NDArray[np.uint32], dict[str, Any]] | None]:
        """The first of `keys` the server holds with a value that checks out, as `get` on each in
        turn would find it: (its index, the decoded entry), or (-1, None).

        The keys of one conversation share a hash tag (one slot, one shard in a cluster), so one
        script finds the nearest held in one round trip and returns its value when it is small, else
        the value is read with one GET (`_FIRST_HELD`): one value moved, one or two round trips.
        In a cluster, keys with another tag (a prefix of system messages only, always last) are
        read in a call of their own: one call spanning two shards would let a lost shard fail the
        lookup on a healthy one. A value that fails its checks is counted and the search goes on
        after it, as one GET per key would."""
        i = 0
        while i < len(keys):
            end = i + 1
            # In a cluster, a run shares one non-empty tag (one slot); an untagged key is a run alone.
            while end < len(keys) and (not self._cluster or (keys[i].tag and keys[end].tag == keys[i].tag)):
                end += 1
            got = self._first_held([self.key(k) for k in keys[i:end]])
            if got is None:             # none held, or the call failed (a miss, counted)
                i = end
                continue
            at = i + got[0]
            parts = self._checked(self.key(keys[at]), got[1])
            if parts is not None:
                return at, parts
            i = at + 1
        self._metrics.miss("redis")
        return -1, None

    def _first_held(self, rkeys: list[str]) -> tuple[int, bytes] | None:
        def get(client: Any, rkey: str) -> Any:
            try:
                return client.get(rkey)
            except self._response_errors:
                # WRONGTYPE: something else lives at this key. A miss there, as one GET of it would be,
                # and the search goes on; it says nothing about whether scripts run.
                self._metrics.fault("other")
                return None

        def op(client: Any) -> Any:
            if self._lua:
                try:
                    return _script_then_get(client, rkeys, get)
                except self._response_errors:
                    # Scripts refused (an ACL, a proxy, a server without Lua): probe instead, from now on.
                    self._lua = False
            return _probe_then_get(client, rkeys, get)

        got = self._call(rkeys[0], op)
        if got is _SKIPPED or got is _FAILED or got == 0 or got is None:
            return None
        if not (isinstance(got, list) and len(got) == 2 and type(got[0]) is int and 1 <= got[0] <= len(rkeys)
                and isinstance(got[1], bytes)):
            self._metrics.fault("garbage")     # not what the script returns: a hostile or broken server
            return None
        return got[0] - 1, got[1]

    def _checked(self, rkey: str, raw: bytes) -> tuple[str, NDArray[np.uint32], dict[str, Any]] | None:
        try:
            parts = decode(raw, sealer=self._sealer, redis_key=rkey.encode())
        except WireError as exc:
            self._metrics.fault(exc.kind)
            return None
        self._metrics.hit("redis")
        return parts

    def encode(self, key: CacheKey, text: str, token_ids: NDArray[np.uint32], meta: Meta) -> bytes:
        """The sealed value for `key` (what `set` stores)."""
        return encode(text, token_ids, meta, sealer=self._sealer, redis_key=self.key(key).encode())

    def set(self, key: CacheKey, blob: bytes) -> bool:
        if len(blob) > self.max_value_bytes:
            # Every reader would refuse it: storing it would only cost the write and the memory.
            self._metrics.count("redis_oversize_puts")
            return False
        rkey = self.key(key)
        return self._call(rkey, lambda c: c.set(rkey, blob, px=self._ttl_ms)) not in (_FAILED, _SKIPPED)

    def connection_counts(self) -> tuple[int, int, int]:
        """(connections open now, most open at once, the cap on calls at once)."""
        g = self.connections
        return g.open, g.peak, self.slots.size

    def close(self) -> None:
        try:
            if self._client is not None:
                self._client.close()
        except Exception:  # noqa: BLE001 - closing a dead connection is not news
            pass

    def _call(self, rkey: str, op: Callable[[Any], Any]) -> Any:
        """`op(client)` within the deadline; `_SKIPPED` while the key's shard backs off; `_FAILED` when
        the call failed (the fault counted, the shard backed off unless only the call was wrong)."""
        shard = self._shard(rkey)
        backoff = self._backoff(shard)
        if not backoff.admit():
            self._metrics.count("redis_skipped")
            return _SKIPPED
        # A slot first (redis_pool.py): the wait is part of the call, so it ends by the same deadline.
        deadline = time.monotonic() + self.deadline_s
        took = self.slots.take(deadline)
        if took is not True:
            self._metrics.count("redis_pool_waits")
            left = deadline - time.monotonic()
            if took is None or left <= 0:
                if took is not None:
                    self.slots.give()
                # Every slot busy for the whole deadline: this process is busy, the server may be
                # fine. A miss, and no fault and no back-off for the server.
                self._metrics.count("redis_pool_timeouts")
                return _FAILED
        try:
            with self._bounded_call(deadline - time.monotonic()):
                result = op(self._connected())
        except Exception as exc:  # noqa: BLE001 - any client failure is a miss, never an error
            if self._failed(exc):
                # The shard as the client sees it now: the call may have built the client (its
                # first topology) or followed a MOVED to the slot's new owner, and it is that
                # node which failed.
                self._backoff(self._shard(rkey)).failed()
            return _FAILED
        finally:
            self.slots.give()
        backoff.healthy()
        return result

    def _connected(self) -> Any:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = self._factory.connect()
        return self._client

    # --- back-off, per shard in a cluster ------------------------------------------------

    def _shard(self, rkey: str) -> str:
        if not self._cluster or self._client is None:
            return ""     # one server, or a cluster not reached yet: one back-off for all
        owner = self._factory.owner(self._client, rkey)
        return owner or ""

    def _backoff(self, shard: str) -> Backoff:
        b = self._backoffs.get(shard)
        if b is None:
            with self._backoffs_lock:
                if shard not in self._backoffs and len(self._backoffs) >= MAX_SHARD_BACKOFFS:
                    # A node that redirects to ever new addresses must not grow this map: the
                    # shards past the cap share the whole tier's back-off.
                    shard = ""
                b = self._backoffs.setdefault(shard, Backoff(*self._backoff_args))
        return b

    def _failed(self, exc: BaseException) -> bool:
        """Count the fault; True when the server misbehaves (back off), False when only the call did."""
        kind: FaultKind
        limit = next((k for cls, k in self._limit_errors.items() if isinstance(exc, cls)), None)
        if limit is not None:
            kind = limit        # a reply over the cap or past the deadline: the server misbehaves
        elif isinstance(exc, self._timeout_errors):
            kind = "timeout"
        elif isinstance(exc, self._connect_errors):
            kind = "connect"    # also a cluster that is down, moving slots or unreachable
        elif isinstance(exc, self._protocol_errors):
            kind = "garbage"    # the peer does not speak RESP: not Redis, or a broken proxy
        else:
            kind = "other"      # e.g. WRONGTYPE at this key: the server is fine, no back-off
        self._metrics.fault(kind)
        return kind != "other"


# Far above any real cluster's masters (Redis advises at most about 1,000 nodes in all).
MAX_SHARD_BACKOFFS = 1024

_FAILED = object()
_SKIPPED = object()

# The nearest held of a conversation's prefix keys (nearest first), in one round trip: {index from
# 1, value} when the value is small, {index} when it is not (the caller GETs it: a value copied
# through Lua costs the server about 2 µs per KB, more than a round trip above ~64 KiB), 0 when
# none is held. STRLEN is O(1); pcall: a key of another type is "held" (its GET then fails, a counted
# miss), not a script error. EVAL rather than EVALSHA: the text is short, and there is nothing to
# load on every node of a cluster (again after each failover) first.
_FIRST_HELD = """
for i, k in ipairs(KEYS) do
  local n = redis.pcall('STRLEN', k)
  if type(n) ~= 'number' then return {i} end
  if n > 0 then
    if n <= tonumber(ARGV[1]) then return {i, redis.call('GET', k)} end
    return {i}
  end
end
return 0
"""
INLINE_VALUE_BYTES = 64 << 10


def _script_then_get(client: Any, rkeys: list[str], get: Callable[[Any, str], Any]) -> Any:
    """The nearest held of `rkeys` as [index from 1, value], or 0: one round trip for a small value or
    none held, two for a large one. A value gone between the script and the GET (expired), or not a
    string (`get` gives None): the search goes on after it. A reply of another shape is returned as
    is, for the caller to refuse."""
    start = 0
    while start < len(rkeys):
        got = client.eval(_FIRST_HELD, len(rkeys) - start, *rkeys[start:], INLINE_VALUE_BYTES)
        if not (isinstance(got, list) and got and type(got[0]) is int and 1 <= got[0] <= len(rkeys) - start):
            return got
        at = start + got[0]
        if len(got) == 2:
            return [at, got[1]]
        raw = get(client, rkeys[at - 1])
        if raw is not None:
            return [at, raw]
        start = at
    return 0


def _probe_then_get(client: Any, rkeys: list[str], get: Callable[[Any, str], Any]) -> Any:
    """What the script does, for a server that refuses scripts: EXISTS for every key in one pipelined
    round trip, then GET the nearest held (another round trip), in the script's reply shape."""
    pipe = client.pipeline(transaction=False)
    for k in rkeys:
        pipe.exists(k)
    for i, held in enumerate(pipe.execute()):
        if held:
            raw = get(client, rkeys[i])
            if raw is not None:         # expired since, or not a string: the next held one
                return [i + 1, raw]
    return 0


def _check_limits(ttl_s: float, socket_timeout_s: float, deadline_s: float, max_value_bytes: int) -> None:
    for name, value in (("ttl_s", ttl_s), ("socket_timeout_s", socket_timeout_s),
                        ("redis_deadline_s", deadline_s)):
        # A zero or missing timeout would let a hung server block assembly forever.
        if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
            raise WorkbenchError(f"cache {name} must be a positive number of seconds, got {value!r}")
    if not (isinstance(max_value_bytes, int) and not isinstance(max_value_bytes, bool) and max_value_bytes > 0):
        raise WorkbenchError(f"cache max_value_bytes must be a positive integer, got {max_value_bytes!r}")


def _single_client(redis: Any, url: str, socket_timeout_s: float, deadline_s: float, max_value_bytes: int,
                   max_connections: int, gauge: ConnectionGauge) -> Any:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from .redis_reply import bounded_parser
    hint = ("use redis://HOST:PORT/DB, or redis+cluster://HOST:PORT,HOST:PORT/ for a cluster "
            "(WORKBENCH_REDIS_URL or redis_url=)")
    # Checked before redis-py reads it: its parser (urllib's) ends the host at a '?' or '/' in a
    # password, and its error would quote what it took for a port: part of the password.
    problem = credentials_problem(url, numeric_path=not url.lower().startswith("unix:"))  # (a socket path may hold '@')
    if problem is not None:
        raise WorkbenchError(f"the Redis URL is not valid: {problem} (in {redact_url(url)!r})", hint=hint)
    try:
        # No client-side retries: a retry multiplies the timeout we promised to pay at most once;
        # the back-off decides when to try again. The bounded parser caps every reply and holds
        # every read to the call's deadline; it reads RESP2 (redis-py 8 defaults to RESP3, which
        # GET and SET do not need). The connect timeout never outlasts the deadline. The pool holds
        # as many connections as the tier has slots (redis_pool.py), so it never refuses one.
        client = redis.Redis.from_url(
            url, socket_timeout=socket_timeout_s, socket_connect_timeout=min(socket_timeout_s, deadline_s),
            retry=Retry(NoBackoff(), 0), retry_on_timeout=False, health_check_interval=0,
            protocol=2, parser_class=bounded_parser(max_value_bytes, gauge=gauge), max_connections=max_connections)
    except ValueError as exc:
        # redis-py's reason quotes the part it could not read: shown only when none of it is credentials.
        reason = str(exc) if not leaks_credentials(str(exc), url) else (
            "redis-py cannot read it as redis://[USER:PASSWORD@]HOST:PORT/DB (its reason quotes part of the "
            "credentials, so it is not shown: check the host and port, and percent-encode the password)")
        raise WorkbenchError(f"the Redis URL is not valid: {redact_url(reason)} (in {redact_url(url)!r})",
                             hint=hint) from None
    protocol = client.connection_pool.connection_kwargs.get("protocol")
    if protocol not in (2, "2"):    # a protocol=3 in the URL overrides the argument above
        raise WorkbenchError(f"the Redis URL asks for protocol {protocol}; the cache tier reads RESP2 only",
                             hint="remove protocol=... from the Redis URL")
    return client
