"""The two-tier segment cache against a real redis-server: entries, byte-capped LRU, wire format,
single-flight, negative entries, faults (down, killed, paused, garbage) and metrics."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import math
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict

import numpy as np
import pytest
from fake_clock import FakeClock
from hypothesis import given, settings
from hypothesis import strategies as st
from redis_server import RedisServer, free_port, redis_server  # noqa: F401  (fixture)

from workbench.cache.keys import CacheKey
from workbench.cache.local import ByteLRU
from workbench.cache.redis_tier import FORMAT_VERSION, MAGIC, WireError, decode, encode
from workbench.cache.store import ENTRY_OVERHEAD, CacheEntry, TwoTierCache
from workbench.errors import (
    CacheError,
    CacheTypeError,
    CacheValueError,
    MissingDependencyError,
    VariableError,
    WorkbenchError,
)

_ids = itertools.count()

# Short everything so fault tests take milliseconds: a paused server costs one timeout per back-off step.
FAST = dict(socket_timeout_s=0.05, backoff_initial_s=0.05, backoff_max_s=0.2, environment="test")


def new_key() -> CacheKey:
    return CacheKey(hashlib.sha256(f"key-{next(_ids)}".encode()).hexdigest())


def make_entry(n: int = 16, text: str = "hello <|im_start|>", **meta: object) -> CacheEntry:
    return CacheEntry(text, np.arange(n, dtype=np.uint32) * 7, {"template": "qwen2.5", **meta})


# --- entries: immutable, copied, sized ------------------------------------------------------

def test_entry_copies_tokens_and_they_are_read_only():
    src = np.array([1, 2, 3], dtype=np.uint32)
    e = CacheEntry("abc", src, {})
    src[0] = 99                               # the caller's array is not the cached one
    assert e.token_ids.tolist() == [1, 2, 3]
    assert e.token_ids.dtype == np.uint32
    with pytest.raises(ValueError):
        e.token_ids[0] = 5
    with pytest.raises(ValueError):
        e.token_ids.flags.writeable = True    # backed by bytes: cannot be unlocked either
    assert CacheEntry("x", [5, 6], {}).token_ids.dtype == np.uint32   # lists become uint32 too


def test_entry_fields_and_meta_are_frozen():
    e = make_entry(n=3, source="test")
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.text = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        e.meta["source"] = "changed"  # type: ignore[index]
    meta = {"a": 1}
    e2 = CacheEntry("x", [1], meta)
    meta["a"] = 2                             # the caller's dict is copied too
    assert e2.meta["a"] == 1


@pytest.mark.parametrize("tokens, meta, error", [
    ([-1, 2], {}, ValueError),
    ([2 ** 32], {}, ValueError),
    ([1.5], {}, TypeError),
    ([[1, 2]], {}, ValueError),
    ([1], {"nested": {"a": 1}}, TypeError),
    ([1], {3: "not a str key"}, TypeError),
])
def test_entry_rejects_bad_values(tokens, meta, error):
    with pytest.raises(error):
        CacheEntry("x", tokens, meta)


@pytest.mark.parametrize("call, error, builtin", [
    (lambda: CacheEntry("x", [-1], {}), CacheValueError, ValueError),
    (lambda: CacheEntry(b"x", [1], {}), CacheTypeError, TypeError),  # type: ignore[arg-type]
    (lambda: ByteLRU(-1), CacheValueError, ValueError),
    (lambda: TwoTierCache(local_bytes=-1), CacheValueError, ValueError),
    (lambda: TwoTierCache().get(new_key(), tiers=("disk",)), CacheValueError, ValueError),  # type: ignore[arg-type]
    (lambda: TwoTierCache().put(new_key(), "an entry"), CacheTypeError, TypeError),  # type: ignore[arg-type]
    (lambda: TwoTierCache().get("0" * 64), CacheTypeError, TypeError),  # type: ignore[arg-type]
    (lambda: TwoTierCache().get_or_build(new_key(), lambda: "x"),  # type: ignore[arg-type, return-value]
     CacheTypeError, TypeError),
    (lambda: TwoTierCache(clock=1000.0), CacheTypeError, TypeError),  # type: ignore[arg-type]
], ids=["entry ids", "entry text", "lru size", "cache size", "tier", "put", "key", "build", "clock"])
def test_bad_input_to_the_cache_is_a_typed_workbench_error(call, error, builtin):
    """One root for callers that catch the library's errors, and still the builtin type for those
    that caught TypeError / ValueError before the cache had its own."""
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, CacheError) and isinstance(info.value, WorkbenchError)
    assert isinstance(info.value, builtin)


def test_entry_rejects_lone_surrogates():
    with pytest.raises(UnicodeEncodeError):
        CacheEntry("bad \ud800", [1], {})


def test_entry_nbytes_formula():
    e = CacheEntry("héllo", np.arange(10, dtype=np.uint32), {"k": "vv", "n": 12})
    assert e.nbytes == 10 * 4 + len("héllo".encode()) + (1 + 2) + (1 + 2) + ENTRY_OVERHEAD


def test_returned_entry_cannot_change_what_the_cache_holds():
    cache = TwoTierCache(local_bytes=1 << 20)
    k = new_key()
    cache.put(k, make_entry(n=4, text="original"))
    got, _ = cache.get(k)
    for attempt in (lambda: got.token_ids.__setitem__(0, 1), lambda: setattr(got, "text", "x"),
                    lambda: got.meta.__setitem__("template", "x"),
                    lambda: setattr(got.token_ids.flags, "writeable", True)):
        with pytest.raises((ValueError, TypeError, AttributeError)):
            attempt()
    again, source = cache.get(k)
    assert source == "local"
    assert again.text == "original" and again.token_ids.tolist() == [0, 7, 14, 21]
    assert dict(again.meta) == {"template": "qwen2.5"}


# --- local tier: byte cap, LRU order, thread safety ----------------------------------------

@dataclasses.dataclass(frozen=True)
class Blob:
    nbytes: int


@settings(max_examples=300, deadline=None)
@given(cap=st.integers(0, 400),
       ops=st.lists(st.tuples(st.sampled_from(["put", "get"]), st.integers(0, 9), st.integers(0, 180)),
                    max_size=120))
def test_lru_matches_a_model_and_never_exceeds_the_cap(cap, ops):
    lru: ByteLRU[Blob] = ByteLRU(cap)
    model: OrderedDict[str, int] = OrderedDict()
    evictions = 0
    for op, k, size in ops:
        key = str(k)
        if op == "put":
            stored = lru.put(key, Blob(size))
            model.pop(key, None)
            assert stored == (size <= cap)   # larger than the whole cap: not stored
            if stored:
                model[key] = size
                while sum(model.values()) > cap:
                    model.popitem(last=False)
                    evictions += 1
        else:
            got = lru.get(key)
            assert (got is not None) == (key in model)
            if got is not None:
                assert got.nbytes == model[key]
                model.move_to_end(key)
        assert lru.nbytes <= cap
        assert lru.nbytes == sum(model.values())
        assert lru.keys() == list(model)     # least recently used first
    assert lru.evictions == evictions


def test_lru_is_thread_safe_under_contention():
    cap = 10_000
    lru: ByteLRU[Blob] = ByteLRU(cap)
    over: list[int] = []

    def hammer(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(3000):
            k = str(int(rng.integers(0, 64)))
            if rng.random() < 0.6:
                lru.put(k, Blob(int(rng.integers(1, 1500))))
            else:
                lru.get(k)
            if lru.nbytes > cap:
                over.append(lru.nbytes)

    threads = [threading.Thread(target=hammer, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not over
    assert lru.nbytes == sum(lru.get(k).nbytes for k in lru.keys())


def test_local_tier_counts_bytes_evicts_and_skips_oversized_entries():
    big = make_entry(n=1000)                               # ~4 KB + overhead
    cache = TwoTierCache(local_bytes=2 * big.nbytes + 10)
    k1, k2, k3, huge = new_key(), new_key(), new_key(), new_key()
    cache.put(k1, big)
    cache.put(k2, big)
    cache.get(k1)                                          # k1 is now the most recent
    cache.put(k3, big)                                     # evicts k2, the least recent
    assert cache.get(k2) == (None, "miss")
    assert cache.get(k1)[1] == "local" and cache.get(k3)[1] == "local"
    cache.put(huge, make_entry(n=10_000))                  # larger than the cap: not stored, nothing evicted
    assert cache.get(huge) == (None, "miss")
    m = cache.metrics()
    assert m.local_entries == 2 and m.local_bytes == 2 * big.nbytes <= m.local_capacity_bytes
    assert m.evictions == 1


# --- wire format ----------------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                    st.floats(allow_nan=False), st.text(max_size=12))


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), toks=st.lists(st.integers(0, 2 ** 32 - 1), max_size=64),
       meta=st.dictionaries(st.text(max_size=8), scalars, max_size=5))
def test_codec_round_trips(text, toks, meta):
    blob = encode(text, np.array(toks, dtype=np.uint32), meta)
    t2, ids, m2 = decode(blob)
    assert t2 == text and ids.tolist() == toks and m2 == meta
    assert ids.dtype == np.uint32 and not ids.flags.writeable
    assert blob.endswith(np.array(toks, dtype="<u4").tobytes())   # raw little-endian, not a JSON list


def test_codec_refuses_every_truncation_and_corruption():
    blob = encode("some text é", np.arange(20, dtype=np.uint32), {"a": 1})
    for cut in range(len(blob)):
        with pytest.raises(WireError):
            decode(blob[:cut])
    for i in range(len(blob)):
        spoiled = bytearray(blob)
        spoiled[i] ^= 0x41
        with pytest.raises(WireError):
            decode(bytes(spoiled))


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=200), keep_header=st.booleans())
def test_codec_turns_random_bytes_into_wire_errors_only(raw, keep_header):
    if keep_header:
        raw = MAGIC + struct.pack("<H", FORMAT_VERSION) + raw
    with pytest.raises(WireError):
        decode(raw)


# --- the Redis tier --------------------------------------------------------------------------

def test_redis_tier_shares_entries_between_processes_and_promotes_hits(redis_server):
    writer = TwoTierCache(redis_url=redis_server.url, **FAST)
    reader = TwoTierCache(redis_url=redis_server.url, **FAST)   # another process: its own local tier
    k, e = new_key(), make_entry(n=500, text="ünïcode " * 50, turn=3, ok=True, score=0.5, none=None)
    writer.put(k, e)
    got, source = reader.get(k)
    assert source == "redis" and got == e and dict(got.meta) == dict(e.meta)
    assert not got.token_ids.flags.writeable
    assert reader.get(k)[1] == "local"                          # the Redis hit was written locally
    assert reader.get(k, tiers=("redis",))[1] == "redis"        # ...and Redis can still be read alone


def test_redis_layout_namespace_ttl_and_binary_tokens(redis_server):
    cache = TwoTierCache(redis_url=redis_server.url, namespace="segs", ttl_s=30, **FAST)
    k, e = new_key(), make_entry(n=300)
    cache.put(k, e)
    raw = redis_server.client()
    name = f"workbench:test:{FORMAT_VERSION}:segs:{k.hex}"
    assert cache.redis_key(k) == name
    assert [x.decode() for x in raw.keys("*")] == [name]
    assert 0 < raw.pttl(name) <= 30_000
    value = raw.get(name)
    assert value.startswith(MAGIC)
    assert value.endswith(e.token_ids.astype("<u4").tobytes())
    assert len(value) < 300 * 4 + 200                            # not a JSON list of numbers


def test_environments_and_namespaces_do_not_see_each_other(redis_server):
    k = new_key()
    TwoTierCache(redis_url=redis_server.url, **FAST).put(k, make_entry())
    other_env = TwoTierCache(redis_url=redis_server.url, **{**FAST, "environment": "prod"})
    other_ns = TwoTierCache(redis_url=redis_server.url, namespace="other", **FAST)
    assert other_env.get(k) == (None, "miss")
    assert other_ns.get(k) == (None, "miss")
    assert TwoTierCache(redis_url=redis_server.url, **FAST).get(k)[1] == "redis"


def test_redis_entries_expire_after_their_ttl(redis_server):
    raw = redis_server.client()
    k = new_key()
    minute = TwoTierCache(redis_url=redis_server.url, ttl_s=60, **FAST)
    minute.put(k, make_entry())
    assert 0 < raw.pttl(minute.redis_key(k)) <= 60_000         # set with the value, in ms (not the default hour)
    assert TwoTierCache(redis_url=redis_server.url, **FAST).get(k)[1] == "redis"
    # A TTL of 1 ms: Redis itself says when it is gone (its count of expired keys, on this fresh
    # server), so nothing has to be read inside a window, and a value never written cannot pass.
    brief = TwoTierCache(redis_url=redis_server.url, ttl_s=0.001, **FAST)
    k2 = new_key()
    brief.put(k2, make_entry())
    assert sum(brief.metrics().faults.values()) == 0          # written (a bad expiry would be a counted fault)
    assert _wait_for(lambda: not raw.exists(brief.redis_key(k2)), timeout_s=60)   # (a read expires it at once)
    assert raw.info("stats")["expired_keys"] == 1              # it was there, and expired
    assert TwoTierCache(redis_url=redis_server.url, **FAST).get(k2) == (None, "miss")
    assert TwoTierCache(redis_url=redis_server.url, **FAST).get(k)[1] == "redis"   # the minute-long one stays


def _spoilers() -> dict[str, tuple[str, object]]:
    good = encode("text", np.arange(8, dtype=np.uint32), {"a": 1})
    flipped = bytearray(good)
    flipped[-1] ^= 1
    other_version = MAGIC + struct.pack("<H", FORMAT_VERSION + 1) + good[6:]
    return {
        "random bytes": ("garbage", b"\x00\xff not an entry at all"),
        "truncated": ("garbage", good[:-3]),
        "wrong magic": ("garbage", b"XXXX" + good[4:]),
        "digest mismatch": ("garbage", bytes(flipped)),
        "json list": ("garbage", b"[1, 2, 3]"),
        "pickle": ("garbage", b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01."),
        "another format version": ("version", other_version),
        "wrong redis type": ("other", None),
    }


@pytest.mark.parametrize("case", list(_spoilers()))
def test_unreadable_redis_values_are_counted_misses_then_rebuilt(redis_server, case):
    kind, value = _spoilers()[case]
    cache = TwoTierCache(redis_url=redis_server.url, **FAST)
    k = new_key()
    raw = redis_server.client()
    if value is None:
        raw.rpush(cache.redis_key(k), b"a list, not a string")
    else:
        raw.set(cache.redis_key(k), value)
    assert cache.get(k) == (None, "miss")
    assert cache.metrics().faults[kind] == 1
    if value is None:
        raw.delete(cache.redis_key(k))        # SET over a list works, but the list must not stay to confuse it
    entry, source = cache.get_or_build(k, make_entry)
    assert source == "fresh"
    assert TwoTierCache(redis_url=redis_server.url, **FAST).get(k) == (entry, "redis")  # overwritten


def test_a_server_that_is_not_redis_is_a_counted_fault():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    stop = threading.Event()

    def answer_nonsense() -> None:
        srv.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    t = threading.Thread(target=answer_nonsense, daemon=True)
    t.start()
    try:
        cache = TwoTierCache(redis_url=f"redis://127.0.0.1:{srv.getsockname()[1]}/0", **FAST)
        assert cache.get_or_build(new_key(), make_entry)[1] == "fresh"
        assert cache.metrics().faults["garbage"] == 1
    finally:
        stop.set()
        t.join()
        srv.close()


# --- faults: down, killed, paused --------------------------------------------------------------

def test_redis_down_at_start_serves_locally_and_backs_off():
    clock = FakeClock()                                      # the back-off's interval ends when the test says
    cache = TwoTierCache(redis_url=f"redis://127.0.0.1:{free_port()}/0", clock=clock, **FAST)
    k = new_key()
    assert cache.get_or_build(k, make_entry)[1] == "fresh"
    assert cache.get_or_build(k, make_entry)[1] == "local"
    cache.put(new_key(), make_entry())                       # no raise on a failed write either
    for _ in range(100):
        assert cache.get(new_key()) == (None, "miss")
    m = cache.metrics()
    assert m.faults["connect"] == 1 and sum(m.faults.values()) == 1   # back-off: not one fault per call
    assert m.redis_skipped == 1 + 1 + 100                    # the build's write, the put, the gets
    clock.advance(FAST["backoff_initial_s"])                  # the interval is over: one call probes again
    assert cache.get(new_key()) == (None, "miss")
    assert cache.metrics().faults["connect"] == 2 and cache.metrics().redis_skipped == 102


def _wait_for(pred, timeout_s: float = 30.0) -> bool:
    """Poll `pred` until it holds (True) or `timeout_s` passed (False): a bound on a hang only."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_killed_server_keeps_serving_and_reconnects_after_restart(redis_server):
    a = TwoTierCache(redis_url=redis_server.url, **FAST)
    b = TwoTierCache(redis_url=redis_server.url, **FAST)
    k1 = new_key()
    a.put(k1, make_entry())
    assert b.get(k1)[1] == "redis"

    redis_server.kill()
    assert a.get(k1)[1] == "local"
    k2 = new_key()
    assert a.get_or_build(k2, make_entry)[1] == "fresh"
    assert b.get(new_key()) == (None, "miss")
    assert a.metrics().faults["connect"] >= 1 and b.metrics().faults["connect"] >= 1

    redis_server.restart()                                   # same port, empty
    k3 = new_key()

    def shared_again() -> bool:
        a.put(k3, make_entry(n=5))
        return b.get(k3, tiers=("redis",))[1] == "redis"

    assert _wait_for(shared_again), "the cache did not reconnect after redis-server came back"
    c = TwoTierCache(redis_url=redis_server.url, **FAST)
    assert c.get(k3)[1] == "redis"


