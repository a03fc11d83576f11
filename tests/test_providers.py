"""Provider prefix-cache simulation (SPEC 3.3, 7.3): OpenAI, Anthropic, vLLM and SGLang rules,
their parameters as data, and the invariants every simulator keeps.

Token arrays are synthetic: the rules only look at ids, never at what they spell.
"""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.analysis import providers
from workbench.analysis.provider_params import ProviderParams
from workbench.analysis.providers import (
    PROVIDERS,
    SGLangSimulator,
    TurnPrompt,
    VLLMSimulator,
    make_simulator,
    simulate,
)
from workbench.difference import first_difference
from workbench.errors import ProviderParamsError, SimulationError, UnknownProviderError, WorkbenchError


def toks(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 150_000, n, dtype=np.uint32)


def edited(a: np.ndarray, i: int) -> np.ndarray:
    b = a.copy()
    b[i] = (int(b[i]) + 1) % 150_000
    return b


def cached(sim) -> list[int]:  # type: ignore[no-untyped-def]
    return [t.cached_tokens for t in sim.turns]


def oa_round(n: int) -> int:
    """What OpenAI reports for a shared prefix of n tokens."""
    return n // 128 * 128 if n >= 1024 else 0


def test_module_docstring_examples_run() -> None:
    assert doctest.testmod(providers).failed == 0


# ---------------------------------------------------------------- OpenAI

@pytest.mark.parametrize("n", [1, 500, 1000, 1023])
def test_openai_below_1024_tokens_nothing_is_cached(n: int) -> None:
    a = toks(n)
    assert cached(simulate([TurnPrompt(a)] * 3, "openai")) == [0, 0, 0]


@pytest.mark.parametrize("n", [1024, 1100, 1151, 1152, 1279, 2000, 5003])
def test_openai_repeated_prompt_is_cached_in_128_token_increments(n: int) -> None:
    a = toks(n)
    got = cached(simulate([TurnPrompt(a), TurnPrompt(a)], "openai"))
    assert got == [0, n // 128 * 128]
    assert got[1] >= 1024 and got[1] % 128 == 0


def test_openai_shared_prefix_rounded_down_to_the_increment() -> None:
    a, other = toks(3000), toks(800, seed=9)
    second = np.concatenate([a[:2500], other])
    assert cached(simulate([TurnPrompt(a), TurnPrompt(second)], "openai")) == [0, 2432]


def test_openai_prefix_shorter_than_the_minimum_is_not_a_hit() -> None:
    a = toks(3000)
    second = np.concatenate([a[:1000], toks(2000, seed=5)])
    assert cached(simulate([TurnPrompt(a), TurnPrompt(second)], "openai")) == [0, 0]


def test_openai_entries_expire_after_the_idle_ttl() -> None:
    a = toks(2048)
    assert cached(simulate([TurnPrompt(a, time_s=0), TurnPrompt(a, time_s=299)], "openai"))[1] == 2048
    assert cached(simulate([TurnPrompt(a, time_s=0), TurnPrompt(a, time_s=301)], "openai"))[1] == 0
    # a hit keeps the entry warm: 0 -> 250 -> 500 is never idle for 300 s
    chain = [TurnPrompt(a, time_s=0), TurnPrompt(a, time_s=250), TurnPrompt(a, time_s=500)]
    assert cached(simulate(chain, "openai")) == [0, 2048, 2048]
    long_ttl = ProviderParams.load("openai", overrides={"ttl_s": 600})
    assert cached(simulate([TurnPrompt(a, time_s=0), TurnPrompt(a, time_s=500)], "openai", long_ttl))[1] == 2048


def test_openai_default_turns_are_60_s_apart() -> None:
    a = toks(2048)
    sim = simulate([TurnPrompt(a)] * 3, "openai")
    assert [t.time_s for t in sim.turns] == [0.0, 60.0, 120.0]
    short = ProviderParams.load("openai", overrides={"ttl_s": 59})
    assert cached(simulate([TurnPrompt(a)] * 3, "openai", short)) == [0, 0, 0]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1024, 4000), data=st.data())
