"""The next assistant reply to a session's turn on an engine, and what the engine's KV cache reused:
the one implementation behind the Run tab (app and notebook, ui/run_panel.py) and `workbench
generate` (cli/generate.py). Issue 33 asks that the tab and the command show the same figures; they
do because they make the same calls and say them in the same words (the `*_parts` functions below:
the tab wraps them in HTML, the command prints them). No UI here.

- Engines: the local engine (`tiny`, the synthetic test model; `gemma3-270m`, a real base model;
  a model folder or a .gguf file) or a remote OpenAI-compatible server (an http(s) URL: vLLM,
  SGLang, `workbench serve-engine`). A local engine is loaded once per Runner and kept with its KV
  cache, so the next generation reuses what the last one left: the prompt and its reply.
- The prompt is one turn's request assembled with the caller's assembler (the view's, or the one
  the command's options describe); a model that brings its own vocabulary (gemma3-270m, a folder
  with tokenizer.json) is given its own ids, with its family's template where one is known
  (REAL_TEMPLATES), and the outcome says so.
- A generation after another on the same Runner reports how much of the new prompt the engine held,
  and where it parted from what it held (the token and the segment).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
    from .generate import GenerateReport
    from .remote import RemoteGeneration

DEFAULT_MAX_NEW = 24
MAX_NEW_LIMIT = 512

# A piece of a sentence and how it stands out: "" plain, "strong", "reused" (the reused count),
# "break" (where the prompt parted), "code" (a token's text). The tab maps each to a tag.
Piece = tuple[str, str]


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

    @property
    def computed_tokens(self) -> int | None:
        return None if self.reused_tokens is None else self.prompt_tokens - self.reused_tokens

    @property
    def ms_per_token(self) -> float | None:
        """Decode time per generated token (local engines: a remote request is timed whole)."""
        return None if self.local is None else self.local.decode_ms / max(1, self.completion_tokens)

    def to_json(self) -> dict[str, Any]:
        """Every figure the Run tab shows (`workbench generate --json` prints this)."""
        out: dict[str, Any] = {
            "engine": self.engine, "turn": self.turn, "text": self.text, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "reused_tokens": self.reused_tokens,
            "computed_tokens": self.computed_tokens, "finish_reason": self.finish_reason, "ms": round(self.ms, 3),
            "model": self.model_label, "assembled_with": self.assembled_with, "note": self.note,
            "synthetic": self.synthetic}
        if self.local is not None:
            out["local"] = self.local.to_json()
            out["ms_per_token"] = round(self.ms_per_token or 0.0, 3)
        if self.remote is not None:
            out["remote"] = self.remote.to_json()
        if self.break_where:
            out["break_where"] = self.break_where
            out["break_tokens"] = {"held": self.break_tokens[0], "prompt": self.break_tokens[1]}
        return out


@dataclass(frozen=True)
class RunJob:
    turn: int                              # the session's turn the reply answers
    request: dict[str, Any]                # its request (the document copies on write: it stays as it is)
    assembler: "Assembler"                 # the view's, or the command's
    template: str                          # the template's name as chosen (picker or --template)


def job_for(turn: int, request: dict[str, Any], assembler: "Assembler", template: str) -> RunJob:
    """What to generate for; a turn that ends with the model's own output has nothing to answer."""
    msgs = request.get("messages")
    items = request.get("input") if msgs is None else None      # a Responses request's items
    if (isinstance(msgs, list) and msgs and isinstance(msgs[-1], dict) and msgs[-1].get("role") == "assistant") \
            or (isinstance(items, list) and items and is_output_item(items[-1])):
        raise EditError(f"turn {turn} ends with an assistant reply: there is no user message to answer",
                        hint="add a user message after it, then generate")
    return RunJob(turn, request, assembler, template)


def is_url(spec: str) -> bool:
    return spec.startswith(("http://", "https://"))