# A back-off in binary fractions, so that stepping the fake clock by halves lands exactly on its ends.
STEPS = dict(FAST, backoff_initial_s=1 / 16, backoff_max_s=1 / 4)


def test_paused_server_costs_one_timeout_per_backoff_step_then_recovers(redis_server):
    clock = FakeClock()
    a = TwoTierCache(redis_url=redis_server.url, clock=clock, **STEPS)
    a.put(new_key(), make_entry())                           # a pooled, healthy connection
    redis_server.pause()
    timeouts = skipped = 0
    for interval in (1 / 16, 1 / 8, 1 / 4, 1 / 4):           # doubling up to the cap
        for _ in range(10):                                  # the first call of an interval probes
            assert a.get(new_key()) == (None, "miss")
        timeouts, skipped = timeouts + 1, skipped + 9
        m = a.metrics()
        # The probe ends at the socket timeout (a "timeout", not the 10x longer deadline); the other
        # calls skip the tier and cost nothing.
        assert m.faults["timeout"] == timeouts and sum(m.faults.values()) == timeouts, m.faults
        assert m.redis_skipped == skipped
        clock.advance(interval / 2)
        a.put(new_key(), make_entry())                       # half way through the interval: skipped too
        skipped += 1
        assert a.metrics().redis_skipped == skipped and a.metrics().faults["timeout"] == timeouts
        clock.advance(interval / 2)                          # over: the next call probes

    redis_server.resume()
    b = TwoTierCache(redis_url=redis_server.url, clock=clock, **STEPS)
    k = new_key()

    def shared_again() -> bool:
        clock.advance(1.0)                                   # past any back-off: each try is a real call
        a.put(k, make_entry())
        return b.get(k, tiers=("redis",))[1] == "redis"

    # (each try that fails costs one real socket timeout: a resumed server may answer late, once)
    assert any(shared_again() for _ in range(100))
    skipped = a.metrics().redis_skipped
    assert a.get(k, tiers=("redis",))[1] == "redis" and a.metrics().redis_skipped == skipped   # healthy again


