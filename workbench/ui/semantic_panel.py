"""The semantic-cache panel, shared by both hosts (no UI library): the decision for the selected
turn in plain words, why, and the nearest entries with their similarity, how they differ and their
own verdict. The replay behind it is ui/semantic_replay.py."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from ..semantic.clip import clip_start
from ..semantic.fingerprint import ACTION_WORDS, ASKS_WORDS

if TYPE_CHECKING:
    from ..semantic.cache import Decision, SemanticCache

CONTEXT_CHARS = 160       # of a cached context shown, its end, cut at a word
VERDICTS = {"hit": "Reused", "shadow": "Checked in the shadow", "miss": "Not reused"}


def verdict(d: "Decision") -> str:
    return VERDICTS["hit" if d.hit else "shadow" if d.shadow else "miss"]


def _reason(text: str) -> str:
    """The decision's reason as a sentence: capitalised, its verdict word left to the heading."""
    for lead in ("reused: ", "not reused: ", "shadow: "):
        if text.startswith(lead):
            text = text[len(lead):]
            break
    return (text[:1].upper() + text[1:]).rstrip(".") + "."


def _this_turn(fp: dict) -> str:
    parts = [f"asks to {ACTION_WORDS.get(fp['action'], fp['action'])}" if fp["action"] else "names no action"]
    parts.append("names " + ", ".join(f"“{e.lstrip('#')}”" for e in fp["entities"]) if fp["entities"]
                 else "names no particular thing")
    parts.append("wants to know " + (" and ".join(ASKS_WORDS.get(a, a) for a in fp["asks"]) or "how"))
    if fp["negated"]:
        parts.append("says not to do something")
    if fp["correction"]:
        parts.append("corrects an earlier turn (the session's entries are dropped)")
    return "This turn " + "; ".join(parts) + "."


def semantic_html(decision: "Decision | None", cache: "SemanticCache | None" = None, note: str = "") -> str:
    if decision is None:
        prompt = "Replay the earlier turns into a semantic cache and look this turn up."
        return f'<div class="wb-semantic">{escape(note) or prompt}</div>'
    d = decision
    th = (f"Thresholds: high {cache.thresholds.high}, low {cache.thresholds.low}; embedder {cache.embedder.name}, "
          f"a window of {cache.window} turns.") if cache is not None else ""
    rows = "".join(
        f"<tr><td>{n.similarity:.3f}</td><td>{'agree' if n.fingerprint_agrees else 'differ'}</td>"
        f"<td>{escape('; '.join(n.differences)) or 'none'}</td><td>{escape(n.state)}</td>"
        f"<td>{escape(_reason(n.why)) if n.why else ''}</td>"
        f"<td>{escape(clip_start(n.context_text, CONTEXT_CHARS))}</td></tr>" for n in d.nearest)
    return (f'<div class="wb-semantic"><p><b class="wb-semantic-verdict">{verdict(d)}</b>: '
            f'<span class="wb-semantic-reason">{escape(_reason(d.reason))}</span></p>'
            f"<p>{escape(_this_turn(d.fingerprint.to_json()))} {escape(th)} "
            f"Embedding {d.embed_ms:.1f} ms, search {d.search_ms:.2f} ms.</p>"
            f'<table class="wb-table"><tr><th>similarity</th><th>fingerprints</th><th>how they differ</th>'
            f"<th>state</th><th>its verdict</th><th>cached context (its end)</th></tr>{rows}</table>"
            f"{escape(note)}</div>")
