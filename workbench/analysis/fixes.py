"""One-click fixes: named, reversible transformations of a session, with their measured gain.

Each fix addresses causes of the prefix analysis (prefix.py) and turns a session's JSON (as
`sessions.py` loads it) into a new one, never changing its input: the session before the fix is
the undo. Some fixes change how the session is rendered rather than its messages: they return
`Settings` (template arguments, a pinned clock, the projection) that `fixed_assembler` applies.

    sort-tool-keys  tool schema keys sorted, recursively            tool_schema_order
    move-volatile   dates, ids, timestamps of the system prompt     volatile_content
                    moved to the last user message of each request
    keep-reasoning  the template's own switch to keep reasoning      template_rewrite
                    in history (when it has one; else it says so)
    pin-date        the date a template or prompt template reads     volatile_content, template_rewrite
                    pinned to one value for the whole session
    merge-system    the leading system prompts merged into one       system_changed
    split-system    the system prompt split: stable, then volatile   volatile_content, system_changed
    projection      the prefix-stable projection (its own module)    template_rewrite, generation_prompt_mismatch

`measure(asm, session, fixes)` runs the session before and after: tokens reused per turn (prefix
analysis), cached tokens and cost per provider (the simulators), and optionally the local engine's
prefill time (a real forward pass per turn). The core never imports this module.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..assembly import Assembler
from ..assembly.context import BuildContext, clock_formats
from ..errors import FixNotApplicable, ProjectionUnavailable, UnknownFixError, WorkbenchError
from ..sessions import parse_session
from . import fix_edits as E

Session = dict[str, Any]
# Template variables that projects added to keep reasoning in earlier turns, with the value that
# keeps it (Qwen's proposed `enable_history_reasoning`, mlc-llm's `strip_reasoning_in_history`, ...).
REASONING_SWITCHES: tuple[tuple[str, bool], ...] = (
    ("preserve_thinking", True), ("keep_reasoning", True), ("enable_history_reasoning", True),
    ("keep_history_reasoning", True), ("strip_reasoning_in_history", False), ("clear_thinking", False),
    ("strip_thinking", False))
PROBE = "workbench-reasoning-probe"


@dataclass(frozen=True)
class Settings:
    """How the fixed session is rendered, besides its JSON."""
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    pinned_at: str | None = None        # ISO instant strftime_now reads (pin-date)
    projection: bool = False

    def merged(self, other: "Settings") -> "Settings":
        return Settings({**self.template_kwargs, **other.template_kwargs}, other.pinned_at or self.pinned_at,
                        self.projection or other.projection)

    def to_json(self) -> dict[str, Any]:
        return {"template_kwargs": self.template_kwargs, "pinned_at": self.pinned_at, "projection": self.projection}

    @property
    def empty(self) -> bool:
        return not self.template_kwargs and self.pinned_at is None and not self.projection


@dataclass(frozen=True)
class Outcome:
    """One fix applied: the session after it, how to render it, and what it did."""
    fix: str
    session: Session
    original: Session                   # the session before: undoing the fix is keeping this
    changed: bool
    note: str
    settings: Settings = field(default_factory=Settings)
    params: dict[str, Any] = field(default_factory=dict)   # what re-applying it needs (pin-date: the date)

    def to_json(self) -> dict[str, Any]:
        return {"fix": self.fix, "changed": self.changed, "note": self.note, "params": self.params,
                "settings": self.settings.to_json()}


@dataclass(frozen=True)
class Fix:
    name: str
    description: str
    causes: tuple[str, ...]             # the prefix-analysis cause codes it addresses
    apply: Callable[[Session, Assembler, dict[str, Any]], Outcome]
    label: str = ""                     # what a button says: words, "{what}" filled from the cause (fix_label)


# --- the fixes ----------------------------------------------------------------------------------
def _sort_tool_keys(session: Session, asm: Assembler, params: dict[str, Any]) -> Outcome:
    reqs, changed, seen = [], False, False
    for i, req in enumerate(E.requests_of(session)):
        tools = req.get("tools")
        if tools in (None, []):
            reqs.append(req)
            continue
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            where = f"requests[{i}].tools" if "requests" in session else "tools"
            raise FixNotApplicable("sort-tool-keys", f"{where} is not a list of tool schemas (objects)",
                                   hint='tools: [{"type": "function", "function": {...}}, ...]')
        seen = True
        new = [E.sort_keys(t) for t in tools]
        changed = changed or json.dumps(new) != json.dumps(tools)
        reqs.append({**req, "tools": new})
    note = ("no tool schemas: nothing to sort" if not seen else "tool schema keys sorted, recursively" if changed
            else "the tool schemas' keys were sorted already")
    return Outcome("sort-tool-keys", E.with_requests(session, reqs) if changed else session, session, changed, note)


def _move_volatile(session: Session, asm: Assembler, params: dict[str, Any]) -> Outcome:
    new, moved = E.move_volatile(session)
    if not moved:
        return Outcome("move-volatile", session, session, False,
                       "no dates, times, ids or timestamps in the system prompt: nothing to move")
    distinct = sorted(set(moved))
    shown = ", ".join(repr(s) for s in distinct[:3]) + (f" and {len(distinct) - 3} more" if len(distinct) > 3 else "")
    same = len(E.requests_of(session)) == 1 or len(distinct) * len(E.requests_of(session)) == len(moved)
    note = f"moved to the last user message of each request: {shown}"
    if "requests" not in session or same:
        note += (" (the same on every turn of this session: the move costs their tokens once per user message "
                 "here, and keeps the prefix across days and sessions)")
    return Outcome("move-volatile", new, session, True, note)


def _split_system(session: Session, asm: Assembler, params: dict[str, Any]) -> Outcome:
    reqs, count = [], 0
    judge = E.volatile_judge(session)
    for req in E.requests_of(session):
        new, n = E.split_system(req, judge)
        reqs.append(new)
        count += n
    if not count:
        return Outcome("split-system", session, session, False,
                       "no volatile sentence beside a stable part in the system prompt: nothing to split")
    return Outcome("split-system", E.with_requests(session, reqs), session, True,
                   f"the system prompt split in two: its stable part first, then {count} volatile sentence(s)")


def _merge_system(session: Session, asm: Assembler, params: dict[str, Any]) -> Outcome:
    reqs, count = [], 0
    for req in E.requests_of(session):
        new, n = E.merge_system(req)
        reqs.append(new)
        count += n
    if not count:
        return Outcome("merge-system", session, session, False,
                       "at most one leading system prompt per request (or blocks with cache breakpoints): "
                       "nothing to merge")
    return Outcome("merge-system", E.with_requests(session, reqs), session, True,
                   "the leading system prompts of each request merged into one")


def _keep_reasoning(session: Session, asm: Assembler, params: dict[str, Any]) -> Outcome:
    name = "keep-reasoning"
    if not E.has_reasoning(session):
        return Outcome(name, session, session, False, "no assistant message carries reasoning: nothing to keep")
    if _keeps_reasoning(asm, {}):
        return Outcome(name, session, session, False,
                       f"template {asm.template.name!r} keeps reasoning in earlier turns already")
    for var, value in REASONING_SWITCHES:
        if var in asm.template.source and _keeps_reasoning(asm, {var: value}):
            return Outcome(name, session, session, True, f"template argument {var}={value!r} keeps reasoning in "
                           "earlier turns", Settings(template_kwargs={var: value}))
    return Outcome(name, session, session, False,
                   f"template {asm.template.name!r} has no switch to keep reasoning in earlier turns (looked for "
                   f"{', '.join(v for v, _ in REASONING_SWITCHES)}): nothing applied. The `projection` fix keeps "
                   "every reply as generated instead")


def _keeps_reasoning(asm: Assembler, kwargs: dict[str, Any]) -> bool:
    """Whether the template, with `kwargs`, renders an earlier reply's reasoning once a turn follows."""
    req = {"format": "openai", "messages": [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": PROBE},
        {"role": "user", "content": "q2"}]}
    probe = fixed_assembler(asm, Settings(template_kwargs=kwargs), cache=None)
    try:
        return PROBE in probe.render_text(probe.prepare(req)[0], True)
    except WorkbenchError:
        return False


