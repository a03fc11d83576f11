"""Truncation (SPEC 2.6): drop whole messages, oldest first, until the prompt fits.

Keep rules: system messages and tool schemas are never dropped; the last user
message is never dropped (by default neither is the rest of the current turn, the
tool rounds after it); a tool call and its results go together; by default a unit
is a whole turn (a user message and the replies to it), so templates that insist on
alternating roles still accept what is kept. A message is cut in the middle only
when the policy says so, at a token boundary, with a visible marker.

"Oldest first" makes the kept set a function of one number, k: the count of
droppable units dropped. We keep the smallest k whose exact token count fits, so a
smaller budget never keeps a unit a larger one dropped (monotone by construction).

Finding k without tokenizing the whole history: a fast estimate from character
counts picks a window of recent units slightly larger than the budget; one exact
assembly of that window gives every unit's exact token count; the kept prompt is
then the window with its oldest units spliced out, checked against a plain render
(the splice is used only when the text is identical and every cut sits on a special
token, so the ids are exactly those of a cold assembly). Templates that render a
message differently depending on what precedes it fail that check and get exact
assemblies instead.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple, Protocol, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

from .conversation import Message
from .errors import BudgetError, WorkbenchError
from .tokenizers.base import Tokenizer

Unit = tuple[int, ...]  # indices into the conversation's messages
STRATEGIES = ("sliding", "chunked", "summary-slot")
NO_TRUNCATION = "none"                       # a policy name: an over-budget prompt is kept whole
POLICIES = (*STRATEGIES, NO_TRUNCATION)      # what a user picks (the workbench, a shared link)


class Dropped(NamedTuple):
    """A message truncation dropped. (A named tuple: a long history drops thousands at once.)"""

    seq: int
    reason: str
    code: str = "oldest_first"   # oldest_first | tool_pair | same_unit
    role: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "reason": self.reason, "code": self.code, "role": self.role}


class DroppedList(Sequence[Dropped]):
    """The dropped messages, built on first look (a long history drops thousands; most callers
    only count them). Compares equal to a tuple or list of the same Dropped items."""

    __slots__ = ("_make", "_n", "_items")
    _items: list[Dropped] | None

    def __init__(self, make: Callable[[], list[Dropped]], n: int):
        self._make, self._n, self._items = make, n, None

    def _all(self) -> list[Dropped]:
        if self._items is None:
            self._items = self._make()
        return self._items

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Dropped: ...
    @overload
    def __getitem__(self, i: slice) -> list[Dropped]: ...

    def __getitem__(self, i: int | slice) -> Dropped | list[Dropped]:
        return self._all()[i]

    def __iter__(self) -> Iterator[Dropped]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (tuple, list, DroppedList)) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"DroppedList({self._all()!r})"


@dataclass(frozen=True, slots=True)
class TruncationPolicy:
    enabled: bool = True
    unit: Literal["turn", "message"] = "turn"   # what is dropped at once (tool calls stay with results)
    keep_current_turn: bool = True              # never drop the messages after the last user message
    cut: bool = False                           # may cut the newest dropped message's text to fill the budget
    cut_marker: str = "[… truncated …]\n"        # put before the kept tail of a cut message
    # sliding: drop the fewest units that make the prompt fit (the kept prefix moves every turn once
    # the history overflows). chunked: drop to the next chunk boundary (see `chunk_starts`), so the
    # kept history falls to about `low_water` of the budget and its prefix holds for the next turns.
    # summary-slot: chunked, with the dropped turns replaced by one message (`summary`, `{n}` the
    # count of messages it stands for) after the system messages; `summary_reserve` tokens of the
    # budget are kept for it.
    strategy: Literal["sliding", "chunked", "summary-slot"] = "sliding"
    low_water: float = 0.5
    summary: str = "[{n} earlier messages were left out to fit the context window.]"
    summary_role: Literal["system", "user"] = "system"
    summary_reserve: int = 64

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise WorkbenchError(f"unknown truncation strategy {self.strategy!r}",
                                 hint=f"use one of {', '.join(STRATEGIES)}")
        if not 0.0 < self.low_water < 1.0:
            raise WorkbenchError(f"truncation low_water must be between 0 and 1 (a share of the budget), got "
                                 f"{self.low_water!r}", hint="e.g. 0.5: after a drop, half the budget is history")
        if self.cut and self.chunked:
            raise WorkbenchError(f"truncation cut applies to the sliding strategy only, not {self.strategy!r}",
                                 hint="cut=False, or strategy='sliding'")
        if self.summary_role not in ("system", "user"):
            # The role is rendered into the prompt as the template's own text: never a free string.
            raise WorkbenchError(f"truncation summary_role must be 'system' or 'user', got {self.summary_role!r}")
        if self.summary_reserve < 0:
            raise WorkbenchError(f"truncation summary_reserve must be >= 0 tokens, got {self.summary_reserve!r}")

    def history_budget(self, input_budget: int) -> int:
        """What the kept messages may use: the input budget, less the summary slot's reserve."""
        return input_budget - (self.summary_reserve if self.strategy == "summary-slot" else 0)

    @property
    def chunked(self) -> bool:
        return self.strategy != "sliding"

    @property
    def version(self) -> str:
        return hashlib.sha256(repr(sorted(asdict(self).items())).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Plan:
    units: tuple[Unit, ...]        # droppable, oldest first
    mandatory: frozenset[int]      # never dropped
    last_user: int | None          # index of the last user message
    why: dict[int, str]            # mandatory index -> the rule that keeps it

    def kept(self, messages: Sequence[Message], k: int) -> tuple[Message, ...]:
        """The messages left after dropping the k oldest units."""
        if k <= 0:
            return tuple(messages)
        # Units are ordered and never interleave, so everything from the first kept unit on stays,
        # and before it only the mandatory messages do.
        start = self.units[k][0] if k < len(self.units) else len(messages)
        head = [messages[i] for i in sorted(self.mandatory) if i < start]
        return (*head, *messages[start:])


def plan(messages: Sequence[Message], policy: TruncationPolicy) -> Plan:
    n = len(messages)
    last_user = next((i for i in range(n - 1, -1, -1) if messages[i].role == "user"), None)
    protect_from = last_user if last_user is not None else n - 1
    why: dict[int, str] = {}
    units: list[list[int]] = []   # oldest first
    cur: list[int] | None = None
    per_message = policy.unit == "message"
    tools_seen = False
    for i, m in enumerate(messages):
        role = m.role
        if role == "system":
            why[i] = "system"
            continue
        if i >= protect_from:
            if i == last_user:
                why[i] = "last user message"
            elif last_user is None and i == n - 1:
                why[i] = "last message"
            elif policy.keep_current_turn:
                why[i] = "current turn"
            if i in why:
                continue
        if role == "tool" or m.tool_calls:
            tools_seen = True
        if per_message or cur is None or role == "user":
            cur = [i]
            units.append(cur)
        else:
            cur.append(i)
    if tools_seen:
        return _pair_tools(messages, units, why, last_user)
    return Plan(tuple(map(tuple, units)), frozenset(why), last_user, why)


def _pair_tools(messages: Sequence[Message], units: list[list[int]], why: dict[int, str],
                last_user: int | None) -> Plan:
    """A tool call and its results go together: merge the units they fall in (and those between)."""
    owner = {i: u for u, idxs in enumerate(units) for i in idxs}
    calls = {tc.id: i for i, m in enumerate(messages) for tc in m.tool_calls}
    parent = list(range(len(units)))
    pinned: set[int] = set()

    def find(u: int) -> int:
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    for b, m in enumerate(messages):
        a = calls.get(m.tool_call_id) if m.role == "tool" and m.tool_call_id is not None else None
        if a is None:
            continue
        ua, ub = owner.get(a), owner.get(b)
        if ua is None or ub is None:
            # One side is kept for another reason: its partner is kept with it.
            for ux in (ua, ub):
                if ux is not None:
                    pinned.add(find(ux))
            continue
        lo, hi = sorted((find(ua), find(ub)))
        for u in range(lo, hi + 1):  # everything between goes too, to keep the order
            parent[find(u)] = lo
    groups: dict[int, list[int]] = {}
    for u, idxs in enumerate(units):
        groups.setdefault(find(u), []).extend(idxs)
    pinned = {find(u) for u in pinned}
    final: list[Unit] = []
    for root in sorted(groups):
        if root in pinned:
            for i in groups[root]:
                why.setdefault(i, "tool call kept with its result")
        else:
            final.append(tuple(sorted(groups[root])))
    return Plan(tuple(final), frozenset(why), last_user, why)


def estimate_text(s: str | None) -> float:
    """Tokens, roughly, from characters: ~3.6 ASCII characters per token, ~1 token per CJK character."""
    if not s:
        return 0.0
    if s.isascii():
        return len(s) / 3.6
    return len(s.encode("utf-8")) / 3.0


def estimate_message(m: Message) -> float:
    n = 6.0 + estimate_text(m.content) + estimate_text(m.reasoning)  # 6: role header and end markers
    for tc in m.tool_calls:
        n += 8.0 + estimate_text(tc.name) + estimate_text(tc.arguments)
    return n


def newest_first(cost: Callable[[int], float], n: int, start: float, limit: float) -> tuple[float, int]:
    """Add cost(n-1), cost(n-2), ... to `start`, newest first, stopping as soon as the sum passes
    `limit`: (the sum, the index of the oldest one added; n when none were). A prompt headed for
    truncation costs the estimate of a few recent messages, not of its whole history."""
    acc, i = start, n
    while i > 0:
        i -= 1
        acc += cost(i)
        if acc > limit:
            break
    return acc, i


class Candidate(Protocol):
    """What `fit` needs of an assembly of a window: its size, and each message's exact count."""

    @property
    def used(self) -> int: ...

    def seq_tokens(self) -> dict[int, int]: ...


# The caller's own assembly type: `fit` returns one of those `build` or `splice` made.
C = TypeVar("C", bound=Candidate)


@dataclass
class Search:
    """The state of one fit: every exact assembly it made, for the benchmark and the report."""

    builds: int = 0
    splices: int = 0
    estimated: int = 0
    # The tokens the newest dropped unit adds back, counted in a proven splice: the answer is minimal
    # while the kept prompt plus this stays over the budget (incremental truncation rechecks it).
    witness: int | None = None


def fit(messages: Sequence[Message], p: Plan, budget: int, *, fixed_estimate: float, ratio: float,
        build: Callable[[int], C], splice: Callable[[C, int, int], C | None],
        first: tuple[C, int] | None = None, search: Search | None = None,
        estimates: list[float] | None = None) -> tuple[C, int]:
    """The smallest k (units dropped, oldest first) whose exact assembly fits `budget`.

    `build(k)` assembles the conversation without its k oldest units; `splice(base, base_k, k)`
    derives that from an exact assembly of a larger window, or returns None when it cannot
    prove the result identical. `first` is an exact assembly already made, with its k.
    """
    s = search or Search()
    n = len(p.units)
    est = estimates if estimates is not None else [0.0] * n  # per unit, already times `ratio`; 0 = not yet

    def unit_est(u: int) -> float:
        if not est[u]:
            est[u] = sum(estimate_message(messages[i]) for i in p.units[u]) * ratio
        return est[u]

    def window_start(upper: int, known: float) -> int:
        """Walk back from unit `upper` until the estimate passes the budget by 4%.

        The ratio is calibrated on exact counts (assembly/truncate.calibrated), so a small margin
        usually suffices; when it does not, the window fits whole and is widened once.
        """
        c, acc = upper, known
        while c > 0 and acc <= budget * 1.04:
            c -= 1
            acc += unit_est(c)
        return c

    if first is not None:
        base, base_k = first
    else:
        base_k = window_start(n, fixed_estimate * ratio)
        s.estimated = int(fixed_estimate * ratio + sum(unit_est(u) for u in range(base_k, n)))
        base = build(base_k)
        s.builds += 1
    while True:
        if base.used <= budget:
            if base_k == 0:
                return base, 0
            # The window fit whole: the estimate was high. Widen it using the exact count.
            kept_est = fixed_estimate * ratio + sum(unit_est(u) for u in range(base_k, n))
            scale = base.used / kept_est if kept_est else 1.0
            c, acc = base_k, float(base.used)
            while c > 0 and acc <= budget * 1.05:
                c -= 1
                acc += unit_est(c) * scale
            c = max(c - 1, 0)  # one unit more: a second widening costs a whole assembly
            wider = build(c)
            s.builds += 1
            if wider.used <= budget and c == 0:
                return wider, 0
            if wider.used <= budget:
                base, base_k = wider, c
                continue
            base, base_k = wider, c
        # `base` (window base_k) is over budget: drop its oldest units by their exact counts.
        counts = base.seq_tokens()
        pred, j = base.used, base_k
        while j < n and pred > budget:
            pred -= sum(counts.get(messages[i].sequence, 0) for i in p.units[j])
            j += 1
        if pred > budget and j >= n:
            only = base if base_k == n else build(n)
            if only.used > budget:
                raise mandatory_error(only, budget)
            j = n
        cand = splice(base, base_k, j) if j > base_k else None
        if cand is not None:
            s.splices += 1
        else:
            cand = build(j)
            s.builds += 1
        if cand.used > budget:
            base, base_k = cand, j        # the prediction was short: keep dropping from here
            continue
        if getattr(cand, "spliced", False):
            s.witness = sum(counts.get(messages[i].sequence, 0) for i in p.units[j - 1])
        # Exact minimality when the splice could not be used (the template is context dependent).
        while cand is not None and j - 1 > base_k and not getattr(cand, "spliced", False):
            prev = build(j - 1)
            s.builds += 1
            if prev.used > budget:
                break
            cand, j = prev, j - 1
        return cand, j


def unit_estimate(messages: Sequence[Message], unit: Unit) -> float:
    """A unit's estimated tokens, ratio-free: chunk boundaries depend on the conversation alone."""
    return sum(estimate_message(messages[i]) for i in unit)


class Chunk(NamedTuple):
    """Where a chunked drop ends: unit `start`, with the cumulative estimates (from the oldest unit)
    before the unit ahead of it (`before` = E[start-1]) and before it (`at` = E[start])."""

    start: int
    before: float
    at: float


def next_chunk(est: Callable[[int], float], n: int, k: int, before: float, at: float, spacing: float) -> Chunk:
    """The first chunk start at or after unit k (of n), given E[k-1] and E[k]; k itself when none.

    E[u] is the estimated size of units 0..u-1. Unit u starts a chunk when E[u] is in a later
    multiple of `spacing` than E[u-1]: a property of the units before it alone, so a growing
    conversation keeps its boundaries where they are, and a chunked drop ends at the same unit turn
    after turn (the kept prefix stays identical until the history has grown by a whole chunk).
    """
    u, prev, e = k, before, at
    while u < n:
        if starts_chunk(prev, e, spacing):
            return Chunk(u, prev, e)
        prev, e = e, e + est(u)
        u += 1
    return Chunk(k, before, at)


def starts_chunk(before: float, at: float, spacing: float) -> bool:
    """A unit whose start is at estimate `at`, the unit before it at `before`, starts a chunk."""
    return math.floor(at / spacing) > math.floor(before / spacing)


def chunk_after(est: Callable[[int], float], n: int, k: int, spacing: float, start: int = 0,
                at: float = 0.0) -> Chunk:
    """`next_chunk` for k >= 1, walking E from unit `start` (E[start] = `at`, start <= k-1)."""
    u, e = start, at
    while u < k - 1:
        e += est(u)
        u += 1
    return next_chunk(est, n, k, e, e + est(k - 1), spacing)


# The most of the conversation's oldest history that calibrates the chunk spacing (estimated tokens).
CALIBRATION = 4096.0


def chunk_spacing(messages: Sequence[Message], p: Plan, budget: int, low_water: float,
                  tokenizer: Tokenizer) -> tuple[float, int]:
    """The chunk spacing, in estimate units, for chunks of (1 − low_water) × budget tokens, and how
    many of the oldest units it was learned from.

    Estimates count characters; code, logs and JSON hold more tokens per character than prose, and
    chunks measured in estimates alone would drop far below the low-water mark there. The oldest
    units (up to a chunk's worth, at most CALIBRATION estimated tokens) are tokenized once to learn
    the conversation's tokens per estimate. A growing conversation never changes them, so the
    spacing, like the boundaries, is a function of the conversation alone (a session reuses it only
    while those units are among the dropped ones: workbench/assembly/refit.py).
    """
    chunk = (1.0 - low_water) * budget
    est = tokens = 0.0
    used = 0
    for unit in p.units:
        if est >= min(CALIBRATION, chunk):
            break
        used += 1
        for i in unit:
            m = messages[i]
            est += estimate_message(m) - 6.0
            tokens += sum(len(tokenizer.encode_ordinary(t)) for t in _texts(m))
    ratio = min(max(tokens / est, 0.25), 4.0) if est > 100 else 1.0
    return chunk / ratio, used


def _texts(m: Message) -> list[str]:
    out = [t for t in (m.content, m.reasoning) if t]
    for tc in m.tool_calls:
        out += [tc.name, tc.arguments]
    return out


def truncation_note(policy: TruncationPolicy, dropped: int, budget: int, window: int, reserve: int) -> str:
    how = {"sliding": "oldest first", "chunked": "oldest first, down to the low-water mark",
           "summary-slot": "oldest first, down to the low-water mark, a summary slot in their place"}[policy.strategy]
    return (f"dropped {dropped} message(s), {how}, to fit the input budget of {budget} tokens (window {window} − "
            f"reserve {reserve})")


def mandatory_error(only: Candidate, budget: int) -> BudgetError:
    parts = getattr(only, "parts", {}) or {}
    over = only.used - budget
    listed = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in parts.items() if v)
    return BudgetError(f"the parts that are never dropped need {only.used} tokens, {over} over the input budget "
                       f"of {budget} ({listed})", over_by=over, parts=parts,
                       hint="raise the context window, lower the reserve (max_tokens), or shorten the system "
                       "prompt, the tool schemas or the last user message")


def dropped_records(msgs: tuple[Message, ...], p: Plan, k: int) -> list[Dropped]:
    out = []
    oldest = "oldest first, to fit the input budget"
    for u in p.units[:k]:
        head = msgs[u[0]]
        out.append(Dropped(head.sequence, oldest, "oldest_first", head.role))
        if len(u) > 1:
            turn = f"dropped with its turn (seq {head.sequence})"
            call = f"dropped with the tool call it answers (turn of seq {head.sequence})"
            for i in u[1:]:
                m = msgs[i]
                if m.role == "tool":
                    out.append(Dropped(m.sequence, call, "tool_pair", "tool"))
                else:
                    out.append(Dropped(m.sequence, turn, "same_unit", m.role))
    return out


def tail_text(tokenizer: Tokenizer, ids: NDArray[np.uint32], n: int) -> str:
    """The text of the last n tokens, starting at a whole character (a token boundary)."""
    start = max(len(ids) - n, 0)
    while start < len(ids):
        raw = b"".join(tokenizer.token_bytes(int(t)) for t in ids[start:])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            start += 1
    return ""
