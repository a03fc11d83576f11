"""The apps that call the model: their shapes, models, system prompts, tool schemas and what they say.

Text is drawn from small word lists per topic, so lengths spread realistically (a few words to a few
hundred per message) without shipping a corpus. Nothing here reads a clock or a global random
state: every draw comes from the `random.Random` the caller passes, so a seed fixes every byte.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

# The model each client names, and the template the serving fleet renders it with. The llama model's
# template is upgraded host by host (timeline.py), the others never change.
MODEL_TEMPLATES = {"qwen2.5-7b-instruct": "qwen2.5", "hermes-chatml-7b": "chatml"}
LLAMA_MODEL = "llama-3-8b-instruct"
LLAMA_OLD, LLAMA_NEW = "llama3", "llama3.1"

COMMON = ("the a to of and in that it is for on with as this be you we can if or not are your at from have "
          "will by so but all one more when there what about which also up out do just like any some them "
          "then into only other than its our new time now could would should need make see use get way").split()
TOPICS = {
    "support": ("order refund invoice account password shipping delivery subscription plan billing charge card "
                "address warehouse return label tracking package discount coupon upgrade cancel renewal "
                "receipt customer agent ticket escalation policy warranty replacement").split(),
    "agent": ("repository branch commit build pipeline deploy service cluster latency error log metric alert "
              "query table schema index migration endpoint request response cache queue worker retry "
              "timeout config secret token function test coverage release rollback").split(),
    "desk": ("meeting calendar invite agenda project deadline report slide budget forecast quarter team "
             "hiring review feedback goal roadmap milestone document draft summary email thread owner "
             "priority status blocker risk dependency estimate").split(),
    "notes": ("note idea outline chapter paragraph draft quote source reading list book article research "
              "theme argument evidence citation summary highlight question answer concept example "
              "definition lecture exam study plan").split(),
    "chat": ("recipe travel weather movie music garden workout sleep coffee city museum train hotel beach "
             "mountain hike budget gift birthday weekend language word story poem joke history science "
             "planet ocean forest").split(),
}


def words(rng: random.Random, topic: str, n: int) -> str:
    """About `n` words of plain sentences on a topic (never a date, a clock time or a long hex run:
    those would look volatile to the analysis)."""
    pool, common = TOPICS[topic], COMMON
    out: list[str] = []
    sentence = 0
    for _ in range(max(1, n)):
        w = rng.choice(pool) if rng.random() < 0.35 else rng.choice(common)
        if sentence == 0:
            w = w.capitalize()
        sentence += 1
        if sentence >= rng.randint(6, 16):
            w += "."
            sentence = 0
        out.append(w)
    text = " ".join(out)
    return text if text.endswith(".") else text + "."


def paragraphs(rng: random.Random, topic: str, n: int) -> str:
    """`n` words split into paragraphs, as model replies come."""
    parts, left = [], n
    while left > 0:
        k = min(left, rng.randint(30, 90))
        parts.append(words(rng, topic, k))
        left -= k
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Client:
    name: str
    shape: str                  # "openai" | "anthropic"
    model: str
    topic: str
    weight: float               # share of sessions
    systems: tuple[str, ...]    # the system prompts it uses (one per session); () for none
    tools: tuple[dict[str, Any], ...] = ()
    tool_rate: float = 0.0      # chance that a reply is a tool call
    reply_words: tuple[int, int] = (20, 220)


def _system(rng: random.Random, name: str, topic: str, n: int) -> str:
    head = f"You are the assistant of {name}. Answer the user's questions accurately and concisely."
    rules = "\n".join(f"- {words(rng, topic, rng.randint(8, 20))}" for _ in range(n))
    return f"{head}\n\nGuidelines:\n{rules}\n\n{words(rng, topic, 40)}"


def _param(rng: random.Random, topic: str, name: str) -> dict[str, Any]:
    kind = rng.choice(["string", "string", "integer", "boolean", "array"])
    p: dict[str, Any] = {"type": kind, "description": words(rng, topic, rng.randint(5, 14))}
    if kind == "array":
        p["items"] = {"type": "string"}
    elif kind == "string" and rng.random() < 0.3:
        p["enum"] = sorted({rng.choice(TOPICS[topic]) for _ in range(4)})
    return p


def _tool(rng: random.Random, topic: str) -> dict[str, Any]:
    """One OpenAI-style function schema with a few parameters."""
    name = f"{rng.choice(['get', 'list', 'create', 'update', 'search'])}_{rng.choice(TOPICS[topic])}"
    names = sorted({rng.choice(TOPICS[topic]) for _ in range(rng.randint(2, 5))})
    props = {n: _param(rng, topic, n) for n in names}
    return {"type": "function", "function": {
        "name": name, "description": words(rng, topic, rng.randint(10, 30)),
        "parameters": {"type": "object", "properties": props, "required": names[:1]}}}


def _tools(rng: random.Random, topic: str, n: int) -> tuple[dict[str, Any], ...]:
    seen: dict[str, dict[str, Any]] = {}
    while len(seen) < n:
        t = _tool(rng, topic)
        seen.setdefault(t["function"]["name"], t)
    return tuple(seen.values())


def make_clients(seed: int) -> tuple[Client, ...]:
    """The fleet of apps, fixed by the seed (drawn from their own stream, apart from the sessions)."""
    rng = random.Random(f"clients-{seed}")
    return (
        Client("support-bot", "openai", "qwen2.5-7b-instruct", "support", 0.24,
               (_system(rng, "Acme Support", "support", 8), _system(rng, "Acme Support (EU)", "support", 10))),
        Client("agent-sdk", "openai", "qwen2.5-7b-instruct", "agent", 0.20,
               (_system(rng, "the DevOps agent", "agent", 6),), _tools(rng, "agent", 5), 0.45, (10, 160)),
        Client("desk-assistant", "anthropic", "qwen2.5-7b-instruct", "desk", 0.14,
               (_system(rng, "Deskmate", "desk", 7),), _tools(rng, "desk", 4), 0.35, (15, 200)),
        Client("notes-app", "anthropic", LLAMA_MODEL, "notes", 0.14,
               (_system(rng, "Notebook", "notes", 5),)),
        Client("chat-web", "openai", LLAMA_MODEL, "chat", 0.18,
               (_system(rng, "Chat", "chat", 4), _system(rng, "Chat for kids", "chat", 6))),
        Client("batch-summarizer", "openai", "hermes-chatml-7b", "notes", 0.10, (), (), 0.0, (40, 200)),
    )


def tool_call(rng: random.Random, client: Client) -> tuple[str, dict[str, Any]]:
    """A call to one of the client's tools with plausible arguments."""
    fn = rng.choice(client.tools)["function"]
    args: dict[str, Any] = {}
    for name, p in fn["parameters"]["properties"].items():
        if name not in fn["parameters"]["required"] and rng.random() < 0.5:
            continue
        args[name] = {"string": lambda p=p: rng.choice(p.get("enum") or TOPICS[client.topic]),
                      "integer": lambda: rng.randint(1, 500), "boolean": lambda: rng.random() < 0.5,
                      "array": lambda: [rng.choice(TOPICS[client.topic]) for _ in range(rng.randint(1, 3))],
                      }[p["type"]]()
    return fn["name"], args


def tool_result(rng: random.Random, client: Client) -> str:
    """What a tool returns: a JSON document of a few records."""
    rows = [{"id": rng.randint(1000, 99999), "name": rng.choice(TOPICS[client.topic]),
             "status": rng.choice(["ok", "pending", "failed", "done"]),
             "note": words(rng, client.topic, rng.randint(4, 25))} for _ in range(rng.randint(1, 6))]
    return json.dumps({"count": len(rows), "items": rows})


def flipped(tool: dict[str, Any]) -> dict[str, Any]:
    """The same schema with every object's keys in reverse order (the same JSON value, other bytes)."""
    def flip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: flip(v[k]) for k in reversed(list(v))}
        if isinstance(v, list):
            return [flip(x) for x in v]
        return v
    out: dict[str, Any] = flip(tool)
    return out