def _pin_date(session: Session, asm: Assembler, params: dict[str, Any]) -> Outcome:
    at = _instant(params.get("at"))
    reads = clock_formats(asm.template.source)
    builtins = E.uses_builtin_clock(session)
    if reads is None and not builtins:
        return Outcome("pin-date", session, session, False,
                       f"neither template {asm.template.name!r} nor the session's prompt templates read the date: "
                       "nothing to pin")
    new = E.pin_variables(session, {"today": at.date().isoformat(), "now": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
                          if builtins else {})
    said = [f"template {asm.template.name!r} reads strftime_now"] if reads is not None else []
    said += [f"the prompt templates read {', '.join(builtins)}"] if builtins else []
    note = f"{' and '.join(said)}: pinned to {at.isoformat()} for the whole session"
    return Outcome("pin-date", new if builtins else session, session, True, note,
                   Settings(pinned_at=at.isoformat() if reads is not None else None), {"at": at.isoformat()})


def _instant(value: Any) -> datetime:
    """The pinned instant: the one recorded (a re-application), else today's midnight, UTC."""
    if value is None:
        return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError:
        raise FixNotApplicable("pin-date", f"at: {value!r} is not an ISO date-time",
                               hint="e.g. 2026-12-04T00:00:00+00:00") from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _projection(session: Session, asm: Assembler, params: dict[str, Any]) -> Outcome:
    projection_hook()   # raises ProjectionUnavailable when the module is not there
    return Outcome("projection", session, session, True,
                   "the prefix-stable projection: each turn is what the engine holds after the previous one, "
                   "then the new messages", Settings(projection=True))


FIXES: dict[str, Fix] = {f.name: f for f in (
    Fix("sort-tool-keys", "Sort the tool schemas' keys, recursively: the tools block is byte-identical whatever "
        "order the client serialized them in", ("tool_schema_order",), _sort_tool_keys,
        "Sort the tool schemas' keys, so the tools block is the same on every turn"),
    Fix("move-volatile", "Move dates, times, ids and timestamps from the system prompt to the last user message "
        "of each request (the suffix)", ("volatile_content",), _move_volatile,
        "Move the volatile text ({what}) after the stable prefix"),
    Fix("keep-reasoning", "Keep reasoning in earlier turns, through the template's own switch when it has one",
        ("template_rewrite",), _keep_reasoning, "Keep the earlier replies' reasoning in the prompt"),
    Fix("pin-date", "Pin the date the template (strftime_now) or a prompt template (today, now) reads to one "
        "value for the whole session", ("volatile_content", "template_rewrite"), _pin_date,
        "Pin the date to one value for the whole session"),
    Fix("merge-system", "Merge the leading system prompts of each request into one", ("system_changed",),
        _merge_system, "Merge the leading system prompts into one"),
    Fix("split-system", "Split the system prompt into its stable part and a second one with its volatile "
        "sentences", ("volatile_content", "system_changed"), _split_system,
        "Split the system prompt: the stable part first, then the volatile text ({what})"),
    Fix("projection", "Render with the prefix-stable projection: each turn extends what the engine holds",
        ("template_rewrite", "generation_prompt_mismatch"), _projection,
        "Send each turn as an extension of the previous one (the prefix-stable projection)"),
)}
# What a volatile value is, for a label ("a timestamp and an id"): the first pattern that matches it.
VOLATILE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a timestamp", re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d|^1[5-9]\d{8}(\d{3})?$")),
    ("a date", re.compile(r"\d{4}-\d{2}-\d{2}|[A-Z][a-z]{2}[a-z]* \d{1,2},? \d{4}|\d{1,2} [A-Z][a-z]{2}")),
    ("a time", re.compile(r"^\d{1,2}:\d{2}")),
    ("an id", re.compile(r"^[0-9a-fA-F-]{16,}$")))
