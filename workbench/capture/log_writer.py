"""Appending request-log lines whole, with size-based rotation.

A line goes to the file in one `write` on a descriptor opened with O_APPEND: readers that follow
the file (the app's --follow, `analyze --aggregate`) never see another writer's bytes inside it,
and a crash leaves either the whole line or none of it. A crash inside a write (power loss, the
disk full) can still leave a fragment at the end; opening the log again finds it (the file does
not end with a newline) and ends it with one, so the fragment becomes one bad line that readers
count and name, and the next line is whole.

Rotation by size: when a line would take the file past `max_bytes`, LOG becomes LOG.1 (LOG.1
becomes LOG.2, ... up to `backups`; the oldest goes) and a new LOG starts. A follower that holds
the old file open sees it renamed and moves to the new one (docs/capture.md)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..errors import LogFileError


class LogWriter:
    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = 256 << 20, backups: int = 5) -> None:
        if max_bytes < 1 << 10:
            raise LogFileError(f"log rotation size {max_bytes} bytes is too small", hint="use at least 1 KiB")
        if backups < 0:
            raise LogFileError(f"backups: a count >= 0, got {backups}")
        self.path = Path(path)
        self.max_bytes, self.backups = max_bytes, backups
        self.lines = 0                 # written by this writer
        self.rotations = 0
        self.repaired = 0              # fragments a crash left, ended with a newline
        self._lock = threading.Lock()  # one line at a time from this process (the proxy's threads)
        self._fd = -1
        self._size = 0
        self._open()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise LogFileError(f"{self.path}: cannot open the log for appending ({exc.strerror})",
                               hint="choose a writable --log path") from None
        size = os.fstat(fd).st_size
        if size and not _ends_with_newline(self.path, size):
            os.write(fd, b"\n")
            size += 1
            self.repaired += 1
        self._fd, self._size = fd, size

    def write(self, line: bytes) -> None:
        """Append one line (log_line.log_line's bytes: ends with a newline, holds no other)."""
        if not line.endswith(b"\n") or b"\n" in line[:-1]:
            raise LogFileError("a log line is one line ending with a newline", hint="build it with log_line()")
        with self._lock:
            if self._fd < 0:
                raise LogFileError(f"{self.path}: the log is closed")
            if self._size and self._size + len(line) > self.max_bytes:
                self._rotate()
            n = os.write(self._fd, line)
            if n != len(line):     # a regular file takes the whole write or fails; say so if not
                raise LogFileError(f"{self.path}: only {n} of {len(line)} bytes written (disk full?)")
            self._size += n
            self.lines += 1

    def _rotate(self) -> None:
        os.close(self._fd)
        self._fd = -1
        if self.backups:
            for k in range(self.backups - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{k}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{k + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self.rotations += 1
        self._open()

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ends_with_newline(path: Path, size: int) -> bool:
    with open(path, "rb") as f:
        f.seek(size - 1)
        return f.read(1) == b"\n"
