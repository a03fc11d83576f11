"""Every imported request goes through the workbench's own intake before it is written, so that a
line `import` writes is a line `analyze` reads: a request the intake refuses (an image that is not
an image, a tool call without a name) is a bad record here, named where it lies in the export,
rather than a bad line later in a log that no longer says where it came from."""

from __future__ import annotations

from typing import Any

from ...errors import WorkbenchError
from ...intake import normalize
from .records import RecordError


def check_request(request: dict[str, Any]) -> None:
    try:
        normalize(request)
    except WorkbenchError as exc:
        raise RecordError(f"request: {exc.message}") from None
    except RecursionError:
        raise RecordError("request: nested too deep") from None


def find_string(value: Any, needle: str, path: str = "") -> str | None:
    """The path of the first string in `value` that holds `needle` (an explicit stack: any depth)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, str):
            if needle in v:
                return p or "the value"
        elif isinstance(v, dict):
            stack.extend((x, f"{p}.{k}" if p else str(k)) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            stack.extend((x, f"{p}[{i}]") for i, x in reversed(list(enumerate(v))))
    return None
