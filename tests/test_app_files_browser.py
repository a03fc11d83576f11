"""The app's confined files in a real browser (issue 14, case 4): `workbench app --sessions DIR` in a
subprocess, the system Chromium driven by Playwright. What the page's boxes and buttons do, as a
user (or a hostile page) would; tests/test_app_files.py covers every payload without a browser."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, serving

from workbench.ui.document import SessionDocument
from workbench.ui.state import sample_sessions

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 30_000   # a fresh server's first page loads Panel's bundle (slow on a busy 2-core machine)
UPDATE_MS = 10_000


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    base = tmp_path_factory.mktemp("confined")
    sessions = base / "sessions"
    sessions.mkdir()
    taken = sessions / "taken.json"
    taken.write_bytes(Path(sample_sessions()["tool_agent.json"]).read_bytes())
    taken.chmod(0o640)
    return {"base": base, "sessions": sessions, "home": base / "home", "taken": taken}


@pytest.fixture(scope="module")
def server(folders: dict[str, Path]) -> Iterator[AppServer]:
    with serving("sample_sessions/openai_minimal.json", "--sessions", str(folders["sessions"]),
                 env={"WORKBENCH_HOME": str(folders["home"])}, startup_s=120) as app:
        yield app


def test_save_refuses_a_climbing_name_inline_and_asks_before_overwriting(  # type: ignore[no-untyped-def]
        browser, server: AppServer, folders: dict[str, Path]) -> None:
    errors: list[str] = []
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.set_default_timeout(UPDATE_MS)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server.url, timeout=FIRST_VIEW_MS)
        expect(page.locator(".wb-seg").first).to_be_visible(timeout=FIRST_VIEW_MS)
        box = page.get_by_label("Save to (a .json name in the app's folder)")
        status = page.locator(".wb-file-status")
        before = sorted(p.name for p in folders["base"].rglob("*"))

        box.fill("a/../../escape.json")                  # the payload
        box.press("Enter")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(status.locator(".wb-file-error")).to_contain_text("climbs out of the folder", timeout=UPDATE_MS)
        assert sorted(p.name for p in folders["base"].rglob("*")) == before    # nothing written anywhere

        original = folders["taken"].read_bytes()
        box.fill("taken.json")
        box.press("Enter")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(status.locator(".wb-file-error")).to_contain_text("taken.json exists", timeout=UPDATE_MS)
        overwrite = page.get_by_role("button", name="Overwrite")
        expect(overwrite).to_be_visible()
        assert folders["taken"].read_bytes() == original     # not yet: it asks first
        overwrite.click()
        expect(status).to_contain_text("saved to", timeout=UPDATE_MS)
        expect(overwrite).to_be_hidden()
        saved = SessionDocument.load(folders["taken"]).data
        assert saved == SessionDocument.load(sample_sessions()["openai_minimal.json"]).data
        assert stat.S_IMODE(folders["taken"].stat().st_mode) == 0o640     # the mode is kept
        expect(page.get_by_label("Session")).to_have_value("taken.json (saved)")   # the picker offers it now
        assert page.locator(".wb-seg").first.is_visible()      # the page keeps working
    finally:
        page.close()
    assert not errors, f"errors in the page: {errors}"
