"""The Assembler: normalize -> clean -> render -> segment/tokenize -> budget.

Each stage is a pure function of its inputs; the Assembler only composes them
and times them. Configure once, assemble many requests.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .cache.keys import cache_key
from .cleaning import CleaningPolicy, clean
from .conversation import Conversation
from .diagnostics import Diagnostic, info, warning
from .errors import WorkbenchError
from .injection import POLICIES, InjectionPolicy, apply_policy, scan
from .intake import IntakeLimits, normalize
from .result import AssemblyResult, Budget
from .rewrites import inspect_render
from .segments import PendingEncode, layout, tokenize_spans
from .templates import ChatTemplate, Rendered, RenderLimits, get_template, render
from .tokenizers import Tokenizer, get_tokenizer

if TYPE_CHECKING:
    from .session import Session

DEFAULT_CONTEXT_WINDOW = 131072
DEFAULT_RESERVE = 4096
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

    def assemble(self, request: Any, *, add_generation_prompt: bool | None = None) -> AssemblyResult:
        clock = time.perf_counter
        t0 = clock()
        timings: dict[str, float] = {}
        conv, diags = self.normalize(request)
        t1 = clock()
        timings["normalize"] = (t1 - t0) * 1e3
        conv, d = clean(conv, self.config.cleaning)
        diags += d
        t2 = clock()
        timings["clean"] = (t2 - t1) * 1e3

        msgs = conv.messages
        if add_generation_prompt is None:
            add_generation_prompt = not msgs or msgs[-1].role != "assistant"
        r, gen_start, pending = self._render(conv, add_generation_prompt)
        t3 = clock()
        timings["render"] = (t3 - t2) * 1e3

        t = self.template
        spans = layout(r.text, msgs, r.starts, gen_start=gen_start, tools_start=r.tools_start,
                       bos_token=self._kwargs().get("bos_token") or None)
        escaped, d = apply_policy(scan(msgs, self.tokenizer), msgs, self.config.injection, r.text, spans)
        diags += d
        # Python work that needs no token ids runs now, while the encode finishes on other threads.
        diags += inspect_render(r.text, msgs, spans, t.source)
        key = cache_key(template_version=t.version, tokenizer_version=self.tokenizer.version,
                        policy_version=self.config.cleaning.version, tools=conv.tools, messages=msgs)
        segments, ids, moved = tokenize_spans(r.text, spans, self.tokenizer, escaped,
                                              None if escaped else pending)
        if moved:
            diags.append(info("segment_boundary_moved", "a segment boundary fell inside a token and was moved to "
                              "the token boundary before it"))
        timings["tokenize"] = (clock() - t3) * 1e3

        budget = self._budget(conv, segments, len(ids))
        if budget.used > budget.input_budget:
            diags.append(warning("over_budget", f"prompt uses {budget.used} tokens, {budget.used - budget.input_budget}"
                                 f" over the input budget of {budget.input_budget}"))
        timings["total"] = (clock() - t0) * 1e3
        return AssemblyResult(
            template={"name": t.name, "version": t.version},
            tokenizer={"name": self.tokenizer.name, "version": self.tokenizer.version},
            text=r.text, token_ids=ids, segments=tuple(segments), budget=budget, dropped=(),
            cache_key=key, diagnostics=tuple(self._notes + diags), timings_ms=timings, conversation=conv,
            escaped=tuple(sorted(escaped)))

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

    def _budget(self, conv: Conversation, segments: list, used: int) -> Budget:
        cw = self.config.context_window or self.template.context_window or DEFAULT_CONTEXT_WINDOW
        reserve = conv.params.max_tokens if conv.params.max_tokens is not None else (
            self.config.reserve if self.config.reserve is not None else (self.template.reserve or DEFAULT_RESERVE))
        by_kind: dict[str, int] = {}
        for s in segments:
            by_kind[s.kind] = by_kind.get(s.kind, 0) + s.token_count
        return Budget(context_window=cw, reserve=reserve, input_budget=max(cw - reserve, 0), used=used,
                      by_kind=by_kind)

    def session(self) -> "Session":
        from .session import Session
        return Session(self)
