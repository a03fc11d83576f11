"""The token view's patches (issue 5, first slice): what travels to the front end follows the change."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workbench import Assembler
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
    assert np.array_equal(ids, r.segments[n - 2].token_ids)
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


def apply(front: list[dict], patch) -> list[dict]:  # type: ignore[no-untyped-def]
    """What the front end does with a patch (widgets/token_view.js), on plain dicts."""
    ids, _, _ = unpack(patch)
    new, off = [], 0
    for seg in patch.segments:
        n = seg["end"] - seg["start"]
        new.append({**seg, "ids": ids[off:off + n].tolist()})
        off += n
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
