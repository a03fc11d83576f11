"""Control tokens a chat template writes that a tokenizer does not have.

A chat template writes markup such as `<|start_header_id|>` or `[INST]` that its own model's
tokenizer encodes as one special id. Render the same template with another tokenizer (say
`--template llama3.1 --tokenizer cl100k_base`) and each of those strings becomes several ordinary
tokens: the text looks right, the ids and every count are not the model's. `missing_control_tokens`
names those strings; `control_token_notes` turns them into the `control_tokens_missing` warning the
Assembler puts on every result.

What a template's control tokens are is decided in one of two ways, the more exact first:

- **The template has a natural tokenizer that loads** (every shipped template but gemma3, and a
  Hugging Face folder with its tokenizer.json): the special tokens of *that* tokenizer which the
  template writes. A shipped template is rendered on a small probe conversation (system, user, an
  assistant tool call, its result, an answer with reasoning, the generation prompt; and simpler
  ones for templates that refuse tools); every special token of the natural tokenizer in that
  text is one. The string constants of the template's syntax tree (and its literal text) add the
  special tokens written on branches the probe does not reach (`<|python_tag|>`, `<|eom_id|>`).
  A folder's template is not rendered here (nobody reviewed it: it renders in the worker process
  when assembled); its constants and its bos/eos tokens are read instead. Asking the model's own
  tokenizer is what makes `<tool_call>` a control token of qwen2.5 while `<tool_response>` is not:
  Qwen2.5's vocabulary has only the first as a special token, so the second is text even for
  Qwen2.5 itself, and no other tokenizer can be blamed for it.
- **No natural tokenizer** (gemma3, a `.jinja` file, an inline template): strings in the syntax
  tree's constants, in its literal text and (shipped templates) in the probe render that have
  the unmistakable shape of a control token: `<|...|>`, `<｜...｜>` (DeepSeek), `[INST]`-style
  upper-case brackets, `<s>`, `</s>`, `<bos>`, `<eos>`, Gemma's `<start_of_...>` / `<end_of_...>`.
  XML-like tags (`<think>`, `<tool_call>`) are left out there on purpose: they are special tokens
  in some vocabularies and plain text by design in others, and without the model's own tokenizer
  a warning about them would as often be wrong as right.

The answer is cached per template (its version, natural tokenizer, bos/eos) and tokenizer (name and
version): an Assembler pays for it once, and a probe render costs a few milliseconds.
"""

from __future__ import annotations

import re
import threading
from datetime import datetime
from typing import Any

import jinja2.nodes

from ..diagnostics import Diagnostic, warning
from ..errors import WorkbenchError
from ..tokenizers import Tokenizer, get_tokenizer
from .registry import ChatTemplate
from .render import render
from .render_types import RenderLimits
from .sandbox import environment

# The shapes of control tokens (used where no natural tokenizer says which strings are special).
CONTROL_SHAPES = re.compile(
    r"<\|[^|<>\s]{1,64}\|>"                  # <|im_start|>, <|start_header_id|>, <|channel|>
    r"|<｜[^｜<>\s]{1,64}｜>"                  # DeepSeek: <｜User｜>, <｜tool▁calls▁begin｜>
    r"|\[/?[A-Z][A-Z0-9_]{1,31}\]"           # Mistral: [INST], [/INST], [TOOL_CALLS], [SYSTEM_PROMPT]
    r"|</?s>|<bos>|<eos>|<pad>|<unk>"        # SentencePiece and Gemma sentence markers
    r"|<(?:start|end)_of_[a-z_]{1,32}>"      # Gemma: <start_of_turn>, <end_of_turn>, <start_of_image>
)

# Shown in the warning before "and N more".
SHOWN = 4

