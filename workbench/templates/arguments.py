"""Template arguments: the variables a chat template reads beyond the conversation
(`enable_thinking` for Qwen3, `reasoning_effort` for gpt-oss, `tools_in_user_message` for Llama 3.1,
any of `chat_template_kwargs`), set from the command line as `--template-arg KEY=VALUE`, in the
app's and the notebook's boxes (the same `VALUE` text), through the Python API or in a share link.

An argument is part of the build context (so of every cache key and of an exported bundle): two
renders with different arguments never share a cached result. Wherever an argument comes from, it
passes the one check here (`check_template_arg`): a name the renderer does not set itself, a plain
JSON value (no NaN, no lone surrogate, bounded depth and size)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2 import meta, nodes

from .. import strict_json
from ..errors import TemplateError
from .sandbox import environment

if TYPE_CHECKING:
    from ..tokenizers import Tokenizer

# What the renderer gives every template itself: an argument of one of these names would be
# overridden without a word, so it is refused.
RENDER_OWN = frozenset(("messages", "tools", "documents", "add_generation_prompt"))
# The tokens a template's context carries (from the tokenizer); an argument may set them, as
# chat_template_kwargs can, but they are not listed as the template's own arguments.
TOKENS = frozenset(("bos_token", "eos_token", "pad_token", "unk_token"))
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_VALUE_CHARS = 10_000                   # one value's text (as JSON where it is not text)
MAX_ARGUMENTS = 32                         # arguments at once: templates read one to four


def parse_template_arg(text: str, *, where: str = "--template-arg") -> tuple[str, Any]:
    """`KEY=VALUE`: VALUE is read as JSON where it is JSON (`true`, `3`, `"x"`, `{"a": 1}`), else it
    is the text itself (`reasoning_effort=high`). `where` names the source in the error."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key):
        raise TemplateError(f"{where} {text[:60]!r}: expected KEY=VALUE with KEY a name (letters, digits, _)",
                            hint="for example --template-arg enable_thinking=false")
    return key, parse_value(key, raw, where=where)


def parse_value(key: str, raw: str, *, where: str = "--template-arg") -> Any:
    """One argument's VALUE text, as `KEY=VALUE` reads it (the app's box for `key` holds this text)."""
    _check_key(key, where)
    if len(raw) > MAX_VALUE_CHARS:
        raise TemplateError(f"{where} {key}: the value has {len(raw):,} characters, over {MAX_VALUE_CHARS:,}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    check_template_arg(key, value, where=where)
    return value


def value_text(value: Any) -> str:
    """The VALUE text that `parse_value` reads back as `value`: text as itself where it is not JSON
    (`high`), else JSON (`false`, `"false"` for the string, `""` for an empty one, never blank)."""
    if isinstance(value, str) and value.strip():
        try:
            json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, ensure_ascii=False)


def check_template_arg(key: Any, value: Any, *, where: str = "--template-arg") -> None:
    """One argument from any source: a name (not one the renderer sets), a plain JSON value of at
    most MAX_VALUE_CHARS characters as JSON. Raises TemplateError naming `where` and the key."""
    _check_key(key, where)
    problem = strict_json.find_problem(value)
    if problem is not None:
        raise TemplateError(f"{where} {problem.at(key)}: {problem.message}", hint=problem.hint or None)
    size = len(json.dumps(value, ensure_ascii=False))
    if size > MAX_VALUE_CHARS:
        raise TemplateError(f"{where} {key}: the value has {size:,} characters as JSON, over {MAX_VALUE_CHARS:,}")


def _check_key(key: Any, where: str) -> None:
    if not isinstance(key, str) or not _KEY.match(key):
        raise TemplateError(f"{where} {str(key)[:60]!r}: not a name (letters, digits and _, not starting with a "
                            "digit)", hint="for example enable_thinking")
    if key in RENDER_OWN:
        raise TemplateError(f"{where} {key}: the renderer sets {key!r} itself",
                            hint="give the conversation in the session file; template arguments are the template's "
                                 "other variables")


def template_kwargs(given: Any, *, where: str = "template argument") -> dict[str, Any]:
    """A whole set of arguments (the Python API's dict, a share link's object), each checked as
    `check_template_arg` does, at most MAX_ARGUMENTS: a plain copy, sorted by name, that shares
    nothing with `given` (a caller's later change to its dict changes nothing here)."""
    if not isinstance(given, Mapping):
        raise TemplateError(f"{where}s: expected a mapping of names to values, got {type(given).__name__}",
                            hint='for example {"enable_thinking": false}')
    if len(given) > MAX_ARGUMENTS:
        raise TemplateError(f"{where}s: {len(given):,} of them, over {MAX_ARGUMENTS}")
    for key, value in given.items():
        check_template_arg(key, value, where=where)
    return {k: json.loads(json.dumps(given[k], ensure_ascii=False)) for k in sorted(given)}


def canonical(kwargs: Mapping[str, Any]) -> str:
    """The arguments as one canonical JSON text: equal arguments, equal text (a key, a label)."""
    return json.dumps(kwargs, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def control_tokens(kwargs: Mapping[str, Any], tokenizer: Tokenizer) -> list[tuple[str, str]]:
    """(argument, control-token string) for each of `tokenizer`'s special-token strings found in an
    argument's keys or string values: a template renders them into the prompt, where the tokenizer
    would read each as the control token itself (a share link's arguments are refused on one)."""
    found: list[tuple[str, str]] = []
    for key in sorted(kwargs):
        stack: list[Any] = [kwargs[key]]
        tokens: set[str] = set()
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                tokens.update(t for _, _, t in tokenizer.find_specials(v))
            elif isinstance(v, Mapping):
                tokens.update(t for k in v for _, _, t in tokenizer.find_specials(str(k)))
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
        found += [(key, t) for t in sorted(tokens)]
    return found


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
