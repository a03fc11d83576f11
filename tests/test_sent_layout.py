"""The token view shows the prompt sent (issue 33): when truncation drops messages, the layout is the
kept result's own segments, with their own offsets (the summary slot's message included, marked as
the policy's), and the dropped messages struck through at their place, with no offsets (they are in
no prompt that is sent). Checked on every shipped sample session under every truncation policy with
windows small enough to truncate, against `workbench render --json` (the CLI's segments, the summary
at seq -1); a property over generated conversations; and the page itself in Chromium: the labels,
and a character split over byte tokens shown above its bytes.

The invariant: the segments not dropped, in view order, tile 0..len(result.token_ids) and their ids
are the result's exactly; the unstruck ones sum to the header's total (all of it when it fits; when
it does not, up to the input budget, the rest struck "over").
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.assembly.truncate import SLOT_SEQ
from workbench.cli.main import main
from workbench.segments import originals
from workbench.ui.budget_view import DROPPED, OVER, POLICIES, SUMMARY
from workbench.ui.document import SessionDocument
from workbench.ui.state import WorkbenchState, sample_sessions
from workbench.ui.viewmodel import FOLD_MIN_TOKENS, Patch, TokenViewModel

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sample_sessions()
WINDOWS = (4096, 1024)


def walk(patch: Patch) -> list[tuple[dict[str, Any], np.ndarray]]:
    """Each segment of a whole patch with its token ids, in view order."""
    ids = np.frombuffer(patch.ids, "<u4")
    out, off = [], 0
    for meta in patch.segments:
        n = meta["end"] - meta["start"]
        out.append((meta, ids[off:off + n]))
        off += n
    assert off == len(ids)
    return out


def check_view(patch: Patch, result: Any, overflow: Any) -> dict[str, int]:
    """The invariant on what the page gets; returns the token counts it found."""
    segs = walk(patch)
    on_page = [(m, i) for m, i in segs if m.get("sent") is not False]
    at = 0
    for meta, _ in on_page:
        assert meta["start"] == at, (meta["kind"], meta["seq"], meta["start"], at)   # offsets tile the prompt
        at = meta["end"]
    assert at == len(result.token_ids) == result.total_tokens
    assert np.array_equal(np.concatenate([i for _, i in on_page]), result.token_ids)
    unstruck = sum(len(i) for m, i in segs if "struck" not in m)
    over = sum(len(i) for m, i in segs if m.get("struck") == OVER)
    dropped = [m for m, _ in segs if m.get("struck") == DROPPED]
    assert all(m["sent"] is False for m in dropped)                           # no offsets in the prompt sent
    assert not [m for m, _ in segs if m.get("sent") is False and m.get("struck") != DROPPED and m["kind"] != "folded"]
    b = result.budget
    if over:
        # (The segment the budget falls in is cut at the last token boundary before it that falls
        # between characters: at most the input budget stays unstruck.)
        assert unstruck <= b.input_budget and unstruck + over == b.used
    else:
        assert unstruck == patch.header["total_tokens"] == b.used
    summaries = [m for m, _ in segs if m.get("summary")]
    assert all(m["seq"] == SLOT_SEQ and "struck" not in m for m in summaries)
    # The header counts the segments of the prompt sent, not those of the layout (struck ones included).
    assert patch.header["segments"] == len(originals(result.segments))
    return {"unstruck": unstruck, "over": over, "dropped": len(dropped), "summaries": len(summaries)}


def merged(segs: list[tuple[dict[str, Any], np.ndarray]]) -> list[tuple]:
    """The segments on the page as the CLI has them: a segment the input budget splits (its head
    unstruck, its tail "over") as one."""
    out: list[list] = []
    for m, ids in segs:
        if m.get("sent") is False:
            continue
        row = [m["kind"], m["role"], m["seq"], m["start"], m["end"], m["text"], ids.tolist()]
        last = out[-1] if out else None
        if (m.get("struck") == OVER and last is not None and last[:3] == row[:3] and last[4] == row[3]
                and last[7] != OVER):
            last[4], last[5], last[6], last[7] = row[4], last[5] + row[5], last[6] + row[6], OVER
            continue
        out.append(row + [m.get("struck", "")])
    return [tuple(r[:7]) for r in out]


def cli(capsys: pytest.CaptureFixture[str], path: str, window: int, policy: str) -> tuple[int, Any]:
    args = ["render", path, "--json", "--context-window", str(window)]
    args += ["--no-truncate"] if policy == "none" else ["--truncation", policy]
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else err)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_sample_under_every_policy_shows_the_prompt_sent_as_the_cli_renders_it(
        capsys: pytest.CaptureFixture[str], name: str) -> None:
    s = WorkbenchState(SAMPLES[name], autosave=None, restore=False)
    seen: dict[str, int] = {"checked": 0, "truncated": 0, "summaries": 0, "over": 0, "refused": 0}
    for window in WINDOWS:
        for policy in POLICIES:
            s.set_budget(context_window=str(window), policy=policy)
            r = s.assemble()
            ov = s.overflow
            patch = TokenViewModel(s.assembler().tokenizer).update(r, ov)
            rc, want = cli(capsys, SAMPLES[name], window, policy)
            where = f"{name} window {window} {policy}"
            if ov is not None and ov.refused:
                # The policy cannot fit it: the CLI refuses; the page shows the whole prompt, what the
                # policy may drop struck, and past the budget struck "over" (as before issue 33).
                assert rc == 2 and "over the input budget" in want, where
                assert ov.full is r and ov.over > 0 and ov.dropped_seqs, where
                assert np.array_equal(np.concatenate([np.asarray(g.token_ids) for g in ov.segments]), r.token_ids)
                seen["refused"] += 1
                seen["checked"] += 1
                continue
            assert rc == 0, (where, want)
            got = check_view(patch, r, ov)
            assert np.array_equal(np.asarray(want["token_ids"], np.uint32), r.token_ids), where
            assert want["template"]["name"] == r.template["name"] and want["total_tokens"] == r.total_tokens
            cli_segs = [(g["kind"], g["role"], g["seq"], g["start"], g["end"], g["text"], g["token_ids"])
                        for g in want["segments"]]
            assert merged(walk(patch)) == cli_segs, where                     # the CLI's segments, offsets and all
            assert {d["seq"] for d in want["dropped"]} == {d.seq for d in r.dropped}, where
            assert got["dropped"] <= len(r.dropped) and (got["dropped"] > 0) == bool(r.dropped), where
            slot = [g for g in want["segments"] if g["seq"] == SLOT_SEQ]
            assert len(slot) == got["summaries"] == (1 if policy == "summary-slot" and r.dropped else 0), where
            if slot:
                (m,) = [m for m, _ in walk(patch) if m.get("summary")]
                assert (m["start"], m["end"], m["text"]) == (slot[0]["start"], slot[0]["end"], slot[0]["text"])
                assert m["text"].count("earlier messages were left out")
            seen["truncated"] += bool(r.dropped)
            seen["summaries"] += got["summaries"]
            seen["over"] += bool(got["over"])
            seen["checked"] += 1
    print(name, seen)
    assert seen["checked"] == len(WINDOWS) * len(POLICIES)        # every window and policy reached a check


def test_the_samples_reach_every_kind_of_layout() -> None:
    """The loop above is not vacuous: with these windows the samples truncate under every policy,
    insert a summary, overflow with no policy, and are refused where the policy cannot fit."""
    kinds: set[str] = set()
    for name in ("support_chat.json", "rag_long.json", "tool_agent.json"):
        s = WorkbenchState(SAMPLES[name], autosave=None, restore=False)
        for policy in POLICIES:
            s.set_budget(context_window="1024", policy=policy)
            r = s.assemble()
            ov = s.overflow
            if ov is None:
                continue
            kinds |= {f or "sent" for f in ov.flags} | ({"refused"} if ov.refused else set())
            kinds |= {"truncated"} if r.dropped else set()
    print(sorted(kinds))
    assert kinds >= {"sent", SUMMARY, DROPPED, OVER, "refused", "truncated"}


def test_support_chat_summary_slot_as_reported() -> None:
    """The report's numbers: support_chat, window 4096, summary-slot. The header's total is the sum
    of the segments not struck through, the 20-token summary among them, each at its offset in the
    prompt sent (the first kept message right after the summary, not at its place in the whole)."""
    s = WorkbenchState(SAMPLES["support_chat.json"], autosave=None, restore=False)
    s.set_budget(context_window="4096", policy="summary-slot")
    r = s.assemble()
    patch = TokenViewModel(s.assembler().tokenizer).update(r, s.overflow)
    segs = walk(patch)
    unstruck = [m for m, _ in segs if "struck" not in m and m["kind"] != "folded"]
    assert sum(m["end"] - m["start"] for m in unstruck) == patch.header["total_tokens"] == r.total_tokens
    (i,) = [k for k, m in enumerate(unstruck) if m.get("summary")]
    slot = unstruck[i]
    assert slot["seq"] == -1 and slot["end"] - slot["start"] == 20
    assert slot["text"] == ("<|im_start|>system\n[156 earlier messages were left out to fit the context window.]"
                            "<|im_end|>\n")
    assert unstruck[i + 1]["start"] == slot["end"] and unstruck[i + 1]["seq"] == 157
    assert "a summary message of 20 tokens" in patch.header["overflow"]["note"]


def test_a_dropped_image_is_struck_with_its_message(capsys: pytest.CaptureFixture[str]) -> None:
    """A vision template's image segment belongs to its message: dropped with it, struck, one block
    said to be not sent, its entry (size, where) from the whole prompt; the page's prompt is the CLI's."""
    s = WorkbenchState(SAMPLES["screenshot_support.json"], autosave=None, template="qwen2.5-vl", restore=False)
    s.set_budget(context_window="600", policy="sliding")
    r = s.assemble()
    ov = s.overflow
    assert ov is not None and 1 in ov.dropped_seqs
    patch = TokenViewModel(s.assembler().tokenizer).update(r, ov)
    check_view(patch, r, ov)
    (img,) = [m for m in patch.segments if m["kind"] == "image"]
    assert (img["struck"], img["sent"], img["seq"]) == (DROPPED, False, 1)
    assert (img["image"]["width"], img["image"]["height"], img["image"]["tokens"]) == (640, 400, 322)
    assert img["image"]["where"] == "messages[1].content[1].image_url"
    assert main(["render", SAMPLES["screenshot_support.json"], "--template", "qwen2.5-vl", "--json",
                 "--context-window", "600"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert merged(walk(patch)) == [(g["kind"], g["role"], g["seq"], g["start"], g["end"], g["text"], g["token_ids"])
                                   for g in want["segments"]]
    assert not want["images"]                                  # the prompt sent holds no image


def test_a_long_dropped_run_still_folds_and_the_fold_line_sits_in_the_prompt_sent() -> None:
    s = WorkbenchState(SAMPLES["bench_1000.json"], autosave=None, restore=False)
    for policy in ("sliding", "summary-slot"):
        s.set_budget(context_window="", policy=policy)
        r = s.assemble()
        ov = s.overflow
        assert ov is not None and ov.dropped_tokens > FOLD_MIN_TOKENS
        patch = TokenViewModel(s.assembler().tokenizer).update(r, ov)
        segs = walk(patch)
        check_view(patch, r, ov)
        (k,) = [k for k, (m, _) in enumerate(segs) if m["kind"] == "folded"]
        fold = segs[k][0]
        # No offsets of the whole prompt in its line; it holds no token, at its place in the prompt sent.
        assert "[" not in fold["text"] and fold["start"] == fold["end"] == segs[k - 1][0]["end"]
        assert f"dropped by the {policy} truncation policy, not sent" in fold["text"]
        shown = sum(len(i) for m, i in segs[k + 1:] if m.get("struck") == DROPPED)
        assert f"{ov.dropped_tokens - shown:,} tokens" in fold["text"]
        assert segs[k + 1][0].get("struck") == DROPPED


# --------------------------------------------------------------------------- a property
REACHED = dict.fromkeys((*POLICIES, "a summary segment"), 0)
WORDS = st.sampled_from(["coffee", "beans", "grinder", "refund", "☕", "🫘", "order BL-48213", "\n", "über"])


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(st.lists(WORDS, min_size=8, max_size=60), min_size=6, max_size=30),
       system=st.booleans(), window=st.integers(150, 360),
       template=st.sampled_from(["qwen2.5", "chatml", "llama3", "mistral-v3", "phi4"]))
def test_the_layout_is_the_prompt_sent_with_the_dropped_at_their_place(
        policy: str, turns: list[list[str]], system: bool, window: int, template: str) -> None:
    msgs = [{"role": "system", "content": "You are Maya, a support agent."}] if system else []
    msgs += [{"role": "user" if k % 2 == 0 else "assistant", "content": " ".join(w)} for k, w in enumerate(turns)]
    if msgs[-1]["role"] != "user":
        msgs.append({"role": "user", "content": "and?"})
    doc = SessionDocument({"format": "openai", "context_window": window, "max_tokens": 64, "messages": msgs})
    s = WorkbenchState(doc, autosave=None, template=template, restore=False)
    s.set_budget(policy=policy)
    r = s.assemble()
    ov = s.overflow
    if ov is None or ov.refused:
        return
    check_view(TokenViewModel(s.assembler().tokenizer).update(r, ov), r, ov)
    # In view order the messages come in the request's order, each dropped one before every later
    # message kept and before the summary that stands for it.
    order = [g.seq for g in ov.segments if g.seq is not None and g.seq != SLOT_SEQ]
    assert order == sorted(order)
    assert ov.dropped_seqs == {d.seq for d in r.dropped}
    # The summary slot's message is marked where the template renders it as a segment of its own
    # (mistral-v3 folds it into the last user message, as it does a system message).
    slot = [g for g in r.segments if g.seq == SLOT_SEQ]
    assert ov.summary_tokens == sum(g.token_count for g in slot) and (not slot or policy == "summary-slot")
    if slot:
        at = ov.flags.index(SUMMARY)
        assert ov.flags.count(SUMMARY) == 1 and DROPPED not in ov.flags[at:]
        REACHED["a summary segment"] += 1
    REACHED[policy] += 1


def test_the_layout_property_reached_its_check() -> None:
    print(f"layouts checked, by policy: {REACHED}")
    # Each policy runs 40 examples; a summary segment needs summary-slot, a fit, and a template that
    # renders the slot as a message of its own.
    assert all(REACHED[p] >= 15 for p in POLICIES) and REACHED["a summary segment"] >= 8, REACHED


# --------------------------------------------------------------------------- the page
def in_page(browser: Any, harness: str, **args: Any) -> Any:  # the token view's module in a blank page
    page = browser.new_page(viewport={"width": 1000, "height": 700})
    try:
        page.goto("about:blank")
        page.add_style_tag(content=(ROOT / "widgets" / "token_view.css").read_text("utf-8"))
        src = base64.b64encode((ROOT / "widgets" / "token_view.js").read_bytes()).decode()
        return page.evaluate(harness, {"src": src, **args})
    finally:
        page.close()


# A stand-in anywidget model; the patch applied as the notebook host delivers it.
HARNESS = """
async ({src, msg, bufs, run}) => {
  const mod = await import("data:text/javascript;base64," + src);
  const handlers = {};
  const attrs = {error: "", version: 1, header: {}};
  const model = {get: (k) => attrs[k], set: (k, v) => { attrs[k] = v; }, on: (ev, cb) => { handlers[ev] = cb; },
                 save_changes: () => {}, send: () => {}};
  const el = document.createElement("div");
  document.body.appendChild(el);
  mod.default.render({model, el});
  handlers["msg:custom"](msg, bufs.map((b) => new DataView(new Uint8Array(b).buffer)));
  return (new Function("el", run))(el);
}
"""


def page_of(patch: Patch) -> dict[str, Any]:
    content, buffers = patch.message()
    return {"msg": json.loads(json.dumps(content)), "bufs": [list(b) for b in buffers]}


LABELS = """
  const seg = (e) => ({cls: e.className, label: e.querySelector(".wb-seg-label").textContent});
  return {segs: [...el.querySelectorAll(".wb-seg")].map(seg),
          header: el.querySelector(".wb-header").textContent};
