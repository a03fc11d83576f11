"""The context-aware semantic cache: fingerprint rules (English and Chinese), the two thresholds and
the guard, correction invalidation and read-only contexts, versions, TTL, shadow mode, shared
scope, and persistence through a real redis-server. Logic tests use the hashing embedder (instant,
deterministic); one test runs all-MiniLM-L6-v2, and the regression guard the default (USE
multilingual). Issue 19's rules have their own file, test_semantic_understanding.py."""

from __future__ import annotations

import numpy as np
import pytest
from redis_server import redis_server  # noqa: F401 - fixture

from workbench.errors import WorkbenchError
from workbench.semantic.cache import SHORT_TTL_S, SemanticCache, Thresholds
from workbench.semantic.compare import direction_reversed, missing, pair_vetoes, reversals, text_difference
from workbench.semantic.embedders import HashingEmbedder, MiniLMEmbedder
from workbench.semantic.fingerprint import entities_of, fingerprint, question
from workbench.semantic.store import RedisSemanticStore

V = {"model": "m1", "tokenizer": "qwen2.5@5221b958", "system_prompt": "sp1", "knowledge": "kb1"}


def u(text: str) -> dict:
    return {"role": "user", "content": text}


def a(text: str) -> dict:
    return {"role": "assistant", "content": text}


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("one, two, same", [
    ("Turn feature A on", "Do not turn feature A on", False),
    ("打开 A 功能", "不要打开 A 功能", False),
    ("Start 2 concurrent instances", "Send 2 concurrent requests", False),
    ("开 2 个并发实例", "发 2 个并发请求", False),
    ("How do I deploy the system?", "How do I migrate the system?", False),
    ("Enable dark mode", "Disable dark mode", False),
    ("How can I deploy the system?", "How do I deploy the system?", True),
    ("What is the price of the Pro tier?", "How much does the Pro tier cost?", True),
    # questions after different kinds of answer
    ("Where can I see the deploy logs?", "How long does a deploy take?", False),
    ("这个合同需要谁来盖章？", "这个合同多久能审完？", False),
    ("I'm 3 years in. How many days of leave do I get?", "我工作满三年了，年假有几天？", True),
])
def test_fingerprints_tell_apart_what_embeddings_confuse(one: str, two: str, same: bool) -> None:
    assert fingerprint(one).agrees(fingerprint(two)) is same


@pytest.mark.parametrize("text, correction", [
    ("No, use plan B instead", True), ("Actually, I meant the staging cluster", True),
    ("不对，改用 B 方案", True), ("算了，还是用 B", True), ("我是说测试环境", True),
    ("Thanks, that works", False), ("能不能只记 ERROR 级别以上的", False), ("How do I deploy it?", False),
])
def test_corrections_are_detected(text: str, correction: bool) -> None:
    assert fingerprint(text).correction is correction


def cache(**kw) -> SemanticCache:  # type: ignore[no-untyped-def]
    return SemanticCache(HashingEmbedder(), **kw)


def test_the_two_thresholds_and_the_fingerprint_band() -> None:
    c = cache(thresholds=Thresholds(high=0.999, low=0.3))
    c.put("s1", [u("How do I deploy the billing service?")], {"text": "use the deploy pipeline"}, V)
    same = c.lookup("s1", [u("How do I deploy the billing service?")], V)
    assert same.hit and same.similarity == pytest.approx(1.0, abs=1e-5) and "high threshold" in same.reason
    repeat = c.lookup("s1", [u("Sorry, new here. How can I deploy the billing service?")], V)
    assert repeat.hit and "names everything the cached request asks" in repeat.reason
    band_ok = c.lookup("s1", [u("How can I ship billing service releases?")], V)
    assert band_ok.hit and "fingerprints agree" in band_ok.reason, band_ok.reason
    band_bad = c.lookup("s1", [u("How do I migrate the billing service?")], V)
    assert not band_bad.hit and ("fingerprints differ" in band_bad.reason or "differ in" in band_bad.reason)
    far = cache(thresholds=Thresholds(high=0.99, low=0.9))
    far.put("s1", [u("How do I deploy the billing service?")], {"text": "x"}, V)
    assert "under the low threshold" in far.lookup("s1", [u("What is the weather like?")], V).reason
    assert band_ok.nearest and band_ok.nearest[0].similarity == band_ok.similarity
    with pytest.raises(WorkbenchError):
        Thresholds(high=0.5, low=0.8)


