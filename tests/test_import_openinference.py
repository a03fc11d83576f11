"""`workbench import --from openinference`: spans written by openinference-instrumentation-openai
around the official openai SDK talking to a local upstream; the oracle is what the upstream got."""

from __future__ import annotations

import base64
import importlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from import_fixtures.harness import (
    CALL,
    WEATHER,
    client,
    completion,
    instrumented,
    read_log,
    run_import,
    upstream,
    write_json,
)

importlib.import_module("openinference.instrumentation.openai")   # in the test extra: missing is a failure, not a skip


@pytest.fixture
def oi() -> Iterator[Any]:
    from openinference.instrumentation.openai import OpenAIInstrumentor
    with instrumented(OpenAIInstrumentor()) as t:
        yield t


def _png() -> str:
    from PIL import Image
    buf = io.BytesIO()
    Image.new("L", (16, 9), 128).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


def test_llm_spans_rebuild_the_requests_of_a_session(oi: Any, tmp_path: Path) -> None:
    from openinference.instrumentation import using_session
    image = f"data:image/png;base64,{_png()}"
    turn1 = [{"role": "system", "content": "You are a travel assistant."},
             {"role": "user", "content": [{"type": "text", "text": "Where was this taken? <|endoftext|>"},
                                          {"type": "image_url", "image_url": {"url": image}}]}]
    turn2 = turn1 + [{"role": "assistant", "content": None, "tool_calls": [CALL]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "rainy"}]
    usage = {"prompt_tokens": 1200, "completion_tokens": 7, "total_tokens": 1207,
             "prompt_tokens_details": {"cached_tokens": 1024}}
    replies = [completion(None, tool_calls=[CALL], finish="tool_calls"), completion("Paris, rainy.", usage=usage)]
    with upstream(*replies) as up:
        sdk = client(up)
        with using_session("trip-7"):
            sdk.chat.completions.create(model="gpt-4o", messages=turn1, tools=WEATHER, tool_choice="auto")
            sdk.chat.completions.create(model="gpt-4o", messages=turn2, tools=WEATHER, max_tokens=50)
    export = write_json(tmp_path / "oi.json", oi.traces_json())
    code, out, err = run_import(str(export), "--from", "openinference", "-o", str(tmp_path / "o.jsonl"))
    assert code == 0, err
    lines = read_log(tmp_path / "o.jsonl")
    assert len(lines) == 2
    for line, sent in zip(lines, up.received):
        # invocation parameters + messages + tools: the whole body the SDK sent
        assert line["request"] == sent
        assert line["conversation_id"] == "trip-7"
        assert line["provider"] == "openai" and line["client"] == "support-bot"
    assert lines[1]["response"]["usage"] == usage
    assert lines[0]["response"]["choices"][0]["message"]["tool_calls"] == [CALL]
    assert lines[1]["response"]["choices"][0]["message"]["content"] == "Paris, rainy."


def test_image_detail_is_not_recorded_by_openinference(oi: Any, tmp_path: Path) -> None:
    """A documented loss: OpenInference keeps an image's URL, not its `detail`."""
    sent = [{"role": "user", "content": [{"type": "image_url",
                                          "image_url": {"url": "https://example.com/x.png", "detail": "low"}}]}]
    with upstream(completion("A dog.")) as up:
        client(up).chat.completions.create(model="gpt-4o", messages=sent)
    export = write_json(tmp_path / "oi.json", oi.traces_json())
    code, out, err = run_import(str(export), "--from", "openinference", "-o", str(tmp_path / "o.jsonl"))
    assert code == 0, err
    (line,) = read_log(tmp_path / "o.jsonl")
    assert up.received[0]["messages"][0]["content"][0]["image_url"]["detail"] == "low"
    assert line["request"]["messages"] == [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}]}]


def test_an_anthropic_llm_span_gives_an_anthropic_request(tmp_path: Path) -> None:
    """Hand-written (no OpenInference Anthropic instrumentor installs here): OpenInference records an
    Anthropic call's messages the Chat Completions way; they come back in Anthropic's shape."""
    from import_fixtures.harness import export, span
    p = "llm.input_messages"
    attrs = [("openinference.span.kind", "LLM"), ("llm.provider", "anthropic"), ("session.id", "a-1"),
             ("llm.invocation_parameters", '{"model": "claude-sonnet-4-5", "max_tokens": 256}'),
             (f"{p}.0.message.role", "system"), (f"{p}.0.message.content", "Be terse."),
             (f"{p}.1.message.role", "user"), (f"{p}.1.message.content", "Weather in Oslo?"),
             (f"{p}.2.message.role", "assistant"),
             (f"{p}.2.message.tool_calls.0.tool_call.id", "toolu_1"),
             (f"{p}.2.message.tool_calls.0.tool_call.function.name", "get_weather"),
             (f"{p}.2.message.tool_calls.0.tool_call.function.arguments", '{"city": "Oslo"}'),
             (f"{p}.3.message.role", "tool"), (f"{p}.3.message.tool_call_id", "toolu_1"),
             (f"{p}.3.message.content", "-3°C"),
             ("llm.output_messages.0.message.role", "assistant"), ("llm.output_messages.0.message.content", "Cold."),
             ("llm.token_count.prompt", 500), ("llm.token_count.completion", 2),
             ("llm.token_count.prompt_details.cache_read", 400)]
    path = write_json(tmp_path / "t.json", export(span(attrs)))
    code, out, err = run_import(str(path), "--from", "openinference", "-o", str(tmp_path / "o.jsonl"))
    assert code == 0, err
    (line,) = read_log(tmp_path / "o.jsonl")
    assert line["request"] == {
        "model": "claude-sonnet-4-5", "max_tokens": 256, "system": "Be terse.",
        "messages": [{"role": "user", "content": "Weather in Oslo?"},
                     {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                        "input": {"city": "Oslo"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                   "content": "-3°C"}]}]}
    assert line["response"]["content"] == [{"type": "text", "text": "Cold."}]
    assert line["response"]["usage"] == {"input_tokens": 100, "output_tokens": 2, "cache_read_input_tokens": 400}
    assert line["conversation_id"] == "a-1" and line["provider"] == "anthropic"
