"""Measure the prefix-stable projection over many templates and sessions: which templates' own
rendering breaks the append-only prefix, and whether the projection keeps everything the engine held.

Columns, per template, over the turns that extend the previous one (restarts left out): `broken`,
turns where the template's own rendering does not reuse all the engine held (ids); `text`, the same
at the text level (the tokenizer's boundaries aside); `kept`, turns where the engine's held ids,
recomputed by prefix analysis's code, are an exact prefix of the projection; `bridged`, turns whose
bridge is the template's text from right after the reply; `lost tokens`, held tokens the template's
rendering does not reuse, summed; `prefill`, turns where the projection reads the reply otherwise than
prefix analysis (a template that renders a last assistant turn as a prefill, without its content, or
ends every rendering with the generation prompt: the model would not generate that).

`python -m workbench.analysis.projection_sweep TEMPLATE_DIR SESSION...` prints one line per
template and the totals (the figures in docs/caching.md, "Prefix-stable projection"). A template
that cannot render a session is counted for that session, and a template that renders none of them
is counted as skipped, never left out silently.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ..assembly import Assembler
from ..errors import WorkbenchError
from ..sessions import load_session
from .prefix import _END_TOKENS, _generated
from .projection import ProjectedTurn, held_reply, next_message_start, project


@dataclass
class TemplateSweep:
    template: str
    sessions: int = 0                 # sessions it rendered
    failed: dict[str, str] = field(default_factory=dict)   # session -> why it could not render it
    turns: int = 0                    # turns that extend the previous one (not restarts)
    broken_ids: int = 0               # of those, where the template's own rendering loses held tokens
    broken_text: int = 0              # ... where its text is not the previous prompt + reply as generated
    lost_tokens: int = 0              # held tokens the template's rendering does not reuse, summed
    kept: int = 0                     # turns where the engine's held ids are an exact prefix of the projection
    departures: int = 0               # turns where the projection differs from the template's rendering
    bridged: int = 0                  # turns whose bridge starts right after the reply in the template's text
    prefill_replies: int = 0          # turns whose reply the template renders as a prefill when last (its
    #                                   content then read from the next request's rendering)

    @property
    def skipped(self) -> bool:
        return self.sessions == 0

    @property
    def breaks(self) -> bool:
        return self.broken_ids > 0

    @property
    def repaired(self) -> bool:
        return self.breaks and self.kept == self.turns


def held_ids(asm: Assembler, prev: ProjectedTurn, turn: ProjectedTurn) -> tuple[NDArray[np.uint32], bool]:
    """What the engine holds after `prev` was served: its ids and the reply's ids as generated, the
    reply as prefix analysis defines it (`prefix._generated`, its own code path, not the projection's),
    and True. Where the projection reads the reply otherwise (a template that renders a last assistant
    turn as a prefill, without its content, or that ends every rendering with the generation prompt),
    the projection's own reading, and False (counted: `prefill`)."""
    reply = turn.template.conversation.messages[len(prev.template.conversation.messages)]
    text, _ = _generated(asm, prev.template, reply)
    own, escaped = held_reply(asm, prev.template, reply, turn.template)
    independent = own == text
    reply_ids = asm.tokenizer.encode_with_specials(text) if independent else asm.tokenizer.encode(own, escaped)
    ids: NDArray[np.uint32] = np.concatenate([prev.token_ids, reply_ids]).astype(np.uint32)
    return ids, independent


def sweep_session(asm: Assembler, requests: Sequence[object], out: TemplateSweep) -> list[ProjectedTurn]:
    turns = project(asm, requests)
    out.sessions += 1
    for prev, t in zip(turns, turns[1:]):
        if t.restart is not None:
            continue
        out.turns += 1
        held, independent = held_ids(asm, prev, t)
        out.prefill_replies += not independent
        own_text = prev.template.text + t.result.text[len(prev.text):len(prev.text) + _reply_chars(t)]
        if t.template_reused < len(held):
            out.broken_ids += 1
            out.lost_tokens += len(held) - t.template_reused
        if not t.template.text.startswith(own_text):
            out.broken_text += 1
        if len(held) <= t.result.total_tokens and np.array_equal(t.token_ids[:len(held)], held):
            out.kept += 1
        out.departures += t.departure is not None
        out.bridged += _bridged(asm, t)
    return turns


def _bridged(asm: Assembler, t: ProjectedTurn) -> bool:
    """The bridge is a suffix of the template's text, right after the end of the reply: the same
    characters the generated reply ends with, or an end-of-turn token of the template's."""
    bridge = "".join(s.text for s, o in zip(t.result.segments, t.origins) if o == "new")
    text = t.template.text
    if not text.endswith(bridge):
        return False
    before = text[: len(text) - len(bridge)]
    reply = "".join(s.text for s, o in zip(t.result.segments, t.origins) if o == "reply")
    if (bool(reply) and before.endswith(reply[-8:])) or before.endswith(_END_TOKENS) or not reply:
        return True
    # or exactly where the template's text for the next message starts
    seq = next(s.seq for s, o in zip(t.result.segments, t.origins) if o == "reply")
    return seq is not None and len(before) == next_message_start(asm, t.template, seq)


def _reply_chars(t: ProjectedTurn) -> int:
    return sum(len(s.text) for s, o in zip(t.result.segments, t.origins) if o == "reply")


def sweep(templates: Sequence[Path | str], sessions: Sequence[Path], max_turns: int | None = None
          ) -> list[TemplateSweep]:
    """Each template (a shipped name or a .jinja file) over each session, under the session's own
    context window when it names one. `max_turns`: only the first turns of each session (None: all)."""
    loaded = [(sp.stem, load_session(sp)) for sp in sessions]
    out = []
    for tp in templates:
        row = TemplateSweep(Path(tp).stem if str(tp).endswith(".jinja") else str(tp))
        for name, sf in loaded:
            cw = sf.raw.get("context_window")
            try:
                asm = Assembler(template=str(tp), cache=None, context_window=cw if isinstance(cw, int) else None)
                sweep_session(asm, list(sf.turns)[:max_turns], row)
            except WorkbenchError as exc:
                row.failed[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        out.append(row)
    return out


def summary(rows: Sequence[TemplateSweep]) -> dict[str, int]:
    return {"templates": len(rows), "skipped": sum(r.skipped for r in rows),
            "breaking": sum(r.breaks for r in rows), "breaking_text": sum(r.broken_text > 0 for r in rows),
            "repaired": sum(r.repaired for r in rows),
            "sessions_failed": sum(len(r.failed) for r in rows if not r.skipped),
            "prefill_templates": sum(r.prefill_replies > 0 for r in rows)}


def report(rows: Sequence[TemplateSweep]) -> str:
    lines = [f"{'template':<48} {'sessions':>8} {'turns':>6} {'broken':>6} {'text':>5} {'kept':>5} {'bridged':>7} "
             f"{'lost tokens':>11} {'prefill':>7}"]
    for r in rows:
        lines.append(f"{r.template:<48} {r.sessions:>8} {r.turns:>6} {r.broken_ids:>6} {r.broken_text:>5} "
                     f"{r.kept:>5} {r.bridged:>7} {r.lost_tokens:>11} {r.prefill_replies:>7}"
                     + ("  (skipped: renders no session)" if r.skipped else ""))
    s = summary(rows)
    lines.append(f"{s['templates']} templates: {s['skipped']} skipped (render no session), {s['breaking']} break the "
                 f"append-only prefix of what the engine holds ({s['breaking_text']} at the text level), "
                 f"{s['repaired']} repaired by the projection; {s['sessions_failed']} template/session pairs "
                 f"could not render; {s['prefill_templates']} where the reply is read otherwise than prefix "
                 "analysis does")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    folder, *sessions = argv
    rows = sweep(sorted(Path(folder).glob("*.jinja")), [Path(s) for s in sessions])
    print(report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
