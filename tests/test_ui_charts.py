"""Chart and panel data for the workbench views (issue 5): budget bar, cache panel, prefix diff."""

from __future__ import annotations

from pathlib import Path

from workbench import Assembler
from workbench.analysis import analyze
from workbench.analysis.providers import TurnPrompt, simulate
from workbench.sessions import load_session
from workbench.ui.charts import budget_figure, cache_figure, prefix_diff

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"


def test_budget_bar_adds_up_to_the_window_and_names_drops() -> None:
    asm = Assembler(template="qwen2.5", context_window=8192, reserve=1024, cache=None)
    r = asm.assemble(load_session(SESSIONS / "overflow.json").turn(None))
    fig = budget_figure(r)
    assert sum(t["x"][0] for t in fig["data"]) == 8192
    assert [t["name"] for t in fig["data"]] == ["system", "tools", "history", "last user", "generation prompt",
                                                "reserve", "free"]
    assert f"dropped {len(r.dropped)}" in fig["layout"]["title"]["text"]


def test_cache_figure_has_a_line_per_provider() -> None:
    asm = Assembler(template="qwen2.5", cache=None)
    s = asm.session()
    turns = [TurnPrompt.from_assembly(s.assemble(t)) for t in load_session(SESSIONS / "tool_agent.json").turns]
    sims = [simulate(turns, p) for p in ("openai", "vllm")]
    fig = cache_figure(sims)
    names = [t["name"] for t in fig["data"]]
    assert names == ["prompt tokens", "openai cached", "openai cost", "vllm cached", "vllm cost"]
    assert fig["data"][3]["y"] == [t.cached_tokens for t in sims[1].turns]
    costs = fig["data"][2]["y"]
    assert costs == sorted(costs) and abs(costs[-1] - sims[0].total_cost) < 1e-5


def test_prefix_diff_marks_the_timestamp() -> None:
    asm = Assembler(template="qwen2.5", cache=None)
    turns = analyze(asm, load_session(SESSIONS / "timestamp_system.json").turns)
    assert prefix_diff(turns[0], asm.tokenizer) is None
    diff = prefix_diff(turns[1], asm.tokenizer)
    assert diff is not None and diff["segment"] == "system" and diff["causes"][0]["code"] == "volatile_content"
    d = diff["first_divergence"]
    before = [t for t in diff["current"] if not t["diverges"]]
    assert before and all(t["index"] < d for t in before)
    prev_at = next(t for t in diff["previous"] if t["index"] == d)
    cur_at = next(t for t in diff["current"] if t["index"] == d)
    assert prev_at["id"] != cur_at["id"]
    assert [t["id"] for t in diff["previous"] if t["index"] < d] == [t["id"] for t in before]
