"""The wheel works outside the checkout: built from this tree as a release is (the sdist first, then
the wheel from the sdist), installed with the `ui` and `packs` extras into a fresh virtualenv in a
temporary folder, and run from another folder with its own WORKBENCH_HOME:

- `workbench app --no-show` opens the shipped sample session, and a real Chromium sees the token
  view with its tokens (the ES module and the sample both come from the installed package);
- a notebook in a real JupyterLab whose kernel is the fresh virtualenv's Python shows the
  `Workbench` widget, and the kernel checks that the widget's ES module and CSS are the package's
  files (the JupyterLab server and its front-end extensions are this test environment's, as with a
  kernel environment kept apart from the server's).

The fresh virtualenv gets its packages from the package registry, at the versions this environment
has (a constraints file): the widget front ends in the server speak the same protocol versions as
the kernel's, and what is tested is what the rest of the suite ran against. Nothing of the checkout
is importable there: no PYTHONPATH, and the processes run outside it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from browser import ROOT, AppServer, open_page

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

# What the build maps into the package (workbench/assets/, links to the top-level folders).
SHIPPED = {"widgets": ("*.js", "*.css"), "sample_sessions": ("*.json", "vars/*.json")}
# Not copied into the build folder: what git ignores here (caches, virtualenvs, build outputs).
NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis",
              ".oracles", ".cache")
# Variables that would let the fresh install's processes import this checkout, or another environment.
FOREIGN_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "CONDA_PREFIX")

BUILD_S = 300         # the sdist, then the wheel in pip's isolated build environment
INSTALL_S = 600       # the extras' packages from the registry (about 100 of them)
PAGE_MS = 30_000      # a fresh server's first page: Panel's or JupyterLab's bundle
KERNEL_MS = 30_000    # a kernel from the fresh virtualenv starts (its first imports compile)
WIDGET_MS = 60_000    # the cell runs: imports the installed package, loads the tokenizer, assembles
STEP_MS = 5_000
DEFAULT_SAMPLE = "support_chat.json"   # what `workbench app` and `Workbench()` open with no session
# The first test here builds and installs in its setup (BUILD_S twice, INSTALL_S): above the
# suite's per-test limit (pyproject.toml).
pytestmark = pytest.mark.timeout(2 * BUILD_S + INSTALL_S + 600)


@dataclass
class Install:
    """The built artifacts and the fresh virtualenv they went into."""
    sdist: Path
    wheel: Path
    venv: Path
    elsewhere: Path                      # the working folder of every process run from the install
    home: Path                           # their WORKBENCH_HOME

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
        return {**clean, "WORKBENCH_HOME": str(self.home),
                "PATH": f"{self.venv / 'bin'}{os.pathsep}{clean.get('PATH', '')}"}

    def run(self, code: str) -> str:
        p = subprocess.run([str(self.python), "-c", code], check=False, cwd=self.elsewhere, env=self.env(),
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr[-3000:]
        return p.stdout


def shipped_files() -> dict[str, bytes]:
    """The checkout's files that the package must carry, by their path inside the package."""
    out = {}
    for folder, patterns in SHIPPED.items():
        for pattern in patterns:
            for path in sorted((ROOT / folder).glob(pattern)):
                out[f"workbench/assets/{folder}/{path.relative_to(ROOT / folder).as_posix()}"] = path.read_bytes()
    assert len(out) > 10, out.keys()
    return out


def constraints() -> str:
    """This environment's distributions, one `name==version` a line (this project left out)."""
    pins = {}
    for dist in importlib.metadata.distributions():
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "").lower()
        if name and name != "prompt-workbench":
            pins[name] = f"{name}=={dist.version}"
    return "\n".join(sorted(pins.values())) + "\n"


