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
import os
import pickle
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

# vLLM's prefix-caching block hash, transcribed from vLLM's code (github.com/vllm-project/vllm):
#   vllm/v1/core/kv_cache_utils.py at commit 001cabc1be16a59a70d720ed61a13b678c060a18:
#     init_none_hash, hash_block_tokens, get_request_block_hasher (and generate_block_hash_extra_keys,
#     which gives extra_keys None unless the request has multimodal inputs, a LoRA, a cache_salt or
#     prompt embeddings, none of which a text prompt of ids has);
#   vllm/utils/hashing.py (ac621345a4eb18058bb24b242b457f634d476b40): sha256, the default of
#     CacheConfig.prefix_caching_hash_algo ("sha256_cbor", the other choice there, needs cbor2, which
#     this project does not depend on; what is compared below does not depend on the hash function).
#
# What the workbench emulates is which blocks vLLM treats as the same cache entry, not vLLM's bytes.
# Ours (engine/kv.py block_hashes): H(parent + the block's ids as little-endian uint32 bytes), the
# first block's parent b"", H = hashlib.sha256 or blake2b. vLLM's: sha256(pickle.dumps((parent or
# NONE_HASH, tuple of the block's ids as Python ints, extra_keys))), NONE_HASH being os.urandom(32)
# per process unless PYTHONHASHSEED is set (then sha256 of that string). So the bytes differ, and
# vLLM's are not even stable across its own restarts; what must agree is the partition: two blocks
# (of any prompts) share a key under our chain exactly when they do under vLLM's, exactly when the
# prompts agree up to the end of those blocks.

def vllm_sha256(obj: object) -> bytes:
    """vllm/utils/hashing.py sha256."""
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def vllm_none_hash(hash_fn, seed: str | None) -> bytes:  # type: ignore[no-untyped-def]
    """kv_cache_utils.init_none_hash, with the PYTHONHASHSEED value passed in instead of read."""
    return os.urandom(32) if seed is None else hash_fn(seed)


def vllm_block_hashes(token_ids: list[int], block_size: int, hash_fn, none_hash: bytes) -> list[bytes]:  # type: ignore[no-untyped-def]
    """get_request_block_hasher's request_block_hasher for a new request (no block_hashes yet, no
    extra keys), each block through hash_block_tokens."""
    new_block_hashes: list[bytes] = []
    prev_block_hash_value: bytes | None = None
    start_token_idx = 0
    while True:
        end_token_idx = start_token_idx + block_size
        if end_token_idx > len(token_ids):
            break  # only full blocks are hashed
        block_tokens = token_ids[start_token_idx:end_token_idx]
        # hash_block_tokens(hash_fn, prev_block_hash_value, block_tokens, extra_keys=None):
        parent_block_hash = prev_block_hash_value if prev_block_hash_value else none_hash
        block_hash = hash_fn((parent_block_hash, tuple(block_tokens), None))
        new_block_hashes.append(block_hash)
        start_token_idx += block_size
        prev_block_hash_value = block_hash
    return new_block_hashes


def same_entries(keys: list[list]) -> set[frozenset[tuple[int, int]]]:  # type: ignore[type-arg]
    """The blocks (prompt, block index) grouped by key: which blocks one cache entry serves."""
    groups: dict[object, set[tuple[int, int]]] = {}
    for p, ks in enumerate(keys):
        for i, k in enumerate(ks):
            groups.setdefault(k, set()).add((p, i))
    return {frozenset(g) for g in groups.values()}


