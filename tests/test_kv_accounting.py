"""One KV accounting (issue 33): `engine.kv.paged_view` over the turns the simulators see, each with
the reply the engine holds after it, is what `workbench kv` prints and what the KV tab shows. Its
shared blocks are the vLLM simulation's cached blocks; what it holds is never less than the prompt's
own KV nor than what it shares, and never falls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.analysis.provider_params import ProviderParams
from workbench.analysis.providers import TurnPrompt, simulate
from workbench.cli.main import main
from workbench.engine.kv import HELD_NOTE, KV_CONFIGS, PagedTurn, format_bytes, no_share_reason, paged_view
from workbench.errors import EngineError, WorkbenchError
from workbench.ui.fix_buttons import adopt, measure_fix
from workbench.ui.kv_panel import kv_figure, kv_html, paged_rows
from workbench.ui.state import WorkbenchState, sample_sessions

SAMPLES = sample_sessions()
TINY = KV_CONFIGS["tiny"]       # 4,096 bytes per token
LLAMA = KV_CONFIGS["Llama-3-8B"]


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["kv", *argv, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def panels_of(state: WorkbenchState) -> Any:
    state.assemble()
    return state.panels(parts=("cache",))


def vllm_blocks(panels: Any) -> list[int]:
    sim = next(s for s in panels.simulations if s.provider == "vllm")
    assert sim.params.capacity_blocks is None and sim.params.block_size == 16     # unbounded: nothing evicted
    return [t.cached_tokens // 16 for t in sim.turns]


def check_accounting(rows: list[dict[str, Any]], block_bytes: int) -> None:
    """held ≥ the prompt's own KV, held ≥ shared (blocks and bytes), held never falls."""
    for prev, r in zip([None, *rows], rows):
        assert r["held_bytes"] == r["held_blocks"] * block_bytes
        assert r["held_bytes"] >= r["kv_bytes"] and r["held_blocks"] >= r["blocks"]
        assert r["held_blocks"] >= r["shared_blocks"] and r["held_bytes"] >= r["shared_blocks"] * block_bytes
        assert r["new_blocks"] == r["blocks"] - r["shared_blocks"]
        if prev is not None:
            assert r["held_bytes"] >= prev["held_bytes"]


# ---------------------------------------------------------------- the session

