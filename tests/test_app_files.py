"""The app's file access (issue 14, cases 4 and 10): every open, save, upload and export is confined
to the sessions folder and the export folder chosen at start; names are plain names, a taken one
needs confirmation, modes are kept; saves are atomic and durable, and what a killed save leaves
behind is cleaned at the next start. Without a browser, except that the last test starts the real
`workbench app` (tests/test_app_files_browser.py drives the page).

The issue's payloads are here as regression tests, at the controller (what the page's buttons call)
and at the app object (what the page's widgets hold)."""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from browser import ROOT, AppServer, app_command
from inline_host import InlineHost

from workbench.errors import FileAccessError, OverwriteNeeded, SessionFileError
from workbench.ui.controller import Controller
from workbench.ui.document import (
    STALE_AFTER_S,
    Autosave,
    SessionDocument,
    atomic_write,
    is_stale_temp,
    sweep_temp_files,
    temp_name,
)
from workbench.ui.files import EXPORTS_LEDGER, AppFiles
from workbench.ui.state import WorkbenchState, sample_sessions

SAMPLES = sample_sessions()
SMALL = "openai_minimal.json"      # two turns: exports in seconds


class Host(InlineHost):
    """The Controller's hooks, run inline: what a page would show is recorded."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def show_error(self, message: str) -> None:
        self.errors.append(message)


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` and its bytes (None for folders and links): to prove nothing changed."""
    out: dict[str, bytes | None] = {}
    for p in sorted(folder.rglob("*")):
        out[str(p.relative_to(folder))] = p.read_bytes() if p.is_file() and not p.is_symlink() else None
    return out


@pytest.fixture
def files(tmp_path: Path) -> AppFiles:
    f = AppFiles.create(tmp_path / "sessions", tmp_path / "exports")
    f.prepare()
    return f


@pytest.fixture
def controller(files: AppFiles, tmp_path: Path) -> Controller:
    state = WorkbenchState(SAMPLES[SMALL], autosave=Autosave(tmp_path / "home"))
    state.apply({"op": "set", "index": 0, "field": "content", "value": "edited in the app"})
    return Controller(state, Host(), background=False, files=files)


# ------------------------------------------------------------------------------ Save to
ESCAPES = [
    ("a/../../x.json", "climbs out of the folder"),                # the payload
    ("../x.json", "climbs out of the folder"),
    ("../../../../../tmp/wb-escape.json", "climbs out of the folder"),
    ("..\\x.json", "climbs out of the folder"),
    ("ABS/x.json", "is an absolute path"),                         # ABS: tmp_path, filled in below
    ("~/x.json", "is an absolute path"),
    ("C:\\x.json", "is an absolute path"),
    ("sub/new/x.json", "names a folder"),                          # the issue: folders were created
    ("notes.txt", "does not end in .json"),                        # the issue: non-JSON files overwritten
    (".bashrc", "starts with '.'"),
    (".x.json", "starts with '.'"),
    ("x.json\x00.txt", "NUL character"),
    ("x\n.json", "control character"),
    ("\ud800.json", "not valid Unicode"),
    ("a" * 200 + ".json", "more than 150"),
    ("", "give a file name"),
    ("..", "climbs out of the folder"),
]


@pytest.mark.parametrize("name, says", ESCAPES, ids=[repr(n[:20]) for n, _ in ESCAPES])
def test_save_refuses_every_name_that_is_not_a_plain_name_in_the_folder(controller: Controller, tmp_path: Path,
                                                                         name: str, says: str) -> None:
    name = name.replace("ABS", str(tmp_path))
    (tmp_path / "sessions" / "notes.txt").write_text("my notes")
    before = tree(tmp_path)
    with pytest.raises(FileAccessError, match=says):
        controller.save(name)
    assert tree(tmp_path) == before                    # nothing written, created or changed anywhere
    assert controller.state.doc.dirty and controller.state.doc.path == SAMPLES[SMALL]
    assert not Path("/tmp/wb-escape.json").exists()


