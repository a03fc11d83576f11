"""The Run tab, shared by both hosts (no UI library here): generate the session's next assistant reply
on a real engine, and show what the engine's KV cache reused.

- Engines: the local engine (`tiny`, the synthetic test model; `gemma3-270m`, a real base model;
  a model folder or a .gguf file) or a remote OpenAI-compatible server (an http(s) URL: vLLM,
  SGLang, `workbench serve-engine`). A local engine is loaded once and kept with its KV cache, so
  the next generation reuses what the last one left: the prompt and its reply.
- The prompt is the session's last turn, assembled with the view's template and tokenizer; a model
  that brings its own vocabulary (gemma3-270m, a folder with tokenizer.json) is given its own ids,
  with its family's template where one is known (REAL_TEMPLATES), and the tab says so.
- After the reply is appended and the user writes the next message, the next generation reports
  how much of the new prompt the engine held, and where it parted from what it held (the token and
  the segment): the teaching loop closed on a real model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import EditError, EngineError
from ..segments import CONTENT_ID_BASE
from ..sessions import is_output_item
from ..templates.arguments import canonical

if TYPE_CHECKING:
    from ..assembly import Assembler
    from ..assembly.result import AssemblyResult
    from ..engine.generate import GenerateReport
    from ..engine.remote import RemoteGeneration
    from .state import WorkbenchState

DEFAULT_MAX_NEW = 24
MAX_NEW_LIMIT = 512
# What the engine picker offers; anything else typed is a model folder, a .gguf file or a URL.
ENGINES = {"tiny (synthetic, CPU)": "tiny", "gemma3-270m (real base model)": "gemma3-270m",
           "a model folder or .gguf file": "folder", "a remote server (OpenAI-compatible URL)": "remote"}


@dataclass
class RunOutcome:
    engine: str                            # what was asked for: a model name, a path or a URL
    turn: int                              # the session's turn the reply answers
    text: str
    prompt_tokens: int
    completion_tokens: int
    reused_tokens: int | None              # None: a remote server that does not report it
    finish_reason: str
    ms: float                              # prefill + decode (local) or the request (remote)
    model_label: str
    assembled_with: str                    # "qwen2.5 template, qwen2.5 vocabulary"
    note: str = ""                         # why the prompt was assembled differently from the view
    local: "GenerateReport | None" = None
    remote: "RemoteGeneration | None" = None
    break_where: str = ""                  # the segment of the new prompt where reuse stopped
    break_tokens: tuple[str, str] = ("", "")   # the held token and the prompt's there, as text
    synthetic: bool = False                # random weights (`tiny`): its words mean nothing

    def to_json(self) -> dict[str, Any]:
        out = {"engine": self.engine, "turn": self.turn, "text": self.text, "prompt_tokens": self.prompt_tokens,
               "completion_tokens": self.completion_tokens, "reused_tokens": self.reused_tokens,
               "finish_reason": self.finish_reason, "ms": round(self.ms, 3), "model": self.model_label,
               "assembled_with": self.assembled_with}
        if self.local is not None:
            out["local"] = self.local.to_json()
        if self.break_where:
            out["break_where"] = self.break_where
        return out


@dataclass(frozen=True)
class RunJob:
    turn: int                              # the session's last turn, which the reply answers
    request: dict                          # its request (the document copies on write: it stays as it is)
    assembler: "Assembler"                 # the view's
    template: str                          # the view's template name


def engine_spec(choice: str, typed: str = "") -> str:
    """The engine to run from the picker's value and the typed folder, file or URL."""
    kind = ENGINES.get(choice, choice)
    if kind in ("folder", "remote"):
        spec = typed.strip()
        if not spec:
            raise EngineError("type a model folder, a .gguf file or a server URL beside the engine picker"
                              if kind == "folder" else "type the server's URL, e.g. http://127.0.0.1:8000")
        if kind == "remote" and not is_url(spec):
            raise EngineError(f"{spec!r} is not an http(s) URL", hint="e.g. http://127.0.0.1:8000")
        return spec
    return kind


def is_url(spec: str) -> bool:
    return spec.startswith(("http://", "https://"))


