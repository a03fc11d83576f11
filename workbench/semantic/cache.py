"""The context-aware semantic cache.

A turn is represented by its context: the current user message and a window of recent turns
(default 5), embedded together (a weighted sum of the two normalised vectors, so the current turn
leads and the window resolves "it" and "that one"), plus the structured fingerprint of the
current message (fingerprint.py; action and entities inherited from the window when the message
names none: "and for the EU region?" keeps the action it continues).

Lookup: cosine similarity against the entries this request may see; each of the nearest is
judged (`judge`: the fingerprints' guards and the pairwise checks of compare.py) and decided
(`decide`): below `low` a miss; a guard forbids a hit at any similarity (a flipped negation,
opposite requests, other counted things, another kind of answer, near-identical texts that differ
in a content word: embeddings place such pairs close together, and no threshold separates them);
at or above `high` a hit; between the two a hit when the new context contains the cached request
or the fingerprints agree. Every decision says why: the nearest entries, their similarities,
their fingerprint differences and their own verdicts.

Entries are scoped to their session unless stored as shared; they carry the model, tokenizer,
system-prompt and knowledge versions (any difference makes them unmatchable), a TTL (short for
time-sensitive content), a state and a hit count. A user correction ("no, use B instead", "不对，
改用 B") invalidates the session's entries, and a context holding a correction is read-only:
it can be matched, never written. A `suspect` entry is served only in shadow mode: the hit is
recorded, the caller still produces a fresh result and can compare it (`record_shadow`).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import WorkbenchError
from .clip import clip_start
from .compare import coverage, missing, pair_vetoes, unit_coverage
from .embedders import Embedder, default_embedder, default_embedder_name
from .fingerprint import CJK, Fingerprint, fingerprint, is_correction
from .index import VectorIndex

STATES = ("active", "suspect", "frozen")
# In the band, agreeing fingerprints are not enough when the new context mentions under a fifth of
# the cached request's content words: in Chinese the rules find few entities, and two questions
# about different things agree on nothing but "怎么".
MIN_COVERAGE = 0.2
# ... and more in Chinese, where the rules find few entities: the words must carry more of the
# decision. Chinese rewordings keep a word's characters more often than its bigrams ("团操课" /
# "团课"), so the share is counted in characters.
MIN_COVERAGE_CJK = 0.7        # counted in characters (compare.unit_coverage): rewordings keep them
# The confirm tier: a near miss (similarity from CONFIRM_FLOOR up to `low`) is served when the words
# confirm it: no guard objects, the fingerprints agree, and the new context names all of the cached
# request, or at least half its content words (90% of its characters in Chinese). Chosen on eval,
# heldout-dev and dev2: 2 points more recall over the three, precision 0.3 points lower.
CONFIRM_FLOOR = 0.4
CONFIRM_COVERAGE = 0.5
CONFIRM_COVERAGE_CJK = 0.9
SHARED = "*"
DEFAULT_TTL_S = 24 * 3600.0
SHORT_TTL_S = 300.0
TIME_SENSITIVE = re.compile(r"\b(?:today|now|currently|latest|current|tonight|this (?:week|morning|year)|"
                            r"price|stock|weather|score|exchange rate)\b|"
                            r"今天|现在|目前|最新|当前|价格|股价|天气|汇率|比分",
                            re.I)


@dataclass(frozen=True)
class Thresholds:
    # The pair for an embedder without its own defaults (DEFAULT_THRESHOLDS). Calibrate on your own
    # traffic: `workbench semantic eval --calibrate-on DEV`.
    high: float = 0.90
    low: float = 0.70

    def __post_init__(self) -> None:
        if not -1.0 <= self.low <= self.high <= 1.0:
            raise WorkbenchError(f"thresholds must satisfy -1 <= low <= high <= 1 "
                                 f"(got low {self.low}, high {self.high})")


# Per embedder: similarity scales differ (USE spreads its similarities wider than MiniLM). Chosen on
# the development sets only (eval and heldout-dev, never heldout-test): the most recall at about 95%
# precision over both; see docs/semantic.md.
DEFAULT_THRESHOLDS = {"use-multilingual-v3": Thresholds(high=0.98, low=0.60),
                      "all-MiniLM-L6-v2": Thresholds(high=0.90, low=0.70)}


def default_thresholds(embedder: str) -> Thresholds:
    return DEFAULT_THRESHOLDS.get(embedder, Thresholds())


@dataclass(frozen=True)
class Context:
    """What a lookup compares: the messages so far, the last one the user's current turn."""
    messages: tuple[dict, ...]
    window: int = 5

    @property
    def current(self) -> str:
        return _text(self.messages[-1]) if self.messages else ""

    def recent(self) -> list[dict]:
        """The window: the last `window` turns before the current message (a turn = a user message
        and what followed it)."""
        prev = list(self.messages[:-1])
        starts = [i for i, m in enumerate(prev) if m.get("role") == "user"]
        cut = starts[-self.window] if len(starts) >= self.window and self.window > 0 else 0
        return prev[cut:] if self.window > 0 else []

    def trimmed(self) -> "Context":
        """The same context holding only what it reads (the window and the current message): equal
        in everything a lookup or a put sees, and small enough to keep for every turn of a long
        session."""
        if not self.messages:
            return self
        return Context((*self.recent(), self.messages[-1]), self.window)

    def window_text(self) -> str:
        return "\n".join(f"{m.get('role')}: {_text(m)}" for m in self.recent()
                         if m.get("role") in ("user", "assistant"))

    def fingerprint(self) -> Fingerprint:
        fp = fingerprint(self.current)
        if fp.action and fp.entities:
            return fp
        for m in reversed(self.recent()):                      # inherit what the message leaves out
            if m.get("role") != "user":
                continue
            prior = fingerprint(_text(m))
            action = fp.action or prior.action
            entities = fp.entities or prior.entities
            if action != fp.action or entities != fp.entities:
                return Fingerprint(action, entities, fp.negated, fp.correction, fp.asks)
        return fp


