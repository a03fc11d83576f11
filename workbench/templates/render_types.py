"""What a render is asked to respect (RenderLimits) and what it gives back (Rendered).

Their own module because three others share them and none may import another for them: the
renderer (render.py), the worker's parent side (worker.py, which render() hands isolated renders
to) and the worker's child side (worker_child.py, which calls render()).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .bounds import DEFAULT_MAX_CHARS


@dataclass(frozen=True, slots=True)
class RenderLimits:
    # Largest output, and largest single value a template may build (see bounds.DEFAULT_MAX_CHARS).
    max_output_chars: int = DEFAULT_MAX_CHARS
    timeout_s: float = 10.0
    # Past render.FREE_OUTPUT_CHARS the output may be at most this many times the characters of the
    # input (messages, tools, template variables). None: no such limit.
    max_expansion: float | None = 8.0
    # Render in a separate process, killed at the deadline, with its address space capped at
    # max_worker_bytes: for templates nobody reviewed (files, folders, the app's custom box).
    isolate: bool = False
    max_worker_bytes: int = 2 * 1024 ** 3


@dataclass(slots=True)
class Rendered:
    text: str
    # index in the message list -> character offset where the template started writing it
    starts: dict[int, int] = field(default_factory=dict)
    tools_start: int | None = None
    gen_reads: list[int] = field(default_factory=list)  # output positions where add_generation_prompt was tested
