"""Chart and panel data for the workbench views (issue 5): budget bar, cache panel, prefix diff; the
truncation policies side by side in the cache panel (issue 16)."""

from __future__ import annotations

from pathlib import Path

from workbench import Assembler
from workbench.analysis import analyze
from workbench.analysis.policies import compare_policies
from workbench.analysis.providers import TurnPrompt, simulate
from workbench.sessions import load_session
from workbench.ui.charts import budget_figure, cache_figure, prefix_diff
from workbench.ui.html import cache_html
from workbench.ui.state import WorkbenchState, sample_sessions

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


def test_cache_panel_compares_the_truncation_policies_when_the_session_truncates() -> None:
    samples = sample_sessions()
    state = WorkbenchState(samples["overflow.json"], autosave=None)
    p = state.panels()
    assert [r.policy for r in p.policies] == ["sliding", "chunked", "summary-slot"]
    assert p.policies[0].simulations == p.simulations          # the session's own run is the panel's
    # the same figures as the policies compared from scratch
    fresh = compare_policies(state.assembler(), [state.doc.request(k) for k in range(1, state.doc.turn_count + 1)])
    for got, want in zip(p.policies, fresh):
        assert got.to_json() == want.to_json()
    sliding, chunked, _ = p.policies
    assert chunked.cached_tokens("vllm") > sliding.cached_tokens("vllm")
    assert chunked.prefix_stable_turns > sliding.prefix_stable_turns
    html = cache_html(p)
    assert "Truncation policies over the 30 turns" in html and html.count('<tr class="wb-policy-') == 3
    assert f"{chunked.cached_tokens('anthropic'):,}" in html and "sliding (this session)" in html
    assert p.summary()["policies"][1]["truncation"] == "chunked"
    # an edit of the last turn: each other policy assembles that turn again, and keeps the others
    # (their prompts hold the very id arrays of the last panels)
    last = len(state.doc.messages(state.turn)) - 1
    state.apply({"op": "set", "index": last, "field": "content", "value": "and one more thing"})
    again = state.panels()
    for old, new in zip(p.policies[1:], again.policies[1:]):
        assert all(a.token_ids is b.token_ids for a, b in zip(old.prompts[:-1], new.prompts[:-1]))
        assert new.prompts[-1].token_ids is not old.prompts[-1].token_ids
    fresh = compare_policies(state.assembler(), [state.doc.request(k) for k in range(1, state.doc.turn_count + 1)])
    assert [r.to_json() for r in again.policies] == [r.to_json() for r in fresh]
    # the live view assembling the selected turn again (same inputs) keeps every other policy's turns
    state.assemble()
    third = state.panels()
    for old, new in zip(again.policies[1:], third.policies[1:]):
        assert all(a.token_ids is b.token_ids for a, b in zip(old.prompts, new.prompts))
    # a session that never truncates shows no comparison
    calm = WorkbenchState(samples["tool_agent.json"], autosave=None).panels()
    assert calm.policies == () and "Truncation policies" not in cache_html(calm)


def test_prefix_diff_shows_half_an_emoji_as_its_bytes() -> None:
    # The engine held "🫘" split across tokens; the new prompt breaks between them.
    asm = Assembler(template="qwen2.5", cache=None)
    turns = analyze(asm, [{"messages": [{"role": "system", "content": "🫘 x"}, {"role": "user", "content": "hi"}]},
                          {"messages": [{"role": "system", "content": "🫖 x"}, {"role": "user", "content": "hi"}]}])
    diff = prefix_diff(turns[1], asm.tokenizer)
    assert diff is not None
    texts = [t["text"] for t in diff["previous"] + diff["current"]]
    assert "\ufffd" not in "".join(texts) and any("<0xF0>" in t or "<0x9F>" in t for t in texts), texts


def test_cache_panel_counts_reused_segments_and_prompt_cache_lookups_apart() -> None:
    # "local 0%" beside "local: 220 segments" read as a contradiction: segments reused from the live
    # session's previous assembly are not prompt-cache lookups; each is shown with its own counts.
    state = WorkbenchState(sample_sessions()["tool_agent.json"], autosave=None)
    state.assemble()
    last = len(state.doc.messages(state.turn)) - 1
    state.apply({"op": "set", "index": last, "field": "content", "value": "and one more thing"})
    state.assemble()
    p = state.panels()
    m = state.assembler().cache.metrics()
    assert p.lookups["local"] == (m.hits["local"], m.hits["local"] + m.misses["local"])
    html = cache_html(p)
    hits, n = p.lookups["local"]
    assert f"local {hits:,} hit(s) of {n:,}" in html and "prompt cache lookups (whole prompts" in html
    reused = p.sources.get("local", {}).get("segments", 0)
    assert reused and f"<td>local (reused in this process)</td><td>{reused}</td>" in html
    assert "<td>local</td>" not in html
