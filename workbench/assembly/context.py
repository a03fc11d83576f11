"""The build context: everything that can change what an assembly produces, in one frozen object.

Every stage takes it (workbench/assembly/build.py, incremental.py, cached.py, truncate.py): the
template, the tokenizer, the template's arguments, the injection policies, the render limits, and
the instant a clock-reading template reads. A cached prompt may stand in for a fresh assembly only
if nothing that shapes the output differs, so the context's `fingerprint` covers all of that and
every other setting of the configuration (cleaning, variables, intake, budget, truncation): it is
the root of every cache key (workbench/cache/keys.py). A setting added to the configuration is in
the fingerprint without anyone having to remember a key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property, lru_cache
from typing import Any

import jinja2.nodes

from ..injection import MODEL_OUTPUT_TOKENS, InjectionPolicies
from ..templates import ChatTemplate, RenderLimits
from ..templates.clock import wall_clock
from ..tokenizers import Tokenizer

FORMAT = 1   # bump when what goes into the fingerprint changes meaning

# None: the template never reads the clock; a tuple: the constant formats it passes to strftime_now;
# "dynamic": it reads the clock in a way that cannot be known before rendering.
ClockFormats = tuple[str, ...] | str | None


@dataclass(frozen=True, eq=False)
class BuildContext:
    template: ChatTemplate
    tokenizer: Tokenizer
    kwargs: Mapping[str, Any]       # the template's arguments: bos/eos, its own, the configured ones
    injection: InjectionPolicies
    render_limits: RenderLimits
    settings: str                   # canonical JSON of every other setting that changes the output
    clock: str = ""                 # what a clock-reading template reads at `instant` ("" when none)
    instant: datetime | None = None  # the render's now (not in the key: `clock` is)
    # The image rule (workbench/media/vision.py) that turns each image part into the model's image
    # tokens; None: the template renders text only. In `settings`, so in the fingerprint.
    vision: Any = None
    fingerprint: str = field(init=False)

    def __post_init__(self) -> None:
        t, tok = self.template, self.tokenizer
        parts = (f"context/{FORMAT}", t.name, t.version, tok.name, tok.version, self.settings, self.clock)
        object.__setattr__(self, "fingerprint", hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest())

    @classmethod
    def of(cls, template: ChatTemplate, tokenizer: Tokenizer, *, template_kwargs: Mapping[str, Any],
           injection: InjectionPolicies, render_limits: RenderLimits, other: Mapping[str, Any],
           vision: Any = None) -> "BuildContext":
        """The context of a configuration: `other` holds its remaining settings (cleaning, intake,
        variables, window, truncation), which only enter the fingerprint."""
        kw: dict[str, Any] = {
            "bos_token": template.bos_token if template.bos_token is not None else (tokenizer.bos_token or ""),
            "eos_token": template.eos_token if template.eos_token is not None else (tokenizer.eos_token or "")}
        kw.update(template.kwargs)
        kw.update(template_kwargs)
        settings = canonical({
            "template": {"origin": template.origin, "kwargs": kw},
            "tokenizer": {"specials": len(tokenizer.specials),
                          "output_tokens": sorted(MODEL_OUTPUT_TOKENS.intersection(tokenizer.specials))},
            "injection": injection, "render_limits": render_limits, "vision": vision, **other})
        return cls(template, tokenizer, kw, injection, render_limits, settings, vision=vision)

    def at(self, now: datetime | None = None) -> "BuildContext":
        """This context for an assembly starting `now`: a template that reads the clock sees that
        instant, and the key carries what it reads (the date for a date line, every microsecond for
        anything dynamic). A template that never reads the clock gets this very context."""
        formats = self.clock_formats
        if formats is None:
            return self
        now = now or wall_clock()
        clock = now.isoformat() if formats == "dynamic" else "\x1f".join(now.strftime(f) for f in formats)
        return dataclasses.replace(self, clock=clock, instant=now)

    @property
    def clock_formats(self) -> ClockFormats:
        return clock_formats(self.template.source)

    @property
    def bos_token(self) -> str | None:
        return self.kwargs.get("bos_token") or None

    @property
    def shipped(self) -> bool:
        """Shipped templates report where they test add_generation_prompt (tests hold that to a
        second render); other templates get the second render."""
        return self.template.origin == "shipped"

    @cached_property
    def special_of_id(self) -> dict[int, str]:
        return {v: k for k, v in self.tokenizer.specials.items()}

    @cached_property
    def avoid(self) -> str:
        """Text the template renders besides the request (its source, its arguments): placeholders
        for escaped text must be characters it cannot produce by itself."""
        return self.template.source + "\x00" + canonical(self.kwargs)

    def short(self) -> str:
        return self.fingerprint[:12]


@lru_cache(maxsize=64)
def clock_formats(source: str) -> ClockFormats:
    """How a template reads the clock, from its syntax tree (transformers gives templates
    `strftime_now(format)`): each call with a constant format is declared; any other use is dynamic."""
    from ..templates.sandbox import environment
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