class Runner:
    """The engines the Run tab has loaded (kept with their KV caches) and the last outcome. One
    generation at a time (the Controller runs it on one worker thread)."""

    def __init__(self) -> None:
        self._engines: dict[tuple[str, int], Any] = {}
        self._remotes: dict[str, Any] = {}
        self._assemblers: dict[str, Any] = {}
        self.last: RunOutcome | None = None

    def generate(self, state: "WorkbenchState", spec: str, max_new_tokens: int, *,
                 check: Callable[[], None] | None = None,
                 progress: Callable[[str], None] | None = None) -> RunOutcome:
        """The reply to the session's last turn on engine `spec`; nothing is appended here."""
        return self.run(self.prepare(state), spec, max_new_tokens, check=check, progress=progress)

    def prepare(self, state: "WorkbenchState") -> RunJob:
        """What to generate for, read from the state on the caller's (UI) thread: the worker then
        never reads a document that an edit may be changing."""
        turn = state.doc.turn_count
        request = state.doc.request(turn)
        msgs = request.get("messages")
        items = request.get("input") if msgs is None else None      # a Responses request's items
        if (isinstance(msgs, list) and msgs and isinstance(msgs[-1], dict) and msgs[-1].get("role") == "assistant") \
                or (isinstance(items, list) and items and is_output_item(items[-1])):
            raise EditError("the session ends with an assistant reply: add a user message, then Generate")
        return RunJob(turn, request, state.assembler(), state.template)

    def run(self, job: RunJob, spec: str, max_new_tokens: int, *, check: Callable[[], None] | None = None,
            progress: Callable[[str], None] | None = None) -> RunOutcome:
        if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= MAX_NEW_LIMIT:
            raise EngineError(f"max new tokens must be from 1 to {MAX_NEW_LIMIT} (got {max_new_tokens!r})")
        if is_url(spec):
            return self._remote(job, spec, max_new_tokens, check)
        return self._local(job, spec, max_new_tokens, check, progress)

    # local ---------------------------------------------------------------------------------------
    def _local(self, job: RunJob, spec: str, max_new: int,
               check: Callable[[], None] | None, progress: Callable[[str], None] | None) -> RunOutcome:
        from ..engine.engine import Engine
        from ..engine.models import SYNTHETIC
        asm, note = self._assembler_for(job, spec, progress)
        result = asm.assemble(job.request)
        tok = asm.tokenizer
        key = (spec, int(tok.vocab_size))
        engine = self._engines.get(key)
        if engine is None:
            if progress is not None:
                progress(f"loading {spec}…")
            engine = self._engines[key] = Engine.load(spec, vocab_size=tok.vocab_size)
        if check is not None:
            check()
        stops = stop_ids(asm, engine)
        # Random weights would write control tokens into the reply (an "<|im_start|>" in a message
        # the injection check then flags): a synthetic model generates ordinary tokens and its stops.
        suppress = tok.special_ids if spec in SYNTHETIC else ()

        def on_token(ids: np.ndarray) -> None:
            if progress is not None:
                progress(f"{len(ids)} of {max_new} tokens: " + tok.decode([i for i in ids if int(i) not in stops]))

        if progress is not None:
            progress("prefilling the prompt…")
        rep = engine.generate(result.token_ids, max_new, stop_ids=stops, tokenizer=tok, suppress_ids=suppress,
                              check=check, on_token=on_token, keys=result.content_ids())
        out = RunOutcome(spec, job.turn, rep.text, rep.prompt_tokens, rep.completion_tokens, rep.reused_tokens,
                         rep.finish_reason, rep.prefill_ms + rep.decode_ms, engine.m.label,
                         _assembled_with(asm), note, local=rep, synthetic=spec in SYNTHETIC)
        if rep.break_at is not None and rep.break_at < rep.prompt_tokens:
            out.break_where = segment_at(result, rep.break_at)
            held = rep.held_token
            out.break_tokens = (_token_text(tok, held), _token_text(tok, rep.prompt_token))
        self.last = out
        return out

    def _assembler_for(self, job: RunJob, spec: str,
                       progress: Callable[[str], None] | None) -> "tuple[Assembler, str]":
        """The view's assembler, unless the model brings its own vocabulary: then that vocabulary,
        with the model family's template where one is known."""
        from ..assembly import Assembler
        from ..engine.models import REAL, REAL_TEMPLATES, SYNTHETIC, model_tokenizer
        view = job.assembler
        if spec in SYNTHETIC:
            return view, ""
        if spec not in REAL and not Path(spec).exists():
            raise EngineError(f"model {spec!r}: no such folder or .gguf file",
                              hint="give a folder saved by save_pretrained, a .gguf file, tiny or gemma3-270m")
        if progress is not None and spec in REAL:
            progress(f"preparing {spec} (assembled once from its package)…")
        tok_name = model_tokenizer(spec)
        if tok_name is None:
            return view, ""
        template = REAL_TEMPLATES.get(spec, job.template)
        # The view's template arguments where the model renders with the view's template (another
        # template may not read them, or read them otherwise).
        kwargs = dict(view.config.template_kwargs) if template == job.template else {}
        key = f"{spec}\n{template}\n{canonical(kwargs)}"
        asm = self._assemblers.get(key)
        if asm is None:
            asm = self._assemblers[key] = Assembler(template=template, tokenizer=tok_name,
                                                    **({"template_kwargs": kwargs} if kwargs else {}))
        note = (f"the model brings its own vocabulary: the prompt was assembled with it and the {template} "
                f"template (the view shows {view.template.name})")
        return asm, note

    # remote --------------------------------------------------------------------------------------
    def _remote(self, job: RunJob, url: str, max_new: int, check: Callable[[], None] | None) -> RunOutcome:
        from ..engine.remote import RemoteEngine
        asm = job.assembler
        result = asm.assemble(job.request)
        remote = self._remotes.get(url)
        if remote is None:
            remote = self._remotes[url] = RemoteEngine(url, timeout=120)
        if check is not None:
            check()
        eos = asm.template.eos_token
        gen = remote.generate(result.token_ids, max_new, stop=[eos] if eos else None)
        if check is not None:
            check()          # Cancel pressed while the server worked: its reply is dropped
        out = RunOutcome(url, job.turn, gen.text, gen.prompt_tokens or len(result.token_ids), gen.completion_tokens,
                         gen.cached_tokens, gen.finish_reason, gen.ms, f"{remote.model} at {url}",
                         _assembled_with(asm), remote=gen)
        self.last = out
        return out