def step(cmd: list[str], cwd: Path, timeout: float, what: str) -> None:
    p = subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       env={k: v for k, v in os.environ.items() if k not in FOREIGN_ENV})
    assert p.returncode == 0, f"{what} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Iterator[Install]:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("wheel")
    src, sdist_dir, dist, venv = tmp / "src", tmp / "sdist", tmp / "dist", tmp / "venv"
    # A copy, so that the build's egg-info and build/ stay out of the checkout; the links in
    # workbench/assets/ are copied as links, as git checks them out.
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    step([sys.executable, "-c", "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])",
          str(sdist_dir)], src, BUILD_S, "building the sdist")
    (sdist,) = sdist_dir.glob("prompt_workbench-*.tar.gz")
    # --no-cache-dir: pip would otherwise keep the built wheel under the sdist's path, and a later run
    # in a reused temporary folder could install that one.
    step([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-w", str(dist), str(sdist)],
         tmp, BUILD_S, "building the wheel from the sdist")
    (wheel,) = dist.glob("prompt_workbench-*.whl")

    step([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, 120, "creating the virtualenv")
    (tmp / "constraints.txt").write_text(constraints())
    # This environment's pip installs into the fresh one (--python): no pip bootstrapped there. No
    # bytecode compiled ahead: the processes compile what they import, a fraction of the install.
    step([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
          "--no-compile", "-c", str(tmp / "constraints.txt"), f"{wheel}[ui,packs]",
          "ipykernel"],   # what a JupyterLab user's kernel environment has besides the package
         tmp, INSTALL_S, "installing the wheel with the ui and packs extras")

    elsewhere, home = tmp / "elsewhere", tmp / "home"
    elsewhere.mkdir()
    home.mkdir()
    try:
        yield Install(sdist, wheel, venv, elsewhere, home)
    finally:
        # About 750 MB in some 20,000 files: not left behind in the temporary folders, and not waited
        # for either (on a disk mounted with `discard`, deleting them takes tens of seconds).
        subprocess.Popen(["rm", "-rf", "--", str(venv)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)


def expected_tokens() -> int:
    """The default sample's last turn with the default template, assembled by this checkout."""
    from workbench import Assembler, load_session

    session = load_session(ROOT / "sample_sessions" / DEFAULT_SAMPLE)
    return Assembler(template="qwen2.5").assemble(session.turn(None)).total_tokens


# ------------------------------------------------------------------------------ the artifacts
def test_the_sdist_and_the_wheel_carry_the_front_end_and_the_sample_sessions(installed: Install) -> None:
    want = shipped_files()
    with zipfile.ZipFile(installed.wheel) as whl:
        names = set(whl.namelist())
        got = {n: whl.read(n) for n in want if n in names}
        links = [i.filename for i in whl.infolist() if (i.external_attr >> 16) & 0o170000 == 0o120000]
    assert sorted(set(want) - set(got)) == [], "missing from the wheel"
    assert got == want and not links, "the wheel's copies differ from the checkout's files"
    prefix = installed.sdist.name.removesuffix(".tar.gz")
    with tarfile.open(installed.sdist) as sd:
        members = {m.name.removeprefix(prefix + "/"): m for m in sd.getmembers()}
        assert sorted(set(want) - set(members)) == [], "missing from the sdist"
        assert all(members[n].isfile() for n in want), "the sdist holds links, not files"
        assert {n: sd.extractfile(members[n]).read() for n in want} == want  # type: ignore[union-attr]


def test_the_installed_package_finds_them_outside_the_checkout(installed: Install) -> None:
    out = json.loads(installed.run(
        "import importlib.util, json, os, workbench\n"
        "from workbench.assets import folder, sample_sessions, widget_file\n"
        "print(json.dumps({'package': os.path.realpath(workbench.__file__),\n"
        "                  'widget': str(widget_file('token_view.js')),\n"
        "                  'samples': sample_sessions(), 'torch': importlib.util.find_spec('torch') is not None}))"))
    site = str(installed.venv.resolve())
    assert out["package"].startswith(site) and out["widget"].startswith(site), out
    assert sorted(out["samples"]) == sorted(p.name for p in (ROOT / "sample_sessions").glob("*.json"))
    assert all(p.startswith(site) for p in out["samples"].values()), out["samples"]
    assert not out["torch"], "the ui and packs extras pulled torch"


# ------------------------------------------------------------------------------ in a real browser
def test_the_installed_app_shows_the_token_view(installed: Install, browser) -> None:  # type: ignore[no-untyped-def]
    want = expected_tokens()
    server = AppServer(command=[str(installed.venv / "bin" / "workbench"), "app"], cwd=installed.elsewhere,
                       env=installed.env(), inherit_env=False, startup_s=90)   # first imports compile
    errors: list[str] = []
    try:
        page = open_page(browser, server.url, errors, step_ms=STEP_MS, first_ms=PAGE_MS)
        view = page.locator(".wb-token-view")
        expect(view.locator(".wb-header")).to_contain_text(f"{want} tokens", timeout=STEP_MS)
        expect(view.locator(".wb-special", has_text="<|im_start|>").first).to_be_attached()
        assert view.locator(".wb-seg").count() > 100, "not one segment per message"
        expect(page.locator(".wb-me-row").first, "no message editor").to_be_visible()
        expect(page.locator("select option", has_text="tool_agent.json").first,
               "the picker does not list the shipped samples").to_be_attached()
        page.context.close()
    finally:
        code = server.stop()
    assert not errors, f"errors in the page: {errors}"
    assert code == 0, f"the app did not stop cleanly ({code}): {server.stderr()}"
    assert (installed.home / "sessions").is_dir(), "the app did not make its folder in its WORKBENCH_HOME"


NOTEBOOK = "from_the_wheel.ipynb"
# The kernel runs from the fresh virtualenv: it asserts that the package and the widget's front-end
# files are the installed ones, then shows the workbench on the default sample.
WHEEL_CELL = """\
import os, sys
import workbench
from workbench.assets import widget_file
from workbench.ui.notebook import MessageEditor, TokenView, Workbench

site = os.path.realpath(sys.prefix)
for name in ("token_view.js", "token_view.css", "message_editor.js", "message_editor.css"):
    assert str(widget_file(name)).startswith(site), (name, widget_file(name), site)
assert os.path.realpath(workbench.__file__).startswith(site), workbench.__file__
assert str(TokenView._esm) == widget_file("token_view.js").read_text("utf-8")
assert str(TokenView._css) == widget_file("token_view.css").read_text("utf-8")
assert str(MessageEditor._esm) == widget_file("message_editor.js").read_text("utf-8")

Workbench(template="qwen2.5")"""


def test_the_notebook_widget_renders_from_the_wheel_in_jupyterlab(installed: Install, browser) -> None:  # type: ignore[no-untyped-def]
    from lab_server import LabServer, run_all_cells

    want = expected_tokens()
    lab = LabServer(kernel_python=str(installed.python),
                    kernel_env={"PYTHONPATH": "", "WORKBENCH_HOME": str(installed.home)})   # "" is unset
    page_errors: list[str] = []
    try:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell(WHEEL_CELL)]
        nbformat.write(nb, lab.root / NOTEBOOK)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.set_default_timeout(STEP_MS)
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        notebook = run_all_cells(page, lab, NOTEBOOK, page_ms=PAGE_MS, kernel_ms=KERNEL_MS, step_ms=STEP_MS)
        output = notebook.locator(".jp-OutputArea-output")
        view = output.locator(".wb-token-view")
        try:
            expect(view, "no .wb-token-view in the cell's output").to_be_visible(timeout=WIDGET_MS)
            expect(view.locator(".wb-header")).to_contain_text(f"{want} tokens", timeout=WIDGET_MS)
        except AssertionError as e:
            shown = output.all_inner_texts()
            raise AssertionError(f"{e}\noutput area: {[t[-1500:] for t in shown]}\n"
                                 f"page errors: {page_errors}") from None
        expect(view.locator(".wb-special", has_text="<|im_start|>").first).to_be_attached()
        expect(output.locator(".wb-message-editor .wb-me-row").first, "no message editor").to_be_visible()
        context.close()
    finally:
        code = lab.stop()
    assert not page_errors, f"JavaScript errors in the page: {page_errors}"
    assert code == 0, f"the JupyterLab server did not stop cleanly ({code}): {lab.log()}"
