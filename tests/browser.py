"""Real-browser test helpers: the system Chromium driven by Playwright, and `workbench app` run as
a subprocess on a free port.

Playwright never downloads a browser here: it launches the distribution's Chromium (Debian's
`chromium` package) through `executable_path`. Set WORKBENCH_CHROMIUM to use another binary.
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")


def find_chromium() -> str | None:
    """The Chromium to drive: $WORKBENCH_CHROMIUM, else the first of CHROMIUM_NAMES on PATH."""
    env = os.environ.get("WORKBENCH_CHROMIUM")
    if env:
        return env
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def launch_args() -> list[str]:
    # Chromium's sandbox fails as root and in containers without user namespaces (CI); a headless
    # page of our own local server needs none.
    return ["--no-sandbox"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_command() -> list[str]:
    """`workbench app` through main.py once it is registered there, else through its own module."""
    from workbench.cli.main import build_parser
    try:
        build_parser().parse_args(["app", "--no-show"])
        return [sys.executable, "-m", "workbench.cli.main", "app"]
    except Exception:  # noqa: BLE001 - not registered yet: the module runs the same command
        return [sys.executable, "-m", "workbench.cli.app"]


class AppServer:
    """`workbench app ARGS --port FREE --no-show` in a subprocess; `url` once it says it serves.

    By default this checkout's app (app_command()) in ROOT, with this process's environment plus
    `env`; `command`, `cwd` and `inherit_env=False` run another install's `workbench app` elsewhere
    with `env` alone (tests/test_wheel.py)."""

    def __init__(self, *args: str, startup_s: float = 30.0, env: dict[str, str] | None = None,
                 command: list[str] | None = None, cwd: Path = ROOT, inherit_env: bool = True):
        self.port = free_port()
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([*(command or app_command()), *args, "--port", str(self.port), "--no-show"],
                                     cwd=cwd, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                     env={**(os.environ if inherit_env else {}), **(env or {})})
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + startup_s
        self.url = ""
        while not self.url:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                self.stop()
                raise TimeoutError(f"`workbench app` did not print its URL within {startup_s:.0f} s: "
                                   f"{self.stderr()}") from None
            if line is None:
                self.stop()
                raise RuntimeError(f"`workbench app` exited ({self.proc.returncode}): {self.stderr()}")
            if line.startswith("serving on "):
                self.url = line.split("serving on ", 1)[1].strip()

    def stderr(self, tail: int | None = 2000) -> str:
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace")
        return text[-tail:] if tail else text

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode


@contextmanager
def serving(*args: str, **kwargs: Any) -> Iterator[AppServer]:
    """An AppServer for a `with` block (a module's fixture), stopped at its end: cleanly, or the
    test run says so with the server's log."""
    app = AppServer(*args, **kwargs)
    try:
        yield app
    finally:
        code = app.stop()
    assert code == 0, f"the server did not stop cleanly ({code}): {app.stderr()}"


def open_page(browser, url: str, errors: list[str], *, step_ms: int, first_ms: int,  # type: ignore[no-untyped-def]
              prepare=None, local: str | None = None):
    """A page of the app at `url` once its token view shows; the page's errors, and any request
    that leaves the local server (offline by design: no CDN; `local`, the server's address, when
    `url` has a query), collected in `errors`. `prepare(page)` runs before it loads (to watch or
    route its websockets)."""
    from playwright.sync_api import expect
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(step_ms)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith((local or url, "data:", "blob:", "about:"))
            else errors.append(f"non-local request {r.url}"))
    if prepare is not None:
        prepare(page)
    page.goto(url, timeout=first_ms)
    expect(page.locator(".wb-seg").first, "no token view").to_be_visible(timeout=first_ms)
    return page


def checked_page(browser, url: str, *, step_ms: int, first_ms: int):  # type: ignore[no-untyped-def]
    """For a pytest fixture: `open_page`, yielded; afterwards its context closed and no page error
    or non-local request allowed."""
    errors: list[str] = []
    page = open_page(browser, url, errors, step_ms=step_ms, first_ms=first_ms)
    yield page
    page.context.close()
    assert not errors, f"errors in the page: {errors}"


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.05) -> None:
    """Poll `condition` until it holds; an AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step_s)


# A test's pages start from the session file, not from another test's edits: those live on in the
# server's autosave folder, and an autosave is written AUTOSAVE_MS (0.4 s) after an edit. No fixed
# wait covers that on a loaded machine; these conditions do. A page about to close waits until its
# last edit is on disk (`autosave_settled`), so nothing of it lands later; the next test clears the
# folder and checks what its page opened (`from_the_file`): one that restored an autosave anyway
# (an edit the file status had not shown yet when its page closed) is reverted to the file.
RESTORED = "restored your unsaved edits"


def autosave_settled(page, step_ms: int) -> None:  # type: ignore[no-untyped-def]
    """Once the page's file status no longer says "autosaving…": the server has its last edit on disk."""
    from playwright.sync_api import expect
    expect(page.locator(".wb-file-status"), "an edit that never reached the autosave file").not_to_contain_text(
        "autosaving", timeout=step_ms)


def from_the_file(page, step_ms: int) -> None:  # type: ignore[no-untyped-def]
    """The page shows the session file: an autosave it restored (another test's) is reverted."""
    from playwright.sync_api import expect
    status = page.locator(".wb-file-status")
    if RESTORED in (status.text_content() or ""):
        page.get_by_role("button", name="Revert").click()
        expect(status).not_to_contain_text(RESTORED, timeout=step_ms)


def clear_autosaves(home: Path) -> None:
    """Another test's autosaves, dropped (each page closed once its own was written)."""
    shutil.rmtree(home / "autosave", ignore_errors=True)


@contextmanager
def app_pages(browser, server: "AppServer", home: Path, *, step_ms: int,  # type: ignore[no-untyped-def]
              first_ms: int) -> Iterator[Callable[..., Any]]:
    """Opens pages of the app (each its own state, no autosave of another test's edits); on the way
    out they are closed, once their edits are autosaved, and none may have logged a page error."""
    clear_autosaves(home)
    errors: list[str] = []
    opened = []

    def open_(url: str | None = None):  # type: ignore[no-untyped-def]
        page = open_page(browser, url or server.url, errors, step_ms=step_ms, first_ms=first_ms, local=server.url)
        if url is None:
            from_the_file(page, step_ms)
        opened.append(page)
        return page

    yield open_
    for p in opened:
        autosave_settled(p, step_ms)
        p.context.close()
    assert not errors, f"errors in the page: {errors}"