ALIASES = {"pin-strftime": "pin-date"}
# The fix a Fix button next to a cause applies.
CAUSE_FIX = {"tool_schema_order": "sort-tool-keys", "volatile_content": "move-volatile",
             "template_rewrite": "keep-reasoning", "generation_prompt_mismatch": "projection",
             "system_changed": "split-system"}


def get_fix(name: str) -> Fix:
    fix = FIXES.get(ALIASES.get(name, name))
    if fix is None:
        raise UnknownFixError(name, tuple(FIXES))
    return fix


def parse_names(text: str) -> list[str]:
    """`--fix a,b`: the names, each checked (an unknown one raises, listing the known)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UnknownFixError(text, tuple(FIXES))
    return [get_fix(n).name for n in names]


def fix_label(name: str, cause_message: str = "") -> str:
    """The fix in words, for a button or a result's title: "Move the volatile text (a timestamp) after
    the stable prefix". The values a cause's message quotes say what the volatile text is."""
    fix = get_fix(name)
    if "{what}" not in fix.label:
        return fix.label or fix.name
    kinds: list[str] = []
    for value in re.findall(r"'([^']*)'", cause_message):
        kind = next((k for k, pattern in VOLATILE_KINDS if pattern.search(value)), None)
        if kind is not None and kind not in kinds:
            kinds.append(kind)
    what = " and ".join(kinds) if len(kinds) < 3 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
    return fix.label.format(what=what or "dates, times and ids")


