"""A static check of the test suite (issue 35): tests that can fail, for the right reasons.

It reads tests/*.py (an AST scan, nothing is imported or run) and flags:

  no-check       a test function that checks nothing: no assert, no pytest.raises / warns / fail, no
                 call to an assert_* function, to a check in CHECK_CALLS, or to a helper or fixture
                 (in tests/, found by name, transitively) that checks;
  except-only    a check reached only through an `except` handler: when nothing is raised the test
                 passes unchecked (use pytest.raises, or check the result on the other path too);
  or-true        an `assert a or b` where one half is always true (a true constant, `len(x) >= 0`,
                 `x == x`) or repeats the other: the other half is never what decides;
  fixed-sleep    time.sleep / page.wait_for_timeout in browser code outside a loop that polls a
                 condition: it waits for a time, not for what the page should show;
  wall-clock     an assert that compares a time.monotonic() / perf_counter() / time() reading, or a
                 value computed from one, with anything: the figures belong in the benchmarks.

With --info it also lists (never failing) every other `assert ... or ...`: whether one half always
holds cannot be decided here, so they are for a reader.

A line that must keep a flagged pattern says why, on the flagged line (any line of a flagged
statement; the `def` line for a test):  # check-tests: allow <code> <reason>
An opt-out without a reason, with an unknown code, or that no finding needs, is itself a finding.

Usage: python tools/check_tests.py [--info] [FILE ...]     (default: tests/*.py; exit 1 on a finding)
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CODES = ("no-check", "except-only", "or-true", "fixed-sleep", "wall-clock")
INFO_CODE = "or-info"

# Calls that check though they are not asserts: each fails the test when what it waits for or expects
# never happens. Keyed by the called name (the last part of a dotted call).
CHECK_CALLS = {
    "expect": "Playwright's expect(...).to_*(): an AssertionError when the page never gets there",
    "wait_for_selector": "Playwright: a TimeoutError when the element never appears",
    "wait_for_function": "Playwright: a TimeoutError when the predicate never holds in the page",
    "wait_for_url": "Playwright: a TimeoutError when the page never reaches the URL",
    "wait_for": "Playwright's Locator.wait_for(); tests/ helpers of that name raise on their timeout",
    "check_call": "subprocess.check_call: a CalledProcessError when the command fails",
    "check_output": "subprocess.check_output: a CalledProcessError when the command fails",
}
# and subprocess.run(..., check=True), for the same reason
PYTEST_CHECKS = {"raises", "warns", "fail", "deprecated_call"}
CLOCKS = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns"}
# Calls whose result is as much a clock value as their argument (min(durations), round(elapsed, 2)).
CLOCK_PRESERVING = {"min", "max", "abs", "round", "sum", "float", "int", "sorted", "median", "mean", "fsum"}
BROWSER_MODULES = {"browser", "lab_server", "playwright"}

ALLOW = re.compile(r"#\s*check-tests:\s*allow\b\s*(?P<code>[\w-]*)\s*(?P<reason>.*)$")

FuncDef = ast.FunctionDef | ast.AsyncFunctionDef
TryNode = ast.Try | ast.TryStar
LOOPS = (ast.For, ast.AsyncFor, ast.While)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str
    span: tuple[int, int]          # the lines an opt-out may sit on
    failing: bool = True

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.message}"


@dataclass
class OptOut:
    path: str
    line: int
    code: str
    reason: str
    used: bool = False


@dataclass
class Report:
    findings: list[Finding]        # failing ones, opt-outs applied
    info: list[Finding]
    opt_outs: list[OptOut]
    files: int
    tests: int


# ------------------------------------------------------------------------------------ AST helpers
def dotted(node: ast.expr) -> str:
    """`a.b.c` for a Name/Attribute chain; the chain's known end otherwise (`f().wait_for` -> `?.wait_for`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return dotted(node.func) + "()"
    return "?"


def last_name(call: ast.Call) -> str:
    return dotted(call.func).rsplit(".", 1)[-1]


