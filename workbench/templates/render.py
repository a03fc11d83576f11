"""Render a chat template, in the sandbox, and see where each message lands.

We render by consuming the template's generator piece by piece. The messages
the template sees are dict subclasses that note the output position whenever
the template reads one of their fields; from those notes we learn where each
message's text starts in the output, without rendering prefixes again (which
would cost O(n^2)). Reading a message through the main `for` loop counts more
than a lookup by index (`messages[0]`, `messages[i + 1]`), because templates
peek at neighbours while rendering a message.

Guards (errors carry the template line):
- every operation that can build a huge value is checked before it runs (bounds.py), so no
  single C call (big integer arithmetic, string repetition, a JSON dump) outlives the deadline;
- the output is counted before each piece goes on (to `sink`, i.e. the tokenizer): at most
  `max_output_chars`, and past FREE_OUTPUT_CHARS at most `max_expansion` times the input, since
  a chat template formats its input; a template that writes far more only feeds the tokenizer;
- loop iterations, the items filters walk, calls and attribute reads are counted against a budget
  of steps (steps.py: `max_steps`, widened in proportion to the input), and macros nest only so deep,
  so a template that loops without writing anything ends in milliseconds, at its line;
- a watchdog stops what is left that spins (a deadline: the last resort);
- `isolate=True` renders in a worker process (worker.py) with a hard deadline (the worker is
  killed) and a memory cap: for templates nobody reviewed, where a thread is not enough.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from datetime import datetime
from typing import Any, SupportsIndex, cast, overload

import jinja2

from ..errors import TemplateError, TemplateLimitError, TemplateSecurityError, TemplateSyntaxError
from . import bounds, steps
from .bounds import TemplateBoundError
from .render_types import Rendered, RenderLimits
from .sandbox import TemplateRaised, compile_template, template_line

# Output up to this size is always allowed, whatever the input: a template's own text and its
# per-message markup for a long conversation. Even a pathological text this long (one 2M-char
# word) tokenizes in about half a second.
FREE_OUTPUT_CHARS = 2 * 1024 * 1024


# What the template reads: chat messages and tool schemas are JSON-like dicts of any shape.
MessageList = list[dict[str, Any]]
ToolList = list[dict[str, Any]]


class _Tracker:
    __slots__ = ("pos", "passes", "index_first", "tools_first", "gen_reads")

    def __init__(self) -> None:
        self.pos = 0
        self.gen_reads: list[int] = []           # output positions where add_generation_prompt was tested
        self.passes: list[dict[int, int]] = []   # per `for` pass over messages: index -> first read position
        self.index_first: dict[int, int] = {}    # index -> first read through messages[k]
        self.tools_first: int | None = None


class _Msg(dict[str, Any]):
    """A message dict that reports reads to the tracker (invisible to the sandboxed template)."""

    __slots__ = ("_t", "_i", "_p")
    _wb_plain_dict = True   # no public attribute beyond dict's: the sandbox reads `m.role` as an item at once
    _t: _Tracker
    _i: int
    _p: int | None      # the `for` pass it was read in; None: a lookup by index

    def _note(self) -> None:
        t, i, p = self._t, self._i, self._p
        if p is None:
            if i not in t.index_first:
                t.index_first[i] = t.pos
        else:
            d = t.passes[p]
            if i not in d:
                d[i] = t.pos

    def __getitem__(self, key: str) -> Any:
        self._note()
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        self._note()
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        self._note()
        return dict.__contains__(self, key)


def _wrap(t: _Tracker, i: int, m: dict[str, Any], p: int | None) -> _Msg:
    w = _Msg(m)
    w._t, w._i, w._p = t, i, p
    return w


class _Messages(list[_Msg]):
    """The `messages` list: iteration opens a tracked pass; indexing gives lookup wrappers."""

    __slots__ = ("_t", "_idx", "_raw")

    def __init__(self, t: _Tracker, raw: MessageList, idx: list[int]):
        super().__init__(_wrap(t, i, m, None) for i, m in zip(idx, raw))
        self._t, self._idx, self._raw = t, idx, raw

    def __iter__(self) -> Iterator[_Msg]:
        t = self._t
        t.passes.append({})
        p = len(t.passes) - 1
        for i, m in zip(self._idx, self._raw):
            yield _wrap(t, i, m, p)

    @overload
    def __getitem__(self, k: SupportsIndex) -> _Msg: ...
    @overload
    def __getitem__(self, k: slice) -> list[_Msg]: ...

    def __getitem__(self, k: SupportsIndex | slice) -> _Msg | list[_Msg]:
        if isinstance(k, slice):
            if k.step in (None, 1):
                return _Messages(self._t, self._raw[k], self._idx[k])
            return list(list.__getitem__(self, k))
        return list.__getitem__(self, k)


class _GenFlag:
    """A true `add_generation_prompt` that notes where the template tests it.

    The last test is where the generation prompt starts, which saves a second render.
    Only used for the shipped templates, where tests check it against the second render.
    """

    __slots__ = ("_t",)

    def __init__(self, t: _Tracker) -> None:
        self._t = t

    def __bool__(self) -> bool:
        self._t.gen_reads.append(self._t.pos)
        return True

    def __eq__(self, other: object) -> bool:
        return other is True or other == 1

    def __hash__(self) -> int:
        return hash(True)

    def __str__(self) -> str:
        return "True"

    __repr__ = __str__


class _Tools(list[dict[str, Any]]):
    """The `tools` list: notes where the template first loops over it."""

    __slots__ = ("_t",)
    _t: _Tracker

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._t.tools_first is None:
            self._t.tools_first = self._t.pos
        return list.__iter__(self)


class _Monitor:
    """One daemon thread that watches every render's deadline (a thread per render costs ~0.1 ms).

    It sleeps until the nearest deadline, at most a second; a render whose deadline comes
    sooner than that wakes it. When a deadline passes, the rendering thread gets _Timeout
    raised inside it (templates run in pure Python, so it lands between bytecodes).
    """

    POLL_S = 1.0

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.active: set[_Watchdog] = set()
        self.wake_at = float("inf")
        self.thread: threading.Thread | None = None

    def add(self, w: "_Watchdog") -> None:
        with self.cv:
            self.active.add(w)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="workbench-render-watchdog", daemon=True)
                self.thread.start()
            if w.deadline < self.wake_at:
                self.cv.notify()

    def _run(self) -> None:
        with self.cv:
            while True:
                now = time.monotonic()
                for w in [w for w in self.active if w.deadline <= now]:
                    self.active.discard(w)
                    w.fired = True
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(w.tid), ctypes.py_object(_Timeout))
                nearest = min((w.deadline for w in self.active), default=now + self.POLL_S)
                self.wake_at = min(nearest, now + self.POLL_S)
                self.cv.wait(max(self.wake_at - now, 0.0))


_MONITOR = _Monitor()


class _Watchdog:
    """Raises _Timeout inside the rendering thread when its time runs out."""

    __slots__ = ("tid", "deadline", "fired")

    def __init__(self, timeout: float) -> None:
        self.tid = threading.get_ident()
        self.deadline = time.monotonic() + timeout
        self.fired = False

    def __enter__(self) -> "_Watchdog":
        _MONITOR.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        with _MONITOR.cv:
            _MONITOR.active.discard(self)
            if self.fired:  # clear an exception that was set but not yet raised
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.tid), None)


class _Timeout(Exception):
    pass


def compile_checked(source: str, name: str) -> jinja2.Template:
    try:
        return compile_template(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateSyntaxError(exc.message or "syntax error", template=name, line=exc.lineno,
                                  hint="fix the Jinja syntax at that line") from None
    except RecursionError:
        raise TemplateSyntaxError("expressions or blocks are nested too deeply to compile", template=name,
                                  hint="split the expression, or use {% set %} for the inner parts") from None
    except (jinja2.TemplateError, SyntaxError, ValueError, OverflowError, MemoryError) as exc:
        # e.g. an integer literal longer than Python converts (4,300 digits), too many nested blocks
        raise TemplateSyntaxError(f"cannot compile: {type(exc).__name__}: {exc}", template=name,
                                  hint="fix the template source") from None


class _Budget:
    """How much output this render may write (the module docstring says why)."""

    __slots__ = ("cap", "allowed", "expansion", "inputs")

    def __init__(self, limits: RenderLimits, inputs: tuple[MessageList, ToolList | None, dict[str, Any]]) -> None:
        self.cap = limits.max_output_chars
        self.expansion = limits.max_expansion
        self.inputs = inputs
        self.allowed = self.cap if self.expansion is None else min(self.cap, FREE_OUTPUT_CHARS)

    def over(self, pos: int) -> str | None:
        """Called when the output passes `allowed`: widen it once by the input, or say what was passed."""
        if self.allowed < self.cap and self.expansion is not None:
            messages, tools, kwargs = self.inputs
            quick = sum(len(c) for m in messages if isinstance(c := m.get("content"), str))
            allowed = min(self.cap, FREE_OUTPUT_CHARS + int(self.expansion * quick))
            if pos > allowed:  # count everything the template can print: tools, kwargs, nested parts
                size = bounds.weight([messages, tools, kwargs], limit=self.cap)
                allowed = min(self.cap, FREE_OUTPUT_CHARS + int(self.expansion * size))
            self.allowed = allowed
            if pos <= allowed:
                return None
            if allowed < self.cap:
                return (f"output passed the cap of {allowed:,} characters for this input ({self.expansion:g} x "
                        f"its size plus {FREE_OUTPUT_CHARS:,}; RenderLimits.max_expansion)")
        return f"output passed the cap of {self.cap:,} characters"


def render(source: str, name: str, messages: MessageList, *, tools: ToolList | None,
           add_generation_prompt: bool, kwargs: dict[str, Any], track: bool = False,
           track_generation: bool = False, limits: RenderLimits = RenderLimits(),
           sink: Callable[[str], None] | None = None, now: datetime | None = None) -> Rendered:
    """Render like transformers' apply_chat_template(tokenize=False); optionally track message starts.

    `now`: the instant `strftime_now` formats (default: the wall clock at the call).
    With `limits.isolate` the template runs in a worker process (POSIX); `sink` then gets the whole
    text at the end instead of pieces as they come.
    """
    if limits.isolate and os.name == "posix":
        compile_checked(source, name)  # syntax errors without a round trip; compiling is bounded
        # Imported here, not at the top: the worker's child imports this module and needs none of it.
        from .worker import render_isolated
        out = render_isolated(source, name, messages, tools=tools, add_generation_prompt=add_generation_prompt,
                              kwargs=kwargs, track=track, track_generation=track_generation, limits=limits, now=now)
        if sink is not None:
            sink(out.text)
        return out
    # (Without POSIX pipes and signals, on Windows, an isolated render runs here too: the same bounds
    # on every operation, but no memory cap and no kill.)
    t = _Tracker()
    msgs: Sequence[dict[str, Any]] = messages
    tl: Sequence[dict[str, Any]] | None = tools
    if track:
        msgs = _Messages(t, messages, list(range(len(messages))))
        if tools is not None:
            tl = _Tools(tools)
            tl._t = t
    ctx = dict(kwargs)
    agp: Any = _GenFlag(t) if (track_generation and add_generation_prompt) else add_generation_prompt
    ctx.update(messages=msgs, tools=tl, documents=None, add_generation_prompt=agp)
    parts: list[str] = []
    budget = _Budget(limits, (messages, tools, kwargs))
    allowed = budget.allowed
    gen: Generator[str, None, None] | None = None
    step_budget = steps.Steps(limits.max_steps, limits.steps_per_input, [messages, tools, kwargs])
    try:
        # (the watchdog is entered last, so it is disarmed before the bounds are reset)
        with bounds.bounded(bounds.Bounds(limits.max_output_chars, now)), \
                steps.budget(step_budget), \
                _Watchdog(limits.timeout_s):
            tmpl = compile_checked(source, name)  # cached; under the deadline all the same
            # Typed as an Iterator, but a generator (Template.generate yields): closed below.
            gen = cast(Generator[str, None, None], tmpl.generate(**ctx))
            for piece in gen:
                t.pos += len(piece)
                if t.pos > allowed:  # before the piece goes on to the sink (the tokenizer)
                    what = budget.over(t.pos)
                    if what is not None:
                        raise TemplateLimitError(what, template=name, line=_suspended_line(gen, tmpl),
                                                 hint="the template loops or repeats; raise the limit only if "
                                                      "the prompt is really this long")
                    allowed = budget.allowed
                if sink is not None:
                    sink(piece)
                parts.append(piece)
    except TemplateError:
        raise
    except _Timeout as exc:
        raise TemplateLimitError(f"rendering ran longer than {limits.timeout_s:g} s", template=name,
                                 line=template_line(exc), hint="the template loops without end") from None
    except steps.StepLimit as exc:
        raise TemplateLimitError(str(exc), template=name, line=template_line(exc),
                                 hint="the template loops or recurses far more than its input needs") from None
    except TemplateBoundError as exc:
        raise TemplateLimitError(str(exc), template=name, line=template_line(exc),
                                 hint="templates may not build values this large") from None
    except MemoryError as exc:
        raise TemplateLimitError("rendering ran out of memory", template=name, line=template_line(exc),
                                 hint="the template builds something huge") from None
    except TemplateRaised as exc:
        raise TemplateError(f"the template raised: {exc}", template=name, line=template_line(exc),
                            hint="the conversation does not fit what this template accepts") from None
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateSecurityError(f"blocked by the sandbox: {exc}", template=name, line=template_line(exc),
                                    hint="templates may not reach Python internals") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateSyntaxError(exc.message or "syntax error", template=name, line=exc.lineno) from None
    except RecursionError as exc:   # (a recursive loop: macros stop at steps.MAX_MACRO_DEPTH first)
        raise TemplateLimitError("the template recursed too deeply", template=name, line=template_line(exc),
                                 hint="a macro or recursive loop calls itself without end") from None
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError,
            ZeroDivisionError, OverflowError, ArithmeticError, UnicodeError) as exc:
        raise TemplateError(f"{type(exc).__name__}: {exc}", template=name, line=template_line(exc),
                            hint="check the template against the message fields it reads") from None
    finally:
        if gen is not None:
            gen.close()
    text = "".join(parts)
    out = Rendered(text)
    if track:
        out.starts = _message_starts(t, len(messages))
        out.tools_start = t.tools_first
    out.gen_reads = t.gen_reads
    out.steps = step_budget.taken()
    return out


def _suspended_line(gen: object, tmpl: jinja2.Template) -> int | None:
    """The template line of the output statement the render stopped at (it is suspended there)."""
    line = None
    while gen is not None:
        frame = getattr(gen, "gi_frame", None)
        if frame is not None and frame.f_code.co_filename == "<template>":
            line = tmpl.get_corresponding_lineno(frame.f_lineno)
        gen = getattr(gen, "gi_yieldfrom", None)
    return line


def _message_starts(t: _Tracker, n: int) -> dict[int, int]:
    """Pick, per message, where its text starts: the main loop's first read, else the first lookup."""
    starts: dict[int, int] = {}
    if t.passes:
        # The main loop is the pass whose reads spread over the most output.
        def spread(d: dict[int, int]) -> tuple[int, int]:
            return (max(d.values()) - min(d.values()) if d else -1, len(d))
        main = max(t.passes, key=spread)
        starts.update(main)
    for i, pos in t.index_first.items():
        if i not in starts:
            starts[i] = pos
    return starts
