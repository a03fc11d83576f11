"""Issue 31's loop, end to end: the official SDKs call `workbench record`, which forwards to
`workbench serve-engine --model tiny`; every call is one log line holding the usage the engine
reported (its radix cache's cached tokens). The oracle for the usage is what each SDK itself
parsed from the engine's reply, not the recorder's reading of it. Then the same loop with
`workbench app --follow LOG` open in Chromium: each call shows up live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import openai
from engine_server import tiny_engine_server
from recorder_process import log_lines, recorder

SYSTEM = "You are a terse assistant. Answer in one word. " * 12      # a prefix long enough to be cached


def test_sdks_through_the_recorder_to_the_engine_log_the_engines_cached_tokens(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    reported: list[tuple[str, int, int]] = []         # (api, prompt tokens, cached) as each SDK parsed them
    with tiny_engine_server() as engine, recorder(engine.removesuffix("/v1"), log) as url:
        oai = openai.OpenAI(base_url=url + "/v1", api_key="sk-local", max_retries=0, timeout=120)
        claude = anthropic.Anthropic(base_url=url, api_key="sk-local", max_retries=0, timeout=120)
        msgs: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Name a colour."}]
        for turn in range(2):
            r = oai.chat.completions.create(model="tiny", messages=msgs, max_tokens=4, temperature=0)
            assert r.usage is not None and r.usage.prompt_tokens_details is not None
            details = r.usage.prompt_tokens_details
            reported.append(("chat.completions", r.usage.prompt_tokens, details.cached_tokens or 0))
            msgs += [{"role": "assistant", "content": r.choices[0].message.content or ""},
                     {"role": "user", "content": f"And another? ({turn})"}]
        stream = oai.chat.completions.create(model="tiny", messages=msgs, max_tokens=4, temperature=0, stream=True,
                                             stream_options={"include_usage": True})
        usage = [c.usage for c in stream if c.usage is not None][-1]
        reported.append(("chat.completions", usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0))

        resp = oai.responses.create(model="tiny", instructions=SYSTEM, input="Name a fruit.", max_output_tokens=4)
        assert resp.usage is not None
        reported.append(("responses", resp.usage.input_tokens, resp.usage.input_tokens_details.cached_tokens))
        done = None
        for ev in oai.responses.create(model="tiny", instructions=SYSTEM, input="Name a tree.", max_output_tokens=4,
                                       stream=True):
            if ev.type in ("response.completed", "response.incomplete"):   # incomplete: cut at max_output_tokens
                done = ev.response
        assert done is not None and done.usage is not None
        reported.append(("responses", done.usage.input_tokens, done.usage.input_tokens_details.cached_tokens))

        m = claude.messages.create(model="tiny", system=SYSTEM, max_tokens=4,
                                   messages=[{"role": "user", "content": "Name a city."}])
        reported.append(("messages", m.usage.input_tokens, m.usage.cache_read_input_tokens or 0))
        with claude.messages.stream(model="tiny", system=SYSTEM, max_tokens=4,
                                    messages=[{"role": "user", "content": "Name a river."}]) as s:
            final = s.get_final_message()
        reported.append(("messages", final.usage.input_tokens, final.usage.cache_read_input_tokens or 0))
        lines = log_lines(log, len(reported), timeout=60)

    assert len(lines) == len(reported)                       # one line per call, nothing else
    got = []
    for line in lines:
        u = line["response"]["usage"]
        if line["api"] == "chat.completions":
            got.append((line["api"], u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"]))
        elif line["api"] == "responses":
            got.append((line["api"], u["input_tokens"], u["input_tokens_details"]["cached_tokens"]))
        else:
            got.append((line["api"], u["input_tokens"], u.get("cache_read_input_tokens", 0)))
    assert got == reported
    # The engine's radix cache served the shared prefix: later calls report cached tokens.
    assert reported[1][2] > 0 and reported[2][2] > 0 and reported[4][2] > 0 and reported[6][2] > 0
    # The chat turns chained into one conversation by their prefix; the Responses and Messages calls
    # (new questions after the same system prompt) each started their own.
    cids = [line["conversation_id"] for line in lines]
    assert cids[0] == cids[1] == cids[2] and len(set(cids)) == 5
    assert [line["stream"] for line in lines] == [False, False, True, False, True, False, True]
    assert [(line["status"], line.get("error")) for line in lines] == [(200, None)] * len(lines)


# --------------------------------------------------------------------------- the live view
FIRST_VIEW_MS = 60_000     # a fresh app's first page loads Panel's bundle (slow on a busy 2-core machine)
UPDATE_MS = 20_000         # generous on a busy machine; the target (1 s) is benchmarks/bench_follow.py's


def test_the_app_follows_the_calls_the_sdks_make_through_the_recorder(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`workbench app --follow LOG` open in Chromium while the SDKs call the recorder in front of the
    engine: each call shows up live, as the next turn of its conversation or a new conversation at
    the top of the picker, with the cached tokens the engine reported beside the workbench's own."""
    from browser import open_page, serving
    from playwright.sync_api import expect

    log, home = tmp_path / "calls.jsonl", tmp_path / "home"
    errors: list[str] = []
    with tiny_engine_server() as engine, recorder(engine.removesuffix("/v1"), log) as url, \
            serving("--follow", str(log), "--sessions", str(home / "sessions"), env={"WORKBENCH_HOME": str(home)},
                    startup_s=120) as app:
        page = open_page(browser, app.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
        try:
            session, turn = page.get_by_label("Session"), page.get_by_label("Turn")
            view, call = page.locator(".wb-token-view"), page.locator(".wb-follow-call")
            oai = openai.OpenAI(base_url=url + "/v1", api_key="sk-local", max_retries=0, timeout=120)
            claude = anthropic.Anthropic(base_url=url, api_key="sk-local", max_retries=0, timeout=120)
            msgs: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Name a colour."}]
            reply = oai.chat.completions.create(model="tiny", messages=msgs, max_tokens=4,
                                                temperature=0).choices[0].message.content or ""
            cid = log_lines(log, 1)[0]["conversation_id"]
            first = session.locator("option").first
            expect(first).to_contain_text(f"{cid} — 1 call", timeout=UPDATE_MS)
            session.select_option(label=first.inner_text())
            expect(view).to_contain_text("Name a colour.", timeout=UPDATE_MS)
            for k in range(2):                 # the conversation goes on: each call is its next turn, live
                msgs += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"And another? ({k})"}]
                if k == 0:
                    r = oai.chat.completions.create(model="tiny", messages=msgs, max_tokens=4, temperature=0)
                    assert r.usage is not None and r.usage.prompt_tokens_details is not None
                    cached, reply = r.usage.prompt_tokens_details.cached_tokens, r.choices[0].message.content or ""
                else:                          # streamed
                    chunks = list(oai.chat.completions.create(model="tiny", messages=msgs, max_tokens=4,
                                                              temperature=0, stream=True,
                                                              stream_options={"include_usage": True}))
                    usage = [c.usage for c in chunks if c.usage is not None][-1]
                    assert usage.prompt_tokens_details is not None
                    cached = usage.prompt_tokens_details.cached_tokens
                expect(turn).to_have_value(str(k + 2), timeout=UPDATE_MS)
                expect(view).to_contain_text(f"And another? ({k})")
                assert cached and cached > 0
                expect(call).to_contain_text(f"prompt_tokens_details.cached_tokens {cached}", timeout=UPDATE_MS)
            # Other APIs, other conversations: each at the top of the picker as it comes.
            oai.responses.create(model="tiny", instructions=SYSTEM, input="Name a fruit.", max_output_tokens=4)
            rid = log_lines(log, 4)[3]["conversation_id"]
            expect(session.locator("option").first).to_contain_text(f"{rid} — 1 call", timeout=UPDATE_MS)
            claude.messages.create(model="tiny", system=SYSTEM, max_tokens=4,
                                   messages=[{"role": "user", "content": "Name a city."}])
            mid = log_lines(log, 5)[4]["conversation_id"]
            expect(session.locator("option").first).to_contain_text(f"{mid} — 1 call", timeout=UPDATE_MS)
            assert session.input_value().startswith(f"{cid} — 3 calls")      # the one shown stays shown
            expect(turn).to_have_value("3")
        finally:
            page.context.close()
    assert not errors, f"errors in the page: {errors}"
