"""Assembly under a budget: the prompt that fits, what was dropped, and what it cost to find.

The keep rules and the search live in workbench/truncation.py; this module runs them with the
assembly stages: an exact assembly of a window of recent turns, splices of it, and the cut of the
newest dropped message when the policy allows one. It also returns the calibrated tokens-per-
estimate ratio, which the Assembler keeps for the next request (a value passed in and returned,
never a hidden write).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from ..budget import Window
from ..conversation import Conversation, Message
from ..diagnostics import Diagnostic, warning
from ..errors import BudgetError
from ..truncation import (
    Chunk,
    Dropped,
    DroppedList,
    Plan,
    Search,
    TruncationPolicy,
    chunk_after,
    chunk_spacing,
    dropped_records,
    estimate_message,
    estimate_text,
    fit,
    mandatory_error,
    newest_first,
    plan,
    tail_text,
    truncation_note,
    unit_estimate,
)
from .build import exact, splice
from .built import Built
from .context import BuildContext
from .kept import KeptWindow

# The sequence number of a summary slot: before every message of the request.
SLOT_SEQ = -1


@dataclass(frozen=True)
class Fitted:
    built: Built
    dropped: Sequence[Dropped]
    made: tuple[Built, ...]               # every exact assembly or splice the search took
    counts: dict[str, int]                # exact_assemblies, splices
    estimated: int | None                 # the fast estimate, when one was made
    ratio: float                          # tokens per estimated token, after this request
    notes: tuple[Diagnostic, ...] = ()
    window: KeptWindow | None = None      # what the next request of a session starts from


@dataclass
class _Job:
    """One truncation: what every step reads."""

    ctx: BuildContext
    conv: Conversation
    add_generation_prompt: bool
    budget: int
    policy: TruncationPolicy
    ratio: float
    made: list[Built] = field(default_factory=list)

    @property
    def msgs(self) -> tuple[Message, ...]:
        return self.conv.messages

    def build(self, p: Plan, k: int, slot: Message | None = None) -> Built:
        # Rewrite diagnostics wait for the final prompt: windows only need their counts.
        kept = p.kept(self.msgs, k)
        if slot is not None:
            # The slot takes the dropped units' place: before the first unit kept, or, when every unit
            # is dropped, right after the last of them (not after the last user message, which is kept).
            end = p.units[k][0] if k < len(p.units) else p.units[-1][-1] + 1 if p.units else len(self.msgs)
            n_head = sum(1 for i in p.mandatory if i < end)
            kept = (*kept[:n_head], slot, *kept[n_head:])
        b = exact(self.ctx, self.conv.with_messages(kept), self.add_generation_prompt, inspect=slot is not None)
        self.made.append(b)
        return b

    def splice(self, p: Plan, base: Built, base_k: int, k: int) -> Built | None:
        b = splice(self.ctx, base, self.conv.with_messages(p.kept(self.msgs, k)), self.add_generation_prompt)
        if b is not None:
            self.made.append(b)
        return b


def fitted(ctx: BuildContext, conv: Conversation, add_generation_prompt: bool, win: Window,
           policy: TruncationPolicy, ratio: float) -> Fitted:
    """The prompt of `conv` that fits the window's input budget, dropping whole units oldest first
    (to the next chunk boundary unless the policy slides; a summary slot in their place if it says so)."""
    job = _Job(ctx, conv, add_generation_prompt, policy.history_budget(win.input_budget), policy, ratio)
    msgs, budget = job.msgs, job.budget
    p = plan(msgs, policy)
    fixed = sum(estimate_message(msgs[i]) for i in p.mandatory) + sum(estimate_text(x) for x in conv.tools)
    ests = [0.0] * len(p.units)

    def unit(u: int) -> float:
        ests[u] = sum(estimate_message(msgs[i]) for i in p.units[u]) * ratio
        return ests[u]

    # Fast estimate, newest first, stopping as soon as it is clearly over: O(kept), not O(history).
    acc, _ = newest_first(unit, len(p.units), fixed * ratio, budget)
    search = Search(estimated=int(acc))
    first = None
    if acc <= budget * 0.9 or not p.units:
        # The fast estimate says it fits: the exact count confirms (or truncation starts from it).
        first = (exact(ctx, conv, add_generation_prompt), 0)
        job.made.append(first[0])
        search.builds += 1
        if first[0].used <= budget or not p.units:
            if first[0].used > budget:
                raise mandatory_error(first[0], budget)
            return Fitted(first[0], (), tuple(job.made), _counts(search), int(acc), ratio)
    built, k = fit(msgs, p, budget, fixed_estimate=fixed, ratio=ratio, build=partial(job.build, p),
                   splice=partial(job.splice, p), first=first, search=search, estimates=ests)
    ratio = calibrated(built, p, k, msgs, ratio)
    window = None
    if k and policy.cut:
        job.ratio = ratio
        built, k = _cut(job, p, k, built)
    elif k:
        built, k, window = _settled(job, p, k, built, search, win.input_budget)
    dropped = DroppedList(partial(dropped_records, msgs, p, k), sum(len(u) for u in p.units[:k]))
    notes: tuple[Diagnostic, ...] = ()
    if dropped:
        notes = (warning("truncated", truncation_note(policy, len(dropped), win.input_budget, win.context_window,
                                                      win.reserve)),)
    return Fitted(built, dropped, tuple(job.made), _counts(search), int(acc), ratio, notes, window)


def _settled(job: _Job, p: Plan, k: int, built: Built, search: Search, input_budget: int
             ) -> tuple[Built, int, KeptWindow | None]:
    """The minimal fit `built` (k units dropped) moved to where the policy ends a drop, with what the
    next request of a session needs to start from it (None when it cannot)."""
    witness = search.witness if built.spliced else None
    chunk, spacing, learned = Chunk(k, 0.0, 0.0), 0.0, 0
    if job.policy.chunked:
        msgs = job.msgs
        spacing, learned = chunk_spacing(msgs, p, job.budget, job.policy.low_water, job.ctx.tokenizer)
        chunk = chunk_after(lambda u: unit_estimate(msgs, p.units[u]), len(p.units), k, spacing)
        if chunk.start > k:
            built, witness = _dropped_to(job, p, built, k, chunk.start, search, witness)
    k = chunk.start
    slot, slot_tokens = None, 0
    if job.policy.strategy == "summary-slot":
        slot = _slot(job.policy, sum(len(u) for u in p.units[:k]))
        bare, built = built, job.build(p, k, slot)
        search.builds += 1
        # What the slot adds: its own tokens, and whatever its presence changes around it (a template
        # that renders a default system prompt when the conversation has none, say). The fit measures
        # the history without it; a refit subtracts this from the slotted prompt to do the same.
        slot_tokens = built.used - bare.used
        if built.used > input_budget:
            # The slot outgrew its reserve: the summary is the user's text, the budget is not.
            raise BudgetError(f"the summary slot needs more than its reserve: the prompt uses {built.used} tokens, "
                              f"{built.used - input_budget} over the input budget of {input_budget}",
                              over_by=built.used - input_budget, parts=built.parts,
                              hint="shorten the summary text or raise summary_reserve")
    if k >= len(p.units) or built.cut_seq is not None:
        return built, k, None
    if learned > k:
        witness = None   # the spacing was learned from kept units, which an edit may change: never reused
    start = p.units[k][0]
    head = tuple(i for i in sorted(p.mandatory) if i < start)
    return built, k, KeptWindow(job.conv, head, start, k, sum(len(u) for u in p.units[:k]), input_budget,
                                witness, spacing, chunk.before, chunk.at, slot, slot_tokens)


def _dropped_to(job: _Job, p: Plan, built: Built, k: int, b: int, search: Search, witness: int | None
                ) -> tuple[Built, int | None]:
    """`built` (k units dropped) with units k..b-1 dropped too, and the witness grown by their tokens."""
    nb = job.splice(p, built, k, b)
    if nb is not None:
        search.splices += 1
    else:
        nb = job.build(p, b)
        search.builds += 1
    if witness is None or not nb.spliced:
        return nb, None
    counts = built.seq_tokens()
    return nb, witness + sum(counts.get(job.msgs[i].sequence, 0) for u in range(k, b) for i in p.units[u])


def _slot(policy: TruncationPolicy, n: int) -> Message:
    # Not str.format: the text is the user's, and a format string can reach attributes.
    return Message(policy.summary_role, policy.summary.replace("{n}", str(n)), SLOT_SEQ)


def _counts(search: Search) -> dict[str, int]:
    return {"exact_assemblies": search.builds, "splices": search.splices}


def calibrated(built: Built, p: Plan, k: int, msgs: Sequence[Message], ratio: float) -> float:
    """This tokenizer's tokens per estimated token, learned from the kept messages (for the next
    window); `ratio` unchanged when there is too little text to measure."""
    counts = built.seq_tokens()
    est = exact_n = 0.0
    for u in p.units[k:]:
        for i in u:
            est += estimate_message(msgs[i])
            exact_n += counts.get(msgs[i].sequence, 0)
    # enough text to measure; recent content predicts the next request best
    return exact_n / est if est > 200 else ratio


def _cut(job: _Job, p: Plan, k: int, built: Built) -> tuple[Built, int]:
    """Keep the newest dropped unit after all, its longest text cut (from the front) to fill the budget."""
    msgs, tokenizer, budget = job.msgs, job.ctx.tokenizer, job.budget
    unit = p.units[k - 1]
    target = max(unit, key=lambda i: len(msgs[i].content or ""))
    m = msgs[target]
    if not m.content or m.tool_calls:
        return built, k
    marker = job.policy.cut_marker
    gone = {j for u in p.units[:k - 1] for j in u}
    ids = tokenizer.encode_ordinary(m.content)
    others = sum(estimate_message(msgs[i]) for i in unit if i != target) * job.ratio
    room = int(budget - built.used - others - 8 - len(tokenizer.encode_ordinary(marker)))
    room = min(room, len(ids) - 1)  # a cut keeps less than the whole (else the unit would have fit)
    for _ in range(6):
        if room <= 0:
            return built, k
        tail = tail_text(tokenizer, ids, room)
        if not tail:
            return built, k
        cut_msg = m.with_(content=marker + tail)
        kept = tuple(cut_msg if i == target else msgs[i] for i in range(len(msgs)) if i not in gone)
        trial = exact(job.ctx, job.conv.with_messages(kept), job.add_generation_prompt)
        job.made.append(trial)
        if trial.used <= budget:
            note = warning("message_cut", f"{m.role} message cut to its last {room} of {len(ids)} tokens (at a "
                           "token boundary, marked) to fill the budget", m.sequence)
            return replace(trial, diags=trial.diags + (note,), cut_seq=m.sequence), k - 1
        room -= trial.used - budget + 1
    return built, k
