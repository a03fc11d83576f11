"""Template arguments: the variables a chat template reads beyond the conversation
(`enable_thinking` for Qwen3, `reasoning_effort` for gpt-oss, `tools_in_user_message` for Llama 3.1,
any of `chat_template_kwargs`), set from the command line as `--template-arg KEY=VALUE`.

An argument is part of the build context (so of every cache key and of an exported bundle): two
renders with different arguments never share a cached result."""

from __future__ import annotations

import json
import re
from typing import Any

import jinja2
from jinja2 import meta, nodes

from ..errors import TemplateError
from .sandbox import environment

# What the renderer gives every template itself: an argument of one of these names would be
# overridden without a word, so it is refused.
RENDER_OWN = frozenset(("messages", "tools", "documents", "add_generation_prompt"))
# The tokens a template's context carries (from the tokenizer); an argument may set them, as
# chat_template_kwargs can, but they are not listed as the template's own arguments.
TOKENS = frozenset(("bos_token", "eos_token", "pad_token", "unk_token"))
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_VALUE_CHARS = 10_000


def parse_template_arg(text: str) -> tuple[str, Any]:
    """`KEY=VALUE`: VALUE is read as JSON where it is JSON (`true`, `3`, `"x"`, `{"a": 1}`), else it
    is the text itself (`reasoning_effort=high`)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key):
        raise TemplateError(f"--template-arg {text[:60]!r}: expected KEY=VALUE with KEY a name (letters, digits, _)",
                            hint="for example --template-arg enable_thinking=false")
    if key in RENDER_OWN:
        raise TemplateError(f"--template-arg {key}: the renderer sets {key!r} itself",
                            hint="give the conversation in the session file; template arguments are the template's "
                                 "other variables")
    if len(raw) > MAX_VALUE_CHARS:
        raise TemplateError(f"--template-arg {key}: the value has {len(raw):,} characters, over {MAX_VALUE_CHARS:,}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        raise TemplateError(f"--template-arg {key}: NaN and infinities are not template values")
    return key, value


def template_arguments(source: str) -> list[str]:
    """The arguments a user can set: variables `source` reads that neither the renderer nor the
    sandbox provides and that the template does not make itself, except where it asks whether one
    was given (`x is defined`, `x | default(...)`: Llama 3.1's `tools_in_user_message`). Jinja's own
    list of undeclared names also holds loop and `set` variables read outside their scope."""
    try:
        ast = environment().parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"the template does not parse: {exc.message} (line {exc.lineno})") from None
    undeclared = meta.find_undeclared_variables(ast) - RENDER_OWN - TOKENS - set(environment().globals)
    made: set[str] = set()
    targets: list[nodes.Node] = []
    targets += [n.target for n in ast.find_all(nodes.Assign)] + [n.target for n in ast.find_all(nodes.AssignBlock)]
    targets += [n.target for n in ast.find_all(nodes.For)]
    targets += [t for n in ast.find_all(nodes.With) for t in n.targets]
    targets += [a for n in ast.find_all(nodes.Macro) for a in n.args]
    targets += [a for n in ast.find_all(nodes.CallBlock) for a in n.args]
    for t in targets:
        made.update(n.name for n in ([t] if isinstance(t, nodes.Name) else t.find_all(nodes.Name)))
    asked = {n.node.name for n in ast.find_all(nodes.Test) if n.name in ("defined", "undefined")
             and isinstance(n.node, nodes.Name)}
    asked |= {n.node.name for n in ast.find_all(nodes.Filter) if n.name in ("default", "d")
              and isinstance(n.node, nodes.Name)}
    return sorted(name for name in undeclared if name in asked or name not in made)
