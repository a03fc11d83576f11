"""Size limits and text checks shared by the request parsers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Literal, overload

from ..conversation import Message
from ..errors import RequestError, WorkbenchError
from ..strict_json import MAX_DEPTH, MAX_INT_DIGITS, JSONValueError, find_problem, loads, surrogate_problem

# Where a request's values sit, counting the request object as level 1 (see IntakeLimits.max_depth).
MESSAGE_DEPTH = 3                 # request -> messages -> message
ARGUMENTS_DEPTH = MESSAGE_DEPTH + 4   # ... -> tool_calls -> call -> function -> arguments


@dataclass(frozen=True, slots=True)
class IntakeLimits:
    max_messages: int = 100_000
    max_message_bytes: int = 8 * 1024 * 1024   # one message's text
    max_request_bytes: int = 64 * 1024 * 1024  # all text of one request
    # Containers inside containers, the request object being level 1 (tool arguments sent as a JSON
    # string count from where they sit). Python's own parsers and printers recurse: past about a
    # thousand levels they raise RecursionError, and deep copies and comparisons do too.
    max_depth: int = MAX_DEPTH
    # Digits of any integer in the request; Python cannot even print one past 4,300.
    max_int_digits: int = MAX_INT_DIGITS
    # An image, audio clip or file sent inline (data URL, base64): refused over this many bytes
    # (OpenAI's own cap on an image input is 20 MB), measured before anything is decoded.
    max_media_bytes: int = 20 * 1024 * 1024
    # An image given by URL alone is never fetched (the workbench stays offline): it is counted at
    # this size, and a warning names the assumption.
    url_image_width: int = 1024
    url_image_height: int = 1024

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if type(v) is not int or v < 1:
                raise WorkbenchError(f"IntakeLimits.{f.name} must be a positive int, got {v!r}")
        if self.max_depth < ARGUMENTS_DEPTH + 1:
            raise WorkbenchError(f"IntakeLimits.max_depth must be at least {ARGUMENTS_DEPTH + 1}, got "
                                 f"{self.max_depth}", hint="a request with tool arguments is that deep")


@overload
def check_text(value: object, *, field: str, index: int | None, limits: IntakeLimits,
               allow_none: Literal[False] = False) -> str: ...
@overload
def check_text(value: object, *, field: str, index: int | None, limits: IntakeLimits,
               allow_none: bool) -> str | None: ...


def check_text(value: object, *, field: str, index: int | None, limits: IntakeLimits,
               allow_none: bool = False) -> str | None:
    """A text field must be a str, valid Unicode (no lone surrogates) and under the size cap."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        raise RequestError(f"expected a string, got {type(value).__name__}", field=field, index=index,
                           hint="send text as a JSON string")
    # ASCII needs no encoding to measure and cannot hold a surrogate.
    size = len(value) if value.isascii() else _utf8_size(value, field, index)
    if size > limits.max_message_bytes:
        raise RequestError(
            f"text is {size / 1e6:.1f} MB, over the {limits.max_message_bytes / 1e6:.1f} MB limit per message",
            field=field, index=index, hint="split the text, or raise IntakeLimits.max_message_bytes")
    return value


def _utf8_size(value: str, field: str, index: int | None) -> int:
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise RequestError(
            f"text is not valid Unicode (lone surrogate {value[exc.start]!r} at character {exc.start})",
            field=field, index=index, hint="send UTF-8 text; pair or remove the surrogate") from None


def check_json(value: Any, *, field: str | None, index: int | None, limits: IntakeLimits, depth: int) -> None:
    """Refuse what plain JSON cannot carry (see workbench.strict_json): too deep, a lone surrogate,
    NaN or Infinity, an integer past the limit, a non-string key, a non-JSON type. `depth`: the
    level `value` sits at. The error names the exact path below `field`."""
    problem = find_problem(value, max_depth=limits.max_depth, max_int_digits=limits.max_int_digits, depth=depth)
    if problem is not None:
        raise RequestError(problem.message, field=problem.at(field or "") or None, index=index, hint=problem.hint)


def checked_messages(req: dict[str, Any], limits: IntakeLimits) -> list[Any]:
    """The request's message list, checked as a list (not empty, not over the limit), after every
    other top-level field of the request (OpenAI and Anthropic requests alike)."""
    msgs = req.get("messages")
    if not isinstance(msgs, list):
        raise RequestError("'messages' must be a list of message objects", field="messages")
    if len(msgs) > limits.max_messages:
        raise RequestError(f"{len(msgs)} messages, over the limit of {limits.max_messages}", field="messages")
    if not msgs:
        raise RequestError("no messages: a request needs at least one", field="messages",
                           hint="add the user's message")
    check_request_fields(req, limits)
    return msgs


def check_request_fields(req: dict[str, Any], limits: IntakeLimits) -> None:
    """Every top-level field but the messages (parsed one by one, where the path names the message)."""
    for key, value in req.items():
        if type(key) is not str:
            raise RequestError(f"a request's keys must be strings, got {type(key).__name__} {key!r}",
                               hint="use string keys")
        if key != "messages":
            problem = None if key.isascii() else surrogate_problem(key)
            if problem:
                raise RequestError(f"a key's {problem}", field=ascii(key),
                                   hint="send UTF-8 text; pair or remove the surrogate")
            check_json(value, field=key, index=None, limits=limits, depth=2)


def parse_json_text(text: str, *, field: str, index: int | None, limits: IntakeLimits, depth: int) -> Any:
    """A field that holds JSON as a string (tool arguments): parsed with the same refusals."""
    try:
        return loads(text, max_depth=limits.max_depth, max_int_digits=limits.max_int_digits, depth=depth)
    except JSONValueError as exc:
        where = f"at character {exc.pos}: " if exc.located else f"at {exc.path}: " if exc.path else ""
        raise RequestError(f"{where}{exc.msg}", field=field, index=index, hint=exc.hint or None) from None
    except json.JSONDecodeError as exc:
        raise RequestError(f"not valid JSON ({exc.msg} at character {exc.pos})", field=field, index=index,
                           hint="send the arguments as a JSON object encoded as a string") from None


def check_total(messages: Iterable[Message], limits: IntakeLimits) -> None:
    total = sum(len(m.content or "") for m in messages)
    if total > limits.max_request_bytes:
        raise RequestError(f"request text is {total / 1e6:.1f} M characters, over the "
                           f"{limits.max_request_bytes / 1e6:.1f} M limit", field="messages",
                           hint="drop history, or raise IntakeLimits.max_request_bytes")
