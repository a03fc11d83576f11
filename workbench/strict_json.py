"""JSON values the workbench accepts: what `json` allows, less what breaks or lies downstream.

Python's `json` accepts NaN and Infinity (and writes them back: not JSON), parses any nesting
until the interpreter's recursion limit (then RecursionError), and integers until the
int-to-str limit (then ValueError: 4,300 digits). Lone surrogates (`"\\ud800"`) parse fine and
fail later, at the first UTF-8 encode. Each of those is refused here, with where it is:

- `loads(text)` parses a document and raises `JSONValueError` (a `json.JSONDecodeError`, so
  callers that catch that keep working) naming the problem and its line and column, or its path
  (`messages[3].tool_calls[0].id`).
- `find_problem(value)` walks a value already in memory (a request a caller built) without
  recursion and returns the first problem as a `Problem` (path and message), or None.

The walk is the hot part (intake runs it on every request): one pass over the containers with a
type dispatch per item, no path bookkeeping; only when it finds something does a second, slower
pass rebuild the path.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from types import EllipsisType
from typing import Any, TypeAlias

MAX_DEPTH = 200        # containers inside containers; real tool schemas stay under 20
MAX_INT_DIGITS = 100   # JSON has no integer size; past this a number is an attack, not data

_BOUNDS: dict[int, int] = {}  # max_int_digits -> 10 ** max_int_digits, computed once (intake asks per message)
_STRING = r'"(?:[^"\\]|\\.)*"'
# A string holds a surrogate only through an escape `\uD8xx`..`\uDFxx` or one in the text itself
# (never in text decoded from UTF-8, which cannot encode them): without either, no string needs a look.
_SURROGATES = re.compile("\\\\u[dD][89a-fA-F]|[\ud800-\udfff]")
# Where a value sits: object keys and list indices from the root.
_Path: TypeAlias = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """What is wrong with a JSON value and where: `path` from the value's root (`""`: the root)."""

    path: str
    message: str
    hint: str

    def at(self, prefix: str) -> str:
        """The path below a field: at("messages[3]") -> "messages[3].tool_calls[0].id"."""
        if not self.path:
            return prefix
        return prefix + self.path if self.path.startswith("[") or not prefix else f"{prefix}.{self.path}"


class JSONValueError(json.JSONDecodeError):
    """A document that parses as Python's `json` reads it but is refused (see the module doc)."""

    def __init__(self, message: str, doc: str, pos: int | None, *, path: str | None = None,
                 hint: str = ""):
        super().__init__(message, doc, pos or 0)
        self.path = path
        self.hint = hint
        self.located = pos is not None

    def __str__(self) -> str:
        if self.located:
            return f"{self.msg} at line {self.lineno}, column {self.colno}"
        return f"{self.path}: {self.msg}" if self.path else self.msg

    def __reduce__(self) -> tuple[Callable[..., JSONValueError], tuple[str, str, int | None, str | None, str]]:
        return (_rebuild, (self.msg, self.doc, self.pos if self.located else None, self.path, self.hint))


def _rebuild(msg: str, doc: str, pos: int | None, path: str | None, hint: str) -> JSONValueError:
    return JSONValueError(msg, doc, pos, path=path, hint=hint)