def fix_for_cause(code: str, message: str = "") -> str | None:
    """The fix a cause's button applies (None: no fix addresses it)."""
    if code == "template_rewrite" and "reasoning" not in message:
        return "projection"     # the system prompt moved, or a date: no switch for that
    return CAUSE_FIX.get(code)


# --- applying -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Applied:
    """Fixes applied in order: the final session, how to render it, and each fix's outcome."""
    session: Session
    original: Session
    settings: Settings
    outcomes: tuple[Outcome, ...]

    def specs(self) -> list[dict[str, Any]]:
        """What re-applying needs (the export bundle records it): each fix's name and params."""
        return [{"fix": o.fix, "params": o.params} for o in self.outcomes]


def apply_fixes(session: Session, fixes: Sequence[str | dict[str, Any]], asm: Assembler) -> Applied:
    """Apply `fixes` (names, or {"fix": name, "params": {...}} as `Applied.specs` writes them) in
    order. The session must load (sessions.parse_session: a typed SessionFileError otherwise)."""
    parse_session(session)
    settings, outcomes, current = Settings(), [], session
    for spec in fixes:
        name, params = (spec, {}) if isinstance(spec, str) else (spec.get("fix"), spec.get("params") or {})
        fix = get_fix(str(name))
        # Each fix sees the assembler as the earlier fixes left it (keep-reasoning after pin-date).
        out = fix.apply(current, fixed_assembler(asm, settings, cache=None) if not settings.empty else asm,
                        dict(params))
        outcomes.append(out)
        current = out.session
        settings = settings.merged(out.settings)
    if current is not session:
        parse_session(current)       # a fix never hands back a session that does not load
    return Applied(current, session, settings, tuple(outcomes))


class _PinnedClock(Assembler):
    """An assembler whose templates read one fixed instant through strftime_now (pin-date)."""

    pinned: datetime

    def context_at(self, now: datetime | None = None) -> BuildContext:
        return self.context.at(now or self.pinned)


def fixed_assembler(asm: Assembler, settings: Settings, cache: Any = "keep") -> Assembler:
    """`asm` with the settings' template arguments and pinned clock (itself when there are none)."""
    if not settings.template_kwargs and settings.pinned_at is None:
        return asm
    c = asm.config
    opts = {f.name: getattr(c, f.name) for f in dataclasses.fields(c) if f.name not in ("template", "tokenizer")}
    opts["template_kwargs"] = {**c.template_kwargs, **settings.template_kwargs}
    opts["cache"] = asm.cache if cache == "keep" else cache
    if settings.pinned_at is None:
        return Assembler(asm.template, asm.tokenizer, **opts)
    pinned = _PinnedClock(asm.template, asm.tokenizer, **opts)
    pinned.pinned = datetime.fromisoformat(settings.pinned_at)
    return pinned