def test_save_through_a_link_out_of_the_folder_is_refused(controller: Controller, tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    (root / "link.json").symlink_to(outside)
    (root / "dangling.json").symlink_to(tmp_path / "would-be-created.json")
    (root / "inner.json").write_text(Path(SAMPLES[SMALL]).read_text())
    (root / "alias.json").symlink_to(root / "inner.json")
    for name in ("link.json", "dangling.json"):
        with pytest.raises(FileAccessError, match="a link that leads out of the sessions folder"):
            controller.save(name, overwrite=True)
    assert outside.read_text() == "precious" and not (tmp_path / "would-be-created.json").exists()
    # A link that stays inside is followed: the file it names is saved, the link stays a link.
    target = controller.save("alias.json", overwrite=True)
    assert target == (root / "inner.json").resolve() and (root / "alias.json").is_symlink()
    assert SessionDocument.load(root / "inner.json").data == controller.state.doc.data


def test_overwriting_asks_first_and_keeps_the_file_mode(controller: Controller, tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    taken = root / "taken.json"
    original = Path(SAMPLES["tool_agent.json"]).read_bytes()
    taken.write_bytes(original)
    taken.chmod(0o640)
    with pytest.raises(OverwriteNeeded, match="taken.json exists in the sessions folder") as exc:
        controller.save("taken.json")
    assert exc.value.name == "taken.json" and taken.read_bytes() == original and controller.state.doc.dirty
    target = controller.save("taken.json", overwrite=True)      # confirmed
    assert target == taken.resolve() and not controller.state.doc.dirty
    assert SessionDocument.load(taken).data == controller.state.doc.data
    assert stat.S_IMODE(taken.stat().st_mode) == 0o640           # the issue: the mode was changed to 0600
    # The file the session now lives in needs no confirmation; another taken one does again.
    controller.state.apply({"op": "set", "index": 0, "field": "content", "value": "second save"})
    controller.save("taken.json")
    (root / "other.json").write_bytes(original)
    with pytest.raises(OverwriteNeeded):
        controller.save("other.json")
    (root / "folder.json").mkdir()
    with pytest.raises(FileAccessError, match="is a folder"):
        controller.save("folder.json", overwrite=True)
    # A new file gets the usual mode (0666 less the umask), as any editor's save (issue 17).
    controller.save("fresh.json")
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE((root / "fresh.json").stat().st_mode) == 0o666 & ~mask
    assert sorted(p.name for p in root.iterdir()) == ["folder.json", "fresh.json", "other.json", "taken.json"]


# ------------------------------------------------------------------------------ the session picker
def test_the_picker_opens_only_what_it_offers_and_reveals_nothing(controller: Controller, files: AppFiles,
                                                                  tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(Path(SAMPLES["tool_agent.json"]).read_text())     # session-shaped, outside the folder
    shown = controller.state.doc.data
    refusals = []
    for forged in (str(outside), "/etc/hostname", "/no/such/file.json", SAMPLES["tool_agent.json"],
                   "saved:../outside.json", "saved:/etc/hostname", "sample:../../../etc/passwd", "given:",
                   "sample:", "", 42, None):
        with pytest.raises(FileAccessError) as exc:
            controller.open(forged)       # type: ignore[arg-type]
        refusals.append(str(exc.value))
        assert controller.state.doc.data is shown                  # nothing opened
    assert len(set(refusals)) == 1                                 # the same words, whether the file exists or not
    assert "offers no such session" in refusals[0]
    # What it offers opens: a shipped sample, and a file saved in the folder.
    opts = files.options()
    assert opts["tool_agent.json"] == "sample:tool_agent.json"
    controller.open(opts["tool_agent.json"])
    assert controller.state.doc.path == SAMPLES["tool_agent.json"]
    controller.state.apply({"op": "set", "index": 1, "field": "content", "value": "kept"})
    controller.save("mine.json")
    assert files.options()["mine.json (saved)"] == "saved:mine.json"
    controller.open(files.options()["openai_minimal.json"])
    controller.open("saved:mine.json")
    assert controller.state.doc.messages(1)[1]["content"] == "kept"
    assert files.key_of(controller.state.doc.path) == "saved:mine.json"


def test_the_command_lines_session_is_offered_read_only(files: AppFiles, tmp_path: Path) -> None:
    given = tmp_path / "elsewhere" / "given.json"
    given.parent.mkdir()
    given.write_text(Path(SAMPLES[SMALL]).read_text())
    f = AppFiles.create(files.sessions.root, files.exports.root, given=str(given))
    state = WorkbenchState(str(given), autosave=None)
    c = Controller(state, Host(), background=False, files=f)
    assert f.options()["given.json"] == "given:" and f.key_of(str(given)) == "given:"
    assert f.default_save_name(state.doc) == "given.json"
    state.apply({"op": "set", "index": 0, "field": "content", "value": "changed"})
    target = c.save(None)                                           # Save with an empty box: its name, in the folder
    assert target == (files.sessions.root / "given.json").resolve()
    assert json.loads(given.read_text()) == json.loads(Path(SAMPLES[SMALL]).read_text())   # never written


# ------------------------------------------------------------------------------ Export
def export_now(c: Controller, name: str, *, overwrite: bool = False) -> tuple[Any, str]:
    got: list[tuple[Any, str]] = []
    c.run_export(name, lambda result, error: got.append((result, error)), overwrite=overwrite)
    return got[0]


def test_export_writes_only_in_its_folder_and_replaces_only_its_own_bundles(controller: Controller,
                                                                           files: AppFiles, tmp_path: Path) -> None:
    from workbench.export.bundle import export_bundle

    out = tmp_path / "exports"
    (out / "mine").mkdir()
    (out / "mine" / "notes.txt").write_text("mine")
    # A bundle that someone else put there: the issue found Export deleted it.
    foreign = export_bundle(controller.state.assembler(), out / "foreign")
    before = tree(tmp_path)
    for name, says in (("../escape", "climbs out"), (str(tmp_path / "abs"), "absolute path"),
                       ("a/b", "names a folder"), (".hidden", "starts with '.'"),
                       ("mine", "not a bundle this app wrote"), ("foreign", "not a bundle this app wrote")):
        with pytest.raises(FileAccessError, match=says):
            export_now(controller, name, overwrite=True)
    assert tree(tmp_path) == before                                 # nothing written, nothing deleted
    assert (foreign / "workbench.yaml").is_file()

    result, error = export_now(controller, "ok")
    assert error == "" and result[1].ok and result[0] == (out / "ok").resolve()
    assert json.loads((out / EXPORTS_LEDGER).read_text())["bundles"].keys() == {"ok"}
    with pytest.raises(OverwriteNeeded, match="a bundle this app exported before"):
        export_now(controller, "ok")                                # asked at once, before any work
    controller.state.apply({"op": "set", "index": 0, "field": "content", "value": "exported again"})
    result, error = export_now(controller, "ok", overwrite=True)
    assert error == "" and result[1].ok
    golden = json.loads(next((out / "ok" / "goldens").glob("*.json")).read_text())
    assert "exported again" in json.dumps(golden)
    # A bundle of ours edited by hand is no longer ours to replace.
    yaml = out / "ok" / "workbench.yaml"
    yaml.write_text(yaml.read_text() + "\n# edited\n")
    with pytest.raises(FileAccessError, match="not a bundle this app wrote"):
        export_now(controller, "ok", overwrite=True)
    leftovers = [p.name for p in out.iterdir() if p.name.startswith(".") and p.name != EXPORTS_LEDGER]
    assert leftovers == []                                          # no staging folder left behind


# ------------------------------------------------------------------------------ the app object
def test_the_app_shows_refusals_inline_and_keeps_working(files: AppFiles, tmp_path: Path) -> None:
    from workbench.ui.app import WorkbenchApp

    app = WorkbenchApp(SAMPLES[SMALL], autosave=Autosave(tmp_path / "home"), files=files)   # no server: inline
    shown = app.state.doc
    before = tree(tmp_path)
    # A value the picker never offered (the issue: any path, answered differently if the file existed).
    app.session_select.value = "/etc/hostname"
    assert "not opened: the session picker offers no such session" in app.file_status.object
    assert app.state.doc is shown and app.session_select.value == "sample:openai_minimal.json"
    app.save_path.value = "a/../../x.json"
    app.save_button.clicks += 1
    assert "not saved: save to: &#x27;a/../../x.json&#x27; climbs out" in app.file_status.object
    app.export_path.value = "../x"
    app.export_button.clicks += 1
    assert "not exported" in app.export_status.object and "climbs out" in app.export_status.object
    assert tree(tmp_path) == before
    # An upload names itself: "../../evil.json" is a name to show, never a path.
    app.upload.filename = "../../ev\x00il.json"
    app.upload.value = Path(SAMPLES["tool_agent.json"]).read_bytes()
    assert app.state.doc.name == "evil.json" and app.save_path.value == "evil.json"
    # Overwrite asks first, then saves over the file; the mode stays.
    taken = tmp_path / "sessions" / "taken.json"
    taken.write_text("{}")
    taken.chmod(0o604)
    app.save_path.value = "taken.json"
    app.save_button.clicks += 1
    assert app.overwrite_button.visible and "exists in the sessions folder" in app.file_status.object
    assert taken.read_text() == "{}"
    other = tmp_path / "sessions" / "other.json"
    other.write_text("{}")
    app.save_path.value = "other.json"                  # another name since: the confirmation does not carry over
    app.overwrite_button.clicks += 1
    assert other.read_text() == "{}" and "other.json exists" in app.file_status.object
    app.save_path.value = "taken.json"
    app.save_button.clicks += 1
    app.overwrite_button.clicks += 1
    assert not app.overwrite_button.visible and "saved to" in app.file_status.object
    assert SessionDocument.load(taken).data == app.state.doc.data and stat.S_IMODE(taken.stat().st_mode) == 0o604
    assert app.session_select.value == "saved:taken.json" and "taken.json (saved)" in app.session_select.options
    # Export: a new name writes a bundle; the same name again asks to Replace first.
    app.export_path.value = "from-app"
    app.export_button.clicks += 1
    assert "identical ids" in app.export_status.object and (tmp_path / "exports" / "from-app").is_dir()
    app.export_button.clicks += 1
    assert app.replace_button.visible and "a bundle this app exported before" in app.export_status.object
    app.replace_button.clicks += 1
    assert not app.replace_button.visible and "identical ids" in app.export_status.object
    assert app.state.result is not None and not app.alert.visible      # the page still works


# ------------------------------------------------------------------------------ atomic, durable saves
def test_a_save_syncs_the_file_then_renames_then_syncs_the_folder(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        real_fsync(fd)

    def replace(*args: Any, **kwargs: Any) -> None:
        calls.append("rename")
        real_replace(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write(tmp_path / "a.json", "{}")
    assert calls == ["fsync file", "rename", "fsync folder"]
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_a_link_or_a_folder_at_the_target_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("real")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    (tmp_path / "dir.json").mkdir()
    for name in ("link.json", "dir.json"):
        with pytest.raises(SessionFileError, match="not a plain file"):
            atomic_write(tmp_path / name, "new")
    assert (tmp_path / "real.json").read_text() == "real" and (tmp_path / "link.json").is_symlink()
    with pytest.raises(SessionFileError, match="cannot write"):
        atomic_write(tmp_path / "bad.json", "lone surrogate \ud800")     # not UTF-8: refused, nothing left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.json", "link.json", "real.json"]


def test_an_autosave_of_an_upload_with_a_hostile_name_stays_in_its_folder(tmp_path: Path) -> None:
    auto = Autosave(tmp_path / "home")
    doc = SessionDocument.load(SAMPLES[SMALL])
    for source in ("../../../evil.json", "a\x00b.json", "x" * 1000 + ".json", "\ud800.json", "..\\..\\w.json"):
        f = auto.store(source, doc)
        assert f.parent == auto.folder and auto.restore(source) is not None
    assert not (tmp_path / "evil.json").exists() and len(list(auto.folder.iterdir())) == 5


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait(timeout=60)
    return p.pid


def test_the_sweep_removes_only_stale_temporary_files_of_its_own_pattern(tmp_path: Path) -> None:
    mine = temp_name("live.json")                      # this process, this run: in use
    host = mine.split(".")[-2].split("-")[0]
    dead = f".dead.json.{host}-{dead_pid()}-0123abcd-89abcdef.wbtmp"
    reused = f".reused.json.{host}-{os.getpid()}-00000000-89abcdef.wbtmp"     # our pid, an earlier run's
    away = ".away.json.ffffffff-1-0123abcd-89abcdef.wbtmp"                   # another machine's, fresh
    old_away = ".old.json.ffffffff-1-0123abcd-89abcdef.wbtmp"                # another machine's, old
    export = f".bundle.{host}-{dead_pid()}-0123abcd-89abcdef.wbexport"
    link = f".link.{host}-{dead_pid()}-0123abcd-89abcdef.wbtmp"            # the pattern, but a link: not ours
    for name in (mine, dead, reused, away, old_away, ".notes.tmp", "dead.json.wbtmp", ".x.wbtmp"):
        (tmp_path / name).write_text("x")
    (tmp_path / export).mkdir()
    (tmp_path / export / "bundle").mkdir()
    (tmp_path / link).symlink_to(tmp_path / "dead.json.wbtmp")
    long_ago = time.time() - STALE_AFTER_S - 60
    os.utime(tmp_path / old_away, (long_ago, long_ago))
    removed = sweep_temp_files(tmp_path)
    assert sorted(p.name for p in removed) == sorted([dead, reused, old_away, export])
    assert {p.name for p in tmp_path.iterdir()} == {mine, away, ".notes.tmp", "dead.json.wbtmp", ".x.wbtmp", link}
    assert not is_stale_temp(mine, time.time()) and is_stale_temp(mine, long_ago)
    assert sweep_temp_files(tmp_path / "missing") == []


# ------------------------------------------------------------------------------ kill -9 mid-save
CHILD = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from workbench.ui.controller import Controller
    from workbench.ui.document import Autosave
    from workbench.ui.files import AppFiles
    from workbench.ui.state import WorkbenchState

    root, home, what = sys.argv[1:4]
    def pause(fd):   # the save's first fsync: the temporary file is written, not yet renamed
        print("paused", flush=True)
        time.sleep(600)
    files = AppFiles.create(root)
    state = WorkbenchState(files.path_of("saved:big.json"), autosave=Autosave(Path(home)), restore=False)
    state.apply({"op": "set", "index": 0, "field": "content", "value": "x" * 48_000_000})
    class Host:
        def __getattr__(self, name):
            return lambda *a, **k: None
    os.fsync = pause
    if what == "save":
        Controller(state, Host(), background=False, files=files).save("big.json")
    else:
        state.autosave.store(state.source, state.doc)   # what the controller's autosave thread runs
    print("finished", flush=True)
""")


def test_kill_9_mid_save_keeps_the_file_and_the_next_start_cleans_up(tmp_path: Path) -> None:
    root, home = tmp_path / "sessions", tmp_path / "home"
    root.mkdir()
    big = root / "big.json"
    big.write_bytes(Path(SAMPLES[SMALL]).read_bytes())
    big.chmod(0o640)
    original = big.read_bytes()
    (root / ".notes.tmp").write_text("not ours")
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(home), what], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for what in ("save", "autosave")]
    try:
        for child in children:                                       # each one paused mid-save...
            assert child.stdout is not None and child.stderr is not None
            ready, _, _ = select.select([child.stdout], [], [], 120)  # it prints, dies, or the test fails
            line = child.stdout.readline() if ready else "(nothing within 120 s)"
            assert line.strip() == "paused", (line, child.poll() is not None and child.stderr.read())
            os.kill(child.pid, signal.SIGKILL)                       # ...and killed there
            assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=60)
    left = [p for p in [*root.iterdir(), *(home / "autosave").iterdir()] if p.name.endswith(".wbtmp")]
    assert len(left) == 2 and all(p.stat().st_size > 48_000_000 for p in left)   # what the issue found
    assert big.read_bytes() == original and stat.S_IMODE(big.stat().st_mode) == 0o640
    # The next start of the app removes them, and nothing else.
    server = AppServer("--sessions", str(root), env={"WORKBENCH_HOME": str(home)}, startup_s=120)
    try:
        assert not any(p.exists() for p in left)
        assert sorted(p.name for p in root.iterdir()) == [".notes.tmp", "big.json", "exports"]
        assert big.read_bytes() == original
    finally:
        code = server.stop()
    assert "removed 2 temporary file(s)" in server.stderr(), server.stderr()
    assert code == 0, server.stderr()


# ------------------------------------------------------------------------------ the command
@pytest.mark.parametrize("argv, says", [
    (["--sessions", ""], "--sessions is empty"),
    (["--sessions", "FILE"], "cannot create the sessions folder"),
    (["--export-dir", "FILE/below"], "cannot create the export folder"),
])
def test_bad_folders_are_one_error_line_and_exit_2(tmp_path: Path, argv: list[str], says: str) -> None:
    (tmp_path / "file").write_text("a file, not a folder")
    argv = [a.replace("FILE", str(tmp_path / "file")) for a in argv]
    r = subprocess.run([*app_command(), *argv, "--no-show"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "WORKBENCH_HOME": str(tmp_path / "home")})
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert says in r.stderr and r.stdout == ""


# ------------------------------------------------------------------------------ issue 17: Save to
def test_save_proposes_an_edited_copy_of_a_sample_and_gives_the_usual_mode(tmp_path: Path) -> None:
    # The sessions folder is the samples' own folder: the worst case for a proposed name.
    folder = tmp_path / "samples"
    folder.mkdir()
    sample = folder / SMALL
    sample.write_text(Path(SAMPLES[SMALL]).read_text())
    sample.chmod(0o444)
    f = AppFiles.create(folder, tmp_path / "exports", samples={SMALL: str(sample)})
    state = WorkbenchState(str(sample), autosave=None)
    c = Controller(state, Host(), background=False, files=f)
    proposed = f.default_save_name(state.doc)
    assert proposed == SMALL.replace(".json", "-edited.json")
    state.apply({"op": "set", "index": 0, "field": "content", "value": "changed"})
    old_mask = os.umask(0o027)
    try:
        target = c.save(None)                        # Save with an empty box: the proposed name
    finally:
        os.umask(old_mask)
    assert target == (folder / proposed).resolve()
    assert json.loads(sample.read_text()) == json.loads(Path(SAMPLES[SMALL]).read_text())   # the sample untouched
    assert stat.S_IMODE(target.stat().st_mode) == 0o640          # 0666 less the umask, not a tempfile's 0600
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]   # no temporary file left
    assert f.default_save_name(state.doc) == proposed              # now the saved file: its own name
