"""The KV panel, shared by both hosts (HTML strings and a Plotly figure dict, no UI library):

- the paged view of the session under a model shape (the chosen catalog model's, else a named one,
  Llama-3-8B by default, which the view then says: model_choice.KVChoice): per turn the prompt's blocks, the full
  blocks shared with what a vLLM-style cache already holds (from the vLLM simulation over every
  turn: its cached tokens are the shared full blocks), and the KV bytes: this prompt's and all the
  session's distinct blocks so far;
- on request, a real prefill of the previous turn and this one on the engine (synthetic `tiny` on
  the CPU by default): tokens reused and prefilled, prefill time with reuse and without, KV bytes.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from ..engine.kv import KV_CONFIGS, KVConfig

if TYPE_CHECKING:
    from ..engine.engine import PrefillReport
    from .state import Panels

DEFAULT_KV_CONFIG = "Llama-3-8B"
ROWS = 12     # the last turns shown in the table (the chart shows them all)


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 1024:,.1f} KiB"


def paged_rows(panels: "Panels", config: str | KVConfig = DEFAULT_KV_CONFIG) -> list[dict[str, Any]]:
    cfg = _config(config)
    sim = next((s for s in panels.simulations if s.provider == "vllm"), None)
    if sim is None:
        return []
    bs = getattr(sim.params, "block_size", 16) or 16
    rows, held = [], 0
    for t in sim.turns:
        blocks = -(-t.tokens // bs)
        shared = min(t.cached_tokens // bs, t.tokens // bs)
        full_new = t.tokens // bs - shared
        held += full_new
        rows.append({"turn": t.turn, "tokens": t.tokens, "blocks": blocks, "shared_blocks": shared,
                     "new_blocks": blocks - shared, "kv_bytes": cfg.bytes_for(t.tokens),
                     "held_bytes": (held + (1 if t.tokens % bs else 0)) * bs * cfg.bytes_per_token})
    return rows


def _config(config: str | KVConfig) -> KVConfig:
    return config if isinstance(config, KVConfig) else KV_CONFIGS[config]


def kv_html(panels: "Panels | None", config: str | KVConfig = DEFAULT_KV_CONFIG,
            prefill: "tuple[PrefillReport, PrefillReport, dict] | None" = None, note: str = "",
            shape_note: str = "") -> str:
    """`shape_note`: what to say about the shape (model_choice.KVChoice.note: a stand-in for a model
    whose own is not public, a sliding window's or MLA's caveat)."""
    if panels is None:
        return '<div class="wb-kv">computing every turn…</div>'
    cfg = _config(config)
    rows = paged_rows(panels, cfg)
    turn = next((r for r in rows if r["turn"] == panels.turn), rows[-1] if rows else None)
    parts = ['<div class="wb-kv">']
    if shape_note:
        parts.append(f'<p class="wb-kv-shape-note wb-muted">{escape(shape_note)}</p>')
    parts.append(f"<p><b class=\"wb-kv-shape\">{escape(cfg.name)}</b>: {cfg.layers} layers × {cfg.kv_heads} KV heads × "
                 f"{cfg.head_dim} head dim × 2 (K, V) × {cfg.dtype_bytes} bytes = "
                 f"<b>{cfg.bytes_per_token:,} bytes per token</b>.")
    if turn is not None:
        parts.append(f" Turn {turn['turn']}: {turn['tokens']:,} tokens = {_mib(turn['kv_bytes'])} of KV in "
                     f"{turn['blocks']:,} blocks of 16, {turn['shared_blocks']:,} of them shared with the "
                     f"previous turns (a vLLM-style prefix cache).")
    parts.append("</p>")
    if prefill is not None:
        prev, cur, model = prefill
        saved = f"{cur.baseline_ms - cur.prefill_ms:,.0f} ms saved" if cur.baseline_ms is not None else ""
        parts.append(
            f'<p class="wb-kv-prefill"><b>Prefill on {escape(model["label"])}</b> ({escape(model["device"])}, '
            f'{escape(model["dtype"])}): the previous turn ({prev.tokens:,} tokens) was prefilled, then this one: '
            f'<b>{cur.reused_tokens:,} tokens reused</b>, {cur.prefilled_tokens:,} prefilled in '
            f'{cur.prefill_ms:,.0f} ms; without reuse {cur.baseline_ms or 0:,.0f} ms ({saved}). '
            f'KV of this prompt {_mib(cur.kv_bytes)} ({model["kv"]["bytes_per_token"]:,} bytes per token).</p>')
        if cur.top:
            what = ("random weights: these words mean nothing" if model.get("synthetic")
                    else "what the model would write next")
            words = ", ".join(f"<code>{escape(repr(t.text))}</code> {t.prob:.1%}" for t in cur.top)
            parts.append(f'<p class="wb-kv-top">Most likely next tokens ({what}): {words}</p>')
    if note:
        parts.append(f'<p class="wb-kv-note">{escape(note)}</p>')
    head = "<tr><th>turn</th><th>tokens</th><th>blocks</th><th>shared</th><th>new</th><th>KV of the prompt</th>" \
           "<th>KV held (distinct blocks)</th></tr>"
    body = "".join(f"<tr><td>{r['turn']}</td><td>{r['tokens']:,}</td><td>{r['blocks']:,}</td>"
                   f"<td>{r['shared_blocks']:,}</td><td>{r['new_blocks']:,}</td><td>{_mib(r['kv_bytes'])}</td>"
                   f"<td>{_mib(r['held_bytes'])}</td></tr>" for r in rows[-ROWS:])
    parts.append(f'<table class="wb-table wb-kv-table">{head}{body}</table></div>')
    return "".join(parts)


def kv_figure(panels: "Panels | None", config: str | KVConfig = DEFAULT_KV_CONFIG) -> dict[str, Any]:
    cfg = _config(config)
    rows = paged_rows(panels, cfg) if panels is not None else []
    turns = [r["turn"] for r in rows]
    return {"data": [
        {"type": "bar", "name": "shared blocks (reused)", "x": turns, "y": [r["shared_blocks"] for r in rows],
         "marker": {"color": "#2da44e"}},
        {"type": "bar", "name": "new blocks (prefilled)", "x": turns, "y": [r["new_blocks"] for r in rows],
         "marker": {"color": "#fb8500"}},
        {"type": "scatter", "mode": "lines", "name": "KV held, MiB", "x": turns, "yaxis": "y2",
         "y": [round(r["held_bytes"] / 2**20, 2) for r in rows], "line": {"color": "#57606a"}}],
        "layout": {"barmode": "stack", "height": 300, "margin": {"l": 50, "r": 60, "t": 30, "b": 40},
                   "title": {"text": f"KV blocks per turn ({cfg.name}, block 16)", "font": {"size": 13}},
                   "xaxis": {"title": {"text": "turn"}}, "yaxis": {"title": {"text": "blocks"}},
                   "yaxis2": {"title": {"text": "MiB"}, "overlaying": "y", "side": "right"},
                   "legend": {"orientation": "h", "y": -0.25}}}
