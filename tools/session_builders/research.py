"""The 1,000-message research-assistant chat of the benchmarks: each question and answer is put
together from written facts, sentence frames, openers and closers, drawn at random per topic."""

from __future__ import annotations

import random
from typing import Any

from .common import Session, fill, pick, wrap_join


def _pair(rng: random.Random, spec: dict[str, Any], topic: str) -> tuple[str, str]:
    info = spec["topics"][topic]
    m1, m2 = rng.sample(info["method"], 2)
    s1, s2 = rng.sample(info["setting"], 2)
    q1, q2 = rng.sample(info["measure"], 2)
    vocab = {"topic": [topic], "aspect": info["aspect"], "method": [m1], "method2": [m2], "setting": [s1],
             "setting2": [s2], "measure": [q1], "measure2": [q2], "section": spec["sections"], "doc": spec["documents"]}
    claim = rng.choice(info["facts"])
    vocab["claim"] = [claim[0].lower() + claim[1:]]
    user = fill(rng, rng.choice(spec["questions"]), vocab)
    ctx = rng.choice(spec["contexts"])
    if ctx:
        user = f"{user} {ctx}" if rng.random() < 0.5 else f"{ctx} {user}"
    paras = []
    n_par = rng.randint(4, 6)
    facts = pick(rng, info["facts"], n_par + rng.randint(1, 3))
    frames = pick(rng, spec["frames"], 2 * n_par + 1)
    for k in range(n_par):
        chunk = [facts[k], fill(rng, frames[2 * k], vocab)]
        if rng.random() < 0.7:
            chunk.append(fill(rng, frames[2 * k + 1], vocab))
        if k + n_par < len(facts):
            chunk.append(facts[k + n_par])
        rng.shuffle(chunk)
        paras.append(wrap_join(chunk))
    if rng.random() < 0.5:
        items = pick(rng, info["aspect"], 3)
        paras.append(spec["checklist_intro"] + "\n" + "\n".join(
            f"- **{it[0].upper() + it[1:]}**: {fill(rng, rng.choice(spec['frames']), vocab)}" for it in items))
    answer = rng.choice(spec["openers"]) + "\n\n" + "\n\n".join(paras)
    closer = rng.choice(spec["closers"])
    if closer:
        answer += "\n\n" + closer
    return user, answer


def research_chat(session: Session, spec: dict[str, Any], rng: random.Random) -> Session:
    """One system message, then user/assistant pairs, ending with a user message: exactly
    ``n_messages`` messages; the topic changes every 8 to 20 pairs."""
    messages = [{"role": "system", "content": spec["system"]}]
    topics = list(spec["topics"])
    topic = rng.choice(topics)
    for i in range((spec["n_messages"] - 2) // 2):
        if i % rng.randint(8, 20) == 0:
            topic = rng.choice(topics)
        user, answer = _pair(rng, spec, topic)
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
    last_user, _ = _pair(rng, spec, topic)
    messages.append({"role": "user", "content": last_user})
    if len(messages) != spec["n_messages"]:
        raise ValueError(f"research_chat: {len(messages)} messages, not {spec['n_messages']} (n_messages must be even)")
    return {"messages": messages}
