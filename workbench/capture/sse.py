"""Server-sent events as they pass through the recorder: decoded incrementally (the bytes go on to
the client unchanged, whatever happens here), and each API's events assembled into the response
object that API returns when not streaming, so that a streamed call is logged like any other.

The event stream format (WHATWG HTML, "server-sent events"): lines end with CRLF, LF or CR; an
event ends at a blank line; `data:` lines join with newlines; a leading colon is a comment."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    event: str          # "message" when the stream names none
    data: str


class EventDecoder:
    """Feed bytes as they arrive; take the events they complete."""

    def __init__(self) -> None:
        self._buf = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[Event]:
        self._buf += chunk
        while True:
            cut = _line_end(self._buf)
            if cut is None:
                return
            end, nxt = cut
            line = self._buf[:end].decode("utf-8", "replace")
            self._buf = self._buf[nxt:]
            if not line:
                if self._data:
                    yield Event(self._event or "message", "\n".join(self._data))
                self._event, self._data = "", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self._event = value
            elif name == "data":
                self._data.append(value)

    def close(self) -> Iterator[Event]:
        """The last event, where the stream ended without its blank line."""
        if self._buf:
            yield from self.feed(b"\n")
        if self._data:
            yield Event(self._event or "message", "\n".join(self._data))
            self._data = []


def _line_end(buf: bytes) -> tuple[int, int] | None:
    lf, cr = buf.find(b"\n"), buf.find(b"\r")
    if cr < 0 or (0 <= lf < cr):
        return None if lf < 0 else (lf, lf + 1)
    if cr == len(buf) - 1:
        return None                 # a CR last: wait, an LF may follow
    return cr, cr + 2 if buf[cr + 1:cr + 2] == b"\n" else cr + 1


class StreamAssembler:
    """The events of one API, assembled into that API's non-streaming response object."""

    def __init__(self) -> None:
        self.events = 0
        self.bad = 0                # data that is not JSON (counted; the client got it as sent)
        self.error: Any = None      # an error event's payload, if the stream carried one
        self.finished = False       # the API's last event came: the reply is whole

    def add(self, ev: Event) -> None:
        if ev.data == "[DONE]":
            self.finished = True
            return
        try:
            data = json.loads(ev.data)
        except ValueError:
            self.bad += 1
            return
        self.events += 1
        if isinstance(data, dict):
            if ev.event == "error" or data.get("type") == "error":
                self.error = data.get("error", data)
            self._add(ev.event, data)

    def _add(self, event: str, data: dict[str, Any]) -> None:
        raise NotImplementedError

    def response(self) -> dict[str, Any] | None:
        raise NotImplementedError


