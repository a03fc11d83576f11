"""Redis values are not trusted until proven (issue 14, case 6): an HMAC over key and value, a size
cap read no further than the cap, an overall deadline per call. Against a real redis-server, and
against real TCP servers on loopback that speak just enough RESP to misbehave."""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest
from fake_clock import FakeClock
from redis_server import redis_server  # noqa: F401  (fixture)

from workbench.cache.keys import CacheKey
from workbench.cache.redis_tier import FORMAT_VERSION, MAGIC, Sealer, WireError, decode, encode
from workbench.cache.secret import ENV_CACHE_SECRET, SECRET_FILE, resolve_secret
from workbench.cache.store import CacheEntry, TwoTierCache
from workbench.errors import WorkbenchError

SECRET = b"a test secret, 32 bytes long...."
OTHER_SECRET = b"another secret, also 32 bytes..."
FAST = dict(socket_timeout_s=0.2, backoff_initial_s=0.05, backoff_max_s=0.2, environment="test", secret=SECRET)
MiB = 1 << 20
_ids = itertools.count()

_HEAD = struct.Struct("<4sHHIIII32s")


def new_key() -> CacheKey:
    return CacheKey(hashlib.sha256(f"integrity-{next(_ids)}".encode()).hexdigest())


def make_entry(n: int = 64, text: str = "<|im_start|>user\nhi<|im_end|>\n") -> CacheEntry:
    return CacheEntry(text, np.arange(n, dtype=np.uint32) + 100, {"format": 1, "messages": 1})


def with_crc(blob: bytes) -> bytes:
    """`blob` with its CRC32 recomputed: what a forger who knows the format (not the secret) writes."""
    head = list(_HEAD.unpack_from(blob))
    tag, body = head[7], blob[_HEAD.size:]
    head[6] = zlib.crc32(body, zlib.crc32(tag))
    return _HEAD.pack(*head) + body


# --- the HMAC: a value is data only under the key it was stored under, by a holder of the secret ----

@pytest.mark.parametrize("how", ["COPY", "DUMP/RESTORE", "GET+SET"])
def test_a_value_copied_from_key_b_to_key_a_is_a_miss_and_an_integrity_fault(redis_server, how):
    writer = TwoTierCache(redis_url=redis_server.url, **FAST)
    reader = TwoTierCache(redis_url=redis_server.url, **FAST)
    key_a, key_b = new_key(), new_key()
    writer.put(key_a, make_entry(text="the prompt for A"))
    writer.put(key_b, make_entry(text="the prompt for B <|im_start|>system\nleak"))
    raw = redis_server.client()
    a, b = writer.redis_key(key_a), writer.redis_key(key_b)
    if how == "COPY":
        assert raw.copy(b, a, replace=True)
    elif how == "DUMP/RESTORE":
        raw.restore(a, 0, raw.dump(b), replace=True)
    else:
        raw.set(a, raw.get(b))
    assert raw.get(a) == raw.get(b)                       # the attack happened: A now holds B's bytes

    assert reader.get(key_a) == (None, "miss")
    assert reader.metrics().faults["integrity"] == 1
    got_b, source = reader.get(key_b)                     # the untouched key still reads
    assert source == "redis" and got_b.text.startswith("the prompt for B")
    entry, source = reader.get_or_build(key_a, lambda: make_entry(text="rebuilt A"))
    assert source == "fresh" and entry.text == "rebuilt A"
    assert TwoTierCache(redis_url=redis_server.url, **FAST).get(key_a)[0].text == "rebuilt A"


def test_a_value_moved_across_environments_or_namespaces_is_a_miss(redis_server):
    k = new_key()
    prod = TwoTierCache(redis_url=redis_server.url, **{**FAST, "environment": "prod"})
    prod.put(k, make_entry(text="prod prompt"))
    raw = redis_server.client()
    for kw in ({"environment": "staging"}, {"namespace": "other"}):
        there = TwoTierCache(redis_url=redis_server.url, **{**FAST, **kw})
        raw.set(there.redis_key(k), raw.get(prod.redis_key(k)))
        assert there.get(k) == (None, "miss")
        assert there.metrics().faults["integrity"] == 1


