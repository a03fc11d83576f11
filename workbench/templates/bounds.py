"""Size bounds on what a chat template computes, checked before the work is done.

A thread cannot stop C code, so a template that asks for one huge value (`9 ** 100000000`,
`'a' * 10**8`, `'%0100000000d' % 1`, `tojson(indent=10**8)`) must be refused before Python
starts computing it. Every operation whose result can be much larger than its inputs goes
through here: the operators `*`, `**`, `%` (and `+`/`~` between two computed values, which can
double a value at each step), the filters and string methods that take a width or repeat their
input, `range`, `lipsum`, printing a list or dict (a list of references to one list prints it
again each time), and the buffers of macros and `{% set %}` blocks. Each estimates its result
from its operands and raises TemplateBoundError when that would pass the render's cap
(`RenderLimits.max_output_chars`): no single value may be larger than the whole output may be.
Integers are capped by bits (MAX_INT_BITS), so `**` and `*` on numbers stay fast.

The cap comes from a ContextVar the renderer sets, unreachable from template code. While a
template compiles the cap is 0, so Jinja's constant folding can never run a bounded operation at
compile time (`{{ 'a' * 10**8 }}` is computed, and refused, when it renders, naming its line).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from functools import wraps
from string import Formatter
from typing import Any

import jinja2.utils
from jinja2.runtime import markup_join

# 32 Mi characters: ~8M tokens, more than any model's context window today (a long real prompt
# is a few million characters), and still small enough to build, copy and check in well under
# a second. Raise RenderLimits.max_output_chars for a longer prompt.
DEFAULT_MAX_CHARS = 32 * 1024 * 1024
MAX_INT_BITS = 1 << 16   # ~19,700 decimal digits: Python cannot print a longer int anyway (4,300)
# Ten times Jinja's own sandbox limit: `range(messages|length)` must cover the longest conversation
# intake accepts (100,000 messages, and the ones injected around them). Loops over a range are
# counted step by step (steps.py); this cap is for what C code makes of one (`dict.fromkeys`).
MAX_RANGE = 1_000_000
MAX_SLICES = 100_000     # slice(n) builds n lists
MAX_JSON_INDENT = 1_000  # tojson(indent=4) is what templates use
WORDWRAP_WORK = 10**11   # textwrap splits a long word in O(len^2 / width) steps


class TemplateBoundError(Exception):
    """A template operation would build a value over the cap (becomes TemplateLimitError)."""


@dataclass(frozen=True, slots=True)
class Bounds:
    max_chars: int                 # no value, and no output, may be larger
    now: datetime | None = None    # the instant strftime_now formats (None: the wall clock)


DEFAULT = Bounds(DEFAULT_MAX_CHARS)
COMPILING = Bounds(0)
_BOUNDS: ContextVar[Bounds] = ContextVar("workbench_template_bounds")


@contextmanager
def bounded(bounds: Bounds) -> Iterator[None]:
    token = _BOUNDS.set(bounds)
    try:
        yield
    finally:
        _BOUNDS.reset(token)


def current() -> Bounds:
    return _BOUNDS.get(DEFAULT)


def check(size: int, what: str) -> None:
    cap = _BOUNDS.get(DEFAULT).max_chars
    if size > cap:
        raise TemplateBoundError(f"{what} would be {_num(size)} characters, over the cap of {cap:,} "
                                 "(RenderLimits.max_output_chars)")


def _num(n: int) -> str:
    return f"{n:,}" if n < 10**15 else f"about 10^{len(str(n)) - 1}"


# ---- sizes --------------------------------------------------------------------------------------

def weight(x: Any, limit: int | None = None) -> int:
    """Characters `x` stands for once printed or serialized (within a small factor); stops past `limit`.

    Containers seen before count from a memo, so a list holding one list a thousand times costs
    a thousand steps to weigh, not the size it prints as.
    """
    if isinstance(x, str):
        return len(x)
    return _weigh(x, limit if limit is not None else _BOUNDS.get(DEFAULT).max_chars, {})


def _weigh(x: Any, limit: int, memo: dict[int, int]) -> int:
    if isinstance(x, (str, bytes)):
        return len(x)
    if isinstance(x, bool) or x is None:
        return 5
    if isinstance(x, int):
        return x.bit_length() // 3 + 1
    if isinstance(x, float):
        return 24
    if isinstance(x, jinja2.utils.Namespace):  # prints its attributes
        x = x._Namespace__attrs
    if isinstance(x, Mapping):
        items: Any = (v for kv in x.items() for v in kv)
    elif isinstance(x, (list, tuple, set, frozenset, KeysView, ValuesView, ItemsView)):
        items = x
    else:
        return 1
    key = id(x)
    got = memo.get(key)
    if got is not None:
        return got
    n = 2 * len(x)
    for v in items:
        n += len(v) if isinstance(v, str) else _weigh(v, limit, memo)
        if n > limit:
            break
    memo[key] = n
    return n


def guard_value(v: Any) -> Any:
    """Before a value is printed: a container must not print as more than the cap."""
    if not isinstance(v, (str, int, float)):
        check(weight(v), "printing this value")
    return v


# ---- operators ------------------------------------------------------------------------------------

def binop(op: str, a: Any, b: Any) -> Any:
    return _BINOPS[op](a, b)


def _mul(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        if a.bit_length() + b.bit_length() > MAX_INT_BITS:
            raise TemplateBoundError(f"a product of integers over {MAX_INT_BITS:,} bits")
    elif isinstance(b, int) and isinstance(a, (str, bytes, list, tuple)):
        check(weight(a) * b, "repeating this value")
    elif isinstance(a, int) and isinstance(b, (str, bytes, list, tuple)):
        check(weight(b) * a, "repeating this value")
    return a * b


def _pow(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and b > 1 and abs(a) > 1:
        if abs(a).bit_length() * b > MAX_INT_BITS:
            raise TemplateBoundError(f"{_short(a)} ** {_short(b)} has more than {MAX_INT_BITS:,} bits "
                                     f"(about {_num(int(abs(a).bit_length() * b * 0.30103))} digits)")
    return a ** b


def _short(n: int) -> str:
    return str(n) if n.bit_length() < 64 else f"a {n.bit_length()}-bit integer"


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, (str, bytes)):
        _check_printf(a, b)
    return a % b


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {"*": _mul, "**": _pow, "%": _mod}


# ---- format strings --------------------------------------------------------------------------------

_SPEC = r"%(?:\([^()]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?"
_PRINTF = re.compile(_SPEC)
_PRINTF_BYTES = re.compile(_SPEC.encode())


def _check_printf(fmt: str | bytes, args: Any) -> None:
    """`fmt % args`: widths and precisions (literal or `*` from the arguments) and the values."""
    values = tuple(args.values()) if isinstance(args, Mapping) else args if isinstance(args, tuple) else (args,)
    size = len(fmt) + sum(weight(v) for v in values) if values else len(fmt)
    star = False
    matches = _PRINTF.finditer(fmt) if isinstance(fmt, str) else _PRINTF_BYTES.finditer(fmt)
    for m in matches:
        for g in (m.group(1), m.group(2)):
            if g in ("*", b"*"):
                star = True
            elif g:
                size += int(g) if len(g) < 20 else 10**20
    if star:
        size += sum(v for v in values if isinstance(v, int) and v > 0)
    check(size, "this formatted string")


def _check_format(fmt: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """`fmt.format(...)`: field widths (literal or nested `{}` from the arguments), fields x values."""
    try:
        fields = list(Formatter().parse(fmt))
    except ValueError:
        return  # str.format raises the same error
    values = (*args, *kwargs.values())
    biggest = max((weight(v) for v in values), default=0)
    size, nested = len(fmt), False
    for _, name, spec, _ in fields:
        if name is None:
            continue
        size += biggest
        if spec:
            nested = nested or "{" in spec
            size += sum(int(d) if len(d) < 20 else 10**20 for d in re.findall(r"\d+", spec))
    if nested:
        size += sum(v for v in values if isinstance(v, int) and v > 0)
    check(size, "this formatted string")


# ---- string methods (called through the sandbox's `call`) -------------------------------------------

def _int(v: Any, default: int = 0) -> int:
    return v if isinstance(v, int) else default


def check_method(owner: str | bytes | int, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """A str/bytes/int method whose result can be much larger than its owner."""
    if isinstance(owner, int):
        if name == "to_bytes":
            check(_int(args[0] if args else kwargs.get("length", 1), 1), "int.to_bytes")
        return
    n = len(owner)
    if name in ("center", "ljust", "rjust", "zfill"):
        check(max(n, _int(args[0] if args else kwargs.get("width"))), f"str.{name}")
    elif name == "expandtabs":
        tab = _int(args[0] if args else kwargs.get("tabsize", 8), 8)
        tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
        check(n + tabs * max(tab, 0), "str.expandtabs")
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], type(owner)) \
            and isinstance(args[1], type(owner)):
        check(_replaced_size(owner, args[0], args[1], _int(args[2], -1) if len(args) > 2 else -1), "str.replace")
    elif name == "join" and args:
        items = args[0]
        if isinstance(items, (list, tuple, str, bytes, Mapping)):
            check(weight(items) + len(items) * n, "str.join")
    elif name == "format" and isinstance(owner, str):
        _check_format(owner, args, kwargs)
    elif name == "format_map" and isinstance(owner, str) and args and isinstance(args[0], Mapping):
        _check_format(owner, (), args[0])
    elif name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((len(v) for v in args[0].values() if isinstance(v, (str, bytes))), default=1)
        check(n * max(longest, 1), "str.translate")


WIDE_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs", "replace", "join", "format",
                          "format_map", "translate", "to_bytes"})


def _replaced_size(s: Any, old: Any, new: Any, count: int) -> int:
    hits = s.count(old) if old else len(s) + 1
    if count >= 0:
        hits = min(hits, count)
    return len(s) + hits * max(len(new) - len(old), 0)


# ---- buffers and `~` -----------------------------------------------------------------------------

def value_cap() -> int:
    return _BOUNDS.get(DEFAULT).max_chars


def checked_sum(v: Any) -> Any:
    """The result of `a + b` (two computed operands) when it is not a string within the cap."""
    if isinstance(v, (str, bytes, list, tuple)):
        check(len(v), "this sum")
    elif isinstance(v, int) and v.bit_length() > MAX_INT_BITS:
        raise TemplateBoundError(f"a sum of integers over {MAX_INT_BITS:,} bits")
    return v


class Buffer(list[str]):
    """The output buffer of a macro or a `{% set %}`/filter block: counts what goes in.

    Without it a loop in a macro could hold gigabytes of pieces before the macro returns.
    """

    # Characters it may still take: set to the cap by the generated code right after it makes the
    # buffer (from the function's `_wb_cap`, which saves a ContextVar lookup per piece).
    __slots__ = ("left",)
    left: int

    def append(self, piece: str) -> None:
        self.left -= len(piece)
        if self.left < 0:
            self._refuse()
        list.append(self, piece)

    def extend(self, pieces: Iterable[str]) -> None:
        pieces = tuple(pieces)
        self.left -= sum(map(len, pieces))
        if self.left < 0:
            self._refuse()
        list.extend(self, pieces)

    def _refuse(self) -> None:
        cap = _BOUNDS.get(DEFAULT).max_chars
        check(cap - self.left, "this block's output")


def join_values(items: tuple[Any, ...], markup: bool = False) -> str:
    """`a ~ b ~ c`: strings join as they are; any other value is checked before it is printed."""
    if markup:
        for v in items:
            guard_value(v)
        out = markup_join(items)
    else:
        try:
            out = "".join(items)
        except TypeError:
            out = "".join([v if isinstance(v, str) else str(guard_value(v)) for v in items])
    if len(out) > _BOUNDS.get(DEFAULT).max_chars:
        check(len(out), "this concatenation")
    return out


# ---- filters -----------------------------------------------------------------------------------------

def _wrap(original: Callable[..., Any], precheck: Callable[..., None], materialize: bool = False) -> Callable[..., Any]:
    """A filter that checks its arguments first; keeps Jinja's pass_* marks (`wraps`).

    The precheck sees the filter's own arguments (value, *args), without the context,
    eval context or environment Jinja passes first to some filters. With `materialize`, a
    value that is an iterator (`map`, `select`) is made a list first, so it can be weighed.
    """
    skip = 1 if getattr(original, "jinja_pass_arg", None) else 0

    @wraps(original)
    def run(*args: Any, **kwargs: Any) -> Any:
        if materialize and len(args) > skip and not hasattr(args[skip], "__len__"):
            args = (*args[:skip], list(args[skip]), *args[skip + 1:])
        precheck(*args[skip:], **kwargs)
        return original(*args, **kwargs)
    return run


def _pre_center(value: Any, width: int = 80) -> None:
    check(max(weight(value), _int(width)), "center")


def _pre_indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> None:
    w = len(width) if isinstance(width, str) else _int(width)
    text = s if isinstance(s, str) else ""
    check(weight(s) + (text.count("\n") + 2) * max(w, 0), "indent")


def _pre_wordwrap(s: Any, width: int = 79, break_long_words: bool = True,
                  wrapstring: str | None = None, break_on_hyphens: bool = True) -> None:
    n, w = weight(s), max(_int(width, 79), 1)
    if n * n // w > WORDWRAP_WORK:
        raise TemplateBoundError(f"wordwrap of {n:,} characters to width {w} is too much work")
    lines = n // w + (s.count("\n") if isinstance(s, str) else 0) + 1
    check(n + lines * (len(wrapstring) if isinstance(wrapstring, str) else 1), "wordwrap")


def _pre_format(value: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(value, str):
        _check_printf(value, kwargs if kwargs else args)


def _pre_replace(s: Any, old: Any, new: Any, count: int | None = None) -> None:
    s, old, new = str(s), str(old), str(new)
    check(_replaced_size(s, old, new, -1 if count is None else _int(count, -1)), "replace")


def _pre_join(value: Any, d: str = "", attribute: Any = None) -> None:
    if isinstance(value, (list, tuple, str, Mapping)):
        check(weight(value) + len(value) * len(str(d)), "join")


def _pre_batch(value: Any, linecount: int, fill_with: Any = None) -> None:
    if fill_with is not None:
        check(_int(linecount) * weight(fill_with), "batch")


def _pre_slice(value: Any, slices: int, fill_with: Any = None) -> None:
    if _int(slices) > MAX_SLICES:
        raise TemplateBoundError(f"slice into {_num(_int(slices))} parts (at most {MAX_SLICES:,})")


def _pre_printed(value: Any, *args: Any, **kwargs: Any) -> None:
    check(weight(value), "printing this value")


def _pre_round(value: Any, precision: int = 0, method: str = "common") -> None:
    # round(5, -10**7) and the ceil/floor methods compute 10 ** precision: seconds of C for a big one.
    if abs(_int(precision)) > MAX_INT_BITS // 4:
        raise TemplateBoundError(f"round to {_num(_int(precision))} digits (at most {MAX_INT_BITS // 4:,})")


def _pre_sum(iterable: Any, attribute: Any = None, start: Any = 0) -> None:
    check(weight(iterable) + weight(start), "sum")


def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
           sort_keys: bool = False) -> str:
    """transformers' `tojson` (no HTML escaping), with the output counted as it is built."""
    check(weight(x) * (6 if ensure_ascii else 1), "tojson")  # ensure_ascii writes \\uXXXX
    if indent is None and separators is None:  # the C encoder; its output is within a few x the weight
        out = json.dumps(x, ensure_ascii=ensure_ascii, sort_keys=sort_keys)
        check(len(out), "tojson")
        return out
    w = len(indent) if isinstance(indent, str) else _int(indent)
    if w > MAX_JSON_INDENT:  # each nesting level repeats it, in one piece, before we can count it
        raise TemplateBoundError(f"tojson indent of {_num(w)} characters (at most {MAX_JSON_INDENT:,})")
    if isinstance(separators, (list, tuple)):  # once per item
        check(weight(x) * (1 + sum(len(s) for s in separators if isinstance(s, str))), "tojson")
    encoder = json.JSONEncoder(ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                               sort_keys=sort_keys)
    cap, size, parts = _BOUNDS.get(DEFAULT).max_chars, 0, []
    for piece in encoder.iterencode(x, True):  # the pure-Python encoder: each piece is one line or less
        size += len(piece)
        if size > cap:
            check(size, "tojson")
        parts.append(piece)
    return "".join(parts)


