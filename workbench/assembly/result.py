"""The typed result of one assembly (SPEC 2.7) and its JSON form (SPEC 7.2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..budget import Budget
from ..cache.keys import CacheKey
from ..conversation import Conversation
from ..diagnostics import Diagnostic
from ..segments import Segment, SegmentList, content_ids
from ..truncation import Dropped
from ..variables import Binding
from .kept import KeptWindow


class LazyText:
    """A prompt text made of an earlier text's head and a new tail, joined only when someone reads it.

    Incremental assembly re-renders the tail of a long prompt; copying the whole text each turn
    would cost more than everything else it does. The chain of heads is walked iteratively.
    """

    __slots__ = ("head", "head_len", "tail", "_str", "root", "root_len")
    head: "str | LazyText"
    head_len: int
    tail: str
    root: str
    root_len: int

    def __init__(self, head: "str | LazyText", head_len: int, tail: str):
        self.head, self.head_len, self.tail = _nearest(head, head_len, LazyText, "_str"), head_len, tail
        self._str: str | None = None
        # The text at the end of the chain and how much of it this one repeats: a slice of the
        # start (the system block, read every turn) is taken there, not by walking every link back.
        self.root, self.root_len = _root(self.head, head_len)

    def __len__(self) -> int:
        return self.head_len + len(self.tail)

    def slice(self, a: int, b: int) -> str:
        """text[a:b] without joining the whole text."""
        if b <= self.root_len:
            return self.root[a:b]
        node: str | LazyText = self
        while isinstance(node, LazyText) and node._str is None and b <= node.head_len:
            node = node.head
        if isinstance(node, str):
            return node[a:b]
        if node._str is not None:
            return node._str[a:b]
        if a >= node.head_len:
            return node.tail[a - node.head_len:b - node.head_len]
        return text_slice(node.head, a, node.head_len) + node.tail[:b - node.head_len]

    def __str__(self) -> str:
        if self._str is None:
            parts: list[str] = []
            node: str | LazyText = self
            upto = len(self)
            while isinstance(node, LazyText) and node._str is None:
                parts.append(node.tail[:max(upto - node.head_len, 0)])
                upto = min(upto, node.head_len)
                node = node.head
            parts.append((node if isinstance(node, str) else node._str or "")[:upto])
            self._str = "".join(reversed(parts))
        return self._str


class LazyIds:
    """Token ids made of an earlier prompt's first `head_len` ids and a new tail, joined on first read.

    The same idea as LazyText, for the id array: an incremental update does not copy the reused
    prefix. The joined array is read-only and cached.
    """

    __slots__ = ("head", "head_len", "tail", "_arr", "root", "root_len")
    head: "NDArray[np.uint32] | LazyIds"
    head_len: int
    tail: NDArray[np.uint32]
    root: NDArray[np.uint32]
    root_len: int

    def __init__(self, head: "NDArray[np.uint32] | LazyIds", head_len: int, tail: NDArray[np.uint32]):
        self.head, self.head_len, self.tail = _nearest(head, head_len, LazyIds, "_arr"), head_len, tail
        self._arr: NDArray[np.uint32] | None = None
        self.root, self.root_len = _root(self.head, head_len)   # as LazyText's

    def __len__(self) -> int:
        return self.head_len + len(self.tail)

    def array(self) -> NDArray[np.uint32]:
        if self._arr is None:
            parts: list[NDArray[np.uint32]] = []
            node: NDArray[np.uint32] | LazyIds = self
            upto = len(self)
            while isinstance(node, LazyIds) and node._arr is None:
                parts.append(node.tail[:max(upto - node.head_len, 0)])
                upto = min(upto, node.head_len)
                node = node.head
            base = node if isinstance(node, np.ndarray) else node._arr
            assert base is not None
            parts.append(base[:upto])
            arr = np.concatenate(parts[::-1]).astype(np.uint32, copy=False)
            arr.flags.writeable = False
            self._arr = arr
        return self._arr


def _nearest(head: Any, head_len: int, lazy: "type[LazyText] | type[LazyIds]", joined: str) -> Any:
    """The nearest head that holds the first `head_len` items: lazy heads this one does not reach
    into are skipped (editing the same message again and again keeps the chain one link long, so a
    slice of the head stays O(1) however long the session), a joined one is used as joined."""
    while isinstance(head, lazy):
        if getattr(head, joined) is not None:
            return getattr(head, joined)
        if head_len > head.head_len:
            break
        head = head.head
    return head


def _root(head: Any, head_len: int) -> tuple[Any, int]:
    """The joined text or array at the end of a chain starting at `head`, and how many of its first
    items a link made with `head_len` of `head` repeats."""
    if isinstance(head, (LazyText, LazyIds)):
        return head.root, min(head.root_len, head_len)
    return head, head_len


def ids_array(ids: "NDArray[np.uint32] | LazyIds") -> NDArray[np.uint32]:
    return ids if isinstance(ids, np.ndarray) else ids.array()


def text_slice(text: "str | LazyText", a: int, b: int) -> str:
    return text[a:b] if isinstance(text, str) else text.slice(a, b)


@dataclass(frozen=True, slots=True, eq=False)
class AssemblyResult:
    template: dict[str, str]     # {"name", "version"}
    tokenizer: dict[str, str]    # {"name", "version"}
    text_source: "str | LazyText"   # read `text`; incremental results join it on first read
    ids_source: "NDArray[np.uint32] | LazyIds"   # read `token_ids`; incremental results join it on first read
    segments: Sequence[Segment]  # a tuple, or a SegmentList when earlier segments were reused
    budget: Budget
    dropped: Sequence[Dropped]    # a tuple, or a DroppedList (same interface)
    cache_key: CacheKey
    diagnostics: tuple[Diagnostic, ...]
    timings_ms: dict[str, float]
    conversation: Conversation
    # The shared-cache entries this assembly used, per tier: its whole prompt, or an earlier prompt of
    # the conversation it extended (0 or 1 each; a session's own previous result is not a cache hit).
    cache_hits: dict[str, int] = field(default_factory=lambda: {"local": 0, "redis": 0})
    # Character spans of user text holding special-token strings, encoded as plain text.
    escaped: tuple[tuple[int, int], ...] = ()
    # Prompt-template variables: each with its value, the scope it came from, and who used it.
    variables: tuple[Binding, ...] = ()
    # For the next incremental assembly: the message fingerprint chain, and the diagnostics of the
    # render stage (injection, rewrites), which belong to the messages they name.
    prefix_chain: tuple[str, ...] = ()
    render_diagnostics: tuple[Diagnostic, ...] = ()
    # The fingerprint of the build context (workbench/context.py) it was assembled under: a later
    # request reuses this result only under the same one.
    context: str = ""
    # A truncated result: where its kept window starts and why no fewer drops fit, for the next
    # request of the session (workbench/assembly/refit.py).
    kept: KeptWindow | None = None
    # How the images were counted (workbench/assembly/media.py, rule_label); None: no image rule.
    image_rule: str | None = None

    @property
    def text(self) -> str:
        t = self.text_source
        if isinstance(t, str):
            return t
        s = str(t)
        object.__setattr__(self, "text_source", s)  # joined once; frozen otherwise
        return s

    @property
    def token_ids(self) -> NDArray[np.uint32]:
        """Read-only."""
        ids = self.ids_source
        if isinstance(ids, np.ndarray):
            return ids
        arr = ids.array()
        object.__setattr__(self, "ids_source", arr)  # joined once; frozen otherwise
        return arr

    @property
    def total_tokens(self) -> int:
        return len(self.ids_source)

    def content_ids(self) -> NDArray[np.uint32]:
        """The token ids with each image's placeholder tokens replaced by an id of the image's content
        (workbench/segments.py, content_ids): what caches and prefix comparisons key on, so that
        another image of the same size is never taken for this one. The token ids when no image."""
        return content_ids(self.token_ids, self.segments) if self.conversation.media else self.token_ids

    def images(self) -> list[dict[str, Any]]:
        """Each image in the prompt: where it came from, its size, its tokens and where they are."""
        parts = {p.digest: (seq, p) for seq, p in self.conversation.media}
        out = []
        for s in self.segments:
            if s.kind != "image" or s.media is None:
                continue
            seq, p = parts.get(s.media, (s.seq, None))
            out.append({"seq": s.seq, "start": s.start, "end": s.end, "tokens": s.end - s.start, "digest": s.media,
                        "rule": self.image_rule,
                        "where": p.where if p else None, "width": p.width if p else None,
                        "height": p.height if p else None, "size_assumed": p.size_assumed if p else False,
                        "detail": p.detail if p else None})
        return out

    @property
    def reused_segments(self) -> int:
        """Segments taken from the previous result of the session (0 for a cold assembly)."""
        return self.segments.reused if isinstance(self.segments, SegmentList) else 0

    @property
    def cache_key_short(self) -> str:
        return self.cache_key.short

    def to_json(self) -> dict[str, Any]:
        return {
            "template": {"name": self.template["name"], "version": self.template["version"]},
            "tokenizer": {"name": self.tokenizer["name"], "version": self.tokenizer["version"]},
            "text": self.text,
            "token_ids": self.token_ids.tolist(),
            "total_tokens": self.total_tokens,
            "segments": [s.to_json() for s in self.segments],
            "images": self.images(),
            "budget": self.budget.to_json(),
            "params": self.conversation.params.to_json(),
            "dropped": [d.to_json() for d in self.dropped],
            "cache_key": self.cache_key.hex,
            "cache_key_short": self.cache_key.short,
            "build_context": self.context,
            "cache_hits": dict(self.cache_hits),
            "diagnostics": [d.to_json() for d in self.diagnostics],
            "escaped_spans": [list(e) for e in self.escaped],
            "variables": [b.to_json() for b in self.variables],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