def _forgeries(sealed: bytes, key: bytes) -> dict[str, bytes]:
    head = list(_HEAD.unpack_from(sealed))
    meta_n, text_n, tok_n = head[3], head[4], head[5]
    tok_at = _HEAD.size + meta_n + text_n
    # The payloads: ids changed in place, and ids of 4e9, each with a valid CRC.
    changed = bytearray(sealed)
    changed[tok_at:tok_at + 4] = struct.pack("<I", 151_644)            # <|im_start|> in qwen2.5
    huge = bytearray(sealed)
    huge[tok_at:] = np.full(tok_n, 4_000_000_000, dtype="<u4").tobytes()
    no_tag = encode("forged text", np.array([151_644, 4_000_000_000], dtype=np.uint32), {"format": 1})
    other_secret = encode("forged text", np.array([1, 2], dtype=np.uint32), {"format": 1},
                          sealer=Sealer(OTHER_SECRET), redis_key=key)
    zero_tag = bytearray(sealed)
    zero_tag[_HEAD.size - 32:_HEAD.size] = bytes(32)
    return {"ids changed, CRC fixed": with_crc(bytes(changed)), "ids of 4e9, CRC fixed": with_crc(bytes(huge)),
            "no tag (plain encode)": no_tag, "tag of another secret": other_secret,
            "tag zeroed, CRC fixed": with_crc(bytes(zero_tag))}


def test_forged_entries_with_a_valid_crc_are_misses_and_integrity_faults(redis_server):
    cache = TwoTierCache(redis_url=redis_server.url, **FAST)
    k = new_key()
    cache.put(k, make_entry(n=32))
    raw = redis_server.client()
    rkey = cache.redis_key(k)
    sealed = raw.get(rkey)
    forgeries = _forgeries(sealed, rkey.encode())
    for name, forged in forgeries.items():
        decode(forged)                                    # each one passes the framing and the CRC ...
        raw.set(rkey, forged)
        reader = TwoTierCache(redis_url=redis_server.url, **FAST)
        assert reader.get(k) == (None, "miss"), name      # ... and none of them is data
        assert reader.metrics().faults["integrity"] == 1, name
        assert reader.metrics().hits["redis"] == 0
    raw.set(rkey, sealed)                                 # the genuine value still reads
    assert TwoTierCache(redis_url=redis_server.url, **FAST).get(k)[1] == "redis"


def test_the_tag_covers_every_byte_of_the_value_and_the_key():
    sealer = Sealer(SECRET)
    key = b"workbench:test:2:segments:" + b"ab" * 32
    blob = encode("héllo <|im_end|>", np.arange(6, dtype=np.uint32), {"a": 1, "b": "x"}, sealer=sealer, redis_key=key)
    assert decode(blob, sealer=sealer, redis_key=key)[0] == "héllo <|im_end|>"
    for i in range(len(blob)):
        if 20 <= i < 24:
            continue                                      # the CRC itself: with_crc rewrites it
        spoiled = bytearray(blob)
        spoiled[i] ^= 0x01
        with pytest.raises(WireError) as info:
            decode(with_crc(bytes(spoiled)), sealer=sealer, redis_key=key)
        if i >= 24:
            # tag and body bytes under a valid CRC: only the HMAC can tell, and it does
            assert info.value.kind == "integrity", i
        else:
            assert info.value.kind in ("garbage", "version"), i    # magic, version, flags, lengths
    for other_key in (key[:-1] + b"c", key + b"0", b"workbench:prod:2:segments:" + b"ab" * 32, b""):
        with pytest.raises(WireError, match="HMAC") as info:
            decode(blob, sealer=sealer, redis_key=other_key)
        assert info.value.kind == "integrity"
    with pytest.raises(WireError, match="HMAC"):
        decode(blob, sealer=Sealer(OTHER_SECRET), redis_key=key)


