"""The session edits behind the one-click fixes (fixes.py): pure functions of a session's JSON.

A session is the JSON object `sessions.py` loads: a conversation (one `messages` list, whose turns
are its prefixes) or a log (`requests`, one request per model call). Every function here returns
new objects and never changes its input, so the session before a fix stays as it was (undo is
keeping it). Every request format is handled: OpenAI-style `system` messages, Anthropic's
top-level `system` (a string or a list of text blocks), and the Responses API's `instructions`
with its `input` items (a string `input` is one user message); content is a string or a list of
blocks.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from ..sessions import turn_ends
from .prefix import _VOLATILE

Request = dict[str, Any]
# Sentence ends within a line: a line that holds a date and other instructions moves only the
# sentence with the date ("Today is 2026-02-03. You help clients..." keeps the second sentence).
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# Values volatile on sight, without seeing them change: ISO dates and timestamps, UUIDs, long hex
# ids, epoch seconds. A clock time or a written-out date alone ("orders after Thursday 12:00") is
# often a fixed rule, so it moves only where the session shows it changing between requests.
_STRONG = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\b[0-9a-fA-F]{16,}\b"
    r"|\b1[5-9]\d{8}(?:\d{3})?\b")
Judge = Callable[[str], bool]


def requests_of(session: Request) -> list[Request]:
    """The request objects a fix edits: each request of a log, or the conversation itself."""
    if "requests" in session:
        return list(session["requests"])
    return [session]


def with_requests(session: Request, reqs: list[Request]) -> Request:
    """The session with its request objects replaced (the other top-level fields kept)."""
    if "requests" in session:
        return {**session, "requests": reqs}
    return reqs[0]


def sort_keys(value: Any) -> Any:
    """A JSON value with every object's keys sorted, recursively (lists keep their order: the order
    of `required` or of enum values is data)."""
    if isinstance(value, dict):
        return {k: sort_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sort_keys(v) for v in value]
    return value


# --- system prompts -----------------------------------------------------------------------------
def strong(sentence: str) -> bool:
    return _STRONG.search(sentence) is not None


def volatile_judge(session: Request) -> Judge:
    """Which sentences of a system prompt are volatile in this session: in a log whose system
    prompts differ, a sentence with a date, time or id that is not the same in every request (the
    patterns the prefix analysis detects); otherwise, one with a value volatile on sight."""
    texts = [" \n".join(system_texts(r)) for r in requests_of(session)]
    if len(set(texts)) < 2:
        return strong
    every = set.intersection(*({p.strip() for line in t.split("\n") for p in _SENTENCE.split(line)} for t in texts))
    return lambda sentence: _VOLATILE.search(sentence) is not None and sentence.strip() not in every


def split_volatile(text: str, judge: Judge = strong) -> tuple[str, list[str]]:
    """The text without its volatile sentences (as `judge` tells them), and those sentences in
    order. Lines left empty go, and so does the blank line a removed block leaves behind."""
    kept: list[str] = []
    moved: list[str] = []
    removed_before = fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        parts = _SENTENCE.split(line)
        # Code blocks are examples (log lines, payloads): their timestamps are content, kept as written.
        if fenced or line.lstrip().startswith("```") or not any(judge(p) for p in parts):
            if not (line.strip() == "" and removed_before and (not kept or kept[-1].strip() == "")):
                kept.append(line)
            removed_before = False
            continue
        moved += [p.strip() for p in parts if judge(p)]
        rest = " ".join(p for p in parts if not judge(p))
        if rest.strip():
            kept.append(rest)
            removed_before = False
        else:
            removed_before = True
    return "\n".join(kept).strip("\n") if moved else text, moved


def list_key(req: Request) -> str:
    """Where a request's messages are: `messages`, or a Responses request's `input`."""
    return "input" if "messages" not in req and ("input" in req or "instructions" in req) else "messages"


def map_system(req: Request, fn: Callable[[str], str]) -> Request:
    """The request with `fn` applied to the text of its system prompt(s): OpenAI-style system
    messages (and Responses `instructions` and system items), or Anthropic's top-level `system`."""
    out = dict(req)
    if "system" in req:
        out["system"] = _map_content(req["system"], fn)
    if isinstance(req.get("instructions"), str):
        out["instructions"] = fn(req["instructions"])
    key = list_key(req)
    msgs = req.get(key)
    if isinstance(msgs, list):
        out[key] = [{**m, "content": _map_content(m.get("content"), fn)}
                    if isinstance(m, dict) and m.get("role") in ("system", "developer") else m for m in msgs]
    return out


