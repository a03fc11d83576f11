"""Chart and panel data for both hosts, as plain Plotly figure dicts (no plotly import here).

- `budget_figure(result)`: one horizontal stacked bar, system / tools / history / last user /
  generation prompt / reserve / free, with what truncation dropped in the title; a prompt's image
  tokens (its `image` segments, `budget.by_kind["image"]`) as their own bar, taken out of the part
  they belong to (history or last user) and said in that part's hover. Over budget, the prompt
  stops at the input budget and the reserve fills the rest of the window; a line marks the window
  (and the input budget), and the tokens that do not fit lie past it in red, beside what truncation
  dropped (hatched).
- `cache_figure(simulations)`: cached tokens per turn under each provider simulation, and the
  cumulative cost on a second axis.
- `prefix_diff(prev, turn)`: the tokens around the first divergence between what the engine holds
  after the previous turn and this turn's prompt, for the prefix-diff view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..budget import part_of
from .budget_view import DROPPED

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
    """The bar. Within the window: the prompt's parts up to the input budget, then the reserve up to
    the window. Past it, marked by a line at the window (and one at the input budget): the prompt's
    tokens that do not fit, in red (no truncation, or a policy that cannot fit it), and what
    truncation dropped, hatched. With `overflow` (budget_view.py) a prompt shown whole by a policy
    that cannot fit it counts what the policy would drop there, not in its parts."""
    parts = dict(result.budget.parts)
    images = image_parts(result)
    dropped = 0
    if overflow is not None:
        dropped = overflow.dropped_tokens
        if overflow.full is result:        # the dropped messages are in `result`: out of its parts
            _take_dropped(result, overflow, parts, images)
    return _budget_bar(result, parts, images, dropped, overflow)


def _take_dropped(result: "AssemblyResult", overflow: "Overflow", parts: dict[str, int],
                  images: dict[str, int]) -> None:
    last_user = _last_user(result)
    for seg, flag in zip(overflow.segments, overflow.flags):
        if flag == DROPPED:
            part = part_of(seg, last_user)
            parts[part] -= seg.token_count
            if seg.kind == "image":
                images[part] -= seg.token_count


def _last_user(result: "AssemblyResult") -> int | None:
    return next((m.sequence for m in reversed(result.conversation.messages) if m.role == "user"), None)


def image_parts(result: "AssemblyResult") -> dict[str, int]:
    """The prompt's image tokens by the budget part that holds them (budget.part_of, as the budget
    counts them): {} when the prompt has no image segment."""
    if not result.budget.by_kind.get("image"):
        return {}
    last_user = _last_user(result)
    out: dict[str, int] = {}
    for seg in result.segments:
        if seg.kind == "image":
            part = part_of(seg, last_user)
            out[part] = out.get(part, 0) + seg.token_count
    return out


def _budget_bar(result: "AssemblyResult", parts: dict[str, int], images: dict[str, int], dropped: int,
                overflow: "Overflow | None") -> dict[str, Any]:
    b = result.budget
    cw, budget = b.context_window, b.input_budget
    # The prompt's pieces in the bar's order (each part's text, its images after the last user's).
    pieces: list[tuple[str, int, str]] = []          # (part, tokens, what its hover says)
    for k, n in parts.items():
        img = images.get(k, 0)
        said = f" ({n - img:,} text, {img:,} in images)" if img else ""
        pieces.append((k, n - img, f"{PART_LABELS[k]}: {n:,} tokens ({n / cw:.1%}){said}"))
        if k == "last_user" and any(images.values()):   # after the parts they come from, before the generation prompt
            total = sum(images.values())
            where = ", ".join(f"{n:,} in {PART_LABELS[p]}" for p, n in images.items() if n)
            pieces.append(("images", total, f"images: {total:,} tokens ({total / cw:.1%}; {where})"))
    used = sum(n for _, n, _ in pieces)
    over = max(used - budget, 0)
    # Within the window the prompt stops at the input budget (the reserve is the reply's, up to the
    # window); what is past it is drawn past the window, where it would have to go.
    traces: list[dict[str, Any]] = []
    past: list[str] = []
    room = budget
    for k, n, hover in pieces:
        inside = min(n, max(room, 0))
        room -= n
        if inside < n:
            past.append(f"{n - inside:,} of {PART_LABELS[k]}")
            hover += f" · {n - inside:,} of them past the input budget: drawn past the window"
        traces.append({"type": "bar", "orientation": "h", "name": PART_LABELS[k], "x": [inside], "y": ["window"],
                       "marker": {"color": PART_COLOURS[k]}, "hovertemplate": f"{hover}<extra></extra>"})
    traces.append(_plain("reserve", b.reserve, cw))
    if not over:
        traces.append(_plain("free", budget - used, cw))
    else:
        traces.append({"type": "bar", "orientation": "h", "name": "over the window", "x": [over], "y": ["window"],
                       "marker": {"color": "#ffebe9", "line": {"color": "#b42318", "width": 1},
                                  "pattern": {"shape": "x", "fgcolor": "#b42318"}},
                       "hovertemplate": f"over the input budget by {over:,} tokens ({', '.join(past)}): "
                                        "the prompt does not fit the window<extra></extra>"})
    if dropped:
        traces.append({"type": "bar", "orientation": "h", "name": "dropped (not sent)", "x": [dropped],
                       "y": ["window"], "marker": {"color": "#ffebe9", "pattern": {"shape": "/", "fgcolor": "#b42318"}},
                       "hovertemplate": f"dropped by truncation: {dropped:,} tokens, not sent<extra></extra>"})
    title = f"{used:,} of {budget:,} input tokens (window {cw:,}, reserve {b.reserve:,})"
    n_dropped = len(result.dropped) or (len(overflow.dropped_seqs) if overflow is not None else 0)
    if n_dropped:
        title += f" · truncation dropped {n_dropped} message(s)"
    if over:
        title += f" · over budget by {over:,}"
    # The legend sits between the title and the bar: below it, Plotly's horizontal legend covered
    # the axis labels and title.
    layout: dict[str, Any] = {"barmode": "stack", "title": {"text": title, "y": 0.96, "yanchor": "top"},
                              "height": 190, "margin": {"l": 60, "r": 20, "t": 80, "b": 45},
                              "xaxis": {"range": [0, cw + over + dropped], "title": {"text": "tokens"}},
                              "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"}}
    if over or dropped:
        layout["shapes"], layout["annotations"] = _marks(cw, budget, over)
    return {"data": traces, "layout": layout}


def _plain(key: str, n: int, cw: int) -> dict[str, Any]:
    return {"type": "bar", "orientation": "h", "name": PART_LABELS[key], "x": [n], "y": ["window"],
            "marker": {"color": PART_COLOURS[key]},
            "hovertemplate": f"{PART_LABELS[key]}: {n:,} tokens ({n / cw:.1%})<extra></extra>"}


def _marks(cw: int, budget: int, over: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A line at the window (what lies past it is not in the model's window), and with an overflow
    one at the input budget, where the reserve begins; each named above the bar."""
    def line(x: int, name: str, dash: str) -> dict[str, Any]:
        return {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1, "name": name,
                "line": {"color": "#b42318", "width": 2, "dash": dash}}

    def label(x: int, text: str, anchor: str) -> dict[str, Any]:
        # Inside the plot, at the top of its line, on a light box: outside it the legend (above) and
        # the tick labels (below) sit.
        return {"x": x, "xref": "x", "y": 1, "yref": "paper", "yanchor": "top", "xanchor": anchor,
                "text": text, "showarrow": False, "font": {"size": 10, "color": "#b42318"},
                "bgcolor": "rgba(255, 255, 255, 0.85)"}

    shapes = [line(cw, "context window", "solid")]
    notes = [label(cw, f"window {cw:,}", "left")]
    if over:
        shapes.append(line(budget, "input budget", "dot"))
        notes.append(label(budget, f"input budget {budget:,}", "right"))
    return shapes, notes


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
