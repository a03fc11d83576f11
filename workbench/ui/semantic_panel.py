"""The semantic-cache panel, shared by both hosts (no UI library): the decision for the selected
turn in plain words, why, and the nearest entries with their similarity, how they differ and their
own verdict; then each neighbour on its own: the turn it is, this turn's fingerprint beside its
fingerprint (action, kind of answer, things named, negation, correction; the rows that differ
marked), how they differ in sentences, and its verdict with the reason. The replay behind it is
ui/semantic_replay.py; the labels a user gives a pair, ui/semantic_labels.py.

What the panel shows is one dict (`semantic_view`), drawn by `semantic_html` and printed by
`workbench semantic lookup --json`: the page and the command cannot say different things."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from ..semantic.clip import clip_start
from ..semantic.fingerprint import ACTION_WORDS, ASKS_WORDS

if TYPE_CHECKING:
    from ..semantic.cache import Decision, Neighbour, SemanticCache
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


def verdict_key(d: "Decision") -> str:
    return "hit" if d.hit else "shadow" if d.shadow else "miss"


def reason_sentence(text: str) -> str:
    """The decision's reason as a sentence: capitalised, its verdict word left to the heading."""
    for lead in ("reused: ", "not reused: ", "shadow: "):
        if text.startswith(lead):
            text = text[len(lead):]
            break
    return (text[:1].upper() + text[1:]).rstrip(".") + "."


def _this_turn(fp: dict[str, Any]) -> str:
    parts = [f"asks to {ACTION_WORDS.get(fp['action'], fp['action'])}" if fp["action"] else "names no action"]
    parts.append("names " + ", ".join(f"“{e.lstrip('#')}”" for e in fp["entities"]) if fp["entities"]
                 else "names no particular thing")
    parts.append("wants to know " + (" and ".join(ASKS_WORDS.get(a, a) for a in fp["asks"]) or "how"))
    if fp["negated"]:
        parts.append("says not to do something")
    if fp["correction"]:
        parts.append("corrects an earlier turn (the session's entries are dropped)")
    return "This turn " + "; ".join(parts) + "."


def _neighbour_key(why: str) -> str:
    return "miss" if why.startswith("not reused") else "shadow" if why.startswith("shadow") else "hit"


def _differ(n: "Neighbour") -> str:
    return ("How they differ: " + "; ".join(n.differences) + "." if n.differences else
            "The fingerprints " + ("agree: nothing in them differs." if n.fingerprint_agrees else
                                   "name too few of the same things to agree."))


def _content(message: dict[str, Any]) -> str:
    return str(message.get("content", ""))


# --- what the panel shows, as data: `workbench semantic lookup --json` prints the same dict -------
def semantic_view(decision: "Decision", cache: "SemanticCache | None" = None,
                  pairs: "LookupPairs | None" = None) -> dict[str, Any]:
    """Every figure and sentence the panel shows for a lookup, as plain data (`semantic_html` draws
    this dict, the CLI prints it). `pairs`: the lookup's pairs (SessionReplay.last), for the
    neighbours' turns and messages; without them the cache's entries give what they can. The
    entries' ids are left out: they are drawn at random on every replay."""
    d = decision
    turn_of = {k: v.turn for k, v in pairs.neighbours.items()} if pairs is not None else {}
    decided = d.entry.id if d.entry is not None else d.nearest[0].entry_id if d.nearest else None
    return {
        "turn": pairs.turn if pairs is not None else None,
        "verdict": verdict_key(d),
        "reason": d.reason,                             # the cache's words; the panel drops the verdict word
        "similarity": d.similarity,                     # of the entry decided on
        "decided_turn": turn_of.get(decided) if decided is not None else None,
        "message": _content(pairs.messages[-1]) if pairs is not None else None,
        "fingerprint": d.fingerprint.to_json(),
        "this_turn": _this_turn(d.fingerprint.to_json()),
        "embedder": cache.embedder.name if cache is not None else None,
        "thresholds": {"high": cache.thresholds.high, "low": cache.thresholds.low} if cache is not None else None,
        "window": cache.window if cache is not None else None,
        "timings_ms": {"embed": round(d.embed_ms, 3), "search": round(d.search_ms, 3),
                       "judge": round(d.judge_ms, 3)},
        "neighbours": [_neighbour_view(i, n, cache, pairs) for i, n in enumerate(d.nearest, 1)],
    }


def _neighbour_view(rank: int, n: "Neighbour", cache: "SemanticCache | None",
                    pairs: "LookupPairs | None") -> dict[str, Any]:
    known = pairs.neighbours.get(n.entry_id) if pairs is not None else None
    entry = cache.entries.get(n.entry_id) if cache is not None and known is None else None
    fp = known.fingerprint if known is not None else entry.fingerprint if entry is not None else None
    message = _content(known.messages[-1]) if known is not None else entry.current_text if entry is not None else None
    return {"rank": rank, "turn": known.turn if known is not None else None, "similarity": n.similarity,
            "fingerprints": "agree" if n.fingerprint_agrees else "differ", "state": n.state,
            "verdict": _neighbour_key(n.why), "reason": n.why, "differences": list(n.differences),
            "how_they_differ": _differ(n), "context": n.context_text, "message": message,
            "fingerprint": fp.to_json() if fp is not None else None}