def loads(text: str, *, max_depth: int = MAX_DEPTH, max_int_digits: int = MAX_INT_DIGITS, depth: int = 1) -> Any:
    """Parse a JSON document; raise json.JSONDecodeError (JSONValueError for the refused cases).
    `depth`: the level the document's root sits at, when it is embedded in a larger value."""
    levels = max_depth - depth + 1
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise JSONValueError(f"nested more than {max_depth} levels deep", text, _too_deep_at(text, levels),
                             hint="flatten the structure") from None
    except _Constant as exc:
        raise JSONValueError(f"{exc.args[0]} is not a JSON number", text, _constant_at(text),
                             hint="send a finite number, or null") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer past the interpreter's int-to-str limit
        raise JSONValueError(f"an integer longer than {max_int_digits} digits", text,
                             _long_integer_at(text, max_int_digits), hint="send large numbers as strings") from None
    # The walk below finds what json.loads let through. Skip it when the text cannot hold any: fewer
    # brackets than levels allowed, no digit run that long or exponent that large, no surrogate. Tool
    # arguments, parsed on every request, are nearly always such small documents.
    suspect = _suspects(max_int_digits).search(text)
    if suspect is None and text.count("[") + text.count("{") <= levels:
        return value
    problem = find_problem(value, max_depth=max_depth, max_int_digits=max_int_digits, depth=depth,
                           strings=suspect is not None and _SURROGATES.search(text) is not None, parsed=True)
    if problem is not None:
        raise JSONValueError(problem.message, text, None, path=problem.path or "the document", hint=problem.hint)
    return value


class _Constant(Exception):
    pass


def _refuse_constant(name: str) -> Any:
    raise _Constant(name)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)  # one, as json.loads keeps its default one


@lru_cache(maxsize=8)
def _suspects(max_int_digits: int) -> re.Pattern[str]:
    """What the walk after parsing could refuse: a surrogate, a digit run longer than the limit, an
    exponent of 3 digits (1e400 parses as inf). One pass, in C."""
    return re.compile(_SURROGATES.pattern + rf"|[0-9]{{{max_int_digits + 1}}}|[eE]\+?[0-9]{{3}}")


def find_problem(value: Any, *, max_depth: int = MAX_DEPTH, max_int_digits: int = MAX_INT_DIGITS,
                 depth: int = 1, strings: bool = True, parsed: bool = False) -> Problem | None:
    """The first value in `value` that is not plain JSON: a container nested past `max_depth`
    (`value` itself sits at `depth`), a key that is not a string, a string with a lone surrogate
    (checked only when `strings`), NaN or an infinite float, an integer of more than
    `max_int_digits` digits, or an object of another type. `parsed`: the value comes from
    json.loads, so its keys are strings and need no look unless `strings`."""
    bound = _BOUNDS.get(max_int_digits) or _BOUNDS.setdefault(max_int_digits, 10 ** max_int_digits)
    if _clean(value, depth, max_depth, bound, strings, strings or not parsed):
        return None
    for path, problem in _walk(value, depth, max_depth, bound, strings):
        if problem is not None:
            return Problem(_path(path), *problem)
    raise AssertionError("the fast and the slow JSON checks disagree")  # pragma: no cover


def _clean(root: Any, depth: int, max_depth: int, bound: int, strings: bool, keys: bool) -> bool:
    """True when nothing in `root` is refused. Level by level, flat and branch-light: intake runs it
    on every request, so it allocates one list per level and nothing per item."""
    if not isinstance(root, (dict, list, tuple)):
        return _scalar_problem(root, bound, strings) is None
    isfinite = math.isfinite
    level, d = [root], depth
    while level:
        if d > max_depth:
            return False
        below: list[Any] = []
        push = below.append
        items: Iterable[Any]
        for v in level:
            if isinstance(v, dict):
                if keys:
                    for k in v:
                        if type(k) is not str or (strings and not k.isascii() and _has_surrogate(k)):
                            return False
                items = v.values()
            else:
                items = v
            for c in items:
                t = type(c)
                if t is str:
                    if strings and not c.isascii() and _has_surrogate(c):
                        return False
                elif t is dict or t is list or t is tuple:
                    push(c)
                elif t is int:
                    if not -bound < c < bound:
                        return False
                elif t is float:
                    if not isfinite(c):
                        return False
                elif c is not None and t is not bool:
                    # Subclasses (an OrderedDict, a numpy float) are JSON as their base is; else refused.
                    if isinstance(c, (dict, list, tuple)):
                        push(c)
                    elif _scalar_problem(c, bound, strings) is not None:
                        return False
        level, d = below, d + 1
    return True


