"""`POST /v1/chat/completions`: the reply in OpenAI's Chat Completions shape.

Streamed as `data: {chat.completion.chunk}` frames — the role first, then content (and vLLM's
`reasoning_content`) deltas, the tool calls whole in one chunk, the finish reason, the usage when
`stream_options.include_usage` asks for it — and `data: [DONE]`.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ServeRequestError
from .chat_reply import ReplyEnd, Usage
from .chat_requests import ChatRequest
from .http_wire import error_body
from .sse import DONE, Frame, call_id_maker, data, new_id
from .tool_calls import ParsedReply


class ChatCompletionsReply:
    def __init__(self, model: str, req: ChatRequest, family: str):
        self.model, self.req = model, req
        self.id = new_id("chatcmpl-")
        self.created = int(time.time())
        self.make_id = call_id_maker(family, "call_")
        self._body: dict[str, Any] = {}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def start(self, usage: Usage) -> list[Frame]:
        first = self._chunk({"role": "assistant", "content": ""})
        if self.req.return_token_ids:
            first["prompt_token_ids"] = [int(i) for i in usage.prompt_ids]
        return [data(first)]

    def delta(self, reasoning: str, content: str) -> list[Frame]:
        frames = []
        if reasoning:
            frames.append(data(self._chunk({"reasoning_content": reasoning})))
        if content:
            frames.append(data(self._chunk({"content": content})))
        return frames

    def finish(self, reply: ParsedReply, end: ReplyEnd, usage: Usage) -> list[Frame]:
        calls = [{"id": self.make_id(c.id), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                 for c in reply.tool_calls]
        finish = "tool_calls" if calls else end.reason
        frames = []
        if calls:
            frames.append(data(self._chunk({"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]})))
        last = self._chunk({}, finish)
        if self.req.return_token_ids:
            last["choices"][0]["token_ids"] = [int(i) for i in usage.reply_ids]
        frames.append(data(last))
        if self.req.include_usage:
            frames.append(data({**self._chunk({}), "choices": [], "usage": _usage(usage)}))
        frames.append(DONE)
        content = reply.content if reply.content or not calls else None      # null beside calls, as OpenAI's
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = calls
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        self._body = {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                      "system_fingerprint": None, "choices": [choice], "usage": _usage(usage)}
        if self.req.return_token_ids:
            self._body["prompt_token_ids"] = [int(i) for i in usage.prompt_ids]
            choice["token_ids"] = [int(i) for i in usage.reply_ids]
        return frames

    def body(self) -> dict[str, Any]:
        return self._body

    def error(self, exc: ServeRequestError) -> list[Frame]:
        # The SDKs raise on a data frame that carries "error"; no [DONE] follows it.
        return [data(error_body(exc))]


def _usage(u: Usage) -> dict[str, Any]:
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens}}
