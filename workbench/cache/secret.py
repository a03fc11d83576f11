"""The secret that keys the HMAC every shared-cache value carries (SPEC 7.5).

Where it comes from, in order:

    argument    TwoTierCache(secret=...): tests, and callers that manage their own secrets
    env         WORKBENCH_CACHE_SECRET: what a deployment of several machines must set, the same
                value on every machine that shares one Redis
    deployment  unset: 32 random bytes made once in WORKBENCH_HOME/cache-secret (mode 0600), so
                every process of this user on this machine shares entries with no setup; a
                one-time warning says that other machines will not read them
    process     WORKBENCH_HOME cannot hold the file: random bytes for this process alone (its Redis
                entries are readable by no other process), with a warning

The secret is what makes a Redis value trusted: whoever can write the Redis but does not hold
the secret cannot make the workbench return a value it did not store under that key.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WorkbenchError
from ..home import workbench_home
from .metrics import SecretSource

ENV_CACHE_SECRET = "WORKBENCH_CACHE_SECRET"
SECRET_FILE = "cache-secret"
# 128 bits: below that a secret may be guessed offline from one stored value and its key.
MIN_SECRET_BYTES = 16
_FILE_HEX = 64  # the deployment file holds 32 random bytes as hex

log = logging.getLogger("workbench.cache")
_warned: set[str] = set()
_warn_lock = threading.Lock()
# Made at most once per process: every cache of this process must share it, or two caches of
# one process would not read each other's entries.
_process_key = secrets.token_bytes(32)


@dataclass(frozen=True, slots=True)
class CacheSecret:
    key: bytes = field(repr=False)
    source: SecretSource
    path: Path | None = None   # the deployment file, when that is where the key came from


def _warn_once(tag: str, message: str) -> None:
    with _warn_lock:
        if tag in _warned:
            return
        _warned.add(tag)
    log.warning(message)


def _as_key(value: bytes | str, what: str) -> bytes:
    key = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if len(key) < MIN_SECRET_BYTES:
        raise WorkbenchError(f"{what} is {len(key)} bytes; the cache secret needs at least {MIN_SECRET_BYTES}",
                             hint="use a random value, e.g. the output of "
                                  "`python -c 'import secrets; print(secrets.token_hex(32))'`")
    return key


def _read_file(path: Path) -> bytes:
    text = path.read_text(encoding="ascii", errors="replace").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(text) != _FILE_HEX or len(key) != _FILE_HEX // 2:
        raise WorkbenchError(f"the cache secret file {path} is damaged ({len(text)} characters, "
                             f"expected {_FILE_HEX} hex digits)",
                             hint=f"delete it (a new one is made; entries already in Redis become misses) "
                                  f"or set {ENV_CACHE_SECRET}")
    mode = path.stat().st_mode
    if stat.S_IMODE(mode) & 0o077:
        _warn_once(f"mode:{path}", f"the cache secret file {path} is readable by other users "
                                   f"(mode {stat.S_IMODE(mode):o}); run chmod 600 on it")
    return key


def _make_file(path: Path) -> None:
    """Write a new secret so that no reader ever sees a partial file and the first writer wins."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # mkstemp creates the file with mode 0600; the hard link publishes it complete, and fails
    # (instead of replacing) when another process published its own first.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{SECRET_FILE}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(_FILE_HEX // 2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def deployment_secret(home: Path | None = None) -> CacheSecret:
    """The per-deployment secret in WORKBENCH_HOME (made on first use), else a per-process one."""
    path = (home if home is not None else workbench_home()) / SECRET_FILE
    try:
        try:
            key = _read_file(path)
        except FileNotFoundError:
            _make_file(path)
            key = _read_file(path)
    except OSError as exc:
        _warn_once(f"process:{path}",
                   f"{ENV_CACHE_SECRET} is not set and the per-deployment cache secret cannot be kept in "
                   f"{path} ({exc.strerror or exc}); this process signs its Redis entries with a key of its "
                   f"own, so no other process will reuse them. Set {ENV_CACHE_SECRET} to share the Redis tier")
        return CacheSecret(_process_key, "process")
    _warn_once(f"deployment:{path}",
               f"{ENV_CACHE_SECRET} is not set: Redis cache entries are signed with the per-deployment secret "
               f"in {path}. Processes on other machines that share this Redis must all set "
               f"{ENV_CACHE_SECRET} to one shared value, or they will not reuse each other's entries")
    return CacheSecret(key, "deployment", path)


def resolve_secret(explicit: bytes | str | None = None) -> CacheSecret:
    """The secret for a Redis tier: `explicit`, else WORKBENCH_CACHE_SECRET, else the deployment's."""
    if explicit is not None:
        return CacheSecret(_as_key(explicit, "the cache secret"), "argument")
    # Surrounding whitespace is dropped: a trailing newline from `$(cat file)` on one machine and
    # not on another would otherwise split one deployment into two that never share an entry.
    env = (os.environ.get(ENV_CACHE_SECRET) or "").strip()
    if env:
        return CacheSecret(_as_key(env, ENV_CACHE_SECRET), "env")
    return deployment_secret()
