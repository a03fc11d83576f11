"""A radix tree over token ids that holds KV cache slices, capped by bytes, least recently used
evicted first: what SGLang's RadixAttention keeps, in miniature.

Each node holds a run of tokens and, per layer, the K and V rows of exactly those tokens (arrays
with the token axis second to last: torch tensors `[batch, kv_heads, tokens, head_dim]` in the
engine, numpy arrays in the property tests; the tree only slices, concatenates and counts bytes).
A prompt's KV is the concatenation along its path. Children are keyed by their first token, so a
lookup walks one child per run. Inserting a prompt that diverges inside a node splits the node.

Eviction removes whole leaves, least recently used first, until the bytes held are at most the cap
(`match` and `insert` touch their path, so the prompt just used goes last; a prompt bigger than the
cap on its own is not kept).
Stored slices are copies: a slice of a prompt's big tensor would keep all of it alive.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import EngineError

Layers = list  # per layer: (K, V), token axis -2


def _take(x: Any, a: int, b: int) -> Any:
    part = x[..., a:b, :]
    return part.clone() if hasattr(part, "clone") else part.copy()


def _cat(parts: Sequence[Any]) -> Any:
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if hasattr(first, "clone"):
        import torch
        return torch.cat(list(parts), dim=-2)
    return np.concatenate(parts, axis=-2)


def _nbytes(x: Any) -> int:
    return int(x.nbytes)     # numpy arrays and torch tensors both have it


def _slice_layers(kv: Layers, a: int, b: int) -> Layers:
    return [(_take(k, a, b), _take(v, a, b)) for k, v in kv]


def _layers_nbytes(kv: Layers) -> int:
    return sum(_nbytes(k) + _nbytes(v) for k, v in kv)


@dataclass(eq=False)
class Node:
    tokens: np.ndarray                       # uint32, non-empty except at the root
    kv: Layers                               # per layer, the rows of exactly these tokens
    parent: "Node | None" = None
    children: dict[int, "Node"] = field(default_factory=dict)
    last_used: int = 0
    nbytes: int = 0


@dataclass(frozen=True)
class Match:
    length: int                              # tokens of the prompt found in the tree
    path: tuple[tuple[Node, int], ...]       # (node, tokens of it used), root excluded


class RadixKVCache:
    def __init__(self, max_bytes: int):
        if max_bytes < 0:
            raise EngineError(f"the KV cache cap must be at least 0 bytes (got {max_bytes})")
        self.max_bytes = max_bytes
        self.root = Node(np.zeros(0, np.uint32), [])
        self.nbytes = 0
        self.evictions = 0
        self._tick = itertools.count(1)

    # lookup --------------------------------------------------------------------------------------
    def match(self, ids: np.ndarray) -> Match:
        """The longest prefix of `ids` held, and the path to it (touched: used now)."""
        ids = np.asarray(ids, dtype=np.uint32)
        node, i, path = self.root, 0, []
        tick = next(self._tick)
        while i < len(ids):
            child = node.children.get(int(ids[i]))
            if child is None:
                break
            common = _common(child.tokens, ids[i:])
            path.append((child, common))
            child.last_used = tick
            i += common
            if common < len(child.tokens):
                break
            node = child
        return Match(i, tuple(path))

    def gather(self, match: Match, length: int | None = None) -> Layers:
        """Per layer, the K and V rows of the first `length` tokens of a match (default all)."""
        want = match.length if length is None else length
        if not 0 < want <= match.length:
            raise EngineError(f"cannot gather {want} tokens from a match of {match.length}")
        pieces: list[Layers] = []
        got = 0
        for node, used in match.path:
            take = min(used, want - got)
            pieces.append(node.kv if take == len(node.tokens) else
                          [(k[..., :take, :], v[..., :take, :]) for k, v in node.kv])
            got += take
            if got == want:
                break
        layers = len(pieces[0])
        return [(_cat([p[l][0] for p in pieces]), _cat([p[l][1] for p in pieces])) for l in range(layers)]

    # insert --------------------------------------------------------------------------------------
    def insert(self, ids: np.ndarray, kv: Layers) -> int:
        """Hold the KV of prompt `ids` (`kv` covers all of it); returns the bytes added. Only the
        part not held yet is copied in. Evicts down to the cap afterwards."""
        ids = np.asarray(ids, dtype=np.uint32)
        n = kv[0][0].shape[-2] if kv else 0
        if n != len(ids):
            raise EngineError(f"the KV covers {n} tokens, the prompt has {len(ids)}")
        tick = next(self._tick)
        node, i = self.root, 0
        before = self.nbytes
        while i < len(ids):
            child = node.children.get(int(ids[i]))
            if child is None:
                leaf = Node(ids[i:].copy(), _slice_layers(kv, i, len(ids)), node, last_used=tick)
                leaf.nbytes = _layers_nbytes(leaf.kv)
                node.children[int(ids[i])] = leaf
                self.nbytes += leaf.nbytes
                break
            common = _common(child.tokens, ids[i:])
            if common < len(child.tokens):
                child = self._split(child, common)
            child.last_used = tick
            i += common
            node = child
        added = self.nbytes - before
        self.evict()
        return added

    def _split(self, node: Node, at: int) -> Node:
        """Cut `node` after `at` tokens: a new parent holds the head, `node` keeps the tail."""
        parent = node.parent
        assert parent is not None and 0 < at < len(node.tokens)
        head = Node(node.tokens[:at].copy(), _slice_layers(node.kv, 0, at), parent, last_used=node.last_used)
        tail_kv = _slice_layers(node.kv, at, len(node.tokens))
        head.nbytes = _layers_nbytes(head.kv)
        tail_bytes = _layers_nbytes(tail_kv)
        self.nbytes += head.nbytes + tail_bytes - node.nbytes
        node.tokens, node.kv, node.nbytes, node.parent = node.tokens[at:].copy(), tail_kv, tail_bytes, head
        head.children[int(node.tokens[0])] = node
        parent.children[int(head.tokens[0])] = head
        return head

    # eviction ------------------------------------------------------------------------------------
    def evict(self, max_bytes: int | None = None) -> int:
        """Remove least recently used leaves until at most `max_bytes` (default the cap) are held;
        returns the bytes freed."""
        cap = self.max_bytes if max_bytes is None else max_bytes
        freed = 0
        while self.nbytes > cap:
            leaf = min(self.leaves(), key=lambda n: n.last_used, default=None)
            if leaf is None:
                break
            assert leaf.parent is not None
            del leaf.parent.children[int(leaf.tokens[0])]
            self.nbytes -= leaf.nbytes
            freed += leaf.nbytes
            self.evictions += 1
        return freed

    def clear(self) -> None:
        self.root.children.clear()
        self.nbytes = 0

    # inspection ----------------------------------------------------------------------------------
    def nodes(self) -> list[Node]:
        out, stack = [], list(self.root.children.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out

    def leaves(self) -> list[Node]:
        return [n for n in self.nodes() if not n.children]

    @property
    def tokens_held(self) -> int:
        return sum(len(n.tokens) for n in self.nodes())

    def check(self) -> None:
        """The invariants (tests call this): children keyed by their first token, non-empty runs,
        KV rows equal to the run's length, parent links, and the byte count."""
        total = 0
        for n in self.nodes():
            assert len(n.tokens) > 0 and n.parent is not None
            assert n.parent.children[int(n.tokens[0])] is n
            assert all(k.shape[-2] == len(n.tokens) == v.shape[-2] for k, v in n.kv)
            assert n.nbytes == _layers_nbytes(n.kv)
            total += n.nbytes
        assert total == self.nbytes <= self.max_bytes


def _common(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n
