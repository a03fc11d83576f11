"""What the workbench shows, for both hosts (the notebook's `Workbench` and the Panel app), with no
UI library imported: the session being edited, the choices (turn, template, tokenizer, custom
template), the live result, and the panels computed from every turn.

Two speeds. `assemble()` is the keystroke path: the selected turn's request through an assembler
`Session`, so only the changed tail is rendered and tokenized. `panels()` is the slower path, run
by the host off the keystroke path: every turn of the session assembled once and kept
(`TurnRecord`), re-assembled only from the first turn an edit touched, then the provider
simulations over all turns (the cache panel) and the analysis of the selected turn against the
previous one (the prefix diff). When the session truncates, the cache panel also compares the
truncation policies (sliding, chunked, summary-slot) over every turn (`analysis/policies.py`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..analysis import TurnAnalysis, analyze_turn
from ..analysis.policies import PolicyRun, run_policy, with_policy
from ..analysis.providers import PROVIDERS, Simulation, TurnPrompt, simulate
from ..analysis.turn_prompts import breakpoints_of, reply_ids, reply_tokens
from ..assembly import Assembler, Session
from ..assembly.result import AssemblyResult
from ..assets import sample_sessions
from ..budget import DEFAULT_CONTEXT_WINDOW
from ..catalog import ModelEntry, lookup
from ..conversation import Conversation, ModelParams
from ..errors import BudgetError, BudgetSettingError, Cancelled, EditError, TemplateError, WorkbenchError
from ..intake.responses import parse_responses_resumable
from ..templates import DEFAULT_TEMPLATE, RenderLimits, from_source, get_template
from ..templates.arguments import canonical, template_kwargs
from ..truncation import STRATEGIES, TruncationPolicy
from .budget_view import (
    NONE,
    BudgetSettings,
    Overflow,
    explicit_reserve,
    explicit_window,
    interleave,
    mark,
    parse_tokens,
    reserve_label,
    truncation_policy,
    unit_seqs,
    window_source,
    write_reserve,
    write_window,
)
from .charts import cache_figure, prefix_diff
from .document import Autosave, Edit, SessionDocument, new_message, parse_json_field
from .history import History, Step
from .model_choice import KVChoice, kv_for, resolve_kv

DEFAULT_SESSION = "support_chat.json"
# The slower views' parts, cheapest first, and what each tab needs of them (both hosts' tab names):
# nothing is computed for a tab that is not open.
PARTS = ("diff", "cache", "policies")
NEEDS: dict[str, frozenset[str]] = {"Cache": frozenset({"cache", "policies"}), "Prefix diff": frozenset({"diff"}),
                                    "KV": frozenset({"cache"}), "Teach": frozenset({"diff"})}
AUTO = "auto"                    # the tokenizer: the selected template's own
UNCHANGED: Any = object()        # set_budget: a setting not given


@dataclass
class TurnRecord:
    result: AssemblyResult
    request: dict


@dataclass(frozen=True)
class Panels:
    """The slower views: cache panel and prefix diff, for one state of the document."""
    generation: int                          # the document edit they were computed for
    turn: int                                # the selected turn they analyse
    assembler: Assembler                     # what assembled them (its tokenizer decodes their ids)
    parts: frozenset[str] = frozenset(PARTS)  # which of PARTS were computed (the others are empty)
    # "diff": the selected turn against the previous one
    analysis: TurnAnalysis | None = None
    prefix_diff: dict[str, Any] | None = None
    previous: AssemblyResult | None = None   # the previous turn's result
    # "cache": every turn, the provider simulations
    simulations: tuple[Simulation, ...] = ()
    cache_figure: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, dict[str, int]] = field(default_factory=dict)  # segment source -> segments, tokens
    hit_rates: dict[str, float] = field(default_factory=dict)         # prompt-cache tier -> hit rate
    lookups: dict[str, tuple[int, int]] = field(default_factory=dict)  # prompt-cache tier -> (hits, lookups)
    turns_ms: float = 0.0                    # time to bring every turn up to date
    turns_assembled: int = 0                 # how many turns that assembled (the rest were kept)
    prompts: tuple[TurnPrompt, ...] = ()     # every turn as the simulators saw it
    # "policies": each truncation policy over every turn, the session's own first; empty when no
    # turn truncates.
    policies: tuple[PolicyRun, ...] = ()
    # With "policies" (the Cache tab's own part), last: a session whose calls carry the provider's
    # reported usage (a log with `response.usage`, a followed log) reconciled, the SessionCheck of
    # `reconcile_session.reconcile_turns` (what `analyze SESSION --json` prints per turn); None when
    # no call carries a usage; or why it failed. `reconciled`: that step ran to its end.
    reconciliation: Any = None
    reconcile_error: str = ""
    reconciled: bool = False

    def summary(self) -> dict[str, Any]:
        return {"providers": {s.provider: {"hit_ratio": round(s.hit_ratio, 4), "cost": round(s.total_cost, 6),
                                           "cached_tokens": s.turns[-1].cached_tokens if s.turns else 0}
                              for s in self.simulations},
                "sources": self.sources, "hit_rates": self.hit_rates,
                "policies": [r.to_json() for r in self.policies]}


class WorkbenchState:
    """The session document, the choices, the assembler and the results. Not thread-safe on its own:
    hosts call `assemble`/`apply` on their UI thread and `panels` on one worker at a time."""

    def __init__(self, session: str | SessionDocument | None = None, *, autosave: Autosave | None = None,
                 template: str = DEFAULT_TEMPLATE, restore: bool = True):
        self.samples = sample_sessions()
        self.autosave = autosave
        self.template = template
        self.tokenizer = AUTO
        self.model: ModelEntry | None = None          # a catalog model (model_choice.py); None: none chosen
        self.model_error = ""                         # the last unknown model name's error, shown inline
        self.custom_source = ""
        # The chat template's arguments (templates/arguments.py): a choice, like the template, not a
        # field of the session file; part of the assembler (so of every cache key and bundle).
        self.template_args: dict[str, Any] = {}
        self.template_args_error = ""                 # why a share link's arguments were not applied
        self.policy = TruncationPolicy().strategy    # the truncation policy (budget_view.POLICIES)
        self.overflow: Overflow | None = None       # what the model will not see, struck in the token view
        self.overflow_pending = False                # assembled with defer_overflow: complete_overflow() to do
        self._full_session: Session | None = None   # the whole prompt, untruncated, for `overflow`
        self.result: AssemblyResult | None = None   # the last good one: what the views show
        self.shown = ""                              # which session, turn and template that was
        self.error = ""
        self.custom_failed = False                   # the last error came from the custom template
        self.restored_at: float | None = None        # when the autosave this state restored was written
        self.generation = 0                          # bumps with every change of what is assembled
        self._assemblers: dict[tuple, Assembler] = {}
        self._session: Session | None = None
        self._records: list[TurnRecord | None] = []
        self._stamps: list[int] = []                  # per turn: the generation its record was last dropped at
        self._records_lock = threading.Lock()         # the records, between an edit and the panels' worker
        self._lock = threading.Lock()                 # one panels() at a time
        self._last_panels: Panels | None = None
        self._prompts: tuple[str, list[tuple[AssemblyResult, AssemblyResult | None, TurnPrompt]]] = ("", [])
        self._engines: dict[tuple, Any] = {}          # prefill engines, loaded on first use
        self._semantic: Any = None                    # the semantic-cache panel's cache
        self._replay: Any = None                      # its replay of the session, kept between lookups
        self._policies: _PolicyCache | None = None    # the other truncation policies' turns, last panels
        # Per turn, (its result, the previous turn's, the TurnAnalysis): the reconcile step
        # re-analyses only the turns whose results changed (a followed log adds one at a time).
        self._analyses: list[tuple[AssemblyResult, AssemblyResult | None, TurnAnalysis]] = []
        # A followed log's calls (ui/follow.py): per turn of `doc`, the (timestamp, usage, provider)
        # the log gave its call, which the requests read back from the log do not carry.
        self.logged_usage: Callable[[SessionDocument], list[tuple[str | None, Any, str | None]] | None] | None \
            = None
        self.history = History()                      # undo and redo of the editor's operations
        if isinstance(session, SessionDocument):
            self.open(session)
        else:
            path = session or self.samples.get(DEFAULT_SESSION) or next(iter(self.samples.values()), None)
            if path is None:
                raise WorkbenchError("no session to show", hint="pass a session file")
            self.load(path, restore=restore)

    # the document ----------------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The autosave key: the file the session came from, or its name."""
        return str(Path(self.doc.path).resolve()) if self.doc.path else self.doc.name

    def load(self, path: str, restore: bool = True) -> None:
        """Open a session file; with `restore`, the autosaved edits of that file instead, if any."""
        doc = SessionDocument.load(path)
        if str(Path(path).resolve()) not in {str(Path(p).resolve()) for p in self.samples.values()}:
            self.samples[Path(path).name] = path
        self.restored_at = None
        if restore and self.autosave is not None:
            found = self.autosave.restore(str(Path(path).resolve()))
            if found is not None:
                doc, self.restored_at = found
        self.open(doc)

    def open(self, doc: SessionDocument) -> None:
        self.doc = doc
        self.history.clear()    # another document: its edits are not this one's to undo
        self._session = None    # another conversation: nothing to extend
        self.turn = doc.turn_count
        self._drop_all()

    def revert(self) -> None:
        """Drop the edits: the file as saved, and no autosave."""
        if self.autosave is not None:
            self.autosave.discard(self.source)
        if self.doc.path:
            self.load(self.doc.path, restore=False)

    def save(self, path: str | None = None) -> Path:
        old = self.source
        target = self.doc.save(path)
        if self.autosave is not None:
            self.autosave.discard(old)
        return target

    def apply(self, op: dict) -> Edit:
        """One message-editor operation on the messages of the selected turn."""
        was_last = self.turn == self.doc.turn_count
        if op.get("op") == "insert" and "message" not in op:   # the editor names only the role
            op = {**op, "message": new_message(str(op.get("role") or "user"), self.doc.format_of(self.turn))}
        turn, before = self.turn, self.doc.edited(self.turn)
        edit = self.doc.apply(op, self.turn)
        self.history.record(op, turn, before, self.doc.edited(turn))
        return self._edited(edit, was_last)

    def _edited(self, edit: Edit, was_last: bool) -> Edit:
        self._changed(edit.first_turn, edit.structural)
        if edit.structural and (was_last or self.turn > self.doc.turn_count):
            self.turn = self.doc.turn_count   # stay on the last turn as messages come and go
        return edit

    def undo(self, redo: bool = False) -> tuple[Step, Edit] | None:
        """Take back the last editor step (with `redo`, do again the last one taken back): its
        messages list (a Responses request's instructions and items) as it was, exactly. None when
        there is nothing to undo (redo)."""
        step = self.history.redo() if redo else self.history.undo()
        if step is None:
            return None
        was_last = self.turn == self.doc.turn_count
        swapped = step.swap(redo) if step.swap is not None else None   # a whole-document step (a fix)
        edit = self._edited(swapped or self.doc.restore(step.turn, step.after if redo else step.before), was_last)
        if self.doc.is_log:
            self.turn = step.turn            # a log's step belongs to its turn's request: show that turn
        return step, edit

    def extend_log(self, requests: list[dict]) -> bool:
        """Requests added at the end of a log document: a followed request log's new calls
        (ui/follow.py), not an edit, so the document stays unedited and nothing is recorded for undo.
        The earlier turns keep their assembled records (only the new ones are assembled); the
        selected turn moves to the new last one if it was the last. Returns whether it moved."""
        if not self.doc.is_log:
            raise EditError("only a log of requests gains turns from a followed log")
        if not requests:
            return False
        was_last = self.turn == self.doc.turn_count
        first = self.doc.turn_count + 1
        # A new list (copy on write): a snapshot taken before (the autosave's, a share) never changes.
        self.doc.data["requests"] = [*self.doc.data["requests"], *requests]
        self._changed(first, True)
        if was_last:
            self.turn = self.doc.turn_count
        return was_last

    def set_json_field(self, name: str, text: str) -> None:
        """Tools or variables typed as JSON: checked here, errors name the box, line and column."""
        value = parse_json_field(text, name) if text.strip() else None
        if name == "tools" and value is not None and (
                not isinstance(value, list) or not all(isinstance(t, dict) for t in value)):
            raise EditError("tools: a JSON list of tool schemas (objects)",
                            hint='[{"type": "function", "function": {"name": ..., "parameters": {...}}}]')
        if name == "variables" and value is not None and not isinstance(value, dict):
            raise EditError("variables: a JSON object of name: value")
        edit = self.doc.set_field(self.turn, name, value)
        self._changed(edit.first_turn, False)

    def field_text(self, name: str) -> str:
        value = self.doc.field(self.turn, name)
        return "" if value is None else json.dumps(value, ensure_ascii=False, indent=1)

    def _changed(self, first_turn: int, structural: bool) -> None:
        with self._records_lock:
            self.generation += 1
            n, g, keep = self.doc.turn_count, self.generation, first_turn - 1
            if structural:
                self._records = (self._records[:keep] + [None] * n)[:n]
                self._stamps = (self._stamps[:keep] + [g] * n)[:n]
            else:
                for k in range(keep, len(self._records)):
                    self._records[k], self._stamps[k] = None, g

    def _drop_all(self) -> None:
        """Every turn is to be assembled anew (another session, template or tokenizer)."""
        with self._records_lock:
            self.generation += 1
            self._records = [None] * self.doc.turn_count
            self._stamps = [self.generation] * self.doc.turn_count

    def select_turn(self, turn: int) -> None:
        if not 1 <= turn <= self.doc.turn_count:
            raise EditError(f"turn {turn} does not exist: the session has {self.doc.turn_count} turns")
        self.turn = turn

    def choose(self, *, template: str | None = None, tokenizer: str | None = None,
               custom_source: str | None = None, model: str | None = None,
               template_args: dict[str, Any] | None = None) -> None:
        """Switch model, template, tokenizer, custom template or template arguments: every turn is
        assembled anew. `template_args`: the whole set ({} none), checked as `--template-arg` is (a
        bad one raises TemplateError and changes nothing); kept across template switches, as the
        command line keeps them (a template that does not read one ignores it).
        `model`: a catalog name (id, alias, the name after `org/`) sets the template, tokenizer,
        window, KV shape and image rule together; "" none. It applies first, so a template or
        tokenizer given with it overrides the model's. An unknown name raises ModelNotFoundError
        (the closest names in its message) and changes nothing."""
        args = template_kwargs(template_args, where="argument") if template_args is not None else None
        entry = lookup(model) if model is not None and model.strip() else None
        if model is not None:
            self.model, self.model_error = entry, ""
            if entry is not None:
                self.template, self.tokenizer = entry.template, entry.tokenizer or AUTO
        if template is not None:
            self.template = template
        if tokenizer is not None:
            self.tokenizer = tokenizer
        if custom_source is not None:
            self.custom_source = custom_source
        if args is not None:
            self.template_args, self.template_args_error = args, ""
        self._drop_all()

    def kv_choice(self, name: str | None = None) -> KVChoice:
        """The KV shape the KV tab and Teach use: the chosen model's, else Llama-3-8B's (said so);
        `name`: the one the KV tab's picker names instead."""
        return kv_for(self.model) if name is None else resolve_kv(name, self.model)

    def model_window(self) -> int | None:
        """The window the choices give when the session file names none: the model's."""
        return self.model.context_window if self.model is not None else None

    # assembly --------------------------------------------------------------------------------------
    def assembler(self, policy: str | None = None) -> Assembler:
        """The assembler of the current choices (`policy`: another truncation policy's, same otherwise)."""
        # The window: the session file's, else the model's (as `--model` on the command line).
        cw = explicit_window(self.doc) or self.model_window()
        # The reserve is the request's max_tokens; the assembler carries it too, so that the export
        # bundle records it for requests that come without one.
        res = explicit_reserve(self.doc, self.turn)
        custom = self.custom_source.strip()
        policy = policy or self.policy
        model = self.model.id if self.model is not None else None
        key = (self.template, self.tokenizer, custom, cw, res, policy, model, canonical(self.template_args))
        asm = self._assemblers.get(key)
        if asm is None:
            tok = None if self.tokenizer == AUTO else self.tokenizer
            # A model also brings its image rule (the assembler's `model`, as `--model` gives it); the
            # template and tokenizer are the pickers' (the model's, or chosen by hand over it).
            budget = dict(context_window=cw, reserve=res, truncation=truncation_policy(policy),
                          **({"model": model} if model is not None else {}),
                          **({"template_kwargs": dict(self.template_args)} if self.template_args else {}))
            if custom:
                # A custom template counts with the chosen tokenizer, else the selected template's.
                # Typed in the box, reviewed by nobody: rendered in a worker process with a hard deadline.
                asm = Assembler(template=from_source(self.custom_source, "custom"),
                                tokenizer=tok or get_template(self.template).tokenizer,
                                render_limits=RenderLimits(isolate=True), **budget)
                # one custom at a time
                self._assemblers = {k: a for k, a in self._assemblers.items() if not k[2] or k[2] == custom}
            else:
                asm = Assembler(template=self.template, tokenizer=tok, **budget)
            self._assemblers[key] = asm
        return asm

    # the budget controls ---------------------------------------------------------------------------
    def budget_settings(self) -> BudgetSettings:
        """The window, reserve and policy the selected turn is assembled with, and where each came from."""
        asm = self.assembler()
        res = explicit_reserve(self.doc, self.turn)
        win = asm.window(Conversation(messages=(), params=ModelParams(max_tokens=res)))
        return BudgetSettings(win.context_window, window_source(self.doc, asm.template, self.model),
                              explicit_window(self.doc),
                              win.reserve, reserve_label(win.reserve_source), res, self.policy)

    def set_budget(self, *, context_window: Any = UNCHANGED, reserve: Any = UNCHANGED,
                   policy: str | None = None) -> None:
        """Set the context window and the reserve (text from a box, an int, or None/blank: the session's
        or template's own) and the truncation policy. A bad value raises BudgetSettingError naming its
        control, and nothing changes. Every turn is assembled anew."""
        given_cw, given_res = context_window is not UNCHANGED, reserve is not UNCHANGED
        cw = parse_tokens(context_window, "context_window", "the context window", 1) if given_cw \
            else explicit_window(self.doc)
        res = parse_tokens(reserve, "reserve", "the reserve", 0) if given_res \
            else explicit_reserve(self.doc, self.turn)
        if policy is not None:
            truncation_policy(policy)
        # The template's model window, not through the assembler: the settings being fixed may be
        # the very ones that keep it from being built (a file whose max_tokens fills its window).
        own = self.model_window() or (
            None if self.custom_source.strip() else get_template(self.template).context_window)
        window = cw or own or DEFAULT_CONTEXT_WINDOW
        if res is not None and res >= window:
            control = "reserve" if given_res else "context_window"
            raise BudgetSettingError(control, f"the reserve ({res:,}) leaves no room for input in a context window of "
                                     f"{window:,} tokens", hint="the reserve must be below the window")
        if given_cw and cw != explicit_window(self.doc):
            write_window(self.doc, cw)
        if given_res and res != explicit_reserve(self.doc, self.turn):
            write_reserve(self.doc, res)
        if policy is not None:
            self.policy = policy
        self._drop_all()

    def assemble(self, *, defer_overflow: bool = False) -> AssemblyResult:
        """Assemble the selected turn; on a WorkbenchError keep the last good result and record the
        error (also raised, for the host to show inline). `defer_overflow`: what the model sees
        only, the struck rest left to `complete_overflow` (a switch paints the kept prompt first)."""
        try:
            asm = self.assembler()
            if self._session is None or self._session.assembler is not asm:
                self._session = asm.session()
            request = self.doc.request(self.turn)
            refused: BudgetError | None = None
            try:
                kept: AssemblyResult | None = self._session.assemble(request)
            except BudgetError as exc:
                if exc.over_by is None:
                    raise          # an impossible window, not a prompt too long: nothing to show
                kept, refused = None, exc
            if defer_overflow and kept is not None:
                result, self.overflow, self.overflow_pending = kept, None, True
            else:
                result, self.overflow = self._overflow(asm, request, kept, refused)
                self.overflow_pending = False
        except WorkbenchError as exc:
            self.error = str(exc)
            # A template error while a custom template is in use: the host says it beside that box.
            self.custom_failed = isinstance(exc, TemplateError) and bool(self.custom_source.strip())
            raise
        self.result, self.error, self.custom_failed = result, "", False
        with self._records_lock:
            if kept is not None and self.turn - 1 < len(self._records):
                self._records[self.turn - 1] = TurnRecord(result, request)
        self.shown = f"{self.doc.name}, turn {self.turn}, {result.template['name']}"
        return result

    def _overflow(self, asm: Assembler, request: dict, kept: AssemblyResult | None, refused: BudgetError | None
                  ) -> tuple[AssemblyResult, Overflow | None]:
        """The result to show and the layout of what the model will not see. When the policy drops
        messages: the prompt sent, `kept` (its summary slot included), with the dropped messages
        struck at their place (`interleave`). With no policy, or one that cannot fit it: the whole
        prompt, what the policy may drop and the tokens past the input budget struck (`mark`). The
        whole prompt comes from the same settings without truncation."""
        b = kept.budget if kept is not None else None
        if kept is not None and b is not None and not kept.dropped and b.used <= b.input_budget:
            return kept, None
        full_asm = self.assembler(NONE)
        if kept is not None and full_asm is asm:
            full = kept
        else:
            if self._full_session is None or self._full_session.assembler is not full_asm:
                self._full_session = full_asm.session()
            full = self._full_session.assemble(request)
        if kept is not None and kept.dropped:
            return kept, interleave(kept, full, policy=self.policy)
        budget = full.budget.input_budget
        dropped, note = [], ""
        if refused is not None:
            dropped, note = unit_seqs(full, self.policy), f"{self.policy} truncation cannot fit it: {refused.message}"
        overflow = mark(full, asm.tokenizer, dropped=dropped, input_budget=budget, policy=self.policy,
                        count_over=True, refused=note)
        return (kept if kept is not None else full), overflow

    def complete_overflow(self) -> bool:
        """The overflow a deferred assembly left out, for the result shown; True when there is one
        to show (False: none left pending, or the prompt fits and nothing is struck)."""
        if not self.overflow_pending or self.result is None:
            return False
        self.overflow_pending = False
        _, self.overflow = self._overflow(self.assembler(), self.doc.request(self.turn), self.result, None)
        return self.overflow is not None

    def item_stops(self) -> tuple[int, ...] | None:
        """Where each message's items stop in the selected turn's Responses request, as the intake
        parsed it for the result shown (intake/next_request.py: no parse of its own); a request the
        session does not parse item by item (a string input, instructions given as items) is parsed
        here. None when not known (nothing assembled, or it no longer parses)."""
        for sess in (self._session, self._full_session):
            if sess is not None and sess.last is self.result:
                if sess.intake is not None and sess.intake.stops is not None:
                    return sess.intake.stops
                try:
                    _, _, parser = parse_responses_resumable(self.doc.request(self.turn),
                                                             sess.assembler.config.intake)
                except WorkbenchError:
                    return None
                return tuple(parser.stops)
        return None

    def turn_result(self, turn: int) -> AssemblyResult | None:
        """Turn `turn`'s result as the panels last assembled it (None if not yet, or no such turn)."""
        rec = self._records[turn - 1] if 1 <= turn <= len(self._records) else None
        return rec.result if rec is not None else None

    def prefill(self, model: str = "tiny", device: str | None = None, *, check: Callable[[], None] | None = None,
                progress: Callable[[str, int, int], None] | None = None) -> tuple[Any, Any, dict]:
        """A real prefill of the selected turn after the previous one (the engine, KV reuse): returns
        (previous turn's report, this turn's report with the time without reuse, the model's info).
        Slow (forward passes): hosts run it on a worker thread, on request. It runs in chunks:
        `check()` between them may raise Cancelled; `progress(what, tokens done, tokens)` after each."""
        from ..engine.engine import Engine
        asm = self.assembler()
        cur = self.result if self.result is not None else self.assemble()
        prev = self.turn_result(self.turn - 1) if self.turn > 1 else None
        if prev is None and self.turn > 1:
            prev = asm.session().assemble(self.doc.request(self.turn - 1))
        key = (model, device, asm.tokenizer.vocab_size)
        engine = self._engines.get(key)
        if engine is None:
            engine = self._engines[key] = Engine.load(model, vocab_size=asm.tokenizer.vocab_size, device=device)
        engine.clear()     # this turn's reuse comes from the previous turn only, not from earlier clicks
        names = {"prefill": "this turn, after the previous one's KV", "baseline": "this turn without reuse"}

        def said(first: bool) -> Any:
            if progress is None:
                return None
            return lambda what, done, total: progress("the previous turn" if first else names[what], done, total)

        # The KV is held by content ids: an image's KV is never taken for another image of its size.
        first = engine.prefill(prev.token_ids if prev is not None else cur.token_ids[:1],
                               keys=prev.content_ids() if prev is not None else cur.content_ids()[:1], check=check,
                               progress=said(True))
        report = engine.prefill(cur.token_ids, keys=cur.content_ids(), baseline=True, top_k=5,
                                tokenizer=asm.tokenizer, check=check, progress=said(False))
        return first, report, engine.m.to_json()

    def semantic(self, embedder: Any = None) -> tuple[Any, Any]:
        """The semantic-cache panel: the session's earlier turns replayed into a semantic cache, and
        the selected turn looked up. Returns (Decision, SemanticCache). Loads the embedder on first use;
        keeps each turn's context and every vector between lookups (ui/semantic_replay.py)."""
        from ..semantic.cache import SemanticCache
        from ..semantic.embedders import MemoEmbedder, default_embedder
        from .semantic_replay import SessionReplay
        if self._semantic is None or (embedder is not None and self._semantic.embedder.inner is not embedder):
            self._semantic = SemanticCache(MemoEmbedder(embedder or default_embedder()))
            self._replay = SessionReplay(self._semantic)
        with self._records_lock:
            gen, stamps, turn = self.generation, list(self._stamps), self.turn
        decision = self._replay.lookup(self.assembler(), turn, self.doc.request, stamps, gen)
        return decision, self._semantic

    def semantic_pairs(self) -> Any:
        """The last lookup's pairs (ui/semantic_replay.py LookupPairs; None before one): what the
        Semantic tab's labels refer to."""
        return self._replay.last if self._replay is not None else None

    def export(self, out: str) -> tuple[Path, Any]:
        """The export bundle for the current settings (template, tokenizer, custom template, window)
        with this session's turns as goldens, then verified from disk: (folder, VerifyReport)."""
        from ..export.bundle import export_bundle
        from ..export.verify import verify
        if not out.strip():
            raise WorkbenchError("choose a folder to export to")
        asm = self.assembler()
        requests = [self.doc.request(k) for k in range(1, self.doc.turn_count + 1)]
        semantic = self._semantic.settings() if self._semantic is not None else None
        folder = export_bundle(asm, out.strip(), [(self.doc.name, requests)], overwrite=True, semantic=semantic)
        return folder, verify(folder)

    # the slower panels -----------------------------------------------------------------------------
    def panels(self, parts: Iterable[str] = PARTS, providers: tuple[str, ...] = PROVIDERS,
               breakpoints: str = "auto", *, check: Callable[[], None] | None = None,
               progress: Callable[[str, int, int], None] | None = None,
               publish: Callable[[Panels], None] | None = None) -> Panels:
        """The slower views, part by part, for what is open (`parts`, of PARTS): "diff" (the selected
        turn against the previous one: two turns), then "cache" (every turn brought up to date, only
        those an edit touched assembled again, and the provider simulations), then "policies" (the
        truncation policies side by side). Runs on a worker thread. `check`, called between turns,
        may hold it while a keystroke is handled or raise Cancelled (superseded, tab closed): the
        turns assembled by then are kept. `progress(what, done, total)` reports the turns;
        `publish` gets each part as soon as it is ready."""
        want = frozenset(parts) & frozenset(PARTS)
        with self._lock:
            gen, turn, asm = self.generation, self.turn, self.assembler()
            last = self._last_panels
            if last is not None and (last.generation, last.turn, last.assembler) == (gen, turn, asm) \
                    and want <= last.parts and ("policies" not in want or last.reconciled):
                self._publish_part(last, publish)
                return last                   # nothing changed since: the same panels
            out = Panels(gen, turn, asm, parts=frozenset())
            if "diff" in want:
                out = self._diff_part(out)
                self._publish_part(out, publish)
            if want & {"cache", "policies"}:
                t0 = time.perf_counter()
                records, assembled = self._every_turn(gen, asm, check, progress)
                out = self._cache_part(out, records, providers, breakpoints, (time.perf_counter() - t0) * 1e3,
                                       assembled)
                self._publish_part(out, publish)
                if "policies" in want:
                    policies = self._compare_policies(asm, records, out.prompts, out.simulations, breakpoints,
                                                      check, progress)
                    out = replace(out, policies=policies, parts=out.parts | {"policies"})
                    self._publish_part(out, publish)
                    # Not a part of its own (the tabs' parts stay as they were): a step of the Cache
                    # tab's, which costs nothing where no call carries a usage.
                    out = self._reconcile_part(out, records, check, progress)
                    self._publish_part(out, publish)
            return out

    def _publish_part(self, panels: Panels, publish: Callable[[Panels], None] | None) -> None:
        self._last_panels = panels
        if publish is not None:
            publish(panels)

    def _keep(self, k: int, gen: int, rec: TurnRecord) -> None:
        """Hold turn k+1's record assembled for generation `gen`, unless an edit touched it since."""
        with self._records_lock:
            if k < len(self._records) and self._stamps[k] <= gen and self._records[k] is None:
                self._records[k] = rec

    def _record(self, k: int, gen: int, asm: Assembler, sess: Session | None = None) -> TurnRecord:
        """Turn k+1's record: held, or assembled now (through `sess`, else a new session)."""
        rec = self._records[k] if k < len(self._records) else None
        if rec is None:
            req = self.doc.request(k + 1)
            try:
                rec = TurnRecord((sess if sess is not None else asm.session()).assemble(req), req)
            except WorkbenchError as exc:
                # Said with its turn: the tabs over every turn show it, and the turn shown may be another.
                raise WorkbenchError(f"turn {k + 1}: {exc.message}", hint=exc.hint) from exc
            self._keep(k, gen, rec)
        return rec

    def _every_turn(self, gen: int, asm: Assembler, check: Callable[[], None] | None,
                    progress: Callable[[str, int, int], None] | None) -> tuple[list[TurnRecord], int]:
        """Every turn's record, assembling the missing ones in order through one session."""
        records = list(self._records)
        missing = [k for k, r in enumerate(records) if r is None]
        sess = asm.session()
        for done, k in enumerate(missing):
            if check is not None:
                check()
            if progress is not None:
                progress("assembling every turn", done, len(missing))
            records[k] = self._record(k, gen, asm, sess)
        return [r for r in records if r is not None], len(missing)

    def _diff_part(self, out: Panels) -> Panels:
        """The selected turn against the previous one (the prefix diff, the teaching steps)."""
        asm, turn = out.assembler, out.turn
        if not 1 <= turn <= len(self._records):
            return replace(out, parts=out.parts | {"diff"})
        sess = asm.session()
        prev = self._record(turn - 2, out.generation, asm, sess) if turn > 1 else None
        cur = self._record(turn - 1, out.generation, asm, sess)
        previous = (prev.result, asm.prepare(prev.request)[0]) if prev is not None else None
        analysis = analyze_turn(asm, turn, cur.result, asm.prepare(cur.request)[0], previous)
        return replace(out, analysis=analysis, prefix_diff=prefix_diff(analysis, asm.tokenizer),
                       previous=prev.result if prev is not None else None, parts=out.parts | {"diff"})

    def _cache_part(self, out: Panels, records: list[TurnRecord], providers: tuple[str, ...], breakpoints: str,
                    turns_ms: float, assembled: int) -> Panels:
        asm = out.assembler
        prompts = self._prompts_of([r.result for r in records], breakpoints, asm)
        sims = tuple(simulate(prompts, p) for p in providers)
        shown = records[out.turn - 1].result if 1 <= out.turn <= len(records) else None
        sources: dict[str, dict[str, int]] = {}
        for s in (shown.segments if shown is not None else []):
            row = sources.setdefault(s.source, {"segments": 0, "tokens": 0})
            row["segments"] += 1
            row["tokens"] += s.token_count
        hit_rates, lookups = {}, {}
        if asm.cache is not None:
            m = asm.cache.metrics()
            hit_rates = {str(k): round(v, 4) for k, v in m.hit_rate.items()}
            lookups = {str(k): (m.hits[k], m.hits[k] + m.misses[k]) for k in m.hit_rate}
        return replace(out, simulations=sims, cache_figure=cache_figure(sims), sources=sources, hit_rates=hit_rates,
                       lookups=lookups,
                       turns_ms=turns_ms, turns_assembled=assembled, prompts=tuple(prompts),
                       parts=out.parts | {"cache"})

    def set_logged_usage(self, source: Callable[[SessionDocument], list[tuple[str | None, Any, str | None]] | None]
                         | None) -> None:
        """A followed log's (timestamp, usage, provider) per call (ui/follow.py, on attach): the
        panels computed before it (the document opened, then attached) are no longer current."""
        if source != self.logged_usage:
            self.logged_usage = source
            self._last_panels = None

    def reconcile_raw(self) -> dict[str, Any] | None:
        """The session as `reconcile_turns` takes it (the file's JSON object, as `analyze SESSION`
        reads it), with a followed log's timestamps and usage put on its requests; None when no
        request carries a usage (nothing to reconcile: the step costs nothing)."""
        raw = self.doc.data
        requests = raw.get("requests") if isinstance(raw, dict) else None
        if not isinstance(requests, list):
            return None
        logged = self.logged_usage(self.doc) if self.logged_usage is not None else None
        if logged is not None:
            merged = []
            for req, (ts, usage, _) in zip(requests, logged):
                req = dict(req) if isinstance(req, dict) else {}
                if ts is not None:
                    req["timestamp"] = ts
                if usage is not None:
                    resp = req.get("response")
                    req["response"] = {**(resp if isinstance(resp, dict) else {}), "usage": usage}
                merged.append(req)
            raw, requests = {**raw, "requests": merged}, merged
            named = {p for _, _, p in logged if p}
            if len(named) == 1 and not isinstance(raw.get("provider"), str):
                raw["provider"] = named.pop()     # the calls' own provider (one per conversation here)
        if not any(isinstance(r, dict) and isinstance(r.get("response"), dict) and "usage" in r["response"]
                   for r in requests):
            return None
        return raw

    def _reconcile_part(self, out: Panels, records: list[TurnRecord], check: Callable[[], None] | None,
                        progress: Callable[[str, int, int], None] | None) -> Panels:
        """Every turn's TurnAnalysis (as `analyze SESSION` makes them), then `reconcile_turns` on
        them: the very rows the CLI's JSON prints. Errors are shown in the tab, not raised."""
        raw = self.reconcile_raw()
        if raw is None or len(records) != self.doc.turn_count:
            return replace(out, reconciliation=None, reconciled=True)
        asm = out.assembler
        held = self._analyses
        turns: list[TurnAnalysis] = []
        keep: list[tuple[AssemblyResult, AssemblyResult | None, TurnAnalysis]] = []
        prev: tuple[AssemblyResult, Any] | None = None
        try:
            for k, rec in enumerate(records):
                before = records[k - 1].result if k else None
                old = held[k] if k < len(held) else None
                if old is not None and old[0] is rec.result and old[1] is before:
                    a = old[2]
                    full = None
                else:
                    if check is not None:
                        check()
                    if progress is not None:
                        progress("reconciling the reported usage", k, len(records))
                    if prev is not None and prev[1] is None:    # the previous turn was kept: its conversation
                        prev = (prev[0], _prepared(asm, records[k - 1]))
                    full = _prepared(asm, rec)
                    a = analyze_turn(asm, k + 1, rec.result, full, prev)
                turns.append(a)
                keep.append((rec.result, before, a))
                prev = (rec.result, full)
            self._analyses = keep
            # Imported here: only sessions with reported usage need the classifier.
            from ..analysis.reconcile_session import reconcile_turns
            return replace(out, reconciliation=reconcile_turns(raw, turns, asm, None), reconcile_error="",
                           reconciled=True)
        except Cancelled:
            raise                         # superseded or the tab closed: the host drops this run
        except WorkbenchError as exc:
            return replace(out, reconciliation=None, reconcile_error=str(exc), reconciled=True)

    def _prompts_of(self, results: list[AssemblyResult], breakpoints: str,
                    asm: Assembler | None = None) -> list[TurnPrompt]:
        """Each turn as the simulators see it; a turn whose result and next result are the very ones
        of the last call keeps its prompt (the reply's length comes from the next turn)."""
        held = self._prompts if self._prompts[0] == breakpoints else (breakpoints, [])
        out = []
        for k, r in enumerate(results):
            nxt = results[k + 1] if k + 1 < len(results) else None
            old = held[1][k] if k < len(held[1]) else None
            if old is not None and old[0] is r and old[1] is nxt:
                out.append(old[2])
                continue
            out.append(TurnPrompt.from_assembly(r, breakpoints=breakpoints_of(r, breakpoints),
                                                output_tokens=reply_tokens(r, nxt),
                                                reply_ids=reply_ids(asm, r, nxt) if asm is not None else None))
        self._prompts = (breakpoints, [(r, results[k + 1] if k + 1 < len(results) else None, p)
                                       for k, (r, p) in enumerate(zip(results, out))])
        return out

    def _compare_policies(self, asm: Assembler, records: list[TurnRecord], prompts: tuple[TurnPrompt, ...],
                          sims: tuple[Simulation, ...], breakpoints: str, check: Callable[[], None] | None,
                          progress: Callable[[str, int, int], None] | None) -> tuple[PolicyRun, ...]:
        """Every truncation policy over the session, when a turn truncates: the session's own policy
        is the panel's run; each other one is assembled through its own session, from the first turn
        whose inputs changed since the last call (the turns before it are kept)."""
        results = [r.result for r in records]
        truncated = tuple(k for k, r in enumerate(results, start=1) if r.dropped)
        if not truncated:
            self._policies = None
            return ()
        own = asm.config.truncation.strategy
        runs = {own: PolicyRun(own, tuple(prompts), truncated, sims)}
        held = self._policies if self._policies is not None and self._policies.assembler is asm else None
        same = 0
        if held is not None:
            # A turn assembled again from the same inputs (the live view re-assembles the selected
            # one) has the same key: the other policies' turns up to there stand.
            while same < min(len(held.base), len(results)) and held.base[same].cache_key == results[same].cache_key:
                same += 1
        cache = _PolicyCache(asm, results, held.variants if held else {}, {})
        self._policies = cache            # each policy's turns as they come: a cancelled run keeps them
        providers = {s.provider: s.params for s in sims}
        for strategy in STRATEGIES:
            if strategy == own:
                continue
            variant = cache.variants.get(strategy)
            if variant is None:
                variant = cache.variants[strategy] = with_policy(asm, strategy)
            turns = list(held.results.get(strategy, [])[:same]) if held else []
            sess = variant.session()
            cache.results[strategy] = turns      # grows in place, turn by turn
            for k in range(len(turns), len(records)):
                if check is not None:
                    check()
                if progress is not None:
                    progress(f"the {strategy} policy", k, len(records))
                turns.append(sess.assemble(records[k].request))
            runs[strategy] = run_policy(variant, (), providers, breakpoints, results=turns)
        return (runs[own], *(runs[s] for s in STRATEGIES if s != own))


def _prepared(asm: Assembler, rec: TurnRecord) -> Conversation:
    """The turn's conversation before truncation (`asm.prepare(request)[0]`), from its result where
    it holds it (untruncated: its own; truncated: the kept window's), so that going over every turn
    does not parse every request again from its first message."""
    r = rec.result
    if not r.dropped:
        return r.conversation
    return r.kept.full if r.kept is not None else asm.prepare(rec.request)[0]


@dataclass
class _PolicyCache:
    """What `_compare_policies` assembled last: for `assembler`'s results (`base`, compared by
    cache key), each other policy's assembler and its results, turn by turn."""
    assembler: Assembler
    base: list[AssemblyResult]
    variants: dict[str, Assembler]
    results: dict[str, list[AssemblyResult]]