def _vkey(versions: dict[str, str]) -> tuple:
    return tuple(sorted((str(k), str(v)) for k, v in versions.items()))


def _text(m: dict) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return " ".join(b.get("text", "") for b in c if isinstance(b, dict))
    return ""


@dataclass
class Entry:
    id: int
    session: str                        # SHARED for entries any session may match
    row: int
    fingerprint: Fingerprint
    versions: dict[str, str]
    created: float
    ttl_s: float
    payload: dict[str, Any]
    context_text: str
    state: str = "active"
    hits: int = 0
    shadow_hits: int = 0
    shadow_agreed: int = 0
    current_text: str = ""               # the context's parts, for the pairwise text check
    window_text: str = ""

    def expired(self, now: float) -> bool:
        return now >= self.created + self.ttl_s

    def to_json(self) -> dict:
        return {"id": self.id, "session": self.session, "fingerprint": self.fingerprint.to_json(),
                "versions": self.versions, "created": self.created, "ttl_s": self.ttl_s, "payload": self.payload,
                "context_text": self.context_text, "state": self.state, "hits": self.hits,
                "shadow_hits": self.shadow_hits, "shadow_agreed": self.shadow_agreed,
                "current_text": self.current_text, "window_text": self.window_text}


@dataclass(frozen=True)
class Neighbour:
    entry_id: int
    similarity: float
    fingerprint_agrees: bool
    differences: tuple[str, ...]
    state: str
    context_text: str
    why: str = ""                        # this entry's own decision


@dataclass(frozen=True)
class Decision:
    hit: bool                            # serve the payload
    shadow: bool                         # a suspect entry matched: produce fresh, compare
    entry: Entry | None
    similarity: float | None
    reason: str
    fingerprint: Fingerprint
    nearest: tuple[Neighbour, ...] = ()
    embed_ms: float = 0.0
    search_ms: float = 0.0               # the index scan
    judge_ms: float = 0.0                # the rules over the nearest entries

    def to_json(self) -> dict:
        return {"hit": self.hit, "shadow": self.shadow, "entry": None if self.entry is None else self.entry.id,
                "similarity": self.similarity, "reason": self.reason, "fingerprint": self.fingerprint.to_json(),
                "nearest": [n.__dict__ | {"differences": list(n.differences)} for n in self.nearest],
                "embed_ms": round(self.embed_ms, 3), "search_ms": round(self.search_ms, 3),
                "judge_ms": round(self.judge_ms, 3)}


