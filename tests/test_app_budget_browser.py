"""The budget controls in a real browser: `workbench app` in a subprocess, the system Chromium driven
by Playwright. A user lowers the context window below the prompt and sees the overflow struck
through with the header line, picks a truncation policy and sees the dropped messages struck, and
types a bad reserve and sees the error beside the box while the view keeps the last good prompt."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import ROOT, AppServer, open_page, serving

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 30_000   # a fresh server's first page loads Panel's bundle (slow on a busy 2-core machine)
UPDATE_MS = 10_000


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[AppServer]:  # type: ignore[no-untyped-def]
    home: Path = tmp_path_factory.mktemp("budget-home")
    with serving("sample_sessions/coding_corrections.json", "--sessions", str(home / "sessions"),
                 env={"WORKBENCH_HOME": str(home)}, startup_s=120) as app:
        yield app


def test_overflow_is_struck_through_and_bad_values_show_inline(browser, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    try:
        note = page.locator(".wb-overflow-note")
        expect(page.locator(".wb-overflow")).to_have_count(0)          # 3.6k tokens fit the template's window
        expect(page.locator(".wb-note-context_window")).to_contain_text("32,768 tokens · from template qwen2.5")

        # No truncation, and a window below the prompt's size: all of it shown, the overflow struck.
        page.get_by_label("Truncation").select_option(label="none: show all")
        window = page.get_by_label("Context window (tokens)")
        window.fill("2000")
        window.press("Enter")
        expect(note).to_contain_text("tokens over the window: the struck-through part would not fit",
                                     timeout=UPDATE_MS)
        over = page.locator(".wb-struck-over")
        expect(over.first).to_be_visible()
        body = over.last.locator(":scope > div").last
        assert "line-through" in body.evaluate("e => getComputedStyle(e).textDecorationLine")
        expect(over.last.locator(".wb-seg-label")).to_contain_text("over the window")
        expect(page.locator(".wb-note-context_window")).to_contain_text("2,000 tokens · from session file")
        expect(page.locator(".wb-struck-dropped")).to_have_count(0)
        struck = int(note.inner_text().split(" tokens over")[0].replace(",", ""))
        assert struck > 0
        labels = over.locator(".wb-seg-label").all_text_contents()   # (off-screen ones too)
        total = sum(int(re.search(r"(\d+) tokens \[", t).group(1)) for t in labels)  # type: ignore[union-attr]
        assert total == struck, labels                                         # the struck segments hold those tokens

        # The summary line follows (SUMMARY_MS later): the same input budget, over by the same tokens.
        expect(page.locator(".wb-app-header")).to_contain_text(re.compile(rf"/1500 · over by {struck}\b"),
                                                               timeout=UPDATE_MS)
        if os.environ.get("WORKBENCH_SCREENSHOTS") == "1":     # docs/workbench.md's picture
            # Segments above lay out as they come into view (content-visibility): scroll until it holds.
            over.first.evaluate("""async (e) => { const v = e.closest('.wb-token-view');
                for (let i = 0; i < 5; i++) {
                  v.scrollTop += e.getBoundingClientRect().top - v.getBoundingClientRect().top - 160;
                  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))); } }""")
            page.screenshot(path=str(ROOT / "docs" / "images" / "app-overflow.png"))

        # A truncating policy: the messages it drops are struck through, nothing is over.
        page.get_by_label("Truncation").select_option(label="sliding")
        expect(note).to_contain_text("sliding truncation drops", timeout=UPDATE_MS)
        expect(page.locator(".wb-struck-dropped").first).to_be_visible()
        expect(page.locator(".wb-struck-over")).to_have_count(0)
        dropped = page.locator(".wb-struck-dropped").count()
        # 2,308 tokens dropped: all but the last of them folded into one line that counts them.
        folded = page.locator(".wb-kind-folded")
        expect(folded).to_have_count(1)
        in_fold = re.search(r"⋯ ([\d,]+) earlier message", folded.inner_text())
        assert in_fold, folded.inner_text()
        assert f"drops {dropped + int(in_fold.group(1).replace(',', ''))} message(s)" in note.inner_text()

        # A reserve the window cannot hold: said beside the box; the view keeps the last good prompt.
        reserve = page.get_by_label("Reserve for the reply (tokens)")
        reserve.fill("2500")
        reserve.press("Enter")
        expect(page.locator(".wb-note-reserve .wb-budget-error")).to_contain_text(
            "the reserve (2,500) leaves no room for input", timeout=UPDATE_MS)
        reserve.fill("-3")
        reserve.press("Enter")
        expect(page.locator(".wb-note-reserve .wb-budget-error")).to_contain_text("must be zero or more")
        expect(page.locator(".wb-struck-dropped")).to_have_count(dropped)
        expect(note).to_contain_text("sliding truncation drops")
        # A good value clears the error and applies.
        reserve.fill("100")
        reserve.press("Enter")
        expect(page.locator(".wb-note-reserve")).to_contain_text("100 tokens · session file (max_tokens)",
                                                                 timeout=UPDATE_MS)
        expect(page.locator(".wb-budget-error")).to_have_count(0)

        # summary-slot (issue 33): the page shows the prompt sent. The summary message the policy
        # sends in place of the dropped ones is there, unstruck and said to be the policy's; the
        # dropped ones say they are not sent and show no offsets; the unstruck segments add up to
        # the header's total.
        page.get_by_label("Truncation").select_option(label="summary-slot")
        expect(note).to_contain_text("a summary message of", timeout=UPDATE_MS)
        summary = page.locator(".wb-summary")
        expect(summary).to_have_count(1)
        expect(summary.locator(".wb-seg-label")).to_contain_text("inserted by the summary-slot truncation policy")
        expect(summary.locator(".wb-seg-label")).to_contain_text("seq -1")
        gone = page.locator(".wb-struck-dropped .wb-seg-label").all_text_contents()
        assert gone and all("not sent" in t and "[" not in t for t in gone), gone
        shown = page.locator(".wb-seg:not(.wb-overflow):not(.wb-kind-folded) > .wb-seg-label").all_text_contents()
        total = re.search(r" (\d+) tokens · ", page.locator(".wb-header").first.inner_text())
        assert total, page.locator(".wb-header").first.inner_text()
        counts = [re.search(r"(\d+) tokens \[(\d+):(\d+)\]", t) for t in shown]
        assert all(counts), shown
        assert sum(int(c.group(1)) for c in counts if c) == int(total.group(1))
        # Their offsets, in the prompt sent, follow one another from 0 to the total (after a patch
        # that moved the segments it kept from the sliding view).
        spans = [(int(c.group(2)), int(c.group(3))) for c in counts if c]
        assert spans[0][0] == 0 and spans[-1][1] == int(total.group(1))
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), spans
    finally:
        page.close()
    assert not errors, f"errors in the page: {errors}"
