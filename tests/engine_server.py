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
def tiny_engine_server(*extra: str, clean_exit: bool = False) -> Iterator[str]:
    """The server's base URL (ending /v1) once it says it serves; stopped on the way out. `extra`:
    more serve-engine options; `clean_exit`: its stderr must hold no traceback and no error line."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli.main", "serve-engine", "--model", "tiny",
                             "--port", str(port), *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    lines: queue.Queue[str | None] = queue.Queue()
    err: list[str] = []     # drained as it comes: a full stderr pipe would stall the server
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] and lines.put(None), daemon=True).start()
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        line = lines.get(timeout=180)
        assert line and line.startswith("serving tiny"), (line, "".join(err))
        yield line.rsplit(" on ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        reader.join(timeout=30)
    if clean_exit:
        text = "".join(err)
        assert "Traceback" not in text and "serve-engine:" not in text, text
