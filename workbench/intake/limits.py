"""Size limits and text checks shared by the request parsers."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RequestError


@dataclass(frozen=True, slots=True)
class IntakeLimits:
    max_messages: int = 100_000
    max_message_bytes: int = 8 * 1024 * 1024   # one message's text
    max_request_bytes: int = 64 * 1024 * 1024  # all text of one request


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


def check_total(messages, limits: IntakeLimits) -> None:
    total = sum(len(m.content or "") for m in messages)
    if total > limits.max_request_bytes:
        raise RequestError(f"request text is {total / 1e6:.1f} M characters, over the "
                           f"{limits.max_request_bytes / 1e6:.1f} M limit", field="messages",
                           hint="drop history, or raise IntakeLimits.max_request_bytes")
