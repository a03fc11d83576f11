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


def test_an_over_budget_prompt_keeps_the_reserve_in_the_window_and_the_overflow_past_it() -> None:
    """Issue 33: with no truncation and a prompt over the budget, the bar used to stack the reserve
    after the overflow and mark nothing at the window."""
    from workbench.truncation import TruncationPolicy
    asm = Assembler(template="qwen2.5", context_window=4096, reserve=1024, cache=None,
                    truncation=TruncationPolicy(enabled=False))
    r = asm.assemble(load_session(SESSIONS / "support_chat.json").turn(None))
    b = r.budget
    assert b.used > b.input_budget
    fig = budget_figure(r)
    x = [t["x"][0] for t in fig["data"]]
    names = [t["name"] for t in fig["data"]]
    # The prompt up to the input budget, the reserve from there to the window, the overflow past it.
    assert names[-2:] == ["reserve", "over the window"]
    assert sum(x[:-2]) == b.input_budget and sum(x[:-1]) == b.context_window
    assert x[-1] == b.used - b.input_budget and sum(x) == b.context_window + b.used - b.input_budget
    lines = {sh["name"]: (sh["x0"], sh["x1"]) for sh in fig["layout"]["shapes"]}
    assert lines == {"context window": (4096, 4096), "input budget": (3072, 3072)}
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["window 4,096", "input budget 3,072"]
    assert fig["layout"]["xaxis"]["range"] == [0, b.context_window + b.used - b.input_budget]
    # Which parts hold the tokens past the budget, said on hover.
    over = fig["data"][-1]["hovertemplate"]
    assert f"over the input budget by {b.used - b.input_budget:,} tokens" in over and "of last user" in over


def test_a_policy_that_cannot_fit_counts_what_it_drops_once() -> None:
    """A prompt shown whole (the policy cannot fit it): what it would drop is the hatched bar only,
    not also in the history; the kept rest up to the budget, then the reserve, then the overflow."""
    s = WorkbenchState(sample_sessions()["support_chat.json"], autosave=None, restore=False)
    s.set_budget(context_window="300")
    r = s.assemble()
    ov = s.overflow
    assert ov is not None and ov.refused and ov.full is r and ov.dropped_tokens
    fig = budget_figure(r, ov)
    x = {t["name"]: t["x"][0] for t in fig["data"]}
    assert x["dropped (not sent)"] == ov.dropped_tokens and x["over the window"] == ov.over
    assert x["history"] == 0                                   # every history message is dropped
    inside = sum(v for k, v in x.items() if k not in ("reserve", "over the window", "dropped (not sent)"))
    assert inside + ov.over == r.budget.used - ov.dropped_tokens and inside == r.budget.input_budget
    assert sum(x.values()) == fig["layout"]["xaxis"]["range"][1]


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
