"""Which conversation a recorded call belongs to (docs/capture.md, "Conversations").

In this order: the client says so (an `X-Conversation-Id` header), the request names it
(`prompt_cache_key`, a documented `metadata` key, `user`), a Responses request continues a response
(`previous_response_id`), or the call extends an earlier call: its messages start with that call's
messages and the reply it got (prefix chaining). Otherwise it starts a conversation.

Prefix chaining compares canonical messages (apis.py) through running digests: one per prefix of
the new call's messages, each from the one before, so a call costs one pass over its messages.
Only an earlier call's messages *with its reply* are remembered: two conversations that open with
the same user message stay apart (the second does not hold the first one's reply)."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from . import apis

HEADER = "x-conversation-id"
METADATA_KEYS = ("conversation_id", "session_id", "thread_id", "user_id")
MAX_ID = 200                 # longer ids from a client are cut (a log line stays readable)


class Conversations:
    def __init__(self, remember: int = 100_000) -> None:
        self.remember = remember
        self._after: OrderedDict[bytes, str] = OrderedDict()    # digest of messages + reply -> conversation
        self._responses: OrderedDict[str, str] = OrderedDict()  # Responses API response id -> conversation

    def identify(self, api: str, request: dict[str, Any], headers: Mapping[str, str]) -> tuple[str, str]:
        """(conversation id, where it came from: header, prompt_cache_key, metadata.KEY, user,
        previous_response_id, prefix, new)."""
        named = headers.get(HEADER) or headers.get(HEADER.title())
        if named and named.strip():
            return named.strip()[:MAX_ID], "header"
        key = request.get("prompt_cache_key")
        if isinstance(key, str) and key:
            return key[:MAX_ID], "prompt_cache_key"
        meta = request.get("metadata")
        if isinstance(meta, dict):
            for k in METADATA_KEYS:
                v = meta.get(k)
                if isinstance(v, str) and v:
                    return v[:MAX_ID], f"metadata.{k}"
        user = request.get("user")
        if isinstance(user, str) and user:
            return user[:MAX_ID], "user"
        prev = request.get("previous_response_id")
        if isinstance(prev, str) and prev in self._responses:
            return self._responses[prev], "previous_response_id"
        digests = _digests(apis.request_messages(api, request))
        for d in reversed(digests[1:]):         # the longest earlier call this one extends
            cid = self._after.get(d)
            if cid is not None:
                self._after.move_to_end(d)
                return cid, "prefix"
        return "conv-" + uuid.uuid4().hex[:16], "new"

    def record(self, cid: str, api: str, request: dict[str, Any], response: Any) -> None:
        """Remember a finished call, for the calls that continue it."""
        msgs = apis.request_messages(api, request) + apis.reply_messages(api, response)
        if msgs:
            _put(self._after, _digests(msgs)[-1], cid, self.remember)
        if api == "responses" and isinstance(response, dict) and isinstance(response.get("id"), str):
            _put(self._responses, response["id"], cid, self.remember)


def _digests(msgs: list[apis.Canon]) -> list[bytes]:
    """The digest of each prefix, the empty one first."""
    out = [hashlib.sha256(b"").digest()]
    for m in msgs:
        text = json.dumps(m, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")
        out.append(hashlib.sha256(out[-1] + len(text).to_bytes(8, "big") + text).digest())
    return out


def _put(d: OrderedDict[Any, str], key: Any, value: str, cap: int) -> None:
    d[key] = value
    d.move_to_end(key)
    while len(d) > cap:
        d.popitem(last=False)