def stop_ids(asm: "Assembler", engine: Any) -> list[int]:
    """End-of-turn ids: the template's end-of-turn token, the tokenizer's end token, and a real
    model's own (its generation config), as far as the vocabulary has them."""
    tok = asm.tokenizer
    out = {tok.specials[s] for s in (asm.template.eos_token, tok.eos_token) if s and s in tok.specials}
    if engine.m.source != "synthetic":
        cfg = getattr(engine.m.model, "generation_config", None)
        eos = getattr(cfg, "eos_token_id", None)
        out.update(int(i) for i in (eos if isinstance(eos, list) else [eos]) if isinstance(i, int))
    return sorted(out)


def segment_at(result: "AssemblyResult", index: int) -> str:
    seg = next((s for s in result.segments if s.start <= index < s.end), None)
    if seg is None:
        return f"token {index}"
    if seg.kind == "message" and seg.seq is not None:
        # seq is the message's index, which the message editor shows beside each message too
        return f"token {index}, in message {seg.seq} ({seg.role})"
    return f"token {index}, in the {' · '.join(str(x) for x in (seg.kind, seg.role) if x)}"


def _token_text(tok: Any, tid: int | None) -> str:
    if tid is None:
        return "(the prompt ends)"
    if tid >= CONTENT_ID_BASE:   # the engine holds an image by its content: another image stands here
        return "(an image the engine holds)"
    return tok.token_strings([tid])[0]


def _assembled_with(asm: "Assembler") -> str:
    return f"the {asm.template.name} template, the {asm.tokenizer.name} vocabulary"


