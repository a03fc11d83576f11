"""One session: its schedule, the breaker it carries (at most one kind), its requests and their truth.

Breakers, by construction (timeline.py has the dates):
  timestamp_in_system_prompt  support-bot sessions started from 3/7 of the span: the system prompt
                              ends with the request's time to the second  → volatile_content
  tool_key_order_flip         agent-sdk sessions started from 2/7: each request serializes the tool
                              schemas in one of two key orders at random  → tool_schema_order
  template_upgrade            llama sessions whose calls are served with both llama3 and llama3.1
                              (the rollout): a turn whose template differs → template_changed
  edited_message (organic)    8% of the other sessions with three calls or more: one call edits an
                              earlier user message                       → edited_message
  history_truncation (organic) llama3-only sessions of 16+ calls, about a third of them: long replies overflow
                              llama3's 8k window, so the prompt is truncated → truncated
A turn's loss is attributed to its session's breaker only on the turns the breaker changes (the
timestamp on every turn, the key order when it differs from the previous request's, the template
when it differs, the edit on its turn, truncation where it drops a message the previous prompt had).
Any other loss is "unattributed" (none is expected; the tests hold it to zero).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from .clients import LLAMA_MODEL, LLAMA_OLD, Client, flipped, paragraphs, tool_call, tool_result, words
from .timeline import HOSTS, START, Plan, iso, iso_seconds
from .truth import SessionTruth, Turn
from .usage import ANTHROPIC, OPENAI, SessionUsage, usage_object


@dataclass(frozen=True)
class UsageRun:
    """Reported usage is on: the presets it follows."""
    presets: dict[str, dict[str, Any]]

BREAKERS = {  # name -> (cause code the analysis should report, organic)
    "timestamp_in_system_prompt": ("volatile_content", False),
    "tool_key_order_flip": ("tool_schema_order", False),
    "template_upgrade": ("template_changed", False),
    "edited_message": ("edited_message", True),
    "history_truncation": ("truncated", True),
}
EDIT_RATE, TRUNCATION_RATE = 0.08, 0.35
LLAMA3_BUDGET_WORDS = 3000   # keeps other llama3 sessions well inside its 6,144-token input budget
LLAMA3_SHORT_AFTER_TOKENS = 3000


@dataclass
class Call:
    t_ms: int
    host: int
    template: str
    tool_reply: bool           # the reply to this call is a tool call


@dataclass
class Session:
    cid: str
    client: Client
    start: int
    calls: list[Call]
    breaker: str | None = None
    edit_at: int = -1          # the call (0-based) that carries the edit
    msgs: list[dict[str, Any]] = field(default_factory=list)   # shape-neutral history
    words: int = 0
    tokens: int = 0            # the last prompt's length


def schedule(plan: Plan, rng: random.Random, client: Client, start: int, n: int) -> list[Call]:
    """When each call happens and where: a user thinks between text replies, a tool answers in seconds,
    and now and then a conversation is picked up again hours later."""
    calls, t = [], start
    for k in range(n):
        tool = client.tool_rate > 0 and k < n - 1 and rng.random() < client.tool_rate
        host = rng.randrange(HOSTS)
        calls.append(Call(t, host, plan.template(client.model, host, t), tool))
        if tool:
            t += rng.randint(1_000, 6_000)
        elif rng.random() < 0.04:
            t += rng.randint(3_600_000, 30 * 3_600_000)
        else:
            t += 1_000 + int(rng.lognormvariate(10.5, 1.0))   # median about 36 s
    return calls


def assign(plan: Plan, rng: random.Random, s: Session) -> None:
    """Pick the session's breaker (at most one kind, so every lost turn has one cause)."""
    templates = {c.template for c in s.calls}
    n = len(s.calls)
    if s.client.name == "support-bot" and s.start >= plan.volatile_from:
        s.breaker = "timestamp_in_system_prompt"
    elif s.client.name == "agent-sdk" and s.start >= plan.flip_from:
        s.breaker = "tool_key_order_flip"
    elif len(templates) > 1:
        s.breaker = "template_upgrade"
    elif templates == {LLAMA_OLD} and n >= 16 and rng.random() < TRUNCATION_RATE:
        s.breaker = "history_truncation"
    elif n >= 3 and rng.random() < EDIT_RATE:
        s.breaker = "edited_message"
        s.edit_at = rng.randint(2, n - 1)   # needs two user messages before it: one to edit, one after


