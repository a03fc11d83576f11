"""OTLP JSON (the OpenTelemetry protocol's JSON encoding) -> spans and log records with plain values.

What a file holds: `ExportTraceServiceRequest` and `ExportLogsServiceRequest` objects
(`{"resourceSpans": [...]}`, `{"resourceLogs": [...]}`), one per file or one per line (the
Collector's file exporter), or a list of them. Keys are lowerCamelCase as the OTLP/JSON spec says;
snake_case (protobuf's own field names, `MessageToDict(preserving_proto_field_name=True)`) is
read too. Trace and span ids are hex in the spec but base64 where a generic protobuf encoder wrote
them (`MessageToJson`): both are read, and every id comes out as lowercase hex.

Attribute values are AnyValue objects; they become Python values: strings, ints (int64 is a JSON
string), floats, booleans, lists (`arrayValue`), dicts (`kvlistValue`), and base64 text for
`bytesValue` (what a blob's content is anyway). A key given twice with different values is kept
as a conflict: the caller reports it, since which value the exporter meant is unknown."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_HEX = re.compile(r"[0-9a-fA-F]+")


@dataclass
class Attrs:
    values: dict[str, Any] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)   # keys given twice with different values
    problems: list[str] = field(default_factory=list)    # entries that are not key/value pairs


@dataclass
class SpanEvent:
    name: str
    time_ns: int | None
    attrs: Attrs


@dataclass
class Span:
    index: int                  # from 1, in file order over every document
    line: int | None
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int | None
    end_ns: int | None
    attrs: Attrs
    resource: dict[str, Any]
    scope: str
    events: list[SpanEvent]
    dropped_attributes: int

    def where(self) -> str:
        at = f"line {self.line}, " if self.line is not None else ""
        return f"{at}span {self.index} (id {self.span_id or '?'})"


@dataclass
class LogEvent:
    index: int
    line: int | None
    trace_id: str
    span_id: str
    event_name: str
    time_ns: int | None
    attrs: Attrs
    body: Any
    resource: dict[str, Any]

    def where(self) -> str:
        at = f"line {self.line}, " if self.line is not None else ""
        return f"{at}log record {self.index}" + (f" (span id {self.span_id})" if self.span_id else "")


def _get(obj: dict[str, Any], camel: str) -> Any:
    if camel in obj:
        return obj[camel]
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
    return obj.get(snake)


def _list(obj: Any, camel: str) -> list[Any]:
    v = _get(obj, camel) if isinstance(obj, dict) else None
    return v if isinstance(v, list) else []


def is_otlp(value: Any) -> bool:
    items = value if isinstance(value, list) else [value]
    return any(isinstance(v, dict) and (_get(v, "resourceSpans") is not None or _get(v, "resourceLogs") is not None)
               for v in items)


def hex_id(value: Any, size: int) -> str:
    """An OTLP trace (16 bytes) or span (8 bytes) id as lowercase hex: hex as the spec writes it,
    base64 as protobuf's JSON mapping writes bytes. '' when absent or neither."""
    if not isinstance(value, str) or not value:
        return ""
    if len(value) == 2 * size and _HEX.fullmatch(value):
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ""
    return raw.hex() if len(raw) == size else ""


def _nanos(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.isdigit() and len(value) < 25:
        n = int(value)
        return n if n > 0 else None
    return None


def any_value(v: Any) -> Any:
    """An OTLP AnyValue as a Python value (None for an empty or unknown one). Nesting is bounded by
    the document's own (strict_json refused anything deeper when the file was read); the walk
    uses an explicit stack, so no value can exhaust the interpreter's."""
    root: list[Any] = [None]
    stack: list[tuple[Any, list[Any] | dict[str, Any], int | str]] = [(v, root, 0)]
    while stack:
        node, parent, slot = stack.pop()
        out: Any = None
        if isinstance(node, dict):
            if "stringValue" in node or "string_value" in node:
                s = _get(node, "stringValue")
                out = s if isinstance(s, str) else None
            elif "boolValue" in node or "bool_value" in node:
                b = _get(node, "boolValue")
                out = b if isinstance(b, bool) else None
            elif "intValue" in node or "int_value" in node:
                i = _get(node, "intValue")
                if isinstance(i, int) and not isinstance(i, bool):
                    out = i
                elif isinstance(i, str) and re.fullmatch(r"-?[0-9]{1,20}", i):
                    out = int(i)
            elif "doubleValue" in node or "double_value" in node:
                d = _get(node, "doubleValue")
                out = float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) else None
            elif "bytesValue" in node or "bytes_value" in node:
                by = _get(node, "bytesValue")
                out = by if isinstance(by, str) else None
            elif "arrayValue" in node or "array_value" in node:
                items = _list(_get(node, "arrayValue") or {}, "values")
                out = [None] * len(items)
                for k, item in enumerate(items):
                    stack.append((item, out, k))
            elif "kvlistValue" in node or "kvlist_value" in node:
                out = {}
                for kv in _list(_get(node, "kvlistValue") or {}, "values"):
                    if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                        out[kv["key"]] = None
                        stack.append((kv.get("value"), out, kv["key"]))
        parent[slot] = out  # type: ignore[index]
    return root[0]