def system_texts(req: Request) -> list[str]:
    """The texts of a request's system prompt(s)."""
    out = _texts(req.get("system")) + _texts(req.get("instructions"))
    msgs = req.get(list_key(req))
    for m in msgs if isinstance(msgs, list) else []:
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            out += _texts(m.get("content"))
    return out


def _messages(req: Request) -> tuple[str, list[Any]]:
    """(where the messages are, a copy of them): a Responses string `input` is one user message."""
    key = list_key(req)
    msgs = req.get(key)
    if key == "input" and isinstance(msgs, str):
        return key, [{"role": "user", "content": msgs}]
    return key, list(msgs) if isinstance(msgs, list) else []


def _map_content(content: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(content, str):
        return fn(content)
    if isinstance(content, list):
        # A block the client marked for caching (cache_control) is stable by its own choice: kept as sent.
        return [{**b, "text": fn(b["text"])} if isinstance(b, dict) and isinstance(b.get("text"), str)
                and not b.get("cache_control") else b for b in content]
    return content


def append_text(content: Any, note: str) -> Any:
    """Content with `note` appended as its last paragraph (a text block for block content, of the
    type its other text blocks have: `input_text` in a Responses request)."""
    if isinstance(content, list):
        kind = next((b["type"] for b in content if isinstance(b, dict) and b.get("type") in ("text", "input_text")),
                    "text")
        return [*content, {"type": kind, "text": note}]
    return f"{content}\n\n{note}" if isinstance(content, str) and content else note


def last_user(msgs: list[Any], end: int) -> int | None:
    """The index of the last user message among msgs[:end]."""
    return next((i for i in range(min(end, len(msgs)) - 1, -1, -1)
                 if isinstance(msgs[i], dict) and msgs[i].get("role") == "user"), None)


def move_volatile(session: Request) -> tuple[Request, list[str]]:
    """Volatile sentences of the system prompt moved to the last user message of each request.
    A log keeps what an earlier request moved into a message that later requests repeat (the log
    stays append-only: the values stay where they were when that request was sent). Returns the
    new session and the sentences moved, per request."""
    judge = volatile_judge(session)
    if "requests" not in session:
        return _move_in_conversation(session, judge)
    reqs, moved_all = [], []
    carried: dict[int, tuple[Any, Any]] = {}     # message index -> (its original, its moved version)
    for req in requests_of(session):
        moved: list[str] = []
        new = map_system(req, partial(_take, into=moved, judge=judge))
        key, msgs = _messages(new)
        for i, (orig, edited) in carried.items():
            if i < len(msgs) and msgs[i] == orig:
                msgs[i] = edited
        k = last_user(msgs, len(msgs))
        if moved and k is not None:
            original = msgs[k]
            msgs[k] = {**original, "content": append_text(original.get("content"), "\n".join(moved))}
            carried[k] = (original, msgs[k])
        reqs.append({**new, key: msgs} if key in new else new)
        moved_all += moved
    return with_requests(session, reqs), moved_all


def _move_in_conversation(conv: Request, judge: Judge) -> tuple[Request, list[str]]:
    moved: list[str] = []
    new = map_system(conv, partial(_take, into=moved, judge=judge))
    key, msgs = _messages(new)
    if moved:
        note = "\n".join(moved)
        for k in {last_user(msgs, end) for end in turn_ends(msgs, key)} - {None}:
            assert k is not None
            msgs[k] = {**msgs[k], "content": append_text(msgs[k].get("content"), note)}
    return ({**new, key: msgs} if key in new else new), moved


def _take(text: str, into: list[str], judge: Judge) -> str:
    kept, moved = split_volatile(text, judge)
    into += moved
    return kept


def split_system(req: Request, judge: Judge = strong) -> tuple[Request, int]:
    """The first system prompt split in two: its stable part, then its volatile sentences (a
    second system message, or a second Anthropic system block). Returns the request and how many
    sentences moved."""
    if "system" in req and req["system"]:
        text = req["system"] if isinstance(req["system"], str) else None
        if text is None:
            return req, 0          # a list of blocks: already split where the client chose
        kept, moved = split_volatile(text, judge)
        if not moved or not kept.strip():
            return req, 0
        return {**req, "system": [{"type": "text", "text": kept}, {"type": "text", "text": "\n".join(moved)}]}, \
            len(moved)
    key, msgs = _messages(req)
    if isinstance(req.get("instructions"), str):
        # The Responses instructions are the first system message: the volatile part follows it as
        # a system item first in the input (the same second system message as in Chat Completions).
        kept, moved = split_volatile(req["instructions"], judge)
        if not moved or not kept.strip():
            return req, 0
        return {**req, "instructions": kept, key: [{"role": "system", "content": "\n".join(moved)}, *msgs]}, \
            len(moved)
    i = next((i for i, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "system"), None)
    if i is None or not isinstance(msgs[i].get("content"), str):
        return req, 0
    kept, moved = split_volatile(msgs[i]["content"], judge)
    if not moved or not kept.strip():
        return req, 0
    second = {"role": "system", "content": "\n".join(moved)}
    return {**req, key: [*msgs[:i], {**msgs[i], "content": kept}, second, *msgs[i + 1:]]}, len(moved)


def merge_system(req: Request) -> tuple[Request, int]:
    """The leading run of system messages (or Anthropic system blocks) merged into one, their
    texts joined by a blank line. Only the leading run: a system message later in the
    conversation was said at that point, and moving it forward would change the prefix of every
    turn before it. Returns the request and how many prompts were merged (0: nothing to merge)."""
    sys = req.get("system")
    if isinstance(sys, list) and len(sys) > 1:
        if any(not isinstance(b, dict) or not isinstance(b.get("text"), str) or b.get("cache_control")
               for b in sys):
            return req, 0          # a block with a cache breakpoint (or not text) is kept as the client set it
        return {**req, "system": "\n\n".join(b["text"] for b in sys)}, len(sys)
    key, msgs = _messages(req)
    n = 0
    while n < len(msgs) and isinstance(msgs[n], dict) and msgs[n].get("role") == "system" \
            and isinstance(msgs[n].get("content"), str) and not msgs[n].get("template"):
        n += 1
    if isinstance(req.get("instructions"), str):
        # Responses: the instructions, then the system items leading the input, merged into the instructions.
        if n < 1:
            return req, 0
        return {**req, "instructions": "\n\n".join([req["instructions"], *(m["content"] for m in msgs[:n])]),
                key: msgs[n:]}, n + 1
    if n < 2:
        return req, 0
    merged = {**msgs[0], "content": "\n\n".join(m["content"] for m in msgs[:n])}
    return {**req, key: [merged, *msgs[n:]]}, n


def has_reasoning(session: Request) -> bool:
    """Whether any assistant message carries reasoning (a field, a thinking block, a <think> prefix)."""
    for req in requests_of(session):
        msgs = req.get(list_key(req))
        for m in msgs if isinstance(msgs, list) else []:
            if isinstance(m, dict) and m.get("type") == "reasoning" and (m.get("summary") or m.get("content")):
                return True          # a Responses reasoning item
            if not isinstance(m, dict) or m.get("role") != "assistant":
                continue
            if any(m.get(k) for k in ("reasoning_content", "reasoning", "thinking")):
                return True
            c = m.get("content")
            if isinstance(c, str) and "</think>" in c:
                return True
            if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "thinking" for b in c):
                return True
    return False


def uses_builtin_clock(session: Request) -> list[str]:
    """The clock built-ins (`today`, `now`) that the session's prompt templates read."""
    found: set[str] = set()
    for req in requests_of(session):
        for m in [*(req.get("messages") or []), {"content": req.get("system"), "template": req.get("system_template")}]:
            if isinstance(m, dict) and m.get("template"):
                text = " ".join(_texts(m.get("content")))
                found.update(re.findall(r"\b(today|now)\b", " ".join(re.findall(r"\{[{%].*?[%}]\}", text, re.S))))
    return sorted(found)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return []


def pin_variables(session: Request, values: dict[str, str]) -> Request:
    """Every request with `values` as request variables (a request's own value of the same name wins)."""
    reqs = []
    for req in requests_of(session):
        own: dict[str, Any] = req["variables"] if isinstance(req.get("variables"), dict) else {}
        reqs.append({**req, "variables": {**values, **own}})
    return with_requests(session, reqs)


def deep_copy(session: Request) -> Request:
    return copy.deepcopy(session)
