"""The page holds together (issue 33): at 1280×720, 1440×900 and 1920×1080, on every tab, before
and after Present, nothing runs past the window's right edge, no box hides a sideways overflow of
its own, and no button's caption is cut (the Run tab's Cancel once showed as "C"). In a real
browser (Playwright, the system Chromium) against `workbench app` in a subprocess.

The checks walk the whole document, shadow roots included (Panel renders each pane in one), so a
new control or tab is measured without this test naming it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, serving

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 60_000
STEP_MS = 20_000
VIEWPORTS = [(1280, 720), (1440, 900), (1920, 1080)]
TABS = ["Tokens", "Cache", "Prefix diff", "KV", "Semantic", "Teach", "Compare", "Run", "Diagnostics"]

# Offenders, each as [what, why]: an element past the window's right edge; a box whose content is
# wider than it and is cut or scrolled sideways (overflow-x not visible); a button whose caption
# is wider than the button. Elements of zero size (in a closed tab, hidden) are not shown: skipped.
MEASURE = """() => {
  const W = window.innerWidth, out = [];
  const name = (el) => `${el.tagName.toLowerCase()}.${String(el.className || "").split(" ").slice(0, 3).join(".")}` +
    ` "${(el.textContent || "").trim().slice(0, 30)}"`;
  const walk = (root) => {
    for (const el of root.querySelectorAll("*")) {
      if (el.shadowRoot) walk(el.shadowRoot);
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      const cs = getComputedStyle(el);
      if (cs.visibility === "hidden") continue;
      if (r.right > W + 1) out.push([name(el), `right edge at ${Math.round(r.right)} of ${W}`]);
      // A one-line summary cut with an ellipsis says it is cut: that is its design, not an overflow.
      if (cs.textOverflow !== "ellipsis" &&
          (cs.overflowX === "hidden" || cs.overflowX === "auto" || cs.overflowX === "scroll") &&
          el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0)
        out.push([name(el), `content ${el.scrollWidth} wide in a box of ${el.clientWidth}`]);
      if (el.tagName === "BUTTON" && el.scrollWidth > el.clientWidth + 1)
        out.push([name(el), `caption ${el.scrollWidth} wide in a button of ${el.clientWidth}`]);
    }
  };
  walk(document);
  const doc = document.scrollingElement;
  if (doc.scrollWidth > doc.clientWidth)
    out.push(["the page", `${doc.scrollWidth} wide in a window of ${doc.clientWidth}`]);
  return out;
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    home: Path = tmp_path_factory.mktemp("workbench-home")
    with serving("sample_sessions/support_chat.json", env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


def tab(page, name: str) -> None:  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text=name).first.click()


def settled(page) -> None:  # type: ignore[no-untyped-def]
    """The page has laid out what it shows: two animation frames after the last change."""
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def offenders(page, where: str) -> list[str]:  # type: ignore[no-untyped-def]
    settled(page)
    return [f"{where}: {what}: {why}" for what, why in page.evaluate(MEASURE)]


@pytest.mark.parametrize("width, height", VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_no_tab_overflows_the_window_before_or_after_present(browser, server: AppServer, width: int,  # type: ignore[no-untyped-def]
                                                             height: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": height})
    errors: list[str] = []
    page = context.new_page()
    page.set_default_timeout(STEP_MS)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(server.url, timeout=FIRST_VIEW_MS)
        expect(page.locator(".wb-seg").first).to_be_visible(timeout=FIRST_VIEW_MS)
        bad: list[str] = offenders(page, "first load")
        for name in TABS:
            tab(page, name)
            bad += offenders(page, name)
        # Present over the Teach tab, then off: the page comes back to the window's width.
        tab(page, "Teach")
        expect(page.locator(".wb-teach-title")).to_contain_text("Step 1 of", timeout=FIRST_VIEW_MS)
        page.get_by_role("button", name="Present").click()
        expect(page.locator(".wb-present")).to_have_count(1, timeout=STEP_MS)
        bad += offenders(page, "presenting")
        page.keyboard.press("Escape")
        expect(page.locator(".wb-present")).to_have_count(0, timeout=STEP_MS)
        for name in TABS:
            tab(page, name)
            bad += offenders(page, f"after Present, {name}")
        assert not bad, f"{len(bad)} overflow(s) at {width}×{height}:\n" + "\n".join(dict.fromkeys(bad))
    finally:
        context.close()
    assert not errors, f"errors in the page: {errors}"


def test_the_right_column_stays_in_view_while_the_messages_scroll(browser, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(STEP_MS)
    try:
        page.goto(server.url, timeout=FIRST_VIEW_MS)
        expect(page.locator(".wb-seg").first).to_be_visible(timeout=FIRST_VIEW_MS)
        tabs = page.locator(".bk-tab", has_text="Diagnostics").first
        top = tabs.bounding_box()
        page.mouse.move(200, 600)                  # over the messages (the left column)
        page.mouse.wheel(0, 2500)
        page.wait_for_function("() => window.scrollY > 500")
        settled(page)
        after = tabs.bounding_box()
        assert top is not None and after is not None
        assert 0 <= after["y"] <= max(top["y"], 0) + 1, (top, after)   # the tab strip has not scrolled away
    finally:
        context.close()
