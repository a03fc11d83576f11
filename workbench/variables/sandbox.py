"""The sandbox prompt templates run in: the chat-template sandbox, guarded.

Prompt templates come with requests, so they are untrusted code. On top of the chat-template
sandbox's operation bounds (workbench/templates/bounds.py), every loop is capped, every call and
operator is a step against a budget, every value is weighed before it is printed or repeated, and
the whole expansion has a deadline. Nothing here is reachable from a template: the guard lives in a
ContextVar.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NoReturn

import jinja2
from jinja2 import meta, nodes
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from ..errors import VariableError, VariableLimitError, WorkbenchError
from ..templates.bounds import WIDE_METHODS, Bounds, TemplateBoundError, binop, bounded, check_method
from ..templates.sandbox import environment as chat_environment
from ..templates.sandbox import template_line

WORK_FACTOR = 10
MAX_TEMPLATE_TAGS = 2_000  # per prompt template: ~0.4 s to compile (a request can carry megabytes of them)
_WIDTH = re.compile(r"\d{4,}")           # a width or precision in a format string
_NESTED = re.compile(r"\*|\{[^{}]*\{")   # `%*d` or `{:{}}`: the width comes from the arguments


class _Limit(Exception):
    pass


def _weight(x: Any, limit: int) -> int:
    """Characters `x` stands for once printed (strings inside containers count); stops past `limit`."""
    n, todo = 0, [x]
    while todo and n <= limit:
        v = todo.pop()
        if isinstance(v, str):
            n += len(v)
        elif isinstance(v, Mapping):
            n += len(v)
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            n += len(v)
            todo.extend(v)
        else:
            n += 1
    return n


@dataclass
class _Guard:  # one per render, in a ContextVar: no template variable can override or reach it
    loop_limit: int
    steps_left: int
    max_chars: int
    work_left: int
    deadline: float  # time.monotonic()
    # Containers already weighed, by id; the object is kept so its id cannot be reused. The sandbox
    # is immutable, so a list or dict cannot change while the template runs.
    weighed: dict[int, tuple[Any, int]] = field(default_factory=dict)

    def weight(self, x: Any) -> int:
        if isinstance(x, str):
            return len(x)
        if not isinstance(x, (Mapping, list, tuple)):
            return 1
        if id(x) not in self.weighed:
            self.weighed[id(x)] = (x, _weight(x, self.max_chars))
        return self.weighed[id(x)][1]

    def step(self) -> None:
        self.steps_left -= 1
        if self.steps_left < 0:
            raise _Limit("too many loop iterations and calls in total (max_steps)")
        if time.monotonic() > self.deadline:
            raise _Limit("the expansion ran longer than max_seconds")

    def check(self, size: int, what: str) -> None:
        if size > self.max_chars:
            raise _Limit(f"{what} would exceed max_output_chars ({self.max_chars})")

    def charge(self, value: Any) -> Any:
        size = self.weight(value)
        self.check(size, "a value")
        self.work_left -= size
        if self.work_left < 0:
            raise _Limit(f"the template built more than {WORK_FACTOR} x max_output_chars of intermediate values")
        if time.monotonic() > self.deadline:
            raise _Limit("the expansion ran longer than max_seconds")
        return value

    def precheck(self, name: str, value: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """Refuse an operation whose result would be too large, before it is computed."""
        size = self.weight(value)
        self.check(size, f"the input of {name}")
        values = (*args, *kwargs.values())
        fmt = isinstance(value, str) and name in ("format", "format_map", "%")
        if fmt and any(int(d) > self.max_chars for d in _WIDTH.findall(value)):
            raise _Limit(f"a width in the format string of {name} would exceed max_output_chars")
        if not fmt or _NESTED.search(value):  # a plain "%d" % 12345678 is fine; widths are not
            for a in values:
                if isinstance(a, int) and not isinstance(a, bool) and a > self.max_chars:
                    raise _Limit(f"{name}: the argument {a} is larger than max_output_chars")
        extra = 0  # the operations whose output grows with the input times an argument
        if name == "replace" and isinstance(value, str) and len(args) >= 2 and isinstance(args[1], str):
            old = args[0] if isinstance(args[0], str) else ""
            extra = (value.count(old) if old else len(value) + 1) * len(args[1])
        elif name in ("indent", "expandtabs") and isinstance(value, str) and values:
            width = len(values[0]) if isinstance(values[0], str) else values[0] if isinstance(values[0], int) else 0
            extra = (value.count("\n") + 1 if name == "indent" else value.count("\t")) * width
        elif name == "wordwrap" and isinstance(value, str):  # textwrap splits long words in O(n^2 / width)
            width = values[0] if values and isinstance(values[0], int) else 79
            if len(value) ** 2 // max(width, 1) > 10**11:
                raise _Limit("wordwrap: this text is too long for that width")
        elif name == "tojson":  # every nested line gets `indent` spaces
            indent = kwargs.get("indent", args[1] if len(args) > 1 else None)
            extra = size * indent if isinstance(indent, int) else 0
        self.check(size + extra, f"the result of {name}")


_GUARD: ContextVar[_Guard] = ContextVar("workbench_variables_guard")


def _guard() -> _Guard:
    guard = _GUARD.get(None)
    if guard is None:  # at compile time Jinja tries to fold constants: make it leave that to render
        raise nodes.Impossible()
    return guard


def _guarded_filter(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    skip = 1 if getattr(f, "jinja_pass_arg", None) else 0  # context / environment comes first

    @functools.wraps(f)  # keeps jinja_pass_arg
    def run(*args: Any, **kwargs: Any) -> Any:
        guard = _guard()
        guard.precheck(name, args[skip] if len(args) > skip else None, args[skip + 1:], kwargs)
        return guard.charge(f(*args, **kwargs))
    return run


def _finalize(value: Any) -> Any:  # every `{{ ... }}`: refuse before str() builds a huge text
    guard = _guard()
    guard.check(guard.weight(value), "an output value")
    return value


def _loop_cap(iterable: Any, lineno: int) -> Any:
    guard = _guard()
    for i, item in enumerate(iterable):
        if i >= guard.loop_limit:
            raise _Limit(f"the loop on line {lineno} exceeded {guard.loop_limit} iterations")
        guard.step()
        yield item


def _range(*args: int) -> range:
    # Python's range is lazy, but a range longer than the loop cap can never be looped over whole;
    # refusing it here names the cap instead of the sandbox's own MAX_RANGE.
    r, limit = range(*args), _guard().loop_limit
    if len(r) > limit:
        raise _Limit(f"range() of {len(r)} items exceeds the loop cap ({limit})")
    return r


class _PromptSandbox(ImmutableSandboxedEnvironment):
    """The chat-template sandbox plus the guard on calls and operators."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        guard = _guard()
        guard.step()
        method = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format in a function
        owner = getattr(method, "__self__", None)
        if isinstance(owner, str):  # "x".center(10**9), "{:>9999999}".format()
            guard.precheck(getattr(method, "__name__", "method"), owner, args, kwargs)
        elif isinstance(owner, (bytes, int)) and not isinstance(owner, bool) \
                and getattr(method, "__name__", None) in WIDE_METHODS:  # (1).to_bytes(10**9), b"x".center()
            check_method(owner, method.__name__, args, kwargs)
        return guard.charge(super().call(context, obj, *args, **kwargs))

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        guard = _guard()
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                    guard.check(guard.weight(seq) * n, "a repeated string or list")
        elif operator == "%" and isinstance(left, str):
            guard.precheck("%", left, tuple(right.values()) if isinstance(right, Mapping) else
                           right if isinstance(right, tuple) else (right,), {})
        if operator in ("*", "**", "%"):  # the chat sandbox's bounds too: integers by their bits
            return guard.charge(binop(operator, left, right))
        return guard.charge(super().call_binop(context, operator, left, right))

    def unsafe_undefined(self, obj: Any, attribute: str) -> NoReturn:
        # The base sandbox returns an Undefined that renders as "": an escape attempt would pass
        # silently. In a prompt template it is an error the author should see.
        raise jinja2.exceptions.SecurityError(
            f"access to attribute {attribute!r} of a {type(obj).__name__!r} object is unsafe")