def test_openai_an_edit_at_token_i_caps_the_hit_at_floor_i_128(n: int, data: st.DataObject) -> None:
    i = data.draw(st.integers(0, n - 1))
    a = toks(n, seed=n)
    got = cached(simulate([TurnPrompt(a), TurnPrompt(edited(a, i))], "openai"))[1]
    assert got == oa_round(i)


def test_openai_cached_input_is_billed_at_the_model_discount() -> None:
    a = toks(3000)
    params = ProviderParams.load("openai", overrides={"model": "gpt-4.1"})
    assert params.prices.cached_input == pytest.approx(0.5)       # 0.25 x 2.00
    t2 = simulate([TurnPrompt(a), TurnPrompt(a, output_tokens=100)], "openai", params).turns[1]
    expect = ((3000 - t2.cached_tokens) * 2.00 + t2.cached_tokens * 0.5 + 100 * 8.00) / 1e6
    assert t2.cost == pytest.approx(expect)
    assert t2.uncached_tokens == 3000 - t2.cached_tokens and t2.cache_write_tokens == 0
    gpt5 = ProviderParams.load("openai", overrides={"model": "gpt-5"})
    assert gpt5.prices.cached_input == pytest.approx(0.1 * gpt5.prices.input)


def test_openai_a_branch_hits_the_earlier_request_it_shares_most_with() -> None:
    a, b = toks(4000, 1), toks(4000, 2)
    mix = np.concatenate([b[:3000], a[:100]])
    assert cached(simulate([TurnPrompt(a), TurnPrompt(b), TurnPrompt(mix)], "openai")) == [0, 0, 2944]


# ---------------------------------------------------------------- Anthropic

def test_anthropic_without_breakpoints_nothing_is_cached() -> None:
    a = toks(5000)
    sim = simulate([TurnPrompt(a)] * 3, "anthropic")
    assert cached(sim) == [0, 0, 0]
    assert all(t.cache_write_tokens == 0 and t.uncached_tokens == 5000 for t in sim.turns)


def test_anthropic_writes_then_reads_at_the_breakpoint() -> None:
    a = toks(6000)
    turns = [TurnPrompt(a[:3500], (3000,)), TurnPrompt(a[:3600], (3000,)),
             TurnPrompt(a[:5500], (3000, 5000))]
    sim = simulate(turns, "anthropic")
    assert [(t.cached_tokens, t.cache_write_tokens, t.uncached_tokens) for t in sim.turns] == [
        (0, 3000, 500), (3000, 0, 600), (3000, 2000, 500)]


def test_anthropic_changed_prefix_is_written_again() -> None:
    a = toks(4000)
    sim = simulate([TurnPrompt(a, (4000,)), TurnPrompt(edited(a, 10), (4000,))], "anthropic")
    assert cached(sim) == [0, 0] and [t.cache_write_tokens for t in sim.turns] == [4000, 4000]


def test_anthropic_minimum_cacheable_length_is_per_model() -> None:
    a = toks(3000)
    turns = [TurnPrompt(a, (1500,)), TurnPrompt(a, (1500,))]
    sonnet = simulate(turns, "anthropic")
    assert [t.cache_write_tokens for t in sonnet.turns] == [1500, 0] and cached(sonnet) == [0, 1500]
    haiku = ProviderParams.load("anthropic", overrides={"model": "claude-haiku-3.5"})
    assert haiku.min_cacheable_tokens == 2048
    h = simulate(turns, "anthropic", haiku)
    assert cached(h) == [0, 0] and [t.cache_write_tokens for t in h.turns] == [0, 0]
    assert "under 2048" in h.turns[0].detail
    ok = simulate([TurnPrompt(a, (2048,)), TurnPrompt(a, (2048,))], "anthropic", haiku)
    assert cached(ok) == [0, 2048]