def attributes(items: Any) -> Attrs:
    attrs = Attrs()
    if not isinstance(items, list):
        if items is not None:
            attrs.problems.append(f"attributes: a list of key/value pairs, got {type(items).__name__}")
        return attrs
    for kv in items:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            attrs.problems.append("attributes: an entry without a string key")
            continue
        key, value = kv["key"], any_value(kv.get("value"))
        if key in attrs.values and attrs.values[key] != value:
            attrs.conflicts.append(key)
        attrs.values[key] = value
    return attrs


def spans_and_logs(value: Any, line: int | None, counters: dict[str, int]) -> Iterator[Span | LogEvent]:
    """Every span and log record of one document, numbered across the file with `counters`."""
    docs = value if isinstance(value, list) else [value]
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        for rs in _list(doc, "resourceSpans"):
            resource = attributes(_list(_get(rs, "resource") or {}, "attributes")).values
            for ss in _list(rs, "scopeSpans") + _list(rs, "instrumentationLibrarySpans"):
                scope = _get(ss, "scope") or _get(ss, "instrumentationLibrary") or {}
                raw_name = scope.get("name") if isinstance(scope, dict) else None
                scope_name = raw_name if isinstance(raw_name, str) else ""
                for sp in _list(ss, "spans"):
                    counters["span"] = counters.get("span", 0) + 1
                    yield _span(sp, counters["span"], line, resource, scope_name)
        for rl in _list(doc, "resourceLogs"):
            resource = attributes(_list(_get(rl, "resource") or {}, "attributes")).values
            for sl in _list(rl, "scopeLogs"):
                for lr in _list(sl, "logRecords"):
                    counters["log"] = counters.get("log", 0) + 1
                    yield _log(lr, counters["log"], line, resource)


def _span(sp: Any, index: int, line: int | None, resource: dict[str, Any], scope: str) -> Span:
    if not isinstance(sp, dict):
        return Span(index, line, "", "", "", "", None, None, Attrs(problems=[f"a span is an object, got "
                                                                            f"{type(sp).__name__}"]),
                    resource, scope, [], 0)
    events = []
    for ev in _list(sp, "events"):
        if isinstance(ev, dict):
            name = ev.get("name")
            events.append(SpanEvent(name if isinstance(name, str) else "", _nanos(_get(ev, "timeUnixNano")),
                                    attributes(ev.get("attributes"))))
    dropped = _get(sp, "droppedAttributesCount")
    name = sp.get("name")
    return Span(index, line, hex_id(_get(sp, "traceId"), 16), hex_id(_get(sp, "spanId"), 8),
                hex_id(_get(sp, "parentSpanId"), 8), name if isinstance(name, str) else "",
                _nanos(_get(sp, "startTimeUnixNano")), _nanos(_get(sp, "endTimeUnixNano")),
                attributes(sp.get("attributes")), resource, scope, events,
                int(dropped) if isinstance(dropped, int) or (isinstance(dropped, str) and dropped.isdigit()) else 0)


def _log(lr: Any, index: int, line: int | None, resource: dict[str, Any]) -> LogEvent:
    if not isinstance(lr, dict):
        return LogEvent(index, line, "", "", "", None, Attrs(problems=["a log record is an object"]), None, resource)
    attrs = attributes(lr.get("attributes"))
    name = _get(lr, "eventName")
    if not isinstance(name, str) or not name:
        # Before OTLP 1.5 an event's name was the `event.name` attribute.
        name = attrs.values.get("event.name") if isinstance(attrs.values.get("event.name"), str) else ""
    when = _nanos(_get(lr, "timeUnixNano")) or _nanos(_get(lr, "observedTimeUnixNano"))
    return LogEvent(index, line, hex_id(_get(lr, "traceId"), 16), hex_id(_get(lr, "spanId"), 8), name, when, attrs,
                    any_value(lr.get("body")), resource)
