"""The token view's patches (issue 5, first slice): what travels to the front end follows the change."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workbench import Assembler
from workbench.segments import originals
from workbench.sessions import load_session
from workbench.ui import TokenViewModel

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"


def unpack(patch):  # type: ignore[no-untyped-def]
    ids = np.frombuffer(patch.ids, dtype="<u4")
    ends = np.frombuffer(patch.ends, dtype="<u4")
    special = np.frombuffer(patch.special, dtype=np.uint8)
    return ids, ends, special


def test_first_patch_carries_everything_and_decodes() -> None:
    asm = Assembler(template="qwen2.5", cache=None)
    r = asm.assemble(load_session(SESSIONS / "tool_agent.json").turn(None))
    vm = TokenViewModel(asm.tokenizer)
    p = vm.update(r)
    ids, ends, special = unpack(p)
    assert p.keep == 0 and len(p.segments) == len(r.segments)
    assert np.array_equal(ids, r.token_ids) and len(ends) == len(special) == r.total_tokens
    specials = set(asm.tokenizer.specials.values())
    assert [bool(x) for x in special] == [int(t) in specials for t in r.token_ids]
    # each segment's tokens spell its text, piece by piece, at the sent ends
    off = 0
    for seg in p.segments:
        n = seg["end"] - seg["start"]
        e = ends[off:off + n]
        if n and not e.any():  # no boundaries (normalized text): shown whole
            off += n
            continue
        pieces = [seg["text"][a:b] for a, b in zip([0, *e[:-1]], e)]
        assert "".join(pieces) == seg["text"] and all(b >= a for a, b in zip([0, *e[:-1]], e))
        off += n
    assert p.header["total_tokens"] == r.total_tokens and p.header["budget"]["used"] == r.budget.used


def test_update_sends_only_what_changed() -> None:
    req = load_session(SESSIONS / "support_chat.json").turn(None)
    asm = Assembler(template="qwen2.5", cache=None)
    s = asm.session()
    vm = TokenViewModel(asm.tokenizer)
    full = vm.update(s.assemble(req))
    msgs = req["messages"]
    edited = {**req, "messages": msgs[:-1] + [{**msgs[-1], "content": msgs[-1]["content"] + " Thanks!"}]}
    r = s.assemble(edited)
    p = vm.update(r)
    ids, _, _ = unpack(p)
    n = len(r.segments)
    # The edited message travels; the generation prompt after it is kept, moved by 2 tokens.
    assert p.keep == n - 2 and len(p.segments) == 1
    assert p.runs == [{"old": 0, "count": n - 2, "shift": 0}, {"new": 1}, {"old": n - 1, "count": 1, "shift": 2}]
    # As the change alone: the message's tokens before the edit are kept, the new ones travel.
    seg, edited_ids = p.segments[0], r.segments[n - 2].token_ids
    assert seg["from"] == n - 2 and seg["head"] > 0 and len(ids) < 6 and "Thanks!" in seg["text"]
    assert np.array_equal(ids, edited_ids[seg["head"]:len(edited_ids) - seg["tail"]])
    assert p.nbytes * 20 < full.nbytes  # bytes follow the change, not the prompt
    vm.reset()
    assert vm.update(r).keep == 0


def test_switching_template_resends_the_changed_segments() -> None:
    req = load_session(SESSIONS / "coding_corrections.json").turn(None)
    a, b = Assembler(template="qwen2.5", cache=None), Assembler(template="llama3", cache=None)
    vm = TokenViewModel(a.tokenizer)
    vm.update(a.assemble(req))
    p = vm.update(b.assemble(req))
    assert p.keep == 0 and p.header["template"] == "llama3"


def u16(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def spelled(seg: dict) -> bool:
    """The segment's tokens spell its text, piece by piece at its ends (UTF-16 units, as the page slices)."""
    t, e = u16(seg["text"]), seg["ends"]
    return not e or not e[-1] or b"".join(t[2 * a:2 * b] for a, b in zip([0, *e[:-1]], e)) == t