@functools.lru_cache(maxsize=1)
def environment() -> _PromptSandbox:
    """Same options, filters and globals as the chat-template sandbox, guarded; trailing newlines
    kept (prompt text is written as meant); `strftime_now` replaced by the tracked clock built-in;
    `lipsum` left out (a text generator with no use in a prompt and no size limit)."""
    base = chat_environment()
    env = _PromptSandbox(trim_blocks=base.trim_blocks, lstrip_blocks=base.lstrip_blocks,
                         keep_trailing_newline=True, finalize=_finalize,
                         extensions=[type(e) for e in base.extensions.values()])
    env.filters = {name: _guarded_filter(name, f) for name, f in base.filters.items()}
    env.filters["workbench_loop_cap"] = _loop_cap
    env.filters["workbench_charge"] = lambda v: _guard().charge(v)
    env.globals.update(base.globals)
    for name in ("strftime_now", "lipsum"):
        del env.globals[name]
    env.globals["range"] = _range
    return env


@dataclass(frozen=True)
class Compiled:
    template: jinja2.Template
    names: tuple[str, ...]        # referenced from outside the template, in source order
    defaulted: frozenset[str]     # referenced only as `name | default(...)`


class _Caps(NodeTransformer):
    """Rewrites the parsed template: every loop goes through the loop cap, every `~` is charged."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        if node.recursive:  # `loop(children)` would bypass the cap on `iter`
            raise jinja2.TemplateSyntaxError("recursive loops are not allowed in prompt templates", node.lineno)
        self.generic_visit(node)  # rewrites the children in place (and returns `node` itself)
        node.iter = nodes.Filter(node.iter, "workbench_loop_cap", [nodes.Const(node.lineno)], [], None, None,
                                 lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:  # not an operator the sandbox sees
        return nodes.Filter(self.generic_visit(node), "workbench_charge", [], [], None, None, lineno=node.lineno)


@functools.lru_cache(maxsize=256)
def compile_prompt(source: str) -> Compiled:
    env = environment()
    ast = env.parse(source)
    undeclared = meta.find_undeclared_variables(ast)
    guarded = {id(f.node) for f in ast.find_all(nodes.Filter)
               if f.name in ("default", "d") and isinstance(f.node, nodes.Name)}
    names: dict[str, bool] = {}  # name -> only used under `default`
    for n in ast.find_all(nodes.Name):
        if n.ctx == "load" and n.name in undeclared:
            names[n.name] = names.get(n.name, True) and id(n) in guarded
    ast = _Caps().visit(ast)
    template = env.template_class.from_code(env, env.compile(ast), env.make_globals(None))
    return Compiled(template, tuple(names), frozenset(n for n, only in names.items() if only))


def _on_line(exc: BaseException) -> str:
    line = template_line(exc)
    return f" on line {line}" if line else ""


@dataclass(frozen=True)
class Caps:
    """The limits of one expansion, from VariableConfig, and its deadline (time.monotonic())."""

    max_loop_iterations: int
    max_steps: int
    max_output_chars: int
    deadline: float


def run(compiled: Compiled, ctx: dict[str, Any], caps: Caps, what: str, variable: str | None,
        seq: int | None) -> str:
    """Render a compiled prompt template under its caps; every failure is a VariableError saying
    what failed and on which line."""
    token = _GUARD.set(_Guard(caps.max_loop_iterations, caps.max_steps, caps.max_output_chars,
                              WORK_FACTOR * caps.max_output_chars, caps.deadline))
    try:
        out, size = [], 0
        with bounded(Bounds(caps.max_output_chars)):  # the chat sandbox's filters, under this cap
            for chunk in compiled.template.generate(ctx):
                size += len(chunk)
                if size > caps.max_output_chars:
                    raise _Limit(f"output exceeds {caps.max_output_chars} characters")
                out.append(chunk)
        return "".join(out)
    except (_Limit, TemplateBoundError) as e:
        raise VariableLimitError(f"{what}: {e}", variable=variable, seq=seq) from None
    except jinja2.exceptions.SecurityError as e:
        raise VariableError(f"{what} was stopped by the sandbox{_on_line(e)}: {e}",
                            variable=variable, seq=seq) from None
    except WorkbenchError:
        raise
    except Exception as e:  # anything the template raised: never a raw jinja/Python error
        raise VariableError(f"{what} failed{_on_line(e)}: {type(e).__name__}: {e}",
                            variable=variable, seq=seq) from None
    finally:
        _GUARD.reset(token)