def prefix_keys(lists: list[list[int]], block: int) -> list[list[int]]:
    """The truth, with no hashing: a block's key is its node in a tree of full blocks (the node of
    block i is reached from block i-1's by the block's ids), so two keys are equal exactly when the
    prompts agree up to the end of the block."""
    nodes: dict[tuple[int, tuple[int, ...]], int] = {}
    out = []
    for t in lists:
        node, keys = -1, []
        for i in range(len(t) // block):
            node = nodes.setdefault((node, tuple(t[i * block:(i + 1) * block])), len(nodes))
            keys.append(node)
        out.append(keys)
    return out


# Prompts that share heads: a base and, per prompt, a cut of it (often all of it) and a tail. Ids are
# drawn as bytes (one draw per list, which keeps the 100 examples cheap), over the whole uint32 range
# or, in half the examples, folded to 0-3 so that equal blocks recur under different prefixes.
def _ids(min_size: int, max_size: int) -> st.SearchStrategy[np.ndarray]:
    return st.binary(min_size=4 * min_size, max_size=4 * max_size).map(
        lambda b: np.frombuffer(b[:len(b) // 4 * 4], dtype="<u4").astype(np.uint32))


PROMPTS = st.tuples(_ids(32, 160), st.lists(st.tuples(st.one_of(st.just(160), st.integers(0, 160)), _ids(0, 40)),
                                            min_size=2, max_size=4), st.booleans()
                    ).map(lambda b: [np.concatenate([b[0][:cut], tail]) & np.uint32(3 if b[2] else 2**32 - 1)
                                     for cut, tail in b[1]])


def test_the_vllm_simulator_and_the_engine_hash_blocks_identically() -> None:
    reached = {"examples": 0, "blocks": 0, "sharing": 0}

    @settings(max_examples=100, deadline=None)
    @given(prompts=PROMPTS, block=st.sampled_from([1, 4, 16, 32]), algo=st.sampled_from(HASH_ALGOS))
    def check(prompts: list[np.ndarray], block: int, algo: str) -> None:
        params = ProviderParams.load("vllm", overrides={"block_size": block, "hash_algo": algo})
        sim = make_simulator("vllm", params)
        assert isinstance(sim, VLLMSimulator)
        ours = []
        for ids in prompts:  # one simulator: later prompts reuse the chain of a shared head
            assert ids.dtype == np.uint32
            want = block_hashes(ids, block, algo=algo)
            assert sim.block_hashes(ids) == want and len(want) == len(ids) // block
            # hashes already known for a shared head are kept, the rest computed: the same chain (every
            # length of head up to 8 blocks, then every eighth; the simulator's reuse above is the rest)
            for keep in sorted({*range(min(len(want), 8) + 1), *range(0, len(want) + 1, 8), len(want)}):
                assert block_hashes(ids, block, algo=algo, known=want[:keep]) == want
            # the engine's own documented chain (engine/kv.py), not vLLM's bytes (see above)
            parent, chain = b"", []
            for i in range(len(ids) // block):
                parent = getattr(hashlib, algo)(parent + ids[i * block:(i + 1) * block].tobytes()).digest()
                chain.append(parent)
            assert want == chain
            ours.append(want)
        # vLLM's chain from its code, token ids as the Python ints a vLLM Request holds; NONE_HASH
        # both ways init_none_hash sets it (PYTHONHASHSEED set, and unset: random per process).
        lists = [ids.tolist() for ids in prompts]
        seeded = [vllm_block_hashes(t, block, vllm_sha256, vllm_none_hash(vllm_sha256, "0")) for t in lists]
        none_hash = vllm_none_hash(vllm_sha256, None)
        unseeded = [vllm_block_hashes(t, block, vllm_sha256, none_hash) for t in lists]
        assert [len(k) for k in seeded] == [len(k) for k in ours]
        entries = same_entries(ours)
        assert entries == same_entries(seeded) == same_entries(unseeded) == same_entries(prefix_keys(lists, block))
        # ... and the keys themselves are not vLLM's (see above): no block hash of ours is one of its.
        assert not {h for ks in ours for h in ks} & {h for ks in seeded + unseeded for h in ks}
        reached["examples"] += 1
        reached["blocks"] += sum(map(len, ours))
        reached["sharing"] += any(len(g) > 1 for g in entries)   # an entry serves two prompts

    check()
    print(f"block-hash partition property: {reached}")
    # Every example reached the comparison, with thousands of blocks in all, and in nearly every one
    # some entry serves two prompts (the case a prefix cache is for).
    assert reached["examples"] == 100 and reached["blocks"] >= 2000 and reached["sharing"] >= 80, reached


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
