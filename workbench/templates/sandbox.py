"""The Jinja environment chat templates run in: the one transformers builds, bounded.

`apply_chat_template` renders with an ImmutableSandboxedEnvironment
(trim_blocks, lstrip_blocks, loop controls, a `{% generation %}` tag) and the
globals `raise_exception`, `strftime_now`, `dict`, `namespace` and a `tojson`
filter that does not HTML-escape. We build the same environment so that a
template file renders byte-identically here and there.

On top of it, every operation that can build a value much larger than its inputs is
checked before it runs (bounds.py): the operators `*`, `**`, `%`, `+` and `~` between
computed values, the widening filters and string methods, `range`, printing containers and
the buffers of macros and blocks. The code generator below routes those through the checks;
the rest of the template compiles exactly as Jinja compiles it, so honest templates pay
nothing measurable. Source longer than MAX_TEMPLATE_CHARS is refused before parsing.

Loops are counted (steps.py): every `{% for %}` iterates its items through `environment.counted`,
the filters that walk their input count its items, calls and attribute reads through the
sandbox's checks count, and macro calls count more and nest at most steps.MAX_MACRO_DEPTH deep,
all against one budget of steps per render.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from datetime import datetime as datetime  # re-exported: the one clock tests freeze (clock.py reads it here)
from functools import lru_cache
from types import MethodType
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.parser import Parser
from jinja2.runtime import Context, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment

from . import bounds, steps

_BUILTIN_METHOD = type("".center)
_FUNCTION = type(lambda: None)
_METHOD = MethodType
# What `x.name` finds on a dict before its items. A dict subclass whose class sets `_wb_plain_dict`
# (render.py's tracked messages) adds no public attribute of its own: its reads take the same path.
_DICT_ATTRIBUTES = frozenset(dir(dict))
# The longest real chat templates are ~20k characters. Jinja compiles ~100k characters of dense
# template code a second, so a template at the limit still compiles in about a second.
MAX_TEMPLATE_CHARS = 128 * 1024


class TemplateRaised(Exception):
    """`raise_exception(...)` was called by the template."""


class GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` renders its body unchanged (as transformers does)."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller: Callable[[], str]) -> str:
        return caller()


def template_line(exc: BaseException) -> int | None:
    """The template line an error came from: that of the innermost template frame in its traceback
    (Jinja rewrites template frames to carry template lines)."""
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == "<template>":
            line = lineno
    return line


def raise_exception(message: str) -> None:
    raise TemplateRaised(message)


tojson = bounds.tojson  # json.dumps(x, ensure_ascii, indent, separators, sort_keys), counted as it is built


def strftime_now(fmt: str) -> str:
    """The wall clock, or the instant the caller fixed for this render (`render(now=...)`)."""
    now = bounds.current().now
    return (datetime.now() if now is None else now).strftime(fmt)


class TemplateDict:
    """`dict(...)` without the class itself, so templates cannot reach its attributes."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class TemplateNamespace(jinja2.utils.Namespace):
    """A namespace that refuses underscore names (no route to CPython internals)."""

    # (no named `self`, as in Jinja's Namespace: a template may pass any keyword, `self` included)
    def __init__(*args: Any, **kwargs: Any) -> None:
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"templates cannot store underscore-prefixed attributes on a namespace ({name!r})")


class BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with the operations that can grow a value step by step bounded.

    - `a + b` compiles natively when an operand is a literal (`'<|im_start|>' + role`: growth is
      bounded by the source); between two computed values the sum is checked against the cap
      inline for strings (`_wb_cap`, read once per function) and by a call otherwise.
    - `a ~ b` joins through `join_values`, which refuses to print an oversized container.
    - `{{ x }}` stays `str(x)` for strings (one type test inline, no call) and checks other values
      before printing them.
    - the buffers of macros and `{% set %}`/filter blocks count what goes in (`Buffer`).
    - every `{% for %}` takes its items through `environment.counted` (steps.py): the iterable of a
      plain loop; for a loop with an `if` test, what the test's filter function reads (`fiter`), so
      the items it drops count too; for a recursive loop, what its loop function reads (`reciter`),
      so the items of every `loop(...)` call count.
    """

    _wb_counting: str | None = None   # the name Jinja is about to write that must be counted

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        # Jinja writes the test's iterable as the bare name `fiter` and a recursive loop's as
        # `reciter` (once each, before the body: a loop nested in the body cannot take the turn).
        self._wb_counting = "fiter" if node.test is not None else "reciter" if node.recursive else None
        plain = node.iter
        if self._wb_counting is None:
            # (Jinja allows no node types of our own; the parser never makes an EnvironmentAttribute)
            node.iter = nodes.Call(nodes.EnvironmentAttribute("counted"), [plain], [], None, None,
                                   lineno=plain.lineno)
        try:
            super().visit_For(node, frame)
        finally:
            node.iter = plain
            self._wb_counting = None

    def write(self, x: str) -> None:
        if x == self._wb_counting:
            self._wb_counting = None
            x = f"environment.counted({x})"
        super().write(x)

    def visit_Call(self, node: nodes.Call, frame: Frame, forward_caller: bool = False) -> None:
        if isinstance(node.node, nodes.EnvironmentAttribute) and node.node.name == "counted":
            self.write("environment.counted(")     # a direct call: not the sandbox's checked one
            self.visit(node.args[0], frame)
            self.write(")")
            return
        super().visit_Call(node, frame, forward_caller=forward_caller)

    def write_commons(self) -> None:
        super().write_commons()
        self.writeline("_wb_cap = environment.value_cap()")

    def buffer(self, frame: Frame) -> None:
        frame.buffer = self.temporary_identifier()
        self.writeline(f"{frame.buffer} = environment.Buffer()")
        self.writeline(f"{frame.buffer}.left = _wb_cap")

    @optimizeconst
    def visit_Add(self, node: nodes.BinExpr, frame: Frame) -> None:  # (an Add; Jinja's hook takes any BinExpr)
        if isinstance(node.left, nodes.Const) or isinstance(node.right, nodes.Const):
            self.write("(")
            self.visit(node.left, frame)
            self.write(" + ")
            self.visit(node.right, frame)
            self.write(")")
            return
        self.write("(_wb_sum if (_wb_sum := (")
        self.visit(node.left, frame)
        self.write(" + ")
        self.visit(node.right, frame)
        self.write(")).__class__ is str and len(_wb_sum) <= _wb_cap else environment.checked_sum(_wb_sum))")

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        markup = "context.eval_ctx.autoescape" if frame.eval_ctx.volatile else repr(bool(frame.eval_ctx.autoescape))
        self.write("environment.join_values((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(f"), {markup})")

    def _output_child_pre(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        if finalize.src is not None or frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super()._output_child_pre(node, frame, finalize)  # Jinja's code, the value checked first
            self.write("environment.guard_value(")
        else:
            self.write("(_wb_out if (_wb_out := ")

    def _output_child_post(self, node: nodes.Expr, frame: Frame, finalize: Any) -> None:
        if finalize.src is not None or frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            self.write(")")
            super()._output_child_post(node, frame, finalize)
        else:
            self.write(").__class__ is str else str(environment.guard_value(_wb_out)))")


class ChatSandbox(ImmutableSandboxedEnvironment):
    """transformers' sandbox with every widening operation bounded (module docstring)."""

    code_generator_class = BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "%"})  # also never constant-folded by Jinja
    # Buffers of macros, `{% set %}` and filter blocks are Buffers, counted as they fill, so the
    # join needs no check (render() reads generate(); Jinja's own Template.render is not used).
    Buffer = bounds.Buffer
    join_values = staticmethod(bounds.join_values)
    guard_value = staticmethod(bounds.guard_value)
    checked_sum = staticmethod(bounds.checked_sum)
    value_cap = staticmethod(bounds.value_cap)
    counted = staticmethod(steps.counted)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        return bounds.binop(operator, left, right)

    def getattr(self, obj: Any, attribute: str) -> Any:
        # `ns.x` and `message.role` are read in every iteration of most templates, and the sandbox's
        # general checks cost ~4 µs a read (40 % of a long Mistral render). For a namespace and a
        # plain dict they come down to the name: one without a leading underscore is a stored value
        # (TemplateNamespace refuses to store any other) or, on a dict, an item when no dict method
        # has that name (Jinja reads the attribute first, then the item). A namespace's stored method
        # goes the long way (str.format is wrapped there). These reads are free of steps (steps.py).
        if attribute.__class__ is str and attribute[:1] != "_":
            kind = obj.__class__
            if kind is TemplateNamespace:
                attrs = object.__getattribute__(obj, "_Namespace__attrs")
                if attribute in attrs:
                    value = attrs[attribute]
                    if value.__class__ is not _BUILTIN_METHOD and value.__class__ is not _METHOD:
                        return value
            elif (kind is dict or kind.__dict__.get("_wb_plain_dict")) and attribute not in _DICT_ATTRIBUTES \
                    and attribute in obj:
                return obj[attribute]
        budget = steps.current()
        if budget is not None:
            next(budget.it)       # the general checks: a step (steps.py)
        return super().getattr(obj, attribute)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        # SandboxedEnvironment.call, inline (one Python frame per call, as before), plus the bounds
        # on the string methods that widen. Only builtin methods (and the sandbox's str.format
        # wrapper) can be one: testing the type first keeps macro and filter calls as cheap as before.
        if not __self.is_safe_callable(__obj):
            raise jinja2.exceptions.SecurityError(f"{__obj!r} is not safely callable")
        kind = __obj.__class__
        budget = steps.current()
        if budget is not None:      # every call is a step; a macro call more, and a level of nesting
            if kind is Macro:
                return budget.call(__context.call, __obj, *args, **kwargs)
            next(budget.it)
        if (kind is _BUILTIN_METHOD or kind is _FUNCTION) and __obj.__name__ in bounds.WIDE_METHODS:
            # The sandbox wraps str.format in a function; the string is on the original method.
            owner = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
            if isinstance(owner, (str, bytes, int)) and not isinstance(owner, bool):
                if args and __obj.__name__ == "join" and not hasattr(args[0], "__len__"):
                    args = (list(args[0]), *args[1:])  # an iterator, made a list so it can be weighed
                bounds.check_method(owner, __obj.__name__, args, kwargs)
                out = __context.call(__obj, *args, **kwargs)
                if isinstance(out, (str, bytes)):
                    bounds.check(len(out), f"the result of {__obj.__name__}")
                return out
        return __context.call(__obj, *args, **kwargs)


@lru_cache(maxsize=1)
def environment() -> ChatSandbox:
    env = ChatSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols])
    # Counting inside, the size prechecks outside: `join` weighs the value it was given, then counts
    # its items as it walks them.
    env.filters = bounds.bounded_filters({name: steps.counting_filter(f) if name in steps.ITERATING_FILTERS else f
                                          for name, f in env.filters.items()})
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    env.globals["range"] = bounds.safe_range
    env.globals["lipsum"] = bounds.lipsum
    return env


@lru_cache(maxsize=64)
def compile_template(source: str) -> jinja2.Template:
    """Compile (cached). Constant folding runs with a cap of 0, so nothing bounded is computed here."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise jinja2.TemplateSyntaxError(
            f"the template is {len(source):,} characters, over the limit of {MAX_TEMPLATE_CHARS:,}", 1)
    with bounds.bounded(bounds.COMPILING), steps.budget(None):
        return environment().from_string(source)
