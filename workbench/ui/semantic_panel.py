"""The semantic-cache panel, shared by both hosts (no UI library): the decision for the selected
turn in plain words, why, and the nearest entries with their similarity, how they differ and their
own verdict; then each neighbour on its own: the turn it is, this turn's fingerprint beside its
fingerprint (action, kind of answer, things named, negation, correction; the rows that differ
marked), how they differ in sentences, and its verdict with the reason. The replay behind it is
ui/semantic_replay.py; the labels a user gives a pair, ui/semantic_labels.py."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from ..semantic.clip import clip_start
from ..semantic.fingerprint import ACTION_WORDS, ASKS_WORDS

if TYPE_CHECKING:
    from ..semantic.cache import Decision, Neighbour, SemanticCache
    from ..semantic.fingerprint import Fingerprint
    from .semantic_replay import LookupPairs

CONTEXT_CHARS = 160       # of a cached context shown, its end, cut at a word
VERDICTS = {"hit": "Reused", "shadow": "Checked in the shadow", "miss": "Not reused"}
MESSAGE_CHARS = 200       # of a turn's message in the side-by-side table
CSS = """<style>
.wb-semantic-nb { margin: 10px 0 14px 0; padding: 4px 8px; border-left: 3px solid #d0d7de; }
.wb-semantic-nb h4 { margin: 2px 0 4px 0; font-size: 13px; }
.wb-semantic-fp td, .wb-semantic-fp th { text-align: left !important; vertical-align: top; max-width: 420px; }
.wb-semantic-nearest td:last-child, .wb-semantic-nearest th:last-child { text-align: left; }
.wb-semantic-fp tr.wb-semantic-differs td { background: #fff4e5; }
</style>"""


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


def _neighbour_verdict(why: str) -> str:
    return VERDICTS["miss" if why.startswith("not reused") else "shadow" if why.startswith("shadow") else "hit"]


def _fp_rows(fp: "Fingerprint") -> dict[str, str]:
    """A fingerprint as the side-by-side table's cells, by row."""
    return {"asks to": ACTION_WORDS.get(fp.action, fp.action) if fp.action else "names no action",
            "wants to know": " and ".join(ASKS_WORDS.get(a, a) for a in sorted(fp.asks)) or "how (no particular kind)",
            "names": ", ".join(f"“{e.lstrip('#')}”" for e in sorted(fp.entities)) or "no particular thing",
            "says not to do it": "yes" if fp.negated else "no",
            "corrects an earlier turn": "yes" if fp.correction else "no"}


def _side_by_side(here: "Fingerprint", there: "Fingerprint", turn: int | None, their: int | None,
                  texts: tuple[str, str]) -> str:
    a, b = _fp_rows(here), _fp_rows(there)
    head = (f"<tr><th></th><th>this turn{f' (turn {turn})' if turn else ''}</th>"
            f"<th>{f'turn {their}' if their else 'the cached entry'}</th></tr>")
    said = (f"<tr><td>the message</td><td>{escape(clip_start(texts[0], MESSAGE_CHARS))}</td>"
            f"<td>{escape(clip_start(texts[1], MESSAGE_CHARS))}</td></tr>") if any(texts) else ""
    mark = ' class="wb-semantic-differs"'
    rows = "".join(f'<tr{mark if a[k] != b[k] else ""}><td>{escape(k)}</td>'
                   f"<td>{escape(a[k])}</td><td>{escape(b[k])}</td></tr>" for k in a)
    return f'<table class="wb-table wb-semantic-fp">{head}{said}{rows}</table>'


def _neighbour_html(i: int, n: "Neighbour", d: "Decision", cache: "SemanticCache | None",
                    pairs: "LookupPairs | None") -> str:
    """Neighbour `i` on its own: similarity, the fingerprints side by side, the differences, its verdict."""
    known = pairs.neighbours.get(n.entry_id) if pairs is not None else None
    entry = cache.entries.get(n.entry_id) if cache is not None and known is None else None
    their_fp = known.fingerprint if known is not None else entry.fingerprint if entry is not None else None
    their_turn = known.turn if known is not None else None
    texts = (str(pairs.messages[-1].get("content", "")) if pairs is not None else "",
             str(known.messages[-1].get("content", "")) if known is not None else entry.current_text if entry else "")
    where = f"turn {their_turn}" if their_turn else "a cached entry"
    table = _side_by_side(d.fingerprint, their_fp, pairs.turn if pairs else None, their_turn, texts) \
        if their_fp is not None else ""
    differ = ("How they differ: " + "; ".join(n.differences) + "." if n.differences else
              "The fingerprints " + ("agree: nothing in them differs." if n.fingerprint_agrees else
                                     "name too few of the same things to agree."))
    return (f'<div class="wb-semantic-nb" data-entry="{n.entry_id}">'
            f"<h4>Neighbour {i}: {where}, similarity {n.similarity:.3f}: {_neighbour_verdict(n.why)}</h4>"
            f'{table}<p class="wb-semantic-differ">{escape(differ)}</p>'
            f'<p class="wb-semantic-why"><b>{_neighbour_verdict(n.why)}</b>: '
            f"{escape(_reason(n.why)) if n.why else ''}</p></div>")


def semantic_html(decision: "Decision | None", cache: "SemanticCache | None" = None, note: str = "",
                  pairs: "LookupPairs | None" = None) -> str:
    """The panel. `pairs`: the lookup's pairs (SessionReplay.last), for the neighbours' turns and
    messages; without them the cache's entries give what they can."""
    if decision is None:
        prompt = "Replay the earlier turns into a semantic cache and look this turn up."
        return f'<div class="wb-semantic">{escape(note) or prompt}</div>'
    d = decision
    th = (f"Thresholds: high {cache.thresholds.high}, low {cache.thresholds.low}; embedder {cache.embedder.name}, "
          f"a window of {cache.window} turns.") if cache is not None else ""
    turns = {k: str(v.turn) for k, v in pairs.neighbours.items()} if pairs is not None else {}
    rows = "".join(
        f"<tr><td>{i}</td><td>{turns.get(n.entry_id, '')}</td><td>{n.similarity:.3f}</td>"
        f"<td>{'agree' if n.fingerprint_agrees else 'differ'}</td><td>{escape(n.state)}</td>"
        f"<td>{_neighbour_verdict(n.why)}</td>"
        f"<td>{escape(clip_start(n.context_text, CONTEXT_CHARS))}</td></tr>" for i, n in enumerate(d.nearest, 1))
    each = "".join(_neighbour_html(i, n, d, cache, pairs) for i, n in enumerate(d.nearest, 1))
    return (f'{CSS}<div class="wb-semantic"><p><b class="wb-semantic-verdict">{verdict(d)}</b>: '
            f'<span class="wb-semantic-reason">{escape(_reason(d.reason))}</span></p>'
            f"<p>{escape(_this_turn(d.fingerprint.to_json()))} {escape(th)} "
            f"Embedding {d.embed_ms:.1f} ms, search {d.search_ms:.2f} ms.</p>"
            f'<table class="wb-table wb-semantic-nearest"><tr><th>#</th><th>turn</th><th>similarity</th>'
            f"<th>fingerprints</th><th>state</th><th>its verdict</th>"
            f"<th>cached context (its end)</th></tr>{rows}</table>{each}"
            f"{escape(note)}</div>")


def neighbour_options(decision: "Decision", pairs: "LookupPairs | None") -> list[tuple[str, str]]:
    """The label bar's choice of neighbour, (label, entry id), in the panel's order."""
    if pairs is None:
        return []
    return [(f"{i}: turn {pairs.neighbours[n.entry_id].turn}, similarity {n.similarity:.3f}", str(n.entry_id))
            for i, n in enumerate(decision.nearest, 1) if n.entry_id in pairs.neighbours]


def label_html(added: Any, error: str = "") -> str:
    """What labelling a pair did (semantic_labels.Added), or why it did not, inline under the bar."""
    if error:
        return f'<div class="wb-semantic-label wb-semantic-label-error">not labelled: {escape(error)}</div>'
    again = "; it replaces this pair's earlier label" if added.replaced else ""
    return (f'<div class="wb-semantic-label">labelled{again}: {escape(added.path.name)} in the sessions folder '
            f"now holds {added.count} label{'s' if added.count != 1 else ''} "
            f"(<code>workbench semantic eval --dataset {escape(added.path.name)}</code> scores them)</div>")
