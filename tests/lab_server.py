"""A real JupyterLab server for browser tests: `python -m jupyter lab` in a subprocess, in a
temporary root directory, on a free port of 127.0.0.1, with a random token and no browser.

Isolation: the server's config, data and runtime directories (and the kernel's IPython directory)
are temporary, so nothing under the home directory is read or written. The data directory holds
one kernelspec, `python3`, whose argv starts with this interpreter (sys.executable): the notebook's
kernel is the test environment's Python, with `workbench` and ipykernel importable.
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

from browser import free_port

# Page config for the test server: no announcement/news toast over the notebook (it would also ask
# the network), nothing else changed.
PAGE_CONFIG = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}


class LabServer:
    """JupyterLab on 127.0.0.1:<free port>; `url_for(path)` once `/api/status` answers."""

    def __init__(self, *, startup_s: float = 60.0):
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
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "metadata": {"debugger": True},
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
