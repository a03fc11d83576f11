"""Special-token strings in user text: detected, then escaped or rejected by policy.

"escape" encodes them as plain text (the default), "reject" raises, "allow"
lets them become control tokens but still reports it: never silently.
Assistant messages are the model's own output sent back, so their control tokens
(<think>, <tool_call>) stay control tokens under "escape" too, with a diagnostic.
"""

from __future__ import annotations

from typing import Literal, Sequence

from .conversation import Message
from .diagnostics import Diagnostic, info, warning
from .errors import InjectionError
from .segments import Span
from .tokenizers.base import Tokenizer

InjectionPolicy = Literal["escape", "reject", "allow"]
POLICIES = ("escape", "reject", "allow")
# The assistant's output has one more: "model" keeps the tokens a model writes inside its own reply
# (<think>, <tool_call>) and escapes the rest (turn markers a model never writes in a reply).
AssistantPolicy = Literal["model", "escape", "reject", "allow"]
ASSISTANT_POLICIES = ("model", "escape", "reject", "allow")


def scan(messages: Sequence[Message], tokenizer: Tokenizer) -> dict[int, list[tuple[str, str]]]:
    """message index -> [(field text, special token found)] for every text holding one."""
    found: dict[int, list[tuple[str, str]]] = {}
    pat = tokenizer.special_pattern
    if pat is None:
        return found
    # One search over all the text first: the common case finds nothing and stops here.
    if pat.search("\x00".join(t for m in messages for t in m.text_fields())) is None:
        return found
    for i, m in enumerate(messages):
        for text in m.text_fields():
            hits = tokenizer.find_specials(text)
            if hits:
                found.setdefault(i, []).append((text, hits[0][2]))
    return found


def apply_policy(found: dict[int, list[tuple[str, str]]], messages: Sequence[Message], policy: str,
                 text: str, spans: Sequence[Span]) -> tuple[list[tuple[int, int]], list[Diagnostic]]:
    """Character spans of the rendered text to keep as plain text, and the diagnostics."""
    if not found:
        return [], []
    diags: list[Diagnostic] = []
    escaped: list[tuple[int, int]] = []
    by_seq: dict[int | None, list[Span]] = {}
    for s in spans:
        by_seq.setdefault(s.seq, []).append(s)
    for i, items in found.items():
        m = messages[i]
        tokens = sorted({tok for _, tok in items})
        if m.role == "assistant" and policy != "reject":
            # Assistant text is the model's own output sent back: <think>, <tool_call> and the like
            # are how it wrote, and templates parse them. They stay control tokens, as in
            # apply_chat_template, but never unnoticed.
            diags.append(info("assistant_control_tokens",
                              f"{', '.join(tokens)} in assistant text kept as control token(s) (model output)",
                              m.sequence))
            continue
        if policy == "reject":
            raise InjectionError(f"{m.role} text contains the special token {tokens[0]!r}", index=m.sequence,
                                 token=tokens[0], hint="remove it, or assemble with injection='escape' to encode "
                                                       "it as plain text")
        if policy == "allow":
            diags.append(warning("special_token_in_text",
                                 f"{', '.join(tokens)} in {m.role} text will be encoded as control token(s) "
                                 "(injection policy 'allow')", m.sequence))
            continue
        # escape: find the user's text in the render, near where the message landed.
        regions = [(s.start, s.end) for s in by_seq.get(m.sequence, [])] or [(0, len(text))]
        for field_text, tok in items:
            located = False
            for probe in (field_text, field_text.strip()):
                if not probe:
                    continue
                for lo, hi in regions + [(0, len(text))]:
                    k = text.find(probe, lo, max(hi, lo))
                    while k != -1 and k + len(probe) <= hi:
                        escaped.append((k, k + len(probe)))
                        located = True
                        k = text.find(probe, k + 1, hi)
                    if located:
                        break
                if located:
                    break
            if not located:
                raise InjectionError(
                    f"{m.role} text contains the special token {tok!r} and the template changed the text, "
                    "so it cannot be escaped safely", index=m.sequence, token=tok,
                    hint="remove the token from the text, or use injection='reject'")
        diags.append(warning("special_token_injection",
                             f"{', '.join(tokens)} in {m.role} text encoded as plain text, not as a control "
                             "token", m.sequence))
    return escaped, diags
