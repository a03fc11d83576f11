"""The Compare tab as HTML, for both hosts (plain strings, every value escaped): the two sides'
headers, each side's cache figures, the per-segment count table with deltas, and the two token
views side by side, segment by matched segment, each token marked equal, changed, or only on its
side, special tokens distinct, bytes of a split character shown as `<0xF0>`."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from .compare import CHANGED, ONLY, SegmentRow, SideResult, segment_label

if TYPE_CHECKING:
    from ..analysis.providers import Simulation
    from .compare import Comparison

SMALL = 2_000          # prompts up to this many tokens show every segment; longer ones fold equal segments
CELL_TOKENS = 2_000    # tokens drawn per segment cell; the rest are counted
SIDE_TOKENS = 12_000   # tokens drawn per side in all (a page of spans, not megabytes of them)
MAX_ROWS = 400         # rows of the count table and the token grid

CSS = """
.wb-cmp { font-family: system-ui, sans-serif; font-size: 12.5px; }
.wb-cmp-head { display: grid; grid-template-columns: 1fr 1fr; gap: 8px; margin: 4px 0; }
.wb-cmp-side { border: 1px solid #d0d7de; border-radius: 4px; padding: 4px 8px; background: #f6f8fa; }
.wb-cmp-side b.wb-cmp-total { font-size: 14px; }
.wb-cmp-error { color: #b42318; white-space: pre-wrap; }
.wb-cmp-tables { display: flex; gap: 16px; flex-wrap: wrap; align-items: flex-start; }
.wb-cmp-counts-box { max-height: 260px; overflow: auto; }
.wb-cmp-grid { display: grid; grid-template-columns: 1fr 1fr; gap: 2px 8px; max-height: 620px; overflow: auto;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
.wb-cmp-cell { border-top: 1px solid #eaeef2; padding: 2px 0; white-space: pre-wrap; word-break: break-word; }
.wb-cmp-seg { font-family: system-ui, sans-serif; font-size: 11px; color: #57606a; display: block; }
.wb-cmp-tok { border-radius: 2px; padding: 0 1px; margin: 0 0.5px; }
.wb-cmp-eq:nth-child(odd) { background: #eef4ff; } .wb-cmp-eq:nth-child(even) { background: #f5f0ff; }
.wb-cmp-chg { background: #fff1b8; outline: 1px solid #d4a72c; }
.wb-cmp-only { background: #ffd8d3; outline: 1px solid #cf222e; }
.wb-cmp-special { font-weight: 700; color: #8250df; }
.wb-cmp-fold { color: #57606a; font-style: italic; }
.wb-cmp-folded { grid-column: 1 / span 2; font-family: system-ui, sans-serif; font-size: 11.5px; }
.wb-cmp-plus { color: #1a7f37; } .wb-cmp-minus { color: #b42318; }
.wb-cmp-legend span { margin-right: 10px; }
.wb-cmp .wb-muted { color: #57606a; }
"""


def compare_html(c: "Comparison | None", error: str = "", note: str = "") -> str:
    if c is None:
        text = f'<div class="wb-cmp-error">{escape(error)}</div>' if error else \
            f'<div class="wb-muted">{escape(note or "comparing…")}</div>'
        return f'<div class="wb-cmp">{text}</div>'
    rows = _rows(c)
    head = f'<div class="wb-cmp-head">{_side_head(c.a, c.delta, "a")}{_side_head(c.b, c.delta, "b")}</div>'
    legend = ('<div class="wb-cmp-legend"><span class="wb-cmp-tok wb-cmp-chg">changed</span>'
              '<span class="wb-cmp-tok wb-cmp-only">only on this side</span>'
              '<span class="wb-cmp-tok wb-cmp-special">special token</span>'
              f'<span>{"the same prompt on both sides" if c.identical else _ops(c)}</span></div>')
    fold = max(len(c.a.ids), len(c.b.ids)) > SMALL
    tables = (f'<div class="wb-cmp-tables"><div class="wb-cmp-counts-box">{_counts(rows, fold)}</div>'
              f'{_cache(c)}</div>')
    err = "".join(f'<div class="wb-cmp-error">{escape(s.side.label)}: {escape(s.error)}</div>'
                  for s in (c.a, c.b) if s.error)
    return f'<div class="wb-cmp">{head}{err}{legend}{tables}{_grid(c, rows)}</div>'


def _side_head(s: SideResult, delta: int, which: str) -> str:
    if not s.ok:
        return (f'<div class="wb-cmp-side wb-cmp-side-{which}"><b>{escape(s.side.label)}</b>'
                f'<div class="wb-cmp-error">{escape(s.error)}</div></div>')
    r = s.result
    assert r is not None
    extra = f' · <span class="{_sign_class(delta)}">Δ {delta:+,}</span>' if which == "b" and delta else ""
    dropped = f" · truncation dropped {len(r.dropped)}" if r.dropped else ""
    return (f'<div class="wb-cmp-side wb-cmp-side-{which}"><b>{escape(s.side.label)}</b><br>'
            f'<b class="wb-cmp-total">{len(s.ids):,} tokens</b>{extra} · turn {s.turn} · '
            f'{escape(r.template["name"])} / {escape(r.tokenizer["name"])} · {len(s.segments)} segments{dropped}</div>')


def _sign_class(d: int) -> str:
    return "wb-cmp-plus" if d > 0 else "wb-cmp-minus" if d < 0 else ""


def _ops(c: "Comparison") -> str:
    ops = c.summary()["runs"]
    return " · ".join(f"{escape(k)} {v:,} tokens" for k, v in ops.items())


def _rows(c: "Comparison") -> tuple[SegmentRow, ...]:
    """The matched rows; with one side failed, the other side's segments alone."""
    if c.rows or (c.a.ok and c.b.ok):
        return c.rows
    s, left = (c.a, True) if c.a.ok else (c.b, False)
    return tuple(SegmentRow(segment_label(seg), k if left else None, None if left else k,
                            seg.token_count if left else 0, 0 if left else seg.token_count, 0, 0)
                 for k, seg in enumerate(s.segments))


def _counts(rows: tuple[SegmentRow, ...], fold: bool) -> str:
    """The count table; in a long prompt, the segments the same on both sides are counted, not listed."""
    total_a, total_b = sum(r.left_tokens for r in rows), sum(r.right_tokens for r in rows)
    same = sum(1 for r in rows if _same(r) and r.delta == 0) if fold else 0
    if same:
        rows = tuple(r for r in rows if not (_same(r) and r.delta == 0))
    body = "".join(f'<tr><td>{escape(r.label)}</td><td>{r.left_tokens:,}</td><td>{r.right_tokens:,}</td>'
                   f'<td class="{_sign_class(r.delta)}">{r.delta:+,}</td></tr>' for r in rows[:MAX_ROWS])
    more = f'<tr><td colspan="4">… {len(rows) - MAX_ROWS:,} more segments</td></tr>' if len(rows) > MAX_ROWS else ""
    if same:
        more += f'<tr><td colspan="4" class="wb-cmp-fold">{same:,} more segments the same on both sides</td></tr>'
    return (f'<table class="wb-table wb-cmp-counts"><tr><th>segment</th><th>A</th><th>B</th><th>Δ</th></tr>'
            f'<tr><td><b>all</b></td><td><b>{total_a:,}</b></td><td><b>{total_b:,}</b></td>'
            f'<td class="{_sign_class(total_b - total_a)}"><b>{total_b - total_a:+,}</b></td></tr>{body}{more}</table>')


def _cache(c: "Comparison") -> str:
    if not c.cache:
        return '<div class="wb-cmp-cache wb-muted">cache figures: assembling every turn of each side…</div>'
    a = {s.provider: s for s in c.a.simulations}
    b = {s.provider: s for s in c.b.simulations}
    rows = "".join(f"<tr><td>{escape(p)}</td>{_figures(a.get(p), b.get(p), c.a, c.b)}</tr>"
                   for p in dict.fromkeys([*a, *b]))
    return ('<div class="wb-cmp-cache"><b>Cache figures, every turn of each side</b>'
            '<table class="wb-table wb-cmp-cache-table"><tr><th>provider</th><th>hit A</th><th>hit B</th>'
            '<th>cached A (this turn)</th><th>cached B</th><th>cost A</th><th>cost B</th></tr>'
            f'{rows}</table></div>')


def _figures(sa: "Simulation | None", sb: "Simulation | None", a: SideResult, b: SideResult) -> str:
    """One provider's hit ratio, this turn's cached tokens and the session's cost, A then B."""
    def cached(sim: "Simulation | None", side: SideResult) -> str:
        turns = sim.turns if sim is not None else ()
        if not 0 < side.turn <= len(turns):
            return "–"
        t = turns[side.turn - 1]      # a zero says why, as on the Cache tab (the simulator's reason)
        return f"{t.cached_tokens:,}" + (f'<div class="wb-why">{escape(t.why)}</div>' if not t.cached_tokens and t.why
                                         else "")

    hit = [f"{s.hit_ratio:.1%}" if s else "–" for s in (sa, sb)]
    cost = [f"${s.total_cost:.4f}" if s else "–" for s in (sa, sb)]
    return (f"<td>{hit[0]}</td><td>{hit[1]}</td><td>{cached(sa, a)}</td><td>{cached(sb, b)}</td>"
            f"<td>{cost[0]}</td><td>{cost[1]}</td>")


def _same(r: SegmentRow) -> bool:
    return r.left is not None and r.right is not None and r.left_changed == 0 and r.right_changed == 0


def _grid(c: "Comparison", rows: tuple[SegmentRow, ...]) -> str:
    """Matched segments side by side; in a long prompt, each stretch of segments the same on both
    sides is one folded line, so the differences are what shows."""
    fold = max(len(c.a.ids), len(c.b.ids)) > SMALL
    cells: list[str] = []
    stretch: list[SegmentRow] = []

    def flush() -> None:
        if stretch:
            n = sum(r.left_tokens for r in stretch)
            names = stretch[0].label if len(stretch) == 1 else f"{stretch[0].label} … {stretch[-1].label}"
            cells.append(f'<div class="wb-cmp-cell wb-cmp-folded"><span class="wb-cmp-fold">{len(stretch):,} '
                         f'segment(s), {n:,} tokens, the same on both sides ({escape(names)})</span></div>')
            stretch.clear()

    left = {"a": SIDE_TOKENS, "b": SIDE_TOKENS}
    for r in rows[:MAX_ROWS]:
        if fold and _same(r):
            stretch.append(r)
            continue
        flush()
        cells.append(_cell(c.a, r.left, "a", left))
        cells.append(_cell(c.b, r.right, "b", left))
    flush()
    return f'<div class="wb-cmp-grid">{"".join(cells)}</div>'


def _cell(s: SideResult, k: int | None, which: str, left: dict[str, int]) -> str:
    if k is None or not s.ok:
        return f'<div class="wb-cmp-cell wb-cmp-{which}"></div>'
    seg = s.segments[k]
    head = f'<span class="wb-cmp-seg">{escape(segment_label(seg))} · {seg.token_count:,} tokens</span>'
    toks = []
    end = min(seg.end, seg.start + CELL_TOKENS, seg.start + left[which])
    left[which] -= end - seg.start
    for i in range(seg.start, end):
        tid = int(s.ids[i])
        mark = s.marks[i] if i < len(s.marks) else 0
        cls = "wb-cmp-chg" if mark == CHANGED else "wb-cmp-only" if mark == ONLY else "wb-cmp-eq"
        if tid in s.specials:
            cls += " wb-cmp-special"
        text = s.labels[i].replace("\n", "↵\n") if i < len(s.labels) else ""
        toks.append(f'<span class="wb-cmp-tok {cls}" title="id {tid}">{escape(text)}</span>')
    more = f'<span class="wb-cmp-fold"> … {seg.end - end:,} more tokens</span>' if end < seg.end else ""
    return f'<div class="wb-cmp-cell wb-cmp-{which}">{head}{"".join(toks)}{more}</div>'