def test_anthropic_more_than_four_breakpoints_is_an_error_naming_the_count() -> None:
    a = toks(3000)
    sim = make_simulator("anthropic")
    with pytest.raises(SimulationError, match=r"turn 1 breakpoints: has 5 cache_control breakpoints") as e:
        sim.process(TurnPrompt(a, (1100, 1200, 1300, 1400, 1500)))
    assert isinstance(e.value, WorkbenchError) and e.value.turn == 1 and "at most 4" in str(e.value)
    assert sim.process(TurnPrompt(a, (1100, 1200, 1300, 1400))).turn == 1   # nothing was consumed
    two = ProviderParams.load("anthropic", overrides={"max_breakpoints": 2})
    with pytest.raises(SimulationError, match="has 3"):
        simulate([TurnPrompt(a, (1100, 1200, 1300))], "anthropic", two)


def test_anthropic_lookback_reaches_20_block_boundaries_back() -> None:
    a = toks(5000)
    ends = tuple(range(100, 5001, 100))
    first = TurnPrompt(a, (1200,), block_ends=ends)

    def read(*bps: int) -> int:
        return simulate([first, TurnPrompt(a, bps, block_ends=ends)], "anthropic").turns[1].cached_tokens

    assert read(3200) == 1200        # 1200 is the 20th boundary before 3200
    assert read(3300) == 0           # the 21st: out of reach, the whole prefix is written again
    assert read(2000, 3300) == 1200  # a second breakpoint brings it back in reach
    narrow = ProviderParams.load("anthropic", overrides={"lookback_blocks": 5})
    turns = [first, TurnPrompt(a, (1800,), block_ends=ends)]
    assert simulate(turns, "anthropic", narrow).turns[1].cached_tokens == 0
    turns = [first, TurnPrompt(a, (1700,), block_ends=ends)]
    assert simulate(turns, "anthropic", narrow).turns[1].cached_tokens == 1200


def test_anthropic_reads_the_longest_live_breakpoint_prefix() -> None:
    a = toks(6000)
    turns = [TurnPrompt(a[:4000], (2000, 4000)), TurnPrompt(edited(a, 3000)[:5000], (2000, 5000))]
    t2 = simulate(turns, "anthropic").turns[1]
    assert (t2.cached_tokens, t2.cache_write_tokens, t2.uncached_tokens) == (2000, 3000, 0)


def test_anthropic_growing_conversation_reads_the_previous_turn_without_block_ends() -> None:
    a = toks(9000)
    turns = [TurnPrompt(a[:n], (n,)) for n in (2000, 4000, 6500, 9000)]
    sim = simulate(turns, "anthropic")
    assert cached(sim) == [0, 2000, 4000, 6500]
    assert [t.cache_write_tokens for t in sim.turns] == [2000, 2000, 2500, 2500]


@pytest.mark.parametrize("ttl,gap,hit", [("5m", 299, True), ("5m", 301, False), ("1h", 301, True),
                                         ("1h", 3599, True), ("1h", 3601, False)])
def test_anthropic_ttl_5_minutes_or_1_hour(ttl: str, gap: int, hit: bool) -> None:
    a = toks(3000)
    params = ProviderParams.load("anthropic", overrides={"ttl": ttl})
    turns = [TurnPrompt(a, (3000,), time_s=0), TurnPrompt(a, (3000,), time_s=gap)]
    assert cached(simulate(turns, "anthropic", params))[1] == (3000 if hit else 0)


def test_anthropic_a_read_refreshes_the_ttl() -> None:
    a = toks(3000)
    turns = [TurnPrompt(a, (3000,), time_s=t) for t in (0, 200, 400, 600)]
    assert cached(simulate(turns, "anthropic")) == [0, 3000, 3000, 3000]


