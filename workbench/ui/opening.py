"""Pages that are slow to build, built off the app server's event loop (`workbench app`).

A page opened from a shared link (`?state=`) does whatever the link's sender chose: up to 32 MB of
messages to decode and assemble, a custom template that renders in its worker until its step budget
or its deadline stops it. The server has one event loop for every page; built there, such a page
stalled all the others (a 40 KB link: every page's keystrokes waited 10 s). Here it is built on a
thread of its own, at most OPENING_THREADS at once (more wait for one, their deadline running):
the page first shows one line saying what it opens, then the page itself, swapped in on the loop.

Deadline: a page not built within `deadline_s()` (OPEN_DEADLINE_S, or WORKBENCH_OPEN_DEADLINE_S)
gets the fallback page instead (the app's: the default session, and why, where a bad link says
so). A thread cannot be stopped from outside: the late build stops at its next step (`build` is
given a `check` to call between its slow steps: decoding, each assembly), the step it is in runs to
its end (bounded by the link's own limits: share.py), and what was built is closed, never shown.
So does a build whose page's session ended meanwhile (the tab closed; or a page so slow to connect
that Bokeh replaced the session it was served with, whose own page is built anew).

While it is built off the loop, the page must not touch the document: its host holds every timer
and hand-off (app.PanelHost) until `release()`, called on the loop once the page is in it. Panel
objects made on the thread are plain Python until then (their Bokeh models are made on the loop).
What the loop still does for such a page is what it does for any page: make its Bokeh models and
send them (the editor's text goes to the browser then): 1 to 2 s on 2 busy cores, as for a plain page.
"""

from __future__ import annotations

import html
import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

from .._optional import require
from ..errors import Cancelled, WorkbenchError
from .html import CSS

pn = require("panel", "the web app")
from panel.io.state import set_curdoc  # noqa: E402  (comes with panel)

OPEN_DEADLINE_S = 60.0      # a 40 KB link of four 8 MB messages took 10 s on the probe's machine
OPENING_THREADS = 2          # pages built at once (2 cores: more would only share them)
_SLOTS = threading.BoundedSemaphore(OPENING_THREADS)


def deadline_s() -> float:
    """OPEN_DEADLINE_S, unless WORKBENCH_OPEN_DEADLINE_S names another (seconds > 0): a slower
    machine, or the tests."""
    try:
        value = float(os.environ.get("WORKBENCH_OPEN_DEADLINE_S", ""))
    except ValueError:
        return OPEN_DEADLINE_S
    return value if 0 < value < float("inf") else OPEN_DEADLINE_S


class Built(Protocol):
    """A page built off the loop (app.WorkbenchApp)."""

    layout: Any

    def release(self) -> None: ...      # on the loop, once shown: its held timers and hand-offs go
    def close(self) -> None: ...        # never shown (too late, its tab closed): its work stops


def opening_html(note: str, error: str = "") -> str:
    said = f'<div class="wb-diag-error">{html.escape(error)}</div>' if error else ""
    return f'{said}<div class="wb-muted">{html.escape(note)}</div>'


class Opening:
    """One page being built on a thread: `layout` holds the line saying so, then the page.

    `build(check)` makes the page, calling `check()` between its slow steps (it raises Cancelled
    once the page is past its deadline); `fallback(error)` makes the page shown instead when `build`
    is late or fails (`error`: what happened, for the page to say); `late(seconds)` says the first.
    Both run on a thread with the page's document as Panel's current one, and return a `Built`."""

    def __init__(self, doc: Any, build: Callable[[Callable[[], None]], Built], fallback: Callable[[str], Built], *,
                 note: str, late: Callable[[float], str], deadline: float):
        self.doc = doc
        self._build, self._fallback, self._late = build, fallback, late
        self.deadline = deadline
        self.note = note
        self.status = pn.pane.HTML(opening_html(note), sizing_mode="stretch_width", stylesheets=[CSS],
                                   css_classes=["wb-opening"])
        self.layout = pn.Column(self.status, sizing_mode="stretch_width")
        self._lock = threading.Lock()
        self._state = "building"           # then "shown" (built in time) or "late" (the fallback's)
        self._timer: Any = None

    def start(self) -> Opening:
        self._timer = self.doc.add_timeout_callback(self._expire, int(self.deadline * 1000))
        threading.Thread(target=self._run, name="workbench-open", daemon=True).start()
        return self

    # on the thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        if not _SLOTS.acquire(timeout=self.deadline):
            return                         # past the deadline while waiting: _expire opened the fallback
        page: Built | None = None
        error = ""
        try:
            if self._state == "building":
                with set_curdoc(self.doc):
                    page = self._build(self._check)
        except Cancelled:
            pass                           # late: the fallback is shown (or being built)
        except WorkbenchError as exc:      # (the app's own: its session file, say)
            error = f"this page could not be opened: {exc}"
        except Exception as exc:  # noqa: BLE001 - the page never dies: the fallback says what happened
            error = f"this page could not be opened: unexpected {type(exc).__name__}: {exc}"
        finally:
            _SLOTS.release()
        if page is None:
            if error:
                self._fail(error)
            return
        with self._lock:
            late = self._state == "late"
            if not late:
                self._state = "shown"
        if late:
            page.close()                   # the fallback is shown already
        else:
            self._hand_over(page)

    def _check(self) -> None:
        if self._state == "late":
            raise Cancelled("the page did not open within its deadline: its build stops here")
        if self.doc.session_context is None:
            # The page's session is gone: its tab closed, or Bokeh replaced it with a new one for a
            # page whose websocket came after the session's expiry (a slow page): that one builds anew.
            raise Cancelled("the page's session ended: its build stops here")

    def _fail(self, error: str) -> None:
        with self._lock:
            if self._state != "building":
                return
            self._state = "late"
        self._open_fallback(error)

    def _open_fallback(self, error: str) -> None:
        try:
            with set_curdoc(self.doc):
                page = self._fallback(error)
        except Exception as exc:  # noqa: BLE001 - nothing else to show: the reasons, in place of the page
            message = f"{error}; the default session did not open either: {type(exc).__name__}: {exc}"
            self._on_loop(lambda: setattr(self.status, "object", opening_html("", message)))
            return
        self._hand_over(page)

    def _hand_over(self, page: Built) -> None:
        if not self._on_loop(lambda: self._show(page)):
            page.close()                   # the tab closed meanwhile: nothing will show it

    def _on_loop(self, fn: Callable[[], None]) -> bool:
        """`fn` on the document's next tick (its one thread-safe method); False when the page's
        session is gone (Bokeh destroyed the document: its callback lists with it)."""
        if self.doc.session_context is None:
            return False
        try:
            self.doc.add_next_tick_callback(fn)
        except AttributeError:
            return False
        return True

    # on the loop -----------------------------------------------------------------------------------
    def _show(self, page: Built) -> None:
        if self._timer is not None:
            try:
                self.doc.remove_timeout_callback(self._timer)
            except ValueError:
                pass                       # it ran already (and found the page built)
            self._timer = None
        with set_curdoc(self.doc):
            self.layout.objects = [page.layout]
        page.release()

    def _expire(self) -> None:
        self._timer = None
        with self._lock:
            if self._state != "building":
                return
            self._state = "late"
        error = self._late(self.deadline)
        self.status.object = opening_html("opening the default session instead…", error)
        threading.Thread(target=self._open_fallback, args=(error,), name="workbench-open-fallback",
                         daemon=True).start()