def projection_hook() -> Callable[[Assembler, Sequence[Any]], Sequence[Any]]:
    """The prefix-stable projection's entry point, from its own module (built apart from this one):
    a function (assembler, requests) -> one result per turn, each with `token_ids`. Raises
    ProjectionUnavailable while no such module is installed."""
    for module in ("workbench.analysis.projection", "workbench.assembly.projection"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        for attr in ("project_turns", "projected_turns", "project_session", "project"):
            fn = getattr(mod, attr, None)
            if callable(fn):
                return fn  # type: ignore[no-any-return]
    raise ProjectionUnavailable("projection", "not available yet: the prefix-stable projection module is not "
                                "part of this build", hint="use the other fixes meanwhile")


def ids_of(result: Any) -> np.ndarray:
    return np.asarray(result.token_ids, dtype=np.uint32)


# --- measuring ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TurnFigures:
    turn: int
    tokens: int
    reused_tokens: int
    first_divergence: int | None
    cached_tokens: dict[str, int]       # provider -> tokens the provider reports cached
    cost: dict[str, float]              # provider -> USD (example prices)
    prefill_ms: float | None = None     # the local engine's forward passes for this turn
    engine_reused: int | None = None    # tokens the engine took from its cache
    # provider -> why its cached figure is 0 or less than shared (the simulator's TurnResult.why);
    # only the providers with a reason
    why: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"turn": self.turn, "tokens": self.tokens, "reused_tokens": self.reused_tokens,
                               "first_divergence": self.first_divergence, "cached_tokens": self.cached_tokens,
                               "cost": {k: round(v, 6) for k, v in self.cost.items()}}
        if self.why:
            out["why"] = self.why
        if self.prefill_ms is not None:
            out.update(prefill_ms=round(self.prefill_ms, 3), engine_reused_tokens=self.engine_reused)
        return out


@dataclass(frozen=True)
class Side:
    """One column of the before/after table: the session's turns and their totals."""
    turns: tuple[TurnFigures, ...]
    analysis: tuple[Any, ...] = ()      # the TurnAnalysis per turn (empty under the projection)
    ids: tuple[np.ndarray, ...] = ()    # each turn's token ids
    why: dict[str, str] = field(default_factory=dict)   # provider -> why it cached nothing (Simulation.why)

    def totals(self) -> dict[str, Any]:
        ts = self.turns
        out: dict[str, Any] = {"turns": len(ts), "tokens": sum(t.tokens for t in ts),
                               "reused_tokens": sum(t.reused_tokens for t in ts),
                               "append_only_turns": sum(1 for t in ts[1:] if t.first_divergence is None)}
        names = list(ts[0].cached_tokens) if ts else []
        out["cached_tokens"] = {p: sum(t.cached_tokens[p] for t in ts) for p in names}
        out["cost"] = {p: round(sum(t.cost[p] for t in ts), 6) for p in names}
        if ts and ts[0].prefill_ms is not None:
            out["prefill_ms"] = round(sum(t.prefill_ms or 0.0 for t in ts), 3)
            # What the engine ran the model over (a count: the time's reason, without its noise).
            out["engine_prefilled_tokens"] = sum(t.tokens - (t.engine_reused or 0) for t in ts)
        return out

    def to_json(self) -> dict[str, Any]:
        out = {"turns": [t.to_json() for t in self.turns], "totals": self.totals()}
        if self.why:
            out["hit_ratio_why"] = self.why
        return out


@dataclass(frozen=True)
class Measurement:
    applied: Applied
    before: Side
    after: Side
    engine: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"fixes": [o.to_json() for o in self.applied.outcomes], "engine": self.engine,
                "before": self.before.to_json(), "after": self.after.to_json()}


