"""Template switches on a long session, in a real browser: how soon the token view and the cache
panel show the new template (issue 17).

Run:  .venv/bin/python benchmarks/bench_app_switch.py [--session sample_sessions/bench_1000.json]
      [--templates llama3.1,mistral-v7,qwen2.5]

`workbench app` on the session, Chromium driven by Playwright. Two passes over the templates, each
switch made after the previous one settled:

1. on the Tokens tab: from the Template select's `input` event to the token view's header naming
   the new template, and to the frame that paints the token spans in sight (`wb-drawn-painted`);
2. on the Cache tab: from the same event to the first progress line, to the cache panel's figures
   for the new template (every turn assembled, the provider simulations), and, when the session
   truncates, to the truncation policies' table.

The bars (issue 17): the token view within 1 s, the cache panel within 10 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import AppServer, find_chromium, launch_args  # noqa: E402

SINCE_INPUT = "() => performance.now() - window.__at.at(-1)"
DRAWN = ("() => performance.getEntriesByName('wb-drawn-painted').filter(m => m.startTime > window.__at.at(-1))"
         ".map(m => m.startTime - window.__at.at(-1))[0]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--session", default="sample_sessions/bench_1000.json")
    ap.add_argument("--templates", default="llama3.1,mistral-v7,qwen2.5")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    if chromium is None:
        sys.exit("no Chromium: apt-get install chromium (or set WORKBENCH_CHROMIUM)")
    names = args.templates.split(",")
    app = AppServer(args.session, env={"WORKBENCH_HOME": tempfile.mkdtemp(prefix="wb-bench-")})
    rows: list[tuple[str, str, float | None, float | None, float | None]] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=launch_args())
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(app.url, timeout=120_000)
            page.locator(".wb-seg").first.wait_for(timeout=120_000)
            page.evaluate("() => { window.__at = []; document.addEventListener('input', "
                          "() => window.__at.push(performance.now()), true); }")
            tab = lambda name: page.locator(".bk-tab", has_text=name).first.click()  # noqa: E731
            select = page.get_by_label("Template", exact=True)
            for name in names:                        # 1. the Tokens tab
                time.sleep(2)
                select.select_option(name)
                page.locator(".wb-token-view .wb-header", has_text=f"{name} ·").wait_for(timeout=120_000)
                header = page.evaluate(SINCE_INPUT)
                try:
                    page.wait_for_function(f"{DRAWN} !== undefined", timeout=30_000)
                    drawn = page.evaluate(DRAWN)
                except Exception:  # noqa: BLE001 - reported as missing
                    drawn = None
                rows.append(("tokens", name, header, drawn, None))
            tab("Cache")
            current = names[-1]
            page.locator(".wb-cache-template", has_text=current).first.wait_for(state="attached", timeout=300_000)
            for name in names:                        # 2. the Cache tab
                time.sleep(2)
                select.select_option(name)
                progress = None
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline:
                    if progress is None and page.locator(".wb-panels-status", has_text="turn").count():
                        progress = page.evaluate(SINCE_INPUT)
                    if page.locator(".wb-cache-template", has_text=name).count() and \
                            page.locator(".wb-cache-template", has_text=name).first.inner_text() == name:
                        break
                    time.sleep(0.05)
                figures = page.evaluate(SINCE_INPUT)
                policies = None
                while time.monotonic() < deadline:     # the policies' table follows, when a turn truncates
                    if page.locator(".wb-cache tr.wb-policy-chunked").count():
                        policies = page.evaluate(SINCE_INPUT)
                        break
                    if not page.locator(".wb-panels-status", has_text="turn").count() and \
                            page.evaluate(SINCE_INPUT) > figures + 5_000:
                        break                          # done, and nothing truncates
                    time.sleep(0.05)
                rows.append(("cache", name, progress, figures, policies))
            browser.close()
    finally:
        app.stop()
    print(f"session {args.session}; template switches, ms from the select's input event")
    for kind, name, a, b, c in rows:
        f = lambda x: "n/a" if x is None else f"{x:,.0f}"  # noqa: E731
        if kind == "tokens":
            print(f"  Tokens tab, to {name:<11} header {f(a)}   token spans painted {f(b)}   (bar: <= 1,000)")
        else:
            print(f"  Cache tab,  to {name:<11} first progress {f(a)}   cache figures {f(b)}   (bar: <= 10,000)"
                  f"   policies compared {f(c)}")


if __name__ == "__main__":
    main()
