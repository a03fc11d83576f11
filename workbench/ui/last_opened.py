"""Which session a new page of the app opens (issue 17): the one last opened or saved in any page,
so that a reload comes back to the session being edited (and its autosaved edits), not the default.

One small record, `last-opened.json` in the autosave folder, written atomically; it holds a picker
key (`sample:NAME`, `saved:NAME`), never a path: it is looked up in the picker's options when read,
so a stale or edited record opens nothing it should not. No UI library here."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import WorkbenchError
from .document import atomic_write
from .files import AppFiles

RECORD = "last-opened.json"


def remember(folder: Path, files: AppFiles, path: str | None) -> None:
    """Record the session at `path` as the last opened, if the picker offers it (an upload: not)."""
    key = files.key_of(path)
    if key is None or key == "given:":
        return
    try:
        atomic_write(folder / RECORD, json.dumps({"key": key}) + "\n")
    except WorkbenchError:
        pass        # only a convenience: a page still opens the default session


def recall(folder: Path, files: AppFiles) -> str | None:
    """The path of the session last opened, if the record names one the picker still offers."""
    try:
        key = json.loads((folder / RECORD).read_text("utf-8")).get("key")
        return files.path_of(key)
    except (OSError, ValueError, AttributeError, WorkbenchError):
        return None
