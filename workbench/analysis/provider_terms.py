"""Diagnostics in the providers' terms: each prefix-analysis cause (`prefix.py`) mapped to what
Anthropic's cache diagnostics and OpenAI's prompt cache diagnostics report for the same two requests,
so a user can set the workbench's prediction beside what the provider answers.

- Anthropic (`diagnostics.previous_message_id` on the request; the response's
  `diagnostics.cache_miss_reason`): `type` is one of model_changed, system_changed, tools_changed,
  messages_changed (or previous_message_not_found, unavailable), with `cache_missed_input_tokens`.
- OpenAI (GPT-5.6 and later, `prompt_cache_options.comparison_response_id`; the response's
  `prompt_cache_diagnostics`): `type` cache_hit or cache_miss (or comparison_response_not_found,
  unavailable); a miss has a `reason` (model_changed, prompt_cache_key_changed, tools_changed,
  text_format_changed, reasoning_effort_changed, verbosity_changed, context_compacted,
  input_changed, service_tier_changed), `cache_missed_tokens` and `comparison_reusable_tokens`.

The providers compare requests, not a template's rendering: a template that rewrites an earlier turn
(`template_rewrite`) or a generation prompt the next turn renders otherwise
(`generation_prompt_mismatch`) leaves the two requests append-only, so a provider reports no change
there; those tokens are lost on a self-hosted engine. Token counts are the workbench's (this
template and tokenizer), an estimate of the provider's.

    >>> TERMS["tool_schema_order"], TERMS["edited_message"], TERMS["template_rewrite"]
    (('tools_changed', 'tools_changed'), ('messages_changed', 'input_changed'), (None, None))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


# What this module reads of prefix.Cause and prefix.TurnAnalysis (prefix.py calls it: importing
# those here, even for types only, would make the two modules a cycle).
class Cause(Protocol):
    @property
    def code(self) -> str: ...
    @property
    def seq(self) -> int | None: ...


class TurnAnalysis(Protocol):
    @property
    def turn(self) -> int: ...
    @property
    def causes(self) -> Sequence[Cause]: ...
    @property
    def held_tokens(self) -> int: ...
    @property
    def first_divergence(self) -> int | None: ...
    @property
    def tokens(self) -> int: ...
    @property
    def result(self) -> Any: ...

ANTHROPIC_SOURCE = "https://platform.claude.com/docs/en/build-with-claude/cache-diagnostics"
OPENAI_SOURCE = "https://developers.openai.com/api/docs/guides/prompt-caching/diagnostics"
CHECKED = "2026-12-04"

# cause code -> (Anthropic cache_miss_reason.type, OpenAI prompt_cache_diagnostics.reason);
# None: the requests are the same to the provider. volatile_content depends on where the value sits.
TERMS: dict[str, tuple[str | None, str | None]] = {
    "tool_schema_order": ("tools_changed", "tools_changed"),
    "tools_changed": ("tools_changed", "tools_changed"),
    "system_changed": ("system_changed", "input_changed"),
    "edited_message": ("messages_changed", "input_changed"),
    "reordered": ("messages_changed", "input_changed"),
    "truncated": ("messages_changed", "input_changed"),      # the client dropped them: not a compaction
    "generation_prompt_mismatch": (None, None),
    "template_rewrite": (None, None),
}
BY_PLACE: dict[str, tuple[str, str]] = {                       # volatile_content, by where it sits
    "tools": ("tools_changed", "tools_changed"),
    "system": ("system_changed", "input_changed"),
    "message": ("messages_changed", "input_changed"),
}
# The order a provider compares a request in (the prefix order): the first change is the one it names.
_ORDER = ("model_changed", "tools_changed", "system_changed", "messages_changed")
NO_CHANGE_NOTE = ("the two requests are append-only: a provider compares requests, not this template's "
                  "rendering, so it reports no change; the tokens lost here are lost on a self-hosted engine")


def cause_terms(cause: Cause, analysis: TurnAnalysis) -> tuple[str | None, str | None]:
    """(Anthropic type, OpenAI reason) for one cause of a turn; (None, None) for a code not mapped."""
    if cause.code == "volatile_content":
        return BY_PLACE[_place(cause, analysis)]
    return TERMS.get(cause.code, (None, None))


def _place(cause: Cause, analysis: TurnAnalysis) -> str:
    """tools (a volatile value in the tool schemas names no message), system, or message."""
    if cause.seq is None:
        return "tools"
    role = next((m.role for m in analysis.result.conversation.messages if m.sequence == cause.seq), None)
    return "system" if role == "system" else "message"


def provider_diagnostics(analysis: TurnAnalysis) -> dict[str, Any] | None:
    """What Anthropic's and OpenAI's diagnostics would say comparing this turn's request with the
    previous one (None on turn 1: there is nothing to compare with), each cause's terms, and the pages."""
    if analysis.turn <= 1:
        return None
    causes = [(c, *cause_terms(c, analysis)) for c in analysis.causes]
    named = [(a, o) for _, a, o in causes if a is not None]
    first = min(named, key=lambda t: _ORDER.index(t[0]), default=None)
    held, d = analysis.held_tokens, analysis.first_divergence
    missed = max(0, min(held, analysis.tokens) - d) if d is not None else 0
    out: dict[str, Any] = {
        "anthropic": {"cache_miss_reason": None if first is None else
                      {"type": first[0], "cache_missed_input_tokens": missed}},
        "openai": {"type": "cache_hit"} if first is None else
                  {"type": "cache_miss", "reason": first[1], "cache_missed_tokens": missed,
                   "comparison_reusable_tokens": held},
        "causes": [{"code": c.code, "anthropic": a, "openai": o} for c, a, o in causes],
        "sources": {"anthropic": ANTHROPIC_SOURCE, "openai": OPENAI_SOURCE, "checked": CHECKED},
    }
    if d is not None and first is None:
        out["note"] = NO_CHANGE_NOTE
    return out


__all__ = ["BY_PLACE", "TERMS", "cause_terms", "provider_diagnostics"]
