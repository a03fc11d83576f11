"""The render worker's child side: a loop that renders what the parent sends (worker.py starts it).

It imports only jinja2 and this folder (the parent stands in for the package `__init__`
modules), so a fresh worker is ready in about a tenth of a second. The frames and the request
are in worker_protocol.py.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import pickle
import resource
import signal
import sys
from typing import Any

from ..errors import TemplateError, TemplateLimitError, WorkbenchError
from .render import render
from .render_types import RenderLimits
from .worker_protocol import ERROR_TYPES, HEADER, RenderRequest, write_frame


def serve() -> None:
    """The worker's loop: read a request, render it, answer; exit when the parent closes the pipe."""
    _die_with_parent()
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass
    # The protocol gets its own copy of stdout; anything printed by accident goes to stderr.
    stdin, stdout = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    write_frame(stdout, json.dumps({"ready": True}).encode())
    while True:
        head = stdin.read(HEADER.size)
        if len(head) < HEADER.size:
            return
        req: RenderRequest = pickle.loads(stdin.read(HEADER.unpack(head)[0]))
        _limit_memory(req["memory"])
        reply: dict[str, Any]
        text = b""
        try:
            out = render(req["source"], req["name"], req["messages"], tools=req["tools"],
                         add_generation_prompt=req["add_generation_prompt"], kwargs=req["kwargs"],
                         track=req["track"], track_generation=req["track_generation"],
                         limits=RenderLimits(**req["limits"]), now=req["now"])
            text = out.text.encode("utf-8", "surrogatepass")
            reply = {"starts": out.starts, "tools_start": out.tools_start, "gen_reads": out.gen_reads,
                     "steps": out.steps}
        except WorkbenchError as exc:
            # After a template hit a limit (memory, time, a huge value) the next render gets a
            # fresh process: nothing the hostile one left behind (heap, threads) carries over.
            reply = {"error": _error(exc), "restart": isinstance(exc, TemplateLimitError)}
        except MemoryError:
            reply = {"error": {"type": "TemplateLimitError", "message": "the template ran out of memory",
                               "hint": "the template builds something huge"}, "restart": True}
        except Exception as exc:  # a bug here, not in the template: report it, start afresh
            reply = {"error": {"type": "TemplateError", "message": f"{type(exc).__name__}: {exc}"}, "restart": True}
        write_frame(stdout, json.dumps(reply).encode())
        if "error" not in reply:
            write_frame(stdout, text)
        if reply.get("restart"):
            return


def _error(exc: WorkbenchError) -> dict[str, Any]:
    """The parts of a TemplateError, to build the same error in the parent."""
    template, line = getattr(exc, "template", None), getattr(exc, "line", None)
    message = exc.message
    prefix = (template or "template") + (f", line {line}" if line is not None else "") + ": "
    if isinstance(exc, TemplateError) and message.startswith(prefix):
        message = message[len(prefix):]
    kind = type(exc).__name__ if type(exc).__name__ in ERROR_TYPES else "TemplateError"
    return {"type": kind, "message": message, "line": line, "hint": exc.hint}


def _limit_memory(limit: int) -> None:
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ValueError, OSError):  # not supported here (e.g. macOS): the deadline still holds
        pass


def _die_with_parent() -> None:
    """Linux: the kernel kills the worker if the parent dies, even while it is stuck in C code."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent is already gone
            os._exit(0)
    except (OSError, AttributeError):
        pass
