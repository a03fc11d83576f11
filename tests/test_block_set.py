"""The unbounded vLLM simulator's block store (workbench/engine/block_set.py): a set of 128-bit keys
in flat arrays. Checked against Python's set, and the simulator against its own LRU path with a
capacity it never reaches (a different store, the same rule)."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.analysis.providers import ProviderParams, TurnPrompt, VLLMSimulator, make_simulator, simulate
from workbench.engine.block_set import BlockSet, block_keys, leading

REACHED = {"batches": 0}


def digests(ns: list[int]) -> list[bytes]:
    return [hashlib.sha256(str(n).encode()).digest() for n in ns]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(batches=st.lists(st.lists(st.integers(0, 300), max_size=120), min_size=1, max_size=12),
       bits=st.sampled_from([3, 4, 6, 10]))
def test_block_set_agrees_with_a_python_set(batches: list[list[int]], bits: int) -> None:
    # A small pool of keys (repeats within and across batches) and small tables (probe chains that
    # wrap around the end, growth several times over).
    ours, ref = BlockSet(bits), set()
    for batch in batches:
        keys = block_keys(digests(batch))
        assert ours.contains(keys).tolist() == [k in ref for k in batch]
        lead = next((i for i, k in enumerate(batch) if k not in ref), len(batch))
        held_before = ours.add(keys)
        assert held_before.tolist() == [k in ref for k in batch] and leading(held_before) == lead
        ref.update(batch)
        assert len(ours) == len(ref)
        REACHED["batches"] += 1
    every = block_keys(digests(list(range(301))))
    assert ours.contains(every).tolist() == [k in ref for k in range(301)]


def test_block_set_examples_reached_their_check() -> None:
    print(f"\nreach test_block_set_agrees_with_a_python_set: {REACHED['batches']} batches compared")
    assert REACHED["batches"] >= 80


def test_keys_that_share_a_home_slot_walk_past_each_other_and_wrap_around() -> None:
    # A key's home is the top bits of its first word: small first words all live at slot 0, the
    # largest at the last slot, whose paths wrap around to slot 0, also when the table grows.
    low = np.array([[i, i] for i in range(10)], dtype=np.uint64)
    high = np.array([[2**64 - 1 - i, i] for i in range(6)], dtype=np.uint64)
    s = BlockSet(bits=4)                              # 16 slots
    assert not s.add(low[:6]).any() and len(s) == 6
    assert s.add(low).tolist() == [True] * 6 + [False] * 4 and len(s) == 10
    assert not s.add(high).any() and len(s) == 16 and s.nbytes > 17 * 16   # grew past 0.7 of 16 slots
    assert s.contains(np.concatenate([low, high])).all()
    assert not s.contains(np.array([[11, 11], [0, 1], [2**64 - 1, 1]], dtype=np.uint64)).any()
    more = np.array([[2**64 - 1 - i, 100 + i] for i in range(40)], dtype=np.uint64)   # same homes, grows twice
    assert not s.add(more).any() and len(s) == 56
    assert s.contains(np.concatenate([low, high, more])).all()


def test_short_digests_are_padded_and_empty_batches_are_nothing() -> None:
    keys = block_keys([b"\x01" * 8, b"\x01" * 8 + b"\x00" * 8])
    assert keys.shape == (2, 2) and (keys[0] == keys[1]).all()   # the same 16 bytes once padded
    s = BlockSet()
    assert len(s.add(block_keys([]))) == 0 and leading(s.contains(block_keys([]))) == 0 and len(s) == 0


def sliding_turns(n_turns: int, seed: int = 0) -> list[TurnPrompt]:
    """A sliding window over a conversation, with a fixed head: every turn's blocks after the head
    are new, and each turn's reply is the next prompt's tail."""
    rng = np.random.default_rng(seed)
    head = rng.integers(0, 50_000, 40, dtype=np.uint32)
    body = rng.integers(0, 50_000, 60 * (n_turns + 8), dtype=np.uint32)
    out = []
    for t in range(n_turns):
        start = 60 * (t // 3)               # the window slides every third turn
        prompt = np.concatenate([head, body[start:60 * (t + 5)]])
        reply = body[60 * (t + 5):60 * (t + 5) + 23]
        out.append(TurnPrompt(prompt, reply_ids=reply))
    return out


def test_unbounded_vllm_equals_its_lru_path_with_room_to_spare() -> None:
    turns = sliding_turns(60)
    unbounded = simulate(turns, "vllm")
    roomy = simulate(turns, "vllm", ProviderParams.load("vllm", overrides={"capacity_blocks": 10**9}))
    got = [(t.cached_tokens, t.cache_write_tokens) for t in unbounded.turns]
    assert got == [(t.cached_tokens, t.cache_write_tokens) for t in roomy.turns]
    # hits past the head, and slides that keep only the head's two full blocks (40 tokens)
    assert max(c for c, _ in got) > 100 and min(c for c, _ in got[1:]) == 32
    sim = make_simulator("vllm")
    assert isinstance(sim, VLLMSimulator)
    for t in turns:
        sim.process(t)
    assert isinstance(sim._blocks, BlockSet) and sim._blocks.nbytes < 40 * len(sim._blocks) + 17 * 4096


def test_the_chain_memo_keeps_to_its_budget_in_blocks(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import workbench.analysis.providers as P
    monkeypatch.setattr(P, "CHAIN_MEMO_BLOCKS", 300)
    monkeypatch.setattr(P, "_CHAINS", type(P._CHAINS)())
    monkeypatch.setattr(P, "_chain_blocks", 0)
    turns = sliding_turns(30)                  # prompts of 21 to 96 blocks: a few fit
    first = simulate(turns, "vllm")
    assert 0 < P._chain_blocks == sum(map(len, P._CHAINS.values())) <= 300
    again = simulate(turns, "vllm")            # what the memo kept and what it had let go alike
    assert [t.cached_tokens for t in again.turns] == [t.cached_tokens for t in first.turns]
    assert P._chain_blocks == sum(map(len, P._CHAINS.values())) <= 300


def test_keys_whose_words_are_nan_patterns_keep_every_bit() -> None:
    # Whole keys are moved as 16-byte complex128 items (block_set._rows): words that read as
    # signalling or quiet NaNs, with payloads, must come back bit for bit through a probe, a
    # placement and several doublings.
    nans = [0x7FF0000000000001, 0x7FF8000000000001, 0xFFF0000000000001, 0xFFFFFFFFFFFFFFFF, 0x7FF4000000000000]
    keys = np.array([[a, b] for a in nans for b in nans], dtype=np.uint64)
    s = BlockSet(bits=3)
    assert not s.add(keys).any() and len(s) == len(keys)
    assert s.contains(keys).all() and s.add(keys).all() and len(s) == len(keys)
    stored = s._keys[s._used]
    assert sorted(map(tuple, stored.tolist())) == sorted(map(tuple, keys.tolist()))
    flipped = keys ^ np.uint64(1)                       # one bit off: none of them held
    assert not s.contains(flipped).any()
