"""What `workbench record` adds to a call: the same calls sent to the upstream directly and through
the recorder, interleaved, in one run.

Run:  .venv/bin/python benchmarks/bench_record.py [--calls 400]

The upstream is the tests' (tests/record_upstream.py: aiohttp on 127.0.0.1, a canned Chat
Completions reply, streamed or not); the recorder runs as users run it, `workbench record` in its
own process, writing its log. The client is httpx with keep-alive, as the SDKs use it.
  non-streaming   latency of a whole call: median and p95, direct vs recorded, and the difference
  streaming       time to the first streamed byte: median and p95, direct vs recorded
The issue's bars: the recorder adds <= 2 ms at the median and <= 5 ms at p95 to a non-streaming call;
the first streamed byte passes within 5 ms of the upstream's.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from record_upstream import upstream  # noqa: E402  (the tests' upstream, found through the line above)

BODY = {"model": "gpt-4o", "messages": [{"role": "system", "content": "You are a helpful assistant. " * 40},
                                        {"role": "user", "content": "What is the capital of France?"}]}


def start_recorder(base: str, log: Path) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen([sys.executable, "-m", "workbench.cli.main", "record", "--upstream", base, "--port", "0",
                          "--log", str(log)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    for line in p.stderr:
        if line.startswith("recording on "):
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()   # type: ignore[union-attr]
            return p, line.split()[2]
    raise SystemExit(f"the recorder did not start (exit {p.wait()})")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def whole_call(c: httpx.Client, url: str) -> float:
    t = time.perf_counter()
    r = c.post(url + "/v1/chat/completions", json=BODY)
    r.read()
    assert r.status_code == 200
    return (time.perf_counter() - t) * 1000


def first_byte(c: httpx.Client, url: str) -> float:
    t = time.perf_counter()
    with c.stream("POST", url + "/v1/chat/completions", json={**BODY, "stream": True}) as r:
        chunks = r.iter_raw()
        next(chunks)
        ms = (time.perf_counter() - t) * 1000
        for _ in chunks:
            pass
    return ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=400)
    args = ap.parse_args()
    with upstream() as up, tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "calls.jsonl"
        proc, rec = start_recorder(up.base, log)
        try:
            with httpx.Client(timeout=60) as c:
                for _ in range(20):                         # warm both paths (connections, imports)
                    whole_call(c, up.base), whole_call(c, rec), first_byte(c, up.base), first_byte(c, rec)
                direct: list[float] = []
                recorded: list[float] = []
                fb_direct: list[float] = []
                fb_recorded: list[float] = []
                for _ in range(args.calls):                 # interleaved: drift on a busy machine hits both
                    direct.append(whole_call(c, up.base))
                    recorded.append(whole_call(c, rec))
                    fb_direct.append(first_byte(c, up.base))
                    fb_recorded.append(first_byte(c, rec))
            deadline = time.monotonic() + 30
            want = 40 + 2 * args.calls
            while log.read_bytes().count(b"\n") < want and time.monotonic() < deadline:
                time.sleep(0.05)
            lines = log.read_bytes().count(b"\n")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(f"{args.calls} calls each way, interleaved; {lines} log lines written (want {want})")
    print(f"{'':24}{'median ms':>10}{'p95 ms':>10}")
    for name, xs in (("non-streaming, direct", direct), ("non-streaming, recorded", recorded),
                     ("first byte, direct", fb_direct), ("first byte, recorded", fb_recorded)):
        print(f"{name:24}{statistics.median(xs):10.2f}{pct(xs, 0.95):10.2f}")
    add_med = statistics.median(recorded) - statistics.median(direct)
    add_p95 = pct(recorded, 0.95) - pct(direct, 0.95)
    fb_med = statistics.median(fb_recorded) - statistics.median(fb_direct)
    fb_p95 = pct(fb_recorded, 0.95) - pct(fb_direct, 0.95)
    print(f"added by the recorder: non-streaming median {add_med:+.2f} ms (bar 2), p95 {add_p95:+.2f} ms (bar 5); "
          f"first byte median {fb_med:+.2f} ms, p95 {fb_p95:+.2f} ms (bar 5)")


if __name__ == "__main__":
    main()
