"""The Compare tab of `workbench app` in a real browser (the system Chromium, headless, through
Playwright): open it, pick another template for B, see both sides, their special tokens, a
non-zero delta and each side's cache figures; a template that fails on B shows inline on B while A
still shows. Every wait is time-boxed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, checked_page, serving

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 15_000
UPDATE_MS = 5_000
COMPARE_MS = 30_000     # both sides assembled, then every turn of each for the cache figures


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[AppServer]:  # type: ignore[no-untyped-def]
    home: Path = tmp_path_factory.mktemp("workbench-home")
    with serving("sample_sessions/support_chat.json", env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


@pytest.fixture
def page(browser, server: AppServer):  # type: ignore[no-untyped-def]
    yield from checked_page(browser, server.url, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)


def open_compare(page) -> None:  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text="Compare").first.click()
    expect(page.locator(".wb-cmp-grid")).to_be_visible(timeout=COMPARE_MS)


def test_compare_another_template_side_by_side(page) -> None:  # type: ignore[no-untyped-def]
    open_compare(page)
    a, b = page.locator(".wb-cmp-side-a"), page.locator(".wb-cmp-side-b")
    expect(a).to_contain_text("A: qwen2.5")
    expect(b).to_contain_text("B: qwen3")                 # the template after the live one
    page.get_by_label("B", exact=True).select_option("llama3")
    expect(b).to_contain_text("B: llama3", timeout=COMPARE_MS)
    expect(b).to_contain_text("Δ -")                      # llama3 counts fewer tokens here (and truncates)
    grid = page.locator(".wb-cmp-grid")
    expect(grid.locator(".wb-cmp-b .wb-cmp-special", has_text="<|start_header_id|>").first).to_be_visible()
    expect(grid.locator(".wb-cmp-a .wb-cmp-special", has_text="<|im_start|>").first).to_be_visible()
    expect(grid.locator(".wb-cmp-b .wb-cmp-special", has_text="<|im_start|>")).to_have_count(0)
    # Both token totals, and the count table's total row says the same delta.
    total_a = int(re.sub(r"\D", "", a.locator(".wb-cmp-total").inner_text()))
    total_b = int(re.sub(r"\D", "", b.locator(".wb-cmp-total").inner_text()))
    assert total_a > 0 and total_b > 0 and total_a != total_b
    all_row = page.locator(".wb-cmp-counts tr", has_text="all").first
    expect(all_row).to_contain_text(f"{total_b - total_a:+,}")
    # Each side's cache figures, every turn simulated.
    cache = page.locator(".wb-cmp-cache-table")
    expect(cache).to_be_visible(timeout=COMPARE_MS)
    for provider in ("openai", "anthropic", "vllm", "sglang"):
        expect(cache).to_contain_text(provider)


def test_a_template_that_fails_on_b_shows_inline_and_a_still_shows(page) -> None:  # type: ignore[no-untyped-def]
    open_compare(page)
    page.get_by_label("B", exact=True).select_option("mistral-v3")   # tool call ids this session's are not
    b = page.locator(".wb-cmp-side-b")
    expect(b.locator(".wb-cmp-error")).to_contain_text("Tool call ids must be", timeout=COMPARE_MS)
    expect(page.locator(".wb-cmp-side-a .wb-cmp-total")).to_be_visible()
    expect(page.locator(".wb-cmp-a .wb-cmp-tok").first).to_be_visible()
    # Another tokenizer instead: both sides again.
    page.get_by_label("B differs in", exact=True).select_option("tokenizer")
    page.get_by_label("B", exact=True).select_option("o200k_base")
    expect(b).to_contain_text("o200k_base", timeout=COMPARE_MS)
    expect(b.locator(".wb-cmp-error")).to_have_count(0)
    # The live view keeps working meanwhile: the token view still shows the session.
    expect(page.locator(".wb-seg").first).to_be_attached()


def test_pin_a_version_then_edit_and_compare(page) -> None:  # type: ignore[no-untyped-def]
    open_compare(page)
    page.get_by_role("button", name="Pin this version").click()
    expect(page.get_by_label("B differs in", exact=True)).to_have_value("version", timeout=UPDATE_MS)
    b = page.locator(".wb-cmp-side-b")
    expect(b).to_contain_text("pinned at", timeout=COMPARE_MS)
    expect(page.locator(".wb-cmp-legend")).to_contain_text("the same prompt on both sides")
    box = page.locator(".wb-me-row").last.locator("textarea[data-field=content]")
    box.fill("A last message typed after the pin.")
    expect(page.locator(".wb-cmp-a")).to_contain_text("typed", timeout=COMPARE_MS)
    expect(page.locator(".wb-cmp-legend")).not_to_contain_text("the same prompt on both sides")
    expect(page.locator(".wb-cmp-a .wb-cmp-chg, .wb-cmp-a .wb-cmp-only").first).to_be_visible()
    # The file as saved differs the same way (nothing was saved since).
    page.get_by_label("B", exact=True).select_option("saved file")
    expect(b).to_contain_text("saved file", timeout=COMPARE_MS)
    expect(page.locator(".wb-cmp-a")).to_contain_text("typed")
