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
from .timeline import HOSTS, Plan, iso, iso_seconds
from .truth import SessionTruth, Turn

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


def anthropic_request(s: Session, system: str | None, tools: list[dict[str, Any]], temp: float) -> dict[str, Any]:
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
        else:
            msgs.append({"role": "user", "content": m["text"]})
    req: dict[str, Any] = {"model": s.client.model, "max_tokens": 1024, "temperature": temp}
    if system:
        req["system"] = system
    req["messages"] = msgs
    if tools:
        req["tools"] = [{"name": t["function"]["name"], "description": t["function"]["description"],
                         "input_schema": t["function"]["parameters"]} for t in tools]
    return req


@dataclass(frozen=True)
class Line:
    t_ms: int
    host: int
    text: str         # the JSON line, without its newline


@dataclass
class Figures:
    """What a session contributes to the ground truth."""
    turns: list[tuple[int, Turn, str | None]]   # (call index, figures, breaker charged)


def build(plan: Plan, rng: random.Random, s: Session, truth: SessionTruth) -> tuple[list[Line], Figures]:
    """Every request of the session as a log line, and each turn's truth with the breaker it is charged to."""
    system = rng.choice(s.client.systems) if s.client.systems else None
    temp = rng.choice([0.0, 0.2, 0.7])
    add(s, {"role": "user", "text": words(rng, s.client.topic, user_words(rng, s))})
    lines, figures, order_prev, dropped_prev = [], Figures([]), None, frozenset[int]()
    for k, call in enumerate(s.calls):
        if k:
            advance(rng, s, k - 1)
        sys_text = system_text(plan, s, system, call.t_ms) if system else None
        tools = tools_for(rng, s) if s.client.tools else []
        make = openai_request if s.client.shape == "openai" else anthropic_request
        req = make(s, sys_text, tools, temp)
        line = {"conversation_id": s.cid, "timestamp": iso(call.t_ms), "template": call.template,
                "client": s.client.name, "request": req}
        lines.append(Line(call.t_ms, call.host, json.dumps(line, ensure_ascii=False, separators=(",", ":"))))
        turn = truth.turn(req, call.template)
        s.tokens = turn.tokens
        order = json.dumps(tools)
        new_drops = bool(turn.dropped - dropped_prev)
        figures.turns.append((k, turn, charged(s, k, turn, order != order_prev, new_drops)))
        order_prev, dropped_prev = order, turn.dropped
    return lines, figures


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

