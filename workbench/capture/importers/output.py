"""Writing the imported lines: to a log file whole or not at all, or to stdout.

`-o LOG` writes a temporary file beside LOG (same folder, so the rename never crosses a file
system), flushes it to disk, then renames it over LOG: a reader never sees half an import, and
an import that fails (a bad record under --strict, a full disk, Ctrl-C) leaves LOG as it was."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from typing import BinaryIO

from ...errors import LogFileError
from .records import ImportedCall


def write_lines(calls: Iterable[ImportedCall], out: BinaryIO) -> int:
    n = 0
    for call in calls:
        out.write(call.line())
        n += 1
    return n


def write_log(calls: Iterable[ImportedCall], path: str | os.PathLike[str] | None) -> int:
    """The number of lines written: to `path` atomically, or to stdout when `path` is None."""
    if path is None:
        binary = getattr(sys.stdout, "buffer", None)
        if binary is not None:
            n = write_lines(calls, binary)
            binary.flush()
            return n
        n = 0                    # a text-only stdout (a test's StringIO, an embedding host)
        for call in calls:
            sys.stdout.write(call.line().decode("utf-8"))
            n += 1
        return n
    target = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise LogFileError(f"{os.fspath(path)}: is a folder", hint="name the log file to write")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise LogFileError(f"{os.fspath(path)}: cannot write there ({exc.strerror})",
                           hint="choose a writable -o path") from None
    try:
        with os.fdopen(fd, "wb") as f:
            n = write_lines(calls, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise LogFileError(f"{os.fspath(path)}: cannot write the log ({exc.strerror})",
                               hint="check the free space and the permissions") from None
        raise
    return n