def test_timestamp_system_after_move_volatile_holds_more_than_each_prompt(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The tester's case: after the move-volatile fix, turn 2's prompt is 62.1 MiB of KV and turn 3
    shares 37 blocks; the app said 50.0 MiB and 30 blocks held, the CLI 18 shared. Now one figure."""
    state = WorkbenchState(SAMPLES["timestamp_system.json"], autosave=None)
    state.assemble()
    m, gen = measure_fix(state, "move-volatile")
    assert adopt(state, "move-volatile", m, gen).applied
    p = panels_of(state)
    rows = paged_rows(p, "Llama-3-8B")
    saved = state.save(str(tmp_path / "fixed.json"))
    assert rows == cli_json(capsys, str(saved))["turns"]                # the CLI, on the document as fixed
    assert [r["shared_blocks"] for r in rows] == vllm_blocks(p) == [0, 25, 37, 52, 62]
    assert [r["held_blocks"] for r in rows] == [26, 38, 53, 63, 69]
    assert [r["reply_tokens_held"] for r in rows] == [124, 96, 150, 75, 0]    # the last turn has no reply yet
    assert rows[1]["kv_bytes"] == 497 * 131072 == 65_142_784 and format_bytes(rows[1]["kv_bytes"]) == "62.1 MiB"
    assert rows[1]["held_bytes"] == 38 * 16 * 131072 and format_bytes(rows[1]["held_bytes"]) == "76.0 MiB"
    check_accounting(rows, 16 * LLAMA.bytes_per_token)


# ---------------------------------------------------------------- the KV tab's rows are the CLI's

@pytest.mark.parametrize("name", ["timestamp_system.json", "support_chat.json", "tool_agent.json",
                                  "screenshot_support.json", "rag_long.json", "bench_1000.json"])
def test_the_kv_tab_rows_are_workbench_kv_json(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    p = panels_of(WorkbenchState(SAMPLES[name], autosave=None))
    d = cli_json(capsys, str(SAMPLES[name]))
    rows = paged_rows(p, "Llama-3-8B")
    assert len(rows) == len(p.prompts) > 1
    assert rows == d["turns"]                                       # figure by figure, every key
    assert [r["shared_blocks"] for r in rows] == vllm_blocks(p)     # the Cache tab's vLLM hits
    assert d["held_note"] == HELD_NOTE and d["block_size"] == 16
    assert any(r["reply_tokens_held"] for r in rows)                # the replies are held, and counted
    check_accounting(rows, 16 * LLAMA.bytes_per_token)
    # another shape and block size: the same function, the same rows
    d = cli_json(capsys, str(SAMPLES[name]), "--config", "Qwen2.5-7B", "--block-size", "32")
    assert paged_rows(p, "Qwen2.5-7B", 32) == d["turns"]


def test_the_kv_tab_scales_its_units_and_says_what_held_means() -> None:
    p = panels_of(WorkbenchState(SAMPLES["bench_1000.json"], autosave=None))
    rows = paged_rows(p, "Llama-3-8B")
    last = rows[-1]["held_bytes"]
    assert last >= 2**40                                            # over a TiB: shown as TiB
    page = kv_html(p, "Llama-3-8B")
    assert format_bytes(last) in page and format_bytes(last).endswith(" TiB")
    assert f"{last / 2**20:,.1f} MiB" not in page                   # never "1,391,132.0 MiB"
    assert HELD_NOTE in page
    fig = kv_figure(p, "Llama-3-8B")
    held = fig["data"][2]
    assert fig["layout"]["yaxis2"]["title"]["text"] == "TiB" and held["name"].startswith("KV held, TiB")
    assert held["y"][-1] == round(last / 2**40, 2) and max(held["y"]) < 1024


def test_the_kv_tab_says_why_a_turn_shares_nothing() -> None:
    state = WorkbenchState(SAMPLES["timestamp_system.json"], autosave=None)   # the timestamp changes block 2
    p = panels_of(state)
    rows = paged_rows(p)
    assert rows[0]["shared_blocks"] == 0 and all(r["shared_blocks"] for r in rows[1:])
    page = kv_html(p)
    assert "(the first turn: nothing is held yet)" in page
    state.select_turn(1)
    first = kv_html(state.panels(parts=("cache",)))
    assert "Turn 1:" in first and "none of them shared with what the engine holds (the first turn" in first


def test_no_share_reasons() -> None:
    def turn(k: int, tokens: int, shared: int = 0) -> PagedTurn:
        return PagedTurn(k, tokens, -(-tokens // 16), shared, 0, 0, 0, 0, 0)

    assert no_share_reason(turn(1, 500)) == "the first turn: nothing is held yet"
    assert no_share_reason(turn(2, 9)).startswith("shorter than one block (9 of 16 tokens)")
    assert "its last token always is" in no_share_reason(turn(2, 16))
    assert "changed within its first 16 tokens" in no_share_reason(turn(3, 40))
    assert no_share_reason(turn(3, 40, shared=2)) == ""
    # the paged view: a prompt of one block, held whole before, computes that block again (vLLM's rule)
    a = np.arange(16, dtype=np.uint32)
    view = paged_view([a, a, np.arange(8, dtype=np.uint32)], TINY, 16)
    assert [(t.shared_blocks, t.new_blocks) for t in view] == [(0, 1), (0, 1), (0, 1)]
    assert "its last token always is" in no_share_reason(view[1]) and "shorter" in no_share_reason(view[2])


def test_workbench_kv_text_scales_units_and_gives_the_caveat(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kv", str(SAMPLES["timestamp_system.json"])]) == 0
    out = capsys.readouterr().out
    assert f"({HELD_NOTE})" in out and "shared 0: the first turn: nothing is held yet" in out
    assert " MiB" in out and "KV MiB" not in out


def test_what_is_held_must_start_with_the_prompt() -> None:
    class Odd:
        token_ids = np.arange(20, dtype=np.uint32)
        held_ids = np.arange(1, 30, dtype=np.uint32)

    with pytest.raises(EngineError, match="turn 1: what the engine holds after the turn .* does not start with its"):
        paged_view([Odd()], TINY, 4)
    assert issubclass(EngineError, WorkbenchError)


def test_without_replies_the_prompts_alone_are_held() -> None:
    a = np.arange(40, dtype=np.uint32)
    b = np.concatenate([a, np.arange(100, 130)]).astype(np.uint32)
    bare = paged_view([a, b], LLAMA, 16)
    wrapped = paged_view([TurnPrompt(a), TurnPrompt(b)], LLAMA, 16)
    assert bare == wrapped and [t.reply_tokens_held for t in bare] == [0, 0]
    # with a reply: its blocks are held after turn 1, and a next prompt that repeats it shares them
    reply = np.arange(500, 530, dtype=np.uint32)                         # 30 tokens, 29 held (the last has no KV)
    c = np.concatenate([a, reply, np.arange(900, 910)]).astype(np.uint32)
    held = paged_view([TurnPrompt(a, reply_ids=reply), TurnPrompt(c)], LLAMA, 16)
    assert held[0].reply_tokens_held == 29 and held[0].held_blocks == 69 // 16 + 1
    assert held[1].shared_blocks == 69 // 16                             # 4 blocks: 2 of the prompt, 2 of the reply
    assert paged_view([a, c], LLAMA, 16)[1].shared_blocks == 2           # the prompts alone: 2


# ---------------------------------------------------------------- properties

IDS = st.integers(0, 2)       # a small alphabet: prompts that share long prefixes by chance too


@st.composite
def sessions(draw: st.DrawFn) -> tuple[int, list[TurnPrompt]]:
    """Turns that start with part of an earlier prompt or of what an earlier turn held (prompt and
    reply), then go their own way; replies of any length, or none; either reply-holding rule."""
    block = draw(st.sampled_from([1, 2, 3, 4, 16]))
    pool: list[np.ndarray] = [np.empty(0, np.uint32)]
    turns = []
    for _ in range(draw(st.integers(1, 7))):
        base = draw(st.sampled_from(pool))
        head = base[:draw(st.integers(0, len(base)))]
        prompt = np.concatenate([head, np.array(draw(st.lists(IDS, max_size=40)), np.uint32)]).astype(np.uint32)
        reply = draw(st.none() | st.lists(IDS, max_size=30).map(lambda x: np.array(x, np.uint32)))
        t = TurnPrompt(prompt, reply_ids=reply, hold_last=draw(st.booleans()))
        turns.append(t)
        pool += [t.token_ids, t.held_ids]
    return block, turns


def reference(block: int, turns: list[TurnPrompt]) -> list[tuple[int, int]]:
    """(shared blocks, held blocks) per turn, without hashes: a full block is its whole prefix."""
    held: set[tuple[int, ...]] = set()
    out, most = [], 0
    for t in turns:
        ids, kept = t.token_ids.tolist(), t.held_ids.tolist()
        shared = 0
        while shared < max(len(ids) - 1, 0) // block and tuple(ids[:(shared + 1) * block]) in held:
            shared += 1
        held.update(tuple(kept[:(i + 1) * block]) for i in range(len(kept) // block))
        most = max(most, len(held) + (1 if len(kept) % block else 0))
        out.append((shared, most))
    return out


def test_property_the_accounting_holds_and_equals_the_vllm_simulation() -> None:
    reached = {"checked": 0, "shared": 0, "reply_shared": 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(sessions())
    def check(session: tuple[int, list[TurnPrompt]]) -> None:
        block, turns = session
        view = paged_view(turns, TINY, block)
        block_bytes = block * TINY.bytes_per_token
        assert [(t.shared_blocks, t.held_blocks) for t in view] == reference(block, turns)
        sim = simulate(turns, "vllm", ProviderParams.load("vllm", overrides={"block_size": block}))
        assert [t.cached_tokens for t in sim.turns] == [t.shared_blocks * block for t in view]
        prev = 0
        for t, p in zip(view, turns):
            n = len(p.token_ids)
            assert t.tokens == n and t.blocks == -(-n // block) and t.kv_bytes == n * TINY.bytes_per_token
            assert t.reply_tokens_held == len(p.held_ids) - n
            assert t.shared_blocks <= n // block                      # full blocks only
            assert t.held_bytes == t.held_blocks * block_bytes
            assert t.held_bytes >= t.kv_bytes                         # held ≥ own KV
            assert t.held_blocks >= t.shared_blocks and t.held_bytes >= t.shared_blocks * block_bytes
            assert t.held_bytes >= prev                               # never falls
            prev = t.held_bytes
        reached["checked"] += 1
        if any(t.shared_blocks for t in view):
            reached["shared"] += 1
        # a turn sharing more than the prompts alone would give it: a reply's blocks were shared
        alone = paged_view([p.token_ids for p in turns], TINY, block)
        if any(t.shared_blocks > a.shared_blocks for t, a in zip(view, alone)):
            reached["reply_shared"] += 1

    check()
    print(f"paged-view property: {reached}")
    assert reached["checked"] >= 250 and reached["shared"] >= 60 and reached["reply_shared"] >= 10, reached
