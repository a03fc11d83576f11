"""The radix KV tree on its own (numpy payloads: the tree only slices, joins and counts bytes).

Each prompt's "KV" row at position t is a function of its whole prefix up to t, as real K and V are
(causal attention): so rows gathered from the tree for any prompt must equal the rows that prompt
would compute itself, whichever earlier prompt they were stored from.
"""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.engine.radix import RadixKVCache

LAYERS = 2


def kv_of(ids: np.ndarray) -> list:
    rows = np.array([int.from_bytes(hashlib.blake2b(ids[: t + 1].tobytes(), digest_size=4).digest(), "little")
                     for t in range(len(ids))], dtype=np.float64)
    k = rows.reshape(1, 1, -1, 1).repeat(3, axis=-1)       # [batch, kv_heads, tokens, head_dim]
    return [(k + layer, -k - layer) for layer in range(LAYERS)]


def lcp(a: np.ndarray, b: np.ndarray) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def row_bytes() -> int:
    return sum(k[..., :1, :].nbytes + v[..., :1, :].nbytes for k, v in kv_of(np.array([1], np.uint32)))


PROMPTS = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=24).map(lambda x: np.array(x, np.uint32)),
                   min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(prompts=PROMPTS, queries=PROMPTS)
def test_without_a_cap_the_tree_finds_the_longest_held_prefix_and_its_exact_rows(prompts, queries) -> None:
    tree = RadixKVCache(max_bytes=1 << 40)
    for p in prompts:
        tree.insert(p, kv_of(p))
        tree.check()
    for q in [*prompts, *queries]:
        m = tree.match(q)
        assert m.length == max(lcp(q, p) for p in prompts)
        if m.length:
            got = tree.gather(m)
            want = kv_of(q)
            for (gk, gv), (wk, wv) in zip(got, want):
                assert np.array_equal(gk, wk[..., : m.length, :]) and np.array_equal(gv, wv[..., : m.length, :])
    # Each distinct token position is held once: the tree shares prefixes.
    distinct = {p[: t + 1].tobytes() for p in prompts for t in range(len(p))}
    assert tree.tokens_held == len(distinct)


@settings(max_examples=200, deadline=None)
@given(prompts=PROMPTS, cap_rows=st.integers(0, 40), queries=PROMPTS)
def test_with_a_cap_the_bytes_stay_under_it_and_what_is_found_is_exact(prompts, cap_rows, queries) -> None:
    tree = RadixKVCache(max_bytes=cap_rows * row_bytes())
    for p in prompts:
        tree.insert(p, kv_of(p))
        tree.check()                       # includes: bytes held <= cap
    for q in queries:
        m = tree.match(q)
        assert m.length <= max(lcp(q, p) for p in prompts)
        if m.length:
            k0 = tree.gather(m)[0][0]
            assert np.array_equal(k0, kv_of(q)[0][0][..., : m.length, :])


def test_eviction_takes_the_least_recently_used_leaf_first() -> None:
    a, b, c, d = (np.full(10, x, np.uint32) for x in (1, 2, 3, 4))
    tree = RadixKVCache(max_bytes=30 * row_bytes())
    for p in (a, b, c):
        tree.insert(p, kv_of(p))
    assert tree.nbytes == 30 * row_bytes() and tree.evictions == 0
    tree.match(a)                          # a used again: b is now the oldest
    tree.insert(d, kv_of(d))
    assert tree.evictions == 1
    assert tree.match(b).length == 0
    assert tree.match(a).length == 10 and tree.match(c).length == 10 and tree.match(d).length == 10


def test_a_shared_prefix_is_split_not_copied_and_a_prompt_over_the_cap_is_not_kept() -> None:
    base = np.arange(8, dtype=np.uint32)
    one, two = np.concatenate([base, [100, 101]]).astype(np.uint32), np.concatenate([base, [200]]).astype(np.uint32)
    tree = RadixKVCache(max_bytes=100 * row_bytes())
    assert tree.insert(one, kv_of(one)) == 10 * row_bytes()
    assert tree.insert(two, kv_of(two)) == 1 * row_bytes()      # only the new token's rows
    assert sorted(len(n.tokens) for n in tree.nodes()) == [1, 2, 8]
    tree.check()
    small = RadixKVCache(max_bytes=5 * row_bytes())
    small.insert(one, kv_of(one))
    assert small.nbytes == 0 and small.match(one).length == 0