def test_a_flipped_negation_never_hits_even_above_the_high_threshold() -> None:
    c = cache(thresholds=Thresholds(high=0.5, low=0.3))
    c.put("s1", [u("Turn feature A on for the EU region")], {"text": "done"}, V)
    d = c.lookup("s1", [u("Do not turn feature A on for the EU region")], V)
    assert not d.hit and d.similarity > 0.5 and "negation flipped" in d.reason


def test_a_correction_invalidates_the_session_and_its_context_is_read_only() -> None:
    c = cache(thresholds=Thresholds(high=0.9, low=0.8))
    c.put("s1", [u("How do I roll out plan A?")], {"text": "A"}, V)
    c.put("s1", [u("What does plan A cost?")], {"text": "A cost"}, V)
    other = c.put("s2", [u("How do I roll out plan A?")], {"text": "A"}, V)
    assert c.observe("s1", u("不对，改用 B 方案")) is True
    assert {e.session for e in c.entries.values()} == {"s2"} and c.invalidations == 2
    assert c.observe("s2", u("Thanks!")) is False and other.id in c.entries
    corrected = [u("How do I roll out plan A?"), a("Like this."), u("No, use plan B instead")]
    assert c.put("s1", corrected, {"text": "B"}, V) is None                 # matched, never written
    assert not c.lookup("s1", [u("How do I roll out plan A?")], V).hit    # s1's entries are gone


def test_versions_ttl_and_scope() -> None:
    clock = Clock()
    c = cache(thresholds=Thresholds(high=0.95, low=0.9), clock=clock)
    c.put("s1", [u("Explain the refund policy")], {"text": "30 days"}, V)
    for key in V:
        other = dict(V, **{key: "changed"})
        d = c.lookup("s1", [u("Explain the refund policy")], other)
        assert not d.hit and "of another version" in d.reason, key
    assert not c.lookup("s2", [u("Explain the refund policy")], V).hit      # another session's entry
    shared = c.put("s1", [u("What are your opening hours?")], {"text": "9-5"}, V, shared=True)
    assert c.lookup("s9", [u("What are your opening hours?")], V).entry is shared
    timely = c.put("s1", [u("What is the price of gold today?")], {"text": "$"}, V)
    assert timely.ttl_s == SHORT_TTL_S                                       # time-sensitive: short TTL
    clock.t += SHORT_TTL_S + 1
    assert not c.lookup("s1", [u("What is the price of gold today?")], V).hit
    assert c.lookup("s1", [u("Explain the refund policy")], V).hit
    assert c.expire() == 1 and timely.id not in c.entries


def test_suspect_entries_are_served_in_shadow_only() -> None:
    c = cache(thresholds=Thresholds(high=0.95, low=0.9))
    e = c.put("s1", [u("Summarise the incident runbook")], {"text": "..."}, V, state="suspect")
    d = c.lookup("s1", [u("Summarise the incident runbook")], V)
    assert not d.hit and d.shadow and d.entry is e and e.shadow_hits == 1 and e.hits == 0
    for _ in range(3):
        state = c.record_shadow(e.id, agreed=True)
    assert state == "active" and c.lookup("s1", [u("Summarise the incident runbook")], V).hit
    bad = c.put("s1", [u("Summarise the deploy runbook")], {"text": "..."}, V, state="suspect")
    assert c.record_shadow(bad.id, agreed=False) == "frozen"
    assert "frozen" not in {n.state for n in c.lookup("s1", [u("Summarise the deploy runbook")], V).nearest}


def test_the_window_carries_the_context_and_the_fingerprint_inherits() -> None:
    c = cache(window=5)
    ctx = c.context([u("How do I deploy the billing service to EU-West?"), a("Run the pipeline."),
                     u("And what about rollback?")])
    fp = ctx.fingerprint()
    assert fp.action == "deploy" and "eu-west" in fp.entities                # inherited from the window
    assert "billing service" in ctx.window_text()
    none = cache(window=0).context([u("How do I deploy?"), a("..."), u("And rollback?")])
    assert none.window_text() == ""
    with pytest.raises(WorkbenchError, match="ends with the user's"):
        c.context([u("x"), a("y")])


