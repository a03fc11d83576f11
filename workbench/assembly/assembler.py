"""The Assembler: normalize -> clean -> render -> segment/tokenize -> budget.

It only composes: each request is prepared (intake, prompt templates, cleaning), then assembled by
the first way that applies, in order: extending the session's previous result (incremental.py),
the shared prompt cache (cached.py), a cold exact assembly or, over budget, truncation
(truncate.py). The stages take the build context (context.py), never the Assembler.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from datetime import datetime
from operator import attrgetter
from typing import Any

from ..budget import Budget, Window, measure, measure_next, resolve_window
from ..cache.keys import extend_chain, prefix_chain, prompt_key, tag_index
from ..cache.store import TwoTierCache
from ..cleaning import CleaningPolicy, clean
from ..conversation import Conversation
from ..diagnostics import Diagnostic, warning
from ..errors import WorkbenchError
from ..injection import ASSISTANT_POLICIES, POLICIES, AssistantPolicy, InjectionPolicy, policies_of
from ..intake import IntakeLimits, normalize
from ..rewrites import inspect_render
from ..segments import SegmentList, originals
from ..templates import ChatTemplate, RenderLimits, get_template
from ..templates.control_tokens import control_token_notes
from ..tokenizers import Tokenizer, get_tokenizer
from ..truncation import Dropped, TruncationPolicy, estimate_message, estimate_text, newest_first
from ..variables import Binding, VariableConfig, expand_messages
from .assembly_metrics import AssemblyMetrics
from .build import exact, render_text
from .built import Built
from .cached import from_cache, store
from .context import BuildContext
from .incremental import extend, first_change
from .media import image_rule, places_images, rule_label
from .refit import overflowed, refit
from .result import AssemblyResult
from .session import Session
from .truncate import Fitted, fitted

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
    # How image parts become tokens (workbench/assembly/media.py): None, the template's own rule
    # (a vision template's model); a rule name, or {"rule": name, ...options}; False: text only.
    vision: Any = None
    # A catalog model (workbench/catalog): its template, tokenizer, window and image rule apply where
    # the configuration does not name its own.
    model: str | None = None
    # Assembled prompts shared across sessions and processes: a TwoTierCache, None for none, or
    # "auto": an in-process tier, plus Redis when WORKBENCH_REDIS_URL is set (SPEC 7.5).
    cache: Any = "auto"


@dataclass
class _Request:
    """One request on its way through `assemble`: what every step after preparing it reads."""

    ctx: BuildContext
    conv: Conversation
    add_generation_prompt: bool
    win: Window
    diags: list[Diagnostic]
    bindings: list[Binding]
    timings: dict[str, float]
    started: float
    prepared: float = 0.0
    overflow: Built | None = None   # the session's previous prompt extended, over the budget


class Assembler:
    """A configured pipeline. `Assembler(template="qwen2.5")` picks the template's own tokenizer."""

    def __init__(self, template: str | ChatTemplate | None = None, tokenizer: str | Tokenizer | None = None,
                 **options: Any):
        notes: list[Diagnostic] = []
        if options.get("model") is not None:
            template, tokenizer = _from_model(options, template, tokenizer, notes)
        self.config = AssemblerConfig(template=template if template is not None else "chatml", tokenizer=tokenizer,
                                      **options)
        for opt, allowed in (("injection", POLICIES), ("tool_injection", POLICIES),
                             ("assistant_injection", ASSISTANT_POLICIES)):
            if getattr(self.config, opt) not in allowed:
                raise WorkbenchError(f"unknown {opt} policy {getattr(self.config, opt)!r}",
                                     hint=f"use one of {', '.join(allowed)}")
        self.template = get_template(self.config.template)
        self._notes: list[Diagnostic] = notes
        tok = self.config.tokenizer or self.template.tokenizer
        if tok is None:
            tok = FALLBACK_TOKENIZER
            self._notes.append(warning("no_natural_tokenizer",
                                       f"template {self.template.name!r} has no offline tokenizer; counting with "
                                       f"{FALLBACK_TOKENIZER} (ids are not the model's; pass a tokenizer: hf:DIR)"))
        self.tokenizer = get_tokenizer(tok)
        # Control tokens of the template this tokenizer lacks become plain text: said on every result.
        self._notes += control_token_notes(self.template, self.tokenizer)
        # Tokens per estimated token for this tokenizer, learned from exact counts as truncation runs.
        self.ratio = 1.0
        self.metrics = AssemblyMetrics()
        self.cache = _cache(self.config.cache)
        if self.config.context_window is not None or self.config.reserve is not None:
            # Refuse an impossible window at configuration time, not at the first request.
            self.window(Conversation(messages=()))
        c = self.config
        other = {f.name: getattr(c, f.name) for f in dataclass_fields(c)
                 if f.name not in ("template", "tokenizer", "cache", "template_kwargs", "render_limits",
                                   "injection", "tool_injection", "assistant_injection", "vision")}
        vision = image_rule(c.vision, self.template.vision, self.tokenizer)
        if vision is not None and not places_images(vision, self.template):
            # A model's image rule with a template chosen by hand that writes no image placeholder: the
            # images cannot be placed, so the template renders the text alone (and says so).
            self._notes.append(warning("template_places_no_images",
                                       f"template {self.template.name!r} writes no {vision.replaced!r} for the "
                                       f"{vision.name!r} image rule: images are left out of the prompt (choose the "
                                       "model's own template to place them)"))
            vision = None
        self.context = BuildContext.of(self.template, self.tokenizer, template_kwargs=c.template_kwargs,
                                       injection=policies_of(c), render_limits=c.render_limits, other=other,
                                       vision=vision)

    # ------------------------------------------------------------------ stages
    def normalize(self, request: Any) -> tuple[Conversation, list[Diagnostic]]:
        return normalize(request, self.config.intake)

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

    def context_at(self, now: datetime | None = None) -> BuildContext:
        """The build context of an assembly starting `now` (the clock matters only to templates that read it)."""
        return self.context.at(now)

    def render_text(self, conv: Conversation, add_generation_prompt: bool) -> str:
        """The template's text for `conv` (untracked, escaped strings restored), no tokens: what
        prefix analysis compares."""
        return render_text(self.context_at(), conv, add_generation_prompt)

    # ------------------------------------------------------------------ one request
    def assemble(self, request: Any, *, add_generation_prompt: bool | None = None,
                 previous: AssemblyResult | None = None,
                 normalized: tuple[Conversation, list[Diagnostic]] | None = None,
                 cleaned: tuple[Conversation, list[Diagnostic]] | None = None) -> AssemblyResult:
        """Assemble a request. With `previous` (the last result of the same conversation, as a
        Session passes it), the unchanged prefix is reused and only the rest is rendered and tokenized;
        the ids are exactly those of a cold assembly either way."""
        started = time.perf_counter()
        ctx = self.context_at()
        conv, diags, bindings, timings = self.prepare(request, normalized, cleaned)
        if add_generation_prompt is None:
            add_generation_prompt = not conv.messages or conv.messages[-1].role != "assistant"
        req = _Request(ctx, conv, add_generation_prompt, self.window(conv), diags, bindings, timings, started)
        req.prepared = time.perf_counter()
        if previous is not None and previous.context != ctx.fingerprint:
            previous = None   # assembled under other settings (or another day's date): nothing to reuse
        policy = self.config.truncation
        outcome = None
        if previous is not None and previous.kept is not None and policy.enabled and not req.bindings:
            # The previous prompt was truncated: keep its window, extended and refitted by difference.
            t = time.perf_counter()
            outcome = refit(ctx, previous, conv, add_generation_prompt, req.win, policy, self.ratio)
            req.timings["incremental"] = (time.perf_counter() - t) * 1e3
            if outcome is not None:
                return self._finish(req, outcome, previous)
        reused = self._reused(req, previous)
        if reused is not None:
            outcome = Fitted(reused, (), (), {"exact_assemblies": 0 if reused.reused else 1, "splices": 0},
                             reused.estimated, self.ratio)
        elif policy.enabled:
            first = overflowed(ctx, req.overflow, req.win, policy, self.ratio) if req.overflow is not None else None
            if first is not None:
                return self._finish(req, first, previous)
            outcome = fitted(ctx, conv, add_generation_prompt, req.win, policy, self.ratio)
            self.ratio = outcome.ratio
        else:
            built = exact(ctx, conv, add_generation_prompt)
            outcome = Fitted(built, (), (built,), {"exact_assemblies": 1, "splices": 0}, None, self.ratio)
        from_session = reused is not None and reused.hit is None and reused.reused > 0
        return self._finish(req, outcome, previous if from_session else None)

    def _reused(self, req: _Request, previous: AssemblyResult | None) -> Built | None:
        """The prompt built from an earlier one: the session's previous result extended, else the
        shared cache. None when neither applies or the prompt is headed for truncation."""
        if req.bindings:
            return None   # prompt-template values change per request: never reused
        policy = self.config.truncation
        budget = policy.history_budget(req.win.input_budget) if policy.enabled else None
        if previous is not None:
            t = time.perf_counter()
            inc = extend(req.ctx, previous, req.conv, req.add_generation_prompt)
            req.timings["incremental"] = (time.perf_counter() - t) * 1e3
            if inc is not None and (budget is None or inc.used <= budget):
                return inc
            req.overflow = inc   # over budget: truncation starts from it (or cold)
        if self.cache is None:
            return None
        estimated = None
        if budget is not None:
            msgs = req.conv.messages
            tools = sum(estimate_text(x) for x in req.conv.tools) * self.ratio
            acc, _ = newest_first(lambda i: estimate_message(msgs[i]) * self.ratio, len(msgs), tools, budget * 0.9)
            if acc > budget * 0.9:
                return None   # headed for truncation: skip the cache (and hashing the whole history)
            estimated = int(acc)
        cached = from_cache(req.ctx, self.cache, req.conv, req.add_generation_prompt, budget, estimated)
        return cached if cached is not None and (budget is None or cached.used <= budget) else None

    def _finish(self, req: _Request, outcome: Fitted, previous: AssemblyResult | None) -> AssemblyResult:
        """The result: the built prompt with its key, budget, diagnostics and timings; recorded in the
        metrics, and shared through the cache when it may be."""
        built, conv = outcome.built, outcome.built.conv
        timings = _timings(req, built, outcome.made)
        if not built.inspected:
            # Not inspected: a cold assembly or a splice, whose text is a str already (str() returns it).
            built = replace(built, diags=built.diags + tuple(inspect_render(
                str(built.text), conv.messages, built.spans, self.template.source)), inspected=True)
        diags = req.diags + list(outcome.notes) + list(built.diags)
        chain = _chain(conv, built, previous)
        key = prompt_key(req.ctx.fingerprint, conv.tools, chain, built.gen, tag_at=tag_index(conv.messages))
        bud = _budget(req.win, built, outcome, previous)
        if bud.used == 0 and conv.messages:
            # A template that renders nothing (a `{# nothing #}` custom template) is a bug, not a prompt.
            diags.append(warning("empty_render", f"the template rendered no text for {len(conv.messages)} "
                                 "message(s): 0 tokens"))
        if bud.used > bud.input_budget:
            diags.append(warning("over_budget", f"prompt uses {bud.used} tokens, {bud.used - bud.input_budget}"
                                 f" over the input budget of {bud.input_budget}"))
        timings["total"] = (time.perf_counter() - req.started) * 1e3
        result = AssemblyResult(
            template={"name": self.template.name, "version": self.template.version},
            tokenizer={"name": self.tokenizer.name, "version": self.tokenizer.version},
            text_source=built.text, ids_source=built.ids,
            segments=built.segments if isinstance(built.segments, SegmentList) else tuple(built.segments),
            budget=bud, dropped=outcome.dropped, cache_key=key, diagnostics=tuple(self._notes + diags),
            timings_ms=timings, conversation=conv, cache_hits=_hits(built), escaped=tuple(sorted(built.escaped)),
            variables=tuple(req.bindings), prefix_chain=chain, render_diagnostics=built.diags,
            context=req.ctx.fingerprint, kept=outcome.window, image_rule=rule_label(req.ctx.vision))
        self.metrics.record(result)
        if self.cache is not None and not req.bindings and not outcome.dropped and not built.escaped and \
                not built.stored and (not built.reused or self.cache.redis_enabled):
            # Share the prompt: a later request of this conversation, in any process, extends it.
            # (Incremental results go to Redis only: in-process, the session holds them already.)
            # Not a prompt with escaped text: the cache entry does not carry which spans were escaped,
            # and a prompt extended from it would let that text become control tokens.
            store(self.cache, key, conv, result)
        return result

    async def assemble_async(self, request: Any, **kw: Any) -> AssemblyResult:
        return await asyncio.to_thread(self.assemble, request, **kw)

    def session(self, keep: int = 16) -> Session:
        return Session(self, keep)