def test_anthropic_cost_uses_write_and_read_multipliers() -> None:
    a = toks(4000)
    turns = [TurnPrompt(a[:3500], (3000,), output_tokens=10), TurnPrompt(a, (3000,))]
    p5 = ProviderParams.load("anthropic")                            # sonnet: $3 in, $15 out
    assert (p5.prices.cache_write_5m, p5.prices.cache_write_1h, p5.prices.cached_input) == (3.75, 6.0, 0.3)
    t1, t2 = simulate(turns, "anthropic", p5).turns
    assert t1.cost == pytest.approx((3000 * 3 * 1.25 + 500 * 3 + 10 * 15) / 1e6)
    assert t2.cost == pytest.approx((3000 * 3 * 0.1 + 1000 * 3) / 1e6)
    p1 = ProviderParams.load("anthropic", overrides={"ttl": "1h"})
    assert simulate(turns, "anthropic", p1).turns[0].cost == pytest.approx((3000 * 6 + 500 * 3 + 10 * 15) / 1e6)
    explicit = ProviderParams.load("anthropic", overrides={"prices": {"cache_write_5m": 4.0}})
    assert explicit.prices.cache_write_5m == 4.0 and explicit.prices.cached_input == 0.3


@pytest.mark.parametrize("bps", [(2000, 1000), (1000, 1000), (0,), (3001,), (True,)])
def test_anthropic_breakpoints_must_be_ascending_offsets_in_the_prompt(bps: tuple) -> None:
    with pytest.raises(SimulationError, match="breakpoints"):
        TurnPrompt(toks(3000), bps)


# ---------------------------------------------------------------- vLLM

def test_vllm_caches_full_shared_blocks() -> None:
    a = toks(2000)
    sim = simulate([TurnPrompt(a[:1000]), TurnPrompt(a)], "vllm")
    assert cached(sim) == [0, 992]
    assert [t.cache_write_tokens for t in sim.turns] == [992, 2000 - 992]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 700), block=st.sampled_from([1, 4, 16, 32]), data=st.data())
def test_vllm_a_change_inside_block_b_invalidates_b_and_after(n: int, block: int, data: st.DataObject) -> None:
    i = data.draw(st.integers(0, n - 1))
    a = toks(n, seed=n)
    params = ProviderParams.load("vllm", overrides={"block_size": block})
    got = cached(simulate([TurnPrompt(a), TurnPrompt(edited(a, i))], "vllm", params))[1]
    assert got == min(i // block, (n - 1) // block) * block


@pytest.mark.parametrize("block", [8, 32, 64])
def test_vllm_block_size_is_configurable(block: int) -> None:
    a = toks(1000)
    params = ProviderParams.load("vllm", overrides={"block_size": block})
    assert params.block_size == block
    assert cached(simulate([TurnPrompt(a[:700]), TurnPrompt(a)], "vllm", params))[1] == 700 // block * block


def test_vllm_identical_turn_recomputes_only_the_last_token() -> None:
    a = toks(1600)
    assert cached(simulate([TurnPrompt(a), TurnPrompt(a)], "vllm")) == [0, 1584]   # (1600 - 1) // 16 * 16
    b = toks(1601)
    assert cached(simulate([TurnPrompt(b), TurnPrompt(b)], "vllm")) == [0, 1600]


def test_vllm_lru_capacity_evicts_whole_prompts_and_tails_first() -> None:
    a, b = toks(1600, 1), toks(1600, 2)                     # 100 blocks each
    def run(cap: int) -> list[int]:
        params = ProviderParams.load("vllm", overrides={"capacity_blocks": cap})
        return cached(simulate([TurnPrompt(a), TurnPrompt(b), TurnPrompt(a)], "vllm", params))
    assert run(100) == [0, 0, 0]             # b pushed a out
    assert run(200) == [0, 0, 1584]          # both fit
    assert run(150) == [0, 0, 800]           # a lost its 50 tail blocks, kept its head


def test_vllm_block_hashes_chain_and_reuse_is_exact() -> None:
    a = toks(800)
    repeated = np.concatenate([a[:16]] * 4)
    fresh = make_simulator("vllm")
    assert isinstance(fresh, VLLMSimulator)
    hs = fresh.block_hashes(repeated)
    assert len(set(hs)) == 4                  # same tokens, different positions: different hashes
    warm = make_simulator("vllm")
    assert isinstance(warm, VLLMSimulator)
    warm.block_hashes(a)
    b = np.concatenate([a[:500], toks(300, 3)])
    clean = make_simulator("vllm")
    assert isinstance(clean, VLLMSimulator)
    assert warm.block_hashes(b) == clean.block_hashes(b)   # reused hashes equal fresh ones
    blake = make_simulator("vllm", ProviderParams.load("vllm", overrides={"hash_algo": "blake2b"}))
    assert isinstance(blake, VLLMSimulator) and blake.block_hashes(b) != clean.block_hashes(b)


# ---------------------------------------------------------------- SGLang

def test_sglang_caches_the_longest_common_prefix_with_any_stored_sequence() -> None:
    a, b = toks(3000, 1), toks(3000, 2)
    c = np.concatenate([b[:1234], toks(500, 3)])
    d = np.concatenate([a[:777], toks(500, 4)])
    assert cached(simulate([TurnPrompt(a), TurnPrompt(b), TurnPrompt(c), TurnPrompt(d)], "sglang")) == [
        0, 0, 1234, 777]


def test_sglang_identical_turn_and_page_size() -> None:
    a = toks(1000)
    assert cached(simulate([TurnPrompt(a), TurnPrompt(a)], "sglang")) == [0, 999]
    paged = ProviderParams.load("sglang", overrides={"page_size": 16})
    c = np.concatenate([a[:777], toks(100, 5)])
    assert cached(simulate([TurnPrompt(a), TurnPrompt(c)], "sglang", paged)) == [0, 768]


def test_sglang_eviction_by_token_capacity_is_lru() -> None:
    a, b, c = toks(1000, 1), toks(1000, 2), toks(1000, 3)
    small = ProviderParams.load("sglang", overrides={"capacity_tokens": 1500})
    assert cached(simulate([TurnPrompt(a), TurnPrompt(b), TurnPrompt(a)], "sglang", small)) == [0, 0, 0]
    roomy = ProviderParams.load("sglang", overrides={"capacity_tokens": 2500})
    # a is used again after b, so c pushes out b (least recently used), not a
    got = cached(simulate([TurnPrompt(a), TurnPrompt(b), TurnPrompt(a), TurnPrompt(c), TurnPrompt(a),
                           TurnPrompt(b)], "sglang", roomy))
    assert got == [0, 0, 999, 0, 999, 0]
    sim = make_simulator("sglang", roomy)
    assert isinstance(sim, SGLangSimulator)
    for x in (a, b, c):
        sim.process(TurnPrompt(x))
    assert sim.stored_tokens <= 2500


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=40), min_size=1, max_size=8),
       st.sampled_from([1, 2, 4]))
