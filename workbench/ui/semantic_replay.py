"""The Semantic tab's replay of the session, kept between lookups (no UI library).

A lookup replays the session's earlier turns into a semantic cache (each turn's context stored with
the reply that followed it) and looks the selected turn up. Done from scratch that embeds every
turn on every click: a minute on a 500-turn session. `SessionReplay` keeps what the replay is made
of, so that a second lookup costs the rules and the index, not the embedder:

- each turn's context (trimmed to what a lookup reads: its window and its current message), its
  reply and its system prompt's digest, stamped with the document generation it was made at. It
  stands while the state's per-turn stamps say that neither the turn nor the one after it (whose
  reply it stores) was edited since; an edit makes again only the turns it touched;
- the vectors of every text embedded, by content (`MemoEmbedder`): after an edit only the texts
  that changed are embedded: the edited message, and the windows of the turns that show it.

Each lookup also keeps what the Semantic tab shows and labels (`LookupPairs`, `last`): the turn,
the generation it was made at, this turn's context and, for each neighbour, the turn it is, its
context and its fingerprint.

`lookup_turn` is one lookup from scratch through the same class: `workbench semantic lookup` runs it,
so the command and the tab decide alike (tests/test_semantic_tab_equals_cli.py).

The cache itself is refilled from these on every lookup, the same way a fresh replay fills it
(`replay`, kept as the reference), so a reused result equals a fresh one: the same verdict,
neighbours and similarities (the vectors are the same bits: see `semantic/embedders.py`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import WorkbenchError
from ..semantic.cache import Context

if TYPE_CHECKING:
    from ..assembly import Assembler
    from ..semantic.cache import Decision, SemanticCache
    from ..semantic.fingerprint import Fingerprint

SESSION = "this-session"
REPLY_CHARS = 500            # of the reply kept as an entry's payload
NEIGHBOURS = 5               # the nearest entries a lookup shows


def messages_of(asm: "Assembler", request: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """A request's user and assistant messages as the assembler prepares them (prompt templates
    expanded, roles cleaned), and its system prompt's text."""
    conv = asm.prepare(request)[0]
    msgs = [{"role": m.role, "content": m.content or ""} for m in conv.messages if m.role in ("user", "assistant")]
    return msgs, "\n".join(m.content or "" for m in conv.messages if m.role == "system")


def versions_of(asm: "Assembler", system: str) -> dict[str, str]:
    """What an entry must share with a request to match it: the template, the tokenizer and the
    system prompt."""
    return {"model": asm.template.name, "tokenizer": asm.tokenizer.version[:16],
            "system_prompt": hashlib.sha256(system.encode("utf-8", "surrogatepass")).hexdigest()[:16],
            "knowledge": "-"}


def _reply(msgs: list[dict[str, Any]], nxt: list[dict[str, Any]]) -> str:
    """The reply that followed a turn: the next turn's message at the end of this one's, if an
    assistant's."""
    n = len(msgs)
    return nxt[n]["content"] if len(nxt) > n and nxt[n]["role"] == "assistant" else ""


def nothing_earlier(turn: int, count: int) -> None:
    """Refuse a lookup with no earlier turn to replay: a cache with nothing in it decides nothing."""
    if turn < 2:
        hint = "the session has one turn: add a turn after it" if count < 2 else f"select a turn from 2 to {count}"
        raise WorkbenchError(f"turn {turn} has no earlier turns: there is nothing to look it up against", hint=hint)


def replay(cache: "SemanticCache", asm: "Assembler", requests: list[dict[str, Any]], turn: int) -> "Decision":
    """From scratch: store turns 1..turn-1 (context up to the turn's user message, payload: the reply
    that followed) and look turn `turn` up. The reference `SessionReplay` must equal."""
    nothing_earlier(turn, len(requests))
    versions = versions_of(asm, messages_of(asm, requests[turn - 1])[1])
    cache.invalidate_session(SESSION)
    for k in range(1, turn):
        msgs = messages_of(asm, requests[k - 1])[0]
        nxt = messages_of(asm, requests[k])[0] if k < len(requests) else []
        if msgs and msgs[-1]["role"] == "user":
            cache.observe(SESSION, msgs[-1])
            cache.put(SESSION, msgs, {"type": "answer", "text": _reply(msgs, nxt)[:REPLY_CHARS]}, versions)
    msgs = messages_of(asm, requests[turn - 1])[0]
    if not msgs or msgs[-1]["role"] != "user":
        raise WorkbenchError(f"turn {turn} does not end with a user message: nothing to look up")
    return cache.lookup(SESSION, msgs, versions, k=NEIGHBOURS)


@dataclass(frozen=True)
class TurnContext:
    """One turn as the replay uses it, made at document generation `generation`."""
    generation: int
    assembler: "Assembler"
    had_next: bool               # a turn followed it (its reply is the payload)
    context: Context | None      # trimmed; None when the turn does not end with a user message
    reply: str
    system: str                  # the system prompt's text

    def texts(self) -> list[str]:
        """What storing or looking up this turn embeds."""
        if self.context is None:
            return []
        window = self.context.window_text()
        return [self.context.current, *([window] if window else [])]


