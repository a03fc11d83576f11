"""Provider requests for the current conversation: an OpenAI Chat Completions request, and an
Anthropic Messages request with `cache_control` breakpoints where the simulation says they pay off.

Breakpoints are chosen by rule, so that every turn of the session places them the same way:
`system` (after the tools and system prompt), `previous_turn` (after the message before the last
user message: what the previous request ended with) and `last_message` (after the request's last
message, so the next request can read it). Every combination (at most 4 breakpoints, Anthropic's
limit) is simulated over the session's turns; the cheapest wins, and its cached tokens per turn
are given beside the request, with OpenAI's (automatic caching, nothing to place).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..analysis.providers import TurnPrompt, simulate
from ..analysis.turn_prompts import reply_tokens

if TYPE_CHECKING:
    from ..assembly.result import AssemblyResult
    from ..conversation import Conversation

RULES = ("system", "previous_turn", "last_message")
HEAD_KINDS = ("bos", "system", "tools", "preamble")


def _marked_seqs(result: "AssemblyResult", rules: Sequence[str]) -> set[int]:
    """The message sequence numbers that carry cache_control under `rules` (-1: the system block)."""
    msgs = result.conversation.messages
    out: set[int] = set()
    if "system" in rules:
        sys_msgs = [m.sequence for m in msgs if m.role == "system"]
        out.add(sys_msgs[-1] if sys_msgs else -1)
    users = [i for i, m in enumerate(msgs) if m.role == "user"]
    if "previous_turn" in rules and users and users[-1] > 0:
        out.add(msgs[users[-1] - 1].sequence)
    if "last_message" in rules and msgs:
        out.add(msgs[-1].sequence)
    return out


def _offsets(result: "AssemblyResult", seqs: set[int]) -> tuple[int, ...]:
    ends: dict[int, int] = {}
    head = 0
    for s in result.segments:
        if s.kind in HEAD_KINDS:
            head = max(head, s.end)
        if s.seq is not None and s.seq in seqs:
            ends[s.seq] = s.end
    if -1 in seqs and head:
        ends[-1] = head
    return tuple(sorted(set(ends.values())))


def plan_breakpoints(results: Sequence["AssemblyResult"]) -> dict[str, Any]:
    """Simulate every rule combination over the session; the cheapest Anthropic plan, and OpenAI's."""
    best: dict[str, Any] | None = None
    costs: dict[str, float] = {}
    outputs = [reply_tokens(r, results[k + 1] if k + 1 < len(results) else None) for k, r in enumerate(results)]
    for n in range(len(RULES) + 1):
        for rules in itertools.combinations(RULES, n):
            prompts = [TurnPrompt.from_assembly(r, breakpoints=_offsets(r, _marked_seqs(r, rules))[:4],
                                                output_tokens=o) for r, o in zip(results, outputs)]
            sim = simulate(prompts, "anthropic")
            costs["+".join(rules) or "none"] = round(sim.total_cost, 6)
            if best is None or sim.total_cost < best["simulation"].total_cost - 1e-12:
                best = {"rules": list(rules), "simulation": sim}
    assert best is not None
    openai = simulate([TurnPrompt.from_assembly(r, output_tokens=o) for r, o in zip(results, outputs)], "openai")
    return {"rules": best["rules"], "anthropic": best["simulation"], "openai": openai, "costs": costs}


def openai_request(conv: "Conversation", model: str) -> dict:
    return {"model": model, **conv.to_openai()}


def _anthropic_tool(schema: dict) -> dict:
    fn = schema.get("function", schema)
    return {"name": fn["name"], "description": fn.get("description", ""),
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}


def anthropic_request(conv: "Conversation", model: str, marks: set[int], max_tokens: int = 1024) -> dict:
    """The conversation as Anthropic Messages: system at the top, tool calls as tool_use blocks,
    tool results as tool_result blocks in a user turn; cache_control on the marked messages."""
    cc = {"type": "ephemeral"}
    system: list[dict] = []
    messages: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)       # Anthropic alternates roles: merge neighbours
        else:
            messages.append({"role": role, "content": blocks})

    for m in conv.messages:
        blocks: list[dict]
        if m.role == "system":
            system.append({"type": "text", "text": m.content or ""})
            if m.sequence in marks:
                system[-1]["cache_control"] = cc
            continue
        if m.role == "tool":
            blocks = [{"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": m.content or ""}]
            role = "user"
        elif m.role == "assistant":
            blocks = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [{"type": "tool_use", "id": tc.id, "name": tc.name, "input": tc.arguments_obj()}
                       for tc in m.tool_calls]
            role = "assistant"
        else:
            blocks = [{"type": "text", "text": m.content or ""}]
            role = "user"
        if not blocks:
            continue
        if m.sequence in marks:
            blocks[-1]["cache_control"] = cc
        add(role, blocks)
    tools = [_anthropic_tool(t) for t in conv.tool_schemas()]
    if -1 in marks and tools:
        tools[-1]["cache_control"] = cc                   # no system prompt: the tools end the head
    out: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if system:
        out["system"] = system
    if tools:
        out["tools"] = tools
    out["messages"] = messages
    return out


def provider_requests(results: Sequence["AssemblyResult"], *, openai_model: str = "gpt-4o",
                      anthropic_model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    """The last turn as both requests, with the breakpoint plan and the predicted cached tokens."""
    plan = plan_breakpoints(results)
    last = results[-1]
    marks = _marked_seqs(last, plan["rules"])
    anthropic = anthropic_request(last.conversation, anthropic_model, marks)
    placed = json.dumps(anthropic).count('"cache_control"')
    return {
        "openai": openai_request(last.conversation, openai_model),
        "anthropic": anthropic,
        "breakpoints": {"rules": plan["rules"], "placed": placed, "simulated_costs": plan["costs"]},
        "predicted": {
            "anthropic": [{"turn": t.turn, "tokens": t.tokens, "cached_tokens": t.cached_tokens,
                           "cache_write_tokens": t.cache_write_tokens, "cost": round(t.cost, 6)}
                          for t in plan["anthropic"].turns],
            "openai": [{"turn": t.turn, "tokens": t.tokens, "cached_tokens": t.cached_tokens, "cost": round(t.cost, 6)}
                       for t in plan["openai"].turns],
            "note": "token counts are this bundle's tokenizer's, not the provider's; example prices",
        },
    }
