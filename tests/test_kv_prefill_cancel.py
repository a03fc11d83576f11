"""The KV tab's prefill (issue 17): it runs in chunks, says how far it is, and a Cancel stops it
between two chunks while the page goes on working; the next prefill completes. In both hosts: the
app in a real Chromium (Playwright), and the notebook's `Workbench` in this process (real
ipywidgets, real torch; its worker thread is the one a kernel would run). Small chunks
(WORKBENCH_PREFILL_CHUNK) make the prefill of the support chat's 6,849 tokens last long enough to
press Cancel in, on any machine."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, serving, wait_for
from browser import open_page as browser_page

from workbench.ui.state import sample_sessions

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

CHUNK = "32"              # tokens per forward pass: hundreds of passes over the support chat
FIRST_VIEW_MS = 30_000
STEP_MS = 10_000
PREFILL_MS = 240_000      # a whole prefill in small chunks, on a busy machine


# ------------------------------------------------------------------------------ the app, in Chromium
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    home: Path = tmp_path_factory.mktemp("workbench-home")
    with serving("sample_sessions/support_chat.json",
                 env={"WORKBENCH_HOME": str(home), "WORKBENCH_PREFILL_CHUNK": CHUNK}) as app:
        yield app


def test_the_app_shows_prefill_progress_and_cancel_stops_it(browser, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    page = browser_page(browser, server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
    try:
        page.locator(".bk-tab", has_text="KV").first.click()
        status = page.locator(".wb-kv-status")
        cancel = page.get_by_role("button", name="Cancel the prefill")
        expect(cancel).to_be_hidden()
        page.get_by_role("button", name=re.compile("Prefill this turn")).click()
        expect(status).to_contain_text(re.compile(r"prefill, the previous turn: [\d,]+ of [\d,]+ tokens"),
                                       timeout=PREFILL_MS)
        cancel.click()
        expect(status).to_contain_text("prefill cancelled", timeout=STEP_MS)
        expect(cancel).to_be_hidden()
        expect(page.locator(".wb-kv-prefill")).to_have_count(0)      # nothing half-done is shown
        # The page still works: an edit repaints the token view ...
        header = page.locator(".wb-token-view .wb-header")
        before = header.inner_text()
        page.locator(".wb-me-row").last.locator("textarea[data-field=content]").fill("Still here after a cancel?")
        expect(header).not_to_have_text(before, timeout=STEP_MS)
        # ... and a second prefill runs to the end, its progress shown on the way.
        page.get_by_role("button", name=re.compile("Prefill this turn")).click()
        expect(status).to_contain_text("prefill,", timeout=PREFILL_MS)
        expect(page.locator(".wb-kv-prefill")).to_contain_text("tokens reused", timeout=PREFILL_MS)
        expect(status).to_have_text("")
    finally:
        page.context.close()
    assert not errors, f"errors in the page: {errors}"


# ------------------------------------------------------------------------------ the notebook's Workbench
def test_the_notebook_shows_prefill_progress_and_cancel_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from workbench.ui.notebook import Workbench

    monkeypatch.setenv("WORKBENCH_PREFILL_CHUNK", CHUNK)
    wb = Workbench(sample_sessions()["support_chat.json"])
    seen: list[str] = []
    lock = threading.Lock()

    def watch(change: dict) -> None:
        with lock:
            seen.append(change["new"])

    wb.kv_status.observe(watch, "value")
    assert wb.kv_cancel.layout.display == "none"
    wb.kv_run.click()                                   # as the button does: on the controller's worker
    wait_for(lambda: "tokens" in wb.kv_status.value, PREFILL_MS / 1e3, "the prefill's progress")
    assert wb.kv_run.disabled and wb.kv_cancel.layout.display is None
    assert re.search(r"prefill, the previous turn: [\d,]+ of [\d,]+ tokens", wb.kv_status.value)
    wb.kv_cancel.click()
    wait_for(lambda: "prefill cancelled" in wb.kv_status.value, STEP_MS / 1e3, "the cancel")
    assert not wb.kv_run.disabled and wb.kv_cancel.layout.display == "none"
    assert wb._prefill is None and "wb-kv-prefill" not in wb.kv.value
    # a second prefill, here and now, completes and is shown
    first, cur, model = wb.prefill()
    assert cur.reused_tokens > 0 and cur.prefilled_tokens == cur.tokens - cur.reused_tokens
    assert wb._prefill is not None and wb._prefill[1][1] is cur and wb.kv_status.value == ""
    with lock:
        progress = [v for v in seen if "tokens" in v]
    assert any("this turn without reuse" in v for v in progress)      # the baseline pass reported too