def test_sglang_matches_a_brute_force_longest_prefix(prompts: list[list[int]], page: int) -> None:
    params = ProviderParams.load("sglang", overrides={"page_size": page})
    arrays = [np.asarray(p, np.uint32) for p in prompts]
    got = cached(simulate([TurnPrompt(x) for x in arrays], "sglang", params))
    for k, x in enumerate(arrays):
        best = max((first_difference(x, y[:len(y) // page * page]) for y in arrays[:k]), default=0)
        assert got[k] == min(best, len(x) - 1) // page * page


# ---------------------------------------------------------------- properties of every simulator

@st.composite
def sessions(draw):  # type: ignore[no-untyped-def]
    """Prompts drawn from one growing array, with edits, cuts, regrowth and odd breakpoints."""
    base = toks(draw(st.integers(100, 4000)), seed=draw(st.integers(0, 5)))
    turns, t = [], 0.0
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(1, len(base)))
        x = base[:n].copy()
        if draw(st.booleans()):
            x = edited(x, draw(st.integers(0, n - 1)))
        k = draw(st.integers(0, 3))
        bps = tuple(sorted(set(draw(st.lists(st.integers(1, n), min_size=k, max_size=k)))))
        t += draw(st.sampled_from([0, 30, 200, 400, 4000]))
        turns.append(TurnPrompt(x, bps, time_s=t, output_tokens=draw(st.integers(0, 50))))
    return turns


@settings(max_examples=60, deadline=None)
@given(sessions())
def test_every_simulator_keeps_its_counts_consistent(turns: list[TurnPrompt]) -> None:
    for provider in PROVIDERS:
        sim = simulate(turns, provider)
        assert 0.0 <= sim.hit_ratio <= 1.0
        for k, (r, tp) in enumerate(zip(sim.turns, turns), 1):
            assert r.turn == k and r.tokens == len(tp.token_ids)
            assert 0 <= r.cached_tokens <= r.tokens and r.cache_write_tokens >= 0
            assert r.uncached_tokens >= 0 and r.cost >= 0
            if provider == "anthropic":
                assert r.cached_tokens + r.cache_write_tokens + r.uncached_tokens == r.tokens
            else:
                assert r.cached_tokens + r.uncached_tokens == r.tokens


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 1500), min_size=2, max_size=6), st.integers(0, 3))
def test_appending_never_loses_the_previous_prompt(steps: list[int], seed: int) -> None:
    lengths = list(np.cumsum(steps))
    base = toks(int(lengths[-1]), seed)
    turns = [TurnPrompt(base[:n]) for n in lengths]
    with_bp = [TurnPrompt(base[:n], (int(n),)) for n in lengths]
    got = {p: cached(simulate(with_bp if p == "anthropic" else turns, p)) for p in PROVIDERS}
    for k in range(1, len(lengths)):
        prev = int(lengths[k - 1])
        assert got["openai"][k] >= oa_round(prev)
        assert got["vllm"][k] >= prev // 16 * 16
        assert got["sglang"][k] >= prev
        assert got["anthropic"][k] >= (prev if prev >= 1024 else 0)