@dataclass(frozen=True)
class Judgement:
    """What decides a pair beside the similarity, computed once per pair: the guards that forbid a
    hit, whether the new context names everything the cached request asks, whether the
    fingerprints agree, and how they differ."""
    vetoes: tuple[str, ...]
    contained: bool
    agrees: bool
    coverage: float
    differences: tuple[str, ...]
    cjk: bool = False                    # Chinese (or Japanese) text: the embedder carries little there


def judge(query: Fingerprint, entry: Fingerprint,
          texts: tuple[tuple[str, str], tuple[str, str]] | None = None) -> Judgement:
    """`texts`: ((current, window) of the query, (current, window) of the entry) for the pairwise
    checks (compare.py)."""
    veto = query.vetoes(entry)
    cover, gone = 1.0, frozenset[str]()
    if texts is not None:
        veto += pair_vetoes(*texts)
        (qc, qw), (ec, _) = texts
        gone = missing(ec, qc, qw)
        cover = unit_coverage(ec, qc, qw) if CJK.search(ec) else coverage(ec, gone)
    whole = ("", "") if texts is None else (" ".join(texts[0]), " ".join(texts[1]))
    agrees = query.agrees(entry, whole)
    # added background or a repeat: nothing of the cached request is missing and the fingerprints
    # agree (the same kind of answer, the same action, the same names)
    contained = texts is not None and not gone and agrees
    cjk = texts is not None and any(CJK.search(t[0]) for t in texts)
    return Judgement(tuple(veto), contained, agrees, cover, tuple(query.differences(entry)), cjk)


def decide(similarity: float, j: Judgement, thresholds: Thresholds, state: str = "active") -> tuple[bool, bool, str]:
    """(hit, shadow, why) for the nearest entry: below `low` a miss; a guard forbids a hit at any
    similarity; at or above `high` a hit; between the two a hit when the new context contains the
    cached request or the fingerprints agree. Shared by lookups and the evaluation harness, so both
    decide alike."""
    th, s = thresholds, similarity
    if th.low > s >= CONFIRM_FLOOR and not j.vetoes and j.agrees and (
            j.contained or j.coverage >= (CONFIRM_COVERAGE_CJK if j.cjk else CONFIRM_COVERAGE)):
        said = "everything" if j.contained else f"{j.coverage:.0%}"
        return _served(f"a near miss (similarity {s:.3f}, under the low threshold {th.low}), confirmed: the new "
                       f"context names {said} of what the cached request asks, and the fingerprints agree", state)
    if s < th.low:
        return False, False, (f"not reused: the questions are too far apart (similarity {s:.3f}, under the low "
                              f"threshold {th.low})")
    if j.vetoes:
        return False, False, f"not reused: close (similarity {s:.3f}), but {'; '.join(j.vetoes)}"
    if s >= th.high:
        why = f"the questions are nearly the same (similarity {s:.3f}, at or over the high threshold {th.high})"
    elif j.contained:
        why = (f"similar (similarity {s:.3f}, over the low threshold {th.low}), and the new question names "
               f"everything the cached request asks (added background or a repeat)")
    elif j.agrees and j.coverage >= (MIN_COVERAGE_CJK if j.cjk else MIN_COVERAGE):
        why = (f"similar (similarity {s:.3f}, between {th.low} and {th.high}), and the fingerprints agree: the same "
               f"action, the same things named")
    elif j.agrees:        # the fingerprints agree, the words do not: say which share fell short
        need = MIN_COVERAGE_CJK if j.cjk else MIN_COVERAGE
        unit = "characters" if j.cjk else "content words"
        return False, False, (f"not reused: similar (similarity {s:.3f}, between {th.low} and {th.high}) and the "
                              f"fingerprints agree, but the new context names only {j.coverage:.0%} of the cached "
                              f"request's {unit} (at least {need:.0%} needed)")
    else:
        differ = '; '.join(j.differences) or 'they name too few of the same things'
        return False, False, (f"not reused: similar (similarity {s:.3f}, between {th.low} and {th.high}), but the "
                              f"fingerprints differ: {differ}")
    return _served(why, state)


def _served(why: str, state: str) -> tuple[bool, bool, str]:
    if state == "suspect":
        return False, True, (f"shadow: {why}; but the entry is suspect, so a fresh answer is made and compared "
                             f"with it")
    return True, False, f"reused: {why}"