def own_nodes(node: ast.AST) -> Iterator[tuple[ast.AST, tuple[TryNode, ...]]]:
    """Every node under `node` that runs as part of it (nested defs and classes run elsewhere), each
    with the `try` statements whose `except` handler holds it."""
    def walk(parent: ast.AST, handlers: tuple[TryNode, ...]) -> Iterator[tuple[ast.AST, tuple[TryNode, ...]]]:
        for child in ast.iter_child_nodes(parent):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            inner = handlers
            if isinstance(child, ast.ExceptHandler) and isinstance(parent, (ast.Try, ast.TryStar)):
                inner = (*handlers, parent)
            yield child, inner
            yield from walk(child, inner)
    yield from walk(node, ())


def is_fixture(fn: FuncDef) -> str | None:
    """The fixture name `fn` provides, if it is a pytest fixture."""
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if dotted(target) in ("pytest.fixture", "fixture"):
            if isinstance(dec, ast.Call):
                for kw in dec.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        return str(kw.value.value)
            return fn.name
    return None


def header_span(fn: FuncDef) -> tuple[int, int]:
    """The `def` line to the line before the body (a long signature wraps)."""
    return fn.lineno, max(fn.lineno, fn.body[0].lineno - 1)


def stmt_span(node: ast.AST) -> tuple[int, int]:
    line = getattr(node, "lineno", 0)
    return line, getattr(node, "end_lineno", None) or line