def test_the_wire_format_version_is_bumped_and_the_tag_is_in_the_header():
    assert FORMAT_VERSION == 3
    blob = encode("t", np.array([7], dtype=np.uint32), {}, sealer=Sealer(SECRET), redis_key=b"k")
    magic, version, _, _, _, tok_n, _, tag = _HEAD.unpack_from(blob)
    assert (magic, version, tok_n) == (MAGIC, FORMAT_VERSION, 1) and tag != bytes(32)
    assert blob.endswith(np.array([7], dtype="<u4").tobytes())


def test_caches_with_different_secrets_do_not_read_each_other_and_same_secrets_do(redis_server, monkeypatch):
    k = new_key()
    TwoTierCache(redis_url=redis_server.url, **FAST).put(k, make_entry(text="signed with SECRET"))
    stranger = TwoTierCache(redis_url=redis_server.url, **{**FAST, "secret": OTHER_SECRET})
    assert stranger.get(k) == (None, "miss") and stranger.metrics().faults["integrity"] == 1
    friend = TwoTierCache(redis_url=redis_server.url, **FAST)
    assert friend.get(k)[0].text == "signed with SECRET"
    # the same through the environment, as two machines of one deployment would configure it
    no_arg = {kk: v for kk, v in FAST.items() if kk != "secret"}
    monkeypatch.setenv(ENV_CACHE_SECRET, SECRET.decode())
    from_env = TwoTierCache(redis_url=redis_server.url, **no_arg)
    assert from_env.get(k)[0].text == "signed with SECRET"
    assert from_env.metrics().redis_secret == "env"
    monkeypatch.setenv(ENV_CACHE_SECRET, f"  {SECRET.decode()}\n")      # whitespace from `$(cat file)`
    assert TwoTierCache(redis_url=redis_server.url, **no_arg).get(k)[1] == "redis"
    monkeypatch.setenv(ENV_CACHE_SECRET, OTHER_SECRET.decode())
    assert TwoTierCache(redis_url=redis_server.url, **no_arg).get(k) == (None, "miss")


@pytest.mark.parametrize("value", ["short", "x" * 15])
def test_a_short_secret_is_a_configuration_error(value, monkeypatch):
    monkeypatch.setenv(ENV_CACHE_SECRET, value)
    with pytest.raises(WorkbenchError, match="at least 16") as info:
        TwoTierCache(redis_url="redis://127.0.0.1:1/0")
    assert "secrets.token_hex" in str(info.value)
    with pytest.raises(WorkbenchError, match="at least 16"):
        TwoTierCache(redis_url="redis://127.0.0.1:1/0", secret=b"0123456789")


# --- the per-deployment default secret ---------------------------------------------------------------

@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.delenv(ENV_CACHE_SECRET, raising=False)
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_without_the_variable_a_deployment_secret_is_made_once_with_mode_0600_and_a_warning(
        home, redis_server, caplog):
    no_secret = {kk: v for kk, v in FAST.items() if kk != "secret"}
    with caplog.at_level(logging.WARNING, logger="workbench.cache"):
        a = TwoTierCache(redis_url=redis_server.url, **no_secret)
        b = TwoTierCache(redis_url=redis_server.url, **no_secret)
    path = home / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(bytes.fromhex(path.read_text().strip())) == 32
    warnings = [r.getMessage() for r in caplog.records if ENV_CACHE_SECRET in r.getMessage()]
    assert len(warnings) == 1 and "other machines" in warnings[0] and str(path) in warnings[0]
    k = new_key()
    a.put(k, make_entry(text="shared on this machine"))
    assert b.get(k)[0].text == "shared on this machine"          # processes of one deployment share
    m = a.metrics()
    assert m.redis_secret == "deployment"
    assert 'workbench_cache_redis_secret{source="deployment"} 1' in a.prometheus_text()
    assert 'workbench_cache_redis_secret{source="env"} 0' in a.prometheus_text()
    assert not list(home.glob(".cache-secret.*"))                # no temp file left behind


