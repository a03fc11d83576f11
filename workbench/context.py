"""The build context: everything that can change what an assembly produces, in one frozen object.

A cached prompt may stand in for a fresh assembly only if nothing that shapes the output differs:
the template (its source, how it is wired: bos/eos, arguments, where it came from), the vocabulary,
the cleaning, injection, variable, intake, render, budget and truncation settings, and, for a
template that reads the clock, what it reads. All of that is in a `BuildContext`, and its
`fingerprint` is the root of every cache key (workbench/cache/keys.py): a setting added to the
Assembler's configuration is in the fingerprint without anyone having to remember a key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, Mapping

import jinja2.nodes

FORMAT = 1   # bump when what goes into the fingerprint changes meaning


@dataclass(frozen=True, slots=True)
class BuildContext:
    template: str
    template_version: str      # SHA-256 of the source
    tokenizer: str
    tokenizer_version: str     # SHA-256 of the vocabulary
    settings: str              # canonical JSON of every other option that changes the output
    clock: str = ""            # what a clock-reading template reads at `instant` ("" when it reads none)
    instant: datetime | None = field(default=None, compare=False)   # the render's now; not in the key
    fingerprint: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        parts = (f"context/{FORMAT}", self.template, self.template_version, self.tokenizer, self.tokenizer_version,
                 self.settings, self.clock)
        object.__setattr__(self, "fingerprint", hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest())

    def at(self, now: datetime, formats: "ClockFormats") -> "BuildContext":
        """This context for an assembly at `now`: a template that reads the clock sees `now`, and the
        key carries what it reads (the date for a date line, every microsecond for anything dynamic)."""
        if formats is None:
            return self
        clock = now.isoformat() if formats == "dynamic" else "\x1f".join(now.strftime(f) for f in formats)
        return dataclasses.replace(self, clock=clock, instant=now)

    def short(self) -> str:
        return self.fingerprint[:12]


# None: the template never reads the clock; a tuple: the constant formats it passes to strftime_now;
# "dynamic": it reads the clock in a way that cannot be known before rendering.
ClockFormats = tuple[str, ...] | str | None


@lru_cache(maxsize=64)
def clock_formats(source: str) -> ClockFormats:
    """How a template reads the clock, from its syntax tree (transformers gives templates
    `strftime_now(format)`): each call with a constant format is declared; any other use is dynamic."""
    from .templates.sandbox import environment
    if "strftime_now" not in source:
        return None
    tree = environment().parse(source)
    called: set[int] = set()
    formats: list[str] = []
    dynamic = False
    for call in tree.find_all(jinja2.nodes.Call):
        if isinstance(call.node, jinja2.nodes.Name) and call.node.name == "strftime_now":
            called.add(id(call.node))
            args = call.args
            if len(args) == 1 and not call.kwargs and isinstance(args[0], jinja2.nodes.Const) \
                    and isinstance(args[0].value, str):
                formats.append(args[0].value)
            else:
                dynamic = True
    tested = {id(t.node) for t in tree.find_all(jinja2.nodes.Test)}   # `strftime_now is defined` reads nothing
    for name in tree.find_all(jinja2.nodes.Name):
        if name.name == "strftime_now" and id(name) not in called and id(name) not in tested:
            dynamic = True   # passed around, aliased: what it formats is unknown
    if dynamic:
        return "dynamic"
    return tuple(sorted(set(formats))) or None


def canonical(obj: Any) -> str:
    """Canonical JSON of a configuration value: dataclasses by field, mappings with sorted keys;
    a callable by its qualified name (what it returns is the caller's to keep stable)."""
    return json.dumps(_plain(obj), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"__type__": type(obj).__name__,
                **{f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, (set, frozenset)) else items
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if callable(obj):
        return f"callable:{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"
    if isinstance(obj, datetime):
        return obj.isoformat()
    return f"{type(obj).__name__}:{obj!r}"
