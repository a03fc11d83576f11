"""The files the package ships besides code: the front end (`widgets/`: the ES modules and their
CSS, no build step) and the sample sessions (`sample_sessions/`), found through importlib.resources.

The repository keeps both folders at its top level. This package holds a symlink to each
(`widgets -> ../../widgets`, `sample_sessions -> ../../sample_sessions`), and the build follows
them: the sdist and the wheel carry real copies here (pyproject.toml's package-data), so a plain
`pip install 'prompt-workbench[ui]'` gives the app and the notebook widgets their front end. A
checkout (an editable install, or the repository on PYTHONPATH) reads the top-level folders through
the links: an edit to `widgets/*.js` shows on the next load, with no reinstall.

Paths come back resolved: in a checkout they are the top-level files themselves, as before.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from ..errors import MissingAssetError

WIDGETS = "widgets"
SAMPLE_SESSIONS = "sample_sessions"


def folder(name: str) -> Path:
    """One of the shipped folders (WIDGETS, SAMPLE_SESSIONS) as a path on disk."""
    found = files(__name__).joinpath(name)
    # pip unpacks wheels, so the package is a folder on disk; the hosts take file paths (anywidget
    # and Panel read `_esm` from one, and watch it when hot reload is on).
    if not isinstance(found, Path) or not found.is_dir():
        raise MissingAssetError(f"the package's {name}/ folder is missing ({found})",
                                hint="reinstall prompt-workbench; in a checkout, workbench/assets/"
                                     f"{name} is a symlink to the top-level {name}/ (clone with symlinks on)")
    return found.resolve()


def widget_file(name: str) -> Path:
    """A front-end file by name, e.g. `widget_file("token_view.js")`."""
    path = folder(WIDGETS) / name
    if not path.is_file():
        raise MissingAssetError(f"the front-end file {WIDGETS}/{name} is missing ({path})",
                                hint="reinstall prompt-workbench")
    return path


def sample_sessions() -> dict[str, str]:
    """File name -> path of every session shipped in `sample_sessions/` (the picker's read-only list)."""
    return {p.name: str(p) for p in sorted(folder(SAMPLE_SESSIONS).glob("*.json"))}
