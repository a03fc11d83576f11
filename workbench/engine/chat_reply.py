"""A chat reply as it is generated: token ids -> text -> what a stream may send now, and at the end
the reply parsed into content, reasoning and tool calls (tool_calls.py).

Bytes are decoded incrementally, so a character split across two tokens is sent once whole, never
as a replacement character first. Stop strings end the reply where they start (the string itself is
not part of it), and the end of the text that might still become one is held back, as is whatever
the model family's parser has not settled (a tool call being written).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .tool_calls import ParsedReply, held_back, parse_reply, settled


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    cached_tokens: int                 # of the prompt, served by the engine's radix KV cache
    completion_tokens: int = 0
    prompt_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))
    reply_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint32))

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Delta:
    reasoning: str = ""
    content: str = ""


@dataclass(frozen=True)
class ReplyEnd:
    """How the reply ended: "stop" (an end-of-turn token or a stop string), "length" (the token
    limit); `stop_sequence` names the stop string that ended it."""

    reason: str
    stop_sequence: str | None = None


class ReplyText:
    def __init__(self, tokenizer: Any, family: str, *, stop: tuple[str, ...] = (), tools: bool = False):
        self.tokenizer, self.family, self.stop, self.tools = tokenizer, family, stop, tools
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""                       # every character decoded so far
        self.stop_hit: str | None = None     # the stop string that ended the reply
        self._sent = Delta()                 # what has been handed out so far

    def feed(self, token_id: int) -> Delta:
        """One more token of the reply (not an end-of-turn token): what may be sent now."""
        if self.stop_hit is None:
            self.text += self._decoder.decode(self.tokenizer.token_bytes(int(token_id)))
        visible = self._visible(final=False)
        reasoning, content = settled(visible, self.family, tools=self.tools)
        return self._advance(reasoning, content)

    def finish(self) -> tuple[Delta, ParsedReply]:
        """The reply is complete: the rest to send, and the reply parsed."""
        if self.stop_hit is None:
            self.text += self._decoder.decode(b"", final=True)
        reply = parse_reply(self._visible(final=True), self.family, tools=self.tools)
        return self._advance(reply.reasoning, reply.content), reply

    def _visible(self, *, final: bool) -> str:
        if not self.stop:
            return self.text
        first = None
        for s in self.stop:
            at = self.text.find(s)
            if at >= 0 and (first is None or at < first[0]):
                first = (at, s)
        if first is not None:
            self.stop_hit = self.stop_hit or first[1]
            return self.text[:first[0]]
        return self.text if final else self.text[:len(self.text) - held_back(self.text, self.stop)]

    def _advance(self, reasoning: str, content: str) -> Delta:
        """The new parts of (reasoning, content). Each only grows: a settled part is a prefix of every
        later one (tool_calls.settled guarantees it), so nothing sent is ever taken back."""
        sent = self._sent
        r = reasoning[len(sent.reasoning):] if reasoning.startswith(sent.reasoning) else ""
        c = content[len(sent.content):] if content.startswith(sent.content) else ""
        self._sent = Delta(sent.reasoning + r, sent.content + c)
        return Delta(r, c)
