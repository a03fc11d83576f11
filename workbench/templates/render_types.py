"""What a render is asked to respect (RenderLimits) and what it gives back (Rendered).

Their own module because three others share them and none may import another for them: the
renderer (render.py), the worker's parent side (worker.py, which render() hands isolated renders
to) and the worker's child side (worker_child.py, which calls render()).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import WorkbenchError
from .bounds import DEFAULT_MAX_CHARS
from .steps import DEFAULT_MAX_STEPS, DEFAULT_STEPS_PER_INPUT, MAX_STEPS


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
    # Steps (loop iterations, items walked by filters, calls and attribute reads; steps.py) that any
    # render may take; past them, steps_per_input more per unit of input size (bounds.weight of the
    # messages, tools and template variables). None: no more than max_steps.
    max_steps: int = DEFAULT_MAX_STEPS
    steps_per_input: float | None = DEFAULT_STEPS_PER_INPUT

    def __post_init__(self) -> None:
        if not (type(self.max_steps) is int and 0 <= self.max_steps <= MAX_STEPS):
            raise WorkbenchError(f"RenderLimits.max_steps must be an integer from 0 to 2**63 - 1, got "
                                 f"{self.max_steps!r}", hint=f"the default is {DEFAULT_MAX_STEPS:,}")
        per = self.steps_per_input
        if per is not None and not (type(per) in (int, float) and 0 <= per < float("inf")):
            raise WorkbenchError(f"RenderLimits.steps_per_input must be a finite number >= 0 or None, got {per!r}",
                                 hint=f"the default is {DEFAULT_STEPS_PER_INPUT:g}; None grants no more than max_steps")


@dataclass(slots=True)
class Rendered:
    text: str
    # index in the message list -> character offset where the template started writing it
    starts: dict[int, int] = field(default_factory=dict)
    tools_start: int | None = None
    gen_reads: list[int] = field(default_factory=list)  # output positions where add_generation_prompt was tested
    steps: int = 0   # the steps the render took (steps.py): loop iterations, items filters walked, calls
