"""Special-token strings in request text: found by value, then escaped, rejected or kept, by source.

A chat template copies request fields into the prompt. If a field holds `<|im_end|>` and the prompt
is tokenized with special tokens on, that text becomes a control token: the sender can close its
turn and open a system turn. Every field a template can render is checked, and the policy depends
on where the text came from:

- `request`: system, user and tool-result content, names, ids (`injection`, default "escape");
- `tools`: the tool schemas, names, descriptions and parameters (`tool_injection`, default "escape");
- `assistant`: the assistant's content, reasoning, tool-call names and arguments
  (`assistant_injection`, default "model": the tokens a model writes inside its own reply, such as
  `<think>` or `<tool_call>`, stay control tokens because templates parse them; every other control
  string, a turn marker a model never writes in a reply, is escaped).

"escape" encodes the string as plain text (as mistral-common and openai-harmony encode all content),
"reject" raises (as tiktoken does by default), "allow" lets it become a control token, reported.

Escaping is done by value, not by searching the rendered prompt: before rendering, each escaped
occurrence is replaced by a private-use placeholder character no input contains; after rendering, the
placeholders are put back and their character spans are what the tokenizer keeps as plain text. So
the template's own tokens are never touched, whatever the user text looks like, and a field the
template never renders costs nothing.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from .conversation import Conversation, Message
from .diagnostics import Diagnostic, info, warning
from .errors import InjectionError
from .templates import Rendered
from .tokenizers.base import Tokenizer

InjectionPolicy = Literal["escape", "reject", "allow"]
POLICIES = ("escape", "reject", "allow")
# The assistant's output has one more: "model" keeps the tokens a model writes inside its own reply
# (<think>, <tool_call>) and escapes the rest (turn markers a model never writes in a reply).
AssistantPolicy = Literal["model", "escape", "reject", "allow"]
ASSISTANT_POLICIES = ("model", "escape", "reject", "allow")
Source = Literal["request", "tools", "assistant"]

# Control tokens that models write inside their visible reply, which templates parse back out of
# assistant content (reasoning, tool calls). A vocabulary's own list is these, where it has them.
# Turn markers (<|im_end|>, <|eot_id|>, <｜User｜>) are not here: a reply never contains one.
MODEL_OUTPUT_TOKENS = frozenset({
    "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>",
})

# Placeholders: Supplementary Private Use Area-B, from the top down (no font, no normalization form
# and no Jinja filter changes them). A character found in any input is skipped.
_PLACEHOLDER_TOP = 0x10FFFD


@dataclass(frozen=True, slots=True)
class InjectionPolicies:
    request: InjectionPolicy = "escape"
    tools: InjectionPolicy = "escape"
    assistant: AssistantPolicy = "model"


@dataclass(frozen=True, slots=True)
class Finding:
    """One field holding special-token strings, and what the policy does with them."""

    source: Source
    path: str                  # messages[3].tool_calls[0].function.arguments, tools[1], ...
    seq: int | None            # the message's sequence number (None: a tool schema)
    escaped: tuple[str, ...]   # tokens kept as plain text
    kept: tuple[str, ...]      # tokens left as control tokens (allow, or the model's own output tokens)


@dataclass(frozen=True, slots=True)
class Guarded:
    """What the template renders instead of the raw fields, and how to map its output back."""

    messages: list[dict[str, Any]]     # template messages, escaped occurrences replaced by placeholders
    tools: list[dict[str, Any]] | None
    placeholders: dict[str, str]       # placeholder character -> the special-token string it stands for
    findings: tuple[Finding, ...]
    diagnostics: tuple[Diagnostic, ...]

    @property
    def escapes(self) -> bool:
        return bool(self.placeholders)

    def unmask(self, text: str) -> str:
        """`text` (a message the template wrote, quoting a field) with the placeholders put back."""
        for ph, tok in self.placeholders.items():
            text = text.replace(ph, tok)
        return text

    def restore(self, r: Rendered) -> tuple[Rendered, list[tuple[int, int]]]:
        """The render with the original strings back, its positions moved to match, and the character
        spans of those strings (to be encoded as plain text)."""
        if not self.placeholders:
            return r, []
        text = r.text
        for ph in self.placeholders:
            bad = json.dumps(ph, ensure_ascii=True)[1:-1]
            if bad in text:
                raise InjectionError(
                    "the template rewrote text holding a special-token string (it escaped it to ASCII), so "
                    "the string cannot be kept as plain text", hint="use injection='reject' for this template")
        pat = re.compile("[" + "".join(self.placeholders) + "]")
        out: list[str] = []
        escaped: list[tuple[int, int]] = []
        at: list[int] = []          # placeholder positions in the render
        shift: list[int] = []       # characters added before and at each of them
        pos = added = 0
        for m in pat.finditer(text):
            s = m.start()
            tok = self.placeholders[m.group()]
            out.append(text[pos:s])
            out.append(tok)
            start = s + added
            escaped.append((start, start + len(tok)))
            added += len(tok) - 1
            at.append(s)
            shift.append(added)
            pos = s + 1
        if not at:
            return r, []
        out.append(text[pos:])

        def moved(p: int) -> int:
            k = bisect_left(at, p)        # placeholders strictly before p
            return p + (shift[k - 1] if k else 0)

        return Rendered("".join(out), {i: moved(p) for i, p in r.starts.items()},
                        None if r.tools_start is None else moved(r.tools_start),
                        [moved(p) for p in r.gen_reads]), escaped


def _all_text(conv: Conversation, escapes_matter: bool) -> str:
    """Every string a template can render from `conv`, joined (the one search of the common case).
    Arguments and schemas reach the template parsed: a \\u escape can spell a special token."""
    parts: list[str] = []
    add = parts.append
    for m in conv.messages:
        add(m.role)
        if m.content:
            add(m.content)
        if m.reasoning:
            add(m.reasoning)
        if m.name:
            add(m.name)
        if m.tool_call_id:
            add(m.tool_call_id)
        for tc in m.tool_calls:
            add(tc.id)
            add(tc.name)
            if tc.is_object:   # other arguments reach the template as {}
                add(_json_text(tc.arguments, escapes_matter))
    parts.extend(_json_text(t, escapes_matter) for t in conv.tools)
    return "\x00".join(parts)


def _message_fields(m: Message) -> list[tuple[str, Source, str]]:
    """(path, source, text) of every string a template can render from message `m`."""
    i = m.sequence
    asst: Source = "assistant" if m.role == "assistant" else "request"
    out: list[tuple[str, Source, str]] = [(f"messages[{i}].role", "request", m.role)]
    if m.content:
        out.append((f"messages[{i}].content", asst, m.content))
    if m.reasoning:
        out.append((f"messages[{i}].reasoning_content", asst, m.reasoning))
    if m.name:
        out.append((f"messages[{i}].name", "request", m.name))
    if m.tool_call_id:
        out.append((f"messages[{i}].tool_call_id", "request", m.tool_call_id))
    for k, tc in enumerate(m.tool_calls):
        out.append((f"messages[{i}].tool_calls[{k}].id", "request", tc.id))
        out.append((f"messages[{i}].tool_calls[{k}].function.name", asst, tc.name))
        if tc.is_object:
            out.append((f"messages[{i}].tool_calls[{k}].function.arguments", asst, tc.arguments))
    return out


def _strings(obj: Any) -> list[str]:
    """Every string in a JSON value, keys included."""
    out: list[str] = []
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, dict):
            out.extend(k for k in o if isinstance(k, str))
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return out


def _deep(obj: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {fn(k) if isinstance(k, str) else k: _deep(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_deep(v, fn) for v in obj]
    return obj


def _json_text(text: str, escapes_matter: bool) -> str:
    """The strings a template sees from a JSON text (arguments, schemas): escapes decoded. \\u003c and
    even \\/ can spell part of a special token; other escapes only matter to a vocabulary with a
    special token holding a quote, a backslash or a control character (`escapes_matter`)."""
    if "\\u" not in text and "\\/" not in text and not (escapes_matter and "\\" in text):
        return text
    try:
        return "\x00".join(_strings(json.loads(text)))
    except ValueError:
        return text


@lru_cache(maxsize=64)
def _escapes_matter(tokenizer: Tokenizer) -> bool:
    return any(ch in t for t in tokenizer.specials for ch in '"\\\b\f\n\r\t')


def guard(conv: Conversation, tokenizer: Tokenizer, policies: InjectionPolicies, avoid: str = "",
          media: bool | str = False) -> Guarded | None:
    """Check every field of `conv` a template can render; None when no field holds a special-token string
    (the common case, one regex search). Raises InjectionError where a source's policy is "reject".
    `avoid`: other text the template renders (its source, its arguments) that placeholders must not be."""
    pat = tokenizer.special_pattern
    if pat is None:
        return None
    em = _escapes_matter(tokenizer)
    seen = _all_text(conv, em)
    if pat.search(seen) is None:
        return None
    fields = [f for m in conv.messages for f in _message_fields(m)]
    fields += [(f"tools[{j}]", "tools", t) for j, t in enumerate(conv.tools)]
    policy_of = {"request": policies.request, "tools": policies.tools, "assistant": policies.assistant}
    output = MODEL_OUTPUT_TOKENS.intersection(tokenizer.specials)
    findings: list[Finding] = []
    for path, src, text in fields:
        as_seen = _json_text(text, em) if path.endswith("arguments") or src == "tools" else text
        tokens = sorted({t for _, _, t in tokenizer.find_specials(as_seen)})
        if not tokens:
            continue
        policy = policy_of[src]
        seq = None if src == "tools" else int(path[9:path.index("]")])
        if policy == "reject":
            raise InjectionError(f"{path[path.index('.') + 1:] if seq is not None else path} contains the special "
                                 f"token {tokens[0]!r}", index=seq, token=tokens[0],
                                 hint=f"remove it, or assemble with {_OPTION[src]}='escape' to encode it as "
                                      "plain text")
        if policy == "allow":
            findings.append(Finding(src, path, seq, (), tuple(tokens)))
        elif policy == "model":
            findings.append(Finding(src, path, seq, tuple(t for t in tokens if t not in output),
                                    tuple(t for t in tokens if t in output)))
        else:
            findings.append(Finding(src, path, seq, tuple(tokens), ()))
    escaped_tokens = sorted({t for f in findings for t in f.escaped})
    placeholders = _placeholders(escaped_tokens, seen + "\x00" + avoid)
    to_ph = {t: ph for ph, t in placeholders.items()}
    messages = conv.to_template_messages(media)
    tools = conv.tool_schemas() or None
    by_seq = {m.sequence: k for k, m in enumerate(conv.messages)}
    for f in findings:
        if not f.escaped:
            continue
        esc = set(f.escaped)

        def sub(s: str, esc: set[str] = esc) -> str:
            return pat.sub(lambda mt: to_ph[mt.group()] if mt.group() in esc else mt.group(), s)

        if f.seq is None:
            assert tools is not None
            j = int(f.path[6:-1])
            tools[j] = _deep(tools[j], sub)
        else:
            _substitute(messages[by_seq[f.seq]], f.path[f.path.index(".") + 1:], sub)
    return Guarded(messages, tools, placeholders, tuple(findings), tuple(_diagnostics(findings)))


_OPTION = {"request": "injection", "tools": "tool_injection", "assistant": "assistant_injection"}


def _placeholders(tokens: Sequence[str], avoid: str) -> dict[str, str]:
    out: dict[str, str] = {}
    cp = _PLACEHOLDER_TOP
    for t in tokens:
        while chr(cp) in avoid:
            cp -= 1
        out[chr(cp)] = t
        cp -= 1
    return out


def _substitute(d: dict[str, Any], field: str, sub: Callable[[str], str]) -> None:
    """Replace in the template message `d` the value `field` names (as _message_fields names it)."""
    if field == "reasoning_content":
        for k in ("thinking", "reasoning_content"):
            d[k] = sub(d[k])
    elif field.startswith("tool_calls["):
        index = int(field[11:field.index("]")])
        call = d["tool_calls"][index] = dict(d["tool_calls"][index])
        if field.endswith(".id"):
            call["id"] = sub(call["id"])
        else:
            fn = call["function"] = dict(call["function"])
            key = "name" if field.endswith(".name") else "arguments"
            fn[key] = _deep(fn[key], sub)
    else:
        d[field] = _deep(d[field], sub)   # content may be a list of parts


def _diagnostics(findings: Sequence[Finding]) -> list[Diagnostic]:
    """One diagnostic per message (or tool schema) and outcome, naming the fields."""
    out: list[Diagnostic] = []
    groups: dict[tuple[int | None, str, str], list[Finding]] = {}
    for f in findings:
        if f.escaped:
            groups.setdefault((f.seq, f.source, "escaped"), []).append(f)
        if f.kept:
            groups.setdefault((f.seq, f.source, "kept"), []).append(f)
    for (seq, src, what), fs in groups.items():
        paths = ", ".join(f.path for f in fs)
        if what == "escaped":
            toks = ", ".join(sorted({t for f in fs for t in f.escaped}))
            out.append(warning("special_token_injection", f"{toks} in {paths} encoded as plain text, not as a "
                               "control token", seq))
        elif src == "assistant" and all(set(f.kept) <= MODEL_OUTPUT_TOKENS for f in fs):
            toks = ", ".join(sorted({t for f in fs for t in f.kept}))
            out.append(info("assistant_control_tokens", f"{toks} in {paths} kept as control token(s) (model "
                            "output the template parses)", seq))
        else:
            toks = ", ".join(sorted({t for f in fs for t in f.kept}))
            out.append(warning("special_token_in_text", f"{toks} in {paths} will be encoded as control token(s) "
                               f"({_OPTION[src]} policy 'allow')", seq))
    return out


def policies_of(config: Any) -> InjectionPolicies:
    return InjectionPolicies(config.injection, config.tool_injection, config.assistant_injection)


__all__ = ["ASSISTANT_POLICIES", "AssistantPolicy", "Finding", "Guarded", "InjectionPolicies", "InjectionPolicy",
           "MODEL_OUTPUT_TOKENS", "POLICIES", "guard", "policies_of"]
