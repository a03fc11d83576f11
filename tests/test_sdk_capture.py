"""What the official SDKs send, rendered (issue 30).

The real `openai` and `anthropic` Python SDKs (pinned in the test extra) call a capture server on
127.0.0.1 (tests/capture_server.py), which records each body exactly as it went on the wire and
answers with a minimal valid reply. Each captured request is then assembled: Chat Completions,
Responses and Messages, with text, parts, tools, images and reasoning — accepted with the right
segments, or refused with one typed error naming the field.
"""

from __future__ import annotations

import base64
import io
import json

import anthropic
import numpy as np
import openai
import pytest
from capture_server import capture_server
from PIL import Image

from workbench import Assembler
from workbench.errors import RequestError
from workbench.intake import detect_format

WEATHER_FN = {"name": "get_weather", "description": "Current weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def png(w: int, h: int) -> bytes:
    b = io.BytesIO()
    Image.new("RGB", (w, h), (200, 30, 60)).save(b, "PNG")
    return b.getvalue()


PNG_B64 = base64.b64encode(png(448, 336)).decode()
DATA_URL = "data:image/png;base64," + PNG_B64
QWEN_TOKENS = (448 // 28) * (336 // 28)      # a size the 28-pixel grid divides: 16 × 12 merged patches


@pytest.fixture(scope="module")
def cap():
    with capture_server() as c:
        yield c


@pytest.fixture(scope="module")
def oai(cap):
    return openai.OpenAI(base_url=cap.base + "/v1", api_key="test", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def claude(cap):
    return anthropic.Anthropic(base_url=cap.base, api_key="test", max_retries=0, timeout=60)


VL = Assembler(template="qwen2.5-vl", cache=None)


def kinds(result) -> list[tuple[str, int | None]]:
    return [(s.kind, s.seq) for s in result.segments]


def test_chat_completions_with_parts_tools_and_an_image(oai, cap):
    oai.chat.completions.create(
        model="gpt-4o", max_completion_tokens=300, tools=[{"type": "function", "function": WEATHER_FN}],
        messages=[{"role": "developer", "content": "You are a travel assistant."},
                  {"role": "user", "content": [{"type": "text", "text": "Where was this taken? And the weather?"},
                                               {"type": "image_url", "image_url": {"url": DATA_URL,
                                                                                  "detail": "high"}}]},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"}])
    body = cap.last("/chat/completions")
    assert detect_format(body) == "openai"
    r = VL.assemble(body)
    assert kinds(r) == [("system", 0), ("tools", None), ("message", 1), ("image", 1), ("message", 1),
                        ("message", 2), ("message", 3), ("generation_prompt", None)]
    img = r.images()[0]
    assert (img["width"], img["height"], img["tokens"], img["detail"]) == (448, 336, QWEN_TOKENS, "high")
    assert r.budget.reserve == 300
    assert "<tool_call>" in r.text and "21 C, sunny" in r.text


def test_responses_with_instructions_reasoning_calls_and_an_image(oai, cap):
    oai.responses.create(
        model="gpt-5.4", instructions="You are a travel assistant.", max_output_tokens=500,
        reasoning={"effort": "low"}, tools=[{"type": "function", **WEATHER_FN, "strict": False}],
        text={"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}}},
        prompt_cache_key="travel-1", store=False, metadata={"app": "tests"},
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Where was this taken?"},
                                            {"type": "input_image", "image_url": DATA_URL, "detail": "low"}]},
               {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Check weather."}]},
               {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
                "arguments": '{"city": "Lisbon"}'},
               {"type": "function_call_output", "call_id": "call_1", "output": "21 C, sunny"}])
    body = cap.last("/responses")
    assert detect_format(body) == "responses"
    r = VL.assemble(body)
    assert kinds(r) == [("system", 0), ("tools", None), ("message", 1), ("image", 1), ("message", 1),
                        ("message", 2), ("message", 3), ("generation_prompt", None)]
    assert r.images()[0]["tokens"] == QWEN_TOKENS and r.images()[0]["detail"] == "low"
    params = r.conversation.params.to_json()
    assert params["max_tokens"] == 500 and params["reasoning_effort"] == "low"
    assert params["prompt_cache_key"] == "travel-1" and params["response_format"]["type"] == "json_schema"
    # The same request as Chat Completions gives the same ids (one image, one call, one result).
    chat = {"messages": [{"role": "system", "content": "You are a travel assistant."},
                         {"role": "user", "content": [{"type": "text", "text": "Where was this taken?"},
                                                      {"type": "image_url", "image_url": {"url": DATA_URL,
                                                                                         "detail": "low"}}]},
                         {"role": "assistant", "content": None, "reasoning_content": "Check weather.",
                          "tool_calls": [{"id": "call_1", "type": "function", "function": {
                              "name": "get_weather", "arguments": '{"city": "Lisbon"}'}}]},
                         {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"}],
            "tools": [{"type": "function", "function": {**WEATHER_FN, "strict": False}}]}
    assert np.array_equal(VL.assemble(chat).token_ids, r.token_ids)


def test_responses_string_input(oai, cap):
    oai.responses.create(model="gpt-5.4", input="Say hi.")
    r = Assembler(template="qwen2.5", cache=None).assemble(cap.last("/responses"))
    assert kinds(r) == [("system", None), ("message", 0), ("generation_prompt", None)]


def test_responses_built_in_tool_history_is_one_typed_error(oai, cap):
    oai.responses.create(model="gpt-5.4", input=[
        {"role": "user", "content": "News today?"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}}])
    with pytest.raises(RequestError, match=r"^input\[1\]: a 'web_search_call' item records web search"):
        VL.assemble(cap.last("/responses"))


def test_responses_previous_response_id_alone_is_one_typed_error(oai, cap):
    oai.responses.create(model="gpt-5.4", previous_response_id="resp_1", input="And tomorrow?")
    with pytest.raises(RequestError, match=r"^previous_response_id: .*OpenAI's servers"):
        VL.assemble(cap.last("/responses"))


def test_anthropic_messages_with_image_tools_and_thinking(claude, cap):
    claude.messages.create(
        model="claude-sonnet-4-5", max_tokens=400,
        system=[{"type": "text", "text": "You are a travel assistant.", "cache_control": {"type": "ephemeral"}}],
        tools=[{"name": "get_weather", "description": "Current weather in a city",
                "input_schema": WEATHER_FN["parameters"]}],
        messages=[{"role": "user", "content": [
                      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
                      {"type": "text", "text": "Where was this taken?"}]},
                  {"role": "assistant", "content": [
                      {"type": "thinking", "thinking": "Looks like Lisbon.", "signature": "sig"},
                      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Lisbon"}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                "content": "21 C, sunny"}]}])
    body = cap.last("/messages")
    assert detect_format(body) == "anthropic"
    r = VL.assemble(body)
    assert kinds(r) == [("system", 0), ("tools", None), ("message", 1), ("image", 1), ("message", 1),
                        ("message", 2), ("message", 3), ("generation_prompt", None)]
    assert r.images()[0]["tokens"] == QWEN_TOKENS
    assert r.conversation.messages[2].reasoning == "Looks like Lisbon."
    assert r.conversation.messages[0].cache_control


def test_anthropic_image_by_url_is_counted_at_the_assumed_size(claude, cap):
    claude.messages.create(model="claude-sonnet-4-5", max_tokens=50, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/photo.jpg"}},
        {"type": "text", "text": "What is it?"}]}])
    r = VL.assemble(cap.last("/messages"))
    assert any(d.code == "image_size_assumed" for d in r.diagnostics)
    # 1024 px rounds to 37 patches of 28 on each side (Qwen2-VL's smart_resize rounds to the nearest)
    assert r.images()[0]["size_assumed"] and r.images()[0]["tokens"] == 37 * 37


def test_the_capture_server_saw_only_loopback_json(cap):
    assert cap.calls and all(isinstance(b, dict) for _, b in cap.calls)
    json.dumps(cap.calls)   # plain JSON, what the workbench reads