# --- single-flight ------------------------------------------------------------------------------

class CountingBuild:
    def __init__(self, delay_s: float = 0.1, fail: Exception | None = None,
                 meet: threading.Barrier | None = None):
        self.calls = 0
        self.delay_s = delay_s
        self.fail = fail
        self.meet = meet          # every build waits there for the others: they must run at once
        self._lock = threading.Lock()

    def __call__(self) -> CacheEntry:
        with self._lock:
            self.calls += 1
        if self.meet is not None:
            self.meet.wait()
        time.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail
        return make_entry(n=2000)


def _cache(kind: str, server: RedisServer | None) -> TwoTierCache:
    return TwoTierCache(redis_url=server.url if kind == "redis" else None, **FAST)


@pytest.fixture(params=["local", "redis"])
def cache(request):
    server = request.getfixturevalue("redis_server") if request.param == "redis" else None
    c = _cache(request.param, server)
    yield c
    c.close()


def test_200_threads_on_one_new_key_build_once(cache):
    k, build = new_key(), CountingBuild()
    barrier = threading.Barrier(200)
    results: list[tuple[CacheEntry, str]] = []
    errors: list[BaseException] = []

    def ask() -> None:
        barrier.wait()
        try:
            results.append(cache.get_or_build(k, build))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert build.calls == 1
    assert len(results) == 200 and len({id(e) for e, _ in results}) == 1   # the very same entry
    assert {s for _, s in results} <= {"fresh", "local", "redis"}   # late arrivals read a tier
    m = cache.metrics()
    assert m.builds == 1 and m.singleflight_waits >= 1


