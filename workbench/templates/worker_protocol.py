"""What the render worker's two sides agree on: the frames, the request, the error kinds.

Frames, over the child's stdin/stdout: an 8-byte big-endian length, then the body. The parent
(worker.py) sends a pickled RenderRequest (it is the trusted side); the child (worker_child.py)
answers in JSON, and after a successful render sends the text in a frame of its own (UTF-8), so
it never sends the parent anything that could run code when read.
"""

from __future__ import annotations

import struct
from datetime import datetime
from typing import IO, Any, TypedDict

from ..errors import TemplateError, TemplateLimitError, TemplateSecurityError, TemplateSyntaxError

HEADER = struct.Struct(">Q")

# The errors that cross the pipe by name (anything else arrives as a TemplateError).
ERROR_TYPES: dict[str, type[TemplateError]] = {
    cls.__name__: cls for cls in (TemplateError, TemplateLimitError, TemplateSecurityError, TemplateSyntaxError)}


class RenderRequest(TypedDict):
    """render()'s arguments, as the parent pickles them for the child."""

    source: str
    name: str
    messages: list[dict[str, Any]]   # chat messages: JSON-like data the template reads
    tools: list[dict[str, Any]] | None
    add_generation_prompt: bool
    kwargs: dict[str, Any]           # extra template variables: plain data of any shape
    track: bool
    track_generation: bool
    limits: dict[str, Any]           # RenderLimits' fields (isolate off: the child renders in-thread)
    now: datetime | None
    memory: int                      # the child's address-space cap, in bytes


def write_frame(f: IO[bytes], body: bytes) -> None:
    f.write(HEADER.pack(len(body)))
    f.write(body)
    f.flush()
