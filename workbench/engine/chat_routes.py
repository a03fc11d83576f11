"""The chat routes of `serve-engine`: a request in Chat Completions, Responses or Anthropic Messages
shape -> the workbench Assembler renders it (the same prompt, token for token, as `workbench render`
of that request with the same template and tokenizer) -> the engine generates the reply a turn at
a time (decode.py) -> the reply parsed as the template's model family writes tool calls
(tool_calls.py) -> the answer in the API's own shape (api_*.py), whole or streamed.

The server (server.py) runs `ChatService.prepare` and the job's steps on its worker threads; this
module knows nothing of sockets.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..assembly import Assembler
from ..errors import Cancelled, RequestError, ServeRequestError, WorkbenchError
from .api_anthropic import AnthropicReply
from .api_chat_completions import ChatCompletionsReply
from .api_responses import ResponsesReply
from .chat_reply import ReplyEnd, ReplyText, Usage
from .chat_requests import ANTHROPIC, CHAT, RESPONSES, ChatRequest, chat_request
from .decode import Decoding, Sampling, Turn, ids_of, vocab_limit
from .engine import Engine
from .server_limits import ServerLimits
from .sse import ApiReply, Frame
from .tool_calls import EXTRA_STOPS, tool_family

REPLIES: dict[str, Callable[[str, ChatRequest, str], ApiReply]] = {
    CHAT: ChatCompletionsReply, RESPONSES: ResponsesReply, ANTHROPIC: AnthropicReply}


class ChatService:
    def __init__(self, engine: Engine, assembler: Assembler, limits: ServerLimits, turn: Turn, *,
                 names: frozenset[str], prompt_cap: int):
        self.engine, self.asm, self.limits, self.turn = engine, assembler, limits, turn
        self.names, self.prompt_cap = names, prompt_cap
        self.tokenizer = assembler.tokenizer
        self.family = tool_family(assembler.template)
        self.stop_ids = frozenset(stop_ids(assembler, engine, self.family))
        # Random weights would write control tokens into the reply (a "<|im_start|>" the next request's
        # injection check then escapes): a synthetic model generates ordinary tokens and its stops.
        self.suppress = tuple(int(i) for i in self.tokenizer.special_ids) if engine.m.source == "synthetic" else ()
        self.vocab_limit = vocab_limit(engine, self.tokenizer)
        self._assembling = threading.Lock()     # one Assembler, used by every worker thread

    def prepare(self, api: str, body: dict[str, Any]) -> "ChatJob":
        """Check the request and render its prompt (raises ServeRequestError): a job ready to run."""
        req = chat_request(api, body, models=self.names)
        try:
            with self._assembling:
                result = self.asm.assemble(req.request)
        except RequestError as exc:
            raise intake_error(exc) from None
        except WorkbenchError as exc:           # a template that refuses the conversation, say
            raise ServeRequestError(exc.message, hint=exc.hint) from None
        ids, n = result.token_ids, result.total_tokens
        window = int(self.engine.m.window or 0)
        where = "input" if api == RESPONSES else "messages"
        if n == 0:
            raise ServeRequestError("the template rendered no tokens", param=where)
        if n > self.prompt_cap:
            raise ServeRequestError(f"the prompt has {n} tokens, over this server's limit of {self.prompt_cap}",
                                    param=where, hint="send a shorter conversation (the limit is "
                                                      "--max-prompt-tokens, at most the model's window)")
        room = window - n if window else self.limits.max_new_tokens
        if room < 1:
            raise ServeRequestError(f"the prompt's {n} tokens leave no room in the model's window of {window}",
                                    param=where)
        # As many tokens as asked, up to the server's --max-new-tokens and the model's window.
        max_new = min(req.max_tokens or self.limits.max_new_tokens, self.limits.max_new_tokens, room)
        sampling = Sampling(max_new, self.stop_ids, self.suppress, req.temperature, req.top_p, req.top_k,
                            req.seed if req.seed is not None else int.from_bytes(os.urandom(4), "little"))
        decoding = Decoding(self.engine, ids, result.content_ids(), sampling, vocab_limit=self.vocab_limit,
                            turn=self.turn, engine_wait_s=self.limits.engine_wait_s, chunk=self.limits.prefill_chunk)
        reply = ReplyText(self.tokenizer, self.family, stop=req.stop, tools=req.tools)
        capped = req.max_tokens is not None and req.max_tokens > max_new
        return ChatJob(req, decoding, reply, REPLIES[api](self.engine.m.name, req, self.family), capped=capped)


class ChatJob:
    """One request's generation: `prefill()`, then `step()` until `done`; each returns the frames a
    stream sends. `run()` does it all for a non-streaming answer."""

    def __init__(self, req: ChatRequest, decoding: Decoding, reply: ReplyText, api: ApiReply, *, capped: bool):
        self.req, self.decoding, self.reply, self.api = req, decoding, reply, api
        self.capped = capped                 # max tokens lowered to the server's cap (said in a header)
        self.cancelled = False               # set by the server when the client is gone
        self.usage: Usage | None = None

    @property
    def done(self) -> bool:
        return self.decoding.done

    @property
    def max_new_tokens(self) -> int:
        return self.decoding.s.max_new_tokens

    def check(self) -> None:
        if self.cancelled:
            raise Cancelled("the client closed the connection")

    def prefill(self, first_wait: float) -> list[Frame]:
        cached = self.decoding.prefill(first_wait, self.check)
        ids = self.decoding.ids
        self.usage = Usage(len(ids), cached, 0, ids)
        return self.api.start(self.usage)

    def step(self) -> list[Frame]:
        self.check()
        d = self.decoding
        token = d.step()
        frames: list[Frame] = []
        if token not in d.s.stop_ids:
            delta = self.reply.feed(token)
            if self.reply.stop_hit is not None:
                d.stop_early()
            frames += self.api.delta(delta.reasoning, delta.content)
        if d.done:
            frames += self._finish()
        return frames

    def _finish(self) -> list[Frame]:
        delta, parsed = self.reply.finish()
        frames = self.api.delta(delta.reasoning, delta.content)
        d, usage = self.decoding, self.usage
        assert usage is not None and d.finish is not None
        self.usage = Usage(usage.prompt_tokens, usage.cached_tokens, len(d.new_ids), usage.prompt_ids,
                           np.asarray(d.new_ids, dtype=np.uint32))
        return frames + self.api.finish(parsed, ReplyEnd(d.finish, self.reply.stop_hit), self.usage)

    def run(self, first_wait: float) -> dict[str, Any]:
        self.prefill(first_wait)
        while not self.done:
            self.step()
        return self.api.body()


def stop_ids(asm: Assembler, engine: Engine, family: str) -> set[int]:
    """End-of-turn ids: the template's end-of-turn token, the tokenizer's end token, those the model
    family also ends a turn with (a harmony tool call's <|call|>), and a real model's own (its
    generation config), as far as the vocabulary has them."""
    tok = asm.tokenizer
    out = ids_of(tok, (asm.template.eos_token, tok.eos_token, *EXTRA_STOPS.get(family, ())))
    if engine.m.source != "synthetic":
        cfg = getattr(engine.m.model, "generation_config", None)
        eos = getattr(cfg, "eos_token_id", None)
        out.update(int(i) for i in (eos if isinstance(eos, list) else [eos]) if isinstance(i, int))
    return out


def intake_error(exc: RequestError) -> ServeRequestError:
    """The intake's refusal as a 400 naming the field (`messages[1].content`, `input[3].call_id`), with its hint."""
    where = "".join(([f"{exc.container}[{exc.index}]"] if exc.index is not None else []) +
                    ([exc.field if exc.index is None or exc.field.startswith("[") else f".{exc.field}"]
                     if exc.field is not None else []))
    text = exc.message
    if where and text.startswith(where + ": "):
        text = text[len(where) + 2:]
    return ServeRequestError(text, param=where or None, hint=exc.hint)
