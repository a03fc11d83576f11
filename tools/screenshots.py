"""Redo the documentation's screenshots of the app: `workbench app` started on a free port, the
system Chromium driven by Playwright (as the browser tests do, tests/browser.py), each picture
written to docs/images/.

    python tools/screenshots.py            # every picture
    python tools/screenshots.py compare    # docs/images/compare.png alone

Each picture is a function below, registered in SHOTS by name.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
sys.path.insert(0, str(ROOT / "tests"))     # the browser tests' helpers: AppServer, open_page, find_chromium

WAIT_MS = 60_000


def compare(page: Any) -> Path:
    """The Compare tab on the support chat: qwen2.5 (A) against qwen3 (B), the cache figures in."""
    from playwright.sync_api import expect
    page.locator(".bk-tab", has_text="Compare").first.click()
    page.get_by_label("B", exact=True).select_option("qwen3")
    expect(page.locator(".wb-cmp-side-b")).to_contain_text("B: qwen3", timeout=WAIT_MS)
    expect(page.locator(".wb-cmp-cache-table")).to_be_visible(timeout=WAIT_MS)
    page.locator(".wb-cmp-chg, .wb-cmp-only").first.scroll_into_view_if_needed()
    out = IMAGES / "compare.png"
    page.screenshot(path=str(out))
    return out


SHOTS: dict[str, Callable[[Any], Path]] = {"compare": compare}


def main(argv: list[str] | None = None) -> int:
    from browser import AppServer, find_chromium, launch_args, open_page
    from playwright.sync_api import sync_playwright
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shots", nargs="*", choices=[[], *SHOTS], help="which pictures (default: all)")
    names = ap.parse_args(argv).shots or list(SHOTS)
    chromium = find_chromium()
    if chromium is None:
        print("error: no Chromium found (install the distribution's chromium, or set WORKBENCH_CHROMIUM)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as home, sync_playwright() as p:
        server = AppServer("sample_sessions/support_chat.json", env={"WORKBENCH_HOME": home})
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=launch_args())
        try:
            for name in names:
                errors: list[str] = []
                page = open_page(browser, server.url, errors, step_ms=WAIT_MS, first_ms=WAIT_MS)
                print(f"{name}: {SHOTS[name](page).relative_to(ROOT)}")
                page.context.close()
                if errors:
                    print(f"error: the page reported {errors}", file=sys.stderr)
                    return 1
        finally:
            browser.close()
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