def test_a_local_only_cache_makes_no_secret(home):
    TwoTierCache().put(new_key(), make_entry())
    assert not (home / SECRET_FILE).exists()
    assert TwoTierCache().metrics().redis_secret is None


def test_processes_racing_to_make_the_deployment_secret_all_end_with_the_same_one(home):
    code = ("import hashlib, sys; from workbench.cache.secret import resolve_secret; "
            "s = resolve_secret(); print(s.source, hashlib.sha256(s.key).hexdigest())")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env={**os.environ, "WORKBENCH_HOME": str(home)}, text=True)
             for _ in range(6)]
    outs = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(outs) == 1 and outs.pop().startswith("deployment ")
    assert resolve_secret().key == bytes.fromhex((home / SECRET_FILE).read_text().strip())


def test_a_damaged_secret_file_is_an_error_that_says_what_to_do(home):
    home.mkdir(parents=True)
    (home / SECRET_FILE).write_text("not hex at all")
    with pytest.raises(WorkbenchError, match="damaged") as info:
        resolve_secret()
    assert ENV_CACHE_SECRET in str(info.value) and "delete it" in str(info.value)


def test_a_secret_file_readable_by_others_is_used_with_a_warning(home, caplog):
    home.mkdir(parents=True)
    (home / SECRET_FILE).write_text("ab" * 32 + "\n")
    (home / SECRET_FILE).chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="workbench.cache"):
        s = resolve_secret()
    assert s.key == bytes.fromhex("ab" * 32) and s.source == "deployment"
    assert any("chmod 600" in r.getMessage() for r in caplog.records)


