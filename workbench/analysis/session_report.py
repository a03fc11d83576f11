"""One logged session analysed (docs/logs.md): the pure function both runners call.

`analyze_session(cid, lines, assemblers)` takes a conversation's lines in turn order (their raw
bytes, with file and line for diagnostics) and returns what the aggregate counts: per turn its
tokens, what the engine held, what it reused, the first cause and the fix for it. Nothing global
changes; `Assemblers` is the caller's memo of loaded templates and tokenizers (one per worker),
and each session starts from the same assembler state, so a session's report does not depend on
which sessions the worker analysed before it.

A turn rendered with another template than the previous turn of its conversation (a template
upgrade mid-session) is compared with what the engine held after the previous turn as ITS
template rendered it; the cause is `template_changed`. Where the two templates' tokenizers differ,
the engine (another model) holds nothing of this prompt: all it held is lost.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..assembly import Assembler
from ..assembly.assembly_metrics import AssemblyMetrics
from ..assembly.result import AssemblyResult
from ..conversation import Conversation, Message
from ..difference import first_difference
from ..errors import WorkbenchError
from ..intake.chain import ResponseChain
from ..templates import DEFAULT_TEMPLATE, SHIPPED, RenderLimits
from .fixes import fix_for_cause
from .logs import BadLine, LoggedRequest, parse_line
from .prefix import _VOLATILE, Cause, _causes, _compare, _reply, generated_pair, has_media
from .reconcile import Reconciler, SessionReconciliation, is_engine

PREVIEW_CHARS = 80
VOLATILE_MARK = "<volatile>"
TEMPLATE_CHANGED_ADVICE = ("The server rendered this conversation with another chat template than its previous "
                           "turn (a template upgrade mid-session): nothing after the first difference is reused. "
                           "Roll template upgrades out to new conversations only (pin the template per "
                           "conversation), or accept one full prefill per conversation at the switch.")


@dataclass(frozen=True)
class Options:
    """What every worker needs to analyse any session (picklable: it travels to Ray workers)."""
    template: str | None = None       # for lines without "template"; None: the CLI's default
    tokenizer: str | None = None      # None: each template's natural tokenizer
    provider: str | None = None       # reconciliation: the provider of lines that name none (--provider)
    calls: bool = False               # keep every reconciled call (--reconcile-calls), not only the counts
    # --template-arg, as canonical JSON ("" none: hashable, and it travels to Ray's actors as it is):
    # every logged request renders with them, whatever template its line names (as a server passes
    # chat_template_kwargs).
    template_args: str = ""

    @property
    def default_template(self) -> str:
        return self.template or DEFAULT_TEMPLATE

    @property
    def template_kwargs(self) -> dict[str, Any]:
        return json.loads(self.template_args) if self.template_args else {}


class Assemblers:
    """One Assembler per template name, loaded on first use: templates and tokenizers load once per
    worker, not per session. No shared prompt cache: sessions are independent by construction."""

    def __init__(self, options: Options):
        self.options = options
        self._by: dict[str, Assembler] = {}

    def get(self, template: str) -> Assembler:
        asm = self._by.get(template)
        if asm is None:
            # A template file or folder (from --template) renders in its own process, as every command does.
            limits = RenderLimits() if template in SHIPPED else RenderLimits(isolate=True)
            kwargs = self.options.template_kwargs
            asm = self._by[template] = Assembler(template=template, tokenizer=self.options.tokenizer, cache=None,
                                                 render_limits=limits,
                                                 **({"template_kwargs": kwargs} if kwargs else {}))
        return asm


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One turn of k ≥ 1 as the aggregate counts it. lost = held − reused (0 on turn 1)."""
    turn: int
    tokens: int
    held: int
    reused: int
    code: str | None                  # the first cause: where the prefix diverges
    fix: str | None                   # the one-click fix for that cause (fixes.py), if there is one
    template: str
    system: str                       # sha256 of the system prompt, volatile values masked
    preview: str                      # its first characters, masked the same way
    provider: str | None              # the line's "provider", if it named one
    client: str | None = None         # the line's "client", if it named one

    @property
    def lost(self) -> int:
        return self.held - self.reused


