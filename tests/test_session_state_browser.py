"""State belongs to a session (issue 33): after a session switch, a shared link, or an error fixed,
nothing of the previous state stays on screen. In a real browser (Playwright, the system Chromium)
against `workbench app` in a subprocess.

The switch test is driven by the app's own model of what is session-bound (`WorkbenchApp._session_bound`:
each such element carries the class `wb-session-bound`), not by a list of element names here: every
one of them, after the switch, must read as it does on a page that opened that session fresh."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, open_page, serving

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 60_000
STEP_MS = 20_000
GENERATE_MS = 120_000     # loading tiny, prefill and decoding, on a shared CPU
A, B = "tool_agent.json", "openai_minimal.json"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("workbench-home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[AppServer]:
    # No session named: a page opens the one the last page opened (the fresh page of B below).
    with serving("--sessions", str(home / "sessions"), env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


def tab(page, name: str) -> None:  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text=name).first.click()


# An element's text with its shadow DOM's (Panel renders each pane in one; innerText stops at it),
# the values of its boxes included, its stylesheets left out.
DEEP_TEXT = """el => { const t = (n) => {
  if (n.nodeType === 3) return n.textContent;
  if (n.nodeType !== 1 || n.tagName === "STYLE" || n.tagName === "SCRIPT") return "";
  let s = (n.tagName === "INPUT" || n.tagName === "TEXTAREA") ? " " + n.value + " " : "";
  if (n.shadowRoot) for (const c of n.shadowRoot.childNodes) s += t(c);
  for (const c of n.childNodes) s += t(c);
  return s; }; return t(el); }"""


def bound(page) -> dict[str, tuple[bool, str]]:  # type: ignore[no-untyped-def]
    """Each session-bound element in the page (by its `wb-bound-K` name): whether it shows, and its text."""
    els = page.locator(".wb-session-bound")
    out = {}
    for k in range(els.count()):
        el = els.nth(k)
        name = next(c for c in (el.get_attribute("class") or "").split() if c.startswith("wb-bound-"))
        # Its own display, not whether its tab is the one open: a Run tab's reply counts while the
        # Tokens tab shows.
        shown = el.evaluate("e => getComputedStyle(e).display !== 'none'")
        out[name] = (shown, " ".join(el.evaluate(DEEP_TEXT).split()) if shown else "")
    return out


def session_messages(name: str) -> list:
    from workbench.ui.document import SessionDocument
    from workbench.ui.state import sample_sessions
    doc = SessionDocument.load(sample_sessions()[name])
    return list(doc.messages(doc.turn_count))


def cold_counts(name: str) -> list[int]:
    """Each message's tokens in a cold assembly of the session's last turn (qwen2.5, the app's default)."""
    from workbench import Assembler, load_session
    from workbench.ui.state import sample_sessions
    result = Assembler(template="qwen2.5").assemble(load_session(sample_sessions()[name]).turn(None))
    return [sum(s.token_count for s in result.segments if s.seq == m.sequence) for m in result.conversation.messages]


def pick(page, label: str) -> None:  # type: ignore[no-untyped-def]
    page.get_by_label("Session").select_option(label=label)
    expect(page.locator(".wb-file-status")).to_contain_text(label, timeout=STEP_MS)


def test_switching_session_leaves_nothing_of_the_previous_one(browser, server: AppServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.rmtree(home / "autosave", ignore_errors=True)
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
    try:
        pick(page, A)
        rows = page.locator(".wb-me-row")
        # What the user did on A: a tool-schema error, a share, an export, a reply generated (not
        # appended), a message deleted (its "deleted message N · Undo" notice).
        page.locator(".bk-tab", has_text="Tools").first.click()
        page.get_by_label("Tool schemas (JSON list)").fill("[{")
        expect(page.locator(".wb-session-bound").filter(has_text="line 1")).to_have_count(1, timeout=STEP_MS)
        page.get_by_role("button", name="Share").click()
        expect(page.locator(".wb-share-link input")).not_to_have_value("", timeout=STEP_MS)
        page.get_by_label("Export a bundle to (production)").fill("bundle-a")
        page.get_by_role("button", name="Export", exact=True).click()
        expect(page.locator(".wb-export")).to_contain_text("bundle-a", timeout=GENERATE_MS)
        tab(page, "Run")
        page.get_by_label("Max new tokens").fill("4")
        page.get_by_role("button", name="Generate", exact=True).click()
        expect(page.get_by_role("button", name="Append this reply to the session")).to_be_visible(
            timeout=GENERATE_MS)
        tab(page, "Tokens")
        n = rows.count()
        rows.first.locator("button[title='delete this message']").click()
        expect(rows).to_have_count(n - 1, timeout=STEP_MS)
        notice = page.locator(".wb-me-notice")
        expect(notice).to_contain_text("deleted message 0")
        before = bound(page)

        pick(page, B)
        expect(page.locator(".wb-me-notice")).to_be_hidden()
        fresh = open_page(browser, server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
        try:
            expect(fresh.locator(".wb-file-status")).to_contain_text(B, timeout=STEP_MS)
            # The same tab open below the editor (its row of tabs draws the open one only).
            fresh.locator(".bk-tab", has_text="Tools").first.click()
            expect(fresh.get_by_label("Tool schemas (JSON list)")).to_be_visible()
            want = bound(fresh)
        finally:
            fresh.context.close()
        assert len(want) >= 15, want           # the model covers the status lines, alerts and outputs
        after = bound(page)
        assert after == want, {k: (after.get(k), want.get(k)) for k in {*after, *want} if after.get(k) != want.get(k)}
        # ...and the switch had something to clear: what A's actions put on screen.
        changed = [k for k in want if before.get(k) != want[k]]
        assert len(changed) >= 4, before
        assert page.locator(".wb-share-link input").input_value() == ""
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"


def test_a_shared_link_is_named_as_a_link_not_as_a_file_here(browser, server: AppServer, home: Path) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
    try:
        pick(page, B)
        page.get_by_role("button", name="Share").click()
        expect(page.locator(".wb-share-link input")).to_have_value(re.compile(r"\?state="), timeout=STEP_MS)
        url = page.locator(".wb-share-link input").input_value()
        assert "?state=" in url
    finally:
        page.context.close()
    shared = open_page(browser, url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS, local=server.url)
    try:
        picker = shared.get_by_label("Session")
        # The sample of the same name is in the list; the link's session is not shown as it.
        expect(picker).to_have_value(f"{B} (from a shared link, not saved)")
        expect(shared.locator(".wb-file-status")).to_contain_text("opened from a shared link")
        pick(shared, A)                                  # another session: the link's note goes
        expect(shared.locator(".wb-file-status")).not_to_contain_text("shared link")
    finally:
        shared.context.close()
    assert not errors, f"errors in the page: {errors}"


def test_a_json_error_goes_when_the_text_is_valid_again(browser, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
    try:
        pick(page, A)
        page.locator(".bk-tab", has_text="Tools").first.click()
        box = page.get_by_label("Tool schemas (JSON list)")
        good = box.input_value()
        assert json.loads(good)
        box.fill(good[:-1])                              # one character short: not JSON
        alert = page.locator(".wb-session-bound").filter(has_text="line")
        expect(alert).to_have_count(1, timeout=STEP_MS)
        box.fill(good)                                   # back to exactly what applies
        expect(alert).to_have_count(0, timeout=STEP_MS)
        box.fill(good[:-1])
        expect(alert).to_have_count(1, timeout=STEP_MS)
        box.fill(json.dumps(json.loads(good), indent=1))  # valid, and new text
        expect(alert).to_have_count(0, timeout=STEP_MS)
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"


def test_counts_show_after_a_reload_and_a_new_rows_summary_follows_typing(browser, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
    try:
        pick(page, "coding_corrections.json")
        first = page.locator(".wb-me-count").first
        # The new rows come with this session's counts (never the last one's, by row number).
        expect(page.locator(".wb-me-row")).to_have_count(len(session_messages("coding_corrections.json")))
        expect(first).to_have_text(f"{cold_counts('coding_corrections.json')[0]} tok", timeout=STEP_MS)
        counts = page.locator(".wb-me-count").evaluate_all("cs => cs.map(c => c.textContent)")
        # A reload opens the same session (the last one opened) with its counts, before any edit.
        page.reload()
        expect(page.locator(".wb-seg").first).to_be_visible(timeout=FIRST_VIEW_MS)
        expect(page.locator(".wb-file-status")).to_contain_text("coding_corrections.json")
        expect(first).to_have_text(re.compile(r"^\d+ tok$"), timeout=STEP_MS)
        assert page.locator(".wb-me-count").evaluate_all("cs => cs.map(c => c.textContent)") == counts
        # A new message's row says what is typed in it, as it is typed.
        rows = page.locator(".wb-me-row")
        n = rows.count()
        page.get_by_role("button", name="+ add").click()
        expect(rows).to_have_count(n + 1, timeout=STEP_MS)
        rows.last.locator("textarea[data-field=content]").press_sequentially("why does it fail", delay=20)
        expect(rows.last.locator(".wb-me-preview")).to_have_text(f"{n} · why does it fail")
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"
