"""A real JupyterLab server for browser tests: `python -m jupyter lab` in a subprocess, in a
temporary root directory, on a free port of 127.0.0.1, with a random token and no browser.

Isolation: the server's config, data and runtime directories (and the kernel's IPython directory)
are temporary, so nothing under the home directory is read or written. The data directory holds
one kernelspec, `python3`, whose argv starts with this interpreter (sys.executable): the notebook's
kernel is the test environment's Python, with `workbench` and ipykernel importable. Another Python
(`kernel_python`, with ipykernel installed) can be the kernel instead, with its own environment
variables (`kernel_env`): tests/test_wheel.py runs a fresh virtualenv's, where the wheel is installed.
JUPYTER_PREFER_ENV_PATH=0 puts that temporary data directory first; the environment's own data
directory (sys.prefix/share/jupyter) stays on the search path after it, which is where the
front-end extensions the widgets need are installed (`@jupyter-widgets/jupyterlab-manager` from
jupyterlab_widgets, `anywidget`).

(Not named jupyter_server.py: the tests directory is on sys.path, and that name would shadow the
jupyter_server package itself.)
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from browser import free_port

# Page config for the test server: no announcement/news toast over the notebook (it would also ask
# the network), nothing else changed.
PAGE_CONFIG = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}


class LabServer:
    """JupyterLab on 127.0.0.1:<free port>; `url_for(path)` once `/api/status` answers."""

    def __init__(self, *, startup_s: float = 60.0, kernel_python: str = sys.executable,
                 kernel_env: dict[str, str] | None = None):
        self.tmp = Path(tempfile.mkdtemp(prefix="wb-lab-"))
        self.root = self.tmp / "root"                       # the notebooks the server serves
        config, data, runtime = self.tmp / "config", self.tmp / "data", self.tmp / "runtime"
        for d in (self.root, config, data, runtime):
            d.mkdir()
        (config / "labconfig").mkdir()
        (config / "labconfig" / "page_config.json").write_text(json.dumps(PAGE_CONFIG))
        kernel = data / "kernels" / "python3"
        kernel.mkdir(parents=True)
        (kernel / "kernel.json").write_text(json.dumps({
            "argv": [kernel_python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "metadata": {"debugger": True},
            **({"env": kernel_env} if kernel_env else {}),
        }, indent=1))

        env = {k: v for k, v in os.environ.items()
               if k not in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_TOKEN", "JUPYTER_PLATFORM_DIRS")}
        env.update(JUPYTER_CONFIG_DIR=str(config), JUPYTER_DATA_DIR=str(data), JUPYTER_RUNTIME_DIR=str(runtime),
                   JUPYTER_PREFER_ENV_PATH="0", IPYTHONDIR=str(self.tmp / "ipython"),
                   JUPYTERLAB_SETTINGS_DIR=str(config / "lab" / "user-settings"),
                   JUPYTERLAB_WORKSPACES_DIR=str(config / "lab" / "workspaces"),
                   PYTHONUNBUFFERED="1")
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", "--no-browser",
             "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
             f"--ServerApp.root_dir={self.root}", f"--IdentityProvider.token={self.token}",
             "--ServerApp.terminals_enabled=False", "--ServerApp.allow_root=True",   # CI containers run as root
             "--LabApp.extension_manager=readonly",    # no extension manager asking a package registry
             "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            cwd=self.root, env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        atexit.register(self.stop)   # a test run that dies without its fixture's teardown leaves no server
        self.started_s = self._wait_until_up(startup_s)

    # ------------------------------------------------------------------------------------- access
    def url_for(self, path: str) -> str:
        """`path` on this server with the token (the browser's first page logs in with it)."""
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{sep}token={self.token}"

    def request(self, path: str, method: str = "GET", timeout: float = 10.0) -> Any:
        """The REST API, authenticated by the token; the JSON answer (None when empty)."""
        req = urllib.request.Request(f"{self.base}/{path.lstrip('/')}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def log(self) -> str:
        """The server's output so far (its last 4000 characters)."""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-4000:]

    # ---------------------------------------------------------------------------------- lifecycle
    def _wait_until_up(self, startup_s: float) -> float:
        t0 = time.monotonic()
        last = ""
        while time.monotonic() - t0 < startup_s:
            if self.proc.poll() is not None:
                log = self.log()
                self.stop()
                raise RuntimeError(f"`jupyter lab` exited ({self.proc.returncode}) before answering: {log}")
            try:
                self.request("/api/status", timeout=2)
                return time.monotonic() - t0
            except (OSError, urllib.error.URLError, ValueError) as e:   # not listening yet
                last = str(e)
            time.sleep(0.25)
        log = self.log()
        self.stop()
        raise TimeoutError(f"`jupyter lab` did not answer /api/status within {startup_s:.0f} s "
                           f"(last: {last}): {log}")

    def stop(self) -> int:
        """Shut down the kernels, then the server (terminate, then kill); remove the temporary root."""
        if self.proc.poll() is None:
            try:
                for k in self.request("/api/kernels") or []:
                    self.request(f"/api/kernels/{k['id']}", method="DELETE", timeout=15)
            except (OSError, urllib.error.URLError, ValueError):
                pass   # the server shuts its kernels down on terminate as well
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return self.proc.returncode


# ------------------------------------------------------------------------------ the lab page
def watch_kernel_connection(page) -> list[str]:  # type: ignore[no-untyped-def]
    """The URLs of the page's kernel websockets that received a kernel_info_reply, as they do.

    The notebook's execution indicator says "idle" before the page has connected to the kernel at
    all (idle, then connecting, unknown, idle): "Run All Cells" in that window renders the markdown
    and leaves the code cell unrun ("[ ]:"). A kernel_info_reply on the page's own kernel
    connection is the first sure sign that the kernel will take an execute request.
    """
    ready: list[str] = []

    def on_websocket(ws) -> None:  # type: ignore[no-untyped-def]
        if "/api/kernels/" not in ws.url:
            return

        def on_frame(payload: str | bytes) -> None:
            data = payload if isinstance(payload, bytes) else payload.encode("utf-8", "replace")
            if b"kernel_info_reply" in data and ws.url not in ready:
                ready.append(ws.url)

        ws.on("framereceived", on_frame)

    page.on("websocket", on_websocket)
    return ready


def wait_until(page, done, timeout_ms: int, what: str) -> None:  # type: ignore[no-untyped-def]
    """Poll `done()` while Playwright delivers the page's events; fail with `what` after the time box."""
    deadline = time.monotonic() + timeout_ms / 1000
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout_ms / 1000:.0f} s")
        page.wait_for_timeout(100)


def run_all_cells(page, lab: LabServer, name: str, *, page_ms: int, kernel_ms: int,  # type: ignore[no-untyped-def]
                  step_ms: int):
    """Open notebook `name` of `lab` in `page`, wait until its kernel takes requests, "Run All
    Cells", and wait until the last code cell has started; the notebook panel's locator."""
    from playwright.sync_api import expect

    kernel_ready = watch_kernel_connection(page)
    page.goto(lab.url_for(f"lab/tree/{name}"), timeout=page_ms)
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    last = notebook.locator(".jp-CodeCell").last
    expect(last, f"{name} did not open in JupyterLab").to_be_visible(timeout=page_ms)
    wait_until(page, lambda: kernel_ready, kernel_ms, "the page got no kernel_info_reply from the kernel")
    expect(notebook.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']"),
           "the notebook's kernel did not report idle").to_be_attached(timeout=kernel_ms)

    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()   # "Run All Cells"
    expect(last.locator(".jp-InputPrompt"), "Run All Cells did not run the code cell"
           ).not_to_have_text("[ ]:", timeout=step_ms)
    return notebook
