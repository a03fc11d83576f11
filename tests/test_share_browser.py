"""Share, undo, per-message token counts and the token view following the edit, in `workbench app`
driven by a real Chromium (Playwright), and the notebook cell that Share gives run in a real kernel."""

from __future__ import annotations

import base64
import re
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path

import nbformat
import numpy as np
import pytest
from browser import AppServer, app_pages, serving
from nbclient import NotebookClient

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 15_000
UPDATE_MS = 5_000
SUMMARY_MS = 8_000      # the counts follow the summary (400 ms after the last assembly)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return tmp_path_factory.mktemp("workbench-home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[AppServer]:
    with serving("sample_sessions/support_chat.json", env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


@pytest.fixture
def pages(browser, server: AppServer, home: Path):  # type: ignore[no-untyped-def]
    with app_pages(browser, server, home, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS) as open_:
        yield open_


def header_line(page) -> str:  # type: ignore[no-untyped-def]
    return page.locator(".wb-token-view .wb-header > div").first.inner_text()


def without_reuse(line: str) -> str:
    """The header line less its reuse figure (a page opened on a link assembles cold)."""
    return re.sub(r" \(\d+ reused\)", "", line)


def token_total(page) -> int:  # type: ignore[no-untyped-def]
    m = re.search(r"(\d+) tokens", header_line(page))
    assert m
    return int(m.group(1))


def segment_texts(page) -> list[str]:  # type: ignore[no-untyped-def]
    """Each segment's label less its source (kind, role, seq, tokens, offsets): the same whether its
    token spans are drawn yet or not (a token inside a character shows as its bytes once drawn)."""
    return page.locator(".wb-seg .wb-seg-label").evaluate_all(
        "(els) => els.map((e) => e.textContent.replace(/ · (fresh|local|redis)$/, ''))")


def rows(page):  # type: ignore[no-untyped-def]
    return page.locator(".wb-me-row")


# ------------------------------------------------------------------------------ share
def test_share_gives_a_link_that_opens_the_same_prompt(pages, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    page.get_by_label("Template", exact=True).select_option("llama3.1")
    expect(page.locator(".wb-token-view .wb-header")).to_contain_text("llama3.1", timeout=UPDATE_MS)
    box = rows(page).last.locator("textarea[data-field=content]")
    box.fill("A shared question, edited before sharing.")
    expect(page.locator(".wb-token-view")).to_contain_text("edited before sharing", timeout=UPDATE_MS)
    page.get_by_role("button", name="Share").click()
    link_box = page.locator(".wb-share-link input")
    expect(link_box).to_have_value(re.compile(r"^http://127\.0\.0\.1:\d+/\?state=[A-Za-z0-9_-]+$"), timeout=UPDATE_MS)
    url = link_box.input_value()
    assert url.startswith(server.url)
    expect(page.locator(".wb-share-cell textarea")).to_have_value(re.compile(r'Workbench\.from_share\("'))
    shown = without_reuse(header_line(page))
    texts = segment_texts(page)
    # Copy puts the link on the clipboard (the page's own clipboard, granted to this test's page).
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url.rstrip("/"))
    page.get_by_role("button", name="Copy").click()
    page.wait_for_function("async (u) => (await navigator.clipboard.readText()) === u", arg=url, timeout=UPDATE_MS)

    other = pages(url)                                   # a new page (its own app state) on the link
    expect(other.locator(".wb-token-view .wb-header")).to_contain_text("llama3.1", timeout=UPDATE_MS)
    assert without_reuse(header_line(other)) == shown     # template, tokenizer, tokens, budget, cache key
    assert segment_texts(other) == texts and len(texts) == 222   # the same segments, the same token offsets
    expect(other.get_by_label("Template", exact=True)).to_have_value("llama3.1")
    expect(other.locator(".wb-share-status")).not_to_contain_text("could not be opened")
    other.get_by_role("button", name="Share").click()             # and it shares the same state again
    expect(other.locator(".wb-share-link input")).to_have_value(url, timeout=UPDATE_MS)


@pytest.mark.parametrize("state, says", [
    ("not*base64", "not base64url"),
    (base64.urlsafe_b64encode(zlib.compress(b'{"v": 1, "path": "/etc/passwd"}')).rstrip(b"=").decode(),
     "unknown fields: 'path'"),
    (base64.urlsafe_b64encode(zlib.compress(b"\x00" * 34_000_000, 9)).rstrip(b"=").decode(), "decompresses to more"),
    ("A" * 61_000, "over the limit"),
])
def test_a_bad_link_shows_inline_and_opens_the_default_session(pages, server: AppServer, state: str,
                                                                says: str) -> None:  # type: ignore[no-untyped-def]
    page = pages(f"{server.url}?state={state}")
    expect(page.locator(".wb-share-status")).to_contain_text("this link could not be opened", timeout=UPDATE_MS)
    expect(page.locator(".wb-share-status")).to_contain_text(says)
    assert "Traceback" not in page.content()
    expect(page.locator(".wb-token-view .wb-header")).to_contain_text("qwen2.5")
    expect(rows(page)).to_have_count(220)                # support_chat, as without a link


def test_the_cell_share_gives_rebuilds_the_same_ids_in_a_kernel(tmp_path: Path) -> None:
    """The notebook side: `Workbench.share()`'s cell (the app's Share gives the same one) run in a real
    kernel rebuilds the state: the same ids as the state it was made from."""
    from workbench.ui.sharing import notebook_cell, share_text
    from workbench.ui.state import WorkbenchState, sample_sessions

    s = WorkbenchState(sample_sessions()["support_chat.json"], autosave=None, restore=False)
    s.apply({"op": "delete", "index": 5})
    s.choose(template="llama3.1")
    s.select_turn(30)
    ids = s.assemble().token_ids
    cell = notebook_cell(share_text(s))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(cell),
                nbformat.v4.new_code_cell(
                    "import json\nr = wb.result\nshared = wb.share()\ncounts = list(wb.editor.counts)\n"
                    "wb.apply({'op': 'delete', 'index': 2})\nshorter = wb.result.total_tokens\nundid = wb.undo()\n"
                    "print(json.dumps({'ids': r.token_ids.tolist(), 'turn': wb.state.turn, "
                    "'template': wb.template_select.value, 'name': wb.state.doc.name, 'path': wb.state.doc.path, "
                    "'same_cell': shared == " + repr(cell) + ", 'counts': counts, 'shorter': shorter, "
                    "'undid': undid, 'after_undo': wb.result.token_ids.tolist()}))")]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = "".join(o.get("text", "") for o in nb.cells[1].outputs if o.get("output_type") == "stream")
    import json
    got = json.loads(out)
    assert np.array_equal(np.asarray(got["ids"], dtype=np.uint32), ids)
    assert (got["turn"], got["template"], got["name"], got["path"]) == (30, "llama3.1", "support_chat.json", None)
    assert got["same_cell"]                              # Workbench.share() gives the cell back
    segs = s.assemble().segments
    assert sum(c for c in got["counts"] if c) == sum(x.token_count for x in segs if x.kind in ("message", "system"))
    assert got["shorter"] != len(ids) and got["undid"] == "deleted message 2"
    assert np.array_equal(np.asarray(got["after_undo"], dtype=np.uint32), ids)    # undo in the notebook too
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in nb.cells[0].outputs)