"""


def test_the_page_shows_the_summary_sent_and_the_dropped_without_offsets(browser: Any) -> None:
    s = WorkbenchState(SAMPLES["support_chat.json"], autosave=None, restore=False)
    s.set_budget(context_window="4096", policy="summary-slot")
    r = s.assemble()
    patch = TokenViewModel(s.assembler().tokenizer).update(r, s.overflow)
    got = in_page(browser, HARNESS, run=LABELS, **page_of(patch))
    segs = got["segs"]
    summary = [g for g in segs if "wb-summary" in g["cls"].split()]
    assert len(summary) == 1 and "inserted by the summary-slot truncation policy" in summary[0]["label"]
    assert "seq -1 · 20 tokens [524:544]" in summary[0]["label"]
    dropped = [g for g in segs if "wb-struck-dropped" in g["cls"]]
    assert dropped and all("not sent" in g["label"] and "[" not in g["label"] for g in dropped)
    # The unstruck segments' token counts add up to the header's total.
    shown = [g for g in segs if "wb-overflow" not in g["cls"] and "wb-kind-folded" not in g["cls"]]
    total = sum(int(g["label"].split(" tokens")[0].rsplit(" ", 1)[1]) for g in shown)
    assert total == r.total_tokens and f"{r.total_tokens} tokens" in got["header"]


CHARS = """
  const rubies = [...el.querySelectorAll("ruby.wb-char")];
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; };
  return rubies.map((r) => ({caption: r.querySelector("rt").textContent,
                             bytes: [...r.querySelectorAll("span.wb-bytes")].map((e) => e.textContent),
                             rt: box(r.querySelector("rt")), spans: [...r.querySelectorAll("span")].map(box)}))
    .concat([{all: [...el.querySelectorAll(".wb-seg span")].map((e) => e.textContent)}]);