@pytest.mark.parametrize("provider", ["vllm", "sglang"])
@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 3000))
def test_a_repeated_turn_caches_almost_everything(provider: str, n: int) -> None:
    a = toks(n)
    got = cached(simulate([TurnPrompt(a), TurnPrompt(a)], provider))[1]
    assert n - 16 <= got <= n - 1 or n == 1 and got == 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_to_json_matches_the_simulate_contract(provider: str) -> None:
    a = toks(3000)
    sim = simulate([TurnPrompt(a[:2000], (2000,)), TurnPrompt(a, (3000,), output_tokens=7)], provider)
    out = json.loads(json.dumps(sim.to_json()))
    assert {"provider", "turns", "hit_ratio"} <= set(out)
    assert out["provider"] == provider and isinstance(out["hit_ratio"], float)
    for k, t in enumerate(out["turns"], 1):
        assert t["turn"] == k and isinstance(t["tokens"], int) and isinstance(t["cached_tokens"], int)
        assert isinstance(t["cost"], float)
    assert out["hit_ratio"] == pytest.approx(sum(t["cached_tokens"] for t in out["turns"]) / 5000)
    assert out["params"]["kind"] == provider and out["total_cost"] == pytest.approx(sim.total_cost)


def test_empty_session_and_empty_prompt() -> None:
    assert simulate([], "vllm").hit_ratio == 0.0
    sim = simulate([TurnPrompt(np.empty(0, np.uint32))] * 2, "sglang")
    assert cached(sim) == [0, 0] and sim.hit_ratio == 0.0


# ---------------------------------------------------------------- turns

@pytest.mark.parametrize("ids", [[-1, 2], [[1, 2]], [1.5], [2 ** 32]])
def test_bad_token_ids_are_refused(ids: list) -> None:
    with pytest.raises(SimulationError, match="token_ids"):
        TurnPrompt(np.asarray(ids) if not isinstance(ids[0], float) else ids)


def test_token_lists_are_accepted_and_become_uint32() -> None:
    assert TurnPrompt([1, 2, 3]).token_ids.dtype == np.uint32


def test_time_going_backwards_is_an_error() -> None:
    a = toks(10)
    with pytest.raises(SimulationError, match=r"turn 2 time_s: goes back in time"):
        simulate([TurnPrompt(a, time_s=100), TurnPrompt(a, time_s=50)], "openai")