def test_a_home_that_cannot_hold_the_file_falls_back_to_a_process_secret(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv(ENV_CACHE_SECRET, raising=False)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    home = blocker / "home"                                       # under a file: cannot be made
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    with caplog.at_level(logging.WARNING, logger="workbench.cache"):
        one, two = resolve_secret(), resolve_secret()
    assert one.source == two.source == "process"
    assert one.key == two.key                                     # every cache of this process shares it
    assert sum("no other process" in r.getMessage() for r in caplog.records) == 1
    code = "import hashlib; from workbench.cache.secret import resolve_secret; print(resolve_secret().key.hex())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "WORKBENCH_HOME": str(home)}).stdout.strip()
    assert len(other) == 64 and bytes.fromhex(other) != one.key   # ...and no other process does


# --- the value cap ---------------------------------------------------------------------------------

def test_an_entry_over_the_cap_is_not_stored_and_a_stored_one_over_a_readers_cap_is_not_read(redis_server):
    small = make_entry(n=10)
    big = make_entry(n=300_000)                             # ~1.2 MB of ids
    writer = TwoTierCache(redis_url=redis_server.url, max_value_bytes=1 * MiB, **FAST)
    k_small, k_big = new_key(), new_key()
    writer.put(k_small, small)
    writer.put(k_big, big)
    raw = redis_server.client()
    assert raw.exists(writer.redis_key(k_small)) and not raw.exists(writer.redis_key(k_big))
    assert writer.metrics().redis_oversize_puts == 1
    assert writer.get(k_big)[1] == "local"                  # still served by the local tier
    assert "workbench_cache_redis_oversize_puts_total 1" in writer.prometheus_text()

    roomy = TwoTierCache(redis_url=redis_server.url, max_value_bytes=8 * MiB, **FAST)
    roomy.put(k_big, big)
    assert raw.exists(roomy.redis_key(k_big))
    strict = TwoTierCache(redis_url=redis_server.url, max_value_bytes=1 * MiB, **FAST)
    assert strict.get(k_big) == (None, "miss")
    assert strict.metrics().faults["oversize"] == 1           # refused on the length it announced
    assert TwoTierCache(redis_url=redis_server.url, max_value_bytes=8 * MiB, **FAST).get(k_big)[1] == "redis"


def test_a_value_exactly_at_the_cap_is_read(redis_server):
    e = make_entry(n=1000)
    k = new_key()
    probe = TwoTierCache(redis_url=redis_server.url, **FAST)
    probe.put(k, e)
    size = len(redis_server.client().get(probe.redis_key(k)))
    at_cap = TwoTierCache(redis_url=redis_server.url, max_value_bytes=size, **FAST)
    assert at_cap.get(k) == (e, "redis")
    below = TwoTierCache(redis_url=redis_server.url, max_value_bytes=size - 1, **FAST)
    assert below.get(k) == (None, "miss") and below.metrics().faults["oversize"] == 1


@pytest.mark.parametrize("kwargs", [{"max_value_bytes": 0}, {"max_value_bytes": -5}, {"max_value_bytes": 1.5},
                                    {"redis_deadline_s": 0}, {"redis_deadline_s": float("inf")},
                                    {"redis_deadline_s": None}])
def test_bad_limits_are_configuration_errors(kwargs):
    with pytest.raises(WorkbenchError):
        TwoTierCache(redis_url="redis://127.0.0.1:1/0", secret=SECRET, **kwargs)


def test_a_url_asking_for_resp3_is_refused():
    with pytest.raises(WorkbenchError, match="RESP2"):
        TwoTierCache(redis_url="redis://127.0.0.1:1/0?protocol=3", secret=SECRET)


# --- hostile servers: real TCP on loopback, speaking just enough RESP -------------------------------

Script = Callable[[list[bytes]], Iterable["bytes | float"]]


class HostileRedis:
    """Accepts connections; answers each RESP command with what `script(command)` yields: bytes
    are sent, a float is a pause in seconds. The handshake (CLIENT SETINFO, SELECT) gets +OK."""

    def __init__(self, script: Script):
        self.script = script
        self.handshake: Script = lambda cmd: [b"+OK\r\n"]
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.stop = threading.Event()
        self.sent = 0
        self.commands: list[bytes] = []   # the name of each command after the handshake, in order
        self.threads: list[threading.Thread] = []
        self.conns: list[socket.socket] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.sock.getsockname()[1]}/0"

    def _serve(self) -> None:
        self.sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)
            t = threading.Thread(target=self._talk, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _commands(self, conn: socket.socket) -> Iterator[list[bytes]]:
        buf = b""

        def need(pred: Callable[[bytes], int]) -> int:
            nonlocal buf
            while (n := pred(buf)) < 0:
                chunk = conn.recv(65536)
                if not chunk:
                    raise EOFError
                buf += chunk
            return n

        while True:
            end = need(lambda b: b.find(b"\r\n"))
            count, buf = int(buf[1:end]), buf[end + 2:]
            args = []
            for _ in range(count):
                end = need(lambda b: b.find(b"\r\n"))
                size, buf = int(buf[1:end]), buf[end + 2:]
                need(lambda b, size=size: 0 if len(b) >= size + 2 else -1)
                args.append(buf[:size])
                buf = buf[size + 2:]
            yield args

    def _talk(self, conn: socket.socket) -> None:
        try:
            for cmd in self._commands(conn):
                name = cmd[0].upper()
                if name not in (b"CLIENT", b"SELECT"):
                    self.commands.append(name)
                steps = (self.handshake if name in (b"CLIENT", b"SELECT") else self.script)(cmd)
                for step in steps:
                    if self.stop.is_set():
                        return
                    if isinstance(step, float):
                        self.stop.wait(step)
                    else:
                        conn.sendall(step)
                        self.sent += len(step)
        except (OSError, EOFError):
            pass            # the client hung up: what a bounded client does
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._accept.join(5)
        for t in self.threads:
            t.join(5)


@pytest.fixture
def hostile() -> Iterator[Callable[[Script], HostileRedis]]:
    servers: list[HostileRedis] = []

    def start(script: Script) -> HostileRedis:
        servers.append(HostileRedis(script))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def dribble(data: bytes, every_s: float = 0.03) -> Iterator[bytes | float]:
    for i in range(len(data)):
        yield data[i:i + 1]
        yield every_s


DEADLINE = dict(FAST, redis_deadline_s=0.5)
# A call "ends at the deadline" when its fault is counted as "deadline": the reader raises that only
# once the deadline has passed (redis_reply.py), never before, and a socket timeout (200 ms here)
# would count as "timeout". Each dribble below would take seconds to tens of seconds to finish.


def test_a_server_dribbling_a_reply_byte_by_byte_ends_at_the_deadline(hostile):
    # The case: one byte every 30 ms never trips a socket timeout (here 200 ms).
    value = encode("x" * 200, np.arange(100, dtype=np.uint32), {})
    reply = b"$%d\r\n" % len(value) + value + b"\r\n"           # 30 ms a byte: about 25 s in all
    server = hostile(lambda cmd: dribble(reply))
    clock = FakeClock()                                    # the back-off's: it never ends in this test
    cache = TwoTierCache(redis_url=server.url, clock=clock, **DEADLINE)
    assert cache.get(new_key()) == (None, "miss")
    m = cache.metrics()
    assert m.faults["deadline"] == 1 and sum(m.faults.values()) == 1
    assert 0 < server.sent < len(reply)                    # it read the dribble, and hung up before its end
    # the back-off applies: the next calls skip the tier instead of paying the deadline again
    for _ in range(20):
        assert cache.get(new_key()) == (None, "miss")
    assert cache.metrics().redis_skipped == 20 and cache.metrics().faults["deadline"] == 1
    assert server.commands == [b"GET"]                     # the server saw one call, not 21


def test_a_status_line_that_never_ends_ends_at_the_deadline(hostile):
    line = b"+" + b"A" * 10_000                            # 10 ms a byte: 100 s
    server = hostile(lambda cmd: dribble(line, every_s=0.01))
    cache = TwoTierCache(redis_url=server.url, **DEADLINE)
    assert cache.get(new_key()) == (None, "miss")
    assert cache.metrics().faults["deadline"] == 1 and sum(cache.metrics().faults.values()) == 1
    assert server.sent < len(line)


def test_a_server_dribbling_the_handshake_ends_at_the_deadline(hostile):
    # Connect and handshake count against the same deadline as the command: SELECT 3 is dribbled.
    server = hostile(lambda cmd: [b"$-1\r\n"])
    server.handshake = lambda cmd: dribble(b"+OK\r\n", every_s=0.1)
    cache = TwoTierCache(redis_url=server.url.replace("/0", "/3"), **DEADLINE)
    assert cache.get(new_key()) == (None, "miss")
    assert cache.metrics().faults["deadline"] == 1 and sum(cache.metrics().faults.values()) == 1
    assert server.commands == []                           # ended in the handshake: the GET was never sent


def test_a_put_to_a_server_dribbling_its_ok_ends_at_the_deadline(hostile):
    ok = b"+" + b"O" * 40 + b"K\r\n"                       # 50 ms a byte: 2.2 s
    server = hostile(lambda cmd: dribble(ok, every_s=0.05))
    cache = TwoTierCache(redis_url=server.url, **DEADLINE)
    cache.put(new_key(), make_entry())
    assert cache.metrics().faults["deadline"] == 1 and sum(cache.metrics().faults.values()) == 1
    assert server.commands == [b"SET"] and server.sent < len(ok)


def _firehose(total: int, header: bytes | None) -> Script:
    chunk = b"\x00" * (256 * 1024)                        # allocated once, before any measurement

    def script(cmd: list[bytes]) -> Iterator[bytes]:
        yield header if header is not None else b""
        sent = 0
        while sent < total:
            yield chunk
            sent += len(chunk)
    return script


@pytest.mark.parametrize("header", [b"$%d\r\n" % (50 * MiB), b"+", b"$10\r\n"],
                         ids=["announced 50 MB", "a 50 MB status line", "announced 10 B, sends 50 MB"])
def test_a_50_mb_reply_is_refused_quickly_in_bounded_memory(hostile, header):
    # The issue: a 500 MB reply took 22 s and 2 GB. With a 1 MiB cap it must cost neither.
    server = hostile(_firehose(50 * MiB, header))
    cache = TwoTierCache(redis_url=server.url, max_value_bytes=1 * MiB, **DEADLINE)
    tracemalloc.start()
    try:
        got = cache.get(new_key())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == (None, "miss")
    assert peak < 6 * MiB, peak                           # the cap and a few copies, not 50 MB
    # Hung up early: the server got no further than what the client read (at most the cap) and the
    # two sockets' buffers hold; reading it all would have let every byte through.
    assert server.sent < 50 * MiB
    faults = cache.metrics().faults
    if header.startswith(b"$10"):
        assert faults["garbage"] == 1                      # 10 bytes read, then not an entry
    else:
        assert faults["oversize"] == 1


@pytest.mark.parametrize("reply, kind", [
    (b"*100000000\r\n", "garbage"),                        # an array announcing 10^8 items
    (b"*1\r\n" * 10_000 + b":1\r\n", "garbage"),           # nesting far past any reply to GET
    (b"$99999999999999999999999\r\n", "garbage"),          # a length of 23 digits
    (b"$-7\r\n", "garbage"),
    (b"$ 5\r\nhello\r\n", "garbage"),
    (b":12\r\n", "garbage"),                               # an integer is not an entry
    (b"$5\r\nhello\r\n", "garbage"),                       # a string that is not an entry
])
def test_malformed_replies_are_counted_misses(hostile, reply, kind):
    server = hostile(lambda cmd: [reply])
    cache = TwoTierCache(redis_url=server.url, **DEADLINE)
    assert cache.get(new_key()) == (None, "miss")
    assert cache.metrics().faults[kind] == 1 and sum(cache.metrics().faults.values()) == 1   # not the deadline


def test_after_a_refused_reply_the_tier_reconnects_and_reads_honest_values(redis_server):
    # A reply cut off at the cap leaves the stream mid-value: that connection must never be reused.
    big, small = make_entry(n=400_000), make_entry(n=8)
    k_big, k_small = new_key(), new_key()
    TwoTierCache(redis_url=redis_server.url, max_value_bytes=8 * MiB, **FAST).put(k_big, big)
    TwoTierCache(redis_url=redis_server.url, **FAST).put(k_small, small)
    clock = FakeClock()
    cache = TwoTierCache(redis_url=redis_server.url, max_value_bytes=1 * MiB, clock=clock, **FAST)
    assert cache.get(k_big) == (None, "miss") and cache.metrics().faults["oversize"] == 1
    assert cache.get(k_small, tiers=("redis",)) == (None, "miss")            # backed off: skipped
    assert cache.metrics().redis_skipped == 1
    clock.advance(FAST["backoff_max_s"])                    # the back-off is over
    assert cache.get(k_small, tiers=("redis",)) == (small, "redis")         # on a new connection
    assert sum(cache.metrics().faults.values()) == 1


def test_assemble_behind_a_dribbling_redis_ends_quickly_and_exactly(hostile):
    # The issue measured assemble() blocked for over 75 s by a server sending a byte every 30 ms.
    from workbench import Assembler

    server = hostile(lambda cmd: dribble(b"$100\r\n" + b"x" * 100 + b"\r\n"))
    cache = TwoTierCache(redis_url=server.url, clock=FakeClock(), **DEADLINE)   # (the back-off never ends)
    request = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}
    got = Assembler(template="qwen2.5", cache=cache).assemble(request)
    cold = Assembler(template="qwen2.5", cache=None).assemble(request)
    assert got.text == cold.text and np.array_equal(got.token_ids, cold.token_ids)
    # One call waited for the server, to its deadline; every other call of the assembly skipped it.
    m = cache.metrics()
    assert m.faults["deadline"] == 1 and sum(m.faults.values()) == 1 and m.redis_skipped >= 1
    assert len(server.commands) == 1
