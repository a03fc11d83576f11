"""The Jinja environment chat templates run in: the one transformers builds.

`apply_chat_template` renders with an ImmutableSandboxedEnvironment
(trim_blocks, lstrip_blocks, loop controls, a `{% generation %}` tag) and the
globals `raise_exception`, `strftime_now`, `dict`, `namespace` and a `tojson`
filter that does not HTML-escape. We build the same environment so that a
template file renders byte-identically here and there.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateRaised(Exception):
    """`raise_exception(...)` was called by the template."""


class GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` renders its body unchanged (as transformers does)."""

    tags = {"generation"}

    def parse(self, parser):  # type: ignore[no-untyped-def]
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):  # type: ignore[no-untyped-def]
        return caller()


def raise_exception(message: str) -> None:
    raise TemplateRaised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):  # type: ignore[no-untyped-def]
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class TemplateDict:
    """`dict(...)` without the class itself, so templates cannot reach its attributes."""

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return dict.fromkeys(*args, **kwargs)


class TemplateNamespace(jinja2.utils.Namespace):
    """A namespace that refuses underscore names (no route to CPython internals)."""

    def __init__(*args, **kwargs):  # type: ignore[no-untyped-def]
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):  # type: ignore[no-untyped-def]
        TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):  # type: ignore[no-untyped-def]
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"templates cannot store underscore-prefixed attributes on a namespace ({name!r})")


@lru_cache(maxsize=1)
def environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


@lru_cache(maxsize=64)
def compile_template(source: str) -> jinja2.Template:
    return environment().from_string(source)