class Runner:
    """The engines loaded (kept with their KV caches) and the last outcome. One generation at a
    time (the UI's Controller runs it on one worker thread; the command, in turn order)."""

    def __init__(self) -> None:
        self._engines: dict[tuple[str, int], Any] = {}
        self._remotes: dict[str, Any] = {}
        self._assemblers: dict[str, Any] = {}
        self.last: RunOutcome | None = None

    def run(self, job: RunJob, spec: str, max_new_tokens: int, *, check: Callable[[], None] | None = None,
            progress: Callable[[str], None] | None = None) -> RunOutcome:
        """The reply to `job` on engine `spec`; nothing is appended anywhere."""
        if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= MAX_NEW_LIMIT:
            raise EngineError(f"max new tokens must be from 1 to {MAX_NEW_LIMIT} (got {max_new_tokens!r})")
        if is_url(spec):
            return self._remote(job, spec, max_new_tokens, check)
        return self._local(job, spec, max_new_tokens, check, progress)

    # local ---------------------------------------------------------------------------------------
    def _local(self, job: RunJob, spec: str, max_new: int,
               check: Callable[[], None] | None, progress: Callable[[str], None] | None) -> RunOutcome:
        from .engine import Engine
        from .models import SYNTHETIC
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
                         assembled_with(asm), note, local=rep, synthetic=spec in SYNTHETIC)
        if rep.break_at is not None and rep.break_at < rep.prompt_tokens:
            out.break_where = segment_at(result, rep.break_at)
            out.break_tokens = (token_text(tok, rep.held_token), token_text(tok, rep.prompt_token))
        self.last = out
        return out

    def _assembler_for(self, job: RunJob, spec: str,
                       progress: Callable[[str], None] | None) -> "tuple[Assembler, str]":
        """The job's assembler, unless the model brings its own vocabulary: then that vocabulary,
        with the model family's template where one is known."""
        from ..assembly import Assembler
        from .models import REAL, REAL_TEMPLATES, SYNTHETIC, model_tokenizer
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
        from .remote import RemoteEngine
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
                         assembled_with(asm), remote=gen)
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


def token_text(tok: Any, tid: int | None) -> str:
    if tid is None:
        return "(the prompt ends)"
    if tid >= CONTENT_ID_BASE:   # the engine holds an image by its content: another image stands here
        return "(an image the engine holds)"
    return str(tok.token_strings([tid])[0])


def assembled_with(asm: "Assembler") -> str:
    return f"the {asm.template.name} template, the {asm.tokenizer.name} vocabulary"


# the words, shared by the tab and the command ------------------------------------------------------
SYNTHETIC_WARNING = ("Synthetic model (random weights): this reply means nothing. It shows the engine at work; "
                     "appending it puts meaningless text in the session, which a real model would then imitate.")
EMPTY_REPLY = "(empty reply)"


def milliseconds(ms: float) -> str:
    """A time as shown: whole milliseconds, a tenth under 10 ms (a fast step never reads as 0 ms)."""
    return f"{ms:,.0f}" if ms >= 10 else f"{ms:.1f}"


def headline_parts(o: RunOutcome) -> list[Piece]:
    return [("strong", o.model_label), ("", f" · the reply to turn {o.turn} · {o.assembled_with}")]


def figures_parts(o: RunOutcome) -> list[Piece]:
    """Tokens generated, how the reply ended, and the times."""
    finish = "an end-of-turn token" if o.finish_reason == "stop" else "the token limit"
    out: list[Piece] = [("strong", f"{o.completion_tokens:,} tokens"),
                        ("", f" generated in {milliseconds(o.ms)} ms, ended by {finish}.")]
    if o.local is not None:
        r = o.local
        out.append(("", f" Prefill {milliseconds(r.prefill_ms)} ms, decode {milliseconds(r.decode_ms)} ms "
                        f"({milliseconds(o.ms_per_token or 0.0)} ms per token)."))
    return out


def reuse_parts(o: RunOutcome) -> list[Piece]:
    """The prompt's tokens reused and computed, and against what the engine held: how much of it the
    prompt repeats and where it parted."""
    if o.reused_tokens is None:
        return [("", f"Prompt: {o.prompt_tokens:,} tokens; the server did not report how many its prefix cache "
                     f"served (vLLM: --enable-prompt-tokens-details).")]
    out: list[Piece] = [("", f"Prompt: {o.prompt_tokens:,} tokens: "), ("reused", f"{o.reused_tokens:,} reused"),
                        ("", f" from the engine's KV cache, {o.computed_tokens:,} computed.")]
    r = o.local
    if r is None or r.held_before == 0:
        if r is not None and r.reused_tokens == 0:
            out.append(("", " The engine held nothing of this session yet."))
        return out
    if r.break_at is None or r.break_at >= o.prompt_tokens:
        out.append(("", f" The engine held {r.held_before:,} tokens (the previous prompt and its reply): this "
                        f"prompt repeats all of them."))
        return out
    held, new = o.break_tokens
    out += [("", f" The engine held {r.held_before:,} tokens (the previous prompt and its reply): this prompt "
                 f"repeats the first {r.common:,} and parts at "), ("break", o.break_where),
            ("", ": the engine held "), ("code", repr(held)), ("", ", the prompt has "), ("code", repr(new)),
            ("", ". Everything after that is computed again.")]
    return out


def plain(pieces: list[Piece]) -> str:
    return "".join(text for _style, text in pieces)
