"""The template arguments control in a real browser: `workbench app` in a subprocess, the system
Chromium driven by Playwright. A user picks qwen3, sees the `enable_thinking` box appear, sets it to
false and sees the token count become what `workbench render --template-arg enable_thinking=false`
prints; a bad value is said beside the box while the view keeps the last good prompt; Share gives a
link whose page opens with the argument set and the same count."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import ROOT, AppServer, app_pages, serving

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

SESSION = "sample_sessions/openai_minimal.json"
FIRST_VIEW_MS = 60_000   # a fresh server's first page loads Panel's bundle (slow on a busy 2-core machine)
UPDATE_MS = 20_000


def render(*extra: str) -> int:
    """The token count `workbench render SESSION --template qwen3 [EXTRA] --json` prints."""
    out = subprocess.run([sys.executable, "-m", "workbench.cli.main", "render", SESSION, "--template", "qwen3",
                          *extra, "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    return len(json.loads(out.stdout)["token_ids"])


@pytest.fixture(scope="module")
def counts() -> dict[str, int]:
    got = {"default": render(), "false": render("--template-arg", "enable_thinking=false")}
    assert got["default"] != got["false"]
    return got


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return tmp_path_factory.mktemp("targs-home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[AppServer]:
    with serving(SESSION, "--sessions", str(home / "sessions"), env={"WORKBENCH_HOME": str(home)},
                 startup_s=120) as app:
        yield app


@pytest.fixture
def pages(browser, server: AppServer, home: Path):  # type: ignore[no-untyped-def]
    with app_pages(browser, server, home, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS) as open_:
        yield open_


def total(page):  # type: ignore[no-untyped-def]
    return page.locator(".wb-token-view .wb-header")


def count(n: int) -> re.Pattern[str]:
    """`n tokens` in the header, not the end of a longer number."""
    return re.compile(rf"(?<![\d,]){n:,} tokens|(?<![\d,]){n} tokens")


def test_setting_an_argument_in_the_page_gives_the_cli_count(pages, server: AppServer,  # type: ignore[no-untyped-def]
                                                             counts: dict[str, int]) -> None:
    page = pages()
    page.locator(".bk-tab", has_text="Template arguments").first.click()
    summary = page.locator(".wb-template-args-summary")
    expect(summary).to_contain_text("this template reads no arguments", timeout=UPDATE_MS)   # qwen2.5
    page.get_by_label("Template", exact=True).select_option("qwen3")
    box = page.get_by_label("enable_thinking", exact=True)
    expect(box).to_be_visible(timeout=UPDATE_MS)                     # the control follows the template
    expect(summary).not_to_contain_text("reads no arguments")
    expect(total(page)).to_contain_text(count(counts["default"]), timeout=UPDATE_MS)

    box.fill("false")
    box.press("Enter")
    expect(total(page)).to_contain_text(count(counts["false"]), timeout=UPDATE_MS)
    expect(summary).to_contain_text("set: enable_thinking=false")

    # A bad value: said beside the box; the view keeps the last good prompt.
    box.fill("NaN")
    box.press("Enter")
    note = page.locator(".wb-template-arg-note-enable_thinking .wb-template-arg-error")
    expect(note).to_contain_text("argument enable_thinking: not a finite number", timeout=UPDATE_MS)
    expect(total(page)).to_contain_text(count(counts["false"]))
    expect(summary).to_contain_text("set: enable_thinking=false")

    box.fill("false")                                                 # fixed: the error goes
    box.press("Enter")
    expect(note).to_have_count(0, timeout=UPDATE_MS)

    # Share: a new page on the link opens with the argument set, to the same count.
    page.get_by_role("button", name="Share").click()
    link_box = page.locator(".wb-share-link input")
    expect(link_box).to_have_value(re.compile(r"\?state=[A-Za-z0-9_-]+$"), timeout=UPDATE_MS)
    other = pages(link_box.input_value())
    expect(total(other)).to_contain_text(count(counts["false"]), timeout=UPDATE_MS)
    other.locator(".bk-tab", has_text="Template arguments").first.click()
    expect(other.get_by_label("enable_thinking", exact=True)).to_have_value("false")
    expect(other.get_by_label("Template", exact=True)).to_have_value("qwen3")

    # Blank: unset, the template's default count again.
    box.fill("")
    box.press("Enter")
    expect(total(page)).to_contain_text(count(counts["default"]), timeout=UPDATE_MS)
    expect(summary).not_to_contain_text("set:")
