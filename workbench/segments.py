"""Segments: the rendered prompt cut into system / tools / messages / generation prompt.

Invariants (tested): the segment texts concatenate to the full render, and the
segment token ids concatenate to the tokenization of the full render. To keep
both, a cut that falls inside a run of text is moved back to the nearest token
boundary; most cuts fall next to a special token and never move.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from .conversation import Message
from .diagnostics import Diagnostic, info
from .tokenizers.base import EMPTY, Chunk, Tokenizer

# The kinds of segment a message's own text and parts make (a message with an image part has message
# segments around an image segment).
MESSAGE_KINDS = frozenset(("message", "image"))


@dataclass(frozen=True, slots=True)
class Span:
    """Where a part of the prompt lies in the rendered text (before tokenization)."""

    kind: str
    role: str | None
    seq: int | None
    start: int
    end: int
    media: str | None = None   # an image span: the digest of the image (see Segment.media)


@dataclass(frozen=True, slots=True, eq=False)
class Segment:
    kind: str               # system | tools | message | image | generation_prompt | bos | preamble
    role: str | None
    seq: int | None         # the message's sequence number in the original request
    text: str
    token_ids: NDArray[np.uint32]   # read-only view
    start: int              # token offsets into the full token ids
    end: int
    char_start: int
    char_end: int
    source: str = "fresh"   # fresh | local | redis
    # An image segment: the digest of the image its tokens stand for. Its ids are the same placeholder
    # for every image of that size, so caches key them by this (as vLLM hashes multimodal inputs into
    # its block hashes): another image at the same place is never a hit.
    media: str | None = None

    @property
    def token_count(self) -> int:
        return self.end - self.start

    def to_json(self) -> dict[str, Any]:
        d = {"kind": self.kind, "role": self.role, "seq": self.seq, "text": self.text,
             "token_ids": self.token_ids.tolist(), "start": self.start, "end": self.end,
             "source": self.source}
        if self.media is not None:
            d["media"] = self.media
        return d


# Content ids stand above every vocabulary (the largest has a few hundred thousand ids).
CONTENT_ID_BASE = 1 << 31


def content_id(digest: str) -> int:
    """The id that stands for an image's tokens when prompts are compared or cached: derived from the
    image's digest, above any vocabulary id (SGLang pads image tokens with a hash of the image the
    same way; vLLM puts the hash into its block hashes)."""
    return CONTENT_ID_BASE | (int(digest[:8], 16) & (CONTENT_ID_BASE - 1))


def content_ids(ids: NDArray[np.uint32], segments: Sequence[Segment]) -> NDArray[np.uint32]:
    """`ids` with each image segment's tokens replaced by its image's content id: two prompts agree
    on these exactly where a cache may reuse one for the other. `ids` itself when there is no image."""
    images = [s for s in segments if s.media is not None and s.end > s.start]
    if not images:
        return ids
    out = ids.copy()
    for s in images:
        assert s.media is not None
        out[s.start:s.end] = content_id(s.media)
    out.flags.writeable = False
    return out


class SegmentList(Sequence[Segment]):
    """The segments of an incrementally assembled prompt: the first `reused` came from an earlier
    prompt (reported with `source`: "local", or "redis" when it came through Redis), the rest were
    rendered now.

    Keeps the original segment objects in a flat list, so each turn copies pointers, not
    segments; the "local" copies are made only when someone looks at them.
    """

    __slots__ = ("orig", "reused", "source", "_local")

    def __init__(self, orig: list[Segment], reused: int, source: str = "local"):
        self.orig, self.reused, self.source = orig, reused, source  # source: "local" or "redis"
        self._local: dict[int, Segment] = {}

    def __len__(self) -> int:
        return len(self.orig)

    def _at(self, i: int) -> Segment:
        if i >= self.reused:
            return self.orig[i]
        seg = self._local.get(i)
        if seg is None:
            o = self.orig[i]
            seg = self._local[i] = Segment(o.kind, o.role, o.seq, o.text, o.token_ids, o.start, o.end, o.char_start,
                                           o.char_end, self.source, o.media)
        return seg

    @overload
    def __getitem__(self, i: int) -> Segment: ...
    @overload
    def __getitem__(self, i: slice) -> list[Segment]: ...

    def __getitem__(self, i: int | slice) -> Segment | list[Segment]:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self.orig)))]
        n = len(self.orig)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._at(i)

    def __iter__(self) -> Iterator[Segment]:
        return (self._at(i) for i in range(len(self.orig)))


def originals(segments: Sequence[Segment]) -> list[Segment]:
    """The flat list of segment objects behind `segments` (a tuple, a list or a SegmentList)."""
    return segments.orig if isinstance(segments, SegmentList) else list(segments)


def find_message_segment(segments: Sequence[Segment], seq: int) -> int | None:
    """Index of the first message segment of message `seq`, by bisection (segments are in message
    order, system/tools/bos first and the generation prompt last)."""
    def key(s: Segment) -> float:
        if s.kind in MESSAGE_KINDS and s.seq is not None:
            return s.seq
        return float("inf") if s.kind == "generation_prompt" else -1.0
    lo, hi = 0, len(segments)
    while lo < hi:
        mid = (lo + hi) // 2
        if key(segments[mid]) < seq:
            lo = mid + 1
        else:
            hi = mid
    if lo < len(segments) and segments[lo].kind == "message" and segments[lo].seq == seq:
        return lo
    return None


def layout(text: str, messages: Sequence[Message], starts: dict[int, int], *, gen_start: int | None,
           tools_start: int | None, bos_token: str | None) -> list[Span]:
    """Turn the renderer's notes (where each message started) into ordered, covering spans."""
    n = len(text)
    body_end = n if gen_start is None else gen_start
    # Message starts, made monotone: a message read out of order gets an empty span.
    bounds: list[int] = []
    prev = 0
    for i in range(len(messages)):
        s = starts.get(i, prev)
        s = min(max(s, prev), body_end)
        bounds.append(s)
        prev = s
    first = bounds[0] if bounds else body_end
    spans: list[Span] = []
    pos = 0
    if bos_token and text.startswith(bos_token) and first >= len(bos_token):
        spans.append(Span("bos", None, None, 0, len(bos_token)))
        pos = len(bos_token)
    if first > pos:
        # Text before the first message: the system block (the template may add tools, dates,
        # a default system prompt). If message 0 is a system message rendered here, it owns it.
        m0 = messages[0] if messages else None
        own = m0 is not None and m0.role == "system" and (len(messages) == 1 or bounds[1] == first)
        seq = m0.sequence if own and m0 is not None else None
        if tools_start is not None and pos < tools_start < first:
            spans.append(Span("system", "system", seq, pos, tools_start))
            spans.append(Span("tools", None, None, tools_start, first))
        else:
            spans.append(Span("system", "system", seq, pos, first))
        pos = first
    for i, m in enumerate(messages):
        end = bounds[i + 1] if i + 1 < len(bounds) else body_end
        if end > bounds[i]:
            kind = "system" if m.role == "system" and i == 0 else "message"
            spans.append(Span(kind, m.role, m.sequence, bounds[i], end))
    if body_end < n:
        spans.append(Span("generation_prompt", "assistant", None, body_end, n))
    return spans