def _from_model(options: dict[str, Any], template: Any, tokenizer: Any, notes: list[Diagnostic]) -> tuple[Any, Any]:
    """A catalog model's settings, each where the caller gave none (`options` is filled in)."""
    from ..catalog import lookup
    from ..media import openai_estimate
    entry = lookup(options["model"])
    if options.get("context_window") is None:
        options["context_window"] = entry.context_window
    if "vision" not in options:
        vision: Any = False
        if entry.vision == "openai":
            model = entry.price_model or entry.id.split("/")[-1]
            try:
                openai_estimate(model)
                vision = {"rule": "openai", "model": model}
            except WorkbenchError:
                notes.append(warning("no_image_estimate", f"OpenAI publishes no image token estimate for {model!r}: "
                                     "images are not counted (docs/media.md)"))
        elif entry.vision is not None:
            vision = {"rule": entry.vision, **entry.vision_options}
        options["vision"] = vision
    return (template if template is not None else entry.template,
            tokenizer if tokenizer is not None else entry.tokenizer)


def _cache(cache: Any) -> TwoTierCache | None:
    if cache == "auto":
        return TwoTierCache.from_env(local_bytes=AUTO_CACHE_BYTES)
    if cache is not None and not isinstance(cache, TwoTierCache):
        raise WorkbenchError(f"cache must be a TwoTierCache, None or 'auto', got {type(cache).__name__}")
    return cache


