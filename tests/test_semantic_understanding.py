"""Issue 19's rules of the semantic cache, each with the case it lets through and the case it keeps
out: where-to-do questions, yes-or-no and consequence questions, negation in the asking clause,
actions that must match, names said anywhere in the conversation, the confirm tier, another kind of
the same thing (Chinese), "not X", undoing, follow-ups; and the multilingual default embedder with
its own thresholds. Rule tests use the hashing embedder or none; the embedder tests use the real
USE multilingual model."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import WorkbenchError
from workbench.semantic.cache import (
    CONFIRM_FLOOR,
    DEFAULT_THRESHOLDS,
    SemanticCache,
    Thresholds,
    decide,
    from_settings,
    judge,
    settings,
)
from workbench.semantic.compare import follows_up, modifier_swaps, pair_vetoes, ruled_out, undoes
from workbench.semantic.embedders import (
    NAMES,
    HashingEmbedder,
    MiniLMEmbedder,
    USEEmbedder,
    default_embedder_name,
    make_embedder,
)
from workbench.semantic.fingerprint import asking_clause, asks_of, fingerprint

V = {"model": "m1", "tokenizer": "t", "system_prompt": "sp1", "knowledge": "kb1"}


def u(text: str) -> dict:
    return {"role": "user", "content": text}


def a(text: str) -> dict:
    return {"role": "assistant", "content": text}


@pytest.mark.parametrize("text, asks", [
    # where to do something in an app or a process is how to do it ...
    ("Where do I configure that in billing?", set()),
    ("where in the banking app can I temporarily lock my debit card?", set()),
    ("这个在哪配？", set()),
    ("会员的连续包月在哪里取消？", set()),
    # ... where to see or find something is a place
    ("Where can I see the deploy logs?", {"place"}),
    ("Where in the NHS App can I see the appointments I've booked?", {"place"}),
    # yes-or-no questions ask whether; "can I", "is it still possible", "is there a way" ask how
    ("Does switching off the auto start-stop void the warranty?", {"whether"}),
    ("押金和卡里的余额能全部退回来吗？", {"whether"}),
    ("Can I freeze my card in the app?", set()),
    ("My parcel's been sent out. Is it still possible to redirect it?", set()),
    ("Is there a way to turn it off?", set()),
    ("does it have a dark mode? how do I switch it on?", set()),
    # what follows from something
    ("What happens when the hour runs out?", {"consequence"}),
    ("自动缴费以后，要是余额不够扣会怎么样？", {"consequence"}),
])
def test_the_kind_of_answer_asked_for(text: str, asks: set[str]) -> None:
    assert asks_of(text) == frozenset(asks)


def test_negation_counts_in_the_clause_that_asks() -> None:
    assert asking_clause("If I don't use all my days this year, how many roll over?") == "how many roll over?"
    assert fingerprint("If I don't use all my vacation days this year, how many of them roll over?").negated is False
    assert fingerprint("How do I stop the nightly backup from running?").negated is True
    assert fingerprint("Don't restart it. How do I drain the node?").negated is False   # the background says it


def test_asking_not_to_do_something_is_asking_to_turn_it_off() -> None:
    stop, off = fingerprint("百词斩怎么让它别推了？"), fingerprint("百词斩怎么关闭每天的学习提醒推送？")
    assert stop.negated and not off.negated and off.action == "disable"
    assert not stop.vetoes(off) and not off.vetoes(stop)
    # ... but not when the negation is of that very action, nor against a request to turn it on
    never = fingerprint("How do I make it never disable the firewall?")
    assert never.vetoes(fingerprint("How do I disable the firewall?"))
    assert fingerprint("怎么让它别推了？").vetoes(fingerprint("怎么打开推送？"))


def test_a_named_action_against_none_does_not_agree() -> None:
    blur, unblur = fingerprint("How do I blur my background in Zoom?"), fingerprint("How do I turn the blur off?")
    assert blur.action in ("", "howto") and unblur.action == "disable" and not unblur.agrees(blur)
    assert fingerprint("How can I turn the blur off?").agrees(unblur)


def test_a_name_said_anywhere_in_the_new_conversation_counts() -> None:
    new = fingerprint("how do I load users.csv so each row is a dict?")
    cached = fingerprint("How do I read a CSV file into a list of dicts in Python?")
    window = "user: I have users.csv and a Python script"
    assert not new.agrees(cached)                                          # names alone: too few shared
    assert new.agrees(cached, (f"how do I load users.csv {window}", ""))    # Python said two turns ago
    # ... and the other way round: every name of the new question said in the cached conversation
    gym, freeze = fingerprint("How do I freeze my Fitness membership?"), fingerprint("How do I freeze my PF plan?")
    assert not gym.agrees(freeze)
    assert gym.agrees(freeze, ("", "user: i am at planet fitness. how do i freeze my pf plan?"))
    assert not gym.agrees(freeze, ("", "user: i am at gold's gym. how do i freeze my pf plan?"))
    other = fingerprint("How do I turn it off on my Jeep Wrangler?")
    escape = fingerprint("How do I turn off the auto start-stop on a 2019 Ford Escape?")
    # the cached request's car is nowhere in the new conversation
    assert not other.agrees(escape, ("how do I turn it off on my jeep wrangler? the auto start-stop", ""))


def test_the_confirm_tier_serves_a_near_miss_only_when_the_words_confirm_it() -> None:
    th = Thresholds(high=0.98, low=0.6)
    q = (("That sounds perfect. How do I set that up?",
          "user: I keep running out of credit on my Oyster card.\nassistant: Try auto top-up on the Oyster card."),
         ("How do I set up auto top-up on my Oyster card?", ""))
    j = judge(fingerprint(q[0][0]), fingerprint(q[1][0]), q)
    assert j.contained and j.agrees and not j.vetoes
    hit, _, why = decide(0.52, j, th)
    assert hit and "confirmed" in why
    assert not decide(CONFIRM_FLOOR - 0.01, j, th)[0]                     # too far: no second look
    other = ((q[0][0], "user: I keep running out of credit.\nassistant: Try the Oyster app."), q[1])
    j2 = judge(fingerprint(other[0][0]), fingerprint(other[1][0]), other)
    assert not j2.contained and not decide(0.52, j2, th)[0]               # "auto top-up" never said


def test_a_near_miss_that_names_most_of_the_cached_request_is_confirmed() -> None:
    from workbench.semantic.cache import CONFIRM_COVERAGE, CONFIRM_COVERAGE_CJK, Judgement
    th = Thresholds(high=0.98, low=0.6)
    most = Judgement(vetoes=(), contained=False, agrees=True, coverage=CONFIRM_COVERAGE, differences=())
    hit, _, why = decide(0.45, most, th)
    assert hit and "confirmed" in why and "50%" in why
    assert not decide(0.45, Judgement((), False, True, CONFIRM_COVERAGE - 0.01, ()), th)[0]   # too few words
    assert not decide(0.45, Judgement((), False, False, 1.0, ()), th)[0]                       # fingerprints differ
    assert not decide(0.45, Judgement(("negation flipped",), True, True, 1.0, ()), th)[0]      # a guard objects
    short = decide(0.7, Judgement((), False, True, 0.1, ()), th)      # in the band: says which share fell short
    assert not short[0] and "names only 10% of the cached request's content words (at least 20% needed)" in short[2]
    zh = Judgement((), False, True, CONFIRM_COVERAGE, (), cjk=True)
    assert not decide(0.45, zh, th)[0]                               # Chinese: 90% of the characters
    assert decide(0.45, Judgement((), False, True, CONFIRM_COVERAGE_CJK, (), cjk=True), th)[0]


def test_another_kind_of_the_same_thing_in_chinese() -> None:
    swap = modifier_swaps("对，那这个要怎么添加？", "user: 我发现赡养老人专项附加扣除没填。",
                          "个税App里办2023年度汇算，子女教育专项附加扣除怎么添加？")
    assert swap and "专项附加" in swap[0]
    assert not modifier_swaps("请问个税App上子女教育专项附加扣除在哪里添加？", "",
                              "个税App里办2023年度汇算，子女教育专项附加扣除怎么添加？")
    assert not modifier_swaps("山地车的链条掉了，自己怎么装回去？", "", "山地车骑着骑着链条掉了，怎么自己装回去？")


@pytest.mark.parametrize("window, cached, out", [
    ("user: 我们家的洗衣机不是海尔的，是小天鹅的滚筒。", "海尔滚筒洗衣机的童锁怎么解除？", ["海尔"]),
    ("user: it is not the Haier one, it is a Bosch", "How do I reset the child lock on a Haier washer?", ["haier"]),
    ("user: I borrowed it from the New York Public Library, not Brooklyn, and it's due",
     "How do I extend the loan on a book from the Brooklyn Public Library?", ["brooklyn"]),
    ("user: My company switched from Zoom to Microsoft Teams last month.", "How do I blur my background in Zoom?",
     ["zoom"]),
    ("user: 家里的洗衣机去年从海尔换成了小天鹅。", "海尔滚筒洗衣机的童锁怎么解除？", ["海尔"]),
    # a "not" about something else rules nothing out
    ("user: I need the steps, not a lecture, just the steps", "How do I reset the child lock on a Haier washer?", []),
    ("user: 我的洗衣机是海尔的，不是很新，是前年买的。", "海尔滚筒洗衣机的童锁怎么解除？", []),
])
def test_what_the_user_says_they_do_not_mean(window: str, cached: str, out: list[str]) -> None:
    assert ruled_out("how do I reset it?", window, cached) == out


def test_a_request_to_undo_is_not_the_request() -> None:
    assert undoes("Someone set it to double-sided. How do I change it back to single-sided?",
                  "How do I set the printer to print double-sided by default?")
    assert undoes("怎么把默认打印改回单面？", "怎么把打印机设置成默认双面打印？")
    assert not undoes("How do I change it back to single-sided?", "How do I revert the printer to single-sided?")
    assert not undoes("On Windows, how do I get the printer to print two-sided by default?",
                      "How do I set the printer to print double-sided by default on Windows?")


def test_a_follow_up_to_the_question_already_answered_is_another_question() -> None:
    cached = "How do I enroll my daughter in kindergarten at a public school in Seattle?"
    window = [cached]
    assert follows_up("We'd prefer a school outside our zone. Is there a transfer process?", window, cached)
    assert not follows_up("Sorry, once more: how do I enroll my daughter in kindergarten in Seattle?", window, cached)
    assert not follows_up("How do I enroll my daughter in kindergarten in Seattle?", [], cached)
    vetoes = pair_vetoes(("We'd prefer another school. How?", f"user: {cached}\nassistant: Enroll online."),
                         (cached, ""))
    assert any("already asked" in v for v in vetoes)


def test_each_embedder_has_its_own_default_thresholds_and_the_bundle_names_them() -> None:
    assert NAMES == ("use", "minilm", "hashing")
    assert default_embedder_name() == "use-multilingual-v3"             # installed by the test extra
    assert SemanticCache(HashingEmbedder()).thresholds == Thresholds()   # no defaults of its own
    assert DEFAULT_THRESHOLDS["use-multilingual-v3"] == Thresholds(0.98, 0.60)
    s = settings()
    assert s["embedder"] == "use-multilingual-v3" and s["thresholds"] == {"high": 0.98, "low": 0.6}
    assert s["rules_version"] == 2
    minilm = settings(embedder="all-MiniLM-L6-v2")
    assert minilm["thresholds"] == {"high": 0.9, "low": 0.7}
    with pytest.raises(WorkbenchError, match="embedder"):
        from_settings(minilm, HashingEmbedder())                          # calibrated for another model
    with pytest.raises(WorkbenchError, match="rules_version"):
        from_settings(s | {"rules_version": 1}, HashingEmbedder())       # a bundle from the old rules
    with pytest.raises(WorkbenchError, match="unknown embedder"):
        make_embedder("word2vec")


def test_the_multilingual_embedder_is_real_and_a_text_is_the_same_alone_or_batched() -> None:
    emb = USEEmbedder()
    texts = ["怎么关闭自动启停？", "How do I turn off auto start-stop?", "请求失败了怎么自动重试几次？"]
    batch = emb.embed(texts)
    assert batch.shape == (3, 512) and batch.dtype == np.float32
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    alone = np.stack([emb.embed([t])[0] for t in texts])
    assert np.array_equal(alone, batch)                                  # bit for bit: kept vectors equal fresh ones
    para = emb.embed(["如何把发动机自动启停功能关掉"])[0]
    # it knows Chinese: a Chinese paraphrase is nearer than another Chinese question, and the English
    # question is nearer than that too (MiniLM, trained on English, put the unrelated one at 0.99)
    assert float(para @ batch[0]) > float(para @ batch[2]) + 0.2
    assert float(batch[0] @ batch[1]) > float(batch[0] @ batch[2])
    minilm = MiniLMEmbedder().embed(["怎么关闭自动启停？", "请求失败了怎么自动重试几次？"])
    assert float(minilm[0] @ minilm[1]) > float(batch[0] @ batch[2])


def test_a_lookup_with_the_default_embedder_reuses_a_chinese_paraphrase_and_not_its_swap() -> None:
    c = SemanticCache()                                                   # the default: USE and its thresholds
    assert c.embedder.name == "use-multilingual-v3"
    c.put("s1", [u("海尔滚筒洗衣机的童锁怎么解除？")], {"text": "长按童锁键 3 秒"}, V)
    again = c.lookup("s1", [u("上周孩子乱按了一通，海尔滚筒洗衣机的童锁怎么解除？")], V)
    assert again.hit, again.reason
    swap = c.lookup("s1", [u("我们家的洗衣机不是海尔的，是小天鹅的滚筒。"), a("明白。"),
                           u("它的童锁怎么解除？")], V)
    assert not swap.hit


def test_long_hostile_messages_are_read_in_one_pass() -> None:
    """A request can be as long as a client sends. These rules once searched the text from every
    start (a yes-or-no ending, "not X", another kind of the same thing, a model's number): 50,000 characters took
    minutes. They read each text a bounded number of times now, and still find what they should."""
    n = 50_000
    assert asks_of("我" * n + "会扣钱吗？") == frozenset({"whether"})
    assert asks_of("a " * n + "how do I do it?") == frozenset()
    window = "user: not Abc " * n + "not Haier, it is a Bosch"
    assert ruled_out("how?", window, "How do I reset a Haier washer?") == ["haier"]
    assert modifier_swaps("那这个要怎么添加？", "赡养老人专项附加扣除" * n, "子女教育专项附加扣除怎么添加？")
    # a model's number is read from the words right before it, not by searching the text up to it
    assert fingerprint("item 1 " * (n // 5) + "on my Bosch Serie 6 washer").entities >= {"1 item", "6"}