# filter name -> its precheck; the second table's filters take iterators too (made lists first).
_PRECHECKS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("center", _pre_center), ("indent", _pre_indent), ("wordwrap", _pre_wordwrap), ("format", _pre_format),
    ("replace", _pre_replace), ("batch", _pre_batch), ("slice", _pre_slice), ("pprint", _pre_printed),
    ("string", _pre_printed), ("e", _pre_printed), ("escape", _pre_printed), ("forceescape", _pre_printed),
    ("safe", _pre_printed), ("round", _pre_round))
_MATERIALIZING_PRECHECKS: tuple[tuple[str, Callable[..., None]], ...] = (("join", _pre_join), ("sum", _pre_sum))


def bounded_filters(filters: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    out = dict(filters)
    for name, pre in _PRECHECKS:
        if name in out:
            out[name] = _wrap(out[name], pre)
    for name, pre in _MATERIALIZING_PRECHECKS:
        if name in out:
            out[name] = _wrap(out[name], pre, materialize=True)
    out["tojson"] = tojson
    return out


# ---- globals -------------------------------------------------------------------------------------------

def safe_range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise TemplateBoundError(f"range() of {_num(len(r))} items (at most {MAX_RANGE:,})")
    return r


def lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002
    words = _int(max) if _int(max) > _int(min) else _int(min)
    check(_int(n) * words * 16, "lipsum")
    return jinja2.utils.generate_lorem_ipsum(n=n, html=html, min=min, max=max)
