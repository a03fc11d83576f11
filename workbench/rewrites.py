"""What the template did to the messages: rewrites, moves and injected text, as diagnostics."""

from __future__ import annotations

from collections.abc import Sequence

from .conversation import Message
from .diagnostics import Diagnostic, info, warning
from .segments import Span

# The end of the message of a template_rewrite about content (not reasoning): incremental assembly
# looks for such a message again, in the whole prompt, as this module does.
NOT_VERBATIM = "message's content verbatim"


def inspect_render(text: str, messages: Sequence[Message], spans: Sequence[Span],
                   template_source: str) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    knows_reasoning = any(k in template_source for k in ("reasoning_content", "thinking", "reasoning"))
    where: dict[int, tuple[int, int]] = {}
    for s in spans:
        if s.seq is not None:
            lo, hi = where.get(s.seq, (s.start, s.end))
            where[s.seq] = (min(lo, s.start), max(hi, s.end))
    for m in messages:
        region = where.get(m.sequence)
        content = m.content or ""
        if m.reasoning and m.reasoning.strip() and (region is None or
                                                    m.reasoning.strip() not in text[region[0]:region[1]]):
            if knows_reasoning:
                diags.append(warning("template_rewrite",
                                     f"the template dropped this {m.role} message's reasoning from the prompt "
                                     "(earlier turns render differently once more turns follow)", m.sequence))
            else:
                diags.append(info("reasoning_not_rendered",
                                  "this template has no place for reasoning; it is left out", m.sequence))
        if not content.strip():
            continue
        if region is None or region[0] == region[1]:
            k = text.rfind(content.strip())  # templates move text forward (to the last user turn)
            if k == -1:
                diags.append(warning("template_rewrite", f"the template did not render this {m.role} "
                                     + NOT_VERBATIM, m.sequence))
            else:
                owner = next((s for s in spans if s.start <= k < s.end), None)
                if owner is not None and owner.seq != m.sequence:
                    diags.append(info("template_moved_content",
                                      f"the template placed this {m.role} message inside "
                                      f"{'seq ' + str(owner.seq) if owner.seq is not None else owner.kind}",
                                      m.sequence))
            continue
        seg = text[region[0]:region[1]]
        if content in seg:
            continue
        if content.strip() in seg:
            diags.append(info("content_trimmed", "the template trimmed whitespace around this message's content",
                              m.sequence))
        elif m.role == "system" and content.strip() in text:
            diags.append(info("template_moved_content", "the template placed the system prompt elsewhere "
                              "(next to a later user message)", m.sequence))
        else:
            diags.append(warning("template_rewrite", f"the template did not render this {m.role} " + NOT_VERBATIM,
                                 m.sequence))
    if "strftime_now" in template_source or "date_string" in template_source:
        diags.append(info("template_date", "the template writes a date into the prompt: the prefix changes "
                          "when the date does"))
    return diags
