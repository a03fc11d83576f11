"""Compare: the selected turn assembled two ways, side by side (no UI library here).

A side is a session document (the one being edited, the file as saved, or a snapshot pinned
earlier), a template (or a custom Jinja source) and a tokenizer. `compare(a, b)` assembles the
selected turn on each and returns a `Comparison`: each side's ids (np.uint32) and segments, a
token-level diff of the two id sequences (runs: equal, changed, only-left, only-right), the
segments of both matched by kind, role and message (a count table with deltas), and, when asked,
each side's cache figures: every turn of its session assembled through one assembler session and
fed to the provider simulations, as the cache panel does.

A side that fails (a template that does not render, a turn its version lacks) carries its error;
the other side is still assembled and shown. `CompareRunner` runs a comparison off the UI thread
for a host, only while its tab is open, cancelled (workbench.errors.Cancelled) when superseded.
"""

from __future__ import annotations

import copy
import difflib
import json
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..analysis.providers import PROVIDERS, Simulation, simulate
from ..analysis.turn_prompts import turn_prompts
from ..assembly import Assembler
from ..assembly.result import AssemblyResult
from ..difference import first_difference
from ..errors import Cancelled, WorkbenchError
from ..segments import Segment
from ..templates import RenderLimits, from_source, get_template
from ..templates.arguments import canonical
from .budget_view import truncation_policy
from .document import SessionDocument
from .state import AUTO, WorkbenchState

KINDS = ("template", "tokenizer", "version")   # what side B differs in
SAVED, PINNED = "saved file", "pinned snapshot"
EQUAL, CHANGED, ONLY = 0, 1, 2                  # a token's mark in its side's `marks`
MAX_DIFF = 200_000     # tokens of differing middle beyond which the diff is one changed run (quadratic guard)


@dataclass(frozen=True)
class Side:
    """What one side assembles: `doc`'s turn `turn`, with a template (or `custom` Jinja) and a tokenizer."""
    label: str
    doc: SessionDocument
    template: str
    tokenizer: str = AUTO
    custom: str = ""
    version: str = "edited"          # which version of the session `doc` is (for the labels)
    doc_key: Any = None              # equal keys: the same document contents (reuse of cache figures)
    model: str | None = None         # the live state's catalog model (its window and image rule), both sides
    args: str = ""                   # the live state's template arguments, canonical JSON ("" none), both sides
    policy: str = ""                 # the live state's truncation policy ("" the default), both sides


@dataclass(frozen=True)
class SideResult:
    side: Side
    turn: int = 0
    result: AssemblyResult | None = None
    ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint32))
    segments: tuple[Segment, ...] = ()
    specials: frozenset[int] = frozenset()
    labels: tuple[str, ...] = ()     # a display string per token (bytes of a split character as <0xF0>)
    marks: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))   # EQUAL / CHANGED / ONLY per token
    simulations: tuple[Simulation, ...] = ()
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.result is not None


@dataclass(frozen=True)
class Run:
    """One aligned run of the diff: tokens left[0]:left[1] of A against right[0]:right[1] of B."""
    op: str                  # equal | changed | only-left | only-right
    left: tuple[int, int]
    right: tuple[int, int]


@dataclass(frozen=True)
class SegmentRow:
    """A segment of A and its match in B (kind, role and message), with their token counts."""
    label: str
    left: int | None         # index into A's segments (None: only in B)
    right: int | None
    left_tokens: int
    right_tokens: int
    left_changed: int        # tokens of it not equal to the other side's
    right_changed: int

    @property
    def delta(self) -> int:
        return self.right_tokens - self.left_tokens