# ------------------------------------------------------------------------------ the editor
def test_each_message_shows_its_token_count_and_it_follows_typing(pages) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    count = rows(page).last.locator(".wb-me-count")
    expect(count).to_have_text(re.compile(r"^\d+ tok$"), timeout=SUMMARY_MS)
    before = int(count.text_content().split()[0])
    label = page.locator(".wb-seg", has_text="seq 219 ·").locator(".wb-seg-label")
    assert f"· {before} tokens" in label.text_content()        # the same figure as the token view's segment
    rows(page).last.locator("textarea[data-field=content]").fill("Short.")
    expect(count).not_to_have_text(f"{before} tok", timeout=SUMMARY_MS)
    after = int(count.text_content().split()[0])
    assert after < before and f"· {after} tokens" in label.text_content()
    assert rows(page).first.locator(".wb-me-count").text_content().endswith(" tok")


def test_the_token_view_follows_the_message_being_edited(pages) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    view = page.locator(".wb-token-view")
    view.evaluate("(el) => { el.scrollTop = 0; }")
    target = page.locator(".wb-seg", has_text="seq 180 ·")
    in_sight = ("([box, seg]) => { const b = box.getBoundingClientRect(), s = seg.getBoundingClientRect();"
                " return s.bottom > b.top && s.top < b.bottom; }")

    def visible() -> bool:
        return bool(page.evaluate(in_sight, [view.element_handle(), target.element_handle()]))

    assert not visible()                                   # far down a long session: out of sight at first
    row = rows(page).nth(180)
    row.locator(".wb-me-head").click()
    box = row.locator("textarea[data-field=content]")
    box.click()                                            # (Playwright scrolls the page to the box)
    box.press("End")
    scroll_y = page.evaluate("() => window.scrollY")
    assert not visible()
    box.type(" more")
    expect(target).to_contain_text("more", timeout=UPDATE_MS)
    page.wait_for_function(in_sight, arg=[view.element_handle(), target.element_handle()], timeout=UPDATE_MS)
    assert page.evaluate("() => window.scrollY") == scroll_y   # the box scrolled, not the page
    expect(box).to_be_focused()


