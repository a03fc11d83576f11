"""The Assembler: normalize -> clean -> render -> segment/tokenize -> budget.

Each stage is a pure function of its inputs; the Assembler only composes them
and times them. Configure once, assemble many requests.
"""

from __future__ import annotations

import asyncio
import copy
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from datetime import datetime
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from .budget import Window, measure, measure_next, resolve_window
from .built import Built
from .cache.keys import extend_chain, prefix_chain, prompt_key
from .cache.reuse import from_cache, store
from .cache.store import TwoTierCache
from .cleaning import CleaningPolicy, clean
from .context import BuildContext, canonical, clock_formats
from .conversation import Conversation, Message
from .diagnostics import Diagnostic, warning
from .errors import TemplateError, WorkbenchError
from .injection import (ASSISTANT_POLICIES, MODEL_OUTPUT_TOKENS, POLICIES, AssistantPolicy, Guarded,
                        InjectionPolicy, guard, policies_of)
from .intake import IntakeLimits, normalize
from .metrics import AssemblyMetrics
from .result import AssemblyResult, Dropped, DroppedList
from .incremental import extend, first_change
from .rewrites import inspect_render
from .segments import (PendingEncode, Segment, SegmentList, Span, layout, moved_diagnostics, originals,
                       tokenize_spans)
from .templates.clock import wall_clock
from .templates import ChatTemplate, Rendered, RenderLimits, get_template, render
from .tokenizers import Tokenizer, get_tokenizer
from .truncation import (Plan, Search, TruncationPolicy, _mandatory_error, dropped_records, estimate_message,
                         estimate_text, fit, plan, tail_text)
from .variables import Binding, VariableConfig, expand_messages

if TYPE_CHECKING:
    from .session import Session

_TEMPLATE_FLAG = attrgetter("template")
AUTO_CACHE_BYTES = 64 * 1024 * 1024
# A template with no natural tokenizer (gemma3, or a custom file) uses this one unless told.
FALLBACK_TOKENIZER = "o200k_base"


@dataclass(frozen=True)
class AssemblerConfig:
    template: str | ChatTemplate = "chatml"
    tokenizer: str | Tokenizer | None = None
    cleaning: CleaningPolicy = field(default_factory=CleaningPolicy)
    # Special-token strings by where the text came from (workbench/injection.py): the request's
    # own text (system, user, tool results, names, ids), the tool schemas, the assistant's output.
    injection: InjectionPolicy = "escape"
    tool_injection: InjectionPolicy = "escape"
    assistant_injection: AssistantPolicy = "model"
    context_window: int | None = None
    reserve: int | None = None
    intake: IntakeLimits = field(default_factory=IntakeLimits)
    render_limits: RenderLimits = field(default_factory=RenderLimits)
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    truncation: TruncationPolicy = field(default_factory=TruncationPolicy)
    variables: VariableConfig = field(default_factory=VariableConfig)
    # Assembled prompts shared across sessions and processes: a TwoTierCache, None for none, or
    # "auto": an in-process tier, plus Redis when WORKBENCH_REDIS_URL is set (SPEC 7.5).
    cache: Any = "auto"


