"""One request-log line (SPEC 7.1, docs/logs.md), as every writer here writes it.

The two grouping fields come first and unescaped where they can be: analysis/logs.py's index pass
reads them from the bytes without parsing the rest of a line. A line is one JSON object and one
newline, UTF-8, never split: writers append it whole (log_writer.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import LogFileError

# Optional fields, in the order they are written after conversation_id, timestamp and request.
OPTIONAL = ("model", "provider", "client", "template", "latency_ms", "response")


def utc_timestamp(t: datetime | float | None = None) -> str:
    """ISO-8601 in UTC with microseconds and a `Z`-free offset (`+00:00`), as analysis/logs.py
    reads it; `t` seconds since the epoch, an aware datetime, or now."""
    if t is None:
        d = datetime.now(UTC)
    elif isinstance(t, datetime):
        d = t.astimezone(UTC) if t.tzinfo else t.replace(tzinfo=UTC)
    else:
        d = datetime.fromtimestamp(t, UTC)
    return d.isoformat(timespec="microseconds")


def log_line(conversation_id: str, timestamp: str, request: Mapping[str, Any], **optional: Any) -> bytes:
    """The bytes of one line. `optional`: the fields of OPTIONAL (None: left out), and any other
    field a writer adds (it is kept; readers ignore what they do not know)."""
    if not isinstance(conversation_id, str) or not conversation_id:
        raise LogFileError(f"conversation_id: a non-empty string, got {conversation_id!r}",
                           hint="name the conversation the call belongs to")
    if not isinstance(timestamp, str) or not timestamp:
        raise LogFileError(f"timestamp: an ISO-8601 string, got {timestamp!r}", hint="use utc_timestamp()")
    latency = optional.get("latency_ms")
    if latency is not None and (not isinstance(latency, int | float) or isinstance(latency, bool)
                                or not math.isfinite(latency) or latency < 0):
        raise LogFileError(f"latency_ms: a number of milliseconds >= 0, got {latency!r}")
    record: dict[str, Any] = {"conversation_id": conversation_id, "timestamp": timestamp, "request": dict(request)}
    for key in OPTIONAL:
        if optional.get(key) is not None:
            record[key] = optional[key]
    for key, value in optional.items():
        if key not in record and value is not None:
            record[key] = value
    # allow_nan=False: a NaN would make a line no strict reader takes (strict_json refuses it).
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8") + b"\n"