def _cut_points(chunks: list[Chunk], tokenizer: Tokenizer, text: str, cuts: list[int]) -> list[tuple[int, int]]:
    """For each character cut, the (token index, snapped char) at or before it."""
    starts = [c.start for c in chunks]
    tok_before = np.cumsum([0] + [len(c.ids) for c in chunks]).tolist()
    out = []
    for cut in cuts:
        k = bisect.bisect_right(starts, cut) - 1
        if k < 0:
            out.append((0, 0))
            continue
        c = chunks[k]
        if cut >= c.end:          # at the end of the text
            out.append((tok_before[k + 1], c.end))
            continue
        if cut == c.start or c.special:
            out.append((tok_before[k], c.start))
            continue
        ends = tokenizer.char_boundaries(text[c.start:c.end], c.ids)
        best_tok, best_char = 0, 0
        if ends is not None:
            for j, e in enumerate(ends):
                if e < 0:
                    continue
                if c.start + e <= cut:
                    best_tok, best_char = j + 1, e
                else:
                    break
        out.append((tok_before[k] + best_tok, c.start + best_char))
    return out


_POOL: ThreadPoolExecutor | None = None
_CPUS = os.cpu_count() or 1  # asked once: the call is a system call


class PendingEncode:
    """The full-text encode, run while the template is still rendering.

    Special tokens are split out before BPE, so cutting the text just before a special token
    and encoding the pieces separately gives exactly the ids of one encode. As the renderer
    produces output (`feed`), every large enough run that ends before a special token is queued
    for a worker thread (the Rust encoder does not hold the GIL). In `result()` the caller,
    done with its own Python work, takes back the queued pieces the workers have not started,
    from the end, and encodes them itself: workers and caller meet in the middle.
    """

    CHUNK_CHARS = 100_000    # small enough that the two threads end close together

    def __init__(self, tokenizer: Tokenizer):
        global _POOL
        self._tokenizer = tokenizer
        cpus = _CPUS
        pattern = tokenizer.special_pattern
        self._parallel = bool(getattr(tokenizer, "releases_gil", False)) and cpus > 1 and pattern is not None
        self._starts_special = pattern.match if self._parallel and pattern is not None else None
        self._buf: list[str] = []
        self._buf_len = 0
        self._queued: list[tuple[str, Future[NDArray[np.uint32]]]] = []
        self._ids: NDArray[np.uint32] | None = None
        self.matches: list[tuple[int, int, str]] = []
        if self._parallel and _POOL is None:
            # one core stays with the caller, who renders and then encodes too
            _POOL = ThreadPoolExecutor(max_workers=min(cpus - 1, 3), thread_name_prefix="workbench-tokenize")

    def feed(self, piece: str) -> None:
        if self._buf_len >= self.CHUNK_CHARS and self._starts_special is not None and piece \
                and self._starts_special(piece):
            assert _POOL is not None
            text = "".join(self._buf)
            self._queued.append((text, _POOL.submit(self._tokenizer.encode_with_specials_on_worker, text)))
            self._buf, self._buf_len = [], 0
            # The worker needs the GIL for the few steps before the encoder lets it go; the render
            # holds it and would hand it over only at the interpreter's next switch (5 ms): given
            # up here, the worker starts at once.
            time.sleep(0)
        self._buf.append(piece)
        self._buf_len += len(piece)

    def finish(self, text: str) -> "PendingEncode":
        """The render is complete: note the special tokens of the whole text."""
        self.matches = self._tokenizer.find_specials(text)
        return self

    def result(self) -> NDArray[np.uint32]:
        if self._ids is None:
            encode = self._tokenizer.encode_with_specials
            parts: list[NDArray[np.uint32] | None] = [None] * len(self._queued)
            tail = encode("".join(self._buf))
            for i in range(len(self._queued) - 1, -1, -1):
                text, fut = self._queued[i]
                if not fut.cancel():
                    break  # a worker has it, and every piece before it
                parts[i] = encode(text)
            done = [p if p is not None else f.result() for p, (_, f) in zip(parts, self._queued)] + [tail]
            self._ids = done[0] if len(done) == 1 else np.concatenate(done).astype(np.uint32, copy=False)
        return self._ids

    @classmethod
    def of(cls, tokenizer: Tokenizer, text: str) -> "PendingEncode":
        p = cls(tokenizer)
        p.feed(text)
        return p.finish(text)


