"""The seeded parts of the sample sessions: each builder turns the ``build:`` block of one
source under ``tools/data/sample_sessions/`` into the session fields it generates.

A builder is ``build(session, spec, rng) -> fields``: *session* holds the fields written out in
the source, *spec* the ``build:`` block, *rng* a ``random.Random`` seeded with ``spec["seed"]``.
The draws from *rng* happen in a fixed order, so a builder's output is the same on every run;
changing that order changes the committed files (tests/test_generated_data.py says so).
"""

from __future__ import annotations

from .common import Builder
from .drawn_ids import call_ids, timestamped_requests
from .handbook import handbook_rag
from .incident import incident_logs
from .research import research_chat
from .screenshot import screenshot_chat
from .support import support_chat

BUILDERS: dict[str, Builder] = {
    "call_ids": call_ids,
    "timestamped_requests": timestamped_requests,
    "support_chat": support_chat,
    "handbook_rag": handbook_rag,
    "incident_logs": incident_logs,
    "research_chat": research_chat,
    "screenshot_chat": screenshot_chat,
}

__all__ = ["BUILDERS", "Builder"]
