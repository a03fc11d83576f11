"""Provider presets, versioned and dated (issue 18): each provider's documented rules and examples,
the `provider@variant` names, and the engines holding the generated reply.

Rule checks use synthetic token ids (the rules only look at ids); the reply and CLI checks use real
sessions, templates and tokenizers.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np
import pytest

from workbench import Assembler
from workbench.analysis import analyze
from workbench.analysis.provider_params import ProviderParams
from workbench.analysis.providers import (
    OpenAIBreakpointSimulator,
    TurnPrompt,
    VLLMSimulator,
    make_simulator,
    simulate,
)
from workbench.analysis.turn_prompts import turn_prompts
from workbench.cli.main import main
from workbench.errors import ProviderParamsError, SimulationError, UnknownProviderError
from workbench.sessions import load_session
from workbench.ui.html import cache_html
from workbench.ui.state import WorkbenchState, sample_sessions

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"
SHIPPED = ("openai", "openai@gpt-5.4", "openai@gpt-5.6", "anthropic", "gemini", "vllm", "sglang")


def toks(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 150_000, n, dtype=np.uint32)


def cached(sim) -> list[int]:  # type: ignore[no-untyped-def]
    return [t.cached_tokens for t in sim.turns]


def grown(a: np.ndarray, extra: int, seed: int = 7) -> np.ndarray:
    return np.concatenate([a, toks(extra, seed)])


# ---------------------------------------------------------------- presets as data

@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_preset_names_its_source_and_date(name: str) -> None:
    p = ProviderParams.load(name)
    assert p.source.startswith("https://") and "." in p.source.split("/")[2]
    assert datetime.date.fromisoformat(p.checked or "") <= datetime.date(2026, 12, 31)
    assert p.preset in ProviderParams.presets() and p.preset in p.citation and p.source in p.citation
    j = p.to_json()
    assert (j["preset"], j["source"], j["checked"]) == (p.preset, p.source, p.checked)


def test_a_plain_name_is_the_default_variant() -> None:
    plain, variant = ProviderParams.load("openai"), ProviderParams.load("openai@gpt-5.4")
    assert (plain.name, plain.preset, variant.preset) == ("openai", "openai@gpt-5.4", "openai@gpt-5.4")
    assert {k: v for k, v in plain.to_json().items() if k != "name"} == \
        {k: v for k, v in variant.to_json().items() if k != "name"}
    a = toks(3000)
    sims = [simulate([TurnPrompt(a), TurnPrompt(a)], n) for n in ("openai", "openai@gpt-5.4")]
    assert sims[0].provider == "openai" and sims[1].provider == "openai@gpt-5.4"     # the name asked for
    assert cached(sims[0]) == cached(sims[1]) == [0, 2944]
    assert sims[0].to_json()["preset"] == "openai@gpt-5.4" and "openai = openai@gpt-5.4" in sims[0].preset_note


def test_unknown_variant_lists_the_provider_s_variants() -> None:
    with pytest.raises(UnknownProviderError, match="unknown variant 'gpt-9' of provider 'openai'") as e:
        ProviderParams.load("openai@gpt-9")
    assert "openai@gpt-5.4, openai@gpt-5.6" in str(e.value)
    with pytest.raises(UnknownProviderError, match="unknown provider 'nope@x'") as e:
        ProviderParams.load("nope@x")
    assert all(n in str(e.value) for n in SHIPPED)


def test_a_user_file_adds_a_dated_variant_and_an_alias(tmp_path: Path) -> None:
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({
        "openai@gpt-5.6-long": {"extends": "openai@gpt-5.6", "retention": "24h", "checked": "2026-12-01"},
        "fast": {"alias": "openai@gpt-5.6-long"},
        "openai": {"alias": "openai@gpt-5.6"},                 # my default is the newer rule set
        "undated": {"extends": "vllm", "source": "", "checked": None},
    }))
    long = ProviderParams.load("fast", path=f)
    assert (long.name, long.preset, long.retention, long.checked) == ("fast", "openai@gpt-5.6-long", "24h",
                                                                      "2026-12-01")
    assert long.source == ProviderParams.load("openai@gpt-5.6").source          # inherited with the rules
    assert ProviderParams.load("openai", path=f).preset == "openai@gpt-5.6"
    assert "no source named" in ProviderParams.load("undated", path=f).citation
    bad = tmp_path / "bad.json"
    for preset, field in (({"extends": "vllm", "checked": "4 Dec 2026"}, "checked"),
                          ({"extends": "vllm", "source": 42}, "source"),
                          ({"alias": "vllm", "block_size": 8}, "alias")):
        bad.write_text(json.dumps({"x": preset}))
        with pytest.raises(ProviderParamsError) as e:
            ProviderParams.load("x", path=bad)
        assert e.value.field == field
    bad.write_text(json.dumps({"x": {"alias": "y"}, "y": {"alias": "x"}}))
    with pytest.raises(ProviderParamsError, match="circle"):
        ProviderParams.load("x", path=bad)


# ---------------------------------------------------------------- OpenAI up to GPT-5.4

@pytest.mark.parametrize("shared,want", [(1023, 0), (1024, 1024), (1151, 1024), (1152, 1152), (1279, 1152),
                                         (1280, 1280), (2000, 1920)])
def test_gpt_5_4_caches_1024_tokens_then_128_token_steps(shared: int, want: int) -> None:
    a = toks(3000)
    second = np.concatenate([a[:shared], toks(500, seed=3)])
    sim = simulate([TurnPrompt(a), TurnPrompt(second)], "openai@gpt-5.4")
    assert cached(sim) == [0, want] and sim.turns[1].cache_write_tokens == 0     # writes cost nothing extra


def test_gpt_5_4_prices_cached_input_at_the_model_discount() -> None:
    a = toks(2048)
    t2 = simulate([TurnPrompt(a), TurnPrompt(a, output_tokens=10)], "openai@gpt-5.4").turns[1]
    assert t2.cached_tokens == 2048
    assert t2.cost == pytest.approx((2048 * 0.25 + 10 * 15.00) / 1e6)          # gpt-5.4: $2.50 in, cached 0.1x


# ---------------------------------------------------------------- OpenAI GPT-5.6 and later

def test_gpt_5_6_writes_at_most_four_breakpoints_the_latest_ones() -> None:
    a = toks(8000)
    bps = (1100, 2000, 3000, 4000, 5000, 6000)
    sim = make_simulator("openai@gpt-5.6")
    assert isinstance(sim, OpenAIBreakpointSimulator)
    t1 = sim.process(TurnPrompt(a, bps))                    # implicit mode: the end of the prompt + 3 explicit
    assert (t1.cached_tokens, t1.cache_write_tokens) == (0, 8000)
    assert "3 earlier breakpoint(s) not written (at most 4 writes per request)" in t1.detail
    assert "at 4000, 5000, 6000, 8000" in t1.detail
    # a later request sharing only the first 3,500 tokens: 1100..3000 were never written
    t2 = sim.process(TurnPrompt(np.concatenate([a[:3500], toks(100, 5)]), (3000,)))
    assert t2.cached_tokens == 0
    explicit = ProviderParams.load("openai@gpt-5.6", overrides={"mode": "explicit"})
    e = make_simulator("openai@gpt-5.6", explicit)
    e1 = e.process(TurnPrompt(a, bps))                      # explicit mode: the latest 4 explicit, no implicit
    assert e1.cache_write_tokens == 6000 and "2 earlier" in e1.detail and "at 3000, 4000, 5000, 6000" in e1.detail
    assert e.process(TurnPrompt(np.concatenate([a[:3500], toks(100, 5)]))).cached_tokens == 3000


def test_gpt_5_6_bills_writes_at_1_25x_and_reads_at_the_cached_price() -> None:
    p = ProviderParams.load("openai@gpt-5.6")
    assert (p.model, p.prices.input, p.prices.cache_write, p.prices.cached_input) == ("gpt-5.6-terra", 2.5, 3.125,
                                                                                      0.25)
    a = toks(5000)
    sim = simulate([TurnPrompt(a[:3000], (2000,)), TurnPrompt(a, (2000,))], "openai@gpt-5.6")
    t1, t2 = sim.turns
    assert (t1.cached_tokens, t1.cache_write_tokens, t1.uncached_tokens) == (0, 3000, 0)
    assert t1.cost == pytest.approx(3000 * 3.125 / 1e6)
    # the longest live breakpoint prefix: the implicit one at 3000 (not rounded), then 2000 more written
    assert (t2.cached_tokens, t2.cache_write_tokens, t2.uncached_tokens) == (3000, 2000, 0)
    assert t2.cost == pytest.approx((3000 * 0.25 + 2000 * 3.125) / 1e6)


def test_gpt_5_6_entries_live_30_minutes_or_24_hours_with_extended_retention() -> None:
    a = toks(2000)
    turns = [TurnPrompt(a, time_s=0), TurnPrompt(a, time_s=1799), TurnPrompt(a, time_s=1799 + 1801)]
    assert cached(simulate(turns, "openai@gpt-5.6")) == [0, 2000, 0]
    day = ProviderParams.load("openai@gpt-5.6", overrides={"retention": "24h"})
    later = [TurnPrompt(a, time_s=0), TurnPrompt(a, time_s=20 * 3600)]
    assert cached(simulate(later, "openai@gpt-5.6", day)) == [0, 2000]
    assert cached(simulate(later, "openai@gpt-5.6")) == [0, 0]


def test_gpt_5_6_reads_any_distance_back_among_the_latest_80_breakpoints() -> None:
    a = toks(60_000)
    first = TurnPrompt(a[:1200], (1100,))
    far = TurnPrompt(grown(a[:1200], 50_000), ())            # no lookback limit: 50,000 tokens later
    assert cached(simulate([first, far], "openai@gpt-5.6"))[1] == 1200
    two = ProviderParams.load("openai@gpt-5.6", overrides={"match_breakpoints": 2})
    turns = [first] + [TurnPrompt(toks(1500, seed=s)) for s in (11, 12)] + [far]
    assert cached(simulate(turns, "openai@gpt-5.6", two))[3] == 0     # two later writes pushed it out of reach


# ---------------------------------------------------------------- Anthropic

@pytest.mark.parametrize("model,minimum", [("claude-opus-4.6", 4096), ("claude-opus-4.5", 4096),
                                           ("claude-haiku-4.5", 4096), ("claude-sonnet-4.6", 2048),
                                           ("claude-haiku-3.5", 2048), ("claude-sonnet-4.5", 1024),
                                           ("claude-opus-4.1", 1024)])
def test_anthropic_minimum_cacheable_tokens_per_model(model: str, minimum: int) -> None:
    p = ProviderParams.load("anthropic", overrides={"model": model})
    assert p.min_cacheable_tokens == minimum
    a = toks(5000)
    for at, written in ((minimum - 1, 0), (minimum, minimum)):
        sim = simulate([TurnPrompt(a, (at,)), TurnPrompt(a, (at,))], "anthropic", p)
        assert sim.turns[0].cache_write_tokens == written and sim.turns[1].cached_tokens == written


def test_anthropic_write_and_read_prices() -> None:
    p = ProviderParams.load("anthropic")                    # claude-sonnet-4.5: $3 in
    assert (p.prices.cache_write_5m, p.prices.cache_write_1h, p.prices.cached_input) == (3.75, 6.0, 0.3)
    a = toks(4000)
    sim = simulate([TurnPrompt(a[:3000], (2000,)), TurnPrompt(a, (2000,))], "anthropic", p)
    assert sim.turns[0].cost == pytest.approx((2000 * 3.75 + 1000 * 3.0) / 1e6)
    assert sim.turns[1].cost == pytest.approx((2000 * 0.3 + 2000 * 3.0) / 1e6)
    hour = ProviderParams.load("anthropic", overrides={"ttl": "1h"})
    assert simulate([TurnPrompt(a, (2000,))], "anthropic", hour).turns[0].cost == \
        pytest.approx((2000 * 6.0 + 2000 * 3.0) / 1e6)


def test_anthropic_a_fifth_breakpoint_is_refused() -> None:
    a = toks(6000)
    sim = make_simulator("anthropic")
    with pytest.raises(SimulationError, match="has 5 cache_control breakpoints; at most 4"):
        sim.process(TurnPrompt(a, (1100, 1200, 1300, 1400, 1500)))
    auto = ProviderParams.load("anthropic", overrides={"automatic": True})
    with pytest.raises(SimulationError, match=r"has 5 cache_control breakpoints \(the automatic one included\)"):
        simulate([TurnPrompt(a, (1100, 1200, 1300, 1400))], "anthropic", auto)
    assert simulate([TurnPrompt(a, (1100, 1200, 1300))], "anthropic", auto).turns[0].cache_write_tokens == 6000


def test_anthropic_automatic_cache_control_follows_the_conversation() -> None:
    auto = ProviderParams.load("anthropic", overrides={"automatic": True})
    a = toks(6000)
    sim = simulate([TurnPrompt(a[:3000]), TurnPrompt(a[:4000]), TurnPrompt(a)], "anthropic", auto)
    assert [(t.cached_tokens, t.cache_write_tokens) for t in sim.turns] == [(0, 3000), (3000, 1000), (4000, 2000)]
    assert cached(simulate([TurnPrompt(a[:3000]), TurnPrompt(a[:4000])], "anthropic")) == [0, 0]   # off by default


def test_anthropic_1h_entries_must_come_before_5m_ones() -> None:
    a = toks(6000)
    with pytest.raises(SimulationError, match="a 1h breakpoint at token 4000 comes after a 5m breakpoint") as e:
        simulate([TurnPrompt(a, (2000, 4000), breakpoint_ttls=("5m", "1h"))], "anthropic")
    assert e.value.field == "breakpoint_ttls"
    ok = TurnPrompt(a, (2000, 4000), breakpoint_ttls=("1h", "5m"))
    t = simulate([ok], "anthropic").turns[0]
    # each stretch at its breakpoint's TTL: 0..2000 at 2x, 2000..4000 at 1.25x
    assert t.cache_write_tokens == 4000 and t.cost == pytest.approx((2000 * 6.0 + 2000 * 3.75 + 2000 * 3.0) / 1e6)
    # 40 minutes later the 5m entry is gone and the 1h one is read
    later = TurnPrompt(a, (2000, 4000), time_s=2400, breakpoint_ttls=("1h", "5m"))
    t2 = simulate([TurnPrompt(a, (2000, 4000), time_s=0, breakpoint_ttls=("1h", "5m")), later], "anthropic").turns[1]
    assert (t2.cached_tokens, t2.cache_write_tokens) == (2000, 2000)
    with pytest.raises(SimulationError, match="one of 5m, 1h per breakpoint"):
        TurnPrompt(a, (2000, 4000), breakpoint_ttls=("1h",))


# ---------------------------------------------------------------- Gemini implicit caching

@pytest.mark.parametrize("model,minimum,discount", [("gemini-2.5-flash", 2048, 0.25), ("gemini-2.5-pro", 2048, 0.25),
                                                    ("gemini-3.1-pro-preview", 4096, 0.1)])
def test_gemini_minimum_by_model_and_cached_discount(model: str, minimum: int, discount: float) -> None:
    p = ProviderParams.load("gemini", overrides={"model": model})
    assert p.min_prefix_tokens == minimum and p.prices.cached_input == pytest.approx(p.prices.input * discount)
    short, long = toks(minimum - 1), toks(minimum + 300)
    assert cached(simulate([TurnPrompt(short), TurnPrompt(short)], "gemini", p)) == [0, 0]
    edited = np.concatenate([long[:minimum + 77], toks(50, 4)])
    t2 = simulate([TurnPrompt(long), TurnPrompt(edited)], "gemini", p).turns[1]
    assert t2.cached_tokens == minimum + 77                   # whole tokens: no step named
    assert t2.cost == pytest.approx(((50) * p.prices.input + (minimum + 77) * p.prices.cached_input) / 1e6)


# ---------------------------------------------------------------- vLLM and SGLang

def test_vllm_full_blocks_of_16_and_the_hash_block_size() -> None:
    a = toks(500)
    second = np.concatenate([a[:100], toks(50, 2)])
    assert cached(simulate([TurnPrompt(a), TurnPrompt(second)], "vllm")) == [0, 96]
    fine = ProviderParams.load("vllm", overrides={"hash_block_size": 4})
    assert cached(simulate([TurnPrompt(a), TurnPrompt(second)], "vllm", fine)) == [0, 96]   # blocks stay 16
    coarse, merged = VLLMSimulator(ProviderParams.load("vllm")), VLLMSimulator(fine)
    assert len(coarse.block_hashes(a)) == len(merged.block_hashes(a)) == 500 // 16
    assert coarse.block_hashes(a)[0] != merged.block_hashes(a)[0]       # keyed at the finer chain's 4th piece
    with pytest.raises(ProviderParamsError, match="must divide block_size"):
        ProviderParams.load("vllm", overrides={"hash_block_size": 5})


@pytest.mark.parametrize("reply_len", [1, 16, 17, 40])
def test_engines_count_the_reply_they_generated(reply_len: int) -> None:
    prompt, reply, more = toks(203, 1), toks(reply_len, 2), toks(60, 3)
    nxt = np.concatenate([prompt, reply, more])
    turns = [TurnPrompt(prompt, reply_ids=reply), TurnPrompt(nxt)]
    held = len(prompt) + reply_len - 1          # the last sampled token is never fed back: it has no KV
    assert cached(simulate(turns, "sglang"))[1] == held
    assert cached(simulate(turns, "vllm"))[1] == held // 16 * 16
    # without the reply the engines hold the prompt alone, as before
    assert cached(simulate([TurnPrompt(prompt), TurnPrompt(nxt)], "sglang"))[1] == len(prompt)
    # a next prompt that does not repeat the reply reuses the prompt only
    other = np.concatenate([prompt, toks(reply_len, 9), more])
    assert cached(simulate([TurnPrompt(prompt, reply_ids=reply), TurnPrompt(other)], "sglang"))[1] == len(prompt)


def test_engines_count_the_reply_on_a_real_session() -> None:
    asm = Assembler(template="qwen2.5", cache=None)
    sess = asm.session()
    results = [sess.assemble(r) for r in load_session(SESSIONS / "tool_agent.json").turns]
    prompts = turn_prompts(results, "auto", asm)
    analysis = analyze(asm, load_session(SESSIONS / "tool_agent.json").turns)
    sg, vl = cached(simulate(prompts, "sglang")), cached(simulate(prompts, "vllm"))
    for k in range(1, len(prompts)):
        reply = prompts[k - 1].reply_ids
        assert reply is not None and len(reply) > 1
        # the reply the engine holds is the analysis's: the prompt plus the reply as generated
        assert len(prompts[k - 1].token_ids) + len(reply) == analysis[k].held_tokens
        held = len(prompts[k - 1].token_ids) + len(reply) - 1
        assert sg[k] == held and vl[k] == held // 16 * 16
    assert prompts[-1].reply_ids is None                      # the last turn has no reply yet
    before = cached(simulate(turn_prompts(results, "auto"), "sglang"))
    assert all(b == len(p.token_ids) for b, p in zip(before[1:], prompts))
    assert sum(sg) > sum(before)


# ---------------------------------------------------------------- CLI and the cache panel

def run(capsys, *args: str) -> dict:  # type: ignore[no-untyped-def]
    assert main(["simulate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_picks_a_dated_variant(capsys) -> None:  # type: ignore[no-untyped-def]
    d = run(capsys, str(SESSIONS / "rag_long.json"), "--provider", "openai@gpt-5.6", "--context-window", "200000")
    assert (d["provider"], d["preset"], d["kind"], d["checked"]) == ("openai@gpt-5.6", "openai@gpt-5.6", "openai",
                                                                    "2026-12-04")
    assert d["source"].startswith("https://") and d["params"]["caching"] == "breakpoints"
    first, rest = d["turns"][0], d["turns"][1:]
    assert first["cached_tokens"] == 0 and first["cache_write_tokens"] == first["tokens"]
    assert all(t["cached_tokens"] > 30_000 for t in rest)
    plain = run(capsys, str(SESSIONS / "tool_agent.json"), "--provider", "openai")
    assert (plain["provider"], plain["preset"]) == ("openai", "openai@gpt-5.4")        # SPEC 7.3 names kept
    assert main(["simulate", str(SESSIONS / "tool_agent.json"), "--provider", "openai"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]           # a footer: the table's rows stay where they were
    assert last.startswith("preset openai = openai@gpt-5.4, checked 2026-12-04 against https://")
    overflow = str(SESSIONS / "overflow.json")
    assert main(["simulate", overflow, "--provider", "openai@gpt-5.6", "--truncation", "all"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("preset openai@gpt-5.6, checked 2026-12-04")


def test_cli_unknown_variant_is_one_error_line(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["simulate", str(SESSIONS / "tool_agent.json"), "--provider", "openai@gpt-9", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error:") and captured.err.count("\n") == 1
    assert "openai@gpt-5.4" in captured.err and "openai@gpt-5.6" in captured.err


def test_cache_panel_names_each_preset() -> None:
    state = WorkbenchState(sample_sessions()["tool_agent.json"], autosave=None)
    html = cache_html(state.panels())
    for s in state.panels().simulations:
        assert s.params is not None and s.params.source in html and f"checked {s.params.checked}" in html
    assert "preset openai = openai@gpt-5.4" in html and html.count('class="wb-muted wb-preset"') == 4
