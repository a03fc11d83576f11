"""The Semantic tab of `workbench app` in a real browser (the system Chromium, headless, through
Playwright), with the default embedder: look the last turn up, see every neighbour with its
similarity and its fingerprint beside this turn's, label a pair, and find the line in the labels
file in the sessions folder; a label that does not fit, and one after an edit, are refused inline.
Every wait is time-boxed, generously: the first lookup loads the embedder on a shared machine."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, checked_page, serving, wait_for

from workbench.semantic.evaluate import load_dataset
from workbench.ui.semantic_labels import LABELS_FILE

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 30_000
UPDATE_MS = 15_000
LOOKUP_MS = 180_000     # the embedder loaded and every earlier turn embedded, on two shared cores
FILE_S = 30.0


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return tmp_path_factory.mktemp("workbench-home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[AppServer]:
    with serving("sample_sessions/tool_agent.json", env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


@pytest.fixture
def page(browser, server: AppServer):  # type: ignore[no-untyped-def]
    yield from checked_page(browser, server.url, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()] if path.exists() else []


def test_look_up_see_each_neighbour_and_label_a_pair(page, home: Path) -> None:  # type: ignore[no-untyped-def]
    labels = home / "sessions" / LABELS_FILE
    page.locator(".bk-tab", has_text="Semantic").first.click()
    page.get_by_role("button", name="Look this turn up in a semantic cache of the earlier turns").click()
    table = page.locator(".wb-semantic-nearest")
    expect(table).to_be_visible(timeout=LOOKUP_MS)
    rows = table.locator("tr")
    n = rows.count() - 1                                              # less the heading
    assert n >= 2
    sims = [float(rows.nth(i).locator("td").nth(2).inner_text()) for i in range(1, n + 1)]
    assert all(-1.0 <= s <= 1.0 for s in sims) and sims == sorted(sims, reverse=True)
    # each neighbour on its own: its turn and similarity, the fingerprints side by side, its verdict
    blocks = page.locator(".wb-semantic-nb")
    expect(blocks).to_have_count(n)
    first = blocks.first
    expect(first.locator("h4")).to_contain_text(re.compile(rf"Neighbour 1: turn \d, similarity {sims[0]:.3f}"))
    expect(first.locator(".wb-semantic-fp")).to_contain_text("this turn (turn 9)")
    for row in ("asks to", "wants to know", "names", "says not to do it", "corrects an earlier turn"):
        expect(first.locator(".wb-semantic-fp td", has_text=row).first).to_be_visible()
    expect(first.locator(".wb-semantic-why")).to_contain_text(re.compile(r"Reused|Not reused|shadow"))

    # label neighbour 2 as should miss, an entity swap
    page.get_by_label("Neighbour to label", exact=True).select_option(index=1)
    page.get_by_label("Category of the label", exact=True).select_option(label="entity swap (miss)")
    page.get_by_role("button", name="Should not reuse (miss)").click()
    status = page.locator(".wb-semantic-label")
    expect(status).to_contain_text("labelled: semantic_labels.jsonl in the sessions folder now holds 1 label",
                                   timeout=UPDATE_MS)
    wait_for(lambda: len(lines_of(labels)) == 1, FILE_S, "the label's line in the file")
    (rec,) = lines_of(labels)
    assert rec["should_hit"] is False and rec["category"] == "entity_swap" and rec["lang"] == "en"
    assert rec["context"][-1]["content"].startswith("Perfect, obrigada!")      # turn 9's message
    turn = int(re.search(r"turn (\d)", blocks.nth(1).locator("h4").inner_text()).group(1))  # type: ignore[union-attr]
    assert turn < 9 and rec["cached_context"][-1]["role"] == "user"

    # a category against the label's direction: refused inline, the file unchanged
    page.get_by_role("button", name="Should reuse (hit)").click()
    expect(status).to_contain_text("not labelled: “entity swap” is a category of pairs that should not hit")
    # the same pair again, no category: its line replaced, not added
    page.get_by_label("Category of the label", exact=True).select_option(index=0)
    page.get_by_role("button", name="Should reuse (hit)").click()
    expect(status).to_contain_text("replaces this pair's earlier label")
    wait_for(lambda: [r["should_hit"] for r in lines_of(labels)] == [True], FILE_S, "the replaced line")
    (case,) = load_dataset(labels)
    assert case.category == "user_hit" and case.should_hit is True

    # the session changes: the pair shown is gone, said inline, nothing written
    box = page.locator(".wb-me-row").last.locator("textarea[data-field=content]")
    box.fill("A last message typed after the lookup.")
    expect(page.locator(".wb-seg", has_text="typed after the lookup").first).to_be_attached(timeout=UPDATE_MS)
    page.get_by_role("button", name="Should not reuse (miss)").click()
    expect(status).to_contain_text("not labelled: the session changed since the lookup of turn 9")
    assert [r["should_hit"] for r in lines_of(labels)] == [True]
