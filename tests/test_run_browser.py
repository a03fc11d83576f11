"""The Run tab in a real browser (Playwright, the system Chromium): Generate on the synthetic `tiny`
model shows the reply, marked synthetic, and writes nothing to the session until "Append this reply"
is clicked; then the reply is in the message editor; after the next user message, Generate again shows
how much of the new prompt the engine's KV cache reused. A bad engine shows inline and the page
keeps running."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, autosave_settled, clear_autosaves, free_port, from_the_file, open_page, serving

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 15_000
STEP_MS = 5_000
GENERATE_MS = 120_000     # loading tiny, prefill and decoding, on a shared CPU


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workbench-home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[AppServer]:
    with serving("sample_sessions/openai_minimal.json", env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


@pytest.fixture
def page(browser, server: AppServer, home: Path):  # type: ignore[no-untyped-def]
    # Each test starts from the file, not from the reply another test appended (its autosave):
    # browser.py's autosave_settled and from_the_file.
    clear_autosaves(home)
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
    from_the_file(page, STEP_MS)
    yield page
    autosave_settled(page, STEP_MS)
    page.context.close()
    assert not errors, f"errors in the page: {errors}"


def run_tab(page):  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text="Run").first.click()
    return page.locator(".wb-run")


def generate(page) -> None:  # type: ignore[no-untyped-def]
    page.get_by_role("button", name="Generate", exact=True).click()


def test_generate_appends_the_reply_and_the_next_turn_shows_the_reuse(page) -> None:  # type: ignore[no-untyped-def]
    rows = page.locator(".wb-me-row")
    expect(rows).to_have_count(4)
    out = run_tab(page)
    expect(out).to_contain_text("Generate writes the next assistant reply")
    page.get_by_label("Max new tokens").fill("8")
    generate(page)
    append = page.get_by_role("button", name="Append this reply to the session")
    expect(append).to_be_visible(timeout=GENERATE_MS)
    expect(out).to_contain_text("8 tokens")
    expect(out).to_contain_text("held nothing of this session yet")
    expect(out.locator(".wb-run-synthetic")).to_contain_text("this reply means nothing")
    # Shown, not written: the session has its four messages, and no autosave is pending.
    expect(rows).to_have_count(4)
    expect(page.locator(".wb-file-status")).not_to_contain_text("edited")
    append.click()
    expect(out.locator(".wb-run-appended")).to_contain_text("appended to the session as message 4",
                                                          timeout=STEP_MS)
    expect(append).to_be_hidden()
    reply = out.locator(".wb-run-reply").inner_text()
    expect(rows).to_have_count(5)
    rows.last.locator(".wb-me-head").click()                     # open the appended message
    expect(rows.last.locator("textarea[data-field=content]")).to_have_value(reply)
    expect(page.get_by_label("Turn")).to_have_value("3")          # the reply opened a new turn
    # The next user message, then Generate again: the engine held the prompt and the reply.
    page.get_by_role("button", name="+ add").click()
    expect(rows).to_have_count(6)
    rows.last.locator("textarea[data-field=content]").fill("Thanks. Why is that?")
    expect(page.locator(".wb-token-view")).to_contain_text("Thanks. Why is that?", timeout=STEP_MS)
    generate(page)
    expect(append).to_be_visible(timeout=GENERATE_MS)
    reuse = out.locator(".wb-run-reuse").inner_text()
    m = re.search(r"Prompt: ([\d,]+) tokens: ([\d,]+) reused", reuse)
    assert m, reuse
    total, reused = (int(x.replace(",", "")) for x in m.groups())
    assert 0 < reused < total
    assert "The engine held" in reuse and "(the previous prompt and its reply)" in reuse
    expect(rows).to_have_count(6)                                 # not appended until clicked
    append.click()
    expect(out.locator(".wb-run-appended")).to_contain_text("message 6", timeout=STEP_MS)
    expect(rows).to_have_count(7)


def test_bad_engines_show_inline_and_the_page_keeps_running(page, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_tab(page)
    page.get_by_label("Engine").select_option("a model folder or .gguf file")
    box = page.get_by_label("Model folder, .gguf file or server URL")
    box.fill(str(tmp_path / "missing-model"))
    box.press("Enter")
    generate(page)
    expect(out.locator(".wb-run-error")).to_contain_text("no such folder", timeout=GENERATE_MS)
    page.get_by_label("Engine").select_option("a remote server (OpenAI-compatible URL)")
    box.fill(f"http://127.0.0.1:{free_port()}")
    box.press("Enter")
    generate(page)
    expect(out.locator(".wb-run-error")).to_contain_text("cannot reach the server", timeout=GENERATE_MS)
    expect(page.locator(".wb-me-row")).to_have_count(4)          # nothing appended
    # The page still edits and assembles.
    last = page.locator(".wb-me-row").last.locator("textarea[data-field=content]")
    last.fill('"Still here?"')          # this message's content is a list of parts: edited as JSON
    expect(page.locator(".wb-token-view")).to_contain_text("Still here?", timeout=STEP_MS)


def test_cancel_stops_the_generation_and_appends_nothing(page) -> None:  # type: ignore[no-untyped-def]
    out = run_tab(page)
    page.get_by_label("Max new tokens").fill("400")
    generate(page)
    expect(out.locator(".wb-run-status")).to_contain_text(" of 400 tokens", timeout=GENERATE_MS)
    page.get_by_role("button", name="Cancel", exact=True).click()
    expect(out.locator(".wb-run-error")).to_contain_text("generation cancelled", timeout=STEP_MS * 4)
    expect(page.locator(".wb-me-row")).to_have_count(4)
