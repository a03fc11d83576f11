"""What the message editor sends, checked before it is applied (no UI library here): JSON typed into
a box (tool calls, content blocks, tools, variables, a Responses item), parsed strictly, and an
operation's row index. Errors say which box or operation, and where."""

from __future__ import annotations

import json
from typing import Any

from .. import strict_json
from ..errors import EditError


def parse_json_field(text: str, where: str) -> Any:
    """JSON typed into an editor box, or an EditError naming the box, line and column."""
    try:
        return strict_json.loads(text)   # NaN, 10,000 levels, a 5,000-digit integer: an error, not a crash
    except strict_json.JSONValueError as exc:
        raise EditError(f"{where}: {exc}", hint=exc.hint or "fix the JSON there") from None
    except json.JSONDecodeError as exc:
        raise EditError(f"{where}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                        hint="fix the JSON there") from None


def op_index(op: dict[str, Any], key: str, limit: int, what: str = "message") -> int:
    """The operation's `key` ("index", "to") as a row below `limit`, or an EditError naming it."""
    i = op.get(key)
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < max(limit, 0):
        raise EditError(f"{op.get('op')}: {key} {i!r} is not a {what} of this list (0..{limit - 1})")
    return i
