"""Render a template in a worker process: a hard deadline and a memory cap that a thread cannot give.

A thread can stop a template only between Python bytecodes; bounds.py keeps every single
operation small, but a template nobody reviewed gets a second wall: it runs in a child
process whose address space is capped (RLIMIT_AS, so a huge allocation fails at once with
MemoryError) and which is killed when the deadline passes. The parent then knows the line the
template was on: the child dumps its Python stack on SIGUSR1 (faulthandler, which works even
while the child is stuck in C code), and the template's debug info maps that to a template line.

This module is the parent side (render() hands it isolated renders); the child runs
worker_child.serve, and the two agree on worker_protocol.py. Workers are kept warm between
renders (the app renders on every keystroke): a pool hands out an idle one, or starts one; a
killed or crashed worker is replaced at once, in the background. The child imports only jinja2
and this folder (the package's `__init__` modules are stood in for), so a fresh one is ready in
about a tenth of a second. Needs POSIX pipes and signals: render() renders in-thread elsewhere.
"""

from __future__ import annotations

import atexit
import json
import os
import pickle
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from ..errors import TemplateError, TemplateLimitError
from .render_types import Rendered, RenderLimits
from .sandbox import compile_template
from .worker_protocol import ERROR_TYPES, HEADER, RenderRequest, write_frame

START_TIMEOUT_S = 60.0    # a fresh worker on a loaded machine; only the first render waits for it
DUMP_WAIT_S = 0.3         # for the stack dump after SIGUSR1, before the kill
MAX_IDLE = 4              # warm workers kept between renders

# The child's first statements: the parent's import path, then stand-ins for the `workbench` and
# `workbench.templates` packages so that importing worker_child loads jinja2 and this folder only.
_BOOT = """\
import json, sys, types
cfg = json.loads(sys.argv[1])
sys.path[:] = cfg["path"]
for name, path in cfg["packages"].items():
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module
from workbench.templates.worker_child import serve
serve()
"""


