"""The clock a template reads through `strftime_now`.

transformers gives templates `strftime_now(format)`, formatting the wall clock. An assembly reads the
clock once and renders with that instant (`render(now=...)`), which also goes into its cache key
(workbench/assembly/context.py): the date in the key is the date in the prompt, even across midnight.
"""

from __future__ import annotations

from datetime import datetime


def wall_clock() -> datetime:
    """Now, as the sandbox's own `strftime_now` reads it (one clock: tests freeze it in one place)."""
    from . import sandbox
    return sandbox.datetime.now()