STATE_CODE = {"active": 0, "suspect": 1, "frozen": 2}
SETTINGS_VERSION = 2          # of the decision rules: a bundle from other rules is refused


def settings(thresholds: Thresholds | None = None, *, window: int = 5, current_weight: float = 0.65,
             embedder: str | None = None) -> dict[str, Any]:
    """What production needs to decide as the workbench did (the export bundle's `semantic_cache`).
    Without an embedder, the default one; without thresholds, that embedder's defaults."""
    embedder = embedder or default_embedder_name()
    thresholds = thresholds or default_thresholds(embedder)
    return {"rules_version": SETTINGS_VERSION, "embedder": embedder, "window": window,
            "current_weight": current_weight, "thresholds": {"high": thresholds.high, "low": thresholds.low},
            "min_coverage": MIN_COVERAGE, "min_coverage_cjk": MIN_COVERAGE_CJK, "ttl_s": DEFAULT_TTL_S,
            "short_ttl_s": SHORT_TTL_S, "scope": "session"}


def from_settings(d: dict, embedder: Embedder | None = None, **kw: Any) -> "SemanticCache":
    """A cache deciding as the exported settings say. Unknown rules or a different embedder are
    errors naming the field: the thresholds were calibrated for that embedder and these rules."""
    where = "semantic_cache"
    if d.get("rules_version") != SETTINGS_VERSION:
        raise WorkbenchError(f"{where}.rules_version is {d.get('rules_version')!r}, these rules are "
                             f"version {SETTINGS_VERSION}", hint="export the bundle again with this version")
    try:
        th = Thresholds(float(d["thresholds"]["high"]), float(d["thresholds"]["low"]))
        window, weight = int(d["window"]), float(d["current_weight"])
    except (KeyError, TypeError, ValueError) as exc:
        raise WorkbenchError(f"{where}: a missing or bad field ({exc})",
                             hint="thresholds.high, thresholds.low, window and current_weight are needed") from None
    cache = SemanticCache(embedder, thresholds=th, window=window, current_weight=weight, **kw)
    if d.get("embedder") and cache.embedder.name != d["embedder"]:
        raise WorkbenchError(f"{where}.embedder is {d['embedder']!r}, but this cache embeds with "
                             f"{cache.embedder.name!r}", hint="the thresholds were calibrated for the exported "
                             "embedder: use it, or calibrate again")
    return cache