class _Worker:
    """One child process and its pipes. Used by one render at a time."""

    def __init__(self) -> None:
        here = Path(__file__).resolve().parent
        cfg = {"path": [p for p in sys.path if isinstance(p, str)],
               "packages": {"workbench": str(here.parent), "workbench.templates": str(here)}}
        self.stderr = tempfile.TemporaryFile()  # the child's warnings and its stack dumps
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT, json.dumps(cfg)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, start_new_session=True)
        self.ready = False

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        write_frame(self.proc.stdin, body)

    def receive(self, deadline: float) -> bytes | None:
        """One frame, or None if the deadline passed first; raises EOFError if the child is gone."""
        assert self.proc.stdout is not None
        head = _read(self.proc.stdout, HEADER.size, deadline)
        if head is None:
            return None
        (n,) = HEADER.unpack(head)
        return _read(self.proc.stdout, n, deadline + 5.0)  # the body follows its header at once

    def stderr_since(self, offset: int) -> str:
        self.stderr.seek(offset)
        return self.stderr.read(64 * 1024).decode("utf-8", "replace")

    def stderr_end(self) -> int:
        return self.stderr.seek(0, os.SEEK_END)

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()
        self.close()

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def _read(f: IO[bytes], n: int, deadline: float) -> bytes | None:
    fd = f.fileno()
    chunks, left = [], n
    while left:
        wait = deadline - time.monotonic()
        if wait <= 0:
            return None
        if not select.select([fd], [], [], min(wait, 3600.0))[0]:  # (select takes no infinite timeout)
            continue
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _Pool:
    """Warm workers, shared by the threads of this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Worker] = []
        self.pid = os.getpid()

    def take(self) -> _Worker:
        with self.lock:
            if self.pid != os.getpid():  # a forked child must not share its parent's workers
                self.idle, self.pid = [], os.getpid()
            while self.idle:
                w = self.idle.pop()
                if w.alive:
                    return w
                w.close()
        return _Worker()

    def give(self, w: _Worker) -> None:
        with self.lock:
            if w.alive and len(self.idle) < MAX_IDLE and self.pid == os.getpid():
                self.idle.append(w)
                return
        w.kill()

    def replace(self) -> None:
        """A worker was killed: start the next one now, so the next render finds it warm."""
        with self.lock:
            if not self.idle and self.pid == os.getpid():
                try:
                    self.idle.append(_Worker())
                except OSError:
                    pass

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for w in idle:
            w.kill()


_POOL = _Pool()
atexit.register(_POOL.close)


def render_isolated(source: str, name: str, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None,
                    add_generation_prompt: bool, kwargs: dict[str, Any], track: bool, track_generation: bool,
                    limits: RenderLimits, now: datetime | None) -> Rendered:
    """`render()` in a worker process (the same arguments; the result is the same Rendered).

    render() calls it on POSIX, once the source compiled (a syntax error needs no round trip).
    """
    request: RenderRequest = {
        "source": source, "name": name, "messages": messages, "tools": tools,
        "add_generation_prompt": add_generation_prompt, "kwargs": kwargs, "track": track,
        "track_generation": track_generation, "limits": {**asdict(limits), "isolate": False}, "now": now,
        "memory": limits.max_worker_bytes}
    try:
        body = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
        raise TemplateError(f"the render inputs cannot be sent to the render worker: {exc}", template=name,
                            hint="template variables must be plain data (str, numbers, lists, dicts)") from None
    try:
        w = _POOL.take()
    except OSError as exc:  # no process could be started (too many open files, no memory)
        raise TemplateError(f"cannot start the render worker: {exc}", template=name,
                            hint="free some resources, or render without isolation") from None
    offset = 0
    try:
        if not w.ready:
            _wait_ready(w, name)
        offset = w.stderr_end()
        w.send(body)
        reply = w.receive(time.monotonic() + limits.timeout_s + _grace(limits.timeout_s))
    except EOFError:
        _POOL.replace()
        raise _died(w, name, limits, offset) from None
    except OSError:  # the pipe broke: the worker is gone
        w.kill()
        _POOL.replace()
        raise TemplateError("the render worker stopped unexpectedly", template=name,
                            hint="try again; if it repeats, render without isolation to see the error") from None
    except BaseException:  # interrupted (KeyboardInterrupt) or a startup error: never leave it running
        w.kill()
        raise
    if reply is None:  # past the deadline, and the child did not stop itself: it is stuck in C code
        line = _stuck_line(w, offset, source)
        w.kill()
        _POOL.replace()
        raise TemplateLimitError(f"rendering ran longer than {limits.timeout_s:g} s; the render worker was "
                                 "stopped", template=name, line=line,
                                 hint="the template loops without end or computes something huge")
    try:
        data = json.loads(reply)
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except ValueError:
        w.kill()
        _POOL.replace()
        raise TemplateError("the render worker sent a malformed reply", template=name) from None
    text = None
    if "error" not in data:  # the text follows in a frame of its own (UTF-8, no JSON escaping to undo)
        try:
            raw = w.receive(time.monotonic() + 30.0)
        except EOFError:
            raw = None
        if raw is None:
            w.kill()
            _POOL.replace()
            raise TemplateError("the render worker stopped while sending the prompt", template=name)
        text = raw.decode("utf-8", "surrogatepass")  # a template may write a lone surrogate, as in-thread
    if data.get("restart"):
        w.kill()
        _POOL.replace()
    else:
        _POOL.give(w)
    try:
        if text is None:
            e = data["error"]
            line, hint = e.get("line"), e.get("hint")
            error = ERROR_TYPES.get(e.get("type"), TemplateError)(
                str(e.get("message", "rendering failed")), template=name,
                line=line if isinstance(line, int) else None, hint=hint if isinstance(hint, str) else None)
        else:
            starts = {int(k): int(v) for k, v in data["starts"].items()}
            tools_start = None if data["tools_start"] is None else int(data["tools_start"])
            return Rendered(text, starts, tools_start, [int(p) for p in data["gen_reads"]], int(data["steps"]))
    except (KeyError, TypeError, ValueError, AttributeError):
        raise TemplateError("the render worker sent a malformed reply", template=name) from None
    raise error


def _grace(timeout_s: float) -> float:
    # The child's own watchdog stops a Python loop at timeout_s with a precise error; the parent
    # waits a little longer before it kills a child stuck in C code.
    return min(0.5, 0.25 + timeout_s / 10)


def _wait_ready(w: _Worker, name: str) -> None:
    try:
        hello = w.receive(time.monotonic() + START_TIMEOUT_S)
    except EOFError:
        hello = None
    if hello is None or json.loads(hello).get("ready") is not True:
        detail = w.stderr_since(0).strip().splitlines()[-1:] or ["no output"]
        w.kill()
        raise TemplateError(f"the render worker did not start: {detail[0]}", template=name,
                            hint="check that this Python can import jinja2; or render without isolation")
    w.ready = True


def _died(w: _Worker, name: str, limits: RenderLimits, offset: int) -> TemplateError:
    try:
        code = w.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # it closed its output but lives on: end it
        w.proc.kill()
        code = w.proc.wait()
    text = w.stderr_since(offset)
    w.close()
    if "MemoryError" in text or code in (-signal.SIGKILL, -signal.SIGSEGV):
        return TemplateLimitError(f"the template ran out of memory (the render worker is limited to "
                                  f"{limits.max_worker_bytes / 2**30:g} GiB)", template=name,
                                  hint="the template builds something huge; raise RenderLimits.max_worker_bytes "
                                       "only for a really long prompt")
    return TemplateError(f"the render worker died (exit status {code})", template=name,
                         hint="render without isolation to see the error")


_FRAME = re.compile(r'File "<template>", line (\d+)')


def _stuck_line(w: _Worker, offset: int, source: str) -> int | None:
    """Ask the stuck child for its stack (faulthandler) and map the innermost template frame to a line."""
    try:
        os.kill(w.proc.pid, signal.SIGUSR1)
    except OSError:
        return None
    end = time.monotonic() + DUMP_WAIT_S
    text = ""
    while time.monotonic() < end and "<template>" not in text:  # the dump is written in one go
        time.sleep(0.01)
        text = w.stderr_since(offset)
    m = _FRAME.search(text)  # most recent call first
    if m is None:
        return None
    try:
        return compile_template(source).get_corresponding_lineno(int(m.group(1)))
    except Exception:  # the source compiled in the child; it compiles here (cached) just the same
        return None

