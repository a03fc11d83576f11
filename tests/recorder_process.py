"""`workbench record` in a subprocess, as users run it, and the log it writes, for the tests."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
START_S = 60                                     # a fresh interpreter importing aiohttp on a busy machine


@contextmanager
def recorder(upstream: str, log: Path, *extra: str) -> Iterator[str]:
    p = subprocess.Popen([sys.executable, "-m", "workbench.cli.main", "record", "--upstream", upstream, "--port", "0",
                          "--log", str(log), *extra], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    url: list[str] = []
    lines: list[str] = []

    def read() -> None:
        assert p.stderr is not None
        for line in p.stderr:
            lines.append(line)
            if line.startswith("recording on ") and not url:
                url.append(line.split()[2])
    t = threading.Thread(target=read, daemon=True)
    t.start()
    deadline = time.monotonic() + START_S
    while not url and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert url, f"the recorder did not start: {''.join(lines)}"
        yield url[0]
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(30)
        t.join(10)


def log_lines(log: Path, n: int, timeout: float = 30) -> list[dict[str, Any]]:
    """The log's lines once it holds `n` (a line is written when its call has ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists():
            raw = log.read_bytes()
            if raw.count(b"\n") >= n:
                assert raw.endswith(b"\n")
                return [json.loads(x) for x in raw.splitlines()]
        time.sleep(0.02)
    raise AssertionError(f"the log has {count(log)} lines, wanted {n}")




def count(log: Path) -> int:
    return log.read_bytes().count(b"\n") if log.exists() else 0
