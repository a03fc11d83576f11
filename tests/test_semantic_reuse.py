"""The Semantic tab's lookup reuses the embedded session (issue 17): each turn's context and every
vector are kept between clicks, an edit embeds again only the texts it changed, and a reused result
equals a fresh replay (same verdict, neighbours, similarities). Its verdicts are plain sentences,
and contexts are shortened at word boundaries. Real embedders: all-MiniLM-L6-v2 and the hashing one."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.semantic.cache import SemanticCache
from workbench.semantic.clip import clip_end, clip_start
from workbench.semantic.embedders import HashingEmbedder, MemoEmbedder, MiniLMEmbedder
from workbench.ui.semantic_panel import semantic_html
from workbench.ui.semantic_replay import replay
from workbench.ui.state import WorkbenchState, sample_sessions

SAMPLES = sample_sessions()


def seen(d: Any) -> tuple:
    """Everything a decision shows, but the entries' random ids and the timings."""
    return (d.hit, d.shadow, d.similarity, d.reason, d.fingerprint,
            [(n.similarity, n.fingerprint_agrees, n.differences, n.state, n.context_text, n.why) for n in d.nearest],
            None if d.entry is None else (d.entry.payload, d.entry.context_text, d.entry.versions))


def fresh(state: WorkbenchState, embedder: Any) -> Any:
    requests = [state.doc.request(k) for k in range(1, state.doc.turn_count + 1)]
    return replay(SemanticCache(embedder), state.assembler(), requests, state.turn)


def user_index(state: WorkbenchState, nth_from_end: int) -> int:
    msgs = state.doc.messages(state.turn)
    users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
    return users[-nth_from_end]


def test_a_reused_lookup_equals_a_fresh_replay_after_every_kind_of_edit() -> None:
    embedder = HashingEmbedder()
    state = WorkbenchState(SAMPLES["support_chat.json"], autosave=None)
    state.assemble()
    steps = [("first", None), ("again", None),
             ("last message", {"op": "set", "index": user_index(state, 1), "field": "content",
                               "value": "How do I reset my password on the mobile app?"}),
             ("early message", {"op": "set", "index": user_index(state, 30), "field": "content",
                                "value": "No, use the EU billing account instead."}),     # a correction
             ("delete", {"op": "delete", "index": user_index(state, 3)}),
             ("insert", {"op": "insert", "index": 2, "role": "user"})]
    for what, op in steps:
        if op is not None:
            state.apply(op)
            state.turn = state.doc.turn_count
        got, _ = state.semantic(embedder)
        assert seen(got) == seen(fresh(state, embedder)), what
        if what == "again":
            assert state._replay.made == 0                    # nothing made again: every turn kept
    state.choose(template="llama3.1")                         # every turn made again, same verdict rules
    got, _ = state.semantic(embedder)
    assert seen(got) == seen(fresh(state, embedder)) and state._replay.made == state.turn
    state.select_turn(state.turn // 2)
    while True:                                               # a turn that ends with a user message
        try:
            got, _ = state.semantic(embedder)
            break
        except Exception:  # noqa: BLE001 - an assistant-last turn: nothing to look up, try the one before
            state.select_turn(state.turn - 1)
    assert seen(got) == seen(fresh(state, embedder)) and state._replay.made == 0


def test_minilm_an_edit_embeds_only_the_texts_it_changed_and_equals_a_fresh_replay() -> None:
    embedder = MiniLMEmbedder()
    state = WorkbenchState(SAMPLES["support_chat.json"], autosave=None)
    state.assemble()
    first, cache = state.semantic(embedder)
    memo = cache.embedder
    assert isinstance(memo, MemoEmbedder) and memo.embedded > 100
    assert seen(first) == seen(fresh(state, embedder))
    before = memo.embedded
    again, _ = state.semantic(embedder)
    assert memo.embedded == before and seen(again) == seen(first)
    state.apply({"op": "set", "index": user_index(state, 1), "field": "content",
                 "value": "Can I get a refund for the annual plan I bought yesterday?"})
    edited, _ = state.semantic(embedder)
    assert memo.embedded - before == 1                        # the last message alone: no window shows it yet
    assert seen(edited) == seen(fresh(state, embedder))
    before = memo.embedded
    state.apply({"op": "set", "index": user_index(state, 4), "field": "content",
                 "value": "And does the annual plan include priority support?"})
    edited, _ = state.semantic(embedder)
    assert memo.embedded - before == 1 + 3                    # it, and the windows of the 3 turns after it
    assert seen(edited) == seen(fresh(state, embedder))


def test_kept_vectors_are_the_bits_of_a_fresh_one() -> None:
    embedder = MiniLMEmbedder()
    # The last two have one token length: batched together, they once differed from themselves alone.
    texts = ["short", "a somewhat longer sentence about refunds", "短文本", "a somewhat longer sentence about plans",
             "Can I get a refund for plan 1?", "Can I get a refund for plan 2?"]
    together = embedder.embed(texts)
    for i, t in enumerate(texts):
        assert (embedder.embed([t])[0] == together[i]).all()


def test_verdicts_are_plain_sentences() -> None:
    cache = SemanticCache(HashingEmbedder())
    v = {"model": "m"}
    cache.put("s", [{"role": "user", "content": "How do I deploy the billing service to EU-West?"}], {"a": 1}, v)
    d = cache.lookup("s", [{"role": "user", "content": "How do I update the billing service in EU-West?"}], v)
    html = semantic_html(d, cache)
    assert " vs " not in html and "action update" not in html
    assert d.reason == ("not reused: close (similarity 0.903), but worded almost alike, they differ in "
                        "“deploy”, “update”"), d.reason
    assert d.nearest[0].differences[0] == ("the new question asks to update or change something, the cached one "
                                           "asks to deploy or release something")
    assert "Not reused</b>: <span class=\"wb-semantic-reason\">Close (similarity 0.903)" in html
    assert html.count("Reused") + html.count("Not reused") >= 1


@pytest.mark.parametrize("text, limit, want", [
    ("the quick brown fox jumps over the lazy dog", 20, "…jumps over the lazy dog"[:0] or None),
])
def test_contexts_are_cut_at_word_boundaries(text: str, limit: int, want: Any) -> None:
    end = clip_start(text, limit)
    assert end.startswith("…") and text.endswith(end[1:]) and len(end) <= limit + 1
    assert end[1:].split()[0] in text.split()                 # a whole word first
    start = clip_end(text, limit)
    assert start.endswith("…") and text.startswith(start[:-1]) and start[:-1].split()[-1] in text.split()


def test_chinese_and_emoji_are_cut_between_characters() -> None:
    zh = "我想把年付套餐换成月付请问怎么操作" * 3
    end = clip_start(zh, 10)
    assert end.startswith("…") and zh.endswith(end[1:]) and len(end) == 11
    family = "👨\u200d👩\u200d👧 " * 10 + "x" * 3
    for limit in range(3, 30):
        for cut in (clip_start(family, limit), clip_end(family, limit)):
            body = cut.strip("…")
            assert not body.startswith("\u200d") and not body.endswith("\u200d")
    pair = "ab\ud83d\ude00cd"                                 # a surrogate pair held as two code points
    for limit in range(1, 6):
        body = clip_end(pair, limit)[:-1]
        assert not body.endswith("\ud83d")