def test_from_assembly_takes_segment_ends_as_block_boundaries() -> None:
    class Seg:
        def __init__(self, end: int):
            self.end = end

    class Result:
        token_ids = toks(30)
        segments = (Seg(10), Seg(20), Seg(30))

    tp = TurnPrompt.from_assembly(Result(), breakpoints=(20,), time_s=5.0)
    assert tp.block_ends == (10, 20, 30) and tp.breakpoints == (20,) and tp.time_s == 5.0


def test_simulators_process_turns_live() -> None:
    a = toks(3000)
    sim = make_simulator("openai")
    first, second = sim.process(TurnPrompt(a[:2000])), sim.process(TurnPrompt(a))
    assert (first.turn, second.turn, second.cached_tokens) == (1, 2, 1920)
    with pytest.raises(SimulationError, match="expected a TurnPrompt"):
        sim.process(a)  # type: ignore[arg-type]


# ---------------------------------------------------------------- parameters

def test_shipped_presets_load() -> None:
    assert set(PROVIDERS) <= set(ProviderParams.presets())
    for name in PROVIDERS:
        p = ProviderParams.load(name)
        assert p.kind == name and p.prices.input > 0 and p.prices.output > 0
        assert 0 < p.prices.cached_input < p.prices.input
    oa = ProviderParams.load("openai")
    assert (oa.min_prefix_tokens, oa.increment_tokens, oa.ttl_s) == (1024, 128, 300.0)
    an = ProviderParams.load("anthropic")
    assert (an.max_breakpoints, an.lookback_blocks, an.ttl, an.min_cacheable_tokens) == (4, 20, "5m", 1024)
    assert ProviderParams.load("vllm").block_size == 16 and ProviderParams.load("sglang").page_size == 1


def test_overrides_merge_prices_key_by_key() -> None:
    p = ProviderParams.load("vllm", overrides={"block_size": 32, "capacity_blocks": 1000,
                                               "prices": {"input": 1.0}})
    assert (p.block_size, p.capacity_blocks) == (32, 1000)
    assert p.prices.input == 1.0 and p.prices.output == 0.6 and p.prices.cached_input == pytest.approx(0.1)
    m = ProviderParams.load("openai", overrides={"model": "mine", "models": {"mine": {
        "prices": {"input": 4.0, "output": 8.0}, "multipliers": {"cached_input": 0.25}}}})
    assert m.model == "mine" and m.prices.cached_input == 1.0


def test_a_user_json_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({
        "_note": "my prices",
        "cheap-openai": {"extends": "openai", "ttl_s": 600, "models": {"gpt-5.4": {"prices": {"input": 1.0}}}},
        "openai": {"extends": "openai", "increment_tokens": 256},
        "box": {"kind": "sglang", "page_size": 4, "prices": {"input": 0.0, "output": 0.0}},
    }))
    cheap = ProviderParams.load("cheap-openai", path=f)
    assert (cheap.kind, cheap.ttl_s, cheap.prices.input, cheap.prices.cached_input) == ("openai", 600.0, 1.0, 0.1)
    assert ProviderParams.load("openai", path=f).increment_tokens == 256
    assert ProviderParams.load("openai").increment_tokens == 128
    box = ProviderParams.load("box", path=f, overrides={"capacity_tokens": 64})
    assert (box.kind, box.page_size, box.capacity_tokens, box.model) == ("sglang", 4, 64, "box")
    assert ProviderParams.load("vllm", path=f).kind == "vllm"            # shipped presets still there
    assert {"cheap-openai", "box", "vllm"} <= set(ProviderParams.presets(path=f))
    assert simulate([TurnPrompt(toks(100))], "box", box).provider == "box"


