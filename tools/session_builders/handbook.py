"""RAG over a large engineering handbook: the handbook is assembled from written chapters and
generic sentences drawn at random, then a written Q&A runs over it (retrieved passages in the
first user message, one search_docs tool exchange)."""

from __future__ import annotations

import random
from typing import Any

from .common import Session, code_block, fill, pick, random_id, substitute, wrap_join


class _Deck:
    """Draw items without repeats until the pool is exhausted, then reshuffle."""

    def __init__(self, rng: random.Random, items: list[str]):
        self.rng, self.items, self.cards = rng, list(items), list[str]()

    def draw(self, k: int) -> list[str]:
        out = []
        for _ in range(k):
            if not self.cards:
                self.cards = list(self.items)
                self.rng.shuffle(self.cards)
            out.append(self.cards.pop())
        return out


def _paragraph(rng: random.Random, hb: dict[str, Any], specific: _Deck, generic: _Deck, n: int) -> str:
    spec = specific.draw(rng.randint(1, 2))
    sents = spec + [fill(rng, s, hb["vocab"]) for s in generic.draw(max(1, n - len(spec)))]
    rng.shuffle(sents)
    return wrap_join(sents)


def _catalog_table(rng: random.Random, table: dict[str, Any]) -> str:
    rows = ["| Service | Team | Tier | On-call schedule | Availability SLO | p99 latency SLO |",
            "|---|---|---|---|---|---|"]
    for name, owner in table["services"].items():
        team, tier = owner["team"], owner["tier"]
        p99 = rng.choice(table["tiers"][tier]["p99_ms"])
        sched = team.lower().replace(" ", "-") + ("-primary" if tier == 0 else "-oncall")
        rows.append(f"| {name} | {team} | {tier} | {sched} | {table['tiers'][tier]['slo']} | {p99} ms |")
    return "\n".join(rows)


def _alerts_table(rng: random.Random, table: dict[str, Any], services: list[str]) -> str:
    rows = ["| Alert | Service | Condition | Severity | Runbook section |", "|---|---|---|---|---|"]
    for svc in services:
        for alert in pick(rng, table["alerts"], rng.randint(2, 4)):
            sev = rng.choice(table["severities"])  # drawn before the condition's value, as always
            kind, cond = alert["alert"], alert["condition"].format(x=rng.choice(alert["values"]))
            rows.append(f"| {svc}{kind} | {svc} | {cond} | {sev} | {svc}#{kind.lower()} |")
    return "\n".join(rows)


def _table(rng: random.Random, hb: dict[str, Any], name: str) -> str:
    table = hb["tables"][name]
    text = _catalog_table(rng, table) if name == "catalog" else _alerts_table(rng, table, hb["vocab"]["svc"])
    return f"{table['intro']}\n\n{text}"


def _chapter(rng: random.Random, hb: dict[str, Any], ci: int, ch: dict[str, Any],
             n_sections: int) -> tuple[list[str], list[tuple[str, str, str]]]:
    out = [f"## {ci}. {ch['title']}", ""]
    sections = []
    facts, steps, code = ch["facts"], ch.get("steps"), ch.get("code")
    subs = [hb["subtitles"][0], *pick(rng, hb["subtitles"][1:], n_sections - 1)]
    spec_deck, gen_deck = _Deck(rng, facts[3:]), _Deck(rng, hb["generic"])
    for si, sub in enumerate(subs, start=1):
        body = [_paragraph(rng, hb, spec_deck, gen_deck, rng.randint(3, 6)) for _ in range(rng.randint(2, 4))]
        if si == 1:
            body.insert(0, wrap_join(facts[:3]))
            spec_deck.items = list(facts)  # later sections may restate the basics
        if steps and si == 2:
            body.append("Procedure:\n\n" + "\n".join(f"{k}. {s}" for k, s in enumerate(steps, 1)))
        if code and si == len(subs):
            body.append("Example:\n\n" + code_block(code["lang"], code["body"]))
        if ch.get("table") and si == 2:
            body.append(_table(rng, hb, ch["table"]))
        text = "\n\n".join(body)
        out += [f"### {ci}.{si} {sub}", "", text, ""]
        sections.append((f"{ci}.{si}", f"{ch['title']} — {sub}", text))
    out += ["**Frequently asked**", ""]
    out += [f"- *{faq['q']}* {faq['a']}" for faq in pick(rng, hb["faq"], 2)]
    out.append("")
    return out, sections


def _handbook(rng: random.Random, hb: dict[str, Any], n_sections: int) -> tuple[str, list[tuple[str, str, str]]]:
    """(full handbook text, [(section number, title, text)])."""
    out = [line for heading in hb["heading"] for line in (heading, "")]
    sections = []
    for ci, ch in enumerate(hb["chapters"], start=1):
        lines, secs = _chapter(rng, hb, ci, ch, n_sections)
        out += lines
        sections += secs
    out += ["## Appendix A. Glossary", ""]
    out += [f"- **{term}**: {d}" for term, d in hb["glossary"].items()]
    out += ["", "## Appendix B. Changelog", ""]
    out += [f"- {version}: {change}" for version, change in hb["changelog"].items()]
    out.append("")
    return "\n".join(out), sections


def handbook_rag(session: Session, spec: dict[str, Any], rng: random.Random) -> Session:
    handbook, sections = _handbook(rng, spec["handbook"], spec["sections_per_chapter"])
    by_num = {num: (title, text) for num, title, text in sections}
    passages = []
    for i, num in enumerate(spec["retrieved"], 1):
        title, text = by_num[num]
        score = round(0.91 - 0.047 * i + rng.random() * 0.01, 3)
        passages.append(f"<passage id=\"{i}\" source=\"handbook §{num} {title}\" score=\"{score}\">\n"
                        f"{text}\n</passage>")
    system = [{"type": "text", "text": spec["system"]},
              {"type": "text", "text": handbook, "cache_control": {"type": "ephemeral"}}]
    ids = {"$tool_use_id": random_id(rng, "toolu_")}
    first, *rest = spec["conversation"]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": spec["passages_intro"] + "\n\n" + "\n\n".join(passages)},
                                     {"type": "text", "text": first["user"]}]},
        {"role": "assistant", "content": first["assistant"]},
    ]
    for turn in rest:
        messages.append({"role": "user", "content": turn["user"]})
        if "exchange" in turn:
            messages += substitute(turn["exchange"], ids)
        elif "assistant" in turn:
            messages.append({"role": "assistant", "content": turn["assistant"]})
    return {"system": system, "messages": messages}
