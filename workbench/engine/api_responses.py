"""`POST /v1/responses`: the reply in OpenAI's Responses shape.

Output items in order: reasoning (`reasoning_text` content, as open-weight servers return it), the
assistant message (`output_text`), one `function_call` per tool call. Streamed as OpenAI streams
them: response.created, response.in_progress; per item output_item.added, content_part.added, the
text deltas, their .done events, output_item.done; a function call's arguments in one delta; then
response.completed, or response.incomplete (status "incomplete", reason max_output_tokens) when the
token limit cut the reply. Every event carries its sequence_number.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ServeRequestError
from .chat_reply import ReplyEnd, Usage
from .chat_requests import ChatRequest
from .sse import Frame, call_id_maker, event, new_id
from .tool_calls import ParsedReply


class ResponsesReply:
    def __init__(self, model: str, req: ChatRequest, family: str):
        self.model, self.req = model, req
        self.id = new_id("resp_")
        self.created = int(time.time())
        self.make_id = call_id_maker(family, "call_")
        self.seq = 0
        self.items: list[dict[str, Any]] = []      # output items, finished ones whole
        self.open: dict[str, Any] | None = None    # the reasoning or message item being streamed
        self.text = ""
        self._body: dict[str, Any] = {}

    # --- events -------------------------------------------------------------------------------------
    def _event(self, kind: str, **fields: Any) -> Frame:
        frame = event(kind, {"type": kind, "sequence_number": self.seq, **fields})
        self.seq += 1
        return frame

    def _response(self, status: str, usage: Usage | None = None, *, incomplete: bool = False,
                  error: dict[str, Any] | None = None) -> dict[str, Any]:
        body = self.req.request
        out: dict[str, Any] = {
            "id": self.id, "object": "response", "created_at": self.created, "status": status, "model": self.model,
            "output": [dict(i) for i in self.items], "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "instructions": body.get("instructions"), "metadata": body.get("metadata") or {},
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [], "temperature": self.req.temperature, "top_p": self.req.top_p,
            "max_output_tokens": self.req.max_tokens, "previous_response_id": None, "store": False,
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "usage": None}
        if usage is not None:
            out["usage"] = {"input_tokens": usage.prompt_tokens,
                            "input_tokens_details": {"cached_tokens": usage.cached_tokens},
                            "output_tokens": usage.completion_tokens, "total_tokens": usage.total_tokens}
            if self.req.return_token_ids:
                out["prompt_token_ids"] = [int(i) for i in usage.prompt_ids]
                out["token_ids"] = [int(i) for i in usage.reply_ids]
        return out

    def start(self, usage: Usage) -> list[Frame]:
        return [self._event("response.created", response=self._response("in_progress")),
                self._event("response.in_progress", response=self._response("in_progress"))]

    def delta(self, reasoning: str, content: str) -> list[Frame]:
        frames = []
        for kind, text in (("reasoning", reasoning), ("message", content)):
            if not text:
                continue
            if self.open is None or self.open["type"] != kind:
                frames += self._close() + self._open(kind)
            self.text += text
            index, item_id = len(self.items), self.open["id"] if self.open else ""
            if kind == "reasoning":
                frames.append(self._event("response.reasoning_text.delta", item_id=item_id, output_index=index,
                                          content_index=0, delta=text))
            else:
                frames.append(self._event("response.output_text.delta", item_id=item_id, output_index=index,
                                          content_index=0, delta=text, logprobs=[]))
        return frames

    def _open(self, kind: str) -> list[Frame]:
        index = len(self.items)
        if kind == "reasoning":
            self.open = {"type": "reasoning", "id": new_id("rs_"), "summary": [], "content": []}
            part: dict[str, Any] = {"type": "reasoning_text", "text": ""}
        else:
            self.open = {"type": "message", "id": new_id("msg_"), "status": "in_progress", "role": "assistant",
                         "content": []}
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        self.text = ""
        return [self._event("response.output_item.added", output_index=index, item=dict(self.open)),
                self._event("response.content_part.added", item_id=self.open["id"], output_index=index,
                            content_index=0, part=part)]

    def _close(self) -> list[Frame]:
        item = self.open
        if item is None:
            return []
        index, frames = len(self.items), []
        if item["type"] == "reasoning":
            part: dict[str, Any] = {"type": "reasoning_text", "text": self.text}
            frames.append(self._event("response.reasoning_text.done", item_id=item["id"], output_index=index,
                                      content_index=0, text=self.text))
        else:
            part = {"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}
            frames.append(self._event("response.output_text.done", item_id=item["id"], output_index=index,
                                      content_index=0, text=self.text, logprobs=[]))
            item["status"] = "completed"
        item["content"] = [part]
        frames.append(self._event("response.content_part.done", item_id=item["id"], output_index=index,
                                  content_index=0, part=part))
        frames.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        self.items.append(item)
        self.open = None
        return frames

    def finish(self, reply: ParsedReply, end: ReplyEnd, usage: Usage) -> list[Frame]:
        frames = self._close()
        if not self.items and not reply.tool_calls:
            frames += self._open("message") + self._close()       # an empty reply is still a message
        for call in reply.tool_calls:
            index = len(self.items)
            item = {"type": "function_call", "id": new_id("fc_"), "call_id": self.make_id(call.id), "name": call.name,
                    "arguments": "", "status": "in_progress"}
            frames.append(self._event("response.output_item.added", output_index=index, item=dict(item)))
            frames.append(self._event("response.function_call_arguments.delta", item_id=item["id"],
                                      output_index=index, delta=call.arguments))
            frames.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                      output_index=index, name=call.name, arguments=call.arguments))
            item.update(arguments=call.arguments, status="completed")
            frames.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
            self.items.append(item)
        incomplete = end.reason == "length" and not reply.tool_calls
        self._body = self._response("incomplete" if incomplete else "completed", usage, incomplete=incomplete)
        frames.append(self._event("response.incomplete" if incomplete else "response.completed", response=self._body))
        return frames

    def body(self) -> dict[str, Any]:
        return self._body

    def error(self, exc: ServeRequestError) -> list[Frame]:
        failed = self._response("failed", error={"code": "server_error" if exc.status >= 500 else "invalid_prompt",
                                                 "message": str(exc)})
        return [self._event("error", code=str(exc.status), message=str(exc), param=exc.param),
                self._event("response.failed", response=failed)]
