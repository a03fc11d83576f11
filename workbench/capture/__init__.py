"""Capture: real traffic into request logs (SPEC 7.1, docs/capture.md). `record` is a recording
reverse proxy in front of a provider or engine; the importers turn traces from tracing tools into
the same log lines. A consumer of the core, like analysis/: the core never imports it."""
