"""Issue 17's state bugs, each in a real browser (Playwright driving the system Chromium) against
`workbench app` in a subprocess: what a user did, what they should see (and what the server logs)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, open_page, serving, wait_for

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 60_000   # a fresh server's first page loads Panel's bundle (slow on a busy machine)
UPDATE_MS = 20_000
SLOW_S = 300             # the panels of the 1,000-message session on a busy 2-core machine


def load_session_messages(name: str) -> list:
    from workbench.ui.document import SessionDocument
    from workbench.ui.state import sample_sessions
    doc = SessionDocument.load(sample_sessions()[name])
    return list(doc.messages(doc.turn_count))


def tab(page, name: str):  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text=name).first.click()


def test_closing_the_tab_mid_job_stops_the_work_without_a_traceback(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Sessions destroyed half a second after their tab closes (Bokeh's default is 15-32 s); the
    # controller says on stderr when a page's session is destroyed and when a closed page's worker
    # ends (WORKBENCH_TRACE).
    server = AppServer("sample_sessions/bench_1000.json", "--sessions", str(tmp_path / "sessions"),
                       env={"WORKBENCH_HOME": str(tmp_path / "home"), "WORKBENCH_SESSION_EXPIRY_MS": "500",
                            "WORKBENCH_TRACE": "1"}, startup_s=120)
    errors: list[str] = []
    try:
        page = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
        # Mistral v7 over 500 turns: the Cache tab's job runs for 12 s on a quiet machine, so that
        # the tab closes while it runs (closing it after the job would test nothing).
        page.get_by_label("Template", exact=True).select_option("mistral-v7")
        expect(page.locator(".wb-app-header")).to_contain_text("mistral-v7", timeout=UPDATE_MS)
        tab(page, "Cache")
        expect(page.locator(".wb-panels-status")).to_contain_text(re.compile(r"turn \d+ of \d+"),
                                                                   timeout=SLOW_S * 1000)
        # (The server's readiness probe made a session of its own, destroyed unused.)
        destroyed = "closed page: the session was destroyed"
        before = server.stderr(None).count(destroyed)
        page.context.close()
        wait_for(lambda: server.stderr(None).count(destroyed) > before, SLOW_S,
                 f"the closed page's session to be destroyed; stderr: {server.stderr()}")
        last = server.stderr(None).split(destroyed)[-1].splitlines()[0]
        assert "worker running" in last, f"the job ended before the tab closed: {server.stderr()}"
        wait_for(lambda: "closed page: the panels' worker ended" in server.stderr(None), SLOW_S,
                 f"the closed page's worker to end; stderr: {server.stderr()}")
    finally:
        code = server.stop()
    log = server.stderr(None)
    assert "Traceback" not in log and "AttributeError" not in log, log[-3000:]
    assert code == 0, f"the server did not stop cleanly ({code}): {log[-2000:]}"
    assert not errors, f"errors in the page: {errors}"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[AppServer]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("state-bugs")
    with serving("--sessions", str(base / "sessions"), env={"WORKBENCH_HOME": str(base / "home")},
                 startup_s=120) as app:
        yield app


def test_the_export_name_follows_the_session_opened_and_saved(browser, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    try:
        export = page.get_by_label("Export a bundle to (production)")
        page.get_by_label("Session").select_option(label="tool_agent.json")
        expect(export).to_have_value("tool_agent", timeout=UPDATE_MS)
        save = page.get_by_label("Save to (a .json name in the app's folder)")
        expect(save).to_have_value("tool_agent-edited.json")      # never the shipped sample's name
        save.fill("renamed.json")
        save.press("Enter")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.locator(".wb-file-status")).to_contain_text("saved to", timeout=UPDATE_MS)
        expect(export).to_have_value("renamed", timeout=UPDATE_MS)
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"


def test_a_template_that_renders_nothing_warns_in_the_summary_and_diagnostics(  # type: ignore[no-untyped-def]
        browser, server: AppServer) -> None:
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    try:
        page.get_by_placeholder("paste a Jinja chat template here").fill("{# nothing #}")
        expect(page.locator(".wb-app-header")).to_contain_text("rendered no text", timeout=UPDATE_MS)
        tab(page, "Diagnostics")
        expect(page.locator(".wb-diags")).to_contain_text("empty_render", timeout=UPDATE_MS)
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"


def test_deleting_every_message_says_add_one_and_every_view_agrees(browser, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    page = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    try:
        page.get_by_label("Session").select_option(label="openai_minimal.json")
        rows = page.locator(".wb-me-row")
        expect(rows).to_have_count(4, timeout=UPDATE_MS)
        for left in (3, 2, 1, 0):
            rows.first.locator("button[title='delete this message']").click()
            expect(rows).to_have_count(left)
        alert = page.locator(".wb-main-alert")
        expect(alert).to_contain_text("no messages", timeout=UPDATE_MS)
        expect(alert).to_contain_text("add the user's message")     # what to do, not a template's error
        expect(alert).not_to_contain_text("no element 0")
        # The summary line counts the prompt the token view shows (the last that assembled).
        view = page.locator(".wb-token-view .wb-header")
        shown = re.search(r"(\d+) tokens", view.inner_text())
        assert shown, view.inner_text()
        expect(page.locator(".wb-app-header")).to_contain_text(f"{shown.group(1)} tokens", timeout=UPDATE_MS)
        expect(page.locator(".wb-file-status")).to_contain_text("1 turns", timeout=UPDATE_MS)
        # The slower tabs say the same, not the figures of the prompt that was deleted.
        tab(page, "Cache")
        notes = page.locator(".wb-not-computed")      # the Cache, Prefix diff and Teach tabs
        expect(notes).to_have_count(3, timeout=UPDATE_MS)
        for k in range(3):
            expect(notes.nth(k)).to_contain_text("add the user's message")
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"


def test_a_reload_reopens_the_session_being_edited_with_its_edit(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = AppServer("--sessions", str(tmp_path / "sessions"), env={"WORKBENCH_HOME": str(tmp_path / "home")},
                       startup_s=120)
    errors: list[str] = []
    try:
        page = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
        picker = page.get_by_label("Session")
        picker.select_option(label="tool_agent.json")
        status = page.locator(".wb-file-status")
        expect(status).to_contain_text("tool_agent.json", timeout=UPDATE_MS)
        last = page.locator(".wb-me-row").last
        expect(page.locator(".wb-me-row")).to_have_count(len(load_session_messages("tool_agent.json")))
        box = last.locator("textarea[data-field=content]")
        if not box.is_visible():
            last.locator(".wb-me-head").click(position={"x": 250, "y": 8})   # its text opens it (not its role menu)
        box.fill("Edited before the reload.")
        expect(status).to_contain_text("edited (autosaved)", timeout=UPDATE_MS)
        page.reload()
        expect(page.locator(".wb-seg").first).to_be_visible(timeout=FIRST_VIEW_MS)
        expect(status).to_contain_text("tool_agent.json", timeout=UPDATE_MS)      # not support_chat
        expect(status).to_contain_text("restored your unsaved edits", timeout=UPDATE_MS)
        expect(page.locator(".wb-token-view")).to_contain_text("Edited before the reload.", timeout=UPDATE_MS)
        page.context.close()
    finally:
        code = server.stop()
    assert code == 0, f"the server did not stop cleanly ({code}): {server.stderr()}"
    assert not errors, f"errors in the page: {errors}"