def test_200_asyncio_tasks_on_one_new_key_build_once(cache):
    k, build = new_key(), CountingBuild()

    async def main() -> list[tuple[CacheEntry, str]]:
        return await asyncio.gather(*(cache.aget_or_build(k, build) for _ in range(200)))

    results = asyncio.run(main())
    assert build.calls == 1
    assert len({id(e) for e, _ in results}) == 1
    assert cache.metrics().singleflight_waits == 199
    assert asyncio.run(cache.aget_or_build(k, build))[1] == "local"


def test_leader_double_checks_the_cache_after_taking_the_flight():
    cache = TwoTierCache()
    k, build = new_key(), CountingBuild(delay_s=0)
    real_get = cache.get
    sneaked = make_entry(text="built by someone else")

    def get_then_someone_finishes(key, **kw):
        found = real_get(key, **kw)
        cache.put(key, sneaked)           # another flight completes between our miss and our flight
        return found

    cache.get = get_then_someone_finishes  # type: ignore[method-assign]
    entry, source = cache.get_or_build(k, build)
    assert build.calls == 0 and source == "local" and entry is sneaked


def test_different_keys_build_independently_in_parallel():
    cache = TwoTierCache()
    # The ten builds meet at a barrier: it opens only when all ten run at once, so flights of
    # different keys that queued behind each other would break it (its timeout only ends a hang).
    together = threading.Barrier(10, timeout=60)
    builds = {i: CountingBuild(delay_s=0, meet=together) for i in range(10)}
    keys = {i: new_key() for i in range(10)}
    got: list[str] = []
    errors: list[BaseException] = []

    def ask(i: int) -> None:
        try:
            got.append(cache.get_or_build(keys[i % 10], builds[i % 10])[1])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not together.broken
    assert all(b.calls == 1 for b in builds.values())        # and still one build per key
    assert len(got) == 100 and got.count("fresh") >= 10
    assert cache.metrics().builds == 10