class ChatStream(StreamAssembler):
    """Chat Completions chunks: deltas per choice, tool-call arguments in pieces, usage last
    (when the client asked for it with stream_options.include_usage)."""

    def __init__(self) -> None:
        super().__init__()
        self.head: dict[str, Any] = {}
        self.choices: dict[int, dict[str, Any]] = {}
        self.usage: Any = None

    def _add(self, event: str, data: dict[str, Any]) -> None:
        for k in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if data.get(k) is not None:
                self.head[k] = data[k]
        if data.get("usage") is not None:
            self.usage = data["usage"]
        for ch in data.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            i = ch.get("index", 0)
            c = self.choices.setdefault(i if isinstance(i, int) else 0, {"message": {"role": "assistant"},
                                                                        "finish_reason": None, "calls": {}})
            delta = ch.get("delta") or {}
            msg = c["message"]
            for key in ("content", "refusal", "reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    msg[key] = msg.get(key, "") + delta[key]
            if isinstance(delta.get("role"), str):
                msg["role"] = delta["role"]
            for tc in delta.get("tool_calls") or []:
                if not isinstance(tc, dict):
                    continue
                blank = {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                call = c["calls"].setdefault(tc.get("index", len(c["calls"])), blank)
                if tc.get("id"):
                    call["id"] = tc["id"]
                fn = tc.get("function") or {}
                if isinstance(fn.get("name"), str):
                    call["function"]["name"] += fn["name"]
                if isinstance(fn.get("arguments"), str):
                    call["function"]["arguments"] += fn["arguments"]
            if ch.get("finish_reason") is not None:
                c["finish_reason"] = ch["finish_reason"]

    def response(self) -> dict[str, Any] | None:
        if not self.head and not self.choices:
            return None
        choices = []
        for i in sorted(self.choices):
            c = self.choices[i]
            msg = dict(c["message"])
            msg.setdefault("content", None)
            if c["calls"]:
                msg["tool_calls"] = [c["calls"][k] for k in sorted(c["calls"])]
            choices.append({"index": i, "message": msg, "finish_reason": c["finish_reason"]})
        out = {**self.head, "object": "chat.completion", "choices": choices}
        if self.usage is not None:
            out["usage"] = self.usage
        return out


class ResponsesStream(StreamAssembler):
    """Responses API events: the final `response.completed` (or .incomplete / .failed) carries the
    whole response; without it, the items finished so far."""

    def __init__(self) -> None:
        super().__init__()
        self.final: dict[str, Any] | None = None
        self.started: dict[str, Any] | None = None
        self.items: dict[int, Any] = {}

    def _add(self, event: str, data: dict[str, Any]) -> None:
        kind = data.get("type", event)
        if kind in ("response.completed", "response.incomplete", "response.failed") and isinstance(
                data.get("response"), dict):
            self.final = data["response"]
            self.finished = True
        elif kind in ("response.created", "response.in_progress") and isinstance(data.get("response"), dict):
            self.started = data["response"]
        elif kind == "response.output_item.done" and isinstance(data.get("output_index"), int):
            self.items[data["output_index"]] = data.get("item")

    def response(self) -> dict[str, Any] | None:
        if self.final is not None:
            return self.final
        if self.started is None and not self.items:
            return None
        return {**(self.started or {}), "status": "incomplete", "output": [self.items[k] for k in sorted(self.items)]}


class MessagesStream(StreamAssembler):
    """Anthropic Messages events: message_start (the message, its input usage), content blocks
    started, grown by deltas and stopped, message_delta (stop reason, the final usage)."""

    def __init__(self) -> None:
        super().__init__()
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, str] = {}

    def _add(self, event: str, data: dict[str, Any]) -> None:
        kind = data.get("type", event)
        if kind == "message_start" and isinstance(data.get("message"), dict):
            self.message = dict(data["message"])
        elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            self.blocks[_index(data)] = dict(data["content_block"])
        elif kind == "content_block_delta":
            i, d = _index(data), data.get("delta") or {}
            b = self.blocks.setdefault(i, {"type": "text", "text": ""})
            t = d.get("type")
            if t == "text_delta":
                b["text"] = b.get("text", "") + str(d.get("text", ""))
            elif t == "input_json_delta":
                self.partial_json[i] = self.partial_json.get(i, "") + str(d.get("partial_json", ""))
            elif t == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + str(d.get("thinking", ""))
            elif t == "signature_delta":
                b["signature"] = b.get("signature", "") + str(d.get("signature", ""))
            elif t == "citations_delta":
                b.setdefault("citations", []).append(d.get("citation"))
        elif kind == "content_block_stop":
            i = _index(data)
            if i in self.partial_json and i in self.blocks:
                raw = self.partial_json.pop(i)
                try:
                    self.blocks[i]["input"] = json.loads(raw) if raw else {}
                except ValueError:
                    self.blocks[i]["input"] = raw          # as sent, for the log to show
        elif kind == "message_stop":
            self.finished = True
        elif kind == "message_delta":
            msg = self.message if self.message is not None else {}
            self.message = msg
            for k, v in (data.get("delta") or {}).items():
                msg[k] = v
            if isinstance(data.get("usage"), dict):
                # The final usage: message_start's (input, cache) with message_delta's on top.
                msg["usage"] = {**(msg.get("usage") or {}), **data["usage"]}

    def response(self) -> dict[str, Any] | None:
        if self.message is None and not self.blocks:
            return None
        msg = dict(self.message or {"type": "message", "role": "assistant"})
        msg["content"] = [self.blocks[k] for k in sorted(self.blocks)]
        return msg


def _index(data: dict[str, Any]) -> int:
    i = data.get("index")
    return i if isinstance(i, int) else 0


ASSEMBLERS: dict[str, type[StreamAssembler]] = {"chat.completions": ChatStream, "responses": ResponsesStream,
                                                 "messages": MessagesStream}
