"""The spans and events of OTLP JSON files, gathered for the importers that read traces (otel,
openinference): every span and log record of every file, the problems found while reading, and
each trace's conversation.

A call's conversation is the session its trace belongs to: the span's own session attribute, else
one any span of its trace carries (an agent framework often sets the session on the root span
only), else the trace id itself, so that the calls of one trace stay one conversation."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .json_input import read_documents
from .otlp import LogEvent, Span, is_otlp, spans_and_logs
from .records import Problem

# Nesting allowed in an OTLP JSON document: AnyValue adds about four levels to each level of a
# structured attribute (a message's parts' arguments), so the default of 200 would refuse real
# tool-call arguments.
OTLP_MAX_DEPTH = 800


@dataclass
class TraceFiles:
    spans: list[tuple[str, Span]] = field(default_factory=list)        # (file name, span)
    logs: list[tuple[str, LogEvent]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def session_of(self, keys: Sequence[str]) -> dict[str, str]:
        """trace id -> the first session id (by start time) any of its spans or events names."""
        found: dict[str, tuple[int, str]] = {}
        for _, sp in self.spans:
            sid = session_attr(sp.attrs.values, keys)
            if sid is not None and sp.trace_id:
                when = sp.start_ns or 0
                if sp.trace_id not in found or when < found[sp.trace_id][0]:
                    found[sp.trace_id] = (when, sid)
        for _, ev in self.logs:
            sid = session_attr(ev.attrs.values, keys)
            if sid is not None and ev.trace_id and ev.trace_id not in found:
                found[ev.trace_id] = (ev.time_ns or 0, sid)
        return {t: sid for t, (_, sid) in found.items()}


def session_attr(attrs: dict[str, Any], keys: Sequence[str]) -> str | None:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def read_trace_files(paths: Sequence[str | os.PathLike[str]]) -> TraceFiles:
    out = TraceFiles()
    for f, path in enumerate(paths):
        name = os.fspath(path)
        counters: dict[str, int] = {}
        for doc in read_documents(path, max_depth=OTLP_MAX_DEPTH):
            if isinstance(doc, Problem):
                line = int(doc.where.split()[1]) if doc.where.startswith("line ") else 0
                out.problems.append(Problem(doc.file, doc.where, doc.problem, order=(f, line, 0)))
                continue
            if not is_otlp(doc.value):
                where = f"line {doc.line}" if doc.line is not None else "the document"
                out.problems.append(Problem(name, where, "not an OTLP JSON export: no resourceSpans or resourceLogs "
                                                         "(export traces with the OTLP JSON encoding)",
                                            order=(f, doc.line or 0, 0)))
                continue
            for item in spans_and_logs(doc.value, doc.line, counters):
                if isinstance(item, Span):
                    out.spans.append((name, item))
                else:
                    out.logs.append((name, item))
    return out
