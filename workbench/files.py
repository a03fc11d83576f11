"""Files a user names (a session, a request log, a --vars file, a bundle's files), checked before
a byte is read.

A name on a command line can be anything the file system holds: a FIFO whose writer never comes
(an ordinary open waits for one forever), a device that never ends (`/dev/zero`: read whole, it
fills the memory), a directory, a file of gigabytes. Each is refused here with the path and what it
is, never a hang or a MemoryError:

- the file is opened without blocking (O_NONBLOCK: a FIFO opens at once instead of waiting for a
  writer) and judged on the open descriptor (fstat), so a file swapped in after a check cannot
  slip through;
- regular files only;
- a file read whole is read only under a cap, and at most cap + 1 bytes (a file that grows while
  it is read is caught too). A file read as a stream (a request log) is opened here and read line
  by line by its reader, with no cap on the whole.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:  # doctest: +ELLIPSIS
    ...     read_user_file(d, cap=10, what="session file")
    Traceback (most recent call last):
    ...
    workbench.errors.WorkbenchError: session file ... is a directory, not a regular file (name a file in it)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import BinaryIO

from .errors import WorkbenchError

MiB = 1 << 20

# How an error is made: the caller's own class (SessionFileError, LogFileError, a BundleError with
# its file and field bound), called with the message and a hint.
ErrorFactory = Callable[..., WorkbenchError]

# What a path that is not a regular file is, and what to name instead.
_KINDS = ((stat.S_ISDIR, "a directory", "name a file in it"),
          (stat.S_ISFIFO, "a FIFO (named pipe)", "save what the pipe carries to a file and name that"),
          (stat.S_ISCHR, "a character device", "name a regular file"),
          (stat.S_ISBLK, "a block device", "name a regular file"),
          (stat.S_ISSOCK, "a socket", "name a regular file"))


def describe_size(n: int) -> str:
    """A byte count as people read caps: "256 MiB", "2 MiB", "4,097 bytes".

        >>> describe_size(256 << 20), describe_size(3000)
        ('256 MiB', '3,000 bytes')
    """
    return f"{n // MiB:,} MiB" if n >= MiB and n % MiB == 0 else f"{n:,} bytes"


def _kind(mode: int) -> tuple[str, str]:
    return next(((name, fix) for test, name, fix in _KINDS if test(mode)), ("not a regular file", "name a file"))


def open_user_file(path: str | os.PathLike[str], *, what: str, error: ErrorFactory = WorkbenchError,
                   name: str | None = None, follow_links: bool = True) -> BinaryIO:
    """The file opened for reading in binary, refused unless it is a regular file. `what` names the
    file's role in messages ("session file", "request log"); `name`, how to show the path (default:
    as given); `follow_links=False` refuses a symlink at the last component (a bundle's files, whose
    links were judged before). The caller closes the file."""
    shown = name if name is not None else os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise error(f"cannot read {shown}: {exc.strerror or exc}", hint=f"check the {what}'s path") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind, fix = _kind(mode)
            raise error(f"{what} {shown} is {kind}, not a regular file", hint=fix)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_user_file(path: str | os.PathLike[str], *, cap: int, what: str, error: ErrorFactory = WorkbenchError,
                   name: str | None = None, raise_hint: str | None = None, follow_links: bool = True) -> bytes:
    """The whole file, refused unless it is a regular file of at most `cap` bytes. `raise_hint`:
    how to get past the cap (an option, a smaller export), for the error's hint."""
    shown = name if name is not None else os.fspath(path)
    with open_user_file(path, what=what, error=error, name=name, follow_links=follow_links) as f:
        size = os.fstat(f.fileno()).st_size
        data = _read_to(f, size, cap) if size <= cap else b""
    if size > cap or len(data) > cap:
        raise _too_large(shown, cap, what, error, raise_hint)
    return data


def _read_to(f: BinaryIO, size: int, cap: int) -> bytes:
    """The file's bytes, up to cap + 1. A read of n bytes takes n bytes of memory before it reads
    one: the file's own size (+ 1, to see it grew) is asked for first, not the cap."""
    data = f.read(size + 1)
    if len(data) <= size:
        return data
    buf = bytearray(data)          # it grew while being read: the rest a chunk at a time, to the cap
    while len(buf) <= cap:
        chunk = f.read(min(MiB, cap + 1 - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def check_user_file(path: str | os.PathLike[str], *, cap: int | None, what: str,
                    error: ErrorFactory = WorkbenchError, raise_hint: str | None = None) -> None:
    """Refuse now, as `read_user_file` would, a file that another module reads its own way (a
    template folder's files, a trace to import): not a regular file, or over `cap` (None: a file
    its reader streams). Nothing is read."""
    with open_user_file(path, what=what, error=error) as f:
        size = os.fstat(f.fileno()).st_size
    if cap is not None and size > cap:
        raise _too_large(os.fspath(path), cap, what, error, raise_hint)


def _too_large(shown: str, cap: int, what: str, error: ErrorFactory, raise_hint: str | None) -> WorkbenchError:
    mib = f" ({describe_size(cap)})" if cap >= MiB and cap % MiB == 0 else ""
    return error(f"{what} {shown} is larger than {cap:,} bytes{mib}, the cap on a {what}",
                 hint=raise_hint or "check the path")
