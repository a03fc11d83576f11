"""Intake for the next request of a session: parse only the messages that are new or changed.

A client sends the whole conversation every time; usually only the tail is new. Messages equal
to the previous request's (same position, equal JSON) keep their parsed Message objects, which
also makes comparing conversations later a matter of identity. OpenAI and internal formats only:
there one JSON message is one Message. (Anthropic splits tool_result blocks into messages.)
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..conversation import Conversation, Message
from ..diagnostics import Diagnostic
from ..difference import first_difference
from ..errors import RequestError
from .detect import detect_format, normalize
from .limits import IntakeLimits, check_total
from .openai import parse_openai
from .responses import ItemParser, parse_responses_resumable


@dataclass(frozen=True)
class IntakeState:
    """What the previous request parsed to."""

    raw: list[Any]                 # the request's "messages" list, as sent
    rest: dict[str, Any]           # the request without "messages"
    conversation: Conversation
    diagnostics: tuple[Diagnostic, ...]
    chars: int | None = None       # content characters in all messages (for the size cap); None: not counted
    reused: int = 0                # leading messages kept from the previous request (same objects)
    # A Responses request: for each message, where its items stop and how many must be unchanged for
    # it to stand (workbench/intake/responses.py, ItemParser). None: a messages request.
    stops: tuple[int, ...] | None = None
    needs: tuple[int, ...] | None = None
    parser: Any = None             # a Responses request: the ItemParser that read it (its call ids)


def normalize_next(request: Any, prev: IntakeState | None, limits: IntakeLimits
                   ) -> tuple[Conversation, list[Diagnostic], IntakeState | None]:
    """Like normalize(), reusing what `prev` parsed; also returns the state for the next request."""
    if isinstance(request, dict) and "messages" not in request and isinstance(request.get("input"), list) \
            and detect_format(request) == "responses" and not isinstance(request.get("instructions"), list):
        return _next_responses(request, prev, limits)
    if isinstance(request, Conversation) or not isinstance(request, dict) or \
            not isinstance(request.get("messages"), list) or detect_format(request) == "anthropic":
        conv, diags = normalize(request, limits)
        return conv, diags, None
    raw = request["messages"]
    rest = {k: v for k, v in request.items() if k != "messages"}
    if prev is None or not same_json(rest, prev.rest):
        conv, diags = normalize(request, limits)
        return conv, diags, IntakeState(raw, rest, conv, tuple(diags))
    k = first_difference(prev.raw, raw)
    if k == 0:
        conv, diags = normalize(request, limits)
        return conv, diags, IntakeState(raw, rest, conv, tuple(diags))
    # Parse the new tail's messages on their own (same checks), then number them after the reused
    # head. The rest of the request equals the previous one's, checked and parsed then: its tools,
    # parameters and variables are taken from there (parsing them again cost more than the messages).
    # An error in the tail is raised again by a full parse, so it names the right message index.
    tail_diags: list[Diagnostic] = []
    tail: tuple[Message, ...] = ()
    if k < len(raw):  # else messages were only removed from the end: nothing new to parse
        try:
            tail_conv, tail_diags = parse_openai({"messages": raw[k:]}, limits)
        except RequestError:
            conv, diags = normalize(request, limits)
            raise AssertionError("a tail that fails alone must fail in the whole request") from None
        tail = tail_conv.messages
    if len(raw) > limits.max_messages:
        conv, diags = normalize(request, limits)  # raises, naming the limit
    head = prev.conversation.messages[:k]
    if _repeats_a_call_id(head, tail):
        # Whether the tail's call may reuse the id depends on the head's results: the full parse decides.
        conv, diags = normalize(request, limits)
        return conv, diags, IntakeState(raw, rest, conv, tuple(diags))
    tail = tuple(m if m.sequence + k == m.sequence else replace(m, sequence=m.sequence + k) for m in tail)
    messages: tuple[Message, ...] = head + tail
    chars = _total(prev, k, tail)
    if chars > limits.max_request_bytes:
        check_total(messages, limits)  # raises, with the size
    diags = [d for d in prev.diagnostics if d.seq is None or d.seq < k]
    diags += [replace(d, seq=d.seq + k) if d.seq is not None else d for d in tail_diags
              if not (d.seq is None and d in diags)]
    conv = replace(prev.conversation, messages=messages)
    return conv, diags, IntakeState(raw, rest, conv, tuple(diags), chars, k)


def same_json(a: Any, b: Any) -> bool:
    """Equal JSON, key order included: `==` on dicts ignores the order, and tool schemas whose keys
    come in another order render differently (a template writes them as given), so the previous
    request's parsed tools must not stand in for them."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_json, a, b))
    return bool(a == b)


def _repeats_a_call_id(head: Sequence[Message], tail: Sequence[Message]) -> bool:
    """A tail call whose id an earlier call has (the tail alone cannot see whether that one was
    answered). Looks at the head only when the tail makes calls: typing a user message costs nothing."""
    new = {c.id for m in tail for c in m.tool_calls}
    return bool(new) and any(c.id in new for m in head if m.tool_calls for c in m.tool_calls)


def _total(prev: IntakeState, k: int, tail: tuple[Message, ...]) -> int:
    """Content characters of head + tail, from the previous total: O(change), not O(history)."""
    def size(ms: Sequence[Message]) -> int:
        return sum(len(m.content or "") for m in ms)
    old = prev.conversation.messages
    if prev.chars is None:
        return size(old[:k]) + size(tail)
    return prev.chars - size(old[k:]) + size(tail)


def _next_responses(request: dict[str, Any], prev: IntakeState | None, limits: IntakeLimits
                    ) -> tuple[Conversation, list[Diagnostic], IntakeState | None]:
    """A Responses request: the messages whose items are unchanged are kept, the items after them parsed."""
    raw = request["input"]
    rest = {k: v for k, v in request.items() if k != "input"}
    if prev is None or prev.needs is None or prev.stops is None or not same_json(rest, prev.rest):
        return _responses_whole(request, raw, rest, limits)
    k = first_difference(prev.raw, raw)
    j = bisect_right(prev.needs, k)          # messages that stand: their items (and what ended them) unchanged
    start = prev.stops[j - 1] if j else 0
    head = prev.conversation.messages[:j]
    tail_diags: list[Diagnostic] = []
    p = ItemParser(limits, tail_diags, head, prev.stops[:j], prev.needs[:j], calls=prev.parser.calls_before(j))
    try:
        p.feed(raw[start:], start)
        p.flush(len(raw))
    except RequestError:
        return _responses_whole(request, raw, rest, limits)   # the whole parse words the error the same way
    if not p.out:
        return _responses_whole(request, raw, rest, limits)
    messages = tuple(p.out)
    tail = messages[j:]
    chars = _total(prev, j, tail)
    if chars > limits.max_request_bytes:
        check_total(messages, limits)  # raises, with the size
    diags = [d for d in prev.diagnostics if d.seq is None or d.seq < j] + tail_diags
    conv = replace(prev.conversation, messages=messages)
    return conv, diags, IntakeState(raw, rest, conv, tuple(diags), chars, j, stops=tuple(p.stops),
                                    needs=tuple(p.needs), parser=p)


def _responses_whole(request: dict[str, Any], raw: list[Any], rest: dict[str, Any], limits: IntakeLimits
                     ) -> tuple[Conversation, list[Diagnostic], IntakeState]:
    conv, diags, p = parse_responses_resumable(request, limits)
    return conv, diags, IntakeState(raw, rest, conv, tuple(diags), stops=tuple(p.stops), needs=tuple(p.needs),
                                    parser=p)
