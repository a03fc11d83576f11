"""The app's files (SPEC 7.5, `workbench app --sessions DIR`): the one way the page opens, saves and
exports files. No UI library here.

What the page can reach:
- read only: the sessions shipped in `sample_sessions/`, and the session named on the command line
  (chosen by whoever started the app, not by the page);
- read and write: session files directly in the sessions folder (`--sessions DIR`, by default
  WORKBENCH_HOME/sessions);
- write: bundles directly in the export folder (`--export-dir`, by default `exports/` in the
  sessions folder), replacing only a bundle this app wrote there.

Nothing the browser sends is used as a path. The session picker sends a key that `AppFiles.options`
offered and is looked up, never opened (a forged value is refused with the same words whether or not
such a file exists). A name typed into "Save to" or "Export" is one plain name: no folder, no `..`, no
absolute path, no NUL or control character, no leading dot (kept for the app's temporary files), a
session ends in `.json`; it is resolved (links followed) and must still lie in its folder. A name
that is taken needs the user's confirmation (`OverwriteNeeded`), except the file the session was
opened from or last saved to. Folders are never created, except the two roots themselves.

Why so strict: the page runs with the user's rights and is reachable by whoever can reach its
address (`--host 0.0.0.0` opens it to the network); a name box that takes `a/../../x.json` writes
anywhere the user can.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import FileAccessError, OverwriteNeeded
from ..home import workbench_home
from .document import SessionDocument, atomic_write, sweep_temp_files, temp_name

if TYPE_CHECKING:
    from .state import WorkbenchState

SESSION_SUFFIX = ".json"
NAME_BYTES = 150            # a name's limit, in UTF-8 bytes: its temporary file's name must fit in 255
MAX_LISTED = 2000           # session files the picker lists (a folder of thousands is not browsed in a select)
EXPORTS_LEDGER = ".workbench-app-exports.json"   # in the export folder: the bundles this app wrote
_DRIVE = re.compile(r"[A-Za-z]:")
_EXPORT_LOCK = threading.Lock()   # one export at a time per process: the ledger is read, then rewritten


def _shown(name: str) -> str:
    return repr(name if len(name) <= 80 else name[:77] + "...")


def check_name(name: Any, what: str, folder: str, *, suffix: str | None) -> str:
    """`name` if it is one plain file name for `folder`, else a FileAccessError saying what is wrong.
    `what` names the box ("save to", "export to"), `folder` the folder in words."""
    if not isinstance(name, str):
        raise FileAccessError(f"{what}: expected a file name, got {type(name).__name__}")
    if not name:
        raise FileAccessError(f"{what}: give a file name", hint=f"the file goes in {folder}")
    if "\x00" in name:
        raise FileAccessError(f"{what}: {_shown(name)} contains a NUL character", hint="type a plain file name")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise FileAccessError(f"{what}: {_shown(name)} contains a control character", hint="type a plain file name")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise FileAccessError(f"{what}: {_shown(name)} is not valid Unicode", hint="type a plain file name") from None
    if name.startswith(("/", "\\", "~")) or _DRIVE.match(name):
        raise FileAccessError(f"{what}: {_shown(name)} is an absolute path; the app writes only in {folder}",
                              hint="type a plain file name, such as my_session.json")
    parts = re.split(r"[/\\]", name)
    if ".." in parts:
        raise FileAccessError(f"{what}: {_shown(name)} climbs out of the folder ('..'); the app writes only in "
                              f"{folder}", hint="type a plain file name, such as my_session.json")
    if len(parts) > 1:
        raise FileAccessError(f"{what}: {_shown(name)} names a folder; the file goes in {folder}, not below it",
                              hint="type a plain file name, without '/'")
    if name.startswith("."):
        raise FileAccessError(f"{what}: {_shown(name)} starts with '.': such names are kept for the app's "
                              "temporary files", hint="type a name that starts with a letter or a digit")
    if size > NAME_BYTES:
        raise FileAccessError(f"{what}: the name is {size} bytes long, more than {NAME_BYTES}",
                              hint="type a shorter name")
    if suffix is not None and not name.endswith(suffix):
        raise FileAccessError(f"{what}: {_shown(name)} does not end in {suffix}: the app writes session files "
                              f"only", hint=f"add {suffix} to the name")
    return name


class ConfinedFolder:
    """One folder and the plain names in it: every path handed out is checked to lie inside it after
    links are resolved. The folder itself is made on first write, never a folder below it."""

    def __init__(self, root: str | Path, what: str):
        self.root = Path(os.path.abspath(Path(root).expanduser()))
        self.what = what        # "the sessions folder": how messages name it

    def __repr__(self) -> str:
        return f"ConfinedFolder({str(self.root)!r})"

    def real_root(self, *, create: bool = False) -> Path:
        """The folder, links resolved; with `create`, made first (with its parents) if missing."""
        if create:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FileAccessError(f"cannot create {self.what} {self.root}: {exc.strerror}",
                                      hint="choose a folder you can write to") from None
        real = self.root.resolve()
        if not real.is_dir():
            raise FileAccessError(f"{self.what} {self.root} does not exist or is not a folder",
                                  hint="create it, or start the app with another folder")
        return real

    def locate(self, name: Any, box: str, *, suffix: str | None, create: bool = False) -> Path:
        """The real path of plain name `name` in the folder. Refused: any name `check_name` refuses,
        and a name that is a link leading out of the folder."""
        checked = check_name(name, box, f"{self.what} ({self.root})", suffix=suffix)
        root = self.real_root(create=create)
        real = (root / checked).resolve()       # a link is followed to where a write would land
        if real == root or not real.is_relative_to(root):
            raise FileAccessError(f"{box}: {_shown(checked)} is a link that leads out of {self.what}",
                                  hint="type another name")
        return real

    def names(self, suffix: str) -> list[str]:
        """The plain files in the folder (not below it) ending in `suffix` that stay inside it."""
        try:
            root = self.root.resolve()
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError:
            return []
        out = []
        for e in entries:
            if e.name.startswith(".") or not e.name.endswith(suffix):
                continue
            try:
                real = Path(e.path).resolve()
                if real.is_relative_to(root) and real.is_file():
                    out.append(e.name)
            except OSError:
                continue
            if len(out) >= MAX_LISTED:
                break
        return out


@dataclass
class AppFiles:
    """The app's file access: the session picker's options, saving, exporting, the start-up sweep."""

    sessions: ConfinedFolder
    exports: ConfinedFolder
    samples: dict[str, str] = field(default_factory=dict)   # name -> path, shipped, read only
    given: str | None = None                                # the command line's session, read only

    @classmethod
    def create(cls, sessions: str | Path | None = None, export_dir: str | Path | None = None, *,
               given: str | None = None, samples: dict[str, str] | None = None) -> "AppFiles":
        """The folders: `sessions` (default WORKBENCH_HOME/sessions) and `export_dir` (default
        `exports/` in it). Nothing is created yet (`prepare` does, at start)."""
        from ..assets import sample_sessions
        root = ConfinedFolder(sessions if sessions is not None else workbench_home() / "sessions",
                              "the sessions folder")
        out = ConfinedFolder(export_dir if export_dir is not None else root.root / "exports", "the export folder")
        return cls(root, out, sample_sessions() if samples is None else dict(samples),
                   str(Path(given).resolve()) if given else None)

    def prepare(self) -> None:
        """Create both folders now (at start): a folder that cannot be made fails the command, not a save."""
        self.sessions.real_root(create=True)
        self.exports.real_root(create=True)

    def sweep(self, *extra: str | Path) -> list[Path]:
        """Remove what crashed saves and exports left (stale temporary files only) in both folders
        and in `extra` ones (the autosave folder)."""
        removed: list[Path] = []
        for folder in (self.sessions.root, self.exports.root, *extra):
            removed += sweep_temp_files(folder)
        return removed

    # the picker ------------------------------------------------------------------------------------
    def options(self) -> dict[str, str]:
        """The session picker's options, label -> key. Keys are looked up, never used as paths."""
        saved = self.sessions.names(SESSION_SUFFIX)
        # A sample and a saved file of one name are told apart by both labels ("x.json (sample)" and
        # "x.json (saved)"), not by one bare name beside a marked one.
        opts = {(f"{name} (sample)" if name in saved else name): f"sample:{name}" for name in self.samples}
        given = self._given_label()
        if given is not None:
            opts[given] = "given:"
        for name in saved:
            opts[f"{name} (saved)"] = f"saved:{name}"
        return opts

    def _given_label(self) -> str | None:
        if self.given is None or self.given in {str(Path(p).resolve()) for p in self.samples.values()}:
            return None     # a shipped session: offered as a sample
        if Path(self.given).parent == self.sessions.root.resolve():
            return None     # in the sessions folder: offered as a saved one
        name = Path(self.given).name
        return name if name not in self.samples else f"{name} (command line)"

    def path_of(self, key: Any) -> str:
        """The file behind a picker key; a FileAccessError for anything the picker did not offer.
        The message is the same whatever the value names: the picker reveals nothing of the disk."""
        if not isinstance(key, str) or key not in self.options().values():
            raise FileAccessError("the session picker offers no such session",
                                  hint="pick one from its list, or upload a file")
        kind, _, name = key.partition(":")
        if kind == "sample":
            return self.samples[name]
        if kind == "given" and self.given is not None:
            return self.given
        return str(self.sessions.locate(name, "open", suffix=SESSION_SUFFIX))

    def key_of(self, path: str | None) -> str | None:
        """The picker key of the file at `path`, if the picker offers it."""
        if path is None:
            return None
        real = Path(path).resolve()
        for name, sample in self.samples.items():
            if Path(sample).resolve() == real:
                return f"sample:{name}"
        if self._given_label() is not None and Path(str(self.given)).resolve() == real:
            return "given:"
        key = f"saved:{real.name}"
        offered = real.parent == self.sessions.root.resolve() and key in self.options().values()
        return key if offered else None

    # saving ----------------------------------------------------------------------------------------
    def default_save_name(self, doc: SessionDocument) -> str:
        """What "Save to" proposes: the document's file name, if that is a name the folder takes; for
        a shipped sample NAME-edited.json, so that a save never proposes to replace a shipped sample
        (the sessions folder may be the samples' own folder)."""
        name = Path(doc.path).name if doc.path else doc.name
        if doc.path is not None and (self.key_of(doc.path) or "").startswith("sample:"):
            name = f"{Path(name).stem}-edited{SESSION_SUFFIX}"
        try:
            return check_name(name, "save to", "", suffix=SESSION_SUFFIX)
        except FileAccessError:
            return "session-edited.json"

    def save_target(self, name: Any, *, current: str | None, overwrite: bool) -> Path:
        """Where "Save to" `name` writes. Taken by another file: OverwriteNeeded unless `overwrite`
        (the file the session came from, `current`, needs no confirmation)."""
        target = self.sessions.locate(name, "save to", suffix=SESSION_SUFFIX, create=True)
        if target.exists():
            if not target.is_file():
                raise FileAccessError(f"save to: {_shown(name)} is a folder in {self.sessions.what}",
                                      hint="type another name")
            own = current is not None and Path(current).resolve() == target
            if not own and not overwrite:
                raise OverwriteNeeded(f"{name} exists in {self.sessions.what}: confirm to replace it",
                                      name=name, hint="Overwrite replaces it; or type another name")
        return target

    def save(self, state: "WorkbenchState", name: Any, *, overwrite: bool = False) -> Path:
        """Save the state's document as `name` in the sessions folder."""
        target = self.save_target(name, current=state.doc.path, overwrite=overwrite)
        return state.save(str(target))

    # exporting -------------------------------------------------------------------------------------
    def default_export_name(self, doc: SessionDocument) -> str:
        stem = re.sub(r"[^\w.-]", "_", Path(doc.name).stem).lstrip(".") or "bundle"
        return stem[:64]

    def _ledger(self, root: Path) -> dict[str, str]:
        try:
            data = json.loads((root / EXPORTS_LEDGER).read_text("utf-8"))
            return {str(k): str(v) for k, v in data.get("bundles", {}).items()}
        except (OSError, ValueError, AttributeError):
            return {}

    @staticmethod
    def _bundle_digest(folder: Path) -> str | None:
        try:
            return hashlib.sha256((folder / "workbench.yaml").read_bytes()).hexdigest()
        except OSError:
            return None

    def export_target(self, name: Any, *, overwrite: bool) -> Path:
        """Where "Export" `name` writes. An empty or missing folder is free; a bundle this app wrote
        there needs confirmation (OverwriteNeeded unless `overwrite`); anything else is refused."""
        target = self.exports.locate(name, "export to", suffix=None, create=True)
        if not target.exists():
            return target
        if not target.is_dir():
            raise FileAccessError(f"export to: {_shown(name)} is a file in {self.exports.what}",
                                  hint="type another name")
        if not any(target.iterdir()):
            return target
        digest = self._bundle_digest(target)
        if digest is None or self._ledger(self.exports.real_root()).get(target.name) != digest:
            raise FileAccessError(f"export to: {_shown(name)} exists in {self.exports.what} and is not a bundle "
                                  "this app wrote: not replacing it", hint="type another name")
        if not overwrite:
            raise OverwriteNeeded(f"{name} is a bundle this app exported before: confirm to replace it",
                                  name=name, hint="Replace overwrites it; or type another name")
        return target

    def export(self, state: "WorkbenchState", name: Any, *, overwrite: bool = False) -> tuple[Path, Any]:
        """Export the state's bundle as `name` in the export folder and verify it: (folder, report).
        Built in a temporary folder beside it and moved into place, so a crash leaves the old bundle
        (and a stale temporary folder for the next start's sweep), never half of one."""
        with _EXPORT_LOCK:
            target = self.export_target(name, overwrite=overwrite)
            root = self.exports.real_root()
            staging = root / temp_name(target.name, "wbexport")
            try:
                staging.mkdir()
                built, report = state.export(str(staging / "bundle"))
                old = staging / "replaced"
                if target.exists():
                    os.replace(target, old)     # only a bundle we wrote (checked above), deleted once replaced
                try:
                    os.replace(built, target)
                except OSError:
                    if old.exists():
                        os.replace(old, target)     # put the old bundle back before the staging folder goes
                    raise
            except OSError as exc:
                raise FileAccessError(f"export to: cannot write {target}: {exc.strerror}",
                                      hint="check the disk and permissions") from None
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            ledger = self._ledger(root)
            ledger[target.name] = self._bundle_digest(target) or ""
            atomic_write(root / EXPORTS_LEDGER, json.dumps({"bundles": ledger}, indent=1), make_folder=False)
            return target, report