@dataclass(frozen=True, slots=True)
class SessionReport:
    conversation_id: str
    turns: tuple[TurnRow, ...]
    bad: tuple[BadLine, ...]
    reconciliation: SessionReconciliation | None = None


@dataclass(slots=True)
class _Prev:
    asm: Assembler
    result: AssemblyResult
    full: Conversation
    media: bool = False       # whether `result` holds an image (prefix.has_media)


class _SystemTexts:
    """The system prompt of each turn's conversation (`system_text`), found from the previous turn's:
    the system messages before the first message that changed are the same, so only those after it
    are looked for (a long conversation is not read whole on every turn)."""

    def __init__(self) -> None:
        self._msgs: tuple[Message, ...] = ()
        self._found: list[tuple[int, str]] = []    # (index, content) of each system message

    def of(self, conv: Conversation) -> str:
        msgs = conv.messages
        same = first_difference(self._msgs, msgs)
        found = self._found[:bisect.bisect_left(self._found, (same, ""))]
        found += [(i, m.content or "") for i, m in enumerate(msgs[same:], start=same) if m.role == "system"]
        self._msgs, self._found = msgs, found
        return "\n".join(text for _, text in found)


def analyze_session(cid: str, lines: Sequence[tuple[str, int, bytes]], assemblers: Assemblers) -> SessionReport:
    """`lines`: (file name, line number, raw bytes) in turn order. A line that is not a request, or
    whose request cannot be assembled, is reported and skipped: the next turn is compared with the
    last one that was."""
    report = _analyze_session(cid, lines, assemblers, _may_reconcile(lines, assemblers.options.provider))
    # A line naming a provider or carrying a response in a form the byte test missed (a key written
    # with escapes): analysed again, keeping the prompts (the figures are the same either way).
    return report if report is not None else _analyze_session(cid, lines, assemblers, True)  # type: ignore[return-value]


def _analyze_session(cid: str, lines: Sequence[tuple[str, int, bytes]], assemblers: Assemblers,
                     keep: bool) -> SessionReport | None:
    """`analyze_session`; `keep`: whether the reconciliation keeps every turn's prompt (None when it
    must and `keep` is False)."""
    rows: list[TurnRow] = []
    bad: list[BadLine] = []
    prev: _Prev | None = None
    session = None
    systems: dict[str, tuple[str, str]] = {}   # this session's system prompts: masked once each
    texts = _SystemTexts()
    chain = ResponseChain()                    # Responses requests that continue a logged response
    rec = Reconciler(cid, assemblers.options.provider, shared_engines=True, keep_results=keep)
    for name, line, raw in lines:
        item = parse_line(raw, cid, name, line)
        if isinstance(item, BadLine):
            bad.append(item)
            continue
        if item.template is not None and item.template not in SHIPPED:
            # A log is data, not configuration: a line may name a shipped template, never a file.
            bad.append(BadLine(name, line, f"template: {item.template[:60]!r} is not a shipped template name "
                                           f"({', '.join(sorted(SHIPPED))})"))
            continue
        if not keep and (item.response is not None or item.provider is not None):
            return None
        template = item.template or assemblers.options.default_template
        try:
            asm = assemblers.get(template)
            if session is None or session.assembler is not asm:
                _reset(asm)
                session = asm.session(keep=1)
            request = chain.resolve(item.request)
            chain.record(request, item.response)
            res = session.assemble(request)
            full = session.prepared
            if full is None:    # prompt templates expanded in it: the assembler prepared it
                full = res.conversation if not res.dropped else asm.prepare(request)[0]
        except WorkbenchError as exc:
            bad.append(BadLine(name, line, f"request: {exc.message}"))
            continue
        media = has_media(res, prev.result if prev is not None and prev.asm is asm else None,
                          prev.media if prev is not None else True)
        row, reply = _row(len(rows) + 1, prev, asm, res, full, template, item, systems, texts, media)
        rows.append(row)
        rec.add(name, line, timestamp=item.timestamp, when=item.when, provider=item.provider, response=item.response,
                result=res, cause=row.code, previous_reply=reply)
        prev = _Prev(asm, res, full, media)
    return SessionReport(cid, tuple(rows), tuple(bad), rec.finish())


