"""Reading an export file: one JSON document, or JSON lines (one document a line).

Exports come both ways: an OTLP JSON file from the Collector's file exporter is one request a line,
a Langfuse or LiteLLM export is a JSON array or JSON lines. The first non-blank line decides: if it
parses on its own, the file is JSON lines, read one line at a time (a large file is never held
whole) and a bad line is one bad record; otherwise the file is one document, and one that does not
parse is an error for the whole file (nothing in it can be trusted to be where it seems).

Every document goes through `strict_json` (workbench/strict_json.py): NaN, integers of hundreds of
digits, lone surrogates and nesting past `max_depth` are refused with where they are, instead of
failing later (a RecursionError, a UnicodeEncodeError at write time)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ... import strict_json
from ...errors import LogFileError
from ...files import MiB, describe_size, open_user_file
from .records import Problem

# An export that is one JSON document is parsed whole (its text and its values, several times its
# size in memory); JSON lines are streamed and have no cap.
MAX_DOCUMENT_BYTES = 256 * MiB


@dataclass(frozen=True, slots=True)
class Document:
    value: Any
    line: int | None        # the line of a JSON-lines file; None for a whole-file document


def read_documents(path: str | os.PathLike[str], *, max_depth: int = strict_json.MAX_DEPTH
                   ) -> Iterator[Document | Problem]:
    """The file's documents in order, or a Problem for each line that is not one. A file that
    cannot be opened, is not UTF-8 or (as one document) is not JSON raises LogFileError."""
    name = os.fspath(path)
    f = open_user_file(path, what="file to import", error=LogFileError)
    with f:
        n, first = _first_line(f)
        value = _parse(first, max_depth) if first is not None else None
        if isinstance(value, (dict, list)):
            # JSON lines: the first line is parsed once, the rest streamed from where it ended.
            yield Document(value, n)
            yield from _json_lines(f, name, max_depth, start=n + 1)
            return
        f.seek(0)
        raw = f.read(MAX_DOCUMENT_BYTES + 1)   # one document is held whole (JSON lines never are): capped
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise LogFileError(f"{name}: one JSON document of more than {describe_size(MAX_DOCUMENT_BYTES)}, the cap "
                               "on an export read whole",
                               hint="export as JSON lines (one record a line), which is read a line at a time")
    yield Document(_whole(raw, name, max_depth), None)


def _first_line(f: Any) -> tuple[int, bytes | None]:
    for n, raw in enumerate(f, start=1):
        if raw.strip():
            return n, bytes(raw)
    return 0, None


def _parse(raw: bytes, max_depth: int) -> Any:
    try:
        return strict_json.loads(raw.decode("utf-8"), max_depth=max_depth)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError):
        return None


def _json_lines(f: Any, name: str, max_depth: int, start: int) -> Iterator[Document | Problem]:
    for n, raw in enumerate(f, start=start):
        if not raw.strip():
            continue
        where = f"line {n}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield Problem(name, where, f"not UTF-8 (bad byte at column {exc.start + 1})")
            continue
        try:
            value = strict_json.loads(text, max_depth=max_depth)
        except strict_json.JSONValueError as exc:
            yield Problem(name, where, str(exc).replace(" at line 1, column", " at column"))
            continue
        except json.JSONDecodeError as exc:
            yield Problem(name, where, f"not valid JSON: {exc.msg} at column {exc.colno}"
                                       + (" (the line is cut short)" if exc.pos >= len(text.rstrip()) else ""))
            continue
        except (RecursionError, ValueError) as exc:   # strict_json bounds these; kept for safety
            yield Problem(name, where, f"not valid JSON: {type(exc).__name__}")
            continue
        yield Document(value, n)


def _whole(raw: bytes, name: str, max_depth: int) -> Any:
    if not raw.strip():
        raise LogFileError(f"{name}: the file is empty", hint="export the traces or logs again")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LogFileError(f"{name}: not UTF-8 (bad byte at offset {exc.start})",
                           hint="an export is UTF-8 JSON; check that this is the right file") from None
    try:
        return strict_json.loads(text, max_depth=max_depth)
    except strict_json.JSONValueError as exc:
        raise LogFileError(f"{name}: {exc}", hint="the export holds a value no strict JSON reader takes") from None
    except json.JSONDecodeError as exc:
        cut = " (the file is cut short: an interrupted export?)" if exc.pos >= len(text.rstrip()) else ""
        raise LogFileError(f"{name}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}{cut}",
                           hint="export the file again; a JSON-lines file is read line by line") from None
