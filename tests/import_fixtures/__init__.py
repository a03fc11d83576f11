"""Fixtures for the importer tests (`workbench import`): a local upstream that answers Chat
Completions requests and keeps what it received (the tests' oracle), the OpenTelemetry SDK's
in-memory exporters, and OTLP JSON written by the official protobuf encoding. The hand-written
files here are the hostile ones and LiteLLM's spend-log rows (LiteLLM itself does not install)."""
