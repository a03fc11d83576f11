"""Chart and panel data for both hosts, as plain Plotly figure dicts (no plotly import here).

- `budget_figure(result)`: one horizontal stacked bar, system / tools / history / last user /
  generation prompt / reserve / free, with what truncation dropped in the title; a prompt's image
  tokens (its `image` segments, `budget.by_kind["image"]`) as their own bar, taken out of the part
  they belong to (history or last user) and said in that part's hover.
- `cache_figure(simulations)`: cached tokens per turn under each provider simulation, and the
  cumulative cost on a second axis.
- `prefix_diff(prev, turn)`: the tokens around the first divergence between what the engine holds
  after the previous turn and this turn's prompt, for the prefix-diff view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..analysis import TurnAnalysis
    from ..analysis.providers import Simulation
    from ..assembly.result import AssemblyResult
    from ..tokenizers.base import Tokenizer
    from .budget_view import Overflow

PART_COLOURS = {"system": "#8250df", "tools": "#bf8700", "history": "#57606a", "last_user": "#1a7f37",
                "generation_prompt": "#0969da", "reserve": "#d0d7de", "free": "#f6f8fa", "images": "#bf3989"}
PART_LABELS = {"system": "system", "tools": "tools", "history": "history", "last_user": "last user",
               "generation_prompt": "generation prompt", "reserve": "reserve", "free": "free", "images": "images"}


def budget_figure(result: "AssemblyResult", overflow: "Overflow | None" = None) -> dict[str, Any]:
    """The bar; with `overflow` (budget_view.mark), the tokens past the input budget in red beyond
    it, and what truncation dropped, hatched, after the window."""
    fig = _budget_bar(result)
    if overflow is not None:
        _mark_overflow(fig, result, overflow)
    return fig


def _mark_overflow(fig: dict[str, Any], result: "AssemblyResult", overflow: "Overflow") -> None:
    b, layout = result.budget, fig["layout"]
    end = b.context_window
    if overflow.over:
        # The red band starts at the input budget: the reserve's place, and beyond the window.
        layout["shapes"] = [{"type": "rect", "xref": "x", "yref": "paper", "x0": b.input_budget,
                             "x1": b.input_budget + overflow.over, "y0": 0, "y1": 1, "line": {"color": "#b42318"},
                             "fillcolor": "rgba(180, 35, 24, 0.25)", "name": "over the window"}]
        # (The title says "over budget by" already: the result shown is the whole prompt.)
    if overflow.dropped_tokens:
        fig["data"].append({"type": "bar", "orientation": "h", "name": "dropped (not sent)",
                            "x": [overflow.dropped_tokens], "y": ["window"],
                            "marker": {"color": "#ffebe9", "pattern": {"shape": "/", "fgcolor": "#b42318"}},
                            "hovertemplate": f"dropped by truncation: {overflow.dropped_tokens:,} tokens, "
                                             "not sent<extra></extra>"})
    # Everything stacked (the prompt, the reserve, what was dropped) within the axis.
    layout["xaxis"]["range"] = [0, max(end, sum(t["x"][0] for t in fig["data"]))]


def image_parts(result: "AssemblyResult") -> dict[str, int]:
    """The prompt's image tokens by the budget part that holds them (budget.part_of, as the budget
    counts them): {} when the prompt has no image segment."""
    if not result.budget.by_kind.get("image"):
        return {}
    from ..budget import part_of
    last_user = next((m.sequence for m in reversed(result.conversation.messages) if m.role == "user"), None)
    out: dict[str, int] = {}
    for seg in result.segments:
        if seg.kind == "image":
            part = part_of(seg, last_user)
            out[part] = out.get(part, 0) + seg.token_count
    return out


def _budget_bar(result: "AssemblyResult") -> dict[str, Any]:
    b = result.budget
    rows = b.breakdown()
    images = image_parts(result)
    traces = []
    for k, v in rows.items():
        n, img = int(v["tokens"]), images.get(k, 0)
        said = f" ({n - img:,} text, {img:,} in images)" if img else ""
        traces.append({"type": "bar", "orientation": "h", "name": PART_LABELS[k], "x": [n - img], "y": ["window"],
                       "marker": {"color": PART_COLOURS[k]},
                       "hovertemplate": f"{PART_LABELS[k]}: {n:,} tokens ({v['share']:.1%}){said}<extra></extra>"})
        if k == "last_user" and images:    # after the parts they come from, before the generation prompt
            total = sum(images.values())
            traces.append({"type": "bar", "orientation": "h", "name": PART_LABELS["images"], "x": [total],
                           "y": ["window"], "marker": {"color": PART_COLOURS["images"]},
                           "hovertemplate": f"images: {total:,} tokens ({total / b.context_window:.1%}; "
                                            f"{', '.join(f'{n:,} in {PART_LABELS[p]}' for p, n in images.items())})"
                                            "<extra></extra>"})
    title = f"{b.used:,} of {b.input_budget:,} input tokens (window {b.context_window:,}, reserve {b.reserve:,})"
    if result.dropped:
        title += f" · truncation dropped {len(result.dropped)} message(s)"
    if b.free < 0:
        title += f" · over budget by {-b.free:,}"
    # The legend sits between the title and the bar: below it, Plotly's horizontal legend covered
    # the axis labels and title.
    return {"data": traces, "layout": {"barmode": "stack", "title": {"text": title, "y": 0.96, "yanchor": "top"},
                                       "height": 190, "margin": {"l": 60, "r": 20, "t": 80, "b": 45},
                                       "xaxis": {"range": [0, b.context_window], "title": {"text": "tokens"}},
                                       "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"}}}


PROVIDER_COLOURS = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#57606a")
PROVIDER_MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "star")


def cache_figure(simulations: Sequence["Simulation"]) -> dict[str, Any]:
    # One colour and marker per provider, its cost line dotted in the same colour: eight lines in
    # Plotly's default cycle could not be told apart, nor paired.
    traces: list[dict[str, Any]] = []
    for k, sim in enumerate(simulations):
        turns = [t.turn for t in sim.turns]
        colour = PROVIDER_COLOURS[k % len(PROVIDER_COLOURS)]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"{sim.provider} cached",
                       "legendgroup": sim.provider, "line": {"color": colour},
                       "marker": {"symbol": PROVIDER_MARKERS[k % len(PROVIDER_MARKERS)], "size": 6},
                       "x": turns, "y": [t.cached_tokens for t in sim.turns]})
        traces.append({"type": "scatter", "mode": "lines", "name": f"{sim.provider} cost", "yaxis": "y2",
                       "legendgroup": sim.provider, "line": {"dash": "dot", "color": colour}, "x": turns,
                       "y": np.cumsum([t.cost for t in sim.turns]).round(6).tolist()})
    if simulations:
        first = simulations[0]
        traces.insert(0, {"type": "bar", "name": "prompt tokens", "opacity": 0.25,
                          "x": [t.turn for t in first.turns], "y": [t.tokens for t in first.turns]})
    # The legend above the plot, under the title: below it, it covered the "turn" axis title.
    return {"data": traces, "layout": {"title": {"text": "Cached tokens per turn, by provider (cost: cumulative, "
                                                         "example prices)", "y": 0.97, "yanchor": "top"},
                                       "height": 460, "margin": {"t": 110, "b": 50},
                                       "xaxis": {"title": {"text": "turn"}},
                                       "yaxis": {"title": {"text": "tokens"}},
                                       "yaxis2": {"title": {"text": "cost ($)"}, "overlaying": "y", "side": "right"},
                                       "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"}}}


def prefix_diff(turn: "TurnAnalysis", tokenizer: "Tokenizer", context: int = 8) -> dict[str, Any] | None:
    """The first divergence, with `context` tokens either side in what the engine holds after the
    previous turn and in this prompt. None when this turn reuses everything the engine holds."""
    d = turn.first_divergence
    if d is None or turn.held is None:
        return None
    new = turn.result.token_ids
    old = turn.held

    def window(ids: np.ndarray) -> list[dict[str, Any]]:
        lo, hi = max(d - context, 0), min(d + context + 1, len(ids))
        # A token's own bytes: half an emoji is `<0xF0><0x9F>`, not a replacement character.
        return [{"index": i, "id": int(ids[i]), "text": text, "diverges": i >= d}
                for i, text in zip(range(lo, hi), tokenizer.token_strings(ids[lo:hi]))]

    return {"first_divergence": d, "segment": turn.divergence_kind, "seq": turn.divergence_seq,
            "previous": window(old), "current": window(new),
            "causes": [c.to_json() for c in turn.causes]}