def measure(asm: Assembler, session: Session, fixes: Sequence[str | dict[str, Any]], *,
            providers: Sequence[str] | None = None, engine: str | None = None, device: str | None = None,
            prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None, repeats: int = 1,
            breakpoints: str = "explicit") -> Measurement:
    """The session before and after `fixes`: per turn and in total, the tokens reused (prefix
    analysis), each provider's cached tokens and cost, and with `engine` (a model name: `tiny`,
    `gemma3-270m`) the local engine's prefill time, every turn a real forward pass (with `repeats`,
    each column is run that many times from an empty cache and each turn keeps its fastest time).
    `breakpoints`: Anthropic's cache_control, the session's own ("explicit") or placed ("auto")."""
    from .providers import PROVIDERS
    applied = apply_fixes(session, fixes, asm)
    names = tuple(providers or PROVIDERS)
    runner = _Prefill(engine, asm.tokenizer.vocab_size, device, repeats) if engine else None
    keep = runner is not None            # the engine prefills every turn's ids
    before = _side(asm, _requests(session, prepare), Settings(), names, breakpoints, keep)
    if applied.session is session and applied.settings.empty:
        after = before       # no fix changed the session or how it renders: the same figures, measured once
    else:
        after = _side(fixed_assembler(asm, applied.settings), _requests(applied.session, prepare), applied.settings,
                      names, breakpoints, keep)
    if runner is not None:
        before, after = runner.timed(before, after)
    return Measurement(applied, before, after, engine)


def _requests(session: Session, prepare: Callable[[dict[str, Any]], dict[str, Any]] | None) -> Sequence[dict[str, Any]]:
    # Built one at a time as the analysis reads them: every turn's request at once would hold a slice
    # of the conversation per turn (memory quadratic in its length).
    turns = parse_session(session).turns
    return turns.map(prepare) if prepare else turns


def _side(asm: Assembler, requests: Sequence[dict[str, Any]], settings: Settings, providers: Sequence[str],
          breakpoints: str = "explicit", keep_ids: bool = False) -> Side:
    """One column, turn by turn: each turn's figures are taken as it is made, and its prompt goes to
    the simulators once the next turn says what reply followed it; only the figures are kept (and
    every turn's ids with `keep_ids`, for the engine's prefill). Time and memory follow the session."""
    from .prefix import iter_analysis
    feed = _Feed(asm, providers, breakpoints)
    rows: list[tuple[int, int, int | None]] = []      # tokens, reused, first divergence
    analysis: list[Any] = []
    ids: list[np.ndarray] = []
    if settings.projection:
        turns: Any = _projected_turns(asm, requests)
        if isinstance(turns, Sequence) and not all(getattr(t, "result", None) for t in turns):
            feed.plain = True                    # a hook whose turns carry no result: bare ids
        own = hasattr(turns, "__next__")         # the projection's own turns: each has its result and reuse
        for t in turns:
            result = getattr(t, "result", None)
            tid = None if own and not keep_ids else ids_of(t)
            tokens = len(tid) if tid is not None else t.result.total_tokens
            rows.append((tokens, *_projected_reuse(t, tid, rows, ids)))
            feed.add(result, tid)
            if tid is not None:
                ids.append(tid)
    else:
        for t in iter_analysis(asm, requests):
            rows.append((t.tokens, t.reused_tokens, t.first_divergence))
            analysis.append(t.detached())
            feed.add(t.result, None)
            if keep_ids:
                ids.append(t.result.token_ids)
    sims = feed.finish()
    turns_out = tuple(TurnFigures(k + 1, rows[k][0], rows[k][1], rows[k][2],
                                  {p: s.turns[k].cached_tokens for p, s in sims.items()},
                                  {p: s.turns[k].cost for p, s in sims.items()},
                                  why={p: s.turns[k].why for p, s in sims.items() if s.turns[k].why})
                      for k in range(len(rows)))
    return Side(turns_out, tuple(analysis), tuple(ids) if keep_ids else (),
                {p: s.why for p, s in sims.items() if s.why})


def _projected_turns(asm: Assembler, requests: Sequence[dict[str, Any]]) -> Any:
    """The projection's turns one at a time where its module makes them so (`iter_project`), else
    the hook's whole list."""
    mod = importlib.import_module("workbench.analysis.projection") if importlib.util.find_spec(
        "workbench.analysis.projection") else None
    stream = getattr(mod, "iter_project", None) if mod is not None else None
    return stream(asm, requests) if callable(stream) else projection_hook()(asm, requests)


