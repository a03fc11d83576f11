"""Files a bundle names (template.file, goldens[].file, providers.files) stay inside the bundle
folder: a relative path with no `..`, resolving (symlinks followed) to a regular file under the
folder. A bundle shared between teams must not make its loader read /etc/passwd, another bundle's
template, or a FIFO that never ends.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path, PurePosixPath

from ..errors import BundleError
from ..files import read_user_file

_DRIVE = re.compile(r"^[A-Za-z]:")


def check_name(rel: object, field: str, file: str = "workbench.yaml") -> str:
    """The form alone: a relative POSIX path inside the folder (what the exporter writes)."""
    if not isinstance(rel, str) or not rel:
        raise BundleError(f"{file}: {field} must be a file name inside the bundle, got {rel!r}", file=file,
                          field=field)
    bad = None
    if rel.startswith(("/", "\\")) or _DRIVE.match(rel):
        bad = "is absolute"
    elif "\\" in rel or "\x00" in rel:
        bad = "holds a backslash or NUL"
    elif any(part in ("..", ".", "") for part in rel.split("/")):
        bad = "climbs out with '..' or has an empty or '.' part"
    if bad:
        raise BundleError(f"{file}: {field} {rel!r} {bad}: files a bundle names must lie inside the bundle "
                          "folder", file=file, field=field, hint="re-export the bundle")
    return rel


def inside(root: Path, rel: object, field: str | None, file: str = "workbench.yaml") -> Path:
    """The regular file `rel` names under `root`, refused if it is not one or resolves outside.
    `field`: where `file` names it (None for workbench.yaml itself)."""
    if field is not None:
        check_name(rel, field, file)
    base = root.resolve()
    path = (base / PurePosixPath(str(rel))).resolve()
    if not path.is_relative_to(base):
        what = f"{file}: {field} {rel!r}" if field is not None else str(rel)
        raise BundleError(f"{what} leads out of the bundle folder (through a symlink)", file=file, field=field,
                          hint="copy the file into the bundle instead of linking it")
    if not path.exists():
        raise BundleError(f"{rel}: missing from the bundle", file=str(rel), field=field)
    if not path.is_file():   # a FIFO or a device would block the read or never end
        raise BundleError(f"{rel}: not a regular file", file=str(rel), field=field,
                          hint="a bundle holds plain files only: re-export it")
    return path


def read_bytes(path: Path, limit: int, rel: str, field: str | None) -> bytes:
    """The file's bytes, at most `limit` (files.py: opened without blocking and without following a
    link swapped in after `inside` looked, and refused unless it is a regular file)."""
    return read_user_file(path, cap=limit, what="bundle file", name=rel, follow_links=False,
                          error=partial(BundleError, file=rel, field=field),
                          raise_hint="re-export the bundle (`workbench export --turns last` keeps goldens small)")
