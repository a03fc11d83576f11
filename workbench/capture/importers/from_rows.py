"""Importing row exports (`--from langfuse`, `--from litellm`): one JSON object per record, as a
JSON array, JSON lines, or an API page (`{"data": [...]}`, what Langfuse's and LiteLLM's list
endpoints return)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import langfuse, litellm
from .json_input import read_documents
from .records import ImportedCall, ImportResult, NotACall, Problem, RecordError
from .requests_check import check_request

Convert = Callable[[dict[str, Any]], tuple[ImportedCall, list[str]]]
CONVERTERS: dict[str, tuple[Convert, Callable[[dict[str, Any]], str | None]]] = {
    "langfuse": (langfuse.convert, langfuse.record_id),
    "litellm": (litellm.convert, litellm.record_id),
}


def _records(value: Any, line: int | None) -> Iterator[tuple[int | None, int, Any]]:
    """(line, index within the document, record) for each record a document holds."""
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        value = value["data"]
    if isinstance(value, list):
        for i, rec in enumerate(value, start=1):
            yield line, i, rec
    else:
        yield line, 0, value


def import_rows(paths: Sequence[str | os.PathLike[str]], source: str) -> ImportResult:
    names = [os.fspath(p) for p in paths]
    result = ImportResult(source, names)
    convert, rid = CONVERTERS[source]
    noun = "row" if source == "litellm" else "record"
    for f, path in enumerate(paths):
        name = names[f]
        for doc in read_documents(path):
            if isinstance(doc, Problem):
                result.bad.append(Problem(doc.file, doc.where, doc.problem, order=(f, _line(doc.where), 0)))
                continue
            for line, i, rec in _records(doc.value, doc.line):
                result.records += 1
                where = ", ".join(w for w in (f"line {line}" if line is not None else "",
                                             f"{noun} {i}" if i else "") if w) or noun
                pos = (f, line or 0, i)
                try:
                    if not isinstance(rec, dict):
                        raise RecordError(f"a {noun} is a JSON object, got {type(rec).__name__}")
                    ident = rid(rec)
                    if ident:
                        where += f" ({'request_id' if source == 'litellm' else 'id'} {ident[:64]})"
                    call, warnings = convert(rec)
                    check_request(call.request)
                except NotACall as exc:
                    result.ignored[str(exc)] += 1
                    continue
                except RecordError as exc:
                    result.bad.append(Problem(name, where, exc.message, order=pos))
                    continue
                result.warnings.extend(Problem(name, where, w, "warning", pos) for w in warnings)
                result.calls.append(call)
    result.calls.sort(key=lambda c: c.start_ns)
    result.bad.sort(key=lambda p: p.order)
    return result


def _line(where: str) -> int:
    head = where.split(",")[0].split(" ")
    return int(head[1]) if len(head) > 1 and head[0] == "line" and head[1].isdigit() else 0
