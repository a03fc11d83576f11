"""The KV panel, shared by both hosts (HTML strings and a Plotly figure dict, no UI library):

- the paged view of the session under a model shape (the chosen catalog model's, else a named one,
  Llama-3-8B by default, which the view then says: model_choice.KVChoice): per turn the prompt's blocks, the full
  blocks shared with what a vLLM-style cache already holds (earlier prompts and the replies
  generated after them), and the KV bytes: this prompt's and every distinct block held so far.
  The rows are `engine.kv.paged_view` over the turns the simulators saw (`Panels.prompts`), the
  very rows `workbench kv --json` prints;
- on request, a real prefill of the previous turn and this one on the engine (synthetic `tiny` on
  the CPU by default): tokens reused and prefilled, prefill time with reuse and without, KV bytes.
"""

from __future__ import annotations

from dataclasses import replace
from html import escape
from typing import TYPE_CHECKING, Any

from ..engine.kv import (
    BLOCK_SIZE,
    HELD_NOTE,
    KV_CONFIGS,
    KVConfig,
    PagedTurn,
    byte_unit,
    format_bytes,
    no_share_reason,
    paged_view,
)

if TYPE_CHECKING:
    from ..engine.engine import PrefillReport
    from .state import Panels

DEFAULT_KV_CONFIG = "Llama-3-8B"
ROWS = 12     # the last turns shown in the table (the chart shows them all)


def block_size_of(panels: "Panels") -> int:
    """The vLLM preset's block size (so the shared blocks are the Cache tab's vLLM hits), else vLLM's default."""
    sim = next((s for s in panels.simulations if s.params is not None and s.params.kind == "vllm"), None)
    return int(getattr(sim.params, "block_size", 0) or BLOCK_SIZE) if sim is not None else BLOCK_SIZE


# The last panels' paged view, by block size: the blocks do not depend on the model shape, only the
# bytes do, so the table, the chart and another shape picked reuse it (hashing every turn's blocks
# takes half a second on the 1,000-message session).
_last: dict[str, Any] = {}


def paged_turns(panels: "Panels", config: str | KVConfig = DEFAULT_KV_CONFIG,
                block_size: int | None = None) -> list[PagedTurn]:
    """The paged view of every turn the simulators saw, each with the reply the engine holds after
    it. Empty until the turns are computed (the cache part)."""
    cfg, bs = _config(config), block_size or block_size_of(panels)
    # One tuple, read and replaced whole: pages of one server (and a notebook's worker) never see
    # another panels' turns under these panels.
    memo = _last.get("paged")
    if memo is None or memo[0] is not panels or memo[1] != bs:
        memo = _last["paged"] = (panels, bs, paged_view(panels.prompts, cfg, bs))
    # The bytes under this shape, as paged_view computes them (held: held blocks of block_size tokens).
    return [replace(t, kv_bytes=cfg.bytes_for(t.tokens), held_bytes=t.held_blocks * bs * cfg.bytes_per_token)
            for t in memo[2]]


def paged_rows(panels: "Panels", config: str | KVConfig = DEFAULT_KV_CONFIG,
               block_size: int | None = None) -> list[dict[str, Any]]:
    """Per turn, the row `workbench kv --json` prints for the same session, shape and block size."""
    return [t.to_json() for t in paged_turns(panels, config, block_size)]


def _config(config: str | KVConfig) -> KVConfig:
    return config if isinstance(config, KVConfig) else KV_CONFIGS[config]


def _shared(t: PagedTurn, block_size: int) -> str:
    """The shared count, and why where it is zero."""
    why = no_share_reason(t, block_size)
    if not why:
        return f"{t.shared_blocks:,}"
    return f'0 <span class="wb-kv-why wb-muted">({escape(why)})</span>'