@pytest.mark.parametrize("name,overrides,field,words", [
    ("vllm", {"block_size": -16}, "block_size", ">= 1"),
    ("vllm", {"block_size": 0}, "block_size", ">= 1"),
    ("vllm", {"block_size": 2.5}, "block_size", "integer"),
    ("vllm", {"block_size": True}, "block_size", "integer"),
    ("vllm", {"block_size": None}, "block_size", "null"),
    ("vllm", {"capacity_blocks": -1}, "capacity_blocks", ">= 1"),
    ("sglang", {"capacity_tokens": "lots"}, "capacity_tokens", "integer"),
    ("openai", {"ttl_s": 0}, "ttl_s", "> 0"),
    ("openai", {"min_prefix_tokens": -1}, "min_prefix_tokens", ">= 0"),
    ("openai", {"block_size": 16}, "block_size", "unknown field for a openai preset"),
    ("anthropic", {"ttl": "10m"}, "ttl", "'5m', '1h'"),
    ("anthropic", {"max_breakpoints": 0}, "max_breakpoints", ">= 1"),
    ("anthropic", {"model": "claude-9"}, "model", "unknown model"),
    ("anthropic", {"prices": {"input": -3}}, "prices.input", ">= 0"),
    ("anthropic", {"prices": {"discount": 1}}, "prices.discount", "unknown price"),
    ("anthropic", {"multipliers": {"cached_input": float("nan")}}, "multipliers.cached_input", "number"),
    ("anthropic", {"kind": "vllm"}, "kind", "cannot turn"),
    ("anthropic", {"extends": "openai"}, "extends", "no effect"),
    ("vllm", {"hash_algo": "md5"}, "hash_algo", "'sha256', 'blake2b'"),
])
def test_bad_parameters_raise_typed_errors(name: str, overrides: dict, field: str, words: str) -> None:
    with pytest.raises(ProviderParamsError) as e:
        ProviderParams.load(name, overrides=overrides)
    assert isinstance(e.value, WorkbenchError)
    assert e.value.field == field and e.value.preset == name
    assert words in str(e.value) and e.value.hint            # what, where, and how to fix


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(UnknownProviderError, match="unknown provider 'mistral-cloud'") as e:
        simulate([], "mistral-cloud")
    assert "anthropic, gemini, openai, openai@gpt-5.4, openai@gpt-5.6, sglang, vllm" in str(e.value)


def test_bad_user_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    def load(text: str, name: str = "x") -> ProviderParamsError:
        f = tmp_path / "p.json"
        f.write_text(text)
        with pytest.raises(ProviderParamsError) as e:
            ProviderParams.load(name, path=f)
        assert str(f) in str(e.value)
        return e.value

    assert "not valid JSON" in str(load("{oops"))
    assert "mapping preset names" in str(load('{"kind": "vllm"}'))
    assert load('{"x": {"kind": "vllm", "prices": {"output": 1}}}').field == "prices.input"
    assert load('{"x": {"kind": "tpu", "prices": {}}}').field == "kind"
    assert "missing" in str(load('{"x": {"prices": {"input": 1, "output": 1}}}'))
    assert "circle" in str(load('{"x": {"extends": "y"}, "y": {"extends": "x"}}'))
    assert load('{"x": {"extends": "vllm", "blocksize": 8}}').field == "blocksize"
    assert isinstance(load('{"y": {"extends": "vllm"}}'), UnknownProviderError)
    with pytest.raises(ProviderParamsError, match="cannot read"):
        ProviderParams.load("x", path=tmp_path / "missing.json")


def test_params_must_agree_with_the_provider() -> None:
    vllm = ProviderParams.load("vllm")
    assert simulate([], "vllm", vllm).provider == "vllm"
    with pytest.raises(ProviderParamsError, match="params are for 'vllm'"):
        simulate([], "openai", vllm)


def test_sglang_eviction_climbs_to_parents_that_become_leaves() -> None:
    shared = toks(500, 7)
    x = np.concatenate([shared, toks(500, 1)])
    y = np.concatenate([shared, toks(500, 2)])
    z = toks(1000, 3)
    params = ProviderParams.load("sglang", overrides={"capacity_tokens": 1000})
    sim = make_simulator("sglang", params)
    assert isinstance(sim, SGLangSimulator)
    got = [sim.process(TurnPrompt(p)).cached_tokens for p in (x, y, z)]
    assert got == [0, 500, 0] and sim.stored_tokens == 1000      # both branches and their stem went
    assert sim.process(TurnPrompt(x)).cached_tokens == 0