def _timings(req: _Request, built: Built, made: Sequence[Built]) -> dict[str, float]:
    every = list(made) if any(b is built for b in made) else [*made, built]
    timings = dict(req.timings)
    timings["render"] = sum(b.render_ms for b in every)
    timings["tokenize"] = sum(b.tokenize_ms for b in every)
    timings["budget"] = (time.perf_counter() - req.prepared) * 1e3 - built.render_ms - built.tokenize_ms
    return timings


def _chain(conv: Conversation, built: Built, previous: AssemblyResult | None) -> tuple[str, ...]:
    """The message fingerprint chain, extended from the previous result's where it is unchanged."""
    if previous is not None and previous.prefix_chain:
        start = built.first_change if built.first_change is not None else \
            first_change(previous.conversation.messages, conv.messages)
        return extend_chain(previous.prefix_chain, conv.messages, start)
    if built.chain is not None and built.conv is conv:
        return built.chain
    return tuple(prefix_chain(conv.messages))


def _budget(win: Window, built: Built, outcome: Fitted, previous: AssemblyResult | None) -> Budget:
    if previous is not None and built.reused:
        return measure_next(win, built.conv, previous.budget, previous.conversation, originals(previous.segments),
                            built.reused, originals(built.segments), len(built.ids), **outcome.counts)
    return measure(win, built.conv, originals(built.segments), len(built.ids), outcome.estimated, **outcome.counts)


def _hits(built: Built) -> dict[str, int]:
    return {"local": int(built.hit == "local"), "redis": int(built.hit == "redis")}


__all__ = ["AUTO_CACHE_BYTES", "Assembler", "AssemblerConfig", "Dropped", "FALLBACK_TOKENIZER"]
