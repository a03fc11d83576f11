"""Langfuse observations, made by the Langfuse SDK itself: run as a script (in its own process,
since importing `langfuse.openai` patches the openai SDK for the whole process).

The official openai SDK, wrapped by Langfuse's OpenAI integration, talks to a local upstream;
the Langfuse client exports its spans to an in-memory exporter instead of a Langfuse server. What
a Langfuse server would then serve from its public API is built with the SDK's own API type,
`ObservationV2` (camelCase, as the export holds it), from those spans' `langfuse.*` attributes.
Writes OUT/observations.json (a JSON array) and OUT/received.json (the oracle)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from import_fixtures.harness import completion, upstream  # noqa: E402

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}


def _usage_details(usage: dict[str, Any]) -> dict[str, int]:
    """Usage as a Langfuse server stores it: usage type -> count (one flat map)."""
    flat = {"input": usage["prompt_tokens"], "output": usage["completion_tokens"], "total": usage["total_tokens"]}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if cached:
        flat["input_cached_tokens"] = cached
    return flat


def main(out: Path) -> None:
    from langfuse import Langfuse, propagate_attributes
    from langfuse.api import ObservationV2
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    replies = [completion(None, tool_calls=[CALL], finish="tool_calls"),
               completion("Cold and clear.", usage={"prompt_tokens": 80, "completion_tokens": 4, "total_tokens": 84,
                                                   "prompt_tokens_details": {"cached_tokens": 64}})]
    exporter = InMemorySpanExporter()
    with upstream(*replies) as up:
        lf = Langfuse(public_key="pk-lf-test", secret_key="sk-lf-test", base_url=f"http://127.0.0.1:{up.port}",
                      span_exporter=exporter, tracer_provider=TracerProvider())
        from langfuse.openai import OpenAI
        sdk = OpenAI(base_url=up.base_url, api_key="test-key", max_retries=0)
        first = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo?"}]
        with propagate_attributes(session_id="lf-session-1"):
            with lf.start_as_current_observation(name="agent-run", as_type="span"):
                sdk.chat.completions.create(model="gpt-4o", messages=first, tools=WEATHER)
                second = first + [{"role": "assistant", "content": None, "tool_calls": [CALL]},
                                  {"role": "tool", "tool_call_id": "call_1", "content": "-3°C, clear"}]
                sdk.chat.completions.create(model="gpt-4o", messages=second, tools=WEATHER)
        lf.flush()
        received = up.received
    observations = []
    for sp in exporter.get_finished_spans():
        a = dict(sp.attributes or {})

        def j(key: str, a: dict[str, Any] = a) -> Any:
            v = a.get(key)
            return json.loads(v) if isinstance(v, str) else v
        usage = j("langfuse.observation.usage_details")
        obs = ObservationV2(
            id=format(sp.context.span_id, "016x"), trace_id=format(sp.context.trace_id, "032x"),
            start_time=datetime.fromtimestamp(sp.start_time / 1e9, UTC),
            end_time=datetime.fromtimestamp(sp.end_time / 1e9, UTC), project_id="project-1",
            parent_observation_id=format(sp.parent.span_id, "016x") if sp.parent else None,
            type=str(a.get("langfuse.observation.type", "span")).upper(), name=sp.name,
            session_id=a.get("session.id"), input=j("langfuse.observation.input"),
            output=j("langfuse.observation.output"), model=a.get("langfuse.observation.model.name"),
            model_parameters=j("langfuse.observation.model.parameters"),
            usage_details=_usage_details(usage) if isinstance(usage, dict) else None)
        observations.append(json.loads(obs.json()))
    (out / "observations.json").write_text(json.dumps(observations, indent=2), encoding="utf-8")
    (out / "received.json").write_text(json.dumps(received), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
