"""A real Redis Cluster for tests: 3 masters and 3 replicas of `redis-server --cluster-enabled yes`.

    from redis_cluster import redis_cluster, fresh_cluster  # noqa: F401  (pytest finds fixtures by name)

`redis_cluster` is one cluster for the session (tests that do not break it); `fresh_cluster` is a
new one per test, for the tests that kill, pause or reshard. Each node listens on a free loopback
port, in a temp dir, without persistence, with a node timeout of 1 s (a lost master is failed over
in about two); `redis-cli --cluster create` joins them, and the fixture waits until every node
reports `cluster_state:ok` and knows all six. Everything is stopped at the end.

`launch_cluster` is the same launcher without pytest (benchmarks/bench_cluster.py uses it). The
server binary is `redis-server` on PATH, or `exe=` (a `valkey-server` speaks the same protocol).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_server import RedisServer, free_port

WAIT_S = 30.0
NODE_TIMEOUT_MS = 1000


def _command(port: int, *args: str, timeout: float = 1.0) -> bytes | None:
    """One command in RESP over a raw socket (no client library needed); None if nothing answers."""
    msg = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(msg)
            out = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return out
                out += chunk
                if out.startswith(b"$"):
                    n = int(out[1:out.index(b"\r\n")])
                    if n < 0 or len(out) >= out.index(b"\r\n") + 2 + n + 2:
                        return out
                elif out.endswith(b"\r\n"):
                    return out
    except OSError:
        return None


def wait_for(condition: Any, what: str, timeout: float = WAIT_S) -> None:
    """Poll `condition()` until it holds; fail saying `what` did not happen."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def _covered(masters: dict[int, str]) -> int:
    n = 0
    for ranges in masters.values():
        for part in ranges.split():
            if not part.startswith("["):
                lo, _, hi = part.partition("-")
                n += int(hi or lo) - int(lo) + 1
    return n