def _near_llama3_budget(s: Session, more: int) -> bool:
    """Whether a llama session not meant to be truncated must keep its messages short from now on: by
    words, and by the last prompt's real token count (60 short turns after that still fit in 6,144)."""
    return (s.client.model == LLAMA_MODEL and s.breaker != "history_truncation"
            and (s.words + more > LLAMA3_BUDGET_WORDS or s.tokens > LLAMA3_SHORT_AFTER_TOKENS))


def reply_words(rng: random.Random, s: Session) -> int:
    lo, hi = s.client.reply_words
    if s.breaker == "history_truncation":
        return rng.randint(300, 450)
    n = int(rng.triangular(lo, hi, lo + (hi - lo) * 0.3))
    return rng.randint(1, 4) if _near_llama3_budget(s, n) else n


def user_words(rng: random.Random, s: Session) -> int:
    n = int(rng.lognormvariate(3.3, 0.8))   # median about 27 words, a few long pastes
    return rng.randint(2, 4) if _near_llama3_budget(s, n) else max(2, min(n, 600))


def add(s: Session, msg: dict[str, Any]) -> None:
    s.msgs.append(msg)
    s.words += len(msg.get("text", "").split()) + (20 if msg.get("call") else 0)


def advance(rng: random.Random, s: Session, k: int) -> None:
    """Append the reply to call k and what follows it (the tool's result or the user's next message)."""
    c, call = s.client, s.calls[k]
    if call.tool_reply:
        name, args = tool_call(rng, c)
        cid = f"call_{rng.getrandbits(40):010x}"
        pre = words(rng, c.topic, rng.randint(4, 14)) if rng.random() < 0.3 else ""
        add(s, {"role": "assistant", "text": pre, "call": (cid, name, args)})
        add(s, {"role": "tool", "text": tool_result(rng, c), "call_id": cid})
    else:
        add(s, {"role": "assistant", "text": paragraphs(rng, c.topic, reply_words(rng, s))})
        add(s, {"role": "user", "text": words(rng, c.topic, user_words(rng, s))})
    if k + 1 == s.edit_at:
        edit(rng, s)


def edit(rng: random.Random, s: Session) -> None:
    """The user edits an earlier message of theirs (not the one just sent)."""
    users = [m for m in s.msgs[:-1] if m["role"] == "user"]
    m = rng.choice(users)
    m["text"] = m["text"] + " " + words(rng, s.client.topic, rng.randint(3, 12))


def system_text(plan: Plan, s: Session, system: str, t_ms: int) -> str:
    if s.breaker == "timestamp_in_system_prompt":
        return f"{system}\n\nCurrent time: {iso_seconds(t_ms)}"
    return system


def tools_for(rng: random.Random, s: Session) -> list[dict[str, Any]]:
    if s.breaker == "tool_key_order_flip" and rng.random() < 0.5:
        return [flipped(t) for t in s.client.tools]
    return list(s.client.tools)