@dataclass(frozen=True)
class Comparison:
    a: SideResult
    b: SideResult
    runs: tuple[Run, ...] = ()
    rows: tuple[SegmentRow, ...] = ()
    cache: bool = False                  # the cache figures are in (both sides' simulations)

    @property
    def identical(self) -> bool:
        return self.a.ok and self.b.ok and all(r.op == "equal" for r in self.runs)

    @property
    def delta(self) -> int:
        return len(self.b.ids) - len(self.a.ids)

    def summary(self) -> dict[str, Any]:
        ops: dict[str, int] = {}
        for r in self.runs:
            ops[r.op] = ops.get(r.op, 0) + max(r.left[1] - r.left[0], r.right[1] - r.right[0])
        return {"a": _side_json(self.a), "b": _side_json(self.b), "delta": self.delta, "identical": self.identical,
                "runs": ops, "segments": [{"segment": r.label, "a": r.left_tokens, "b": r.right_tokens,
                                           "delta": r.delta} for r in self.rows]}


def _side_json(s: SideResult) -> dict[str, Any]:
    return {"label": s.side.label, "turn": s.turn, "tokens": len(s.ids), "error": s.error,
            "template": s.result.template["name"] if s.result else None,
            "tokenizer": s.result.tokenizer["name"] if s.result else None,
            "providers": {m.provider: {"hit_ratio": round(m.hit_ratio, 4), "cost": round(m.total_cost, 6),
                                       "cached_tokens": m.turns[s.turn - 1].cached_tokens
                                       if 0 < s.turn <= len(m.turns) else 0}
                          for m in s.simulations}}


# ------------------------------------------------------------------------------------------ sides
def assembler_for(side: Side, context_window: int | None = None) -> Assembler:
    """The side's assembler, as the live state builds it: a custom source is unreviewed text, so it
    renders in a worker process, and counts with the chosen tokenizer or the named template's."""
    tok = None if side.tokenizer == AUTO else side.tokenizer
    # The model: its window (unless the file has one) and image rule.
    model: dict[str, Any] = {"model": side.model} if side.model else {}
    if side.args:
        model["template_kwargs"] = json.loads(side.args)
    if side.policy:                  # as the live view truncates (the summary line and the Cache tab's figures)
        model["truncation"] = truncation_policy(side.policy)
    if side.custom.strip():
        return Assembler(template=from_source(side.custom, "custom"),
                         tokenizer=tok or get_template(side.template).tokenizer, context_window=context_window,
                         render_limits=RenderLimits(isolate=True), **model)
    return Assembler(template=side.template, tokenizer=tok, context_window=context_window, **model)


def side_turn(doc: SessionDocument, turn: int, live: SessionDocument) -> int:
    """The turn a side shows: the live one's number; the last turn of its own version when the live
    one is the last (a message added at the end makes the edited session one turn longer)."""
    return doc.turn_count if turn >= live.turn_count else turn


def pin(doc: SessionDocument) -> SessionDocument:
    """A snapshot of the document now, for comparing with later edits (edits never reach it)."""
    snap = SessionDocument(copy.deepcopy(doc.snapshot()), doc.path, doc.name)
    return snap


def labels_of(tokenizer: Any, ids: np.ndarray) -> tuple[str, ...]:
    """A display string per token: its text, and `<0xNN>` for each byte that is not part of a whole
    character in it (an emoji split across two tokens), as the token view shows them."""
    return tuple(tokenizer.token_strings(ids.tolist()))