def apply(front: list[dict], patch) -> list[dict]:  # type: ignore[no-untyped-def]
    """What the front end does with a patch (widgets/token_view.js), on plain dicts."""
    ids, ends, _ = unpack(patch)
    new, off = [], 0
    for seg in patch.segments:
        n = seg["end"] - seg["start"] - seg.get("head", 0) - seg.get("tail", 0)
        got_ids, got_ends = ids[off:off + n].tolist(), ends[off:off + n].tolist()
        off += n
        if "from" in seg:     # the change alone, in place of a segment held
            old, (a, b), h, tail = front[seg["from"]], seg["chars"], seg["head"], seg["tail"]
            t = u16(old["text"])
            text = (t[:2 * a] + u16(seg["text"]) + t[len(t) - 2 * b:]).decode("utf-16-le", "surrogatepass")
            moved = (len(u16(text)) - len(t)) // 2
            k = len(old["ids"]) - tail
            seg = {**{x: v for x, v in seg.items() if x not in ("from", "head", "tail", "chars")}, "text": text,
                   "ids": old["ids"][:h] + got_ids + old["ids"][k:],
                   "ends": old["ends"][:h] + [e + a for e in got_ends] + [e + moved for e in old["ends"][k:]]}
        else:
            seg = {**seg, "ids": got_ids, "ends": got_ends}
        assert spelled(seg), seg["text"]
        new.append(seg)
    if patch.runs is None:
        return front[:patch.keep] + new
    out, k = [], 0
    for run in patch.runs:
        if "old" in run:
            for seg in front[run["old"]:run["old"] + run["count"]]:
                out.append({**seg, "start": seg["start"] + run["shift"], "end": seg["end"] + run["shift"]})
        else:
            out.extend(new[k:k + run["new"]])
            k += run["new"]
    return out


def test_patches_rebuild_the_prompt_through_truncation_shifts() -> None:
    # A window that drops old turns as the last message grows: everything after the drop moves up.
    req = load_session(SESSIONS / "support_chat.json").turn(None)
    asm = Assembler(template="qwen2.5", context_window=3000, reserve=500, cache=None)
    s = asm.session()
    vm = TokenViewModel(asm.tokenizer)
    front: list[dict] = []
    msgs = req["messages"]
    sizes = []
    for extra in ["", " more" * 20, " more" * 60, " x", " more" * 140]:
        r = s.assemble({**req, "messages": msgs[:-1] + [{**msgs[-1], "content": msgs[-1]["content"] + extra}]})
        p = vm.update(r)
        front = apply(front, p)
        sizes.append((p.nbytes, len(r.dropped), p.runs is not None))
        assert [(f["kind"], f["seq"], f["text"], f["start"], f["end"]) for f in front] == \
            [(x.kind, x.seq, x.text, x.start, x.end) for x in r.segments]
        assert np.array_equal(np.concatenate([np.asarray(f["ids"], np.uint32) for f in front]), r.token_ids)
    # Some update dropped more messages than the one before, and its patch kept the moved segments.
    grew = [i for i in range(1, len(sizes)) if sizes[i][1] > sizes[i - 1][1]]
    assert grew and all(sizes[i][2] and sizes[i][0] * 5 < sizes[0][0] for i in grew), sizes


def test_a_change_alone_rebuilds_what_a_whole_view_shows_emoji_included() -> None:
    # Edits at the start, middle and end of a message with characters past U+FFFF (two UTF-16
    # units each, as the page counts): each patch sends the change alone, and what the front end
    # rebuilds from it (text, ids, ends) is what a new view is sent whole.
    asm = Assembler(template="qwen2.5", cache=None)
    s = asm.session()
    vm, fresh = TokenViewModel(asm.tokenizer), TokenViewModel(asm.tokenizer)
    front: list[dict] = []
    plan = "plan: 😀 grind 🫘🫘 beans, then brew ☕ slowly"
    texts = ["Plan: 😀 grind 🫘 beans, then brew ☕ slowly.", f"P{plan[1:]}.", f"New {plan}.", f"New {plan}! 🎉",
             f"New {plan}! x"]
    for i, text in enumerate(texts):
        r = s.assemble({"messages": [{"role": "user", "content": "Hi 👋"}, {"role": "assistant", "content": "Hello."},
                                     {"role": "user", "content": text}]})
        p = vm.update(r)
        front = apply(front, p)
        if i:
            assert [seg.get("from") for seg in p.segments] == [3], p.segments   # the last message, in place
        whole = apply([], fresh.update(r))
        fresh.reset()
        assert [(f["text"], f["ids"], f["ends"]) for f in front] == [(f["text"], f["ids"], f["ends"]) for f in whole]
        assert whole[3]["ends"][-1] == len(u16(whole[3]["text"])) // 2     # ends count UTF-16 units