# --- negative entries ------------------------------------------------------------------------------

def test_a_failing_build_is_remembered_briefly_with_its_own_type():
    clock = FakeClock()
    cache = TwoTierCache(negative_ttl_s=0.25, clock=clock)
    k = new_key()
    build = CountingBuild(delay_s=0, fail=VariableError("undefined", variable="user_name", seq=2))
    for _ in range(5):
        with pytest.raises(VariableError) as info:
            cache.get_or_build(k, build)
        assert info.value.variable == "user_name" and info.value.seq == 2
        assert "user_name" in str(info.value)
    assert build.calls == 1
    m = cache.metrics()
    assert m.negative_hits == 4 and m.build_failures == 1
    clock.advance(0.125)
    with pytest.raises(VariableError):
        cache.get_or_build(k, build)
    assert build.calls == 1 and cache.metrics().negative_hits == 5     # within the TTL: remembered
    clock.advance(0.125)
    with pytest.raises(VariableError):
        cache.get_or_build(k, build)
    assert build.calls == 2                                  # the TTL passed: tried again


def test_a_failing_build_under_a_burst_runs_once_and_everyone_gets_the_error():
    cache = TwoTierCache(negative_ttl_s=1.0, clock=FakeClock())   # (the TTL never ends mid-test)
    k = new_key()
    build = CountingBuild(delay_s=0.05, fail=WorkbenchError("template exploded", hint="fix it"))
    caught: list[BaseException] = []
    barrier = threading.Barrier(50)

    def ask() -> None:
        barrier.wait()
        try:
            cache.get_or_build(k, build)
        except WorkbenchError as exc:
            caught.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert build.calls == 1 and len(caught) == 50
    assert all(type(e) is WorkbenchError and e.hint == "fix it" for e in caught)


