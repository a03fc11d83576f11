"""The Assembler: normalize -> clean -> render -> segment/tokenize -> budget.

Each stage is a pure function of its inputs; the Assembler only composes them
and times them. Configure once, assemble many requests.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .budget import Window, measure, measure_next, resolve_window
from .cache.keys import CacheKey, cache_key, extend_chain, prefix_chain
from .cache.prompts import from_entry, prompt_key, to_entry
from .cache.store import CacheEntry, TwoTierCache
from .cleaning import CleaningPolicy, clean
from .conversation import Conversation, Message
from .diagnostics import Diagnostic, info, warning
from .errors import WorkbenchError
from .injection import POLICIES, InjectionPolicy, apply_policy, scan
from .intake import IntakeLimits, normalize
from .metrics import AssemblyMetrics
from .result import AssemblyResult, Dropped, DroppedList
from .rewrites import inspect_render
from .incremental import extend, first_change
from .segments import (PendingEncode, Segment, SegmentList, Span, layout, moved_diagnostics, originals,
                       tokenize_spans)
from .templates import ChatTemplate, Rendered, RenderLimits, get_template, render
from .tokenizers import Tokenizer, get_tokenizer
from .truncation import Plan, Search, TruncationPolicy, _mandatory_error, estimate_message, estimate_text, fit, plan
from .variables import Binding, VariableConfig, expand_messages

if TYPE_CHECKING:
    from .session import Session

_TEMPLATE_FLAG = attrgetter("template")
AUTO_CACHE_BYTES = 64 * 1024 * 1024
# How many shorter prefixes of a request to look up as earlier prompts of the same conversation
# (a new turn adds a reply and a user message, or a few tool rounds).
PREFIX_PROBES = 8
# A template with no natural tokenizer (gemma3, or a custom file) uses this one unless told.
FALLBACK_TOKENIZER = "o200k_base"


@dataclass(frozen=True)
class AssemblerConfig:
    template: str | ChatTemplate = "chatml"
    tokenizer: str | Tokenizer | None = None
    cleaning: CleaningPolicy = field(default_factory=CleaningPolicy)
    injection: InjectionPolicy = "escape"
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
        if self.config.injection not in POLICIES:
            raise WorkbenchError(f"unknown injection policy {self.config.injection!r}",
                                 hint=f"use one of {', '.join(POLICIES)}")
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

    # ------------------------------------------------------------------ stages
    def normalize(self, request: Any) -> tuple[Conversation, list[Diagnostic]]:
        return normalize(request, self.config.intake)

    def _kwargs(self) -> dict[str, Any]:
        t, tok = self.template, self.tokenizer
        kw: dict[str, Any] = {"bos_token": t.bos_token if t.bos_token is not None else (tok.bos_token or ""),
                              "eos_token": t.eos_token if t.eos_token is not None else (tok.eos_token or "")}
        kw.update(t.kwargs)
        kw.update(self.config.template_kwargs)
        return kw

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
        conv, diags, bindings, timings = self.prepare(request, normalized, cleaned)
        win = self.window(conv)
        msgs = conv.messages
        if add_generation_prompt is None:
            add_generation_prompt = not msgs or msgs[-1].role != "assistant"
        policy = self.config.truncation
        budget = win.input_budget
        t1 = clock()
        dropped: Sequence[Dropped] = ()
        made: list[_Built] = []   # every exact assembly (or splice) this request took
        estimated: int | None = None
        counts = {"exact_assemblies": 1, "splices": 0}
        inc = None
        if previous is not None and not bindings:
            inc = extend(self, previous, conv, add_generation_prompt)
            if inc is not None and policy.enabled and inc.used > budget:
                inc = None  # over budget: truncation starts from a cold assembly
            timings["incremental"] = (clock() - t1) * 1e3
        cached = None
        if inc is None and self.cache is not None and not bindings:
            cached = self._from_cache(conv, add_generation_prompt, budget if policy.enabled else None)
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
                built = self._build(conv, add_generation_prompt)
                first = (built, 0)
                made.append(built)
                search.builds += 1
            if first is None or (first[0].used > budget and p.units):
                def build(k: int) -> _Built:
                    # Rewrite diagnostics wait for the final prompt: windows only need their counts.
                    b = self._build(conv.with_messages(p.kept(msgs, k)), add_generation_prompt, inspect=False)
                    made.append(b)
                    return b

                def splice(base: _Built, base_k: int, k: int) -> _Built | None:
                    b = self._splice(base, conv.with_messages(p.kept(msgs, k)), add_generation_prompt)
                    if b is not None:
                        made.append(b)
                    return b

                built, k = fit(msgs, p, budget, fixed_estimate=fixed, ratio=ratio, build=build,
                               splice=splice, first=first, search=search, estimates=ests)
                self._calibrate(built, p, k, msgs)
                if k and policy.cut:
                    built, k = self._cut(conv, p, k, built, budget, add_generation_prompt)
                dropped = DroppedList(partial(_dropped, msgs, p, k), sum(len(u) for u in p.units[:k]))
                if dropped:
                    diags.append(warning("truncated", f"dropped {len(dropped)} message(s), oldest first, to fit the "
                                         f"input budget of {budget} tokens (window {win.context_window} − reserve "
                                         f"{win.reserve})"))
            elif first[0].used > budget:
                raise _mandatory_error(first[0], budget)
            counts = {"exact_assemblies": search.builds, "splices": search.splices}
        else:
            built = self._build(conv, add_generation_prompt)
        built.gen = add_generation_prompt
        return self._result(conv, built, diags, bindings, timings, win, dropped, estimated, counts, made, t0, t1,
                            previous if inc is not None else None)

    def _result(self, conv: Conversation, built: "_Built", diags: list[Diagnostic], bindings: list[Binding],
                timings: dict[str, float], win: Window, dropped: Sequence[Dropped], estimated: int | None,
                counts: dict[str, int], made: list["_Built"], t0: float, t1: float,
                previous: AssemblyResult | None) -> AssemblyResult:
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
        key = cache_key(template_version=t.version, tokenizer_version=self.tokenizer.version,
                        policy_version=self.config.cleaning.version, tools=conv.tools, messages=conv.messages,
                        chain=chain)
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
            prefix_chain=chain, render_diagnostics=tuple(built.diags))
        self.metrics.record(result)
        if self.cache is not None and not bindings and not dropped and built.stored is False and \
                (not built.reused or self.cache.redis_enabled):
            # Share the prompt: a later request of this conversation, in any process, extends it.
            # (Incremental results go to Redis only: in-process, the session holds them already.)
            entry = to_entry(result.text, result.token_ids, originals(result.segments), result.render_diagnostics,
                             len(conv.messages))
            if entry is not None:
                self.cache.put(self._prompt_key(conv, chain, built.gen), entry)
        return result

    # ------------------------------------------------------------------ the shared prompt cache
    def _prompt_key(self, conv: Conversation, chain: Sequence[str], add_generation_prompt: bool) -> CacheKey:
        t = self.template
        return prompt_key(template_version=t.version, tokenizer_version=self.tokenizer.version,
                          policy_version=self.config.cleaning.version, tools=conv.tools, messages=conv.messages,
                          chain=chain, add_generation_prompt=bool(add_generation_prompt),
                          template_kwargs=self._kwargs())

    def _from_cache(self, conv: Conversation, add_generation_prompt: bool, budget: int | None) -> "_Built | None":
        """This exact prompt from the cache; else an earlier prompt of the conversation, extended; else a
        cold assembly through the cache's single flight (N concurrent callers, one render)."""
        assert self.cache is not None
        msgs = conv.messages
        est = None
        if budget is not None:
            # Newest first, stopping once clearly over: a prompt headed for truncation skips the cache
            # (and the hashing of its whole history) at the cost of a few messages' lengths.
            acc = sum(estimate_text(x) for x in conv.tools) * self._ratio
            for m in reversed(msgs):
                acc += estimate_message(m) * self._ratio
                if acc > budget * 0.9:
                    return None
            est = int(acc)
        chain = prefix_chain(msgs)
        key = self._prompt_key(conv, chain, add_generation_prompt)
        entry, src = self.cache.get(key)
        if entry is not None:
            built = self._built_from_entry(conv, entry, src, add_generation_prompt)
            if built is not None and (budget is None or built.used <= budget):
                return built
        for j in range(len(msgs) - 1, max(len(msgs) - 1 - PREFIX_PROBES, 0), -1):
            head = conv.with_messages(msgs[:j])
            e, src = self.cache.get(self._prompt_key(head, chain[:j], True))
            if e is None:
                continue
            prev = self._built_from_entry(head, e, src, True)
            if prev is None:
                break
            inc = extend(self, _Previous.of(prev, src), conv, add_generation_prompt)
            if inc is not None and (budget is None or inc.used <= budget):
                inc.gen = add_generation_prompt
                return inc
            break
        made: list[_Built] = []

        def build() -> CacheEntry:
            b = self._build(conv, add_generation_prompt)
            b.gen = add_generation_prompt
            made.append(b)
            e = to_entry(b.text, b.ids, b.segments, b.diags, len(msgs))
            if e is None or b.escaped:
                raise _Uncacheable()
            return e

        try:
            entry, src = self.cache.get_or_build(key, build)
        except _Uncacheable:
            return made[0] if made else None
        if made:
            made[0].stored, made[0].estimated = True, est
            return made[0]
        return self._built_from_entry(conv, entry, src, add_generation_prompt)

    def _built_from_entry(self, conv: Conversation, entry: CacheEntry, src: str,
                          add_generation_prompt: bool) -> "_Built | None":
        try:
            text, ids, segs, diags, n = from_entry(entry, "fresh")
        except (ValueError, KeyError, TypeError, IndexError):
            return None  # a malformed entry is a miss
        if n != len(conv.messages):
            return None
        built = _Built(conv, text, SegmentList(segs, len(segs), src), ids, list(diags), (), 0.0, 0.0)
        built.inspected, built.reused, built.stored, built.gen = True, len(segs), True, add_generation_prompt
        return built

    # ------------------------------------------------------------------ exact assembly of one conversation
    def _build(self, conv: Conversation, add_generation_prompt: bool, inspect: bool = True) -> "_Built":
        """One exact assembly (rewrite diagnostics only when `inspect`)."""
        clock = time.perf_counter
        t0 = clock()
        msgs = conv.messages
        r, gen_start, pending = self._render(conv, add_generation_prompt)
        t1 = clock()
        spans = layout(r.text, msgs, r.starts, gen_start=gen_start, tools_start=r.tools_start,
                       bos_token=self._kwargs().get("bos_token") or None)
        escaped, diags = self._diagnose(conv, r.text, spans, inspect)
        segments, ids, moved = tokenize_spans(r.text, spans, self.tokenizer, escaped,
                                              None if escaped else pending)
        diags += moved_diagnostics(moved)
        built = _Built(conv, r.text, segments, ids, diags, tuple(escaped), (t1 - t0) * 1e3, (clock() - t1) * 1e3)
        built.spans, built.inspected = spans, inspect
        return built

    def _diagnose(self, conv: Conversation, text: str, spans: list[Span], inspect: bool = True
                  ) -> tuple[list, list[Diagnostic]]:
        msgs = conv.messages
        escaped, diags = apply_policy(scan(msgs, self.tokenizer), msgs, self.config.injection, text, spans)
        if inspect:
            # Python work that needs no token ids runs now, while the encode finishes on other threads.
            diags += inspect_render(text, msgs, spans, self.template.source)
        return escaped, diags

    def _plain(self, conv: Conversation, add_generation_prompt: bool) -> str:
        t = self.template
        return render(t.source, t.name, conv.to_template_messages(), tools=conv.tool_schemas() or None,
                      add_generation_prompt=add_generation_prompt, kwargs=self._kwargs(),
                      limits=self.config.render_limits).text

    def _splice(self, base: "_Built", conv: Conversation, add_generation_prompt: bool) -> "_Built | None":
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
        text = "".join(s.text for s in kept)
        plain = self._plain(conv, add_generation_prompt)
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
        escaped, diags = self._diagnose(conv, text, spans, inspect=False)
        if escaped:
            return None
        built = _Built(conv, text, out, ids, diags, (), (t1 - t0) * 1e3, (clock() - t1) * 1e3)
        built.spliced, built.spans = True, spans
        return built

    def _calibrate(self, built: "_Built", p: Plan, k: int, msgs: tuple[Message, ...]) -> None:
        """Learn this tokenizer's tokens per estimated token from the kept messages (for the next window)."""
        counts = built.seq_tokens()
        est = exact = 0.0
        for u in p.units[k:]:
            for i in u:
                est += estimate_message(msgs[i])
                exact += counts.get(msgs[i].sequence, 0)
        if est > 200:  # enough text to measure; recent content predicts the next request best
            self._ratio = exact / est

    def _cut(self, conv: Conversation, p: Plan, k: int, built: "_Built", budget: int,
             add_generation_prompt: bool) -> tuple["_Built", int]:
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
            tail = _tail_text(self.tokenizer, ids, room)
            if not tail:
                return built, k
            cut_msg = m.with_(content=marker + tail)
            kept = tuple(cut_msg if i == target else msgs[i] for i in range(len(msgs)) if i not in gone)
            trial = self._build(conv.with_messages(kept), add_generation_prompt)
            if trial.used <= budget:
                trial.diags.append(warning("message_cut", f"{m.role} message cut to its last {room} of {len(ids)} "
                                           f"tokens (at a token boundary, marked) to fill the budget", m.sequence))
                trial.cut_seq = m.sequence
                return trial, k - 1
            room -= trial.used - budget + 1
        return built, k

    def _render(self, conv: Conversation, add_generation_prompt: bool) -> tuple[Rendered, int | None, PendingEncode]:
        """Render (tracked), start encoding the output as it comes, and find the generation prompt."""
        t = self.template
        tmsgs = conv.to_template_messages()
        tools = conv.tool_schemas() or None
        kw = self._kwargs()
        # Shipped templates report where they test add_generation_prompt (tests hold that to a
        # second render); other templates get the second render.
        known = t.origin == "shipped"
        # The (GIL-free) encode starts while the template renders and overlaps the Python work
        # after it. It assumes no user text holds a special token, the common case; if one does,
        # the text is encoded again with those spans kept as plain text.
        pending = PendingEncode(self.tokenizer)
        r = render(t.source, t.name, tmsgs, tools=tools, add_generation_prompt=add_generation_prompt,
                   kwargs=kw, track=True, track_generation=known, limits=self.config.render_limits,
                   sink=pending.feed)
        pending.finish(r.text)
        gen_start = None
        if add_generation_prompt and known:
            last_start = max(r.starts.values(), default=0)
            if r.gen_reads and last_start <= r.gen_reads[-1] < len(r.text):
                gen_start = r.gen_reads[-1]
        elif add_generation_prompt and "add_generation_prompt" in t.source:
            # The generation prompt is what the render adds when asked for it.
            plain = render(t.source, t.name, tmsgs, tools=tools, add_generation_prompt=False, kwargs=kw,
                           limits=self.config.render_limits).text
            if r.text.startswith(plain) and len(plain) < len(r.text):
                gen_start = len(plain)
        return r, gen_start, pending

    async def assemble_async(self, request: Any, **kw: Any) -> AssemblyResult:
        return await asyncio.to_thread(self.assemble, request, **kw)

    def session(self, keep: int = 16) -> "Session":
        from .session import Session
        return Session(self, keep)


