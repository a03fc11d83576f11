"""Importing trace exports (`--from otel`, `--from openinference`): spans in, calls out.

Each span is one record. The otel importer also reads the GenAI inference events: one tied to a
span fills in the content the span lacks; one whose span is not in the files is a call of its
own. Spans and events that are no model call (an agent run, a tool, an HTTP request) are counted
as ignored, by reason."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from . import openinference, otel_genai
from .otlp import Attrs, LogEvent
from .records import ImportedCall, ImportResult, NotACall, Problem, RecordError
from .requests_check import check_request
from .traces import read_trace_files, session_attr

Convert = Callable[..., tuple[ImportedCall, list[str]]]


def _client(resource: dict[str, Any]) -> str | None:
    name = resource.get("service.name")
    # The SDK's default when the application set none says nothing about which client it was.
    return name if isinstance(name, str) and name and not name.startswith("unknown_service") else None


def import_traces(paths: Sequence[str | os.PathLike[str]], source: str) -> ImportResult:
    files = read_trace_files(paths)
    names = [os.fspath(p) for p in paths]
    result = ImportResult(source, names)
    result.bad.extend(files.problems)
    module = otel_genai if source == "otel" else openinference
    keys = module.SESSION_KEYS
    convert: Convert = module.convert
    sessions = files.session_of(keys)
    events: dict[tuple[str, str], list[LogEvent]] = {}
    if source == "otel":
        for _, ev in files.logs:
            if ev.event_name == otel_genai.EVENT and ev.trace_id and ev.span_id:
                events.setdefault((ev.trace_id, ev.span_id), []).append(ev)
    order = {n: i for i, n in enumerate(names)}

    def one(name: str, where: str, pos: tuple[int, int, int], attrs: Attrs, start: int | None, end: int | None,
            trace_id: str, resource: dict[str, Any], dropped: int) -> None:
        result.records += 1
        try:
            conv = session_attr(attrs.values, keys) or sessions.get(trace_id) or trace_id
            if not conv:
                raise RecordError("no session id and no trace id: the call belongs to no conversation")
            call, warnings = convert(attrs, start_ns=start, end_ns=end, conversation=conv, client=_client(resource))
            check_request(call.request)
        except NotACall as exc:
            result.ignored[str(exc)] += 1
            return
        except RecordError as exc:
            result.bad.append(Problem(name, where, exc.message, order=pos))
            return
        if dropped:
            warnings.append(f"the SDK dropped {dropped} attribute(s) of this span (its attribute count limit): "
                            "messages or tools may be missing from the end")
        result.warnings.extend(Problem(name, where, w, "warning", pos) for w in warnings)
        result.calls.append(call)

    for name, sp in files.spans:
        attrs = sp.attrs
        if source == "otel":
            attrs = otel_genai.merged(sp, events.pop((sp.trace_id, sp.span_id), []))
        one(name, sp.where(), (order[name], sp.line or 0, sp.index), attrs, sp.start_ns, sp.end_ns, sp.trace_id,
            sp.resource, sp.dropped_attributes)
    if source == "otel":
        for name, ev in files.logs:
            if ev.event_name != otel_genai.EVENT:
                result.records += 1
                result.ignored[f"not a GenAI inference event ({ev.event_name or 'no event name'})"] += 1
            elif events.pop((ev.trace_id, ev.span_id), None) is not None or not (ev.trace_id and ev.span_id):
                # Its span is not in the files: the event is the call (its time is its end).
                one(name, ev.where(), (order[name], ev.line or 0, 1_000_000 + ev.index), otel_genai.merged(None, [ev]),
                    ev.time_ns, None, ev.trace_id, ev.resource, 0)
            else:
                result.records += 1                     # read along with its span
    result.calls.sort(key=lambda c: c.start_ns)
    result.bad.sort(key=lambda p: p.order)
    return result
