"""Teaching mode (SPEC 6): one session's prompt told as a story, step by step.

messages -> template -> text with special tokens -> token ids -> budget -> prefill and KV cache ->
the next turn reuses the prefix. Each step is a plain `TeachingStep`: a summary in words, an
escaped HTML fragment with this session's data, and the numbers as JSON-ready `data`, so the
notebook, the app and the tests read the same thing. No UI library is imported here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np

from ..difference import first_difference
from ..engine.kv import KV_CONFIGS, KVConfig  # noqa: F401 - KVConfig re-exported for the views
from ..errors import WorkbenchError

if TYPE_CHECKING:
    from ..analysis import TurnAnalysis
    from ..assembly import Assembler
    from ..assembly.result import AssemblyResult
    from ..sessions import SessionFile
    from ..tokenizers.base import Tokenizer

STEP_KEYS = ("messages", "template", "text", "tokens", "budget", "prefill", "reuse")
SOURCE_LINES = 40        # of the Jinja source: enough to see the loop over messages
TOKEN_ROWS = 48          # of the token table: the first turn's framing and some words
RUN_LIMIT = 1500         # characters of ordinary text shown whole; longer runs keep head and tail


DEFAULT_KV = "Llama-3-8B"

TEACHING_CSS = """
.wb-teaching{font:14px/1.45 system-ui,sans-serif;max-width:60rem} .wb-teaching h3{margin:.8em 0 .2em}
.wb-t-summary{margin:.2em 0 .6em} .wb-t-muted{color:#777} .wb-t-table{border-collapse:collapse;font-size:13px}
.wb-t-table td,.wb-t-table th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
.wb-t-src,.wb-t-text{white-space:pre-wrap;font:12px/1.4 ui-monospace,monospace;background:#f7f7f7;
  padding:6px;max-height:24rem;overflow:auto}
mark.wb-t-special{background:#333;color:#fff;border-radius:3px;padding:0 2px}
.wb-t-bar{display:flex;height:14px;max-width:40rem;border:1px solid #ccc}
.wb-t-reused{background:#4caf50}.wb-t-new{background:#ff9800}
"""
_STYLE = f"<style>{TEACHING_CSS}</style>"
# Presentation mode: readable from the back of a room. The data part keeps its own sizes, capped in
# height, so that a step stays one screen.
PRESENT_CSS = """
.wb-present{font:22px/1.4 system-ui,sans-serif;padding:1.2rem 1.6rem;min-height:70vh;display:flex;
  flex-direction:column;gap:.8rem}
.wb-p-step{font-size:20px;color:#57606a;letter-spacing:.02em}
.wb-p-idea{font-size:34px;line-height:1.3;font-weight:600;margin:0;max-width:52rem}
.wb-p-more{font-size:22px;margin:0;color:#424a53;max-width:52rem}
.wb-p-data{font-size:17px;max-height:45vh;overflow:auto;border-top:1px solid #d0d7de;padding-top:.6rem}
.wb-p-data .wb-t-table{font-size:16px} .wb-p-data .wb-t-src,.wb-p-data .wb-t-text{font-size:15px;max-height:40vh}
.wb-p-data .wb-t-bar{height:28px}
.wb-p-dots{display:flex;gap:.5rem;margin-top:auto}
.wb-p-dot{width:14px;height:14px;border-radius:50%;background:#d0d7de} .wb-p-dot.wb-p-on{background:#0969da}
"""


@dataclass(frozen=True)
class TeachingStep:
    key: str
    title: str
    summary: str     # the story of this step, in one or two plain sentences
    html: str        # a self-contained, escaped fragment with this session's data
    data: dict       # the numbers the step shows, JSON-serializable


def _kv(name: str | KVConfig | None) -> KVConfig:
    if isinstance(name, KVConfig):
        return name
    cfg = KV_CONFIGS.get(name or DEFAULT_KV)
    if cfg is None:
        raise WorkbenchError(f"unknown KV config {name!r}", hint=f"use one of {', '.join(KV_CONFIGS)}")
    return cfg


def _size(n: int) -> str:
    x = float(n)
    for unit in ("B", "KiB", "MiB"):
        if x < 1024:
            return f"{x:.4g} {unit}"
        x /= 1024
    return f"{x:.4g} GiB"


def _table(rows: Sequence[Sequence[Any]], head: Sequence[str]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="wb-t-table"><tr>{th}</tr>{body}</table>'


def _step(key: str, title: str, summary: str, body: str, data: dict) -> TeachingStep:
    html = f'{_STYLE}<div class="wb-teaching"><p class="wb-t-summary">{escape(summary)}</p>{body}</div>'
    return TeachingStep(key, title, summary, html, data)


def _messages(result: "AssemblyResult") -> TeachingStep:
    msgs = result.conversation.messages
    # A long chat has hundreds of messages; the opening and the latest ones carry the story.
    shown = list(msgs) if len(msgs) <= 12 else [*msgs[:2], None, *msgs[-9:]]
    rows = [("…", f'<span class="wb-t-muted">{len(msgs) - 11} more messages</span>') if m is None else
            (escape(m.role), escape((m.content or "") + "".join(f"\n→ {c.name}({c.arguments})"
                                                                for c in m.tool_calls)))
            for m in shown]
    data = {"messages": len(msgs), "roles": dict(Counter(m.role for m in msgs)),
            "tools": len(result.conversation.tools)}
    summary = (f"The conversation is a list of {len(msgs)} messages, each with a role and content"
               + (f", plus {data['tools']} tool schema(s)." if data["tools"] else "."))
    return _step("messages", "Messages", summary, _table(rows, ("role", "content")), data)


def _template(result: "AssemblyResult", source: str | None) -> TeachingStep:
    name, version = result.template["name"], result.template["version"]
    lines = (source or "").splitlines()
    more = f"\n… {len(lines) - SOURCE_LINES} more lines" if len(lines) > SOURCE_LINES else ""
    body = f"<p>template <b>{escape(name)}</b> · version <code>{escape(version[:12])}</code></p>" + (
        f'<pre class="wb-t-src">{escape(chr(10).join(lines[:SOURCE_LINES]) + more)}</pre>' if source is not None
        else '<p class="wb-t-muted">(template source not given)</p>')
    summary = (f"The chat template {name} is a Jinja program that loops over the messages and writes each one "
               "between the model's own control tokens.")
    return _step("template", "Chat template", summary, body,
                 {"name": name, "version": version, "lines": len(lines), "shown": min(len(lines), SOURCE_LINES)})


def visible_whitespace(piece: str) -> str:
    """A token piece with its whitespace drawn (a lone space would be an empty table cell)."""
    return piece.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")


def _specials(result: "AssemblyResult", tok: "Tokenizer") -> list[tuple[int, int, str]]:
    """Special-token strings that became control tokens: those a user typed were escaped to plain text."""
    esc = result.escaped
    return [(s, e, t) for s, e, t in tok.find_specials(result.text)
            if not any(a <= s and e <= b for a, b in esc)]


def _text(result: "AssemblyResult", tok: "Tokenizer") -> TeachingStep:
    text, specials = result.text, _specials(result, tok)
    parts, pos = [], 0

    def plain(run: str) -> str:
        # A long document would bury the control tokens; every special token stays, long runs are cut.
        if len(run) > RUN_LIMIT:
            cut = len(run) - RUN_LIMIT
            return (escape(run[:1000]) + f'<span class="wb-t-muted">[… {cut} characters …]</span>'
                    + escape(run[-500:]))
        return escape(run)
    for s, e, t in specials:
        parts.append(plain(text[pos:s]) + f'<mark class="wb-t-special">{escape(t)}</mark>')
        pos = e
    parts.append(plain(text[pos:]))
    names = sorted({t for _, _, t in specials})
    summary = (f"Rendering gives one string of {len(text)} characters; the {len(specials)} highlighted special "
               "tokens are how the model sees where each message begins and ends.")
    return _step("text", "Text with special tokens", summary, f'<pre class="wb-t-text">{"".join(parts)}</pre>',
                 {"chars": len(text), "special_tokens": len(specials), "specials_used": names})


def _tokens(result: "AssemblyResult", tok: "Tokenizer") -> TeachingStep:
    ids = result.token_ids
    first = ids[:TOKEN_ROWS]
    special = np.isin(ids, tok.special_ids)
    rows = [(str(i), str(int(t)), (f'<mark class="wb-t-special">{escape(p)}</mark>' if special[i]
                                   else f'<span class="wb-t-piece">{escape(visible_whitespace(p))}</span>'))
            for i, (t, p) in enumerate(zip(first, tok.token_strings(first)))]
    total = len(ids)
    body = (_table(rows, ("#", "id", "piece"))
            + f"<p>… {total} token ids in all, in {len(result.segments)} segments "
              f"(tokenizer {escape(result.tokenizer['name'])}).</p>")
    summary = (f"The tokenizer turns the text into {total} integer ids; each special token is a single id, "
               "ordinary text is split into sub-word pieces.")
    return _step("tokens", "Token ids", summary, body,
                 {"tokens": total, "special_tokens": int(special.sum()), "segments": len(result.segments),
                  "first_ids": first.tolist()})


def _budget(result: "AssemblyResult") -> TeachingStep:
    b = result.budget
    parts = b.breakdown()
    rows = [(escape(k.replace("_", " ")), str(v["tokens"]), f"{v['share']:.1%}") for k, v in parts.items()]
    dropped = f" Truncation dropped {len(result.dropped)} message(s) to fit." if result.dropped else ""
    body = (f"<p>context window {b.context_window} − output reserve {b.reserve} = input budget {b.input_budget}; "
            f"this prompt uses {b.used}, {b.free} free.{dropped}</p>" + _table(rows, ("part", "tokens", "share")))
    summary = (f"The prompt must fit the context window minus room for the reply: {b.used} of {b.input_budget} "
               "input tokens are used, split here by where they come from.")
    return _step("budget", "Budget", summary, body,
                 {"context_window": b.context_window, "reserve": b.reserve, "input_budget": b.input_budget,
                  "used": b.used, "free": b.free, "dropped": len(result.dropped), "breakdown": parts})


def _reuse_numbers(result: "AssemblyResult", previous: "AssemblyResult | None",
                   analysis: "TurnAnalysis | None") -> tuple[int, int, int | None]:
    """(reused tokens, tokens held from the previous turn, first divergence)."""
    if analysis is not None:
        return analysis.reused_tokens, analysis.held_tokens, analysis.first_divergence
    if previous is None:
        return 0, 0, None
    # Without the analysis we only know the previous prompt, not the reply the model generated after it.
    held, new = previous.token_ids, result.token_ids
    n = min(len(held), len(new))
    first = first_difference(held, new)
    d = first if first < n or len(held) > len(new) else None
    return (n if d is None else d), len(held), d


def _prefill(result: "AssemblyResult", reused: int, cfg: KVConfig, kv_note: str = "") -> TeachingStep:
    total, bpt = result.total_tokens, cfg.bytes_per_token
    fresh = total - reused
    rows = [("prompt tokens", str(total), _size(total * bpt)),
            ("reusable from the previous turn", str(reused), _size(reused * bpt)),
            ("to prefill with a prefix cache", str(fresh), _size(fresh * bpt))]
    note = f'<p class="wb-t-muted wb-t-kv-note">{escape(kv_note)}</p>' if kv_note else ""
    body = (f"<p>{escape(cfg.name)}: {cfg.layers} layers × {cfg.kv_heads} KV heads × head dim {cfg.head_dim} × 2 "
            f"(K and V) × {cfg.dtype_bytes} bytes = <b>{bpt} bytes per token</b> ({_size(bpt)}).</p>{note}"
            + _table(rows, ("", "tokens", "KV cache")))
    summary = (f"Prefill runs the model over the prompt and keeps a key and a value per layer for every token "
               f"({_size(bpt)} per token for {cfg.name}): {fresh} of {total} tokens must be prefilled, {reused} "
               "could come from a prefix cache. These sizes are computed from the model's shape, not a measured "
               "prefill; the KV tab runs a real prefill and measures it.")
    return _step("prefill", "Prefill and KV cache", summary, body,
                 {"prompt_tokens": total, "reusable_tokens": reused, "prefill_tokens": fresh,
                  "kv_config": cfg.name, "kv_note": kv_note, "kv_bytes_per_token": bpt, "kv_bytes_prompt": total * bpt,
                  "kv_bytes_prefill": fresh * bpt})


def _reuse(result: "AssemblyResult", previous: "AssemblyResult | None", analysis: "TurnAnalysis | None",
           reused: int, held: int, d: int | None) -> TeachingStep:
    total = result.total_tokens
    if previous is None and (analysis is None or analysis.held is None):  # analysis.held: None on turn 1
        summary = "This is the first turn: there is no previous turn, so nothing can be reused and every token is new."
        return _step("reuse", "Next turn reuses the prefix", summary, "",
                     {"previous": False, "first_divergence": None, "reused_tokens": 0, "held_tokens": 0,
                      "new_tokens": total, "causes": []})
    causes = [c.to_json() for c in analysis.causes] if analysis is not None else []
    # With the analysis, what the engine held includes the reply it generated after the previous prompt.
    where = ("the whole previous prompt is a prefix of this one" if d is None
             else f"the prompts first differ at token {d}")
    share = reused / total if total else 0.0
    body = (f'<div class="wb-t-bar"><div class="wb-t-reused" style="width:{share:.2%}"></div>'
            f'<div class="wb-t-new" style="width:{1 - share:.2%}"></div></div>'
            f"<p>{escape(where)}: {reused} tokens reused, {total - reused} new "
            f"(the engine held {held} tokens after the previous turn).</p>")
    if causes:
        body += _table([(escape(c["message"]), escape(c["advice"])) for c in causes], ("cause", "advice"))
    summary = (f"A serving engine keeps the previous turn's KV cache; {where}, so {reused} of {total} tokens are "
               f"reused and only {total - reused} are prefilled.")
    return _step("reuse", "Next turn reuses the prefix", summary, body,
                 {"previous": True, "first_divergence": d, "reused_tokens": reused, "held_tokens": held,
                  "new_tokens": total - reused, "causes": causes})


def teaching_steps(result: "AssemblyResult", *, tokenizer: "Tokenizer", template_source: str | None = None,
                   previous: "AssemblyResult | None" = None, analysis: "TurnAnalysis | None" = None,
                   kv_config: str | KVConfig | None = None, kv_note: str = "") -> list[TeachingStep]:
    """The seven steps (STEP_KEYS) for one assembled prompt; `previous` and `analysis` tell the reuse
    story; `kv_config` is the model's KV shape (Llama-3-8B's when none is given), `kv_note` what the
    prefill step says about it (model_choice.KVChoice: a stand-in for a shape that is not public)."""
    cfg = _kv(kv_config)
    reused, held, d = _reuse_numbers(result, previous, analysis)
    return [_messages(result), _template(result, template_source), _text(result, tokenizer),
            _tokens(result, tokenizer), _budget(result), _prefill(result, reused, cfg, kv_note),
            _reuse(result, previous, analysis, reused, held, d)]


def teaching_html(steps: Sequence[TeachingStep]) -> str:
    """All steps as one fragment with numbered sections, for a static export (the style once)."""
    secs = "".join(f'<section id="wb-t-{s.key}"><h3>{i}. {escape(s.title)}</h3>{s.html.removeprefix(_STYLE)}'
                   "</section>" for i, s in enumerate(steps, start=1))
    return f'{_STYLE}<div class="wb-teaching">{secs}</div>'


def teaching_for_turn(assembler: "Assembler", session_file: "SessionFile", turn: int,
                      kv_config: str | KVConfig | None = None) -> list[TeachingStep]:
    """The steps for turn `turn` (from 1) of a session, told against the turn before it."""
    from ..analysis import analyze
    session_file.turn(turn)  # a clear error for a turn the session lacks
    # Only the pair (turn-1, turn) matters for reuse; analysing every earlier turn would cost O(turns).
    turns = analyze(assembler, session_file.turns[max(turn - 2, 0):turn])
    last = replace(turns[-1], turn=turn)
    prev, analysis = (turns[0].result, last) if turn > 1 else (None, None)
    return teaching_steps(last.result, tokenizer=assembler.tokenizer, template_source=assembler.template.source,
                          previous=prev, analysis=analysis, kv_config=kv_config)


def headline(summary: str) -> tuple[str, str]:
    """A summary's first clause as the headline (up to the first colon, semicolon or sentence end
    past a few words), and the rest."""
    m = re.search(r"(?<=.{24})(?:[:;]|\.)\s", summary)
    if m is None:
        return summary, ""
    return summary[:m.start() + (m.group(0)[0] == ".")].rstrip(), summary[m.end():].strip()


class StepThrough:
    """The step-through both hosts show: the selected turn's steps and which one is shown, with the
    HTML of its title and body (the hosts only put these into their own widgets)."""

    def __init__(self) -> None:
        self.steps: list[TeachingStep] = []
        self.index = 0

    def load(self, panels: Any, previous: AssemblyResult | None, kv: Any = None) -> bool:
        """The steps of the panels' turn (`previous`: the turn before it); False while the panels
        hold no analysis yet. `kv`: the KV shape to tell the prefill with (a model_choice.KVChoice:
        the chosen model's; None: Llama-3-8B's)."""
        if panels.analysis is None:
            return False
        asm = panels.assembler
        self.steps = teaching_steps(panels.analysis.result, tokenizer=asm.tokenizer,
                                    template_source=getattr(asm.template, "source", None),
                                    previous=previous, analysis=panels.analysis,
                                    kv_config=kv.config if kv is not None else None,
                                    kv_note=kv.note if kv is not None else "")
        self.index = max(0, min(self.index, len(self.steps) - 1))
        return True

    def move(self, delta: int) -> bool:
        """Step back or forward (clamped); False when there is nothing to show."""
        if not self.steps:
            return False
        self.index = max(0, min(self.index + delta, len(self.steps) - 1))
        return True

    @property
    def at_first(self) -> bool:
        return self.index == 0

    @property
    def at_last(self) -> bool:
        return self.index == len(self.steps) - 1

    presenting = False       # presentation mode: large type, one idea per screen

    def title_html(self) -> str:
        step = self.steps[self.index]
        return f'<b class="wb-teach-title">Step {self.index + 1} of {len(self.steps)}: {escape(step.title)}</b>'

    def body_html(self) -> str:
        return self.present_html() if self.presenting else self.steps[self.index].html  # summary: its first paragraph

    def present_html(self) -> str:
        """The step for a room: its one idea as a headline in large type, its number and title
        above, and this session's data below it, shortened to what a screen holds (the idea is the
        point; the whole table is one click away outside the mode)."""
        step, n = self.steps[self.index], len(self.steps)
        idea, more = headline(step.summary)
        dots = "".join(f'<span class="wb-p-dot{" wb-p-on" if i == self.index else ""}"></span>' for i in range(n))
        data = step.html.removeprefix(_STYLE).replace(f'<p class="wb-t-summary">{escape(step.summary)}</p>', "", 1)
        return (f"<style>{TEACHING_CSS}{PRESENT_CSS}</style><div class=\"wb-present\">"
                f'<div class="wb-p-step">{self.index + 1} / {n} · {escape(step.title)}</div>'
                f'<p class="wb-p-idea">{escape(idea)}</p>'
                + (f'<p class="wb-p-more">{escape(more)}</p>' if more else "")
                + f'<div class="wb-p-data">{data}</div>'
                f'<div class="wb-p-dots">{dots}</div></div>')