def decided_on(v: dict[str, Any]) -> str:
    """The entry a view's verdict is about (the one served, else the nearest) in words, with its
    similarity; "" when there is none."""
    if v["similarity"] is None:
        return ""
    where = f"turn {v['decided_turn']}" if v["decided_turn"] else "a cached entry"
    which = {"hit": "the entry reused", "shadow": "the entry checked", "miss": "the nearest entry"}[v["verdict"]]
    return f"{which}: {where}, similarity {v['similarity']:.3f}"


# --- the panel, drawn from that dict ---------------------------------------------------------------
def _fp_rows(fp: dict[str, Any]) -> dict[str, str]:
    """A fingerprint (its JSON: lists sorted) as the side-by-side table's cells, by row."""
    return {"asks to": ACTION_WORDS.get(fp["action"], fp["action"]) if fp["action"] else "names no action",
            "wants to know": " and ".join(ASKS_WORDS.get(a, a) for a in fp["asks"]) or "how (no particular kind)",
            "names": ", ".join(f"“{e.lstrip('#')}”" for e in fp["entities"]) or "no particular thing",
            "says not to do it": "yes" if fp["negated"] else "no",
            "corrects an earlier turn": "yes" if fp["correction"] else "no"}


def _side_by_side(view: dict[str, Any], nb: dict[str, Any]) -> str:
    a, b = _fp_rows(view["fingerprint"]), _fp_rows(nb["fingerprint"])
    turn, their = view["turn"], nb["turn"]
    head = (f"<tr><th></th><th>this turn{f' (turn {turn})' if turn else ''}</th>"
            f"<th>{f'turn {their}' if their else 'the cached entry'}</th></tr>")
    texts = (view["message"] or "", nb["message"] or "")
    said = (f"<tr><td>the message</td><td>{escape(clip_start(texts[0], MESSAGE_CHARS))}</td>"
            f"<td>{escape(clip_start(texts[1], MESSAGE_CHARS))}</td></tr>") if any(texts) else ""
    mark = ' class="wb-semantic-differs"'
    rows = "".join(f'<tr{mark if a[k] != b[k] else ""}><td>{escape(k)}</td>'
                   f"<td>{escape(a[k])}</td><td>{escape(b[k])}</td></tr>" for k in a)
    return f'<table class="wb-table wb-semantic-fp">{head}{said}{rows}</table>'


def _neighbour_html(view: dict[str, Any], nb: dict[str, Any], entry_id: int) -> str:
    """Neighbour on its own: similarity, the fingerprints side by side, the differences, its verdict."""
    where = f"turn {nb['turn']}" if nb["turn"] else "a cached entry"
    table = _side_by_side(view, nb) if nb["fingerprint"] is not None else ""
    said = VERDICTS[nb["verdict"]]
    return (f'<div class="wb-semantic-nb" data-entry="{entry_id}">'
            f"<h4>Neighbour {nb['rank']}: {where}, similarity {nb['similarity']:.3f}: {said}</h4>"
            f'{table}<p class="wb-semantic-differ">{escape(nb["how_they_differ"])}</p>'
            f'<p class="wb-semantic-why"><b>{said}</b>: '
            f"{escape(reason_sentence(nb['reason'])) if nb['reason'] else ''}</p></div>")


def semantic_html(decision: "Decision | None", cache: "SemanticCache | None" = None, note: str = "",
                  pairs: "LookupPairs | None" = None) -> str:
    """The panel: `semantic_view`'s dict drawn (see it for `pairs`); before a lookup, `note` or a prompt."""
    if decision is None:
        prompt = "Replay the earlier turns into a semantic cache and look this turn up."
        return f'<div class="wb-semantic">{escape(note) or prompt}</div>'
    v = semantic_view(decision, cache, pairs)
    th = (f"Thresholds: high {v['thresholds']['high']}, low {v['thresholds']['low']}; embedder {v['embedder']}, "
          f"a window of {v['window']} turns.") if cache is not None else ""
    on = f' <span class="wb-semantic-on">({escape(decided_on(v))})</span>' if v["similarity"] is not None else ""
    rows = "".join(
        f"<tr><td>{nb['rank']}</td><td>{nb['turn'] or ''}</td><td>{nb['similarity']:.3f}</td>"
        f"<td>{nb['fingerprints']}</td><td>{escape(nb['state'])}</td><td>{VERDICTS[nb['verdict']]}</td>"
        f"<td>{escape(clip_start(nb['context'], CONTEXT_CHARS))}</td></tr>" for nb in v["neighbours"])
    each = "".join(_neighbour_html(v, nb, n.entry_id) for nb, n in zip(v["neighbours"], decision.nearest))
    t = v["timings_ms"]
    return (f'{CSS}<div class="wb-semantic"><p><b class="wb-semantic-verdict">{VERDICTS[v["verdict"]]}</b>: '
            f'<span class="wb-semantic-reason">{escape(reason_sentence(v["reason"]))}</span>{on}</p>'
            f"<p>{escape(v['this_turn'])} {escape(th)} "
            f"Embedding {t['embed']:.1f} ms, search {t['search']:.2f} ms.</p>"
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