def test_entries_persist_in_redis_and_a_new_process_finds_them(redis_server) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    store = RedisSemanticStore(redis_server.url, namespace="test-semantic")
    store.clear()
    first = SemanticCache(HashingEmbedder(), thresholds=Thresholds(0.95, 0.9), store=store)
    e = first.put("s1", [u("How do I rotate the API keys?")], {"type": "answer", "text": "kms rotate"}, V)
    first.set_state(e.id, "active")
    key = f"wb:test-semantic:entry:{e.id}"
    assert 0 < store.r.ttl(key) <= 24 * 3600
    store.r.hset("wb:test-semantic:entry:999", mapping={"vec": b"garbage", "meta": b"{not json"})
    second = SemanticCache(HashingEmbedder(), thresholds=Thresholds(0.95, 0.9),
                           store=RedisSemanticStore(redis_server.url, namespace="test-semantic"))
    assert second.load_from_store() == 1 and second.store.skipped == 1      # the garbage is skipped
    d = second.lookup("s1", [u("How do I rotate the API keys?")], V)
    assert d.hit and d.entry.id == e.id and d.entry.payload["text"] == "kms rotate"
    second.invalidate_session("s1")
    assert not store.r.exists(key)


def test_with_all_minilm_the_guard_holds() -> None:
    emb = MiniLMEmbedder()
    v = emb.embed(["turn A on", "打开 A 功能"])
    assert v.shape == (2, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    c = SemanticCache(emb, thresholds=Thresholds(high=0.8, low=0.6))
    c.put("s1", [u("Turn feature A on for the EU region")], {"text": "done"}, V)
    para = c.lookup("s1", [u("I need feature A turned on in the EU region, how?")], V)
    flip = c.lookup("s1", [u("Do not turn feature A on for the EU region")], V)
    assert para.hit, para.reason
    assert not flip.hit and flip.similarity > 0.8 and "negation flipped" in flip.reason
    # The pairwise text check: near-identical, one content word swapped.
    swap = c.lookup("s1", [u("Turn feature A on for the US region")], V)
    assert not swap.hit and swap.similarity > 0.8 and "differ in" in swap.reason


def test_the_index_finds_the_exact_nearest_on_both_scan_paths() -> None:
    from workbench.semantic.index import QUANT_FROM, VectorIndex

    rng = np.random.default_rng(1)
    n = QUANT_FROM + 1000                                       # large enough for the int8 scan
    vecs = rng.standard_normal((n, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    idx = VectorIndex(384, capacity=16)                         # grows by doubling on the way
    rows = [idx.add(v, session=i % 3, state=0, expires=1e18) for i, v in enumerate(vecs)]
    assert rows == list(range(n)) and len(idx) == n
    idx.remove(5)
    assert idx.add(vecs[5], session=5 % 3) == 5                 # a freed row is reused
    for j in range(40):
        q = vecs[(j * 37) % n] + 0.3 * rng.standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        for mask in (idx.live(), idx.col("session") == 1):      # a full scan (float16 path), and a subset
            got_rows, got = idx.search(q, mask, 3)
            exact = np.where(mask, vecs @ q, -np.inf)
            want = np.argsort(-exact)[:3]
            assert got_rows.tolist() == want.tolist()
            assert np.allclose(got, exact[want], atol=1e-6)     # the scores are float32, exactly


@pytest.mark.parametrize("one, two", [
    ("How do I freeze my debit card in the app?", "found it! how do I unfreeze it in the app?"),
    ("How do I add a created_at column?", "How do I remove the created_at column?"),
    ("MySQL 里怎么给 orders 表加一个字段？", "MySQL 里怎么把 orders 表的这个字段删掉？"),
    ("How do I upgrade to the annual plan?", "How do I downgrade to the monthly plan?"),
])
def test_opposite_requests_are_told_apart(one: str, two: str) -> None:
    assert reversals(one, two) and reversals(two, one)
    assert not reversals(one, one)


def test_the_same_things_in_the_other_order_are_another_request() -> None:
    assert direction_reversed("JS 里怎么把时间戳转成 YYYY-MM-DD 格式的日期？",
                              "JS 里怎么把 YYYY-MM-DD 格式的日期转成时间戳？")
    assert direction_reversed("How do I convert a timestamp to a date?", "How do I convert a date to a timestamp?")
    assert direction_reversed("How do I make my hydrangeas turn blue instead of pink?",
                              "How do I make my hydrangeas turn pink instead of blue?")
    assert not direction_reversed("How do I convert a timestamp to a date?", "how to turn a timestamp into a date")


def test_background_is_not_the_question() -> None:
    long = ("I'm having knee surgery soon (torn meniscus, skiing accident, don't ask). How do I freeze my "
            "membership?")
    assert question(long).strip() == "How do I freeze my membership?"
    assert not fingerprint(long).negated                       # "don't ask" negates nothing asked
    assert fingerprint("Don't renew it. How do I stop the renewal?").action == "disable"
    # added background is no difference; a swapped thing in the background is
    short = "My cat is a bit overweight. How can I help her lose weight safely?"
    chatty = "My cat is a bit overweight. She's the love of my life, haha. How can I help her lose weight safely?"
    assert not text_difference(chatty, short) and not missing(short, chatty, "")
    assert "cat" in text_difference("My dog is a bit overweight. How can I help her lose weight safely?", short)


def test_chinese_numerals_compare_as_numbers() -> None:
    assert "5 year" in entities_of("我在公司工作满五年了") and "3 year" in entities_of("满三年")
    assert fingerprint("工作满五年，年假有几天？").vetoes(fingerprint("工作满三年，年假有几天？"))


def test_the_same_message_over_different_earlier_turns_is_not_the_same_request() -> None:
    q = ("How do I make it write logs to a file?", "user: I use loguru in our Flask app.")
    e = ("How do I make it write logs to a file?", "user: I use the standard logging module in our Flask app.")
    assert any("earlier turns" in v for v in pair_vetoes(q, e))
    assert not pair_vetoes(q, q)


def test_a_vetoed_nearest_entry_does_not_hide_the_right_one() -> None:
    c = cache(thresholds=Thresholds(high=0.999, low=0.3))
    c.put("s1", [u("How do I book a table for 4 at 7pm tonight?")], {"text": "four"}, V)
    c.put("s1", [u("Hi! How do I book a table for 9 at 7pm tonight?")], {"text": "nine"}, V)
    d = c.lookup("s1", [u("How do I book a table for 9 at 7pm tonight?")], V)
    four = next(n for n in d.nearest if c.entries[n.entry_id].payload == {"text": "four"})
    assert four.similarity > 0.95 and "numbers" in four.why                # as near as the right one, and vetoed
    assert d.hit and d.entry is not None and d.entry.payload == {"text": "nine"}


def test_the_verb_that_asks_is_the_last_one_and_names_are_not_verbs() -> None:
    assert fingerprint("之前把自动启停关了，现在想重新打开，怎么弄？").action == "enable"
    assert fingerprint("自动启停怎么关？").action == "disable"
    off = fingerprint("On my 2019 Ford Escape, how can I switch the automatic engine stop/start off?")
    assert off.action == "disable" and not off.negated
    assert not fingerprint("How do I turn off the auto start-stop?").negated
    # a name said in an earlier turn of the new context is not missing from it
    q = ("It's my first year doing this, so bear with me. How do I add my daughter as a dependent on my return?",
         "user: Hi, can you help with TurboTax?")
    e = ("How do I add my daughter as a dependent on my return in TurboTax?", "")
    assert not pair_vetoes(q, e) and not missing(e[0], *q)
    assert question("明天要演示，时间紧任务重，先谢谢了🙏 报表里怎么隐藏某一页？").strip() == "报表里怎么隐藏某一页？"


def test_on_the_shipped_set_the_defaults_keep_near_misses_out() -> None:
    """A regression guard for the rules with the default embedder and its thresholds (deterministic on
    the CPU): the figures docs/semantic.md records, with a little room."""
    from workbench.semantic.evaluate import load_dataset, report, score

    c = SemanticCache()
    scored, _ = score(load_dataset(), c)
    r = report(scored, c.thresholds)
    assert r["overall"]["precision"] >= 0.93 and r["overall"]["recall"] >= 0.42
    assert r["categories"]["entity_swap"]["hit_rate"] <= 0.05 and r["categories"]["intent_reversal"]["hit_rate"] <= 0.05