# --------------------------------------------------------------------------------------- modules
@dataclass
class Module:
    path: str
    name: str                               # the import name (tests/ helpers import as top-level)
    tree: ast.Module
    source: str
    functions: dict[str, FuncDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    fixtures: dict[str, FuncDef] = field(default_factory=dict)
    from_imports: dict[str, tuple[str, str]] = field(default_factory=dict)   # alias -> (module, name)
    module_imports: dict[str, str] = field(default_factory=dict)            # alias -> module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    nodes: list[ast.AST] = field(default_factory=list)                       # every node, once
    nested: dict[ast.AST, dict[str, FuncDef]] = field(default_factory=dict)  # def -> the defs inside it

    @property
    def is_test_file(self) -> bool:
        return self.name.startswith("test_")

    @property
    def is_browser(self) -> bool:
        """Browser code: the browser helpers by name, *_browser.py tests, and anything that imports
        Playwright or the browser helpers."""
        if self.name in ("browser", "lab_server") or self.name.endswith("_browser"):
            return True
        imported = {m.split(".")[0] for m in self.module_imports.values()}
        imported |= {m.split(".")[0] for m, _ in self.from_imports.values()}
        return bool(imported & BROWSER_MODULES)


def parse(path: str, source: str) -> Module:
    tree = ast.parse(source, filename=path)
    mod = Module(path=path, name=Path(path).stem, tree=tree, source=source)
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mod.functions[top.name] = top
        elif isinstance(top, ast.ClassDef):
            mod.classes[top.name] = top
    mod.nodes = list(ast.walk(tree))
    for node in mod.nodes:
        for child in ast.iter_child_nodes(node):
            mod.parents[child] = node
    for node in mod.nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if name := is_fixture(node):
                mod.fixtures.setdefault(name, node)
            outer = enclosing(mod, node, (ast.FunctionDef, ast.AsyncFunctionDef))
            while outer is not None:
                mod.nested.setdefault(outer, {}).setdefault(node.name, node)
                outer = enclosing(mod, outer, (ast.FunctionDef, ast.AsyncFunctionDef))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                mod.from_imports[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                mod.module_imports[alias.asname or alias.name.split(".")[0]] = alias.name
    return mod


def enclosing(mod: Module, node: ast.AST, kinds: tuple[type, ...]) -> ast.AST | None:
    while (node := mod.parents.get(node)) is not None:   # type: ignore[assignment]
        if isinstance(node, kinds):
            return node
    return None


# ------------------------------------------------------------------------------ what is a check
class Checks:
    """Whether a function checks something, following the helpers and fixtures it uses by name."""

    def __init__(self, modules: Mapping[str, Module]):
        self.modules = modules
        self.owner: dict[ast.AST, Module] = {}
        for mod in modules.values():
            for node in mod.nodes:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.owner[node] = mod
        self._memo: dict[ast.AST, bool] = {}

    # ---- resolving a name to the functions it may run
    def _function(self, mod: Module, name: str) -> list[ast.AST]:
        if name in mod.functions:
            return [mod.functions[name]]
        if name in mod.classes:                # constructing one runs __init__ (and __post_init__)
            return [m for m in mod.classes[name].body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and m.name in ("__init__", "__post_init__", "__enter__", "__exit__")]
        if name in mod.from_imports:
            module, original = mod.from_imports[name]
            if (other := self.modules.get(module)) and other is not mod:
                return self._function(other, original)
        return []

    def resolve(self, mod: Module, call: ast.Call, where: ast.AST) -> list[ast.AST]:
        func = call.func
        if isinstance(func, ast.Name):
            scope: ast.AST | None = where
            while scope is not None:             # a def nested in the caller (or in its callers)
                if (nested := mod.nested.get(scope, {}).get(func.id)) is not None:
                    return [nested]
                scope = enclosing(mod, scope, (ast.FunctionDef, ast.AsyncFunctionDef))
            return self._function(mod, func.id)
        if isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and base.id in mod.module_imports:
                other = self.modules.get(mod.module_imports[base.id])
                return self._function(other, func.attr) if other else []
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                cls = enclosing(mod, where, (ast.ClassDef,))
            elif isinstance(base, ast.Name):     # Class.method(...), a class of this module
                cls = mod.classes.get(base.id)
            else:                                # an object's method: which class is not known here
                cls = None
            return [m for m in (cls.body if isinstance(cls, ast.ClassDef) else [])
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name == func.attr]
        return []

    def fixture(self, mod: Module, name: str) -> FuncDef | None:
        if name in mod.fixtures:
            return mod.fixtures[name]
        if name in mod.from_imports:
            module, original = mod.from_imports[name]
            if (other := self.modules.get(module)) and original in other.fixtures:
                return other.fixtures[original]
        conftest = self.modules.get("conftest")
        return conftest.fixtures.get(name) if conftest else None

    def fixtures_of(self, mod: Module, fn: FuncDef) -> list[FuncDef]:
        names = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        for dec in fn.decorator_list:          # @pytest.mark.usefixtures("name", ...)
            if isinstance(dec, ast.Call) and dotted(dec.func).endswith("usefixtures"):
                names += [a.value for a in dec.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        return [f for n in names if (f := self.fixture(mod, n)) is not None and f is not fn]

    # ---- checks
    def is_check(self, mod: Module, node: ast.AST, where: ast.AST) -> bool:
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            return dotted(exc).rsplit(".", 1)[-1] in ("AssertionError", "Failed")
        if not isinstance(node, ast.Call):
            return False
        name, last = dotted(node.func), last_name(node)
        if name in {f"pytest.{c}" for c in PYTEST_CHECKS} or \
                (name in PYTEST_CHECKS and mod.from_imports.get(name, ("",))[0] == "pytest"):
            return True
        if last in CHECK_CALLS:
            return True
        if name == "subprocess.run" and any(kw.arg == "check" and isinstance(kw.value, ast.Constant)
                                            and kw.value.value is True for kw in node.keywords):
            return True
        targets = self.resolve(mod, node, where)
        if targets:
            return any(self.function_checks(t) for t in targets)
        # a library's assertion: numpy.testing.assert_array_equal, unittest's assertEqual, mocks
        return last.startswith("assert") and (len(last) == 6 or last[6] in "_ABCDEFGHIJKLMNOPQRSTUVWXYZ")

    def sites(self, fn: ast.AST) -> Iterator[tuple[ast.AST, tuple[TryNode, ...]]]:
        """The checks `fn` itself runs, each with the `try`s whose `except` holds it."""
        mod = self.owner[fn]
        for node, handlers in own_nodes(fn):
            if self.is_check(mod, node, fn):
                yield node, handlers

    def function_checks(self, fn: ast.AST) -> bool:
        """`fn` (a helper, a fixture, a method) checks something: itself, or through what it calls."""
        if fn in self._memo:
            return self._memo[fn]
        self._memo[fn] = False                  # a recursive helper: its other paths decide
        mod = self.owner[fn]
        found = next(self.sites(fn), None) is not None
        if not found and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_fixture(fn):
            found = any(self.function_checks(f) for f in self.fixtures_of(mod, fn))
        self._memo[fn] = found
        return found


# ------------------------------------------------------------------------- rules (a) and (b)
def test_functions(mod: Module) -> Iterator[FuncDef]:
    for node in mod.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from (m for m in node.body
                        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test"))


def check_test(checks: Checks, mod: Module, fn: FuncDef) -> Iterator[Finding]:
    sites = list(checks.sites(fn))
    if not sites:
        if any(checks.function_checks(f) for f in checks.fixtures_of(mod, fn)):
            return
        yield Finding(mod.path, fn.lineno, "no-check",
                      f"{fn.name} checks nothing: no assert, pytest.raises, or helper that asserts",
                      header_span(fn))
        return
    # A `try` whose handler checks: the path where nothing is raised must meet a check too (in the
    # try body, its else or finally, or after the statement).
    tries = {t for _, handlers in sites for t in handlers}
    for t in sorted(tries, key=lambda t: t.lineno):
        handled = [n for n, handlers in sites if t in handlers]
        elsewhere = [n for n, handlers in sites if t not in handlers and getattr(n, "lineno", 0) >= t.lineno]
        if handled and not elsewhere:
            handler = next(h for h in t.handlers if any(n in set(ast.walk(h)) for n in handled))
            yield Finding(mod.path, handler.lineno, "except-only",
                          f"{fn.name}: its check at line {getattr(handled[0], 'lineno', '?')} runs only when "
                          "something raises; when nothing does the test passes unchecked (use pytest.raises)",
                          (t.lineno, handler.lineno))


# ------------------------------------------------------------------------------------ rule (c)
def truth_ors(expr: ast.expr) -> Iterator[ast.BoolOp]:
    """The `or`s whose truth makes the assert pass: not `(x or default) == y`, where `or` picks a
    value, nor `not (a or b)`, where a true half makes the assert fail (and the run shows it)."""
    if isinstance(expr, ast.BoolOp):
        if isinstance(expr.op, ast.Or):
            yield expr
        for value in expr.values:
            yield from truth_ors(value)


def constant_truth(expr: ast.expr) -> bool | None:
    """True / False when `expr`'s truth is decided by its text alone; None when it is not."""
    if isinstance(expr, ast.Constant):
        return bool(expr.value)
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return True if any(not isinstance(e, ast.Starred) for e in expr.elts) else (None if expr.elts else False)
    if isinstance(expr, ast.Dict):
        return True if any(k is not None for k in expr.keys) else (None if expr.keys else False)
    if isinstance(expr, ast.JoinedStr):
        return True if any(isinstance(v, ast.Constant) and v.value for v in expr.values) else None
    if isinstance(expr, ast.Lambda):
        return True
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = constant_truth(expr.operand)
        return None if inner is None else not inner
    if isinstance(expr, ast.BoolOp):
        truths = [constant_truth(v) for v in expr.values]
        if isinstance(expr.op, ast.Or):
            return True if True in truths else (False if all(t is False for t in truths) else None)
        return False if False in truths else (True if all(t is True for t in truths) else None)
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        left, op, right = expr.left, expr.ops[0], expr.comparators[0]
        if ast.dump(left) == ast.dump(right):       # x == x, x <= x, x is x
            if isinstance(op, (ast.Eq, ast.LtE, ast.GtE, ast.Is)):
                return True
            if isinstance(op, (ast.NotEq, ast.Lt, ast.Gt, ast.IsNot)):
                return False
        if is_len(left) and isinstance(op, ast.GtE) and is_number(right, lambda v: v <= 0) or \
                is_len(left) and isinstance(op, ast.Gt) and is_number(right, lambda v: v < 0) or \
                is_len(right) and isinstance(op, ast.LtE) and is_number(left, lambda v: v <= 0) or \
                is_len(right) and isinstance(op, ast.Lt) and is_number(left, lambda v: v < 0):
            return True                             # len(x) >= 0
    return None


def is_constant(expr: ast.expr) -> bool:
    """A number, a module constant (ALL_CAPS), or arithmetic on them."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        return expr.id.isupper()
    if isinstance(expr, ast.UnaryOp):
        return is_constant(expr.operand)
    if isinstance(expr, ast.BinOp):
        return is_constant(expr.left) and is_constant(expr.right)
    return False


def is_len(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and dotted(expr.func) == "len"


def is_number(expr: ast.expr, test: Callable[[float], bool]) -> bool:
    """`expr` is a number literal (`3`, `-1`) for which `test` holds."""
    sign = 1
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        sign, expr = -1, expr.operand
    value = expr.value if isinstance(expr, ast.Constant) else None
    return isinstance(value, (int, float)) and not isinstance(value, bool) and test(sign * value)


def check_ors(mod: Module) -> Iterator[Finding]:
    for node in mod.nodes:
        if not isinstance(node, ast.Assert):
            continue
        undecided = False
        for bool_op in truth_ors(node.test):
            text = [ast.unparse(v) for v in bool_op.values]
            dumps = [ast.dump(v) for v in bool_op.values]
            true_half = next((i for i, v in enumerate(bool_op.values) if constant_truth(v) is True), None)
            repeated = next((i for i in range(len(dumps)) if dumps[i] in dumps[:i]), None)
            if true_half is not None:
                yield Finding(mod.path, bool_op.values[true_half].lineno, "or-true",
                              f"`{text[true_half]}` is always true: this `or` can never fail", stmt_span(node))
            elif repeated is not None:
                yield Finding(mod.path, bool_op.values[repeated].lineno, "or-true",
                              f"`{text[repeated]}` is on both sides of `or`: one half checks nothing",
                              stmt_span(node))
            else:
                undecided = True
        if undecided:
            yield Finding(mod.path, node.lineno, INFO_CODE,
                          f"assert ... or ...: {ast.unparse(node.test)[:100]}", stmt_span(node), failing=False)


# ------------------------------------------------------------------------------ clock readings
READING, DURATION = 1, 2       # a clock value: a reading (now, a deadline) or a duration (a difference)


def clock_names(mod: Module) -> set[str]:
    """The names that call a clock here: `time.monotonic`, or `monotonic` from `from time import`."""
    names = {f"{alias}.{c}" for alias, m in mod.module_imports.items() if m == "time" for c in CLOCKS}
    names |= {alias for alias, (m, n) in mod.from_imports.items() if m == "time" and n in CLOCKS}
    return names


class ClockFlow:
    """Where a module's clock values go: the local names of each function that hold one, what its
    functions return (item by item for a tuple), and the attributes (a dataclass's fields, `self.x`)
    that are given one."""

    def __init__(self, mod: Module):
        self.mod = mod
        self.clocks = clock_names(mod)
        self.returns: dict[str, tuple[int, ...]] = {}
        self.attrs: dict[str, int] = {}
        self._names: dict[ast.AST, dict[str, int]] = {}
        self.fields = {name: [n.target.id for n in cls.body
                              if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
                       for name, cls in mod.classes.items()}
        if not self.clocks:
            return
        for _ in range(4):          # each round may find one more helper in a chain; four is plenty here
            before = (dict(self.returns), dict(self.attrs))
            self._names.clear()
            for node in mod.nodes:
                self._learn(node)
            if before == (self.returns, self.attrs):
                break
        self._names.clear()

    def _learn(self, node: ast.AST) -> None:
        """What `node` tells of the module's functions and attributes."""
        if isinstance(node, ast.Return) and node.value is not None:
            fn = enclosing(self.mod, node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                got, had = self.kinds(node.value, node), self.returns.get(fn.name, ())
                if len(got) != len(had):
                    got = (max((*got, *had)),) if had else got
                self.returns[fn.name] = tuple(max(a, b) for a, b in zip(got, had or got))
        elif isinstance(node, ast.Call) and dotted(node.func) in self.fields:
            # a class of this module built with one: Reply(..., time.monotonic() - t0), Result(seconds=elapsed)
            fields = self.fields[dotted(node.func)]
            named = [*zip(fields, node.args), *((kw.arg, kw.value) for kw in node.keywords if kw.arg)]
            for attr, value in named:
                if kind := self.kind(value, node):
                    self.attrs[attr] = max(kind, self.attrs.get(attr, 0))
        elif isinstance(node, ast.Assign):      # self.started = time.monotonic()
            for target in node.targets:
                if isinstance(target, ast.Attribute) and (kind := self.kind(node.value, node)):
                    self.attrs[target.attr] = max(kind, self.attrs.get(target.attr, 0))

    def names(self, where: ast.AST) -> dict[str, int]:
        """The clock values of the function around `where` (with the defs inside it, which share its names)."""
        fn = outermost_def(self.mod, where)
        if fn not in self._names:
            self._names[fn] = {}                # while it is worked out, its names are not known yet
            self._names[fn] = self._local_names(fn)
        return self._names[fn]

    def _local_names(self, fn: ast.AST) -> dict[str, int]:
        names: dict[str, int] = {}
        assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr,
                                                             ast.For, ast.AsyncFor, ast.comprehension, ast.Expr))]
        changed = True
        while changed:
            changed = False
            for node in assigns:
                for target, kind in self._assigned(node, names):
                    if kind and isinstance(target, ast.Name) and names.get(target.id, 0) < kind:
                        names[target.id] = kind
                        changed = True
        return names

    def _assigned(self, node: ast.AST, names: Mapping[str, int]) -> Iterator[tuple[ast.expr, int]]:
        """(name, kind of clock value it gets) for each name `node` binds."""
        if isinstance(node, ast.Expr):          # durations.append(elapsed)
            call = node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                    and call.func.attr in ("append", "extend", "add", "insert"):
                yield call.func.value, max((clock_kind(a, self, names) for a in call.args), default=0)
            return
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            value, targets = node.iter, [node.target]
        elif isinstance(node, ast.Assign):
            value, targets = node.value, node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            value, targets = node.value, [node.target]
        else:
            return
        kinds = self.kinds(value, node, names)
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(kinds):
                yield from zip(target.elts, kinds)      # got, took = timed_get(...)
            else:
                yield from ((n, max(kinds)) for n in ast.walk(target) if isinstance(n, ast.Name))

    def kind(self, expr: ast.expr, where: ast.AST, names: Mapping[str, int] | None = None) -> int:
        return clock_kind(expr, self, self.names(where) if names is None else names)

    def kinds(self, expr: ast.expr, where: ast.AST, names: Mapping[str, int] | None = None) -> tuple[int, ...]:
        """The clock kind of each item of `expr` when it is a tuple; of `expr` otherwise."""
        names = self.names(where) if names is None else names
        if isinstance(expr, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in expr.elts):
            return tuple(clock_kind(e, self, names) for e in expr.elts)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in self.returns:
            return self.returns[expr.func.id]
        return (clock_kind(expr, self, names),)


def clock_kind(expr: ast.expr, flow: ClockFlow, names: Mapping[str, int]) -> int:
    """0, READING or DURATION: what of the clock `expr` holds."""
    def kind(e: ast.expr) -> int:
        return clock_kind(e, flow, names)
    if isinstance(expr, ast.Name):
        return names.get(expr.id, 0)
    if isinstance(expr, ast.Attribute):
        return flow.attrs.get(expr.attr, 0)
    if isinstance(expr, ast.Call):
        name = dotted(expr.func)
        if name in flow.clocks:
            return READING
        if isinstance(expr.func, ast.Name) and name in flow.returns:
            return max(flow.returns[name])
        if name.rsplit(".", 1)[-1] in CLOCK_PRESERVING:
            return max((kind(a) for a in expr.args), default=0)
        return 0
    if isinstance(expr, ast.BinOp):
        left, right = kind(expr.left), kind(expr.right)
        if isinstance(expr.op, ast.Sub) and READING in (left, right):
            # now - start is a duration, whatever `start` is (an attribute, another reading); now - 5
            # and now - MAX_AGE_S are still readings
            other = expr.right if left == READING else expr.left
            return READING if is_constant(other) else DURATION
        return max(left, right)
    if isinstance(expr, ast.UnaryOp):
        return kind(expr.operand)
    if isinstance(expr, ast.Subscript):
        return kind(expr.value)
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return max((kind(e) for e in expr.elts), default=0)
    if isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        return kind(expr.elt)
    if isinstance(expr, ast.IfExp):
        return max(kind(expr.body), kind(expr.orelse))
    return 0


def is_timing(compare: ast.Compare, flow: ClockFlow, names: Mapping[str, int]) -> ast.expr | None:
    """The side of `compare` that makes it a stopwatch: a duration against anything, or a reading
    against a reading (`time.monotonic() < deadline`). A reading against a timestamp is not one."""
    sides = [compare.left, *compare.comparators]
    kinds = [clock_kind(s, flow, names) for s in sides]
    if DURATION in kinds:
        return sides[kinds.index(DURATION)]
    if kinds.count(READING) >= 2:
        return sides[kinds.index(READING)]
    return None


def tests_only_the_clock(expr: ast.expr, flow: ClockFlow, names: Mapping[str, int]) -> bool:
    """`expr` tests nothing but the time (`time.monotonic() < deadline`, `True`): each name in it is a
    clock value, or is compared with one (then it is a time too)."""
    timed = {id(n) for c in ast.walk(expr) if isinstance(c, ast.Compare)
             and any(clock_kind(side, flow, names) for side in (c.left, *c.comparators)) for n in ast.walk(c)}
    timed |= {id(n) for c in ast.walk(expr) if isinstance(c, ast.Call) and dotted(c.func) in flow.clocks
              for n in ast.walk(c)}
    return not any(isinstance(n, ast.Name) and id(n) not in timed and n.id not in names for n in ast.walk(expr))


def outermost_def(mod: Module, node: ast.AST) -> ast.AST:
    """The top-level def or method around `node` (its nested defs share its names), else the module."""
    outer: ast.AST = mod.tree
    while (node := enclosing(mod, node, (ast.FunctionDef, ast.AsyncFunctionDef))) is not None:  # type: ignore[assignment]
        outer = node
    return outer


def loops_around(mod: Module, node: ast.AST) -> Iterator[ast.For | ast.AsyncFor | ast.While]:
    """The loops around `node` in its own function, innermost first."""
    scope = enclosing(mod, node, (*LOOPS, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    while isinstance(scope, LOOPS):
        yield scope
        scope = enclosing(mod, scope, (*LOOPS, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))


def polls(loop: ast.For | ast.AsyncFor | ast.While, flow: ClockFlow, *, conditions_only: bool = False) -> bool:
    """The loop tests something besides the time: its `while` condition, an `if` in its body, or
    (unless `conditions_only`) an assert or a `try` (the call in it succeeding) in its body."""
    names = flow.names(loop)
    if isinstance(loop, ast.While) and not tests_only_the_clock(loop.test, flow, names):
        return True
    for node, _ in own_nodes(loop):
        if isinstance(node, (ast.If, ast.While)) and not tests_only_the_clock(node.test, flow, names):
            return True
        if not conditions_only and isinstance(node, (ast.Assert, ast.Try)):
            return True
    return False


# ------------------------------------------------------------------------------------ rule (e)
def check_wall_clock(mod: Module, flow: ClockFlow) -> Iterator[Finding]:
    if not flow.clocks:
        return
    for node in mod.nodes:
        if isinstance(node, ast.Assert):
            compares = [c for c in ast.walk(node.test) if isinstance(c, ast.Compare)]
        elif isinstance(node, ast.Call) and last_name(node).startswith("assert") and len(node.args) >= 2:
            compares = [ast.Compare(left=node.args[0], ops=[ast.Lt()], comparators=[node.args[1]])]  # assertLess
        else:
            continue
        names = flow.names(node)
        timed = next((t for c in compares if (t := is_timing(c, flow, names)) is not None), None)
        # the time box of a wait (`while not done(): assert time.monotonic() < deadline`) is no stopwatch
        if timed is not None and not any(polls(loop, flow, conditions_only=True) for loop in loops_around(mod, node)):
            yield Finding(mod.path, node.lineno, "wall-clock",
                          f"asserts on the clock (`{ast.unparse(timed)[:60]}`): a busy machine fails it; "
                          "count events or inject a clock", stmt_span(node))


# ------------------------------------------------------------------------------------ rule (d)
def check_sleeps(mod: Module, flow: ClockFlow) -> Iterator[Finding]:
    sleep_names = {f"{a}.sleep" for a, m in mod.module_imports.items() if m in ("time", "asyncio")}
    sleep_names |= {a for a, (m, n) in mod.from_imports.items() if m in ("time", "asyncio") and n == "sleep"}
    for node in mod.nodes:
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        # wait_for_timeout is Playwright's alone: browser code wherever it is
        if not (name.endswith(".wait_for_timeout") or (mod.is_browser and name in sleep_names)):
            continue
        if any(polls(loop, flow) for loop in loops_around(mod, node)):
            continue
        stmt = enclosing(mod, node, (ast.stmt,)) or node
        yield Finding(mod.path, node.lineno, "fixed-sleep",
                      f"`{ast.unparse(node)[:60]}` waits a fixed time, not for a condition: wait until "
                      "what it waits for is there (a polling loop, expect(), wait_for)", stmt_span(stmt))


# --------------------------------------------------------------------------------------- opt-outs
def opt_outs(mod: Module) -> Iterator[tuple[OptOut | None, Finding | None]]:
    """The `# check-tests: allow` comments of a module; a malformed one is a finding instead."""
    if "check-tests" not in mod.source:
        return
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(mod.source).readline))
    except (tokenize.TokenError, SyntaxError):
        return
    for tok in tokens:
        if tok.type != tokenize.COMMENT or not (m := ALLOW.search(tok.string)):
            continue
        line, code, reason = tok.start[0], m["code"], m["reason"].strip()
        if code not in CODES:
            yield None, Finding(mod.path, line, "bad-allow",
                                f"unknown code {code!r} (one of {', '.join(CODES)})", (line, line))
        elif not reason:
            yield None, Finding(mod.path, line, "bad-allow", f"`allow {code}` needs a reason after the code",
                                (line, line))
        else:
            yield OptOut(mod.path, line, code, reason), None


# ------------------------------------------------------------------------------------------ run
def check_modules(modules: Mapping[str, Module], report_on: Iterable[str]) -> Report:
    checks = Checks(modules)
    raw: list[Finding] = []
    allows: list[OptOut] = []
    files = tests = 0
    for name in report_on:
        mod = modules[name]
        files += 1
        if mod.is_test_file:
            for fn in test_functions(mod):
                tests += 1
                raw.extend(check_test(checks, mod, fn))
        raw.extend(check_ors(mod))
        flow = ClockFlow(mod)
        raw.extend(check_sleeps(mod, flow))
        raw.extend(check_wall_clock(mod, flow))
        for allow, bad in opt_outs(mod):
            if allow is not None:
                allows.append(allow)
            if bad is not None:
                raw.append(bad)
    findings, info = [], []
    for f in sorted(set(raw), key=lambda f: (f.path, f.line, f.code)):
        match = next((a for a in allows if a.path == f.path and a.code == f.code
                      and f.span[0] <= a.line <= f.span[1]), None)
        if match is not None:
            match.used = True
        elif f.failing:
            findings.append(f)
        else:
            info.append(f)
    findings += [Finding(a.path, a.line, "bad-allow", f"`allow {a.code}` here: nothing to allow", (a.line, a.line))
                 for a in allows if not a.used]
    findings.sort(key=lambda f: (f.path, f.line, f.code))
    return Report(findings, info, allows, files, tests)


def check_sources(sources: Mapping[str, str], report_on: Iterable[str] | None = None) -> Report:
    """Check the files `sources` (path -> text); helpers resolve among them (tests/ imports its helpers
    as top-level modules, so a file's import name is its stem)."""
    modules = {Path(p).stem: parse(p, text) for p, text in sources.items()}
    paths = set(report_on) if report_on is not None else set(sources)
    return check_modules(modules, [m.name for m in modules.values() if m.path in paths])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("files", nargs="*", type=Path, help="test files (default: tests/*.py)")
    parser.add_argument("--info", action="store_true", help="also list the `assert ... or ...` left to a reader")
    args = parser.parse_args(argv)
    files = args.files or sorted((ROOT / "tests").glob("*.py"))
    folders = {f.resolve().parent for f in files}
    universe = {p.resolve() for d in folders for p in d.glob("*.py")} | {f.resolve() for f in files}

    def shown(p: Path) -> str:
        return str(p.relative_to(Path.cwd())) if p.is_relative_to(Path.cwd()) else str(p)

    sources = {shown(p): p.read_text(encoding="utf-8") for p in sorted(universe)}
    try:
        report = check_sources(sources, [shown(f.resolve()) for f in files])
    except SyntaxError as e:                 # ruff says it too; here it is one line, not a traceback
        print(f"{e.filename}:{e.lineno}: syntax-error {e.msg}")
        return 1
    for f in report.findings:
        print(f)
    if args.info:
        for f in report.info:
            print(f)
    by_code = Counter(a.code for a in report.opt_outs)
    allowed = ", ".join(f"{n} {c}" for c, n in sorted(by_code.items())) or "none"
    print(f"check_tests: {report.files} files, {report.tests} tests: {len(report.findings)} findings; "
          f"{len(report.info)} `assert ... or ...` for a reader (--info); opt-outs: {allowed}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
