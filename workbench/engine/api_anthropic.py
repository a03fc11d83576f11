"""`POST /v1/messages`: the reply in Anthropic's Messages shape.

Content blocks in order: `thinking` (the model's reasoning; no signature: this server signs nothing),
`text`, one `tool_use` per tool call. Streamed as Anthropic streams them: message_start (with the
prompt's usage), per block content_block_start, its deltas (thinking_delta, text_delta, one
input_json_delta with a call's whole input), content_block_stop; then message_delta (stop_reason,
stop_sequence, usage) and message_stop.

Usage as Anthropic counts it: `cache_read_input_tokens` are the prompt tokens the engine's radix KV
cache served and `input_tokens` the rest (the three input fields add up to the prompt);
`cache_creation_input_tokens` is 0, since nothing here is written at a breakpoint the client set.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ServeRequestError
from .chat_reply import ReplyEnd, Usage
from .chat_requests import ChatRequest
from .sse import Frame, anthropic_error, call_id_maker, event, new_id
from .tool_calls import ParsedReply


class AnthropicReply:
    def __init__(self, model: str, req: ChatRequest, family: str):
        self.model, self.req = model, req
        self.id = new_id("msg_")
        self.make_id = call_id_maker(family, "toolu_")
        self.blocks: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self._body: dict[str, Any] = {}

    def _message(self, usage: Usage, stop_reason: str | None = None, stop_sequence: str | None = None
                 ) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": [dict(b) for b in self.blocks], "stop_reason": stop_reason, "stop_sequence": stop_sequence,
                "usage": _usage(usage)}

    def start(self, usage: Usage) -> list[Frame]:
        return [event("message_start", {"type": "message_start", "message": self._message(usage)})]

    def delta(self, reasoning: str, content: str) -> list[Frame]:
        frames = []
        for kind, text in (("thinking", reasoning), ("text", content)):
            if not text:
                continue
            if self.open is None or self.open["type"] != kind:
                block: dict[str, Any] = {"type": kind, kind: ""}
                if kind == "thinking":
                    block["signature"] = ""          # nothing here is signed
                frames += self._close() + self._start(block)
            assert self.open is not None
            self.open[kind] += text
            frames.append(event("content_block_delta", {"type": "content_block_delta", "index": len(self.blocks),
                                                        "delta": {"type": f"{kind}_delta", kind: text}}))
        return frames

    def _start(self, block: dict[str, Any]) -> list[Frame]:
        self.open = block
        start = dict(block)
        if block["type"] == "tool_use":
            start["input"] = {}                    # the input follows as input_json_delta
        return [event("content_block_start", {"type": "content_block_start", "index": len(self.blocks),
                                              "content_block": start})]

    def _close(self) -> list[Frame]:
        if self.open is None:
            return []
        frame = event("content_block_stop", {"type": "content_block_stop", "index": len(self.blocks)})
        self.blocks.append(self.open)
        self.open = None
        return [frame]

    def finish(self, reply: ParsedReply, end: ReplyEnd, usage: Usage) -> list[Frame]:
        frames = self._close()
        for call in reply.tool_calls:
            frames += self._start({"type": "tool_use", "id": self.make_id(call.id), "name": call.name})
            frames.append(event("content_block_delta", {"type": "content_block_delta", "index": len(self.blocks),
                                                        "delta": {"type": "input_json_delta",
                                                                  "partial_json": call.arguments}}))
            assert self.open is not None
            self.open["input"] = json.loads(call.arguments)
            frames += self._close()
        if reply.tool_calls:
            reason = "tool_use"
        elif end.reason == "length":
            reason = "max_tokens"
        else:
            reason = "stop_sequence" if end.stop_sequence is not None else "end_turn"
        self._body = self._message(usage, reason, end.stop_sequence)
        if self.req.return_token_ids:
            self._body["prompt_token_ids"] = [int(i) for i in usage.prompt_ids]
            self._body["token_ids"] = [int(i) for i in usage.reply_ids]
        frames.append(event("message_delta", {"type": "message_delta",
                                              "delta": {"stop_reason": reason, "stop_sequence": end.stop_sequence},
                                              "usage": _usage(usage)}))
        frames.append(event("message_stop", {"type": "message_stop"}))
        return frames

    def body(self) -> dict[str, Any]:
        return self._body

    def error(self, exc: ServeRequestError) -> list[Frame]:
        return [event("error", anthropic_error(exc))]


def _usage(u: Usage) -> dict[str, Any]:
    return {"input_tokens": u.prompt_tokens - u.cached_tokens, "output_tokens": u.completion_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": u.cached_tokens}