class _Feed:
    """The simulators of one column, fed each turn's prompt as soon as the next turn is known (its
    reply is the next request's first new message). A prompt or a simulation that fails is raised
    once every turn has been analysed, in the order the whole-session code raised them: a prompt
    error first (the earliest turn), then the first provider's, in the providers' order."""

    def __init__(self, asm: Assembler, providers: Sequence[str], breakpoints: str):
        from .providers import make_simulator
        self.asm, self.breakpoints = asm, breakpoints
        self.sims = {p: make_simulator(p) for p in providers}
        self.results: dict[str, list[Any]] = {p: [] for p in providers}
        self.failed: dict[str, WorkbenchError] = {}
        self.prompt_error: WorkbenchError | None = None
        self.plain = False                       # a hook whose turns carry no result: bare ids
        self._last: tuple[Any, np.ndarray | None] | None = None

    def add(self, result: Any, ids: np.ndarray | None) -> None:
        if self._last is not None:
            self._prompt(self._last, result)
        self._last = (result, ids)

    def _prompt(self, last: tuple[Any, np.ndarray | None], following: Any) -> None:
        from .providers import TurnPrompt
        from .turn_prompts import turn_prompt
        if self.prompt_error is not None:
            return
        result, ids = last
        try:
            prompt = TurnPrompt(ids) if self.plain and ids is not None else \
                turn_prompt(result, following, self.breakpoints, self.asm)
        except WorkbenchError as exc:
            self.prompt_error = exc
            return
        for p, sim in self.sims.items():
            if p in self.failed:
                continue
            try:
                self.results[p].append(sim.process(prompt))
            except WorkbenchError as exc:
                self.failed[p] = exc

    def finish(self) -> dict[str, Any]:
        from .providers import Simulation
        if self._last is not None:
            self._prompt(self._last, None)
            self._last = None
        if self.prompt_error is not None:
            raise self.prompt_error
        for p in self.sims:
            if p in self.failed:
                raise self.failed[p]
        return {p: Simulation(sim.params.name, tuple(self.results[p]), sim.params) for p, sim in self.sims.items()}


def _projected_reuse(t: Any, tid: np.ndarray | None, rows: list[Any], ids: list[np.ndarray]
                     ) -> tuple[int, int | None]:
    """A projected turn's reuse: its own accounting of what the engine held (the reply included),
    else the common prefix with the previous turn's prompt (`ids`: the turns before, kept for it)."""
    from ..difference import first_difference
    if not rows:
        return 0, None
    if hasattr(t, "reused_tokens") and hasattr(t, "held_tokens"):
        return int(t.reused_tokens), None if t.reused_tokens >= t.held_tokens else int(t.reused_tokens)
    assert tid is not None      # kept for a hook whose turns carry no reuse of their own
    d = first_difference(ids[-1], tid)
    return d, None if d >= len(ids[-1]) else d


class _Prefill:
    """The local engine, loaded once for both columns. A column starts from an empty cache and
    prefills its turns in order, reusing what the previous turns left (a real forward pass). The
    columns take turns, `repeats` times each, and every turn keeps its fastest time: on a shared
    machine a burst of load then falls on both columns alike, not on one."""

    def __init__(self, model: str, vocab_size: int, device: str | None, repeats: int = 1):
        from ..engine.engine import Engine
        self.repeats = max(1, repeats)
        self.engine = Engine.load(model, vocab_size=vocab_size, device=device)
        self.engine.prefill(np.arange(1, 33, dtype=np.uint32) % vocab_size, reuse=False)   # first-pass warm-up

    def timed(self, before: Side, after: Side) -> tuple[Side, Side]:
        runs: tuple[list[list[Any]], list[list[Any]]] = ([], [])
        for _ in range(self.repeats):
            for side, out in zip((before, after), runs):
                self.engine.clear()
                out.append([self.engine.prefill(i) for i in side.ids])
        return self._with(before, runs[0]), self._with(after, runs[1])

    @staticmethod
    def _with(side: Side, runs: list[list[Any]]) -> Side:
        # The reuse is the same on every run (a count); the time, the fastest (the least disturbed).
        turns = tuple(dataclasses.replace(t, prefill_ms=min(r[k].prefill_ms for r in runs),
                                          engine_reused=runs[0][k].reused_tokens)
                      for k, t in enumerate(side.turns))
        return dataclasses.replace(side, turns=turns)
