"""The clock a template reads through `strftime_now`, fixed for one assembly.

transformers gives templates `strftime_now(format)`, formatting the wall clock. An assembly reads
one instant, which also goes into its cache key (workbench/context.py): the date in the key is the
date in the prompt, even across midnight.
"""

from __future__ import annotations

from datetime import datetime


class FixedClock:
    """`strftime_now` at one instant (a plain object, so it can travel to a render worker)."""

    __slots__ = ("instant",)

    def __init__(self, instant: datetime):
        self.instant = instant

    def __call__(self, fmt: str) -> str:
        return self.instant.strftime(fmt)


def wall_clock() -> datetime:
    """Now, as the sandbox's own `strftime_now` reads it (one clock: tests freeze it in one place)."""
    from . import sandbox
    return sandbox.datetime.now()