def tokenize_spans(text: str, spans: list[Span], tokenizer: Tokenizer,
                   escaped: Sequence[tuple[int, int]] = (), pending: PendingEncode | None = None,
                   ) -> tuple[list[Segment], NDArray[np.uint32], list[int | None]]:
    """Tokenize the full text once and cut the ids at the span boundaries.

    Returns the segments, the full ids, and the seq of each span whose start had to move back to a
    token boundary.
    Fast path: one encode of the whole text; a cut next to a special token maps to that token's
    index. Cuts inside plain text, and texts with escaped user specials, go through chunks.
    """
    cuts = [sp.start for sp in spans] + [len(text)]
    points: list[tuple[int, int]] | None = None
    full: NDArray[np.uint32] | None = None
    if not escaped:
        if pending is None:
            pending = PendingEncode.of(tokenizer, text)
        matches = pending.matches
        full = pending.result()
        where = tokenizer.special_positions(full) if matches else np.zeros(0, dtype=np.int64)
        if len(where) == len(matches):
            points = _fast_points(text, tokenizer, full, matches, where, cuts)
    if points is None or full is None:
        chunks = tokenizer.chunks(text, escaped)
        full = np.concatenate([c.ids for c in chunks]).astype(np.uint32, copy=False) if chunks else EMPTY.copy()
        points = _cut_points(chunks, tokenizer, text, cuts)
    full.flags.writeable = False
    # The messages whose segment start moved back to a token boundary (None: a segment without one).
    moved = [spans[i].seq for i, (p, c) in enumerate(zip(points, cuts)) if p[1] != c and i < len(spans)]
    segs = []
    for i, sp in enumerate(spans):
        (t0, c0), (t1, c1) = points[i], points[i + 1]
        if c1 <= c0 and t1 <= t0:
            continue
        segs.append(Segment(sp.kind, sp.role, sp.seq, text[c0:c1], full[t0:t1], t0, t1, c0, c1, media=sp.media))
    return segs, full, moved