def _walk(root: Any, depth: int, max_depth: int, bound: int, strings: bool
          ) -> Iterator[tuple[_Path, tuple[str, str] | None]]:
    """(path, problem) for each item, depth first in document order: the slow pass, with paths."""
    stack: list[tuple[Any, _Path, int]] = [(root, (), depth)]
    while stack:
        v, path, d = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            if d > max_depth:
                yield path, (f"nested more than {max_depth} levels deep", "flatten the structure")
                continue
            if isinstance(v, dict):
                for k in v:
                    if type(k) is not str:
                        yield path, (f"an object key must be a string, got {type(k).__name__}",
                                     "use string keys")
                    elif strings and _has_surrogate(k):
                        yield path + (k,), _surrogate_problem(k, "key")
                pairs = list(v.items())
            else:
                pairs = list(enumerate(v))
            for k, c in reversed(pairs):
                stack.append((c, path + (k,), d + 1))
        else:
            yield path, _scalar_problem(v, bound, strings)


def _scalar_problem(v: Any, bound: int, strings: bool) -> tuple[str, str] | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, str):
        return _surrogate_problem(v, "text") if strings and _has_surrogate(v) else None
    if isinstance(v, int):
        if -bound < v < bound:
            return None
        digits = int(v.bit_length() * 0.30103) + 1  # no str(v): past 4,300 digits that raises
        return (f"an integer of about {digits} digits, over the limit of {len(str(bound)) - 1}",
                "send large numbers as strings")
    if isinstance(v, float):
        if math.isfinite(v):
            return None
        return ("not a finite number (NaN, Infinity, or too large for a double)",
                "send a finite number, or null")
    return (f"{type(v).__name__} values are not JSON", "use strings, numbers, booleans, null, lists and objects")


def _has_surrogate(s: str) -> bool:
    if s.isascii():
        return False
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _surrogate_problem(s: str, what: str) -> tuple[str, str]:
    k = next(i for i, ch in enumerate(s) if "\ud800" <= ch <= "\udfff")
    return (f"{what} is not valid Unicode (lone surrogate {s[k]!r} at character {k})",
            "send UTF-8 text; pair or remove the surrogate")


def surrogate_problem(s: str) -> str | None:
    """The message for a string with a lone surrogate, None when it has none."""
    return _surrogate_problem(s, "text")[0] if _has_surrogate(s) else None


def _path(parts: _Path) -> str:
    out = []
    shown: tuple[str | int | EllipsisType, ...] = parts if len(parts) <= 12 else (*parts[:8], ..., *parts[-2:])
    for p in shown:
        if p is ...:
            out.append(f"…({len(parts) - 10} more)")
        elif isinstance(p, int):
            out.append(f"[{p}]")
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", p):
            out.append(f".{p}" if out else p)
        else:
            out.append(f"[{json.dumps(p)}]")
    return "".join(out)


# Error paths only: where in the text a document too deep for the parser, or an integer too long for
# it, sits. Strings are matched whole so brackets and digits inside them do not count.
_BRACKETS = re.compile(_STRING + r"|[\[\]{}]")
_CONSTANTS = re.compile(_STRING + r"|NaN|-?Infinity")
_NUMBERS = re.compile(_STRING + r"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _too_deep_at(text: str, max_depth: int) -> int | None:
    d = 0
    for m in _BRACKETS.finditer(text):
        c = text[m.start()]
        if c in "[{":
            d += 1
            if d > max_depth:
                return m.start()
        elif c in "]}":
            d -= 1
    return None


def _constant_at(text: str) -> int | None:
    for m in _CONSTANTS.finditer(text):
        if text[m.start()] != '"':
            return m.start()
    return None


def _long_integer_at(text: str, max_int_digits: int) -> int | None:
    for m in _NUMBERS.finditer(text):
        tok = m.group()
        digits = tok[1:] if tok[0] == "-" else tok
        if digits.isdigit() and len(digits) > max_int_digits:
            return m.start()
    return None
