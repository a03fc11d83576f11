"""One entry point: `import_files(paths, source)` reads exports of one source into calls."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ...errors import LogFileError
from .from_rows import import_rows
from .from_traces import import_traces
from .records import ImportResult

SOURCES = ("otel", "openinference", "langfuse", "litellm")


def import_files(paths: Sequence[str | os.PathLike[str]], source: str, *, strict: bool = False) -> ImportResult:
    """The calls in `paths` (exports of `source`), and what was skipped. A file that cannot be read
    raises LogFileError; with `strict`, so does the first bad record."""
    if source not in SOURCES:
        raise LogFileError(f"unknown source {source!r}", hint=f"use one of {', '.join(SOURCES)}")
    if not paths:
        raise LogFileError("no files given", hint="name one or more exported files")
    result = import_traces(paths, source) if source in ("otel", "openinference") else import_rows(paths, source)
    if strict and result.bad:
        raise result.bad[0].error()
    return result