class SemanticCache:
    def __init__(self, embedder: Embedder | None = None, *, thresholds: Thresholds | None = None,
                 window: int = 5, current_weight: float = 0.65, clock: Callable[[], float] = time.time,
                 store: Any = None):
        if window < 0:
            raise WorkbenchError(f"the context window must be at least 0 turns (got {window})")
        if not 0.0 < current_weight <= 1.0:
            raise WorkbenchError(f"current_weight must be in (0, 1] (got {current_weight})")
        self.embedder = embedder or default_embedder()
        self.thresholds = thresholds or default_thresholds(self.embedder.name)
        self.window, self.current_weight = window, current_weight
        self.clock = clock
        self.index = VectorIndex(self.embedder.dim)
        self.entries: dict[int, Entry] = {}
        self._by_row: dict[int, int] = {}
        self._session_codes: dict[str, int] = {SHARED: 0}
        self._version_codes: dict[tuple, int] = {}
        self._lock = threading.RLock()
        self.store = store                   # RedisSemanticStore or None: entries persisted there too
        self.invalidations = 0

    # representation ------------------------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        """This cache's settings, for the export bundle."""
        return settings(self.thresholds, window=self.window, current_weight=self.current_weight,
                        embedder=self.embedder.name)

    def context(self, messages: Sequence[dict]) -> Context:
        if not messages or messages[-1].get("role") != "user":
            raise WorkbenchError("a semantic-cache context ends with the user's current message")
        return Context(tuple(messages), self.window)

    def vector(self, ctx: Context) -> np.ndarray:
        texts = [ctx.current] + ([ctx.window_text()] if ctx.window_text() else [])
        vecs = self.embedder.embed(texts)
        v = vecs[0] * self.current_weight + (vecs[1] * (1 - self.current_weight) if len(vecs) > 1 else 0)
        return (v / (np.linalg.norm(v) or 1.0)).astype(np.float32)

    # writes ----------------------------------------------------------------------------------------
    def put(self, session: str, messages: Sequence[dict], payload: dict[str, Any], versions: dict[str, str], *,
            ttl_s: float | None = None, shared: bool = False, state: str = "active") -> Entry | None:
        """Store a result for this context; None when the context is read-only (it holds a
        user correction)."""
        return self.put_context(session, self.context(messages), payload, versions, ttl_s=ttl_s, shared=shared,
                                state=state)

    def put_context(self, session: str, ctx: Context, payload: dict[str, Any], versions: dict[str, str], *,
                    ttl_s: float | None = None, shared: bool = False, state: str = "active") -> Entry | None:
        """`put` for a context made already (`context`, or one kept: the Semantic tab keeps each
        turn's, its window's messages only)."""
        if state not in STATES:
            raise WorkbenchError(f"state must be one of {STATES}, got {state!r}")
        # read-only: the represented context (the window and the current turn) holds a correction
        if any(m.get("role") == "user" and is_correction(_text(m)) for m in [*ctx.recent(), ctx.messages[-1]]):
            return None
        vec = self.vector(ctx)
        ttl = ttl_s if ttl_s is not None else (SHORT_TTL_S if TIME_SENSITIVE.search(ctx.current) else DEFAULT_TTL_S)
        with self._lock:
            e = Entry(secrets.randbits(48), SHARED if shared else session, -1, ctx.fingerprint(), dict(versions),
                      self.clock(), ttl, dict(payload), ctx.current if not ctx.window_text() else
                      f"{ctx.window_text()}\nuser: {ctx.current}", state,
                      current_text=ctx.current, window_text=ctx.window_text())
            self._insert(e, vec)
        if self.store is not None:
            self.store.save(e, vec)
        return e

    def _insert(self, e: Entry, vec: np.ndarray) -> None:
        scode = self._session_codes.setdefault(e.session, len(self._session_codes))
        vcode = self._version_codes.setdefault(_vkey(e.versions), len(self._version_codes))
        e.row = self.index.add(vec, session=scode, versions=vcode, expires=e.created + e.ttl_s,
                               state=STATE_CODE[e.state])
        self.entries[e.id] = e
        self._by_row[e.row] = e.id

    def observe(self, session: str, message: dict) -> bool:
        """A new user message: a correction invalidates the session's entries. True if it did."""
        if message.get("role") != "user" or not is_correction(_text(message)):
            return False
        self.invalidate_session(session)
        return True

    def invalidate_session(self, session: str) -> int:
        with self._lock:
            gone = [e for e in self.entries.values() if e.session == session]
            for e in gone:
                self._drop(e)
        self.invalidations += len(gone)
        return len(gone)

    def set_state(self, entry_id: int, state: str) -> None:
        if state not in STATES:
            raise WorkbenchError(f"state must be one of {STATES}, got {state!r}")
        with self._lock:
            e = self.entries[entry_id]
            e.state = state
            self.index.set(e.row, state=STATE_CODE[state])
        if self.store is not None:
            self.store.save(e, self.index.vector(e.row))

    def _drop(self, e: Entry) -> None:
        self.entries.pop(e.id, None)
        self._by_row.pop(e.row, None)
        self.index.remove(e.row)
        if self.store is not None:
            self.store.delete(e.id)

    def clear(self) -> None:
        """Drop every entry and start the index afresh: the rows then fill in the order a new cache's
        would, so that equal similarities rank alike (the Semantic tab refills its cache per lookup)."""
        with self._lock:
            for e in list(self.entries.values()):
                self._drop(e)
            self.index = VectorIndex(self.embedder.dim)
            self._by_row.clear()
            self._session_codes = {SHARED: 0}
            self._version_codes = {}

    def expire(self) -> int:
        now = self.clock()
        with self._lock:
            gone = [e for e in self.entries.values() if e.expired(now)]
            for e in gone:
                self._drop(e)
        return len(gone)

    # lookup ----------------------------------------------------------------------------------------
    def lookup(self, session: str, messages: Sequence[dict], versions: dict[str, str], *, k: int = 3) -> Decision:
        return self.lookup_context(session, self.context(messages), versions, k=k)

    def lookup_context(self, session: str, ctx: Context, versions: dict[str, str], *, k: int = 3) -> Decision:
        """`lookup` for a context made already (see `put_context`)."""
        fp = ctx.fingerprint()
        t0 = time.perf_counter()
        q = self.vector(ctx)
        t1 = time.perf_counter()
        with self._lock:
            rows, sims, skipped = self._candidates(q, session, versions, k)
            found = [(self.entries[self._by_row[int(r)]], float(sim)) for r, sim in zip(rows, sims)]
            ts = time.perf_counter()
            # every candidate is judged: the nearest may be a near-miss ("2 requests" for "2
            # instances") while the second is the same request in other words
            here = (ctx.current, ctx.window_text())
            judged = [(e, sim, judge(fp, e.fingerprint, (here, (e.current_text, e.window_text)))) for e, sim in found]
            verdicts = [(e, sim, decide(sim, j, self.thresholds, e.state)) for e, sim, j in judged]
            nearest = tuple(Neighbour(e.id, sim, j.agrees, j.differences, e.state, clip_start(e.context_text, 200), why)
                            for (e, sim, j), (_, _, (_, _, why)) in zip(judged, verdicts))
            t2 = time.perf_counter()
            scope = f" ({skipped} other entr{'y' if skipped == 1 else 'ies'} out of scope, of another version, " \
                    f"expired or frozen)" if skipped else ""
            if not nearest:
                return Decision(False, False, None, None, f"not reused: no entry this request may match{scope}", fp,
                                (), (t1 - t0) * 1e3, (ts - t1) * 1e3)
            e, sim, (hit, shadow, why) = next((v for v in verdicts if v[2][0] or v[2][1]), verdicts[0])
            if shadow:
                e.shadow_hits += 1
            elif hit:
                e.hits += 1
            return Decision(hit, shadow, e if hit or shadow else None, sim, why, fp, nearest,
                            (t1 - t0) * 1e3, (ts - t1) * 1e3, (t2 - ts) * 1e3)

    def _candidates(self, q: np.ndarray, session: str, versions: dict[str, str], k: int
                    ) -> tuple[np.ndarray, np.ndarray, int]:
        """The k nearest entries this request may match: its session's or shared, the same versions,
        not expired, not frozen (array filters over the index's columns); and how many others there are."""
        idx = self.index
        live = idx.live()
        vcode = self._version_codes.get(_vkey(versions))
        if vcode is None:
            return np.zeros(0, np.int64), np.zeros(0, np.float32), int(np.count_nonzero(live))
        scode = self._session_codes.get(session, -1)
        sess = idx.col("session")
        mask = live & ((sess == scode) | (sess == 0)) & (idx.col("versions") == vcode) \
            & (idx.col("expires") > self.clock()) & (idx.col("state") != STATE_CODE["frozen"])
        rows, sims = idx.search(q, mask, k)
        return rows, sims, int(np.count_nonzero(live) - np.count_nonzero(mask))

    def record_shadow(self, entry_id: int, agreed: bool, *, promote_after: int = 3) -> str:
        """The fresh result of a shadow hit agreed with the entry's or not: a disagreement freezes
        the entry; `promote_after` agreements in a row make it active."""
        with self._lock:
            e = self.entries[entry_id]
            if not agreed:
                e.state = "frozen"
            else:
                e.shadow_agreed += 1
                if e.shadow_agreed >= promote_after:
                    e.state = "active"
            self.index.set(e.row, state=STATE_CODE[e.state])
            state = e.state
        if self.store is not None:
            self.store.save(e, self.index.vector(e.row))
        return state

    # persistence -------------------------------------------------------------------------------------
    def load_from_store(self) -> int:
        """Rebuild the index from the store's entries (a new process); returns how many."""
        if self.store is None:
            return 0
        n = 0
        with self._lock:
            for meta, vec in self.store.load_all(self.embedder.dim):
                if meta["id"] in self.entries:
                    continue
                e = Entry(meta["id"], meta["session"], -1, Fingerprint.from_json(meta["fingerprint"]),
                          dict(meta["versions"]), meta["created"], meta["ttl_s"], meta["payload"],
                          meta["context_text"], meta["state"], meta["hits"], meta.get("shadow_hits", 0),
                          meta.get("shadow_agreed", 0), meta.get("current_text", ""), meta.get("window_text", ""))
                self._insert(e, vec)
                n += 1
            self.index.pack(0)          # quantize now, not in the first lookup after a bulk load
        return n
