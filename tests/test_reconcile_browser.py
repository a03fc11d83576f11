"""The Cache tab's reconciliation in a real browser (issue 32): the app in a subprocess, the system
Chromium driven by Playwright. For a log-format session whose requests carry `response.usage`
(tests/fixtures/usage_reconcile.json) and for the same calls followed live (`workbench app
--follow LOG`), the Cache tab shows per turn the reported and the predicted cached tokens and the
class of the difference, the figures `workbench analyze SESSION --json` prints, and a turn without
usage says so in words."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import AppServer, open_page, serving

from workbench.ui.reconcile_view import NO_USAGE

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "fixtures" / "usage_reconcile.json"
FIRST_VIEW_MS = 60_000     # a fresh server's first page loads Panel's bundle (slow on a busy 2-core machine)
STEP_MS = 30_000           # every turn assembled and simulated, then reconciled: generous on a busy machine
CID = "brewline-4821"


@pytest.fixture(scope="module")
def cli_rows() -> list[dict[str, Any]]:
    p = subprocess.run([sys.executable, "-m", "workbench.cli.main", "analyze", str(SAMPLE), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    return [t.get("reconciliation") for t in json.loads(p.stdout)["turns"]]


def check_cache_tab(page, cli_rows: list[dict[str, Any]]) -> None:  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text="Cache").first.click()
    table = page.locator(".wb-reconcile-table")
    expect(table).to_be_visible(timeout=STEP_MS)
    rows = table.locator("tr")
    expect(rows).to_have_count(1 + len(cli_rows), timeout=STEP_MS)    # the heading, then one per turn
    for k, r in enumerate(cli_rows, start=1):
        row = rows.nth(k)
        if r is None:
            expect(row).to_contain_text(NO_USAGE)
            continue
        expect(row.locator(".wb-rec-reported")).to_have_text(f"{r['reported']['cached']:,}")
        expect(row.locator(".wb-rec-predicted")).to_have_text(f"{r['predicted']['cached']:,}")
        expect(row.locator(".wb-rec-class")).to_contain_text(r["class"])
    expect(rows.nth(4).locator(".wb-rec-advice")).to_contain_text("prompt_cache_key")
    expect(rows.nth(3).locator(".wb-rec-advice")).to_contain_text("between 5 and 60 minutes")


@pytest.fixture(scope="module")
def session_server(tmp_path_factory) -> Iterator[AppServer]:  # type: ignore[no-untyped-def]
    home: Path = tmp_path_factory.mktemp("reconcile-home")
    with serving(str(SAMPLE), "--sessions", str(home / "sessions"), env={"WORKBENCH_HOME": str(home)},
                 startup_s=120) as app:
        yield app


def test_the_cache_tab_shows_reported_beside_predicted(browser, session_server: AppServer,  # type: ignore[no-untyped-def]
                                                       cli_rows: list[dict[str, Any]]) -> None:
    assert [r["class"] if r else None for r in cli_rows] == ["match", "match", "ttl_lapse", "provider_miss", None]
    errors: list[str] = []
    page = open_page(browser, session_server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
    try:
        check_cache_tab(page, cli_rows)
    finally:
        page.context.close()
    assert not errors, errors


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """The sample's five calls as a request log (JSON lines): each line's timestamp and response
    are the log's, not the request's."""
    raw = json.loads(SAMPLE.read_text("utf-8"))
    path: Path = tmp_path_factory.mktemp("reconcile-log") / "calls.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for r in raw["requests"]:
            req = {k: v for k, v in r.items() if k not in ("timestamp", "response")}
            f.write(json.dumps({"timestamp": r["timestamp"], "conversation_id": CID, "provider": "openai",
                                "request": req, "response": r["response"]}) + "\n")
    return path


@pytest.fixture(scope="module")
def follow_server(tmp_path_factory, log: Path) -> Iterator[AppServer]:  # type: ignore[no-untyped-def]
    home: Path = tmp_path_factory.mktemp("reconcile-follow-home")
    with serving("--follow", str(log), "--sessions", str(home / "sessions"), env={"WORKBENCH_HOME": str(home)},
                 startup_s=120) as app:
        yield app


def test_a_followed_log_shows_the_same_rows(browser, follow_server: AppServer,  # type: ignore[no-untyped-def]
                                            cli_rows: list[dict[str, Any]]) -> None:
    errors: list[str] = []
    page = open_page(browser, follow_server.url, errors, step_ms=STEP_MS, first_ms=FIRST_VIEW_MS)
    try:
        expect(page.locator(".wb-follow")).to_contain_text("5 call(s) in 1 conversation(s)", timeout=STEP_MS)
        expect(page.locator(".wb-token-view")).to_contain_text("Perfect, thanks Maya!", timeout=STEP_MS)
        check_cache_tab(page, cli_rows)
    finally:
        page.context.close()
    assert not errors, errors