@dataclass(frozen=True)
class CachedTurn:
    """A neighbour as the tab shows and labels it: the earlier turn whose context it stores."""
    turn: int
    messages: tuple[dict[str, Any], ...]     # its context as compared: its window and its user message
    fingerprint: "Fingerprint"


@dataclass(frozen=True)
class LookupPairs:
    """One lookup's pairs: turn `turn` (its context `messages`) against each neighbour, by entry id;
    made at document generation `generation`, for `decision`."""
    generation: int
    turn: int
    messages: tuple[dict[str, Any], ...]
    decision: "Decision"
    neighbours: dict[int, CachedTurn]


class SessionReplay:
    """`replay`, with each turn's context and every vector kept between lookups (module docstring).
    `cache` is the Semantic tab's cache; its embedder should be a `MemoEmbedder`. One lookup at a
    time (the host's worker)."""

    def __init__(self, cache: "SemanticCache"):
        self.cache = cache
        self._turns: list[TurnContext | None] = []
        self.made = 0                # turns made (prepared) by the last lookup; the rest were kept
        self.last: LookupPairs | None = None     # the last lookup's pairs (the tab's labels read them)

    def lookup(self, asm: "Assembler", turn: int, request_of: Callable[[int], dict[str, Any]],
               stamps: Sequence[int], generation: int) -> "Decision":
        """Look turn `turn` up against the turns before it. `request_of(k)` is turn k's request;
        `stamps[k-1]` the generation turn k was last edited at (WorkbenchState's), `generation` the
        document's now."""
        nothing_earlier(turn, len(stamps))
        turns = self._bring_up_to_date(asm, turn, request_of, stamps, generation)
        here = turns[turn - 1]
        if here.context is None:
            raise WorkbenchError(f"turn {turn} does not end with a user message: nothing to look up")
        # One embedder call for every text not embedded yet (a first lookup: the whole session).
        self.cache.embedder.embed([t for rec in turns for t in rec.texts()])
        cache, versions = self.cache, versions_of(asm, here.system)
        cache.clear()           # the rows in a fresh cache's order: equal similarities rank as in `replay`
        stored: dict[int, CachedTurn] = {}
        for k, rec in enumerate(turns[: turn - 1], 1):
            if rec.context is not None:
                cache.observe(SESSION, rec.context.messages[-1])
                e = cache.put_context(SESSION, rec.context, {"type": "answer", "text": rec.reply[:REPLY_CHARS]},
                                      versions)
                if e is not None:
                    stored[e.id] = CachedTurn(k, rec.context.messages, e.fingerprint)
        decision = cache.lookup_context(SESSION, here.context, versions, k=NEIGHBOURS)
        self.last = LookupPairs(generation, turn, here.context.messages, decision,
                                {n.entry_id: stored[n.entry_id] for n in decision.nearest if n.entry_id in stored})
        return decision

    def _valid(self, k: int, rec: TurnContext | None, asm: "Assembler", stamps: Sequence[int]) -> bool:
        """Turn k's kept context stands: same assembler, neither turn k nor k+1 (its reply) edited
        since it was made, and a next turn then as now."""
        if rec is None or rec.assembler is not asm or k > len(stamps) or stamps[k - 1] > rec.generation:
            return False
        has_next = k < len(stamps)
        return rec.had_next == has_next and (not has_next or stamps[k] <= rec.generation)

    def _bring_up_to_date(self, asm: "Assembler", turn: int, request_of: Callable[[int], dict[str, Any]],
                          stamps: Sequence[int], generation: int) -> list[TurnContext]:
        """Turns 1..turn, those that do not stand made again (each request prepared once)."""
        count = len(stamps)
        kept = (self._turns + [None] * count)[:count]
        made: dict[int, tuple[list[dict[str, Any]], str]] = {}

        def msgs(k: int) -> tuple[list[dict[str, Any]], str]:
            if k not in made:
                made[k] = messages_of(asm, request_of(k))
            return made[k]

        self.made = 0
        for k in range(1, turn + 1):
            if not self._valid(k, kept[k - 1], asm, stamps):
                here, system = msgs(k)
                nxt = msgs(k + 1)[0] if k < count else []
                ctx = Context(tuple(here), self.cache.window).trimmed() if here and here[-1]["role"] == "user" \
                    else None
                kept[k - 1] = TurnContext(generation, asm, k < count, ctx, _reply(here, nxt), system)
                self.made += 1
            made.pop(k, None)            # a long session: never more than two turns' messages held
        self._turns = kept
        return [rec for rec in kept[:turn] if rec is not None]


def lookup_turn(cache: "SemanticCache", asm: "Assembler", request_of: Callable[[int], dict[str, Any]], count: int,
                turn: int) -> tuple["Decision", LookupPairs]:
    """Turn `turn` of a `count`-turn session looked up as the Semantic tab looks it up, from scratch:
    the decision and its pairs. `cache`'s embedder should be a `MemoEmbedder` (SessionReplay)."""
    replay = SessionReplay(cache)
    decision = replay.lookup(asm, turn, request_of, [0] * count, 0)
    assert replay.last is not None          # set by every lookup that returns
    return decision, replay.last