"""


def test_a_character_split_over_byte_tokens_shows_above_its_bytes(browser: Any) -> None:
    from workbench import Assembler

    asm = Assembler(template="qwen2.5", cache=None)
    r = asm.assemble({"messages": [{"role": "user", "content": "coffee ☕ please, and beans 🫘"}]})
    patch = TokenViewModel(asm.tokenizer).update(r)
    labels = {v for g in patch.segments for v in (g.get("labels") or {}).values()}
    assert " <0xE2><0x98>" in labels and "<0x95>" in labels          # the report's split, from the view model
    *groups, rest = in_page(browser, HARNESS, run=CHARS, **page_of(patch))
    by = {g["caption"]: g for g in groups}
    assert set(by) == {"☕", "🫘"}, groups
    coffee = by["☕"]
    assert coffee["bytes"] == [" <0xE2><0x98>", "<0x95>"]               # each token's bytes still shown
    top, bottom = coffee["rt"][:2]
    assert all(bottom <= s[0] + 1 for s in coffee["spans"]), coffee     # the character above its bytes
    assert top < min(s[0] for s in coffee["spans"])
    assert "".join(rest["all"]).count("☕") == 0                        # in the token spans: only the bytes


def test_the_page_says_a_dropped_image_is_not_sent(browser: Any) -> None:
    s = WorkbenchState(SAMPLES["screenshot_support.json"], autosave=None, template="qwen2.5-vl", restore=False)
    s.set_budget(context_window="600", policy="sliding")
    r = s.assemble()
    patch = TokenViewModel(s.assembler().tokenizer).update(r, s.overflow)
    segs = in_page(browser, HARNESS, run=LABELS, **page_of(patch))["segs"]
    (img,) = [g for g in segs if "wb-kind-image" in g["cls"]]
    assert "wb-struck-dropped" in img["cls"]
    assert img["label"] == "image 640×400 · 322 tokens · user · seq 1 · dropped by truncation · not sent"
    kept = [g["label"] for g in segs if "wb-overflow" not in g["cls"]]
    assert kept and all(re.search(r"\d+ tokens \[\d+:\d+\] · ", t) for t in kept), kept