def _may_reconcile(lines: Sequence[tuple[str, int, bytes]], provider: str | None) -> bool:
    """Whether the reconciliation may read the session's prompts at its end: some line carries a
    response or names a provider (read as bytes, before any line is parsed), or the default provider
    is an engine's. Otherwise it reads none, and they are not kept (every turn's prompt of a long
    session, held to its end, would cost memory quadratic in its length)."""
    if provider is not None and is_engine(provider):
        return True
    return any(b'"response"' in raw or b'"provider"' in raw for _, _, raw in lines)


def _reset(asm: Assembler) -> None:
    # What an Assembler learns while it runs (the token ratio truncation estimates with, the
    # metrics): reset, so that a session's figures never depend on the sessions before it.
    asm.ratio = 1.0
    asm.metrics = AssemblyMetrics()


def _row(k: int, prev: _Prev | None, asm: Assembler, res: AssemblyResult, full: Conversation, template: str,
         item: LoggedRequest, systems: dict[str, tuple[str, str]], texts: _SystemTexts,
         media: bool) -> tuple[TurnRow, np.ndarray | None]:
    """The turn's row, and the reply to the previous turn as the model generated it (what the
    engine holds beyond that turn's prompt; None where unknown)."""
    text = texts.of(full)
    key = systems.get(text)
    if key is None:
        key = systems[text] = system_key(text)
    sha, preview = key
    if prev is None:
        return TurnRow(k, res.total_tokens, 0, 0, None, None, template, sha, preview, item.provider,
                       item.client), None
    reply = None
    if prev.asm is asm:
        t = _compare(asm, k, prev.result, prev.full, res, full, generate=generated_pair, media=(prev.media, media))
        held, reused, causes = t.held_tokens, t.reused_tokens, list(t.causes)
        reply = t.reply_ids          # what the engine holds past the previous prompt (None: nothing)
    else:
        held, reused, causes = _across(prev, asm, res, full)
    first = causes[0] if causes else None
    return TurnRow(k, res.total_tokens, held, reused, first.code if first else None,
                   fix_for_cause(first.code, first.message) if first else None, template, sha, preview,
                   item.provider, item.client), reply


def _across(prev: _Prev, asm: Assembler, res: AssemblyResult, full: Conversation) -> tuple[int, int, list[Cause]]:
    """Held, reused and causes when this turn's template is not the previous turn's."""
    old = prev.asm
    reply = _reply(prev.full, full)
    generated, _ = generated_pair(old, prev.result, reply)
    held = prev.result.token_ids if not generated else np.concatenate(
        [prev.result.token_ids, old.tokenizer.encode_with_specials(generated)]).astype(np.uint32, copy=False)
    new = res.token_ids
    n = min(len(held), len(new))
    same_vocab = (old.tokenizer.name, old.tokenizer.version) == (asm.tokenizer.name, asm.tokenizer.version)
    first = first_difference(held, new) if same_vocab else 0
    d = first if first < n or len(held) > len(new) else None
    if d is None:
        return len(held), n, []
    seg = next((s for s in res.segments if s.start <= d < s.end), res.segments[-1] if res.segments else None)
    where = f"token {d}" + (f", {seg.kind}" if seg else "")
    changed = Cause("template_changed", f"rendered with template {asm.template.name!r}; the previous turn "
                    f"with {old.template.name!r}" + ("" if same_vocab else ", another tokenizer") +
                    f"; the prompt changes at {where}", TEMPLATE_CHANGED_ADVICE)
    # What else changed (an edited message, say) follows; the template's own difference is this one.
    others = _causes(prev.result, res, d, seg, False, reply, len(prev.result.token_ids), asm.config.truncation)
    rest = [c for c in others if c.code not in ("template_rewrite", "generation_prompt_mismatch")]
    return len(held), d, [changed, *rest]


def system_text(conv: Conversation) -> str:
    return "\n".join(m.content or "" for m in conv.messages if m.role == "system")


def system_key(text: str) -> tuple[str, str]:
    """The system prompt's identity across requests: sha256 of its text with volatile values
    (timestamps, ids, dates) masked, so one prompt with a clock in it counts as one prompt."""
    masked = _VOLATILE.sub(VOLATILE_MARK, text)
    preview = " ".join(masked.split())[:PREVIEW_CHARS] if masked.strip() else "(no system prompt)"
    return hashlib.sha256(masked.encode("utf-8")).hexdigest(), preview
