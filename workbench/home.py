"""WORKBENCH_HOME (SPEC 7.5): where saved sessions, autosaves, settings and converted model files live."""

from __future__ import annotations

import os
from pathlib import Path


def workbench_home() -> Path:
    """WORKBENCH_HOME, else the per-user data folder (XDG_DATA_HOME/prompt-workbench)."""
    env = os.environ.get("WORKBENCH_HOME")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "prompt-workbench"
