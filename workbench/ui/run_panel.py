"""The Run tab, shared by both hosts (no UI library here): generate the session's next assistant reply
on a real engine, and show what the engine's KV cache reused.

The generation and its words live in engine/next_reply.py, which `workbench generate` runs too
(issue 33: the tab shows what the command prints). Here: the engine picker's choices, the Runner
reading its job from the workbench's state, and the tab's HTML.

- The prompt is the session's last turn, assembled with the view's template and tokenizer (a model
  that brings its own vocabulary is given its own ids, and the tab says so).
- After the reply is appended and the user writes the next message, the next generation reports
  how much of the new prompt the engine held, and where it parted from what it held (the token and
  the segment): the teaching loop closed on a real model.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import TYPE_CHECKING

from ..engine import next_reply
from ..engine.next_reply import (
    DEFAULT_MAX_NEW,
    EMPTY_REPLY,
    MAX_NEW_LIMIT,
    SYNTHETIC_WARNING,
    Piece,
    RunJob,
    RunOutcome,
    figures_parts,
    headline_parts,
    is_url,
    job_for,
    reuse_parts,
    stop_ids,
)
from ..errors import EngineError

if TYPE_CHECKING:
    from .state import WorkbenchState

__all__ = ["DEFAULT_MAX_NEW", "ENGINES", "MAX_NEW_LIMIT", "RunJob", "RunOutcome", "Runner", "engine_spec",
           "is_url", "reuse_html", "run_html", "stop_ids"]

# What the engine picker offers; anything else typed is a model folder, a .gguf file or a URL.
ENGINES = {"tiny (synthetic, CPU)": "tiny", "gemma3-270m (real base model)": "gemma3-270m",
           "a model folder or .gguf file": "folder", "a remote server (OpenAI-compatible URL)": "remote"}


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


class Runner(next_reply.Runner):
    """The Run tab's engines (kept with their KV caches) and the last outcome, reading what to
    generate for from the workbench's state: the session's last turn, with the view's assembler."""

    def generate(self, state: "WorkbenchState", spec: str, max_new_tokens: int, *,
                 check: Callable[[], None] | None = None,
                 progress: Callable[[str], None] | None = None) -> RunOutcome:
        """The reply to the session's last turn on engine `spec`; nothing is appended here."""
        return self.run(self.prepare(state), spec, max_new_tokens, check=check, progress=progress)

    def prepare(self, state: "WorkbenchState") -> RunJob:
        """What to generate for, read from the state on the caller's (UI) thread: the worker then
        never reads a document that an edit may be changing."""
        turn = state.doc.turn_count
        return job_for(turn, state.doc.request(turn), state.assembler(), state.template)


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
    parts.append(f'<p class="wb-run-model">{pieces_html(headline_parts(o))}</p>')
    if o.note:
        parts.append(f'<p class="wb-muted">{escape(o.note)}</p>')
    if o.synthetic:
        parts.append(f'<p class="wb-run-synthetic">{escape(SYNTHETIC_WARNING)}</p>')
    parts.append(f'<pre class="wb-run-reply{" wb-run-reply-synthetic" if o.synthetic else ""}">'
                 f'{escape(o.text) or EMPTY_REPLY}</pre>')
    parts.append(f'<p class="wb-run-figures">{pieces_html(figures_parts(o))}</p>')
    parts.append(reuse_html(o))
    if appended:
        parts.append(f'<p class="wb-run-appended">{escape(appended)}</p>')
    parts.append("</div>")
    return "".join(parts)


def reuse_html(o: RunOutcome) -> str:
    return f'<p class="wb-run-reuse">{pieces_html(reuse_parts(o))}</p>'


# How each kind of piece (next_reply.Piece) stands out on the page.
_TAGS = {"strong": ("<b>", "</b>"), "reused": ('<b class="wb-run-reused">', "</b>"),
         "break": ('<span class="wb-run-break">', "</span>"), "code": ("<code>", "</code>")}


def pieces_html(pieces: list[Piece]) -> str:
    out = []
    for style, text in pieces:
        open_, close = _TAGS.get(style, ("", ""))
        out.append(f"{open_}{escape(text, quote=False)}{close}")   # text, never an attribute
    return "".join(out)
