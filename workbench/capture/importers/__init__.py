"""Importers: traces and gateway logs from other tools -> request-log lines (SPEC 7.1).

`import_files(paths, source)` reads OTLP JSON exports of OpenTelemetry GenAI spans and events
(`otel`) or of OpenInference spans (`openinference`), Langfuse observation exports (`langfuse`)
and LiteLLM spend logs (`litellm`); `write_log` writes the calls as log lines. docs/importing.md
says what is read from each source and what cannot come back."""

from .output import write_log
from .pipeline import SOURCES, import_files
from .records import ImportedCall, ImportResult, Problem

__all__ = ["SOURCES", "import_files", "write_log", "ImportedCall", "ImportResult", "Problem"]