def openai_request(s: Session, system: str | None, tools: list[dict[str, Any]], temp: float) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in s.msgs:
        if m.get("call"):
            cid, name, args = m["call"]
            msgs.append({"role": "assistant", "content": m["text"] or None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        elif m["role"] == "tool":
            msgs.append({"role": "tool", "tool_call_id": m["call_id"], "content": m["text"]})
        else:
            msgs.append({"role": m["role"], "content": m["text"]})
    req: dict[str, Any] = {"model": s.client.model, "messages": msgs, "temperature": temp, "stream": True}
    if tools:
        req["tools"] = tools
    return req


def anthropic_request(s: Session, system: str | None, tools: list[dict[str, Any]], temp: float,
                      marks: str | None = None) -> dict[str, Any]:
    """The Anthropic Messages request. `marks` (the usage run only): the system prompt's cache_control
    TTL; the system then goes as a text block marked with it, every user text as a text block, and the
    last message's last block carries a 5-minute cache_control, as clients that cache place them."""
    msgs: list[dict[str, Any]] = []
    for m in s.msgs:
        if m.get("call"):
            cid, name, args = m["call"]
            blocks = [{"type": "text", "text": m["text"]}] if m["text"] else []
            msgs.append({"role": "assistant", "content": blocks + [
                {"type": "tool_use", "id": cid, "name": name, "input": args}]})
        elif m["role"] == "tool":
            msgs.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": m["call_id"], "content": m["text"]}]})
        elif m["role"] == "assistant":
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": m["text"]}]})
        elif marks:
            msgs.append({"role": "user", "content": [{"type": "text", "text": m["text"]}]})
        else:
            msgs.append({"role": "user", "content": m["text"]})
    req: dict[str, Any] = {"model": s.client.model, "max_tokens": 1024, "temperature": temp}
    if system and marks:
        req["system"] = [{"type": "text", "text": system, "cache_control": _mark(marks)}]
    elif system:
        req["system"] = system
    if marks and msgs:
        msgs[-1]["content"][-1]["cache_control"] = _mark("5m")
    req["messages"] = msgs
    if tools:
        req["tools"] = [{"name": t["function"]["name"], "description": t["function"]["description"],
                         "input_schema": t["function"]["parameters"]} for t in tools]
    return req


def _mark(ttl: str) -> dict[str, str]:
    # 5 minutes is the API's default: a mark without "ttl" means it, as clients send it.
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


@dataclass(frozen=True)
class Line:
    t_ms: int
    host: int
    text: str         # the JSON line, without its newline


@dataclass
class Figures:
    """What a session contributes to the ground truth."""
    turns: list[tuple[int, Turn, str | None]]   # (call index, figures, breaker charged)
    usage: list[dict[str, Any]] = field(default_factory=list)   # per call: its class (the usage run)


def build(plan: Plan, rng: random.Random, s: Session, truth: SessionTruth,
          usage: UsageRun | None = None) -> tuple[list[Line], Figures]:
    """Every request of the session as a log line, and each turn's truth with the breaker it is charged to.
    With `usage`, each line also carries `provider`, `model` and the provider's `response` with its
    usage under the documented rules (usage.py), and `figures.usage` each call's class."""
    system = rng.choice(s.client.systems) if s.client.systems else None
    temp = rng.choice([0.0, 0.2, 0.7])
    add(s, {"role": "user", "text": words(rng, s.client.topic, user_words(rng, s))})
    lines, figures, order_prev, dropped_prev = [], Figures([]), None, frozenset[int]()
    provider = (OPENAI if s.client.shape == "openai" else ANTHROPIC) if usage else None
    su = SessionUsage(usage.presets, provider, plan.seed, s.cid, len(s.calls)) if usage and provider else None
    pending: dict[str, Any] | None = None      # the previous call's line, waiting for its reply
    for k, call in enumerate(s.calls):
        if k:
            before = len(s.msgs)
            advance(rng, s, k - 1)
            if pending is not None:
                pending["reply"] = s.msgs[before]
        sys_text = system_text(plan, s, system, call.t_ms) if system else None
        tools = tools_for(rng, s) if s.client.tools else []
        if s.client.shape == "openai":
            req = openai_request(s, sys_text, tools, temp)
        else:
            req = anthropic_request(s, sys_text, tools, temp, marks=SYSTEM_TTL.get(s.client.name, "5m") if su else None)
        turn = truth.turn(req, call.template)
        order = json.dumps(tools)
        new_drops = bool(turn.dropped - dropped_prev)
        breaker = charged(s, k, turn, order != order_prev, new_drops)
        figures.turns.append((k, turn, breaker))
        order_prev, dropped_prev = order, turn.dropped
        line = {"conversation_id": s.cid, "timestamp": iso(call.t_ms), "template": call.template,
                "client": s.client.name, "request": req}
        if su is None:
            lines.append(Line(call.t_ms, call.host, json.dumps(line, ensure_ascii=False, separators=(",", ":"))))
            s.tokens = turn.tokens
            continue
        assert truth.last is not None
        cause = BREAKERS[breaker][0] if breaker and turn.lost else None
        sent, reported, record = su.call(k, call.t_ms / 1000, truth.last.token_ids, truth.last, req, turn.lost, cause,
                                         truth.assembler(call.template).assemble)
        if pending is not None:
            # The previous reply's tokens: what this turn holds beyond the previous prompt.
            lines.append(_finish(pending, max(turn.held - s.tokens, 1)))
        model = usage.presets[provider]["model"]
        line = {"conversation_id": s.cid, "timestamp": iso(call.t_ms), "template": call.template,
                "client": s.client.name, "provider": provider, "model": model, "request": sent}
        pending = {"line": line, "t_ms": call.t_ms, "host": call.host, "provider": provider, "tokens": turn.tokens,
                   "reported": reported, "id": su.rng.getrandbits(64), "reply": None}
        figures.usage.append({"conversation_id": s.cid, "timestamp": line["timestamp"], "provider": provider,
                              "turn": k + 1, "tokens": turn.tokens, **record})
        s.tokens = turn.tokens
    if pending is not None:
        lines.append(_finish(pending, None))
    return lines, figures


START_S = int(START.timestamp())
SYSTEM_TTL = {"desk-assistant": "1h"}      # its system prompt and tools change least: cached for an hour


def _finish(p: dict[str, Any], output_tokens: int | None) -> Line:
    """A call's line with the provider's response: the reply (when the log shows it: the next request
    starts with it) and the usage as reported."""
    provider, line, reply = p["provider"], p["line"], p["reply"]
    out = output_tokens if output_tokens is not None else 0
    if provider == OPENAI:
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if reply is not None and reply.get("call"):
            cid, name, args = reply["call"]
            message.update(content=reply["text"] or None, tool_calls=[
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}])
        elif reply is not None:
            message["content"] = reply["text"]
        response: dict[str, Any] = {
            "id": f"chatcmpl-{p['id']:016x}", "object": "chat.completion", "created": START_S + p["t_ms"] // 1000,
            "model": line["model"],
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": usage_object(provider, p["tokens"], p["reported"], out)}
    else:
        blocks: list[dict[str, Any]] = []
        if reply is not None and reply.get("text"):
            blocks.append({"type": "text", "text": reply["text"]})
        if reply is not None and reply.get("call"):
            cid, name, args = reply["call"]
            blocks.append({"type": "tool_use", "id": cid, "name": name, "input": args})
        response = {"id": f"msg_{p['id']:016x}", "type": "message", "role": "assistant", "model": line["model"],
                    "content": blocks, "stop_reason": "tool_use" if reply is not None and reply.get("call") else
                    "end_turn", "stop_sequence": None,
                    "usage": usage_object(provider, p["tokens"], p["reported"], out)}
    line["response"] = response
    return Line(p["t_ms"], p["host"], json.dumps(line, ensure_ascii=False, separators=(",", ":")))


def charged(s: Session, k: int, turn: Turn, order_changed: bool, new_drops: bool) -> str | None:
    """The breaker this turn's loss is charged to, by construction (None when the session's breaker did
    not act on this turn)."""
    if k == 0 or s.breaker is None:
        return None
    b = s.breaker
    if b == "timestamp_in_system_prompt":
        return b
    if b == "tool_key_order_flip":
        return b if order_changed else None
    if b == "template_upgrade":
        return b if s.calls[k].template != s.calls[k - 1].template else None
    if b == "edited_message":
        return b if k == s.edit_at else None
    return b if new_drops else None

