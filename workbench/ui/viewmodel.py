"""The token view's data, shared by both hosts (notebook and app): patches, not whole prompts.

`TokenViewModel.update(result)` compares the new result's segments with the ones it sent last
time and returns a `Patch`: how many leading segments the front end keeps, the metadata of the
segments it does not have, and three binary buffers for their tokens (ids as uint32, each
token's end offset in its segment's text as uint32, a special-token flag per token as uint8).
When segments the front end holds come back after a change further up (truncation dropped an
old message, so everything after it moved), `runs` says which of them to keep and by how many
tokens they moved, so only the new segments travel. So the bytes per update follow the changed
segments, not the prompt. A new segment that takes the place of one the front end holds (an
edited message) travels as the change alone when its tokens at both ends are the same: `from`
names the old one, `head` and `tail` count the tokens kept, `chars` the characters they spell, and
the text and the tokens are those between. An image segment (kind `image`, a vision template's image
tokens) carries `image`: its entry in the result's `images()` (size, tokens, where it came from,
digest), so the page shows it as one block rather than hundreds of placeholder tokens; it always
travels whole. `labels` names, by index among a segment's tokens sent,
those that hold part of a character (an emoji split in two) as their bytes, `<0xF0><0x9F>` (the page
shows each run of them under the character they spell together).
Ends are in UTF-16 units (the page's strings count a character past U+FFFF as two). No UI library is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..difference import first_difference
from ..segments import Segment, originals
from .budget_view import DROPPED, STRUCK, SUMMARY

if TYPE_CHECKING:
    from ..assembly.result import AssemblyResult
    from ..tokenizers.base import Tokenizer
    from .budget_view import Overflow

SegmentKey = tuple[str, "str | None", "int | None", str, int]
ViewKey = tuple[SegmentKey, str]          # a segment and its flag ("", "summary", "dropped", "over")


@dataclass(frozen=True)
class Patch:
    keep: int                         # leading segments the front end keeps from its current state
    segments: list[dict[str, Any]]    # metadata of the segments after them, in order (a change alone:
                                      # "from", "head", "tail", "chars"; see the module's doc)
    header: dict[str, Any]            # totals, budget, dropped, diagnostics: small, always sent
    runs: list[dict[str, int]] | None = None   # the new list, in order: {"old": i, "count": n, "shift": d}
                                      # (keep old segments i..i+n-1, moved by d tokens) or {"new": n}
                                      # (the next n of `segments`); None: keep `keep`, then `segments`
    ids: bytes = b""                  # uint32 little-endian, the tokens of `segments`, concatenated
    ends: bytes = b""                 # uint32: each token's end (characters) in its segment's text
    special: bytes = b""              # uint8: 1 for a special (control) token
    buffers: list[bytes] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return len(self.ids) + len(self.ends) + len(self.special) + sum(len(s["text"]) for s in self.segments)

    def message(self) -> tuple[dict[str, Any], list[bytes]]:
        """The JSON part and the binary buffers, as a widget message carries them."""
        content = {"type": "patch", "keep": self.keep, "segments": self.segments, "header": self.header}
        if self.runs is not None:
            content["runs"] = self.runs
        return content, [self.ids, self.ends, self.special]


def _key(s: Segment) -> SegmentKey:
    # The ids too (as a hash): the same text can tokenize differently after a moved boundary.
    return (s.kind, s.role, s.seq, s.text, hash(np.asarray(s.token_ids).tobytes()))


FOLD_MIN_TOKENS = 2_000    # a run of dropped turns longer than this shows folded into one line...
FOLD_KEEP_TOKENS = 1_000   # ...but for its last segments, up to this many tokens (at least one)


def fold_dropped(segs: list[Segment], flags: list[str], policy: str) -> tuple[list[Segment], list[str]]:
    """Each long run of segments the truncation policy drops, as one line saying how many messages
    and tokens it holds, and the run's last segments struck through (what was dropped right before
    what the model sees). A long session's history would otherwise reach the browser whole: 249k
    tokens struck through above the 28.7k the model sees on the 1,000-message sample."""
    out_s: list[Segment] = []
    out_f: list[str] = []
    i = 0
    while i < len(segs):
        j = i
        while j < len(segs) and flags[j] == DROPPED:
            j += 1
        if j == i:
            out_s.append(segs[i])
            out_f.append(flags[i])
            i += 1
            continue
        k, shown = j - 1, segs[j - 1].token_count    # the last one always shows
        while k > i and shown + segs[k - 1].token_count <= FOLD_KEEP_TOKENS:
            k -= 1
            shown += segs[k].token_count
        folded = segs[i:k]
        if sum(s.token_count for s in folded) + shown > FOLD_MIN_TOKENS and folded:
            # It sits, holding no token, where the prompt shown goes on: after the last segment not
            # dropped (dropped ones have no place in the prompt sent).
            at = next((s.end for s, f in zip(reversed(out_s), reversed(out_f)) if f != DROPPED), 0)
            out_s.append(_fold_line(folded, policy, at))
            out_f.append("")
            out_s.extend(segs[k:j])
            out_f.extend(flags[k:j])
        else:
            out_s.extend(segs[i:j])
            out_f.extend(flags[i:j])
        i = j
    return out_s, out_f


def _fold_line(folded: list[Segment], policy: str, at: int) -> Segment:
    messages = len({s.seq for s in folded if s.seq is not None})
    tokens = sum(s.token_count for s in folded)
    first = folded[0]
    text = (f"⋯ {messages:,} earlier message(s), {tokens:,} tokens, dropped by the {policy} truncation policy, "
            f"not sent: folded here (the budget bar counts them) ⋯")
    return Segment("folded", None, None, text, np.zeros(0, np.uint32), at, at,
                   first.char_start, first.char_start, first.source)


class TokenViewModel:
    """Remembers what the front end holds; turns each new result into the patch that brings it there."""

    def __init__(self, tokenizer: "Tokenizer"):
        self.tokenizer = tokenizer
        self.sent: list[ViewKey] = []
        self._segs: list[Segment] = []        # the segments sent, as they were
        self._ends: dict[SegmentKey, np.ndarray] = {}
        # Each segment object's key, by identity (the object is held, so its id is not reused): an
        # incremental result shares its unchanged segments with the last, so a keystroke hashes only
        # the new ones' ids, not the whole prompt's.
        self._keys: dict[int, tuple[Segment, SegmentKey]] = {}
        self._specials = np.array(sorted(tokenizer.specials.values()), dtype=np.uint32)

    def reset(self) -> None:
        """Forget what was sent (a new front end attached): the next patch carries everything."""
        self.sent, self._segs = [], []

    def update(self, result: "AssemblyResult", overflow: "Overflow | None" = None) -> Patch:
        """The patch to `result`; with `overflow`, to the layout it makes instead (budget_view.py),
        each segment the model will not see flagged (`struck`: "dropped" or "over"; a dropped one is
        in no prompt sent, `sent: false`: its start and end give its token count, not a place), the
        summary slot's message `summary: true`."""
        segs = list(overflow.segments) if overflow is not None else originals(result.segments)
        flags = list(overflow.flags) if overflow is not None else [""] * len(segs)
        # The header counts the segments of the prompt sent, not of the layout that also shows what
        # truncation left out (222 of them, against 92 sent, once read as the prompt's).
        n_segments = len(segs) if overflow is None else len(originals(result.segments))
        if overflow is not None:
            segs, flags = fold_dropped(segs, flags, overflow.policy)
        flag_of = {id(s): f for s, f in zip(segs, flags) if f}
        keys = [(self._key_of(s), f) for s, f in zip(segs, flags)]
        keep = first_difference(self.sent, keys)
        runs, fresh = self._runs(keys, segs, keep)
        metas, ids, ends = [], [], []
        images: dict[int, dict[Any, dict[str, Any]]] = {}
        for s, old in zip(fresh, self._replaced(runs, keep, len(fresh))):
            meta: dict[str, Any] = {"kind": s.kind, "role": s.role, "seq": s.seq, "text": s.text, "start": s.start,
                                    "end": s.end, "source": s.source}
            flag = flag_of.get(id(s), "")
            if flag in STRUCK:
                meta["struck"] = flag
            if flag == DROPPED or s.kind == "folded":    # (a fold line stands for dropped ones)
                meta["sent"] = False
            elif flag == SUMMARY:
                meta["summary"] = True
            if s.kind == "image":
                # Its entry in the prompt it is in: a dropped one's in the whole prompt, others' in the
                # one shown. Indexed only when a new segment is an image: a keystroke elsewhere pays nothing.
                of = overflow.full if overflow is not None and flag == DROPPED else result
                if id(of) not in images:
                    images[id(of)] = image_index(of)
                meta["image"] = image_meta(s, images[id(of)])
                old = None            # shown as one block: never sent as a change of its tokens
            s_ids, s_ends = np.asarray(s.token_ids, dtype="<u4"), self._token_ends(s)
            change = self._change(self._segs[old], s, s_ids, s_ends) if old is not None else None
            if change is not None:
                extra, s_ids, s_ends = change
                meta.update(extra, **{"from": old})
            labels = self._byte_labels(s, s_ids, s_ends)
            if labels:
                meta["labels"] = labels
            metas.append(meta)
            ids.append(s_ids)
            ends.append(s_ends)
        all_ids = np.concatenate(ids) if ids else np.zeros(0, "<u4")
        head = header(result, n_segments)
        head["overflow"] = overflow.header() if overflow is not None else None
        patch = Patch(keep=keep, segments=metas, header=head, runs=runs,
                      ids=all_ids.tobytes(), ends=(np.concatenate(ends) if ends else np.zeros(0, "<u4")).tobytes(),
                      special=np.isin(all_ids, self._specials).astype(np.uint8).tobytes())
        self.sent, self._segs = keys, list(segs)
        # Only the segments just sent stay keyed (they are held in _segs anyway): no old versions kept.
        self._keys = {id(s): (s, k[0]) for s, k in zip(segs, keys)}
        return patch

    def _key_of(self, s: Segment) -> SegmentKey:
        got = self._keys.get(id(s))
        if got is not None and got[0] is s:
            return got[1]
        return _key(s)

    def _replaced(self, runs: list[dict[str, int]] | None, keep: int, n_fresh: int) -> list[int | None]:
        """For each segment to send, the old one whose place it takes: between two kept runs, as many
        new segments as old ones left out pair up in order; otherwise None."""
        if runs is None:
            runs = ([{"old": 0, "count": keep, "shift": 0}] if keep else []) + ([{"new": n_fresh}] if n_fresh else [])
        out: list[int | None] = []
        after = 0                             # the old segment after the last kept run
        for k, r in enumerate(runs):
            if "new" in r:
                until = next((x["old"] for x in runs[k + 1:] if "old" in x), len(self.sent))
                out += list(range(after, until)) if until - after == r["new"] else [None] * r["new"]
            else:
                after = r["old"] + r["count"]
        return out

    def _change(self, old: Segment, new: Segment, ids: np.ndarray, ends: np.ndarray
                ) -> tuple[dict[str, Any], np.ndarray, np.ndarray] | None:
        """`new` as the change from `old` (same message), or None to send it whole: the tokens kept at
        each end (same ids, same pieces), the characters they spell, and the text, ids and ends
        (from the text's start) between."""
        if (old.kind, old.role, old.seq) != (new.kind, new.role, new.seq):
            return None
        a_ids, a_ends = np.asarray(old.token_ids, dtype="<u4"), self._token_ends(old)
        na, nb = len(a_ids), len(ids)
        if not na or not nb or a_ends[-1] == 0 or ends[-1] == 0:
            return None                       # no boundaries to keep pieces by
        m = min(na, nb)
        same = (a_ids[:m] == ids[:m]) & (a_ends[:m] == ends[:m])
        head = m if same.all() else int(same.argmin())
        k = m - head
        a_len, b_len = np.diff(a_ends, prepend=np.uint32(0)), np.diff(ends, prepend=np.uint32(0))
        back = (a_ids[na - k:][::-1] == ids[nb - k:][::-1]) & (a_len[na - k:][::-1] == b_len[nb - k:][::-1])
        tail = k if back.all() else int(back.argmin())
        if head + tail == 0:
            return None
        start = int(ends[head - 1]) if head else 0
        stop, a_stop = (int(e[n - tail - 1]) if n - tail else 0 for e, n in ((ends, nb), (a_ends, na)))
        a16, b16 = old.text.encode("utf-16-le", "surrogatepass"), new.text.encode("utf-16-le", "surrogatepass")
        if a16[:2 * start] != b16[:2 * start] or a16[2 * a_stop:] != b16[2 * stop:]:
            return None                       # the kept tokens do not spell the same text: send it whole
        extra = {"head": head, "tail": tail, "chars": [start, len(a16) // 2 - a_stop],
                 "text": b16[2 * start:2 * stop].decode("utf-16-le", "surrogatepass")}
        return extra, ids[head:nb - tail], ends[head:nb - tail] - np.uint32(start)

    def _runs(self, keys: list[ViewKey], segs: list[Segment], keep: int
              ) -> tuple[list[dict[str, int]] | None, list[Segment]]:
        """Old segments to keep past the common prefix, in order, and the segments to send."""
        old_at = {k: i for i, k in enumerate(self.sent)}
        runs: list[dict[str, int]] = [{"old": 0, "count": keep, "shift": 0}] if keep else []
        fresh: list[Segment] = []
        last = keep - 1                       # old segments are kept in their order
        for j in range(keep, len(keys)):
            i = old_at.get(keys[j], -1)
            if i > last:
                shift = segs[j].start - self._segs[i].start
                r = runs[-1] if runs else None
                if r is not None and "old" in r and r["old"] + r["count"] == i and r["shift"] == shift:
                    r["count"] += 1
                else:
                    runs.append({"old": i, "count": 1, "shift": shift})
                last = i
            else:
                fresh.append(segs[j])
                if runs and "new" in runs[-1]:
                    runs[-1]["new"] += 1
                else:
                    runs.append({"new": 1})
        if len(fresh) == len(segs) - keep:    # nothing kept past the prefix: the simple form
            return None, fresh
        return runs, fresh

    def _byte_labels(self, s: Segment, ids: np.ndarray, ends: np.ndarray) -> dict[str, str]:
        """`<0xF0>`-style labels of the tokens (by index among `ids`) that hold part of a character:
        each one that ends inside a character (an empty piece) and the one after it, which completes
        it. The page shows those instead of an empty span and a whole character."""
        if s.text.isascii() or not len(ends) or not ends[-1]:
            return {}
        empty = np.flatnonzero(np.diff(ends, prepend=np.uint32(0)) == 0)
        at = sorted({int(i) for i in empty} | {int(i) + 1 for i in empty if i + 1 < len(ids)})
        return {str(i): label for i, label in zip(at, self.tokenizer.token_strings(ids[at]))}

    def _token_ends(self, s: Segment) -> np.ndarray:
        """Character offset where each token of the segment ends. A token that ends inside a
        character (an emoji split in two) ends where the previous one did: an empty piece, and the
        token completing the character shows it. All zeros when the tokens do not spell the text
        byte for byte (normalization): the view then shows the text without token boundaries."""
        key = _key(s)
        got = self._ends.get(key)
        if got is None:
            ends = self.tokenizer.char_ends(s.text, s.token_ids) if s.token_count else np.zeros(0, np.int64)
            if ends is None:
                got = np.zeros(s.token_count, "<u4")
            else:
                # A token ending inside a character ends where the one before it did (ends only grow).
                got = np.maximum.accumulate(np.maximum(ends, 0)).astype("<u4") if len(ends) else ends.astype("<u4")
                if not s.text.isascii():      # the page counts UTF-16 units: a character past U+FFFF is two
                    wide = np.frombuffer(s.text.encode("utf-32-le"), dtype="<u4") > 0xFFFF
                    got = got + np.concatenate(([0], np.cumsum(wide))).astype("<u4")[got]
            if len(self._ends) > 50_000:  # a bounded memo: long sessions edit, they do not grow forever
                self._ends.clear()
            self._ends[key] = got
        return got


class PatchFeed:
    """What both hosts' token views do: keep the view model, send patches, resend all on "sync".
    A host supplies `_deliver(patch)`, its way to carry a patch to the front end."""

    _feed_model: "TokenViewModel | None" = None
    _feed_result: "AssemblyResult | None" = None
    _feed_overflow: "Overflow | None" = None

    def _feed(self, result: "AssemblyResult", tokenizer: "Tokenizer", overflow: "Overflow | None" = None) -> Patch:
        self._feed_model = model_for(self._feed_model, tokenizer)
        patch = self._feed_model.update(result, overflow)
        self._feed_result, self._feed_overflow = result, overflow
        self._deliver(patch)
        self.patches_sent.append(patch.nbytes)
        return patch

    def _resync(self) -> None:
        """A newly rendered front end holds nothing: send it everything."""
        if self._feed_result is not None and self._feed_model is not None:
            self._feed_model.reset()
            patch = self._feed_model.update(self._feed_result, self._feed_overflow)
            self._deliver(patch)
            self.patches_sent.append(patch.nbytes)

    def _deliver(self, patch: Patch) -> None:
        raise NotImplementedError

    patches_sent: list[int]


def image_index(result: "AssemblyResult") -> dict[Any, dict[str, Any]]:
    """The result's images (`AssemblyResult.images()`), by (start, digest) and by digest alone."""
    out: dict[Any, dict[str, Any]] = {}
    for img in result.images():
        out[(img["start"], img["digest"])] = img
        out.setdefault(img["digest"], img)
    return out


def image_meta(seg: Segment, images: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """What the token view says about an image segment, from the result's own `images()` entry: its
    size, its tokens (this segment's), where the part came from, its digest, and how it was counted."""
    found = images.get((seg.start, seg.media)) or images.get(seg.media) or {}
    return {"width": found.get("width"), "height": found.get("height"), "tokens": seg.token_count,
            "where": found.get("where"), "digest": seg.media, "size_assumed": bool(found.get("size_assumed")),
            "detail": found.get("detail"), "rule": found.get("rule")}


def model_for(model: "TokenViewModel | None", tokenizer: "Tokenizer") -> "TokenViewModel":
    """The view model to patch with: a new one when the vocabulary changed (the next patch then
    replaces everything the front end holds)."""
    if model is None or model.tokenizer.version != tokenizer.version:
        return TokenViewModel(tokenizer)
    return model


def header(result: "AssemblyResult", n_segments: int) -> dict[str, Any]:
    b = result.budget
    return {
        "template": result.template["name"], "tokenizer": result.tokenizer["name"],
        "total_tokens": result.total_tokens, "segments": n_segments, "reused_segments": result.reused_segments,
        "cache_key": result.cache_key_short,
        "budget": {"context_window": b.context_window, "reserve": b.reserve, "input_budget": b.input_budget,
                   "used": b.used, "free": b.free, "breakdown": b.breakdown()},
        "dropped": [d.seq for d in result.dropped],
        "diagnostics": [d.to_json() for d in result.diagnostics],
        "timings_ms": {k: round(v, 3) for k, v in result.timings_ms.items()},
    }


def page_header(h: dict[str, Any]) -> dict[str, Any]:
    """The parts of a header the token view's page reads (its header line, its inline warnings): what
    a patch carries to it, so that a keystroke's carries no timings and no list of dropped messages."""
    b = h["budget"]
    return {**{k: h[k] for k in ("template", "tokenizer", "total_tokens", "segments", "reused_segments", "cache_key")},
            "budget": {"used": b["used"], "input_budget": b["input_budget"]},
            "diagnostics": [d for d in h["diagnostics"] if d.get("seq") is not None and d.get("level") != "info"],
            "overflow": (h.get("overflow") or {}).get("note") or None}