class Assembler:
    """A configured pipeline. `Assembler(template="qwen2.5")` picks the template's own tokenizer."""

    def __init__(self, template: str | ChatTemplate = "chatml", tokenizer: str | Tokenizer | None = None,
                 **options: Any):
        self.config = AssemblerConfig(template=template, tokenizer=tokenizer, **options)
        for opt, allowed in (("injection", POLICIES), ("tool_injection", POLICIES),
                             ("assistant_injection", ASSISTANT_POLICIES)):
            if getattr(self.config, opt) not in allowed:
                raise WorkbenchError(f"unknown {opt} policy {getattr(self.config, opt)!r}",
                                     hint=f"use one of {', '.join(allowed)}")
        self.template = get_template(self.config.template)
        self._notes: list[Diagnostic] = []
        tok = self.config.tokenizer or self.template.tokenizer
        if tok is None:
            tok = FALLBACK_TOKENIZER
            self._notes.append(warning("no_natural_tokenizer",
                                       f"template {self.template.name!r} has no offline tokenizer; counting with "
                                       f"{FALLBACK_TOKENIZER} (ids are not the model's; pass a tokenizer: hf:DIR)"))
        self.tokenizer = get_tokenizer(tok)
        self._special_str = {v: k for k, v in self.tokenizer.specials.items()}
        # Tokens per estimated token for this tokenizer, learned from exact counts as truncation runs.
        self._ratio = 1.0
        self.metrics = AssemblyMetrics()
        cache = self.config.cache
        if cache == "auto":
            cache = TwoTierCache.from_env(local_bytes=AUTO_CACHE_BYTES)
        elif cache is not None and not isinstance(cache, TwoTierCache):
            raise WorkbenchError(f"cache must be a TwoTierCache, None or 'auto', got {type(cache).__name__}")
        self.cache: TwoTierCache | None = cache
        if self.config.context_window is not None or self.config.reserve is not None:
            # Refuse an impossible window at configuration time, not at the first request.
            self.window(Conversation(messages=()))
        t = self.template
        tk = self.tokenizer
        kw: dict[str, Any] = {"bos_token": t.bos_token if t.bos_token is not None else (tk.bos_token or ""),
                              "eos_token": t.eos_token if t.eos_token is not None else (tk.eos_token or "")}
        kw.update(t.kwargs)
        kw.update(self.config.template_kwargs)
        self._kw = kw
        self._policies = policies_of(self.config)
        # Placeholders for escaped text must be characters the template cannot produce by itself.
        self._avoid = t.source + "\x00" + canonical(kw)
        self._clock = clock_formats(t.source)
        self.context = BuildContext(
            template=t.name, template_version=t.version, tokenizer=self.tokenizer.name,
            tokenizer_version=self.tokenizer.version,
            settings=canonical({
                "template": {"origin": t.origin, "kwargs": kw},
                "tokenizer": {"specials": len(self.tokenizer.specials),
                              "output_tokens": sorted(MODEL_OUTPUT_TOKENS.intersection(self.tokenizer.specials))},
                **{f.name: getattr(self.config, f.name) for f in dataclass_fields(self.config)
                   if f.name not in ("template", "tokenizer", "cache")}}))

    # ------------------------------------------------------------------ stages
    def normalize(self, request: Any) -> tuple[Conversation, list[Diagnostic]]:
        return normalize(request, self.config.intake)

    def _kwargs(self) -> dict[str, Any]:
        """The template's arguments (bos/eos, its own, the configured ones); read-only by convention."""
        return self._kw

    def context_at(self, now: datetime | None = None) -> BuildContext:
        """The build context of an assembly starting `now` (the clock matters only to templates that read it)."""
        if self._clock is None:
            return self.context
        return self.context.at(now or wall_clock(), self._clock)

    def prepare(self, request: Any, normalized: tuple[Conversation, list[Diagnostic]] | None = None,
                cleaned: tuple[Conversation, list[Diagnostic]] | None = None
                ) -> tuple[Conversation, list[Diagnostic], list[Binding], dict[str, float]]:
        """Normalize, expand prompt templates and clean: the conversation the chat template will see.
        `normalized` is the request already normalized, `cleaned` already normalized and cleaned (a
        Session reuses what the previous request's intake and cleaning found)."""
        clock = time.perf_counter
        if cleaned is not None:
            return cleaned[0], list(cleaned[1]), [], {"normalize": 0.0, "variables": 0.0, "clean": 0.0}
        t0 = clock()
        conv, diags = normalized if normalized is not None else self.normalize(request)
        diags = list(diags)
        t1 = clock()
        bindings: list[Binding] = []
        if any(map(_TEMPLATE_FLAG, conv.messages)):
            # Prompt templates expand before cleaning, so a merge never turns literal text into template code.
            msgs, bindings, d = expand_messages(conv.messages, conv.request_variables(), self.config.variables)
            conv = conv.with_messages(tuple(msgs))
            diags += d
        t2 = clock()
        conv, d = clean(conv, self.config.cleaning)
        diags += d
        t3 = clock()
        return conv, diags, bindings, {"normalize": (t1 - t0) * 1e3, "variables": (t2 - t1) * 1e3,
                                       "clean": (t3 - t2) * 1e3}

    def window(self, conv: Conversation) -> Window:
        t = self.template
        return resolve_window(conv, context_window=self.config.context_window, reserve=self.config.reserve,
                              template_window=t.context_window, template_reserve=t.reserve)

    def assemble(self, request: Any, *, add_generation_prompt: bool | None = None,
                 previous: AssemblyResult | None = None,
                 normalized: tuple[Conversation, list[Diagnostic]] | None = None,
                 cleaned: tuple[Conversation, list[Diagnostic]] | None = None) -> AssemblyResult:
        """Assemble a request. With `previous` (the last result of the same conversation, as a
        Session passes it), the unchanged prefix is reused and only the rest is rendered and tokenized;
        the ids are exactly those of a cold assembly either way."""
        clock = time.perf_counter
        t0 = clock()
        ctx = self.context_at()
        conv, diags, bindings, timings = self.prepare(request, normalized, cleaned)
        win = self.window(conv)
        msgs = conv.messages
        if add_generation_prompt is None:
            add_generation_prompt = not msgs or msgs[-1].role != "assistant"
        policy = self.config.truncation
        budget = win.input_budget
        t1 = clock()
        dropped: Sequence[Dropped] = ()
        made: list[Built] = []   # every exact assembly (or splice) this request took
        estimated: int | None = None
        counts = {"exact_assemblies": 1, "splices": 0}
        inc = None
        if previous is not None and previous.context != ctx.fingerprint:
            previous = None   # assembled under other settings (or another day's date): nothing to reuse
        if previous is not None and not bindings:
            inc = extend(self, previous, conv, add_generation_prompt, ctx)
            if inc is not None and policy.enabled and inc.used > budget:
                inc = None  # over budget: truncation starts from a cold assembly
            timings["incremental"] = (clock() - t1) * 1e3
        cached = None
        if inc is None and self.cache is not None and not bindings:
            cached = from_cache(self, conv, add_generation_prompt, budget if policy.enabled else None, ctx)
            if cached is not None and policy.enabled and cached.used > budget:
                cached = None  # over budget after all: the truncation path below
            previous = None  # a prompt from the cache is not this session's previous result
        if inc is not None or cached is not None:
            built = inc if inc is not None else cached
            counts = {"exact_assemblies": 0 if built.reused else 1, "splices": 0}
            estimated = built.estimated
        elif policy.enabled:
            p = plan(msgs, policy)
            ratio = self._ratio
            fixed = sum(estimate_message(msgs[i]) for i in p.mandatory) + sum(estimate_text(x) for x in conv.tools)
            # Fast estimate, newest first, stopping as soon as it is clearly over: O(kept), not O(history).
            ests = [0.0] * len(p.units)
            acc = fixed * ratio
            for u in range(len(p.units) - 1, -1, -1):
                ests[u] = sum(estimate_message(msgs[i]) for i in p.units[u]) * ratio
                acc += ests[u]
                if acc > budget:
                    break
            estimated = int(acc)
            search = Search(estimated=estimated)
            first = None
            if acc <= budget * 0.9 or not p.units:
                # The fast estimate says it fits: the exact count confirms (or truncation starts from it).
                built = self._build(conv, add_generation_prompt, ctx)
                first = (built, 0)
                made.append(built)
                search.builds += 1
            if first is None or (first[0].used > budget and p.units):
                def build(k: int) -> Built:
                    # Rewrite diagnostics wait for the final prompt: windows only need their counts.
                    b = self._build(conv.with_messages(p.kept(msgs, k)), add_generation_prompt, ctx, inspect=False)
                    made.append(b)
                    return b

                def splice(base: Built, base_k: int, k: int) -> Built | None:
                    b = self._splice(base, conv.with_messages(p.kept(msgs, k)), add_generation_prompt, ctx)
                    if b is not None:
                        made.append(b)
                    return b

                built, k = fit(msgs, p, budget, fixed_estimate=fixed, ratio=ratio, build=build,
                               splice=splice, first=first, search=search, estimates=ests)
                self._calibrate(built, p, k, msgs)
                if k and policy.cut:
                    built, k = self._cut(conv, p, k, built, budget, add_generation_prompt, ctx)
                dropped = DroppedList(partial(dropped_records, msgs, p, k), sum(len(u) for u in p.units[:k]))
                if dropped:
                    diags.append(warning("truncated", f"dropped {len(dropped)} message(s), oldest first, to fit the "
                                         f"input budget of {budget} tokens (window {win.context_window} − reserve "
                                         f"{win.reserve})"))
            elif first[0].used > budget:
                raise _mandatory_error(first[0], budget)
            counts = {"exact_assemblies": search.builds, "splices": search.splices}
        else:
            built = self._build(conv, add_generation_prompt, ctx)
        built.gen = add_generation_prompt
        return self._result(conv, built, diags, bindings, timings, win, dropped, estimated, counts, made, t0, t1,
                            previous if inc is not None else None, ctx)

    def _result(self, conv: Conversation, built: "Built", diags: list[Diagnostic], bindings: list[Binding],
                timings: dict[str, float], win: Window, dropped: Sequence[Dropped], estimated: int | None,
                counts: dict[str, int], made: list["Built"], t0: float, t1: float,
                previous: AssemblyResult | None, ctx: BuildContext) -> AssemblyResult:
        clock = time.perf_counter
        conv = built.conv
        if not built.inspected:
            built.diags += inspect_render(built.text, conv.messages, built.spans, self.template.source)
        if built not in made:
            made.append(built)
        timings["render"] = sum(b.render_ms for b in made)
        timings["tokenize"] = sum(b.tokenize_ms for b in made)
        timings["budget"] = (clock() - t1) * 1e3 - built.render_ms - built.tokenize_ms
        diags += built.diags
        t = self.template
        if previous is not None and previous.prefix_chain:
            start = built.first_change if built.first_change is not None else \
                first_change(previous.conversation.messages, conv.messages)
            chain = extend_chain(previous.prefix_chain, conv.messages, start)
        else:
            chain = tuple(prefix_chain(conv.messages))
        key = prompt_key(ctx, conv.tools, chain, built.gen)
        if previous is not None and built.reused:
            bud = measure_next(win, conv, previous.budget, previous.conversation, originals(previous.segments),
                               built.reused, originals(built.segments), len(built.ids), **counts)
        else:
            bud = measure(win, conv, originals(built.segments), len(built.ids), estimated, **counts)
        if bud.used > bud.input_budget:
            diags.append(warning("over_budget", f"prompt uses {bud.used} tokens, {bud.used - bud.input_budget}"
                                 f" over the input budget of {bud.input_budget}"))
        timings["total"] = (clock() - t0) * 1e3
        result = AssemblyResult(
            template={"name": t.name, "version": t.version},
            tokenizer={"name": self.tokenizer.name, "version": self.tokenizer.version},
            text_source=built.text, ids_source=built.ids,
            segments=built.segments if isinstance(built.segments, SegmentList) else tuple(built.segments),
            budget=bud, dropped=dropped, cache_key=key, diagnostics=tuple(self._notes + diags), timings_ms=timings,
            conversation=conv, escaped=tuple(sorted(built.escaped)), variables=tuple(bindings),
            prefix_chain=chain, render_diagnostics=tuple(built.diags), context=ctx.fingerprint)
        self.metrics.record(result)
        if self.cache is not None and not bindings and not dropped and not built.escaped and \
                built.stored is False and (not built.reused or self.cache.redis_enabled):
            # Share the prompt: a later request of this conversation, in any process, extends it.
            # (Incremental results go to Redis only: in-process, the session holds them already.)
            # Not a prompt with escaped user text: the cache entry does not carry which spans were
            # escaped, and a prompt extended from it would let that text become control tokens.
            store(self, conv, key, result)
        return result

    # ------------------------------------------------------------------ exact assembly of one conversation
    def _build(self, conv: Conversation, add_generation_prompt: bool, ctx: BuildContext,
               inspect: bool = True) -> "Built":
        """One exact assembly (rewrite diagnostics only when `inspect`)."""
        clock = time.perf_counter
        t0 = clock()
        msgs = conv.messages
        r, gen_start, pending, escaped, diags = self._render(conv, add_generation_prompt, ctx)
        t1 = clock()
        spans = layout(r.text, msgs, r.starts, gen_start=gen_start, tools_start=r.tools_start,
                       bos_token=self._kw.get("bos_token") or None)
        if inspect:
            # Python work that needs no token ids runs now, while the encode finishes on other threads.
            diags += inspect_render(r.text, msgs, spans, self.template.source)
        segments, ids, moved = tokenize_spans(r.text, spans, self.tokenizer, escaped,
                                              None if escaped else pending)
        diags += moved_diagnostics(moved)
        built = Built(conv, r.text, segments, ids, diags, tuple(escaped), (t1 - t0) * 1e3, (clock() - t1) * 1e3)
        built.spans, built.inspected = spans, inspect
        return built

    def _guard(self, conv: Conversation) -> Guarded | None:
        """Special-token strings in the fields of `conv`, by source policy (raises where it is "reject")."""
        return guard(conv, self.tokenizer, self._policies, self._avoid)

    def _inputs(self, conv: Conversation, g: Guarded | None
                ) -> tuple[list[dict], list[dict] | None, dict[str, Any]]:
        """What the template is given: messages and tools (escaped strings as placeholders), arguments."""
        kw = self._kw
        if g is not None:
            return g.messages, g.tools, kw
        return conv.to_template_messages(), conv.tool_schemas() or None, kw

    def render_text(self, conv: Conversation, add_generation_prompt: bool) -> str:
        """The template's text for `conv` (untracked, escaped strings restored), no tokens: what
        prefix analysis compares."""
        return self._plain(conv, add_generation_prompt)

    def _plain(self, conv: Conversation, add_generation_prompt: bool, ctx: BuildContext | None = None) -> str:
        """The render of `conv` as text, untracked (escaped strings restored)."""
        t = self.template
        ctx = ctx or self.context_at()
        g = self._guard(conv)
        tmsgs, tools, kw = self._inputs(conv, g)
        with _unmasked(g):
            r = render(t.source, t.name, tmsgs, tools=tools, add_generation_prompt=add_generation_prompt, kwargs=kw,
                       limits=self.config.render_limits, now=ctx.instant)
        return g.restore(r)[0].text if g is not None else r.text

    def _splice(self, base: "Built", conv: Conversation, add_generation_prompt: bool,
                ctx: BuildContext) -> "Built | None":
        """`base` without the segments of messages `conv` no longer has, if that is provably exact.

        Exact when a plain render of `conv` is the spliced text (the template renders the kept
        messages the same without the dropped ones) and every cut starts at a special token
        (encoding is split at special tokens, so the ids on either side cannot change).
        """
        if base.escaped:
            return None
        clock = time.perf_counter
        t0 = clock()
        keep = {m.sequence for m in conv.messages}
        specials = self.tokenizer.specials
        segs = base.segments
        kept: list[Segment] = []
        prev_dropped = False
        for s in segs:
            gone = s.seq is not None and s.kind == "message" and s.seq not in keep
            if gone != prev_dropped:
                # A cut: the segment on the far side must begin with a special token, whole.
                lead = self._special_str.get(int(s.token_ids[0])) if s.token_count else None
                if lead is None or not s.text.startswith(lead):
                    return None
            prev_dropped = gone
            if not gone:
                kept.append(s)
        if prev_dropped or len(kept) == len(segs) or not specials:
            return None
        g = self._guard(conv)
        if g is not None and g.escapes:
            return None
        text = "".join(s.text for s in kept)
        plain = self._plain(conv, add_generation_prompt, ctx)
        t1 = clock()
        if plain != text:
            return None
        ids = np.concatenate([s.token_ids for s in kept]).astype(np.uint32, copy=False) if kept else \
            np.zeros(0, dtype=np.uint32)
        ids.flags.writeable = False
        out: list[Segment] = []
        tpos = cpos = 0
        for s in kept:
            n, c = s.token_count, len(s.text)
            out.append(Segment(s.kind, s.role, s.seq, s.text, ids[tpos:tpos + n], tpos, tpos + n, cpos, cpos + c))
            tpos, cpos = tpos + n, cpos + c
        spans = [Span(s.kind, s.role, s.seq, s.char_start, s.char_end) for s in out]
        diags = list(g.diagnostics) if g is not None else []
        built = Built(conv, text, out, ids, diags, (), (t1 - t0) * 1e3, (clock() - t1) * 1e3)
        built.spliced, built.spans = True, spans
        return built

    def _calibrate(self, built: "Built", p: Plan, k: int, msgs: tuple[Message, ...]) -> None:
        """Learn this tokenizer's tokens per estimated token from the kept messages (for the next window)."""
        counts = built.seq_tokens()
        est = exact = 0.0
        for u in p.units[k:]:
            for i in u:
                est += estimate_message(msgs[i])
                exact += counts.get(msgs[i].sequence, 0)
        if est > 200:  # enough text to measure; recent content predicts the next request best
            self._ratio = exact / est

    def _cut(self, conv: Conversation, p: Plan, k: int, built: "Built", budget: int,
             add_generation_prompt: bool, ctx: BuildContext) -> tuple["Built", int]:
        """Keep the newest dropped unit after all, its longest text cut (from the front) to fill the budget."""
        msgs = conv.messages
        unit = p.units[k - 1]
        target = max(unit, key=lambda i: len(msgs[i].content or ""))
        m = msgs[target]
        if not m.content or m.tool_calls:
            return built, k
        marker = self.config.truncation.cut_marker
        gone = {j for u in p.units[:k - 1] for j in u}
        ids = self.tokenizer.encode_ordinary(m.content)
        others = sum(estimate_message(msgs[i]) for i in unit if i != target) * self._ratio
        room = int(budget - built.used - others - 8 - len(self.tokenizer.encode_ordinary(marker)))
        room = min(room, len(ids) - 1)  # a cut keeps less than the whole (else the unit would have fit)
        for _ in range(6):
            if room <= 0:
                return built, k
            tail = tail_text(self.tokenizer, ids, room)
            if not tail:
                return built, k
            cut_msg = m.with_(content=marker + tail)
            kept = tuple(cut_msg if i == target else msgs[i] for i in range(len(msgs)) if i not in gone)
            trial = self._build(conv.with_messages(kept), add_generation_prompt, ctx)
            if trial.used <= budget:
                trial.diags.append(warning("message_cut", f"{m.role} message cut to its last {room} of {len(ids)} "
                                           f"tokens (at a token boundary, marked) to fill the budget", m.sequence))
                trial.cut_seq = m.sequence
                return trial, k - 1
            room -= trial.used - budget + 1
        return built, k

    def _render(self, conv: Conversation, add_generation_prompt: bool, ctx: BuildContext
                ) -> tuple[Rendered, int | None, PendingEncode, list[tuple[int, int]], list[Diagnostic]]:
        """Render (tracked), start encoding the output as it comes, and find the generation prompt.
        Also: the character spans to encode as plain text (escaped special-token strings) and the
        injection diagnostics of the rendered messages.

        The fields are checked while the encode of the first render runs on other threads (the
        common case finds nothing, and the check costs no time on the path to the ids). When some
        field's text is to be escaped, the template renders again, given placeholders for it."""
        pending = PendingEncode(self.tokenizer)
        r, gen_start = self._render_once(conv, add_generation_prompt, ctx, None, pending.feed)
        g = self._guard(conv)
        escaped: list[tuple[int, int]] = []
        if g is not None and g.escapes:
            pending = PendingEncode(self.tokenizer)   # the first output is not the prompt: never read
            r, gen_start = self._render_once(conv, add_generation_prompt, ctx, g, None)
            if gen_start is not None:
                r.gen_reads.append(gen_start)   # moved with the other positions
            r, escaped = g.restore(r)
            if gen_start is not None:
                gen_start = r.gen_reads.pop()
        if add_generation_prompt and self.template.origin == "shipped":
            last_start = max(r.starts.values(), default=0)
            if r.gen_reads and last_start <= r.gen_reads[-1] < len(r.text):
                gen_start = r.gen_reads[-1]
        pending.finish(r.text)
        return r, gen_start, pending, escaped, list(g.diagnostics) if g is not None else []

    def _render_once(self, conv: Conversation, add_generation_prompt: bool, ctx: BuildContext,
                     g: Guarded | None, sink: Callable[[str], None] | None) -> tuple[Rendered, int | None]:
        """One tracked render (of the placeholders' inputs when `g` is given), and where the
        generation prompt starts when a second render is needed to know it (before any restore)."""
        t = self.template
        tmsgs, tools, kw = self._inputs(conv, g)
        # Shipped templates report where they test add_generation_prompt (tests hold that to a
        # second render); other templates get the second render.
        known = t.origin == "shipped"
        with _unmasked(g):
            r = render(t.source, t.name, tmsgs, tools=tools, add_generation_prompt=add_generation_prompt,
                       kwargs=kw, track=True, track_generation=known, limits=self.config.render_limits,
                       sink=sink, now=ctx.instant)
            gen_start = None
            if add_generation_prompt and not known and "add_generation_prompt" in t.source:
                # The generation prompt is what the render adds when asked for it.
                plain = render(t.source, t.name, tmsgs, tools=tools, add_generation_prompt=False, kwargs=kw,
                               limits=self.config.render_limits, now=ctx.instant).text
                if r.text.startswith(plain) and len(plain) < len(r.text):
                    gen_start = len(plain)
        return r, gen_start

    async def assemble_async(self, request: Any, **kw: Any) -> AssemblyResult:
        return await asyncio.to_thread(self.assemble, request, **kw)

    def session(self, keep: int = 16) -> "Session":
        from .session import Session
        return Session(self, keep)


@contextmanager
def _unmasked(g: Guarded | None) -> Iterator[None]:
    """Errors raised while rendering quote fields as the user wrote them, not their placeholders."""
    try:
        yield
    except TemplateError as exc:
        if g is None or not g.escapes:
            raise
        clear = copy.copy(exc)
        clear.message, clear.hint = g.unmask(exc.message), exc.hint and g.unmask(exc.hint)
        clear.args = tuple(g.unmask(a) if isinstance(a, str) else a for a in exc.args)
        raise clear from None
