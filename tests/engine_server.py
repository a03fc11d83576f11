"""`workbench serve-engine --model tiny` in a subprocess on a free port, for the remote-engine tests."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from browser import free_port

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def tiny_engine_server() -> Iterator[str]:
    """The server's base URL once it says it serves; stopped on the way out."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli.main", "serve-engine", "--model", "tiny",
                             "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] and lines.put(None), daemon=True).start()
    try:
        line = lines.get(timeout=120)
        assert line and line.startswith("serving tiny"), (line, proc.stderr.read() if proc.poll() is not None else "")
        yield line.rsplit(" on ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