def label_bytes(label: str) -> bytes:
    """The bytes a `<0xF0>`-style label stands for (its text as UTF-8, each `<0xNN>` as that byte)."""
    import re
    return b"".join(bytes([int(m[1], 16)]) if m[1] else m[2].encode() for m in re.finditer(r"<0x([0-9A-F]{2})>|(.)",
                                                                                           label, re.S))


def test_tokens_that_split_a_character_are_labelled_with_their_bytes() -> None:
    # Byte-level BPE splits a rare emoji across tokens: each piece is half a character, which the page
    # would show as an empty span and a whole emoji. The patch labels them with their own bytes.
    asm = Assembler(template="qwen2.5", cache=None)
    r = asm.assemble({"messages": [{"role": "user", "content": "beans 🫘 and ascii"}]})
    p = TokenViewModel(asm.tokenizer).update(r)
    ids, _ends, _special = unpack(p)
    off, found = 0, []
    for seg in p.segments:
        n = seg["end"] - seg["start"]
        for i, label in seg.get("labels", {}).items():
            tid = int(ids[off + int(i)])
            assert label_bytes(label) == asm.tokenizer.token_bytes(tid)     # exactly its bytes
            found.append(label)
        off += n
    assert any("<0xF0>" in label for label in found), found
    # together the labelled tokens spell the emoji, and only they are labelled (ASCII tokens never)
    assert b"".join(label_bytes(x) for x in found).strip() == "🫘".encode()
    ascii_only = TokenViewModel(asm.tokenizer).update(asm.assemble({"messages": [{"role": "user", "content": "hi"}]}))
    assert not any("labels" in s for s in ascii_only.segments)


def test_a_long_run_of_dropped_turns_is_folded_to_one_line_and_the_kept_prompt_is_sent_exactly() -> None:
    from workbench.ui.state import WorkbenchState
    from workbench.ui.viewmodel import FOLD_KEEP_TOKENS, FOLD_MIN_TOKENS
    s = WorkbenchState(str(SESSIONS / "bench_1000.json"), autosave=None, restore=False)
    r = s.assemble()
    ov = s.overflow
    assert ov is not None and r.dropped                       # the default window truncates this session
    p = TokenViewModel(s.assembler().tokenizer).update(r, ov)
    folds = [g for g in p.segments if g["kind"] == "folded"]
    assert len(folds) == 1 and folds[0]["start"] == folds[0]["end"] and p.segments[0]["kind"] == "system"
    i = p.segments.index(folds[0])
    struck = [g for g in p.segments[i + 1:] if g.get("struck") == "dropped"]
    shown = sum(g["end"] - g["start"] for g in struck)
    assert struck and (shown <= FOLD_KEEP_TOKENS or len(struck) == 1)
    dropped_tokens = sum(seg.token_count for seg, f in zip(ov.segments, ov.flags) if f == "dropped")
    assert dropped_tokens > FOLD_MIN_TOKENS
    assert f"{dropped_tokens - shown:,} tokens" in folds[0]["text"]
    # What the model sees goes whole and exact: the unstruck segments' ids are the kept prompt's.
    ids, _, _ = unpack(p)
    off, kept = 0, []
    for g in p.segments:
        n = g["end"] - g["start"]
        if g.get("struck") is None and g["kind"] != "folded":
            kept.append(ids[off:off + n])
        off += n
    assert off == len(ids) and np.array_equal(np.concatenate(kept), r.token_ids)
    assert p.header["segments"] == len(originals(r.segments))   # the header counts the segments sent
    assert p.nbytes < 1_000_000                                # not the whole 249k-token history


def test_a_short_run_of_dropped_turns_is_not_folded() -> None:
    from workbench.ui.viewmodel import fold_dropped
    tok_ids = np.arange(5, dtype=np.uint32)
    from workbench.segments import Segment
    segs = [Segment("message", "user", k, "hello", tok_ids, 5 * k, 5 * k + 5, 5 * k, 5 * k + 5) for k in range(6)]
    flags = ["dropped"] * 4 + ["", ""]
    out, out_flags = fold_dropped(segs, flags, "sliding")
    assert out == segs and out_flags == flags
