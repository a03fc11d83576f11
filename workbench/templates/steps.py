"""How much a chat template may loop: one budget of steps per render, counted at C speed.

A template that loops without writing anything (`{% for a in range(100000) %}{% for b in
range(100000) %}{% endfor %}{% endfor %}`, a macro that calls itself twice per level) has no
output for the output cap to count and no value for bounds.py to weigh: before this budget only
the deadline stopped it, 10 s later. Every render now has a budget of steps, and a step is

- one item that a `{% for %}` takes from its iterable: nested loops, empty bodies, the items an
  `{% for ... if ... %}` filters out, and those of a recursive loop's `loop(...)` calls included;
- one item that an iterating filter (`map`, `select`, `join`, `list`, `sort`, ... ITERATING_FILTERS)
  takes from its input: a chain of filters over a huge string is a loop too;
- one call through the sandbox (`x.split()`, `loop.cycle(...)`, `range(...)`) and one attribute
  read through its general checks (`loop.length`, `'x'.split`; a namespace's values and a dict's
  items, `ns.x` and `message.role`, are read without them, and free): each costs 1 to 4 µs, so a
  loop whose body does the expensive things pays for them;
- a macro call, MACRO_CALL_STEPS of them: a call costs about 2 µs, fifty times an empty iteration.

The budget is `RenderLimits.max_steps` (250,000: an honest render of a short conversation takes
hundreds) plus, once that is spent, `RenderLimits.steps_per_input` times the size of the input
(bounds.weight of messages, tools and template variables: characters, and two per container item).
A real template makes a few passes over its input (a loop over messages, another over their
parts, one over the quotes of a JSON argument), so honest renders stay far inside it at any
size, 100,000 messages included; a small input cannot buy a long render. Spending it raises
StepLimit, which render() reports as a TemplateLimitError naming the template line.

How it stays cheap: the budget is one iterator, `chain(repeat(True, N), <widen>, <refuse>)`, and
each loop iterates `compress(items, budget)`: both are C, so a step costs about 10 ns and honest
templates pay nothing measurable. The code generator (sandbox.py) wraps every loop's iterable in
`counted()`. Macro calls are counted in the sandbox's `call`, which also holds their nesting to
MAX_MACRO_DEPTH, so a deep recursion is refused with its line and a clear reason before Python's
own recursion limit (about 160 levels of macro from a shallow stack, fewer from the app's).

What the budget bounds is the number of steps, and the costliest single steps (a function call per
item in `map('string')`, a sandboxed call) take 2 to 4 µs on a busy machine: a spent budget is
about 15 ms of empty iterations and at most about a second of the dearest ones. What one step does
beyond that (a filter over a long string) is held by the value caps (bounds.py) and, last, by the
deadline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import wraps
from itertools import chain, compress, repeat
from operator import length_hint
from typing import Any

from .bounds import TemplateBoundError, weight

# About 15 ms of empty iterations, half a second of items through a filter that calls a function
# per item (`map('string')`: ~2 µs an item on a busy machine). An honest render of a short
# conversation takes hundreds of steps; a long one gets DEFAULT_STEPS_PER_INPUT more.
DEFAULT_MAX_STEPS = 250_000
# Steps per unit of input size, granted once the first DEFAULT_MAX_STEPS are spent. The shipped
# templates take at most about 0.5 per unit (Mistral's on short messages with many tool calls: 22
# steps a message; the others 1 to 11; tests/test_template_loop_budget.py checks them, and
# benchmarks/bench_template_bombs.py prints them at 100,000 messages), so 4 leaves room for
# templates that make a few more passes. A large input buys a large budget: what bounds a
# hostile template there is the deadline, as before.
DEFAULT_STEPS_PER_INPUT = 4.0
MAX_STEPS = (1 << 63) - 1     # itertools.repeat counts in a C ssize_t
# A macro call draws this many steps: at about 2 µs it costs as much as that many of the cheaper
# sandboxed operations.
MACRO_CALL_STEPS = 8
# Macro calls nested deeper than this are refused. A macro that walks the input (gpt-oss's ts_type
# over a JSON schema) goes one level per two levels of the input, and intake caps those at 200.
# Each level is ~6 Python frames: 100 levels stay below Python's recursion limit (1,000 frames)
# from any caller's stack.
MAX_MACRO_DEPTH = 100

# The filters that walk their input item by item (each item is a step). Filters that only look
# at one item (first, last) or at the length are not.
ITERATING_FILTERS = ("map", "select", "reject", "selectattr", "rejectattr", "unique", "groupby", "batch",
                     "slice", "sum", "join", "list", "sort", "min", "max")


class StepLimit(TemplateBoundError):
    """The render spent its budget of steps, or nested macros too deep."""


class Steps:
    """One render's budget (module docstring). `it` yields True once per step it allows."""

    __slots__ = ("it", "base", "per_input", "inputs", "allowed", "depth", "max_depth", "_parts")

    def __init__(self, base: int, per_input: float | None, inputs: object = None,
                 max_depth: int = MAX_MACRO_DEPTH) -> None:
        self.base, self.per_input, self.inputs = base, per_input, inputs
        self.allowed = base
        self.depth = 0
        self.max_depth = max_depth
        first = repeat(True, base)        # (RenderLimits checks base: an int in 0 ... MAX_STEPS)
        self._parts = [first]     # the repeats handed out so far: what is left of them says what was taken
        self.it: Iterator[bool] = chain(first, _Widen(self), _Refuse(self))

    def extra(self) -> Iterator[bool]:
        """The steps granted past the base: `per_input` x the input's size (weighed only now, when a
        render has spent the base; weighing a 100k-message input takes ~0.1 s)."""
        extra = 0
        if self.per_input and self.inputs is not None:
            extra = min(int(self.per_input * weight(self.inputs, limit=1 << 62)), MAX_STEPS - self.base)
        self.allowed = self.base + extra
        self.inputs = None        # weighed once; the render's inputs need not be held any longer
        more = repeat(True, extra)
        self._parts.append(more)
        return more

    def taken(self) -> int:
        """Steps taken so far (at most `allowed`)."""
        return self.allowed - sum(length_hint(p) for p in self._parts)

    def refusal(self) -> str:
        grown = (f"{self.base:,} plus {self.per_input:g} per unit of input size: RenderLimits.max_steps, "
                 "RenderLimits.steps_per_input" if self.allowed > self.base else "RenderLimits.max_steps")
        return (f"the template took more than {self.allowed:,} steps (loop iterations, items walked by "
                f"filters, calls and attribute reads; {grown})")

    def call(self, run: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """A macro call (through the sandbox's `call`): MACRO_CALL_STEPS steps, and one level of
        nesting while it runs."""
        for _ in _CALL:
            next(self.it)
        if self.depth >= self.max_depth:
            raise StepLimit(f"macros nested more than {self.max_depth} calls deep (a macro that calls "
                            "itself without end?)")
        self.depth += 1
        try:
            return run(*args, **kwargs)
        finally:
            self.depth -= 1


_CALL = range(MACRO_CALL_STEPS)


class _Widen:
    """The budget's second part: iterated (by `chain`) only when the base is spent."""

    __slots__ = ("steps",)

    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    def __iter__(self) -> Iterator[bool]:
        return self.steps.extra()


class _Refuse:
    """The budget's end: every step past it raises (again on every later try, so a loop can never
    end quietly short, which would be a wrong prompt instead of an error)."""

    __slots__ = ("steps",)

    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    def __iter__(self) -> _Refuse:
        return self

    def __next__(self) -> bool:
        raise StepLimit(self.steps.refusal())


_STEPS: ContextVar[Steps | None] = ContextVar("workbench_template_steps", default=None)


@contextmanager
def budget(steps: Steps | None) -> Iterator[Steps | None]:
    """`steps` for the render in this block; None: nothing counts (compiling: Jinja's constant
    folding reads attributes through the sandbox, and a template compiles once for many renders)."""
    token = _STEPS.set(steps)
    try:
        yield steps
    finally:
        _STEPS.reset(token)


def current() -> Steps | None:
    return _STEPS.get()


class _Counted:
    """A sized iterable whose one iteration is counted: `len()` stays the iterable's own, so
    Jinja's `loop.length` and `loop.revindex` need not take every item first (for an iterator
    without a length Jinja takes them all, and they count)."""

    __slots__ = ("_value", "_items")

    def __init__(self, value: Any, items: Iterator[Any]) -> None:
        self._value, self._items = value, items

    def __len__(self) -> int:
        return len(self._value)

    def __iter__(self) -> Iterator[Any]:
        return self._items


def counted(value: Any) -> Any:
    """`value`, each item it yields charged one step (outside a render: `value` itself)."""
    steps = _STEPS.get()
    if steps is None:
        return value
    items = compress(value, steps.it)     # (calls iter(value) now, where the loop would)
    return _Counted(value, items) if hasattr(value, "__len__") else items


def counting_filter(original: Callable[..., Any]) -> Callable[..., Any]:
    """An iterating filter whose input is `counted`; keeps Jinja's pass_* marks (`wraps`)."""
    skip = 1 if getattr(original, "jinja_pass_arg", None) else 0

    @wraps(original)
    def run(*args: Any, **kwargs: Any) -> Any:
        steps = _STEPS.get()
        if steps is not None and len(args) > skip:
            try:
                # A plain iterator: Jinja's filters take any iterable (a Mapping gives its keys, as it
                # would), and `select`'s `if value:` only saves iterating an empty input.
                items = compress(args[skip], steps.it)
            except TypeError:
                pass    # not iterable (`none|map(...)` is empty in Jinja): the filter decides, as before
            else:
                args = (*args[:skip], items, *args[skip + 1:])
        return original(*args, **kwargs)
    return run
