"""The prefix diff's Fix button in a real browser (Playwright driving the system Chromium) against
`workbench app` in a subprocess: clicking it changes the Cache tab's cached tokens, and Undo takes
the fix back. The button and the result say the fix in words, a 0 says why (the simulation's
reason), and after Undo the result no longer claims the fix is applied (issue 33)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, open_page, serving

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 60_000   # a fresh server's first page loads Panel's bundle (slow on a busy machine)
UPDATE_MS = 60_000       # the panels of every turn, and the fix measured over every turn, on a busy machine
LABEL = "Move the volatile text (a timestamp and an id) after the stable prefix"   # the button, in words


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[AppServer]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("fix-buttons")
    with serving("sample_sessions/timestamp_system.json", "--sessions", str(base / "sessions"),
                 env={"WORKBENCH_HOME": str(base / "home")}, startup_s=120) as app:
        yield app


def tab(page, name: str):  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text=name).first.click()


def vllm_cached_now(page):  # type: ignore[no-untyped-def]
    """The Cache tab's "cached now" cell of the vllm row."""
    return page.locator(".wb-providers tr", has_text="vllm").first.locator("td").nth(1)


def test_clicking_a_fix_changes_the_cached_tokens_in_the_cache_tab(browser, server: AppServer,  # type: ignore[no-untyped-def]
                                                                   tmp_path: Path) -> None:
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    try:
        tab(page, "Cache")
        cell = vllm_cached_now(page)
        expect(cell).to_have_text(re.compile(r"^[\d,]+$"), timeout=UPDATE_MS)
        before = cell.inner_text()
        tab(page, "Prefix diff")
        expect(page.locator(".wb-causes")).to_contain_text("volatile_content", timeout=UPDATE_MS)
        page.get_by_role("button", name=LABEL).click()
        result = page.locator(".wb-fix-result")
        expect(result).to_contain_text(f"{LABEL}: applied (Undo takes it back)", timeout=UPDATE_MS)
        row = result.locator(".wb-fix-cached tr", has_text="vllm").first.locator("td").nth(1).inner_text()
        was, now = (x.strip() for x in row.split("→"))
        assert was == before and now != before, row
        tab(page, "Cache")
        expect(vllm_cached_now(page)).to_have_text(now, timeout=UPDATE_MS)     # the figure the fix reported
        page.locator(".wb-undo button, button.wb-undo, .wb-undo").first.click()
        expect(vllm_cached_now(page)).to_have_text(before, timeout=UPDATE_MS)  # Undo: the session as it was
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"


def test_after_undo_the_fix_result_no_longer_says_applied_and_zeros_say_why(browser, server: AppServer,  # type: ignore[no-untyped-def]
                                                                           tmp_path: Path) -> None:
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    try:
        tab(page, "Cache")
        # The session's prompts are under 1,024 tokens: OpenAI's 0 says so, under the figure.
        openai = page.locator(".wb-providers tr", has_text="openai").first.locator("td").nth(1)
        expect(openai).to_contain_text("under OpenAI's 1,024-token minimum", timeout=UPDATE_MS)
        tab(page, "Prefix diff")
        button = page.get_by_role("button", name=LABEL)
        expect(button).to_be_visible(timeout=UPDATE_MS)
        button.click()
        status = page.locator(".wb-fix-status")
        expect(status).to_contain_text(f"{LABEL}: applied (Undo takes it back)", timeout=UPDATE_MS)
        # "0 → 0" carries the simulation's reason.
        openai_fix = status.locator(".wb-fix-cached tr", has_text="openai").first.locator("td").nth(1)
        expect(openai_fix).to_contain_text("0 → 0", timeout=UPDATE_MS)
        expect(openai_fix.locator(".wb-why")).to_contain_text("OpenAI's 1,024-token minimum", timeout=UPDATE_MS)
        page.locator(".wb-undo button, button.wb-undo, .wb-undo").first.click()
        expect(status).to_contain_text(f"{LABEL}: undone: the session is as it was before the fix", timeout=UPDATE_MS)
        expect(status).not_to_contain_text("applied", timeout=UPDATE_MS)
        expect(status.locator(".wb-fix-cached")).to_have_count(0)          # the old figures are gone too
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"
