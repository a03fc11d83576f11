"""The provider simulators and the engine run the same code (issue 15): the SGLang simulator is the
engine's radix tree in its simulated mode, the vLLM simulator names blocks with the engine's hash
chain, and one first-difference helper serves every caller.

The tree checks run the engine's tree twice over the same session, once holding real (numpy) KV
rows under a byte cap and once simulated under the same cap in tokens, and compare what each
reports as cached, held and evicted; one more runs the real prefill engine (torch, the synthetic
`tiny` model) against the SGLang simulator.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.analysis.provider_params import ProviderParams
from workbench.analysis.providers import SGLangSimulator, TurnPrompt, VLLMSimulator, make_simulator, simulate
from workbench.difference import first_difference
from workbench.engine.engine import Engine
from workbench.engine.kv import HASH_ALGOS, block_hashes, paged_view
from workbench.engine.radix import RadixKVCache
from workbench.errors import EngineError

ROOT = Path(__file__).resolve().parent.parent
ROW_BYTES = 2 * 2 * 3 * 8         # layers x (K, V) x head_dim x float64: one token's KV rows below


def kv_rows(ids: np.ndarray) -> list:
    """Two layers of K and V whose row t depends on the whole prefix ids[:t+1], as causal KV does."""
    rows = np.array([int.from_bytes(hashlib.blake2b(ids[: t + 1].tobytes(), digest_size=4).digest(), "little")
                     for t in range(len(ids))], dtype=np.float64)
    k = rows.reshape(1, 1, -1, 1).repeat(3, axis=-1)
    return [(k + layer, -k - layer) for layer in range(2)]


def sglang(capacity: int | None, page: int = 1) -> SGLangSimulator:
    sim = make_simulator("sglang", ProviderParams.load("sglang", overrides={"capacity_tokens": capacity,
                                                                          "page_size": page}))
    assert isinstance(sim, SGLangSimulator)
    return sim


SESSIONS = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=30).map(lambda x: np.array(x, np.uint32)),
                    min_size=1, max_size=10)


# ---------------------------------------------------------------- one radix tree

def test_the_sglang_simulator_holds_the_engines_tree_in_simulated_mode() -> None:
    sim = sglang(1000, page=4)
    assert type(sim.tree) is RadixKVCache and sim.tree.is_simulated
    assert (sim.tree.max_bytes, sim.tree.page_size, sim.tree.token_bytes) == (1000, 4, 1)
    ids = np.arange(40, dtype=np.uint32)
    sim.process(TurnPrompt(ids))
    sim.tree.check()
    assert sim.stored_tokens == sim.tree.tokens_held == 40
    with pytest.raises(EngineError, match="simulated"):
        sim.tree.gather(sim.tree.match(ids))
    with pytest.raises(EngineError, match="simulated"):
        sim.tree.insert(ids, kv_rows(ids))


@settings(max_examples=150, deadline=None)
@given(prompts=SESSIONS, cap=st.one_of(st.none(), st.integers(1, 60)))
def test_the_simulator_reports_what_the_engines_tree_holding_kv_reports(prompts, cap) -> None:
    """Per turn: the engine's tree with KV rows under cap x ROW_BYTES bytes reuses (its longest match,
    less the last token, as Engine.prefill does) what the simulator calls cached; both hold and
    evict the same tokens."""
    engine_tree = RadixKVCache(None if cap is None else cap * ROW_BYTES)
    sim = sglang(cap)
    for ids in prompts:
        reused = min(engine_tree.match(ids).length, len(ids) - 1)
        added = engine_tree.insert(ids, kv_rows(ids))
        got = sim.process(TurnPrompt(ids))
        engine_tree.check()
        sim.tree.check()
        assert got.cached_tokens == reused
        assert got.cache_write_tokens * ROW_BYTES == added
        assert sim.stored_tokens * ROW_BYTES == engine_tree.nbytes
        assert sim.tree.evicted_bytes * ROW_BYTES == engine_tree.evicted_bytes
        if reused:   # what the engine found is the right KV, whichever prompt stored it
            k0 = engine_tree.gather(engine_tree.match(ids), reused)[0][0]
            assert np.array_equal(k0, kv_rows(ids)[0][0][..., :reused, :])


def test_the_prefill_engine_reuses_what_the_sglang_simulator_calls_cached() -> None:
    """The real engine (torch, the synthetic tiny model, a KV cap that evicts) against the simulator
    with the same cap in tokens: the same reused tokens on every turn."""
    engine = Engine.load("tiny", vocab_size=512)
    per_token = engine.m.kv.bytes_per_token
    engine = Engine(engine.m, kv_cap_bytes=400 * per_token)
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 512, 200).astype(np.uint32), rng.integers(0, 512, 250).astype(np.uint32)
    turns = [a, np.concatenate([a, rng.integers(0, 512, 60)]), b, np.concatenate([a[:120], b[:50]]), a,
             np.concatenate([b, rng.integers(0, 512, 40)]), b]
    turns = [t.astype(np.uint32) for t in turns]
    sim = sglang(400)
    got = [sim.process(TurnPrompt(t)).cached_tokens for t in turns]
    reused = [engine.prefill(t).reused_tokens for t in turns]
    assert got == reused
    assert sim.tree.evictions > 0 and engine.cache.evictions == sim.tree.evictions
    assert engine.cache.nbytes == sim.stored_tokens * per_token


def test_the_tree_and_the_simulators_import_without_torch() -> None:
    """engine/radix.py imports torch only when it joins torch tensors: analysis runs without it."""
    code = ("import sys\n"
            "class NoTorch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' or name.startswith('torch.'):\n"
            "            raise ImportError('torch is not installed here')\n"
            "sys.meta_path.insert(0, NoTorch())\n"
            "import numpy as np\n"
            "from workbench.analysis import TurnPrompt, simulate\n"
            "a = np.arange(100, dtype=np.uint32)\n"
            "print([t.cached_tokens for t in simulate([TurnPrompt(a), TurnPrompt(a)], 'sglang').turns])\n"
            "assert 'torch' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 99]"


# ---------------------------------------------------------------- one block-hash chain

@settings(max_examples=100, deadline=None)
@given(ids=st.lists(st.integers(0, 2**32 - 1), max_size=200).map(lambda x: np.array(x, np.uint32)),
       block=st.sampled_from([1, 4, 16, 32]), algo=st.sampled_from(HASH_ALGOS))
def test_the_vllm_simulator_and_the_engine_hash_blocks_identically(ids, block, algo) -> None:
    params = ProviderParams.load("vllm", overrides={"block_size": block, "hash_algo": algo})
    sim = make_simulator("vllm", params)
    assert isinstance(sim, VLLMSimulator)
    want = block_hashes(ids, block, algo=algo)
    assert sim.block_hashes(ids) == want and len(want) == len(ids) // block
    # by hand, as vLLM chains them: each hash covers its parent and the block's ids
    parent, chain = b"", []
    for i in range(len(ids) // block):
        parent = getattr(hashlib, algo)(parent + ids[i * block:(i + 1) * block].tobytes()).digest()
        chain.append(parent)
    assert want == chain
    # hashes already known for a shared head are kept, the rest computed: the same chain
    for keep in range(len(want) + 1):
        assert block_hashes(ids, block, algo=algo, known=want[:keep]) == want


@settings(max_examples=60, deadline=None)
@given(prompts=st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=80).map(lambda x: np.array(x, np.uint32)),
                        min_size=1, max_size=8))
def test_the_paged_view_shares_the_blocks_the_vllm_simulator_finds(prompts) -> None:
    """Unbounded, the simulator caches the leading full blocks whose hashes it has seen (all but the
    last token); the paged view counts the same blocks as shared (with replies: test_kv_accounting)."""
    view = paged_view(prompts, "tiny", block_size=4)
    sim = simulate([TurnPrompt(p) for p in prompts], "vllm", ProviderParams.load("vllm", overrides={"block_size": 4}))
    for turn, paged, ids in zip(sim.turns, view, prompts):
        assert turn.cached_tokens == paged.shared_blocks * 4 and paged.shared_blocks <= (len(ids) - 1) // 4


# ---------------------------------------------------------------- one first-difference helper

def naive(a, b) -> int:  # type: ignore[no-untyped-def]
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@settings(max_examples=200, deadline=None)
@given(a=st.lists(st.integers(0, 3), max_size=40), b=st.lists(st.integers(0, 3), max_size=40))
def test_first_difference_on_ids_texts_and_lists(a: list[int], b: list[int]) -> None:
    want = naive(a, b)
    assert first_difference(np.array(a, np.uint32), np.array(b, np.uint32)) == want
    assert first_difference(np.array(a, np.uint32), b) == want                 # a list of ids against an array
    assert first_difference(a, b) == first_difference(tuple(a), tuple(b)) == want
    assert first_difference("".join(map(str, a)), "".join(map(str, b))) == want
