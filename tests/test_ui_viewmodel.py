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
    assert p.keep >= len(r.segments) - 3 and len(p.segments) == len(r.segments) - p.keep
    assert np.array_equal(ids, r.token_ids[r.segments[p.keep].start:])
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