def test_async_failing_build_raises_the_original_type():
    cache = TwoTierCache(negative_ttl_s=1.0, clock=FakeClock())
    k = new_key()
    build = CountingBuild(delay_s=0.05, fail=VariableError("cycle", variable="a"))

    async def main() -> list[object]:
        return await asyncio.gather(*(cache.aget_or_build(k, build) for _ in range(20)),
                                    return_exceptions=True)

    outcomes = asyncio.run(main())
    assert build.calls == 1
    assert all(isinstance(o, VariableError) and o.variable == "a" for o in outcomes)


def test_put_replaces_a_negative_entry():
    cache = TwoTierCache(negative_ttl_s=10)
    k = new_key()
    with pytest.raises(WorkbenchError):
        cache.get_or_build(k, CountingBuild(delay_s=0, fail=WorkbenchError("nope")))
    cache.put(k, make_entry())
    assert cache.get_or_build(k, CountingBuild(delay_s=0))[1] == "local"


def test_build_must_return_a_cache_entry():
    cache = TwoTierCache()
    with pytest.raises(TypeError, match="CacheEntry"):
        cache.get_or_build(new_key(), lambda: "not an entry")  # type: ignore[arg-type, return-value]


# --- metrics ------------------------------------------------------------------------------------

def test_metrics_count_each_tier_exactly(redis_server):
    a = TwoTierCache(redis_url=redis_server.url, **FAST)
    b = TwoTierCache(redis_url=redis_server.url, **FAST)
    k = new_key()
    a.put(k, make_entry())
    assert b.get(k)[1] == "redis"         # local miss, redis hit
    assert b.get(k)[1] == "local"         # local hit
    assert b.get(new_key())[1] == "miss"  # local miss, redis miss
    b.get_or_build(new_key(), make_entry)  # local miss, redis miss, one build, one put
    m = b.metrics()
    assert (m.hits["local"], m.misses["local"], m.hits["redis"], m.misses["redis"]) == (1, 3, 1, 2)
    assert m.hit_rate["local"] == 0.25 and m.hit_rate["redis"] == pytest.approx(1 / 3)
    assert m.builds == 1 and m.local_entries == 2 and m.redis_enabled
    assert m.get_latency.count == 4 and m.put_latency.count == 1
    assert 0 < m.get_latency.p50_s <= m.get_latency.p95_s and m.get_latency.sum_s > 0
    assert all(v == 0 for v in m.faults.values())


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"'
                     r'(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*)?\})? (\S+)$')


