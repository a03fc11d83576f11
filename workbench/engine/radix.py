"""A radix tree over token ids that holds KV cache slices, capped by bytes, least recently used
evicted first: what SGLang's RadixAttention keeps, in miniature. Like SGLang's, the same tree runs
in a simulated mode with no tensors at all, and the SGLang provider simulator is that mode.

Each node holds a run of tokens and, per layer, the K and V rows of exactly those tokens (arrays
with the token axis second to last: torch tensors `[batch, kv_heads, tokens, head_dim]` in the
engine, numpy arrays in the property tests; the tree only slices, concatenates and counts bytes).
A prompt's KV is the concatenation along its path. Children are keyed by their first token (their
first page when pages are longer than a token), so a lookup walks one child per run. Inserting a
prompt that diverges inside a node splits the node.

Simulated mode (`RadixKVCache.simulated`): nodes hold no KV, each token weighs `token_bytes`
(1 by default: the cap is then in tokens, as SGLang's simulator counts it), and everything else
(matching, splitting, recency, eviction) is the same code.

Pages (`page_size` > 1): matching and storing go in whole pages, as SGLang's paged radix cache does.

Eviction removes whole leaves, least recently used first (ties: the older node first), until the
bytes held are at most the cap (`match` and `insert` touch their path, so the prompt just used goes
last; a prompt bigger than the cap on its own is not kept).
Stored slices are copies: a slice of a prompt's big tensor would keep all of it alive.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._optional import require
from ..difference import first_difference
from ..errors import EngineError

Layers = list[tuple[Any, Any]]  # per layer: (K, V), token axis -2


def _take(x: Any, a: int, b: int) -> Any:
    part = x[..., a:b, :]
    return part.clone() if hasattr(part, "clone") else part.copy()


def _cat(parts: Sequence[Any]) -> Any:
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if hasattr(first, "clone"):
        torch = require("torch", "the KV radix tree")
        return torch.cat(list(parts), dim=-2)
    return np.concatenate(parts, axis=-2)


def _nbytes(x: Any) -> int:
    return int(x.nbytes)     # numpy arrays and torch tensors both have it


def _slice_layers(kv: Layers | None, a: int, b: int) -> Layers | None:
    return None if kv is None else [(_take(k, a, b), _take(v, a, b)) for k, v in kv]


def _layers_nbytes(kv: Layers) -> int:
    return sum(_nbytes(k) + _nbytes(v) for k, v in kv)


@dataclass(eq=False, slots=True)
class Node:
    tokens: np.ndarray                       # uint32, non-empty except at the root
    kv: Layers | None                        # per layer, the rows of exactly these tokens (None: simulated)
    parent: "Node | None" = None
    children: dict[int | bytes, "Node"] = field(default_factory=dict)
    last_used: int = 0
    nbytes: int = 0
    serial: int = 0                          # creation order: the older of two equally recent goes first


@dataclass(frozen=True)
class Match:
    length: int                              # tokens of the prompt found in the tree
    path: tuple[tuple[Node, int], ...]       # (node, tokens of it used), root excluded


class RadixKVCache:
    """`max_bytes`: the cap (None: unbounded). `page_size`: tokens per page. `token_bytes`: set, the
    tree is simulated (no KV; a token weighs that many bytes)."""

    def __init__(self, max_bytes: int | None, *, page_size: int = 1, token_bytes: int | None = None):
        if max_bytes is not None and max_bytes < 0:
            raise EngineError(f"the KV cache cap must be at least 0 bytes (got {max_bytes})")
        if page_size < 1:
            raise EngineError(f"the page size must be at least 1 token (got {page_size})")
        if token_bytes is not None and token_bytes < 1:
            raise EngineError(f"a simulated token weighs at least 1 byte (got {token_bytes})")
        self.max_bytes = max_bytes
        self.page_size = page_size
        self.token_bytes = token_bytes
        self.root = Node(np.zeros(0, np.uint32), None if token_bytes else [])
        self.nbytes = 0
        self.evictions = 0                   # leaves evicted
        self.evicted_bytes = 0
        self._tick = itertools.count(1)
        self._serial = itertools.count(1)

    @classmethod
    def simulated(cls, max_tokens: int | None = None, *, page_size: int = 1, token_bytes: int = 1) -> RadixKVCache:
        """The tree without tensors: what it would hold, match and evict, sizes only. With the default
        `token_bytes=1` the cap and the byte counts are in tokens."""
        cap = None if max_tokens is None else max_tokens * token_bytes
        return cls(cap, page_size=page_size, token_bytes=token_bytes)

    @property
    def is_simulated(self) -> bool:
        return self.token_bytes is not None

    def _key(self, ids: np.ndarray, at: int) -> int | bytes:
        # SGLang's child key: the first token, or the first page's tokens when pages are longer.
        return int(ids[at]) if self.page_size == 1 else ids[at:at + self.page_size].tobytes()

    def _common(self, node: Node, ids: np.ndarray) -> int:
        """Tokens of `node` that start `ids`, in whole pages."""
        common = first_difference(node.tokens, ids)
        return common - common % self.page_size

    # lookup --------------------------------------------------------------------------------------
    def match(self, ids: np.ndarray) -> Match:
        """The longest prefix of `ids` held (whole pages), and the path to it (touched: used now)."""
        ids = np.asarray(ids, dtype=np.uint32)
        node, i, path, ps = self.root, 0, [], self.page_size
        tick = next(self._tick)
        while i + ps <= len(ids):
            child = node.children.get(self._key(ids, i))
            if child is None:
                break
            common = self._common(child, ids[i:])
            path.append((child, common))
            child.last_used = tick
            i += common
            if common < len(child.tokens):
                break
            node = child
        return Match(i, tuple(path))

    def gather(self, match: Match, length: int | None = None) -> Layers:
        """Per layer, the K and V rows of the first `length` tokens of a match (default all)."""
        if self.is_simulated:
            raise EngineError("a simulated radix tree holds no KV to gather",
                              hint="build it with RadixKVCache(max_bytes) and insert the KV with the ids")
        want = match.length if length is None else length
        if not 0 < want <= match.length:
            raise EngineError(f"cannot gather {want} tokens from a match of {match.length}")
        pieces: list[Layers] = []
        got = 0
        for node, used in match.path:
            assert node.kv is not None
            take = min(used, want - got)
            pieces.append(node.kv if take == len(node.tokens) else
                          [(k[..., :take, :], v[..., :take, :]) for k, v in node.kv])
            got += take
            if got == want:
                break
        layers = len(pieces[0])
        return [(_cat([p[i][0] for p in pieces]), _cat([p[i][1] for p in pieces])) for i in range(layers)]

    # insert --------------------------------------------------------------------------------------
    def insert(self, ids: np.ndarray, kv: Layers | None = None) -> int:
        """Hold prompt `ids` (its whole pages) and, unless simulated, its KV (`kv` covers all of
        `ids`); returns the bytes added. Only the part not held yet is copied in. Evicts down to
        the cap afterwards."""
        ids = np.asarray(ids, dtype=np.uint32)
        if self.is_simulated:
            if kv is not None:
                raise EngineError("a simulated radix tree holds no KV", hint="insert the ids alone")
        else:
            n = kv[0][0].shape[-2] if kv else 0
            if kv is None or n != len(ids):
                raise EngineError(f"the KV covers {n} tokens, the prompt has {len(ids)}")
        tick = next(self._tick)
        end = len(ids) // self.page_size * self.page_size
        node, i = self.root, 0
        before = self.nbytes
        while i < end:
            key = self._key(ids, i)
            child = node.children.get(key)
            if child is None:
                leaf = self._new(ids[i:end].copy(), _slice_layers(kv, i, end), node, tick)
                node.children[key] = leaf
                self.nbytes += leaf.nbytes
                break
            # Touched before a split, as SGLang does: the tail this prompt parts from counts as used.
            child.last_used = tick
            common = self._common(child, ids[i:end])
            if common < len(child.tokens):
                child = self._split(child, common, tick)
            i += common
            node = child
        added = self.nbytes - before
        self.evict()
        return added

    def _new(self, tokens: np.ndarray, kv: Layers | None, parent: Node, tick: int) -> Node:
        node = Node(tokens, kv, parent, last_used=tick, serial=next(self._serial))
        node.nbytes = self._weigh(node)
        return node

    def _weigh(self, node: Node) -> int:
        return len(node.tokens) * self.token_bytes if self.token_bytes is not None else _layers_nbytes(node.kv or [])

    def _split(self, node: Node, at: int, tick: int) -> Node:
        """Cut `node` after `at` tokens: a new parent holds the head, `node` keeps the tail."""
        parent = node.parent
        assert parent is not None and 0 < at < len(node.tokens)
        head = self._new(node.tokens[:at].copy(), _slice_layers(node.kv, 0, at), parent, tick)
        node.kv = _slice_layers(node.kv, at, len(node.tokens))
        node.tokens, node.parent = node.tokens[at:].copy(), head
        self.nbytes -= node.nbytes
        node.nbytes = self._weigh(node)
        self.nbytes += head.nbytes + node.nbytes
        head.children[self._key(node.tokens, 0)] = node
        parent.children[self._key(head.tokens, 0)] = head
        return head

    # eviction ------------------------------------------------------------------------------------
    def evict(self, max_bytes: int | None = None) -> int:
        """Remove least recently used leaves until at most `max_bytes` (default the cap) are held;
        returns the bytes freed. A parent left without children becomes a leaf in its turn."""
        cap = self.max_bytes if max_bytes is None else max_bytes
        if cap is None or self.nbytes <= cap:
            return 0
        heap = [(n.last_used, n.serial, n) for n in self.leaves()]
        heapq.heapify(heap)
        freed = 0
        while self.nbytes > cap and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[self._key(leaf.tokens, 0)]
            self.nbytes -= leaf.nbytes
            freed += leaf.nbytes
            self.evictions += 1
            if parent is not self.root and not parent.children:
                heapq.heappush(heap, (parent.last_used, parent.serial, parent))
        self.evicted_bytes += freed
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
        """The invariants (tests call this): children keyed by their first token (page), non-empty
        runs of whole pages, KV rows equal to the run's length (none when simulated), parent links,
        and the byte count."""
        total = 0
        for n in self.nodes():
            assert len(n.tokens) > 0 and len(n.tokens) % self.page_size == 0 and n.parent is not None
            assert n.parent.children[self._key(n.tokens, 0)] is n
            if self.token_bytes is not None:
                assert n.kv is None and n.nbytes == len(n.tokens) * self.token_bytes
            else:
                assert n.kv is not None
                assert all(k.shape[-2] == len(n.tokens) == v.shape[-2] for k, v in n.kv)
                assert n.nbytes == _layers_nbytes(n.kv)
            total += n.nbytes
        assert total == self.nbytes and (self.max_bytes is None or total <= self.max_bytes)
