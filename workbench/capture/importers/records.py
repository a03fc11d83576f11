"""What an import produces: the calls it found, the records it could not read, and where each lies.

A trace export or a spend-log table holds many records; one bad record never stops the import of
the others (unless --strict). Every problem names the file, the record's position in it (a line of
a JSON-lines file, a span's index and id, a row's index and request id) and what is wrong."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...errors import LogFileError
from ..log_line import log_line


class RecordError(LogFileError):
    """One record (span, event, observation, row) that cannot become a log line: what is wrong with
    it, without where it lies (the reader adds that: `Problem`)."""


class NotACall(Exception):  # noqa: N818 - a verdict, not a failure; never leaves this package
    """A record that is no model call (an agent's span, an HTTP span, an embeddings row): counted
    under its reason as ignored, never an error."""


@dataclass(frozen=True, slots=True)
class Problem:
    """A record that was skipped (`kind="bad"`) or imported with a loss (`kind="warning"`)."""
    file: str
    where: str        # "line 3", "span 2 (id 00f067aa0ba902b7)", "row 4 (request_id chatcmpl-1)"
    problem: str
    kind: str = "bad"
    order: tuple[int, int, int] = (0, 0, 0)   # (file, line, record): the first in the files comes first

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: {self.problem}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "where": self.where, "problem": self.problem}

    def error(self) -> LogFileError:
        return LogFileError(str(self), hint="fix or remove that record, or leave out --strict to skip it and go on")


@dataclass(frozen=True, slots=True)
class ImportedCall:
    """One model call, ready to be written as a request-log line (SPEC 7.1, docs/logs.md)."""
    conversation_id: str
    timestamp: str                  # ISO-8601, UTC
    request: dict[str, Any]
    start_ns: int                   # orders the output; ties keep the order the records were read
    model: str | None = None
    provider: str | None = None
    client: str | None = None
    latency_ms: float | None = None
    response: dict[str, Any] | None = None

    def line(self) -> bytes:
        return log_line(self.conversation_id, self.timestamp, self.request, model=self.model,
                        provider=self.provider, client=self.client, latency_ms=self.latency_ms,
                        response=self.response)


@dataclass
class ImportResult:
    """Everything one import read: calls in time order, and what it skipped or imported with a loss."""
    source: str
    files: list[str]
    calls: list[ImportedCall] = field(default_factory=list)
    records: int = 0                                  # spans, events, observations or rows read
    bad: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)   # records that are not model calls, by reason

    def to_json(self, *, written: int | None = None, output: str | None = None) -> dict[str, Any]:
        return {
            "source": self.source,
            "files": list(self.files),
            "records": self.records,
            "calls": len(self.calls),
            "lines_written": len(self.calls) if written is None else written,
            "output": output,
            "skipped": len(self.bad),
            "ignored": dict(sorted(self.ignored.items())),
            "bad": [p.to_json() for p in self.bad[:100]],
            "warnings": [p.to_json() for p in self.warnings[:100]],
            "warning_count": len(self.warnings),
        }