class Cluster:
    """Six cluster-mode servers: `members[i]` is a RedisServer (kill, pause, resume work as there)."""

    def __init__(self, exe: str, cli: str, workdir: Path, *, masters: int = 3, replicas: int = 1):
        self.cli = cli
        self.members: list[RedisServer] = []
        for i in range(masters * (1 + replicas)):
            d = workdir / f"node{i}"
            d.mkdir(parents=True, exist_ok=True)
            m = RedisServer(exe, d)
            m.extra_args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                            # a lost shard must not take the healthy ones down with it (docs/scaling.md)
                            "--cluster-require-full-coverage", "no",
                            # a replica syncs at once (the default waits 5 s for more replicas); one
                            # that has never synced cannot be promoted
                            "--repl-diskless-sync-delay", "0"]
            self.members.append(m)
        self.replicas = replicas

    # --- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        base = [list(m.extra_args) for m in self.members]
        for m, args in zip(self.members, base):
            for attempt in range(3):
                # The bus port is named: by default it is the port + 10,000, which may be taken or
                # past 65,535 for a port the OS picked.
                m.extra_args = [*args, "--cluster-port", str(free_port())]
                try:
                    m.start()
                    break
                except RuntimeError:
                    if attempt == 2:
                        raise
                    m.port = free_port()
        nodes = [f"127.0.0.1:{m.port}" for m in self.members]
        done = subprocess.run([self.cli, "--cluster", "create", *nodes, "--cluster-replicas", str(self.replicas),
                               "--cluster-yes"], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        self.wait_ok()

    def stop(self) -> None:
        for m in self.members:
            m.stop()

    def alive(self) -> list[RedisServer]:
        return [m for m in self.members if m.proc is not None and m.proc.poll() is None and not m.paused]

    def wait_ok(self, timeout: float = WAIT_S) -> None:
        """Every live node says cluster_state:ok, every replica has synced with its master (one that
        has not could not be promoted), all agree on which live master serves which slot, and those
        serve all 16,384 (a lost master's slots are served again once its replica is promoted)."""
        def ok() -> bool:
            live = self.alive()
            infos = [_command(m.port, "CLUSTER", "INFO") or b"" for m in live]
            if not all(b"cluster_state:ok" in i and b"cluster_slots_assigned:16384" in i for i in infos):
                return False
            repl = [_command(m.port, "INFO", "replication") or b"" for m in live]
            if not all(b"role:master" in r or b"master_link_status:up" in r for r in repl):
                return False        # a replica still syncing could not take over from its master
            views = {tuple(sorted(self._masters_seen_by(m).items())) for m in live}
            return len(views) == 1 and _covered(dict(next(iter(views)))) == 16384
        wait_for(ok, "the cluster to report cluster_state:ok on every node", timeout)

    def wait_promoted(self, lost: RedisServer, timeout: float = WAIT_S) -> None:
        """Wait until no live node counts `lost` among the masters (its replica took its slots over),
        then until the cluster is ok again."""
        wait_for(lambda: all(lost.port not in self._masters_seen_by(m) for m in self.alive()),
                 f"a replica of the lost master on port {lost.port} to be promoted", timeout)
        self.wait_ok(timeout)

    # --- topology ---------------------------------------------------------------------------

    def _nodes_lines(self, via: RedisServer) -> list[list[str]]:
        raw = _command(via.port, "CLUSTER", "NODES") or b""
        body = raw.split(b"\r\n", 1)[1] if raw.startswith(b"$") else b""
        return [line.split() for line in body.decode().splitlines() if line.strip()]

    def _masters_seen_by(self, via: RedisServer) -> dict[int, str]:
        """port -> the slot ranges that `via` thinks that live master serves."""
        out: dict[int, str] = {}
        for f in self._nodes_lines(via):
            if "master" in f[2] and "fail" not in f[2] and len(f) > 8:
                out[int(f[1].split("@")[0].rsplit(":", 1)[1])] = " ".join(f[8:])
        return out

    def member(self, port: int) -> RedisServer:
        return next(m for m in self.members if m.port == port)

    def node_id(self, m: RedisServer) -> str:
        return (_command(m.port, "CLUSTER", "MYID") or b"").split(b"\r\n")[1].decode()

    def masters(self) -> list[RedisServer]:
        via = self.alive()[0]
        return [self.member(p) for p in self._masters_seen_by(via)]

    def replicas_of(self, master: RedisServer) -> list[RedisServer]:
        mid = self.node_id(master)
        via = self.alive()[0]
        return [self.member(int(f[1].split("@")[0].rsplit(":", 1)[1])) for f in self._nodes_lines(via)
                if f[3] == mid and "fail" not in f[2]]

    def owner(self, slot: int) -> RedisServer:
        """The live master serving `slot`, as the nodes say."""
        for m in self.masters():
            for part in (self._masters_seen_by(self.alive()[0])[m.port]).split():
                if part.startswith("["):
                    continue        # a slot being migrated, shown as [slot->-id]
                lo, _, hi = part.partition("-")
                if int(lo) <= slot <= int(hi or lo):
                    return m
        raise AssertionError(f"no live master serves slot {slot}")

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{m.port}" for m in self.members) + "/"

    def client(self) -> Any:
        """A plain redis-py cluster client, for looking at (or spoiling) what the caches stored."""
        from redis.cluster import ClusterNode, RedisCluster

        return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", m.port) for m in self.alive()],
                            socket_timeout=2, require_full_coverage=False)

    def node_client(self, m: RedisServer) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=m.port, socket_timeout=2)


def launch_cluster(workdir: Path | None = None, exe: str | None = None) -> Cluster:
    exe = exe or shutil.which("redis-server")
    cli = shutil.which("redis-cli") or (shutil.which("valkey-cli") if exe and "valkey" in exe else None)
    if exe is None or cli is None:
        raise RuntimeError("redis-server and redis-cli must be on PATH (Debian/Ubuntu: apt-get install "
                           "redis-server; macOS: brew install redis)")
    cluster = Cluster(exe, cli, workdir or Path(tempfile.mkdtemp(prefix="wb-cluster-")))
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.fail("redis-server and redis-cli are not on PATH: install them (Debian/Ubuntu: apt-get install "
                    "redis-server; macOS: brew install redis). The cluster tests start a real cluster; CI "
                    "installs it.", pytrace=False)
    cluster = launch_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _launched(tmp_path_factory)


@pytest.fixture
def fresh_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of its own, for a test that kills, pauses or reshards it."""
    yield from _launched(tmp_path_factory)