def assemble_side(side: Side, turn: int, asm: Assembler | None = None) -> SideResult:
    """The side's turn assembled; a WorkbenchError (or any failure of its template) becomes its error."""
    try:
        if not 1 <= turn <= side.doc.turn_count:
            raise WorkbenchError(f"turn {turn} does not exist in the {side.version} version "
                                 f"({side.doc.turn_count} turns)")
        asm = asm if asm is not None else assembler_for(side, _window(side.doc))
        result = asm.assemble(side.doc.request(turn))
    except WorkbenchError as exc:
        return SideResult(side, turn, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - one side failing never takes the comparison down
        return SideResult(side, turn, error=f"unexpected {type(exc).__name__}: {exc}")
    ids = np.asarray(result.token_ids, dtype=np.uint32)
    tok = asm.tokenizer
    return SideResult(side, turn, result, ids, tuple(result.segments), frozenset(int(v) for v in tok.specials.values()),
                      labels_of(tok, ids), np.zeros(len(ids), np.uint8))


def _window(doc: SessionDocument) -> int | None:
    cw = doc.data.get("context_window")
    return cw if isinstance(cw, int) and cw > 0 else None


# ------------------------------------------------------------------------------------------- diff
def diff_ids(left: np.ndarray, right: np.ndarray) -> tuple[Run, ...]:
    """Aligned runs covering both sequences in order. The common head and tail are found with numpy
    first; difflib's SequenceMatcher aligns the middle (a long prompt differs in a few places)."""
    n, m = len(left), len(right)
    head = first_difference(left, right)
    head = min(n, m) if head is None else head
    tail = 0
    limit = min(n, m) - head
    if limit > 0:
        rl, rr = left[head:][::-1], right[head:][::-1]
        t = first_difference(rl[:limit], rr[:limit])
        tail = limit if t is None else t
    runs: list[Run] = [Run("equal", (0, head), (0, head))] if head else []
    mid_l, mid_r = left[head:n - tail], right[head:m - tail]
    if len(mid_l) + len(mid_r) > MAX_DIFF:
        runs.append(_run(head, head + len(mid_l), head, head + len(mid_r)))
    elif len(mid_l) or len(mid_r):
        sm = difflib.SequenceMatcher(None, mid_l.tolist(), mid_r.tolist(), autojunk=True)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                runs.append(Run("equal", (head + i1, head + i2), (head + j1, head + j2)))
            else:
                runs.append(_run(head + i1, head + i2, head + j1, head + j2))
    if tail:
        runs.append(Run("equal", (n - tail, n), (m - tail, m)))
    return tuple(runs)


def _run(i1: int, i2: int, j1: int, j2: int) -> Run:
    op = "changed" if i2 > i1 and j2 > j1 else "only-left" if i2 > i1 else "only-right"
    return Run(op, (i1, i2), (j1, j2))


def marks_of(runs: Sequence[Run], n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Each side's per-token mark: EQUAL, CHANGED (replaced by other tokens), ONLY (no counterpart)."""
    left, right = np.zeros(n, np.uint8), np.zeros(m, np.uint8)
    for r in runs:
        if r.op == "equal":
            continue
        mark = CHANGED if r.op == "changed" else ONLY
        left[r.left[0]:r.left[1]] = mark
        right[r.right[0]:r.right[1]] = mark
    return left, right


def segment_label(s: Segment) -> str:
    if s.kind == "message":
        return f"{s.role or 'message'} #{s.seq}"
    return s.kind if s.role is None or s.kind == s.role else f"{s.kind} ({s.role})"


def match_segments(a: SideResult, b: SideResult) -> tuple[SegmentRow, ...]:
    """Rows of the count table: segments paired by (kind, role, message), in prompt order."""
    def key(s: Segment) -> tuple[Any, ...]:
        return (s.kind, s.role, s.seq)

    ka, kb = [key(s) for s in a.segments], [key(s) for s in b.segments]
    rows: list[SegmentRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [_row(a, b, i, j) for i, j in zip(range(i1, i2), range(j1, j2))]
        else:
            rows += [_row(a, b, i, None) for i in range(i1, i2)]
            rows += [_row(a, b, None, j) for j in range(j1, j2)]
    return tuple(rows)


def _row(a: SideResult, b: SideResult, i: int | None, j: int | None) -> SegmentRow:
    sa = a.segments[i] if i is not None else None
    sb = b.segments[j] if j is not None else None
    label = segment_label(sa if sa is not None else sb)  # type: ignore[arg-type]
    return SegmentRow(label, i, j, sa.token_count if sa else 0, sb.token_count if sb else 0,
                      int(np.count_nonzero(a.marks[sa.start:sa.end])) if sa else 0,
                      int(np.count_nonzero(b.marks[sb.start:sb.end])) if sb else 0)


def compare(a: Side | SideResult, b: Side | SideResult, turn: int = 0) -> Comparison:
    """The two sides' turn assembled (or as given), diffed token by token, segments matched."""
    sa = a if isinstance(a, SideResult) else assemble_side(a, turn)
    sb = b if isinstance(b, SideResult) else assemble_side(b, turn)
    if not (sa.ok and sb.ok):
        return Comparison(sa, sb)
    runs = diff_ids(sa.ids, sb.ids)
    ma, mb = marks_of(runs, len(sa.ids), len(sb.ids))
    sa, sb = replace(sa, marks=ma), replace(sb, marks=mb)
    return Comparison(sa, sb, runs, match_segments(sa, sb))


# ---------------------------------------------------------------------------------- cache figures
@dataclass
class _Turns:
    """One side's every turn, kept for the next run: the requests and results of its last run."""
    asm: Assembler
    requests: list[dict[str, Any]] = field(default_factory=list)
    results: list[AssemblyResult] = field(default_factory=list)
    simulations: tuple[Simulation, ...] = ()


class CacheFigures:
    """Each side's provider simulations over every turn of its session. Turns whose request is the
    same as last time keep their result (an edit re-assembles from the first turn it touched)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str, str, int | None, str, str | None, str, str], _Turns] = {}

    def simulations(self, side: Side, check: Callable[[], None] | None = None,
                    progress: Callable[[str, int, int], None] | None = None,
                    providers: tuple[str, ...] = PROVIDERS) -> tuple[Simulation, ...]:
        key = (side.template, side.tokenizer, side.custom, _window(side.doc), side.version, side.model, side.args,
               side.policy)
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = _Turns(assembler_for(side, key[3]))
            if len(self._held) > 6:     # the live settings and a few others: drop the oldest
                self._held.pop(next(iter(self._held)))
        requests = side.doc.requests()
        same = 0
        while same < min(len(requests), len(held.requests)) and requests[same] == held.requests[same]:
            same += 1
        if same == len(requests) == len(held.requests) and held.simulations:
            return held.simulations
        results = held.results[:same]
        sess = held.asm.session()
        if results:
            sess.assemble(requests[same - 1])     # primes the session: the next turn extends it
        for k in range(same, len(requests)):
            if check is not None:
                check()
            if progress is not None:
                progress(f"{side.label}: assembling every turn", k, len(requests))
            results.append(sess.assemble(requests[k]))
        prompts = turn_prompts(results, "auto", held.asm)
        sims = tuple(simulate(prompts, p) for p in providers)
        held.requests, held.results, held.simulations = requests, results, sims
        return sims

    def of_both(self, c: Comparison, check: Callable[[], None] | None = None,
                progress: Callable[[str, int, int], None] | None = None,
                live: WorkbenchState | None = None) -> Comparison:
        """The comparison with both sides' cache figures (a failed side has none). A side that is
        `live`'s own document and settings takes the cache panel's figures: its turns are shared."""
        a, b = c.a, c.b
        if a.ok:
            a = replace(a, simulations=self._of(a.side, check, progress, live))
        if b.ok:
            b = replace(b, simulations=self._of(b.side, check, progress, live))
        return replace(c, a=a, b=b, cache=True)

    def _of(self, side: Side, check: Callable[[], None] | None, progress: Callable[[str, int, int], None] | None,
            live: WorkbenchState | None) -> tuple[Simulation, ...]:
        if live is not None and side.doc is live.doc and side.doc_key == ("live", live.generation) and \
                (side.template, side.tokenizer, side.custom) == (live.template, live.tokenizer, live.custom_source):
            return live.panels(frozenset({"cache"}), check=check, progress=progress).simulations
        return self.simulations(side, check, progress)


# --------------------------------------------------------------------------------- the choices
@dataclass
class Choice:
    """What the Compare tab shows: B differs from the live state in `kind`, taking `value`."""
    kind: str = "template"
    value: str = ""
    pinned: SessionDocument | None = None
    pinned_at: float = 0.0
    pinned_source: str = ""          # the session it was pinned from (WorkbenchState.source)
    _saved: tuple[tuple[str, int, int], SessionDocument] | None = None

    def saved(self, path: str) -> SessionDocument:
        """The file as saved, read again only when it changed on disk (each run would otherwise
        parse the whole file on the UI thread)."""
        import os
        try:
            st = os.stat(path)
        except OSError as exc:
            raise WorkbenchError(f"the saved file cannot be read: {exc.strerror or exc}",
                                 hint="save the session again") from None
        key = (path, st.st_mtime_ns, st.st_size)
        if self._saved is None or self._saved[0] != key:
            self._saved = (key, SessionDocument.load(path))
        return self._saved[1]

    def pinned_for(self, state: WorkbenchState) -> SessionDocument | None:
        return self.pinned if self.pinned is not None and self.pinned_source == state.source else None


def values_for(kind: str, state: WorkbenchState, choice: Choice) -> list[str]:
    from ..templates import shipped_names
    from ..tokenizers import names as tokenizer_names
    if kind == "template":
        return shipped_names()
    if kind == "tokenizer":
        return [AUTO, *tokenizer_names()]
    return ([SAVED] if state.doc.path else []) + ([PINNED] if choice.pinned_for(state) is not None else [])


def default_value(kind: str, state: WorkbenchState, choice: Choice) -> str:
    """Something that differs from the live state: the next template, another tokenizer, the saved file."""
    options = values_for(kind, state, choice)
    current = {"template": state.template, "tokenizer": state.tokenizer}.get(kind)
    if current in options:      # the next one after the live choice: neighbours differ least (qwen2.5, qwen3)
        k = options.index(current)
        options = options[k + 1:] + options[:k]
    other = [v for v in options if v != current and v != AUTO]
    return other[0] if other else (options[0] if options else "")


def sides(state: WorkbenchState, choice: Choice) -> tuple[Side, Side]:
    """Side A: the live state (the edited document, its template and tokenizer). Side B: the same
    with `choice` applied. Raises WorkbenchError for a version that does not exist."""
    doc = state.doc
    model = state.model.id if state.model is not None else None
    args = canonical(state.template_args) if state.template_args else ""
    a = Side(f"A: {_settings(state.template, state.tokenizer, state.custom_source)} · edited", doc, state.template,
             state.tokenizer, state.custom_source, "edited", ("live", state.generation), model, args, state.policy)
    if choice.kind == "template":
        return a, Side(f"B: {_settings(choice.value, state.tokenizer, '')} · edited", doc, choice.value,
                       state.tokenizer, "", "edited", a.doc_key, model, args, state.policy)
    if choice.kind == "tokenizer":
        return a, Side(f"B: {_settings(state.template, choice.value, state.custom_source)} · edited", doc,
                       state.template, choice.value, state.custom_source, "edited", a.doc_key, model, args,
                       state.policy)
    pinned = choice.pinned_for(state)
    if choice.value == PINNED and pinned is not None:
        other, version = pinned, f"pinned at {time.strftime('%H:%M:%S', time.localtime(choice.pinned_at))}"
    elif choice.value == SAVED and doc.path:
        other, version = choice.saved(doc.path), "saved file"
    else:
        raise WorkbenchError("no other version to compare with",
                             hint="save the session, or pin this version first (Pin)")
    return a, Side(f"B: {_settings(state.template, state.tokenizer, state.custom_source)} · {version}", other,
                   state.template, state.tokenizer, state.custom_source, version, ("doc", id(other)), model, args,
                   state.policy)


def _settings(template: str, tokenizer: str, custom: str) -> str:
    return f"{'custom template' if custom.strip() else template} / {tokenizer}"


# ------------------------------------------------------------------------------------- the runner
class CompareRunner:
    """Runs the Compare tab's comparison on a worker thread while the tab is open: the token diff
    first (one turn per side), then the cache figures (every turn per side). A newer request or the
    tab closing cancels a run at its next turn. `show(comparison, error)` and `progress(text)` are
    called through `call_from_thread`; `call_later(ms, fn)` schedules on the host's UI thread."""

    DELAY_MS = 500

    def __init__(self, state: WorkbenchState, call_later: Callable[[int, Callable[[], None]], None],
                 call_from_thread: Callable[[Callable[[], None]], None],
                 show: Callable[[Comparison | None, str], None], progress: Callable[[str], None], *,
                 background: bool = True, hold: Callable[[], None] | None = None):
        self.state, self.choice = state, Choice()
        self.choice.value = default_value("template", state, self.choice)
        self._later, self._from_thread, self._show, self._progress = call_later, call_from_thread, show, progress
        self.background, self._hold = background, hold
        self.figures = CacheFigures()
        self.open = False
        self.last: Comparison | None = None
        self._ticket = 0
        self._running = False
        self._again = False
        self._progress_at = 0.0

    def set_open(self, is_open: bool) -> None:
        self.open = is_open
        self._ticket += 1          # a run for a closed tab stops at its next turn
        if is_open:
            self.request(0)

    def choose(self, kind: str | None = None, value: str | None = None) -> None:
        if kind is not None and kind != self.choice.kind:
            self.choice.kind = kind
            self.choice.value = default_value(kind, self.state, self.choice)
        if value is not None:
            self.choice.value = value
        self.request(0)

    def pin(self) -> None:
        """Pin the document as it is now: B becomes that snapshot, to compare later edits with."""
        self.choice.pinned, self.choice.pinned_at = pin(self.state.doc), time.time()
        self.choice.pinned_source = self.state.source
        self.choice.kind, self.choice.value = "version", PINNED
        self.request(0)

    def request(self, delay_ms: int = DELAY_MS) -> None:
        """Something changed (an edit, a choice): compare again later, if the tab is open."""
        if not self.open:
            return
        self._ticket += 1
        if not self.background:
            self.run()
            return
        ticket = self._ticket
        self._later(delay_ms, lambda: self._start(ticket))

    def run(self) -> Comparison | None:
        """Here and now (tests, scripted notebooks): the comparison with the cache figures."""
        try:
            a, b = sides(self.state, self.choice)
            c = self._turns(a, b, self.state.turn)
            self._publish(c, "")
            c = self.figures.of_both(c, live=self.state)
            self._publish(c, "")
            return c
        except WorkbenchError as exc:
            self._publish(None, str(exc))
            return None

    @staticmethod
    def _turns(a: Side, b: Side, turn: int) -> Comparison:
        return compare(assemble_side(a, turn), assemble_side(b, side_turn(b.doc, turn, a.doc)))

    def _publish(self, c: Comparison | None, error: str) -> None:
        if c is not None:
            self.last = c
        self._show(c, error)

    def _start(self, ticket: int) -> None:
        if ticket != self._ticket or not self.open:
            return
        if self._running:
            self._again = True
            return
        try:
            # The choices are read here, on the UI thread. The worker reads the live document as the
            # panels' worker does: an edit replaces its lists (copy on write), never half-changes
            # them, and the run it started is superseded by the one the edit requests.
            a, b = sides(self.state, self.choice)
        except WorkbenchError as exc:
            self._publish(None, str(exc))
            return
        turn = self.state.turn
        self._running = True
        threading.Thread(target=lambda: self._work(ticket, a, b, turn), name="workbench-compare",
                         daemon=True).start()

    def _work(self, ticket: int, a: Side, b: Side, turn: int) -> None:
        def check() -> None:
            if self._hold is not None:
                self._hold()
            if ticket != self._ticket or not self.open:
                raise Cancelled("the comparison was superseded")

        error = ""
        try:
            c = self._turns(a, b, turn)
            check()
            self._from_thread(lambda: self._publish(c, ""))
            full = self.figures.of_both(c, check, self._report, self.state)
            check()
            self._from_thread(lambda: self._publish(full, ""))
        except Cancelled:
            pass
        except WorkbenchError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - the tab shows it; the page stays up
            error = f"unexpected {type(exc).__name__}: {exc}"
            traceback.print_exc()
        self._from_thread(lambda: self._done(error))

    def _report(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._progress_at >= 0.25:
            self._progress_at = now
            text = f"{what}: turn {done + 1} of {total}…"
            self._from_thread(lambda: self._progress(text))

    def _done(self, error: str) -> None:
        self._running = False
        self._progress(f"compare failed: {error}" if error else "")
        if error:
            self._show(None, error)
        if self._again:
            self._again = False
            self._start(self._ticket)
