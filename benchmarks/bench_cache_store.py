"""What a Redis-tier hit costs for a 10k-token prefix on loopback, next to a local-tier hit.

Run:  .venv/bin/python benchmarks/bench_cache_store.py [--runs 2000] [--tokens 10000]

Starts its own redis-server on a free port (no persistence, a temp dir), stores one entry of
10k tokens and ~40 KB of text, then times, call by call:
  redis hit    TwoTierCache.get(key, tiers=("redis",)): GET, CRC32, HMAC, decode, a read-only array
  raw GET      the redis-py GET of the same value alone (the floor the tier sits on)
  decode       the wire-format decode alone, framing and CRC32 only
  decode+hmac  the decode the tier does: framing, CRC32 and the HMAC check
  local hit    TwoTierCache.get(key) answered by the in-process tier
  put          write-through (local + encode + SET)
The issue's bar: a Redis-tier hit adds under 1 ms at the median.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.cache.keys import CacheKey  # noqa: E402
from workbench.cache.redis_tier import decode  # noqa: E402
from workbench.cache.store import CacheEntry, TwoTierCache  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_redis(workdir: str) -> tuple[subprocess.Popen[bytes], int]:
    exe = shutil.which("redis-server")
    if exe is None:
        sys.exit("redis-server is not on PATH: install it (Debian/Ubuntu: apt-get install redis-server)")
    port = _free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", workdir, "--logfile", ""],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            time.sleep(0.01)
    proc.kill()
    sys.exit(f"redis-server did not start on port {port}")


def _times_ms(fn, runs: int) -> list[float]:  # type: ignore[no-untyped-def]
    for _ in range(min(50, runs)):  # warm the pool, the allocator and the branch predictors
        fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def _row(name: str, ms: list[float]) -> float:
    s = sorted(ms)
    med, p95 = statistics.median(s), s[int(0.95 * (len(s) - 1))]
    print(f"  {name:<12} median {med:7.3f} ms   p95 {p95:7.3f} ms")
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=10_000)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 152_000, size=args.tokens, dtype=np.uint32)
    text = "".join(chr(c) for c in rng.integers(0x20, 0x7F, size=args.tokens * 4))  # ~4 chars/token
    entry = CacheEntry(text, tokens, {"template": "qwen2.5", "tokenizer": "qwen2.5", "segments": 42})
    key = CacheKey(hashlib.sha256(b"bench").hexdigest())

    with tempfile.TemporaryDirectory() as tmp:
        proc, port = _start_redis(tmp)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            writer = TwoTierCache(redis_url=url, environment="bench")
            reader = TwoTierCache(redis_url=url, environment="bench")
            writer.put(key, entry)
            raw_client = reader._redis._client  # type: ignore[union-attr]  # the same pool, for the floor
            rkey = reader.redis_key(key)
            blob = raw_client.get(rkey)

            got, source = reader.get(key, tiers=("redis",))
            assert source == "redis" and got == entry, "the Redis tier did not return the entry"
            print(f"entry: {len(tokens):,} tokens, {len(text):,} chars of text, "
                  f"{len(blob):,} bytes in Redis; {args.runs} runs each")
            redis_med = _row("redis hit", _times_ms(lambda: reader.get(key, tiers=("redis",)), args.runs))
            _row("raw GET", _times_ms(lambda: raw_client.get(rkey), args.runs))
            _row("decode", _times_ms(lambda: decode(blob), args.runs))
            sealer, bkey = reader._redis._sealer, rkey.encode()  # type: ignore[union-attr]
            _row("decode+hmac", _times_ms(lambda: decode(blob, sealer=sealer, redis_key=bkey), args.runs))
            reader.get(key)
            _row("local hit", _times_ms(lambda: reader.get(key), args.runs))
            _row("put", _times_ms(lambda: writer.put(key, entry), max(1, args.runs // 4)))
            faults = {k: v for k, v in reader.metrics().faults.items() if v}
            verdict = "under" if redis_med < 1.0 else "OVER"
            print(f"bar: Redis-tier hit median {redis_med:.3f} ms, {verdict} 1 ms; faults: {faults or 'none'}")
            writer.close()
            reader.close()
            return 0 if redis_med < 1.0 else 1
        finally:
            proc.terminate()
            proc.wait(5)


if __name__ == "__main__":
    raise SystemExit(main())
