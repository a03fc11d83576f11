"""The charts drawn by Plotly in real Chromium: no legend over an axis title or tick labels."""

from __future__ import annotations

import json
from pathlib import Path

import plotly

from workbench import Assembler
from workbench.analysis.providers import PROVIDERS, TurnPrompt, simulate
from workbench.sessions import load_session
from workbench.ui.charts import budget_figure, cache_figure

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"

# The boxes of the legend and of the axes' titles and tick labels, once Plotly has drawn the figure.
BOXES = """
async (fig) => {
  const el = document.createElement("div");
  el.style.width = "900px";
  document.body.appendChild(el);
  await Plotly.newPlot(el, fig.data, fig.layout);
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const all = (sel) => [...el.querySelectorAll(sel)].filter((e) => e.getBoundingClientRect().width > 0).map(box);
  return {legend: all(".legend .bg"), axes: all(".xtitle, .ytitle, .y2title, .xtick text, .ytick text, .y2tick text"),
          title: all(".gtitle")};
}
"""


def overlaps(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def drawn(browser, fig: dict) -> dict:  # type: ignore[no-untyped-def]
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    try:
        page.goto("about:blank")
        page.add_script_tag(content=PLOTLY_JS.read_text("utf-8"))
        return page.evaluate(BOXES, json.loads(json.dumps(fig)))
    finally:
        page.close()


def test_the_budget_bar_legend_covers_neither_axis_nor_title(browser) -> None:  # type: ignore[no-untyped-def]
    asm = Assembler(template="qwen2.5", context_window=8192, reserve=1024, cache=None)
    got = drawn(browser, budget_figure(asm.assemble(load_session(SESSIONS / "overflow.json").turn(None))))
    assert got["legend"] and len(got["axes"]) > 3 and got["title"]
    for other in got["axes"] + got["title"]:
        assert not overlaps(got["legend"][0], other), (got["legend"][0], other)


def test_the_cache_chart_legend_covers_no_axis_and_pairs_colours(browser) -> None:  # type: ignore[no-untyped-def]
    asm = Assembler(template="qwen2.5", cache=None)
    s = asm.session()
    turns = [TurnPrompt.from_assembly(s.assemble(t)) for t in load_session(SESSIONS / "tool_agent.json").turns]
    fig = cache_figure([simulate(turns, p) for p in PROVIDERS])
    got = drawn(browser, fig)
    assert got["legend"] and len(got["axes"]) > 5
    for other in got["axes"] + got["title"]:
        assert not overlaps(got["legend"][0], other), (got["legend"][0], other)
    lines = [t for t in fig["data"] if t["type"] == "scatter"]
    colours = [t["line"]["color"] for t in lines]
    # each provider's cached and cost lines share a colour, and no two providers do
    assert colours[0::2] == colours[1::2] and len(set(colours)) == len(PROVIDERS)
