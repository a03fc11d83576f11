"""The shared prompt cache inside assembly (issue 4): reuse across sessions and processes through a
real Redis, sources reported per segment, exactness against cold, one render for N concurrent
callers, and faults that never break assembly."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest
from fake_clock import FakeClock
from redis_server import RedisServer, redis_server  # noqa: F401  (fixture)

from workbench import Assembler
from workbench.assembly import cached
from workbench.cache import TwoTierCache
from workbench.sessions import load_session

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"
TURNS = load_session(SESSIONS / "tool_agent.json").turns
COLD = Assembler(template="qwen2.5", cache=None)


def same_as_cold(r, request) -> None:  # type: ignore[no-untyped-def]
    c = COLD.assemble(request)
    assert r.text == c.text and np.array_equal(r.token_ids, c.token_ids)
    assert [(s.kind, s.seq, s.start, s.end) for s in r.segments] == [(s.kind, s.seq, s.start, s.end)
                                                                     for s in c.segments]


def cache_for(server: RedisServer, **kw) -> TwoTierCache:  # type: ignore[no-untyped-def]
    return TwoTierCache(redis_url=server.url, socket_timeout_s=0.2, **kw)


def test_another_process_extends_a_prompt_through_redis(redis_server: RedisServer) -> None:  # noqa: F811
    # "process" A assembles turn 5; "process" B (its own local tier) gets turn 6 and turn 6 again
    a = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t1"))
    b = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t1"))
    a.assemble(TURNS[4])
    r = b.assemble(TURNS[5])
    same_as_cold(r, TURNS[5])
    sources = [s.source for s in r.segments]
    assert "redis" in sources and "fresh" in sources and "local" not in sources
    assert r.reused_segments == sources.count("redis") > 0
    again = b.assemble(TURNS[5])  # now whole, from B's local tier
    same_as_cold(again, TURNS[5])
    assert {s.source for s in again.segments} == {"local"}
    c = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t1"))
    whole = c.assemble(TURNS[5])  # whole, from Redis
    assert {s.source for s in whole.segments} == {"redis"}
    same_as_cold(whole, TURNS[5])
    assert c.cache.metrics().hits["redis"] >= 1
    assert r.cache_hits == whole.cache_hits == {"local": 0, "redis": 1}


def test_local_only_cache_is_the_default_and_exact() -> None:
    asm = Assembler(template="qwen2.5")
    assert asm.cache is not None and not asm.cache.redis_enabled
    first = asm.assemble(TURNS[3])
    second = asm.assemble(TURNS[3])
    assert {s.source for s in first.segments} == {"fresh"} and {s.source for s in second.segments} == {"local"}
    same_as_cold(second, TURNS[3])
    nxt = asm.assemble(TURNS[4])  # a new request of the same conversation extends the cached prompt
    assert nxt.reused_segments > 0
    same_as_cold(nxt, TURNS[4])
    # cache_hits says which tier each prompt (or the prefix it extended) came from, in the JSON too
    assert first.cache_hits == {"local": 0, "redis": 0}
    assert second.cache_hits == nxt.cache_hits == {"local": 1, "redis": 0}
    assert second.to_json()["cache_hits"] == {"local": 1, "redis": 0}
    session = asm.session()
    session.assemble(TURNS[3])
    assert session.assemble(TURNS[4]).cache_hits == {"local": 0, "redis": 0}   # its own previous result


def test_200_concurrent_assemblies_render_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asm = Assembler(template="qwen2.5", cache=TwoTierCache())
    renders = 0
    lock = threading.Lock()
    original = cached.exact

    def counting(*a, **k):  # type: ignore[no-untyped-def]
        nonlocal renders
        with lock:
            renders += 1
        return original(*a, **k)

    monkeypatch.setattr(cached, "exact", counting)   # the cache's cold assembly
    barrier = threading.Barrier(200)
    out = []

    def run() -> None:
        barrier.wait()
        out.append(asm.assemble(TURNS[-1]))

    threads = [threading.Thread(target=run) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert renders == 1 and len(out) == 200
    assert all(np.array_equal(r.token_ids, out[0].token_ids) for r in out)
    same_as_cold(out[0], TURNS[-1])

    async def many() -> list:  # type: ignore[type-arg]
        return await asyncio.gather(*(asm.assemble_async(TURNS[-2]) for _ in range(50)))

    renders = 0
    results = asyncio.run(many())
    assert renders == 1 and len(results) == 50


def test_redis_faults_never_break_assembly(redis_server: RedisServer) -> None:  # noqa: F811
    asm = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t2"))
    same_as_cold(asm.assemble(TURNS[2]), TURNS[2])
    redis_server.kill()  # killed mid-run: the local tier and fresh renders carry on
    for t in TURNS[3:6]:
        same_as_cold(asm.assemble(t), t)
    m = asm.cache.metrics()
    assert m.faults["connect"] + m.faults["timeout"] >= 1
    redis_server.restart()
    fresh = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t2"))
    same_as_cold(fresh.assemble(TURNS[6]), TURNS[6])  # an empty server after the restart: cold, exact


def test_garbage_and_foreign_entries_are_misses(redis_server: RedisServer) -> None:  # noqa: F811
    writer = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t3"))
    writer.assemble(TURNS[1])
    client = redis_server.client()
    keys = client.keys("workbench:*:t3:*")
    assert keys
    for k in keys:
        client.set(k, b"not a workbench entry")
    reader = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t3"))
    r = reader.assemble(TURNS[1])
    same_as_cold(r, TURNS[1])
    assert {s.source for s in r.segments} == {"fresh"}
    assert reader.cache.metrics().faults["garbage"] >= 1


def test_prompts_with_variables_or_truncation_are_not_cached() -> None:
    asm = Assembler(template="qwen2.5", context_window=8192, reserve=1024)
    req = load_session(SESSIONS / "overflow.json").turn(None)
    a, b = asm.assemble(req), asm.assemble(req)
    assert a.dropped and {s.source for s in b.segments} == {"fresh"}
    assert np.array_equal(a.token_ids, b.token_ids)
    tmpl = load_session(SESSIONS / "templated_system.json").turn(None)
    x, y = asm.assemble(tmpl), asm.assemble(tmpl)
    assert {s.source for s in y.segments} == {"fresh"} and x.text == y.text


@pytest.mark.parametrize("template", ["qwen3", "llama3.1", "mistral-v7", "gpt-oss"])
def test_cache_reuse_is_exact_for_rewriting_templates(template: str) -> None:
    asm = Assembler(template=template, cache=TwoTierCache())
    cold = Assembler(template=template, cache=None)
    for req in load_session(SESSIONS / "coding_corrections.json").turns:
        r = asm.assemble(req)
        c = cold.assemble(req)
        assert r.text == c.text and np.array_equal(r.token_ids, c.token_ids)


def test_redis_down_at_start_then_back(redis_server: RedisServer) -> None:  # noqa: F811
    redis_server.kill()
    clock = FakeClock()
    asm = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t4", backoff_initial_s=0.05,
                                                        clock=clock))
    for t in TURNS[:3]:
        same_as_cold(asm.assemble(t), t)  # no Redis at all: local tier and fresh renders
    faults = asm.cache.metrics().faults["connect"]
    assert faults >= 1
    redis_server.restart()
    same_as_cold(asm.assemble(TURNS[3]), TURNS[3])      # within the back-off: Redis is not tried
    assert asm.cache.metrics().faults["connect"] == faults
    clock.advance(60.0)  # past any back-off: the tier reconnects on its own
    same_as_cold(asm.assemble(TURNS[4]), TURNS[4])
    assert asm.cache.metrics().faults["connect"] == faults
    other = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t4"))
    r = other.assemble(TURNS[4])  # written through after the reconnect, read by another "process"
    assert {s.source for s in r.segments} == {"redis"}


def test_paused_redis_costs_a_timeout_not_a_failure(redis_server: RedisServer) -> None:  # noqa: F811
    asm = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t5"))
    asm.assemble(TURNS[1])
    redis_server.pause()
    try:
        for t in TURNS[2:5]:
            same_as_cold(asm.assemble(t), t)
        assert asm.cache.metrics().faults["timeout"] >= 1
    finally:
        redis_server.resume()


def test_entries_of_another_format_version_are_misses(redis_server: RedisServer) -> None:  # noqa: F811
    from workbench.cache import redis_tier
    writer = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t6"))
    writer.assemble(TURNS[2])
    client = redis_server.client()
    for k in client.keys("workbench:*:t6:*"):
        raw = bytearray(client.get(k))
        raw[4] = (redis_tier.FORMAT_VERSION + 1) & 0xFF  # the version byte after the magic
        client.set(k, bytes(raw))
    reader = Assembler(template="qwen2.5", cache=cache_for(redis_server, namespace="t6"))
    r = reader.assemble(TURNS[2])
    same_as_cold(r, TURNS[2])
    assert {s.source for s in r.segments} == {"fresh"}
    assert reader.cache.metrics().faults["version"] + reader.cache.metrics().faults["garbage"] >= 1


@pytest.mark.parametrize("template, text", [("gpt-oss", "<|constrain|>"), ("qwen2.5", "<|im_end|>")])
def test_a_prompt_with_escaped_user_text_is_never_extended_from_the_cache(template: str, text: str) -> None:
    # Hypothesis found (test_segment_properties, a long-lived shared assembler) a prompt with escaped
    # user text written to the cache, whose entries do not record escaped spans; a later prompt
    # extended from it let the user's text become a control token. Such prompts are not stored now.
    asm = Assembler(template=template)
    first = asm.assemble({"messages": [{"role": "user", "content": text}]})
    assert first.escaped
    later = asm.assemble({"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "0"},
                                       {"role": "user", "content": "0"}]})
    assert later.escaped
    assert np.array_equal(later.token_ids, asm.tokenizer.encode(later.text, later.escaped))
    assert np.array_equal(later.token_ids, Assembler(template=template, cache=None).assemble(
        {"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "0"},
                      {"role": "user", "content": "0"}]}).token_ids)