def kv_html(panels: "Panels | None", config: str | KVConfig = DEFAULT_KV_CONFIG,
            prefill: "tuple[PrefillReport, PrefillReport, dict[str, Any]] | None" = None, note: str = "",
            shape_note: str = "") -> str:
    """`shape_note`: what to say about the shape (model_choice.KVChoice.note: a stand-in for a model
    whose own is not public, a sliding window's or MLA's caveat)."""
    if panels is None:
        return '<div class="wb-kv">computing every turn…</div>'
    cfg = _config(config)
    bs = block_size_of(panels)
    rows = paged_turns(panels, cfg, bs)
    turn = next((r for r in rows if r.turn == panels.turn), rows[-1] if rows else None)
    parts = ['<div class="wb-kv">']
    if shape_note:
        parts.append(f'<p class="wb-kv-shape-note wb-muted">{escape(shape_note)}</p>')
    parts.append(f"<p><b class=\"wb-kv-shape\">{escape(cfg.name)}</b>: {cfg.layers} layers × {cfg.kv_heads} KV heads × "
                 f"{cfg.head_dim} head dim × 2 (K, V) × {cfg.dtype_bytes} bytes = "
                 f"<b>{cfg.bytes_per_token:,} bytes per token</b>.")
    if turn is not None:
        why = no_share_reason(turn, bs)
        shared = (f"none of them shared with what the engine holds ({escape(why)})" if why else
                  f"{turn.shared_blocks:,} of them shared with what the engine already holds (earlier prompts and "
                  f"the replies generated after them: a vLLM-style prefix cache)")
        reply = (f", with the {turn.reply_tokens_held:,} reply tokens the engine keeps after this turn"
                 if turn.reply_tokens_held else "")
        parts.append(f' Turn {turn.turn}: {turn.tokens:,} tokens = {format_bytes(turn.kv_bytes)} of KV in '
                     f'{turn.blocks:,} blocks of {bs}, {shared}. <span class="wb-kv-held">KV held: '
                     f'{format_bytes(turn.held_bytes)} in {turn.held_blocks:,} blocks{reply} ({HELD_NOTE}).</span>')
    parts.append("</p>")
    if prefill is not None:
        prev, cur, model = prefill
        saved = f"{cur.baseline_ms - cur.prefill_ms:,.0f} ms saved" if cur.baseline_ms is not None else ""
        parts.append(
            f'<p class="wb-kv-prefill"><b>Prefill on {escape(model["label"])}</b> ({escape(model["device"])}, '
            f'{escape(model["dtype"])}): the previous turn ({prev.tokens:,} tokens) was prefilled, then this one: '
            f'<b>{cur.reused_tokens:,} tokens reused</b>, {cur.prefilled_tokens:,} prefilled in '
            f'{cur.prefill_ms:,.0f} ms; without reuse {cur.baseline_ms or 0:,.0f} ms ({saved}). '
            f'KV of this prompt {format_bytes(cur.kv_bytes)} ({model["kv"]["bytes_per_token"]:,} bytes per token).</p>')
        if cur.top:
            what = ("random weights: these words mean nothing" if model.get("synthetic")
                    else "what the model would write next")
            words = ", ".join(f"<code>{escape(repr(t.text))}</code> {t.prob:.1%}" for t in cur.top)
            parts.append(f'<p class="wb-kv-top">Most likely next tokens ({what}): {words}</p>')
    if note:
        parts.append(f'<p class="wb-kv-note">{escape(note)}</p>')
    head = ("<tr><th>turn</th><th>tokens</th><th>blocks</th><th>shared</th><th>new</th><th>KV of the prompt</th>"
            f"<th>KV held ({escape(HELD_NOTE.removeprefix('held: '))})</th></tr>")
    body = "".join(f"<tr><td>{r.turn}</td><td>{r.tokens:,}</td><td>{r.blocks:,}</td>"
                   f"<td>{_shared(r, bs)}</td><td>{r.new_blocks:,}</td><td>{format_bytes(r.kv_bytes)}</td>"
                   f"<td>{format_bytes(r.held_bytes)}</td></tr>" for r in rows[-ROWS:])
    parts.append(f'<table class="wb-table wb-kv-table">{head}{body}</table></div>')
    return "".join(parts)


def kv_figure(panels: "Panels | None", config: str | KVConfig = DEFAULT_KV_CONFIG) -> dict[str, Any]:
    cfg = _config(config)
    bs = block_size_of(panels) if panels is not None else BLOCK_SIZE
    rows = paged_turns(panels, cfg, bs) if panels is not None else []
    turns = [r.turn for r in rows]
    # One unit for the whole axis, the one the largest figure reads best in (held never falls: the last).
    unit, size = byte_unit(max((r.held_bytes for r in rows), default=0))
    return {"data": [
        {"type": "bar", "name": "shared blocks (reused)", "x": turns, "y": [r.shared_blocks for r in rows],
         "marker": {"color": "#2da44e"}},
        {"type": "bar", "name": "new blocks (prefilled)", "x": turns, "y": [r.new_blocks for r in rows],
         "marker": {"color": "#fb8500"}},
        {"type": "scatter", "mode": "lines", "name": f"KV held, {unit} (nothing evicted)", "x": turns,
         "yaxis": "y2", "y": [round(r.held_bytes / size, 2) for r in rows], "line": {"color": "#57606a"}}],
        "layout": {"barmode": "stack", "height": 300, "margin": {"l": 50, "r": 60, "t": 30, "b": 40},
                   "title": {"text": f"KV blocks per turn ({cfg.name}, block {bs})", "font": {"size": 13}},
                   "xaxis": {"title": {"text": "turn"}}, "yaxis": {"title": {"text": "blocks"}},
                   "yaxis2": {"title": {"text": unit}, "overlaying": "y", "side": "right", "rangemode": "tozero"},
                   "legend": {"orientation": "h", "y": -0.25}}}