def _fast_points(text: str, tokenizer: Tokenizer, full: NDArray[np.uint32], matches: list[tuple[int, int, str]],
                 where: NDArray[np.intp], cuts: list[int]) -> list[tuple[int, int]]:
    starts = {m[0]: k for k, m in enumerate(matches)}
    ends = {m[1]: k for k, m in enumerate(matches)}
    runs: dict[int, tuple[int, int, list[int], list[int]]] = {}
    out = []
    for cut in cuts:
        if cut <= 0:
            out.append((0, 0))
        elif cut >= len(text):
            out.append((len(full), len(text)))
        elif cut in starts:
            out.append((int(where[starts[cut]]), cut))
        elif cut in ends:
            out.append((int(where[ends[cut]]) + 1, cut))
        else:
            # Inside plain text: the token boundaries of that run (between two special tokens),
            # worked out once per run however many cuts fall in it. A template whose control
            # strings are not special tokens of this vocabulary makes the whole prompt one run.
            k = bisect.bisect_left(matches, (cut,))            # first special starting after cut
            run = runs.get(k)
            if run is None:
                run = runs[k] = _run_boundaries(text, tokenizer, full, matches, where, k)
            lo_t, lo_c, chars, toks = run
            j = bisect.bisect_right(chars, cut)                 # token ends at or before the cut
            out.append((lo_t, lo_c) if j == 0 else (lo_t + toks[j - 1], chars[j - 1]))
    return out


def _run_boundaries(text: str, tokenizer: Tokenizer, full: NDArray[np.uint32], matches: list[tuple[int, int, str]],
                    where: NDArray[np.intp], k: int) -> tuple[int, int, list[int], list[int]]:
    """The plain-text run before special k: its first token and character, and for each token
    that ends on a character boundary, that character (absolute) and the tokens up to it."""
    lo_c = matches[k - 1][1] if k > 0 else 0
    hi_c = matches[k][0] if k < len(matches) else len(text)
    lo_t = int(where[k - 1]) + 1 if k > 0 else 0
    hi_t = int(where[k]) if k < len(matches) else len(full)
    ends = tokenizer.char_boundaries(text[lo_c:hi_c], full[lo_t:hi_t])
    chars, toks = [], []
    for j, e in enumerate(ends or ()):
        if e >= 0:
            chars.append(lo_c + e)
            toks.append(j + 1)
    return lo_t, lo_c, chars, toks


def moved_diagnostics(moved: Sequence[int | None]) -> list[Diagnostic]:
    """One info diagnostic per message whose segment start moved back to a token boundary."""
    return [info("segment_boundary_moved", "a segment boundary fell inside a token and was moved to the token "
                 "boundary before it", seq) for seq in dict.fromkeys(moved)]
