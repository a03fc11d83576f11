"""A Responses API session in `workbench app`, driven by a real Chromium (Playwright): the editor
lists the instructions and each input item in its own shape (a function_call's name, arguments and
call_id; a reasoning item's summary; an output message's text part), an edit there changes the
token view to what a cold assembly of the saved file gives (the oracle: the core, no UI code), the
saved file keeps every field the editor does not edit, a call_id no call has shows at its item
while the view keeps the last good prompt, a deleted call's orphaned output shows its error at its
own row (opened for it), and an uploaded Responses request opens in the editor."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import AppServer, autosave_settled, clear_autosaves, from_the_file, serving
from browser import open_page as browser_page
from test_ui_responses import CONV, SECRET

from workbench import Assembler
from workbench.sessions import parse_session

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 30_000    # a fresh server's first page (Panel's bundle), on two shared cores
UPDATE_MS = 15_000        # an edit: the assembly, the patch, the summary after it
SAVE_TO = "Save to (a .json name in the app's folder)"


def cold_tokens(data: dict) -> tuple[int, str]:
    """The oracle: the last turn of `data` as the core reads a session file, assembled from scratch."""
    f = parse_session(copy.deepcopy(data))
    r = Assembler(template="qwen2.5", cache=None).assemble(f.turns[-1])
    return len(r.token_ids), r.text


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return tmp_path_factory.mktemp("workbench-home")


@pytest.fixture(scope="module")
def server(home: Path, tmp_path_factory) -> Iterator[AppServer]:  # type: ignore[no-untyped-def]
    session = tmp_path_factory.mktemp("given") / "weather.json"
    session.write_text(json.dumps(CONV, indent=1), "utf-8")
    with serving(str(session), env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


@pytest.fixture
def page(browser, server: AppServer, home: Path):  # type: ignore[no-untyped-def]
    # Each test starts from the file (browser.py: autosave_settled, from_the_file).
    clear_autosaves(home)
    errors: list[str] = []
    p = browser_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    from_the_file(p, UPDATE_MS)
    yield p
    autosave_settled(p, UPDATE_MS)
    p.context.close()
    assert not errors, f"errors in the page: {errors}"


def header(page):  # type: ignore[no-untyped-def]
    return page.locator(".wb-token-view .wb-header")


def token_count(page) -> int:  # type: ignore[no-untyped-def]
    m = re.search(r"(\d+) tokens", header(page).inner_text())
    assert m, header(page).inner_text()
    return int(m.group(1))


def row(page, i: int):  # type: ignore[no-untyped-def]
    return page.locator(f".wb-me-row[data-index='{i}']")


def opened_row(page, i: int):  # type: ignore[no-untyped-def]
    r = row(page, i)
    if "wb-me-open" not in (r.get_attribute("class") or ""):
        r.locator(".wb-me-head").click()
    expect(r.locator(".wb-me-body")).to_be_visible()
    return r


def test_items_are_edited_in_their_own_shape_and_the_views_follow_the_saved_file(page, home: Path) -> None:  # type: ignore[no-untyped-def]
    n, _ = cold_tokens(CONV)
    expect(header(page)).to_contain_text(f" {n} tokens")
    expect(page.locator(".wb-me-row")).to_have_count(7)
    kinds = page.locator(".wb-me-head .wb-me-kind").all_inner_texts()
    assert kinds == ["instructions", "reasoning", "function_call", "function_call_output"]
    assert page.locator(".wb-me-head select.wb-me-role").count() == 3        # the message items' roles
    assert SECRET not in page.content()                                      # never sent to the page

    call = opened_row(page, 3)
    assert call.locator("[data-field]").evaluate_all("els => els.map(e => e.dataset.field)") == \
        ["name", "arguments", "call_id"]
    expect(call.locator(".wb-me-chip-kept")).to_contain_text("kept as is: id fc_1 · status completed · x_vendor")
    call.locator("textarea[data-field=arguments]").fill('{"city": "Lyon", "days": 2}')
    call.locator("input[data-field=name]").fill("get_forecast")
    reasoning = opened_row(page, 2)
    reasoning.locator("textarea[data-field=summary][data-part='0']").fill("Ask the forecast tool.")
    reply = opened_row(page, 5)
    reply.locator("textarea[data-field=content][data-part='0']").fill("Lyon: 12C and rain.")

    want = copy.deepcopy(CONV)
    want["input"][1]["summary"][0]["text"] = "Ask the forecast tool."
    want["input"][2].update(name="get_forecast", arguments='{"city": "Lyon", "days": 2}')
    want["input"][4]["content"][0]["text"] = "Lyon: 12C and rain."
    n2, text = cold_tokens(want)
    assert n2 != n
    expect(header(page)).to_contain_text(f" {n2} tokens", timeout=UPDATE_MS)
    expect(page.locator(".wb-token-view")).to_contain_text("Lyon: 12C and rain.")
    expect(page.locator(".wb-token-view")).to_contain_text('"name": "get_forecast"')

    page.get_by_label(SAVE_TO).fill("weather-edited.json")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".wb-file-status")).to_contain_text("saved to", timeout=UPDATE_MS)
    saved = json.loads((home / "sessions" / "weather-edited.json").read_text("utf-8"))
    assert saved == want                             # ids, status, annotations, encrypted content, unknown keys
    assert cold_tokens(saved) == (n2, text)


def test_a_broken_item_shows_at_its_row_and_the_view_keeps_the_last_good_prompt(page) -> None:  # type: ignore[no-untyped-def]
    n, _ = cold_tokens(CONV)
    expect(header(page)).to_contain_text(f" {n} tokens")
    out = opened_row(page, 4)
    out.locator("input[data-field=call_id]").fill("call_9")
    expect(out.locator(".wb-me-error")).to_contain_text("input[3].call_id: no function call to answer",
                                                         timeout=UPDATE_MS)
    expect(page.locator(".wb-main-alert")).to_contain_text("the view shows the last prompt that assembled")
    assert token_count(page) == n                                            # the last good prompt
    out.locator("input[data-field=call_id]").fill("call_1")
    expect(out.locator(".wb-me-error")).to_have_count(0, timeout=UPDATE_MS)

    # Delete the call: its output (now row 3, closed) is what no longer parses; its row opens with the error.
    assert "wb-me-open" not in (row(page, 3).get_attribute("class") or "")
    row(page, 3).locator(".wb-me-head button[title='delete this message']").click()
    expect(page.locator(".wb-me-row")).to_have_count(6, timeout=UPDATE_MS)
    expect(row(page, 3).locator(".wb-me-error")).to_contain_text("no earlier call has this call_id",
                                                                  timeout=UPDATE_MS)
    expect(row(page, 3).locator(".wb-me-kind")).to_have_text("function_call_output")
    assert token_count(page) == n
    page.locator(".wb-me-notice .wb-me-undo").click()
    expect(page.locator(".wb-me-row")).to_have_count(7, timeout=UPDATE_MS)
    expect(page.locator(".wb-me-row .wb-me-error")).to_have_count(0, timeout=UPDATE_MS)
    expect(header(page)).to_contain_text(f" {n} tokens")


def test_an_uploaded_responses_request_opens_in_the_editor(page) -> None:  # type: ignore[no-untyped-def]
    request = {"instructions": "Answer in one word.", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Capital of Peru?"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Lima."}]},
        {"role": "user", "content": "And of Chile?"}]}
    page.locator("input[type=file]").set_input_files(files=[{"name": "peru.json", "mimeType": "application/json",
                                                            "buffer": json.dumps(request).encode()}])
    expect(page.locator(".wb-me-row")).to_have_count(4, timeout=UPDATE_MS)
    n, _ = cold_tokens(request)
    expect(header(page)).to_contain_text(f" {n} tokens", timeout=UPDATE_MS)
    expect(row(page, 0).locator(".wb-me-kind")).to_have_text("instructions")
    expect(page.get_by_label("Session")).to_have_value("peru.json (not saved)")   # not another session
    opened_row(page, 3).locator("textarea[data-field=content]").fill("And of Bolivia?")
    request["input"][2]["content"] = "And of Bolivia?"
    n2, _ = cold_tokens(request)
    expect(header(page)).to_contain_text(f" {n2} tokens", timeout=UPDATE_MS)
    expect(page.locator(".wb-token-view")).to_contain_text("And of Bolivia?")