# the tab ------------------------------------------------------------------------------------------
RUN_CSS = """<style>
.wb-run { font-family: system-ui, sans-serif; font-size: 13px; }
.wb-run-reply { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; border: 1px solid #d0d7de;
  border-radius: 4px; padding: 6px 8px; font-size: 12.5px; max-height: 240px; overflow: auto; }
.wb-run-status { color: #57606a; white-space: pre-wrap; word-break: break-word; }
.wb-run-reused { color: #1a7f37; } .wb-run-break { background: #fff8c5; }
.wb-run-error { color: #b42318; }
.wb-run-synthetic { color: #9a6700; font-weight: 600; }
.wb-run-reply-synthetic { border-left: 3px solid #d4a72c; padding-left: 6px; }
</style>"""


def run_html(outcome: RunOutcome | None, *, status: str = "", error: str = "", appended: str = "") -> str:
    parts = [RUN_CSS, '<div class="wb-run">']
    if error:
        parts.append(f'<p class="wb-run-error wb-diag-error">{escape(error)}</p>')
    if status:
        parts.append(f'<p class="wb-run-status">{escape(status)}</p>')
    if outcome is None:
        if not (error or status):
            parts.append('<p class="wb-muted">Generate writes the next assistant reply to the session\'s last turn '
                         'and shows it here; "Append this reply" adds it to the session (nothing is written '
                         'without that click). Then add the next user message and Generate again to watch the '
                         'engine reuse its KV cache.</p>')
        parts.append("</div>")
        return "".join(parts)
    o = outcome
    parts.append(f'<p class="wb-run-model"><b>{escape(o.model_label)}</b> · the reply to turn {o.turn} · '
                 f'{escape(o.assembled_with)}</p>')
    if o.note:
        parts.append(f'<p class="wb-muted">{escape(o.note)}</p>')
    if o.synthetic:
        parts.append('<p class="wb-run-synthetic">Synthetic model (random weights): this reply means nothing. '
                     'It shows the engine at work; appending it puts meaningless text in the session, which a '
                     'real model would then imitate.</p>')
    parts.append(f'<pre class="wb-run-reply{" wb-run-reply-synthetic" if o.synthetic else ""}">'
                 f'{escape(o.text) or "(empty reply)"}</pre>')
    finish = "an end-of-turn token" if o.finish_reason == "stop" else "the token limit"
    parts.append(f'<p class="wb-run-figures"><b>{o.completion_tokens:,} tokens</b> generated in {o.ms:,.0f} ms, '
                 f'ended by {finish}.')
    if o.local is not None:
        r = o.local
        parts.append(f" Prefill {r.prefill_ms:,.0f} ms, decode {r.decode_ms:,.0f} ms "
                     f"({r.decode_ms / max(1, o.completion_tokens):,.0f} ms per token).")
    parts.append("</p>")
    parts.append(reuse_html(o))
    if appended:
        parts.append(f'<p class="wb-run-appended">{escape(appended)}</p>')
    parts.append("</div>")
    return "".join(parts)


def reuse_html(o: RunOutcome) -> str:
    if o.reused_tokens is None:
        return (f'<p class="wb-run-reuse">Prompt: {o.prompt_tokens:,} tokens; the server did not report how many '
                f'its prefix cache served (vLLM: --enable-prompt-tokens-details).</p>')
    computed = o.prompt_tokens - o.reused_tokens
    head = (f'<p class="wb-run-reuse">Prompt: {o.prompt_tokens:,} tokens: <b class="wb-run-reused">'
            f'{o.reused_tokens:,} reused</b> from the engine\'s KV cache, {computed:,} computed.')
    r = o.local
    if r is None or r.held_before == 0:
        first = " The engine held nothing of this session yet." if r is not None and r.reused_tokens == 0 else ""
        return head + first + "</p>"
    if r.break_at is None or r.break_at >= o.prompt_tokens:
        return head + (f" The engine held {r.held_before:,} tokens (the previous prompt and its reply): this "
                       f"prompt repeats all of them.</p>")
    held, new = o.break_tokens
    return head + (f' The engine held {r.held_before:,} tokens (the previous prompt and its reply): this prompt '
                   f'repeats the first {r.common:,} and parts at <span class="wb-run-break">{escape(o.break_where)}'
                   f'</span>: the engine held <code>{escape(repr(held))}</code>, the prompt has '
                   f'<code>{escape(repr(new))}</code>. Everything after that is computed again.</p>')