def test_prometheus_text_is_valid_exposition_format():
    cache = TwoTierCache()
    k = new_key()
    cache.get_or_build(k, make_entry)
    cache.get(k)
    cache.get(k)
    text = cache.prometheus_text()
    assert text.endswith("\n")
    typed: dict[str, str] = {}
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in typed, f"HELP after TYPE or twice: {line}"
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert kind in {"counter", "gauge", "summary", "histogram", "untyped"}
            assert name not in typed
            typed[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            name, value = m.group(1), m.group(5)
            family = re.sub(r"_(sum|count)$", "", name) if re.sub(r"_(sum|count)$", "", name) in typed else name
            assert family in typed, f"sample before its # TYPE: {line}"
            if typed[family] == "counter":
                assert name.endswith("_total")
            samples[line.rsplit(" ", 1)[0]] = float(value)   # float() accepts NaN too
    assert samples['workbench_cache_hits_total{tier="local"}'] == 2
    assert samples['workbench_cache_misses_total{tier="local"}'] == 1
    assert samples['workbench_cache_hits_total{tier="redis"}'] == 0
    assert samples['workbench_cache_builds_total'] == 1
    assert samples['workbench_cache_faults_total{kind="timeout"}'] == 0
    assert samples['workbench_cache_get_seconds_count'] == 3
    assert samples['workbench_cache_local_entries'] == 1
    assert not math.isnan(samples['workbench_cache_put_seconds{quantile="0.5"}'])


# --- configuration, environment, optional import ------------------------------------------------

def test_from_env_turns_redis_on_only_when_the_variable_is_set(redis_server, monkeypatch):
    monkeypatch.delenv("WORKBENCH_REDIS_URL", raising=False)
    assert not TwoTierCache.from_env().redis_enabled
    monkeypatch.setenv("WORKBENCH_REDIS_URL", redis_server.url)
    k = new_key()
    TwoTierCache.from_env(environment="test").put(k, make_entry())
    assert TwoTierCache.from_env(environment="test").get(k)[1] == "redis"


def test_importing_the_cache_does_not_import_redis():
    code = ("import sys, workbench, workbench.cache.store as s; s.TwoTierCache().get_or_build("
            "s.CacheKey('0' * 64), lambda: s.CacheEntry('x', [1], {})); "
            "assert 'redis' not in sys.modules, 'redis imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_redis_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)    # makes `import redis` fail
    with pytest.raises(MissingDependencyError, match=r"prompt-workbench\[redis\]"):
        TwoTierCache(redis_url="redis://127.0.0.1:1/0")


@pytest.mark.parametrize("kwargs", [
    {"environment": "prod:eu"}, {"namespace": "a b"}, {"environment": "prod\n"}, {"local_bytes": -1},
    {"redis_url": "http://127.0.0.1:1/"}, {"redis_url": "redis://127.0.0.1:1/0", "ttl_s": 0},
    {"redis_url": "redis://127.0.0.1:1/0", "socket_timeout_s": None},
])
def test_bad_configuration_is_a_workbench_error(kwargs):
    with pytest.raises(WorkbenchError):
        TwoTierCache(**kwargs)


def test_keys_must_be_typed():
    with pytest.raises(TypeError, match="CacheKey"):
        TwoTierCache().get("0" * 64)  # type: ignore[arg-type]
