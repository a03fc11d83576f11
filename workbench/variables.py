"""Prompt templates with variables (SPEC 2.3): expanded before the chat template renders.

Only messages flagged ``template=True`` are interpreted; everything else is data, so user
text can never become template code. Names resolve innermost first: template-local
(``Message.variables`` and ``{% set %}``), request, system (constants), built-ins
(``now``, ``today``, ``request_id``, ``strftime_now``), then a declared default. Author
definitions (local and constants) whose value is itself a template are expanded recursively;
request values never are. Prompt templates come with requests, so they are untrusted code: they
run in the chat-template sandbox with loops, calls, value sizes, output and time capped (see
"the sandbox" below). After expansion a message has ``template=False`` (it is plain text now and
must not be expanded twice) and keeps ``variables`` for the record.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from types import MappingProxyType
from typing import Any, NoReturn

import jinja2
from jinja2 import meta, nodes
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from .conversation import Message
from .diagnostics import Diagnostic, info, warning
from .errors import VariableError, VariableLimitError, WorkbenchError
from .templates.bounds import WIDE_METHODS, Bounds, TemplateBoundError, binop, bounded, check_method
from .templates.sandbox import environment as chat_environment
from .templates.sandbox import template_line

BUILTINS = ("now", "today", "request_id", "strftime_now")
_FILE_KEYS = ("constants", "request", "declare")
_SPEC_FIELDS = ("required", "volatile", "default", "description")


@dataclass(frozen=True, slots=True)
class VariableSpec:
    required: bool = True
    volatile: bool = False  # value changes per request (time, ids): breaks prefix caching
    default: Any = None     # used when defined nowhere (scope "default"); None = no default
    description: str = ""


def _json_default(v: Any) -> Any:
    return v.isoformat() if isinstance(v, (date, datetime)) else str(v)


def _jsonable(v: Any, limit: int) -> Any:
    """A JSON copy of a value for the debug view (constants may hold dates, or anything)."""
    try:
        return json.loads(json.dumps(v, default=_json_default))
    except (ValueError, TypeError, RecursionError):  # a circular structure
        return repr(v)[:limit]


@dataclass(frozen=True)
class VariableConfig:
    constants: Mapping[str, Any] = field(default_factory=dict)
    declarations: Mapping[str, VariableSpec] = field(default_factory=dict)
    builtins: bool = True
    clock: Callable[[], datetime] | None = None          # for tests; default: now in UTC
    new_request_id: Callable[[], str] | None = None      # for tests; default: uuid4().hex
    max_loop_iterations: int = 1000                      # per `for` loop
    max_steps: int = 100_000  # loop iterations + calls per render: nested loops and macro recursion
    max_collection_items: int = 1000                     # items in a list/dict value, nested ones counted
    max_output_chars: int = 1_000_000
    max_seconds: float = 2.0  # wall clock for one expand_messages call, checked between operations

    def __post_init__(self) -> None:
        # Read-only copies: `version` is a cache-key input and must not drift after creation.
        object.__setattr__(self, "constants", MappingProxyType(dict(self.constants)))
        object.__setattr__(self, "declarations", MappingProxyType(dict(self.declarations)))

    @property
    def version(self) -> str:
        decl = {n: {f: getattr(s, f) for f in _SPEC_FIELDS} for n, s in self.declarations.items()}
        text = json.dumps({"constants": dict(self.constants), "declare": decl, "builtins": self.builtins},
                          sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_json_default)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def from_json(cls, data: object, *, where: str = "variables file") -> tuple[VariableConfig, dict[str, Any]]:
        """Parse ``{"constants": {}, "request": {}, "declare": {}}``; returns (config, request variables).

        An object with none of those keys is taken as request variables as a whole.
        """
        def bad(msg: str) -> VariableError:
            return VariableError(f"{where}: {msg}")

        if not isinstance(data, dict):
            raise bad("must be a JSON object")
        if not any(k in data for k in _FILE_KEYS):
            return cls(), dict(data)
        unknown = sorted(set(data) - set(_FILE_KEYS))
        if unknown:
            raise bad(f"unknown key {unknown[0]!r}; expected constants, request, declare "
                      "(request variables go under \"request\")")
        parts = {}
        for key in _FILE_KEYS:
            parts[key] = data.get(key, {})
            if not isinstance(parts[key], dict):
                raise bad(f"{key} must be an object of name: value")
        decls = {}
        for name, d in parts["declare"].items():
            if not isinstance(d, dict):
                raise bad(f"declare.{name} must be an object")
            extra = sorted(set(d) - set(_SPEC_FIELDS))
            if extra:
                raise bad(f"declare.{name}: unknown field {extra[0]!r}; expected {', '.join(_SPEC_FIELDS)}")
            for flag in ("required", "volatile"):
                if not isinstance(d.get(flag, False), bool):
                    raise bad(f"declare.{name}.{flag} must be true or false")
            if not isinstance(d.get("description", ""), str):
                raise bad(f"declare.{name}.description must be a string")
            decls[name] = VariableSpec(**d)
        return cls(constants=parts["constants"], declarations=decls), dict(parts["request"])


@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    value: Any      # as the template saw it (derived definitions: their rendered text)
    scope: str      # local | request | system | builtin | default | empty
    volatile: bool
    seqs: tuple[int | None, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "scope": self.scope,
                "volatile": self.volatile, "seqs": list(self.seqs)}


# ---- the sandbox ------------------------------------------------------------------------------
# Besides the loop cap, a per-render _Guard bounds (1) steps: loop iterations plus calls, which stops nested loops and
# macro recursion bombs; (2) size: no single value may exceed max_output_chars, checked *before*
# operations that multiply their input (`*`, widths, replace, indent) and after every call,
# filter and operator; (3) work: the characters built by those results add up to at most
# WORK_FACTOR x max_output_chars per render, so many medium values cannot add up to a huge one;
# (4) time: max_seconds for the whole expansion, checked at every step and charge.

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
class _Compiled:
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
def _compile(source: str) -> _Compiled:
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
    return _Compiled(template, tuple(names), frozenset(n for n, only in names.items() if only))


def _on_line(exc: BaseException) -> str:
    line = template_line(exc)
    return f" on line {line}" if line else ""


def _is_template(v: Any) -> bool:
    return isinstance(v, str) and ("{{" in v or "{%" in v)


def _items(v: Any, limit: int) -> int:
    """Items in a nested list/dict value, counting stops once past `limit`."""
    n, todo = 0, [v]
    while todo and n <= limit:
        x = todo.pop()
        if isinstance(x, Mapping):
            n += len(x)
            todo.extend(x.values())
        elif isinstance(x, (list, tuple)):
            n += len(x)
            todo.extend(x)
    return n


# ---- expansion --------------------------------------------------------------------------------

@dataclass
class _Res:
    value: Any
    scope: str
    volatile: bool


_EMPTY = object()  # an optional variable defined nowhere: left out of the context (renders empty)


class _Expander:
    def __init__(self, request_vars: Mapping[str, Any], config: VariableConfig):
        self.request, self.config = dict(request_vars), config
        self.decl = config.declarations
        self._builtins: dict[str, Any] = {}
        self.deadline = time.monotonic() + config.max_seconds

    def builtin(self, name: str) -> Any:
        # Computed once per call: every message of one request sees the same time and id.
        if not self._builtins:
            now = (self.config.clock or (lambda: datetime.now(UTC)))()
            now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
            self._builtins = {"now": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "today": now.date().isoformat(),
                              "request_id": (self.config.new_request_id or (lambda: uuid.uuid4().hex))(),
                              "strftime_now": now.strftime}
        return self._builtins[name]

    def expand(self, m: Message) -> tuple[Message, dict[str, _Res]]:
        try:
            local = json.loads(m.variables) if m.variables else {}
        except ValueError as e:
            raise VariableError(f"template-local variables are not valid JSON: {e}", seq=m.sequence) from None
        if not isinstance(local, dict):
            raise VariableError("template-local variables must be an object of name: value", seq=m.sequence)
        if m.content is None:
            return m.with_(template=False), {}
        self.local, self.seq = local, m.sequence
        self.memo: dict[str, _Res | None] = {}
        self.used: dict[str, _Res | None] = {}  # insertion order = order of first use
        text, _ = self.render(m.content, ())
        used = {k: v for k, v in self.used.items() if v is not None}
        return m.with_(content=text, template=False), used

    def lookup(self, name: str, chain: tuple[str, ...]) -> _Res | None:
        self.used.setdefault(name, None)
        if name in self.memo:
            return self.memo[name]
        if name in chain:
            path = " -> ".join(chain[chain.index(name):] + (name,))
            raise VariableError(f"cyclic definition {path}", variable=name, seq=self.seq,
                                hint="a definition cannot use itself, directly or through others")
        spec = self.decl.get(name)
        declared_volatile = bool(spec and spec.volatile)
        res = None
        for scope, table in (("local", self.local), ("request", self.request), ("system", self.config.constants)):
            if name in table:
                value, volatile = table[name], declared_volatile
                if isinstance(value, (Mapping, list, tuple)) and _items(value, self.config.max_collection_items) \
                        > self.config.max_collection_items:
                    raise VariableLimitError(f"{scope} value has more than {self.config.max_collection_items} items",
                                             variable=name, seq=self.seq, hint="pass a shorter list")
                if scope != "request" and _is_template(value):  # request values are data, never code
                    value, dep_volatile = self.render(value, chain + (name,))
                    volatile = volatile or dep_volatile
                res = _Res(value, scope, volatile)
                break
        else:
            if self.config.builtins and name in BUILTINS:
                res = _Res(self.builtin(name), "builtin", True)
            elif spec is not None and spec.default is not None:
                res = _Res(spec.default, "default", declared_volatile)
        self.memo[name] = self.used[name] = res
        return res

    def render(self, source: str, chain: tuple[str, ...]) -> tuple[str, bool]:
        """Render one template (the message, or a derived definition when `chain` is non-empty)."""
        variable = chain[-1] if chain else None
        what = f"the definition of {variable!r}" if variable else "the prompt template"
        tags = source.count("{{") + source.count("{%") + source.count("{#")
        if tags > MAX_TEMPLATE_TAGS:  # compiling costs ~0.2 ms a tag, before any limit can run
            raise VariableLimitError(f"{what} has {tags:,} tags ({{{{ }}}}, {{% %}}, {{# #}}), more than "
                                     f"{MAX_TEMPLATE_TAGS:,}", variable=variable, seq=self.seq,
                                     hint="a prompt template needs a few variables; pass long text as plain text")
        try:
            compiled = _compile(source)
        except jinja2.TemplateSyntaxError as e:
            raise VariableError(f"syntax error in {what} on line {e.lineno}: {e.message}",
                                variable=variable, seq=self.seq) from None
        except RecursionError:
            raise VariableError(f"{what} nests expressions or blocks too deeply to compile", variable=variable,
                                seq=self.seq) from None
        except (jinja2.TemplateError, SyntaxError, ValueError, OverflowError, MemoryError) as e:
            raise VariableError(f"{what} cannot be compiled: {type(e).__name__}: {e}", variable=variable,
                                seq=self.seq) from None
        ctx, volatile = {}, False
        for name in compiled.names:
            res = self.lookup(name, chain)
            if res is None:
                if name in environment().globals:  # range, namespace, dict, ...: not variables
                    self.used.pop(name, None)
                    continue
                spec = self.decl.get(name)
                if not (spec and not spec.required) and name not in compiled.defaulted:
                    raise VariableError(
                        f"is not defined in any scope (used by {what})", variable=name, seq=self.seq,
                        hint="define it in the request variables or the constants, declare it optional "
                             f"(required: false), or write {{{{ {name} | default('...') }}}}")
                res = self.used[name] = _Res(_EMPTY, "empty", bool(spec and spec.volatile))
            if res.value is not _EMPTY:
                ctx[name] = res.value
            volatile = volatile or res.volatile
        return self._run(compiled, ctx, what, variable), volatile

    def _run(self, compiled: _Compiled, ctx: dict[str, Any], what: str, variable: str | None) -> str:
        cfg = self.config
        token = _GUARD.set(_Guard(cfg.max_loop_iterations, cfg.max_steps, cfg.max_output_chars,
                                  WORK_FACTOR * cfg.max_output_chars, self.deadline))
        try:
            out, size = [], 0
            with bounded(Bounds(cfg.max_output_chars)):  # the chat sandbox's filters, under this cap
                for chunk in compiled.template.generate(ctx):
                    size += len(chunk)
                    if size > cfg.max_output_chars:
                        raise _Limit(f"output exceeds {cfg.max_output_chars} characters")
                    out.append(chunk)
            return "".join(out)
        except (_Limit, TemplateBoundError) as e:
            raise VariableLimitError(f"{what}: {e}", variable=variable, seq=self.seq) from None
        except jinja2.exceptions.SecurityError as e:
            raise VariableError(f"{what} was stopped by the sandbox{_on_line(e)}: {e}",
                                variable=variable, seq=self.seq) from None
        except WorkbenchError:
            raise
        except Exception as e:  # anything the template raised: never a raw jinja/Python error
            raise VariableError(f"{what} failed{_on_line(e)}: {type(e).__name__}: {e}",
                                variable=variable, seq=self.seq) from None
        finally:
            _GUARD.reset(token)


def expand_messages(messages: Sequence[Message], request_vars: Mapping[str, Any] | None,
                    config: VariableConfig) -> tuple[list[Message], list[Binding], list[Diagnostic]]:
    """Expand every ``template=True`` message; returns (messages, bindings, diagnostics)."""
    if not any(m.template for m in messages):  # the hot path: no Jinja work at all
        return list(messages), [], []
    if request_vars is not None and not isinstance(request_vars, Mapping):
        raise VariableError("request variables must be an object of name: value")
    ex = _Expander(request_vars or {}, config)
    for scope, table in (("request variable", ex.request), ("constant", config.constants)):
        bad = next((k for k in table if not isinstance(k, str)), None)
        if bad is not None:
            raise VariableError(f"{scope} names must be strings, not {bad!r}")
    out: list[Message] = []
    rows: dict[tuple[str, str, str], tuple[_Res, list[int | None]]] = {}  # (name, scope, value) -> first res, seqs
    diags: list[Diagnostic] = []
    for i, m in enumerate(messages):
        if not m.template:
            out.append(m)
            continue
        new, used = ex.expand(m)
        out.append(new)
        for name, res in used.items():
            value = None if res.value is _EMPTY else "strftime_now(format)" if name == "strftime_now" \
                else _jsonable(res.value, config.max_output_chars)
            # One row per name; a name bound to different values (locals differ) gets one row each.
            key = (name, res.scope, json.dumps(value, sort_keys=True))
            rows.setdefault(key, (_Res(value, res.scope, res.volatile), []))[1].append(m.sequence)
        volatile = sorted(n for n, r in used.items() if r.volatile)
        if volatile and i < len(messages) - 1:
            diags.append(warning(
                "volatile_in_prefix",
                f"message {m.sequence} uses volatile variable(s) {', '.join(volatile)}: the value changes "
                "on every request, so the cacheable prefix ends here; move it to the last user message "
                "or make it a constant", m.sequence))
    bindings = [Binding(k[0], r.value, r.scope, r.volatile, tuple(s)) for k, (r, s) in rows.items()]
    for scope, label, table in (("request", "request variable", ex.request),
                                ("system", "constant", config.constants)):
        unused = sorted(set(table) - {b.name for b in bindings if b.scope == scope})
        if unused:
            diags.append(info("unused_variable",
                              f"{label}(s) not used by any prompt template: {', '.join(unused)}"))
    return out, bindings, diags
