"""docs/images/run.png: the app's Run tab after two generations on the synthetic `tiny` engine.

Starts `workbench app sample_sessions/openai_minimal.json` (a fresh WORKBENCH_HOME, so no autosave
of an earlier run is restored), opens it in headless Chromium (Playwright), generates a reply,
adds the next user message, generates again (the second report shows the engine's reuse), and
saves a screenshot. Run from the repository root:

    python tools/screenshot_run.py [--out docs/images/run.png] [--engine gemma3-270m]

With `--engine gemma3-270m` (a real base model: words, not noise) the models folder of your
WORKBENCH_HOME is linked into the fresh one, so that a model assembled before is not assembled
again (the first time takes minutes on a small CPU).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import AppServer, find_chromium, launch_args, open_page  # noqa: E402

GENERATE_MS = 600_000     # gemma3-270m's first load, on a busy CPU


ENGINES = {"tiny": "tiny (synthetic, CPU)", "gemma3-270m": "gemma3-270m (real base model)"}


def shoot(out: Path, engine: str = "tiny") -> None:
    from playwright.sync_api import expect, sync_playwright
    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no Chromium found: install one or set WORKBENCH_CHROMIUM")
    from workbench.home import workbench_home
    models = workbench_home() / "models"
    with tempfile.TemporaryDirectory() as home:
        if engine != "tiny" and models.is_dir():
            os.symlink(models, Path(home) / "models")
        app = AppServer("sample_sessions/openai_minimal.json", env={"WORKBENCH_HOME": home})
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, headless=True, args=launch_args())
                errors: list[str] = []
                page = open_page(browser, app.url, errors, step_ms=10_000, first_ms=30_000)
                page.locator(".bk-tab", has_text="Run").first.click()
                run = page.locator(".wb-run")
                page.get_by_label("Engine").select_option(ENGINES[engine])
                page.get_by_label("Max new tokens").fill("12")
                append = page.get_by_role("button", name="Append this reply to the session")
                page.get_by_role("button", name="Generate", exact=True).click()
                append.click(timeout=GENERATE_MS)       # a reply is written to the session on this click only
                expect(run.locator(".wb-run-appended")).to_be_visible(timeout=10_000)
                page.get_by_role("button", name="+ add").click()
                page.locator(".wb-me-row").last.locator("textarea[data-field=content]").fill(
                    "Thanks. And why is that?")
                expect(page.locator(".wb-token-view")).to_contain_text("And why is that?", timeout=10_000)
                page.get_by_role("button", name="Generate", exact=True).click()
                append.click(timeout=GENERATE_MS)
                expect(run.locator(".wb-run-appended")).to_contain_text("message 6", timeout=10_000)
                # the summary views follow the append a moment later (SUMMARY_MS): shot once they have
                expect(page.locator(".wb-file-status")).to_contain_text("4 turns", timeout=10_000)
                expect(page.locator(".wb-app-header")).not_to_contain_text("118 tokens", timeout=10_000)
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out), full_page=False)
                browser.close()
                if errors:
                    raise SystemExit(f"errors in the page: {errors}")
        finally:
            app.stop()
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "run.png")
    ap.add_argument("--engine", choices=list(ENGINES), default="tiny")
    args = ap.parse_args()
    shoot(args.out, args.engine)


if __name__ == "__main__":
    main()