def test_delete_then_undo_brings_the_message_back(pages) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    total = token_total(page)
    third = rows(page).nth(3).locator(".wb-me-preview").text_content()
    rows(page).nth(3).locator("button[title='delete this message']").click()
    expect(rows(page)).to_have_count(219)
    notice = page.locator(".wb-me-notice")
    expect(notice).to_contain_text("deleted message 3")
    expect(page.locator(".wb-token-view .wb-header")).not_to_contain_text(f" {total} tokens", timeout=UPDATE_MS)
    notice.get_by_role("button", name="Undo").click()
    expect(rows(page)).to_have_count(220)
    expect(notice).to_be_hidden()
    expect(rows(page).nth(3).locator(".wb-me-preview")).to_have_text(third)
    expect(page.locator(".wb-token-view .wb-header")).to_contain_text(f" {total} tokens", timeout=UPDATE_MS)
    # The Undo button, and Ctrl+Z in the editor outside a text box (Ctrl+Shift+Z redoes).
    rows(page).nth(7).locator("button[title='delete this message']").click()
    expect(rows(page)).to_have_count(219)
    page.get_by_role("button", name="↶ Undo").click()
    expect(rows(page)).to_have_count(220)
    page.get_by_role("button", name="↷ Redo").click()
    expect(rows(page)).to_have_count(219)
    rows(page).nth(2).locator(".wb-me-preview").click()     # focus in the editor, not in a text box
    page.keyboard.press("Control+z")
    expect(rows(page)).to_have_count(220)
    expect(page.locator(".wb-token-view .wb-header")).to_contain_text(f" {total} tokens", timeout=UPDATE_MS)
    # Inside a text box, Ctrl+Z is the box's own undo: the message list stays.
    box = rows(page).last.locator("textarea[data-field=content]")
    box.click()
    box.press("End")
    box.type("xyz")
    box.press("Control+z")
    expect(rows(page)).to_have_count(220)


# ------------------------------------------------------------------------------ in JupyterLab
def test_counts_and_undo_in_the_notebook_widget_in_jupyterlab(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The same ES module in a real JupyterLab, through the kernel: the per-message counts arrive,
    a delete shows its notice, and Undo (the notice's, then Ctrl+Z) brings the message back."""
    from browser import ROOT
    from lab_server import LabServer, run_all_cells

    lab = LabServer()
    try:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell("from workbench.ui.notebook import Workbench\n"
                                              "wb = Workbench('sample_sessions/support_chat.json')\nwb")]
        nbformat.write(nb, lab.root / "undo.ipynb")
        (lab.root / "sample_sessions").mkdir(exist_ok=True)
        name = "sample_sessions/support_chat.json"
        shutil.copyfile(ROOT / name, lab.root / name)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(UPDATE_MS)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            notebook = run_all_cells(page, lab, "undo.ipynb", page_ms=30_000, kernel_ms=30_000, step_ms=UPDATE_MS)
            editor = notebook.locator(".wb-message-editor")
            header = notebook.locator(".wb-token-view .wb-header")
            expect(header).to_contain_text(" tokens", timeout=30_000)
            total = re.search(r"(\d+) tokens", header.inner_text())
            assert total
            rows_ = editor.locator(".wb-me-row")
            expect(rows_).to_have_count(220)
            expect(rows_.last.locator(".wb-me-count")).to_have_text(re.compile(r"^\d+ tok$"), timeout=SUMMARY_MS)
            rows_.nth(3).locator("button[title='delete this message']").click()
            expect(rows_).to_have_count(219)
            expect(editor.locator(".wb-me-notice")).to_contain_text("deleted message 3")
            editor.locator(".wb-me-notice").get_by_role("button", name="Undo").click()
            expect(rows_).to_have_count(220)
            expect(header).to_contain_text(f" {total.group(1)} tokens", timeout=UPDATE_MS)
            rows_.nth(5).locator("button[title='delete this message']").click()
            expect(rows_).to_have_count(219)
            rows_.nth(2).locator(".wb-me-preview").click()
            page.keyboard.press("Control+z")
            expect(rows_).to_have_count(220)
            expect(header).to_contain_text(f" {total.group(1)} tokens", timeout=UPDATE_MS)
        finally:
            context.close()
        assert not errors, f"errors in the page: {errors}"
    finally:
        code = lab.stop()
    assert code == 0, lab.log()