class _Built:
    """One exact assembly of a conversation (before budget and cache key)."""

    __slots__ = ("conv", "text", "segments", "ids", "diags", "escaped", "render_ms", "tokenize_ms", "spliced",
                 "cut_seq", "spans", "inspected", "reused", "stored", "gen", "estimated", "first_change",
                 "_counts")

    def __init__(self, conv: Conversation, text: str, segments: list[Segment], ids: np.ndarray,
                 diags: list[Diagnostic], escaped: tuple, render_ms: float, tokenize_ms: float):
        self.conv, self.text, self.segments, self.ids = conv, text, segments, ids
        self.diags, self.escaped, self.render_ms, self.tokenize_ms = diags, escaped, render_ms, tokenize_ms
        self.spliced = False
        self.inspected = False        # rewrite diagnostics added
        self.reused = 0               # leading segments taken from the previous result
        self.stored = False           # already in the shared cache
        self.gen = True               # rendered with the generation prompt
        self.estimated: int | None = None  # the fast estimate, when one was made
        self.first_change: int | None = None  # incremental: the first message that differs from before
        self.spans: list[Span] = []
        self.cut_seq: int | None = None
        self._counts: dict[int, int] | None = None

    @property
    def used(self) -> int:
        return len(self.ids)

    @property
    def parts(self) -> dict[str, int]:
        from .budget import Window, measure
        return measure(Window(max(self.used, 1) + 1, 0, "default"), self.conv, self.segments, self.used).parts

    def seq_tokens(self) -> dict[int, int]:
        if self._counts is None:
            counts: dict[int, int] = {}
            for s in self.segments:
                if s.seq is not None:
                    counts[s.seq] = counts.get(s.seq, 0) + s.token_count
            self._counts = counts
        return self._counts


def _dropped(msgs: tuple[Message, ...], p: Plan, k: int) -> list[Dropped]:
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


def _tail_text(tokenizer: Tokenizer, ids: np.ndarray, n: int) -> str:
    """The text of the last n tokens, starting at a whole character (a token boundary)."""
    start = max(len(ids) - n, 0)
    while start < len(ids):
        raw = b"".join(tokenizer.token_bytes(int(t)) for t in ids[start:])
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            start += 1
    return ""


class _Uncacheable(Exception):
    """A build whose prompt the entry format cannot hold (escaped user text): assembled, not cached."""


@dataclass
class _Previous:
    """An earlier prompt of the conversation, from the cache, in the shape extend() reads."""

    conversation: Conversation
    text_source: str
    token_ids: np.ndarray
    segments: list[Segment]
    render_diagnostics: tuple[Diagnostic, ...]
    reuse_source: str
    dropped: tuple = ()
    escaped: tuple = ()
    variables: tuple = ()
    prefix_chain: tuple = ()

    @property
    def text(self) -> str:
        return self.text_source

    @classmethod
    def of(cls, b: "_Built", src: str) -> "_Previous":
        return cls(b.conv, b.text, b.ids, originals(b.segments), tuple(b.diags), src)