_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                   "required": ["city"]}}}
_CALL = {"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
_ASK = {"role": "user", "content": "What is the weather in Paris?"}
_ANSWER = {"thinking": "The tool says it is sunny.", "role": "assistant",
           "content": "It is sunny and 21 degrees in Paris.", "reasoning_content": "The tool says it is sunny."}
_THANKS = {"role": "user", "content": "Thank you."}

# (messages, tools, add_generation_prompt): the richest first; templates that refuse tools or a
# tool role (gemma3) still render the plain ones. Probe text holds nothing that looks like markup.
PROBES: tuple[tuple[list[dict[str, Any]], list[dict[str, Any]] | None, bool], ...] = (
    ([_SYSTEM, _ASK, {"role": "assistant", "tool_calls": [_CALL]},
      {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "Sunny, 21 degrees."},
      _ANSWER, _THANKS], [_TOOL], True),
    ([_SYSTEM, _ASK, {"role": "assistant", "tool_calls": [_CALL]},
      {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "Sunny, 21 degrees."},
      _ANSWER], [_TOOL], False),
    ([_SYSTEM, _ASK, _ANSWER, _THANKS], None, True),
    ([_SYSTEM, _ASK, _ANSWER], None, False),
    ([_ASK], None, True),
)
_PROBE_NOW = datetime(2026, 1, 15, 12, 0, 0)   # a template that prints the date gets a fixed one
_PROBE_LIMITS = RenderLimits(timeout_s=5.0)

_lock = threading.Lock()
_controls_cache: dict[tuple[Any, ...], tuple[str, ...]] = {}
_missing_cache: dict[tuple[Any, ...], tuple[str, ...]] = {}
_CACHE_ENTRIES = 256


def missing_control_tokens(template: ChatTemplate, tokenizer: Tokenizer) -> tuple[str, ...]:
    """The control-token strings `template` writes that `tokenizer` does not have as special
    tokens (so they are encoded as plain text), in the order the template first writes them;
    empty when the tokenizer is the template's own.

        >>> from workbench.templates import get_template
        >>> from workbench.tokenizers import get_tokenizer
        >>> missing_control_tokens(get_template("qwen2.5"), get_tokenizer("qwen3"))   # Qwen3's has them all
        ()
        >>> missing_control_tokens(get_template("llama3"), get_tokenizer("cl100k_base"))
        ('<|begin_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>')
    """
    if template.tokenizer is not None and tokenizer.name == template.tokenizer:
        return ()   # a registry name: the template's own tokenizer, which has them all by definition
    key = (*_template_key(template), tokenizer.name, tokenizer.version)
    with _lock:
        hit = _missing_cache.get(key)
    if hit is not None:
        return hit
    specials = tokenizer.specials
    missing = tuple(t for t in control_tokens(template) if t not in specials)
    _store(_missing_cache, key, missing)
    return missing


def control_tokens(template: ChatTemplate) -> tuple[str, ...]:
    """The control-token strings `template` writes (see the module docstring for how they are
    found), in the order it first writes them."""
    key = _template_key(template)
    with _lock:
        hit = _controls_cache.get(key)
    if hit is not None:
        return hit
    found = _find(template)
    _store(_controls_cache, key, found)
    return found


def control_token_notes(template: ChatTemplate, tokenizer: Tokenizer) -> list[Diagnostic]:
    """The `control_tokens_missing` warning (seq None) when the tokenizer lacks some of the
    template's control tokens: the first few by name, their count, and the fix."""
    missing = missing_control_tokens(template, tokenizer)
    if not missing:
        return []
    shown = ", ".join(missing[:SHOWN]) + (f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else "")
    own = template.tokenizer
    fix = (f"use the template's own tokenizer ({own})" if own else "use the model's own tokenizer (hf:DIR)") + \
        ", or name a model (--model NAME, `workbench models` lists them) to set template and tokenizer together"
    return [warning("control_tokens_missing",
                    f"template {template.name!r} writes {len(missing)} control token(s) that tokenizer "
                    f"{tokenizer.name!r} does not have: {shown}. Each is encoded as plain text (several ordinary "
                    f"tokens), so the ids and counts are not the model's; {fix}")]


# ------------------------------------------------------------------ how they are found
def _template_key(t: ChatTemplate) -> tuple[Any, ...]:
    return (t.name, t.version, t.origin, t.tokenizer, t.bos_token, t.eos_token)


def _store(cache: dict[tuple[Any, ...], tuple[str, ...]], key: tuple[Any, ...], value: tuple[str, ...]) -> None:
    with _lock:
        if len(cache) >= _CACHE_ENTRIES:
            cache.pop(next(iter(cache)))
        cache[key] = value


def _find(template: ChatTemplate) -> tuple[str, ...]:
    natural = _natural(template)
    texts: list[str] = _probe_renders(template) if template.origin == "shipped" else []
    constants = _constants(template)
    refs = _names(template)
    own = [v for name, v in (("bos_token", template.bos_token), ("eos_token", template.eos_token))
           if v and name in refs]
    ordered: dict[str, None] = {}
    if natural is not None:
        for text in (*texts, *constants, *own):
            for _s, _e, tok in natural.find_specials(text):
                ordered.setdefault(tok, None)
    else:
        for text in (*texts, *constants):
            for m in CONTROL_SHAPES.finditer(text):
                ordered.setdefault(m.group(), None)
        for tok in own:     # the bos/eos a folder names for its template: control tokens, whatever their shape
            ordered.setdefault(tok, None)
    return tuple(ordered)


def _natural(template: ChatTemplate) -> Tokenizer | None:
    if template.tokenizer is None:
        return None
    try:
        return get_tokenizer(template.tokenizer)
    except WorkbenchError:
        return None   # its package is not installed, the folder went away: judge by shape instead


def _probe_renders(template: ChatTemplate) -> list[str]:
    kw: dict[str, Any] = {"bos_token": template.bos_token or "", "eos_token": template.eos_token or ""}
    kw.update(template.kwargs)
    out = []
    for messages, tools, agp in PROBES:
        try:
            out.append(render(template.source, template.name, messages, tools=tools, add_generation_prompt=agp,
                              kwargs=kw, limits=_PROBE_LIMITS, now=_PROBE_NOW).text)
        except WorkbenchError:
            continue   # this template refuses this conversation (roles, tools): the others still tell
    return out


def _tree(template: ChatTemplate) -> jinja2.nodes.Template | None:
    try:
        return environment().parse(template.source)
    except jinja2.TemplateSyntaxError:
        return None   # get_template compiled it already; an inline one that fails says so when rendered


def _constants(template: ChatTemplate) -> list[str]:
    """String constants and literal template text: everything the template can write by itself."""
    tree = _tree(template)
    if tree is None:
        return []
    out: list[str] = [n.value for n in tree.find_all(jinja2.nodes.Const) if isinstance(n.value, str)]
    out += [n.data for n in tree.find_all(jinja2.nodes.TemplateData)]
    return out


def _names(template: ChatTemplate) -> set[str]:
    tree = _tree(template)
    return set() if tree is None else {n.name for n in tree.find_all(jinja2.nodes.Name)}


__all__ = ["CONTROL_SHAPES", "control_token_notes", "control_tokens", "missing_control_tokens"]
