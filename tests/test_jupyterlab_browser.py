"""The notebook widget in a real JupyterLab: a server started by the test (tests/lab_server.py),
a notebook written into its root, opened in the system Chromium (headless, Playwright), run, and
the widget checked in the page. Front-end errors (the ES module, the widget manager, anywidget)
only show there: nbclient runs the kernel side alone.

Every wait is time-boxed and says what did not appear. A missing part is a failure that says what
to install, never a skip. With WORKBENCH_SCREENSHOTS=1 the test also writes docs/images/notebook.png.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterator

import nbformat
import pytest
from browser import ROOT
from lab_server import run_all_cells

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

SESSION = ROOT / "sample_sessions" / "support_chat.json"
NOTEBOOK = "workbench_widget.ipynb"
SCREENSHOT = ROOT / "docs" / "images" / "notebook.png"

# The cell that shows the whole workbench. The kernel runs in the server's root, where the test
# copies the session (a relative path keeps the machine's paths out of the screenshot); `workbench`
# itself is installed in the environment.
WIDGET_CELL = """\
from workbench.ui.notebook import Workbench

wb = Workbench('sample_sessions/support_chat.json', template='qwen2.5')
wb"""
EDITED = "Typed in JupyterLab: does the kernel re-assemble?"

PAGE_MS = 30_000      # JupyterLab's first page of a fresh server: the bundle and every extension
KERNEL_MS = 30_000    # a fresh kernel starts (imports ipykernel) and reports idle
WIDGET_MS = 30_000    # the cell runs: imports workbench, loads the tokenizer, assembles, renders
STEP_MS = 5_000       # a click, a menu

# Console errors that are about the widget fail the test; other console errors are ignored as
# JupyterLab's own noise in a sandbox with no network and a fresh profile: resource 404s ("Failed to
# load resource", e.g. a favicon), the language-server extension finding no servers, the
# news/update/translation endpoints that are off here. (With JupyterLab 4.6 the console shows none
# of them: a debug line, and a warning that terminals are off.) Page errors, uncaught exceptions,
# are never ignored: an ES module that throws in render() shows as one ("boom"), and as a console
# error whose stack names anywidget.
RELEVANT = re.compile(r"anywidget|widget|wb-|token_view", re.IGNORECASE)


@pytest.fixture(scope="module")
def lab() -> Iterator[object]:
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.fail("pip install 'jupyterlab>=4' (the test extra)")
    from lab_server import LabServer

    server = LabServer()
    try:
        yield server
    finally:
        code = server.stop()
    assert code == 0, f"the JupyterLab server did not stop cleanly ({code}): {server.log()}"


def write_notebook(lab) -> None:  # type: ignore[no-untyped-def]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# Prompt Workbench in JupyterLab\n\nThe support chat's last "
                                              "turn: edit a message on the left, the token view follows."),
                nbformat.v4.new_code_cell(WIDGET_CELL)]
    nbformat.write(nb, lab.root / NOTEBOOK)
    (lab.root / "sample_sessions").mkdir(exist_ok=True)
    shutil.copyfile(SESSION, lab.root / "sample_sessions" / SESSION.name)


def expected_tokens() -> int:
    from workbench import Assembler, load_session

    return Assembler(template="qwen2.5").assemble(load_session(SESSION).turn(None)).total_tokens


def test_the_kernel_is_this_python(lab) -> None:  # type: ignore[no-untyped-def]
    specs = lab.request("/api/kernelspecs")
    assert specs["default"] == "python3"
    assert specs["kernelspecs"]["python3"]["spec"]["argv"][0] == sys.executable


def test_the_workbench_renders_and_follows_an_edit_in_a_notebook(lab, browser) -> None:  # type: ignore[no-untyped-def]
    write_notebook(lab)
    want = expected_tokens()
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(STEP_MS)
    page_errors: list[str] = []
    console_errors: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    try:
        notebook = run_all_cells(page, lab, NOTEBOOK, page_ms=PAGE_MS, kernel_ms=KERNEL_MS, step_ms=STEP_MS)

        output = notebook.locator(".jp-OutputArea-output")
        view = output.locator(".wb-token-view")
        try:
            expect(view, "no .wb-token-view in the cell's output").to_be_visible(timeout=WIDGET_MS)
            expect(view.locator(".wb-header"), "the header does not show the token count"
                   ).to_contain_text(f"{want} tokens", timeout=WIDGET_MS)
        except AssertionError as e:
            shown = output.all_inner_texts()
            raise AssertionError(f"{e}\noutput area: {[t[:500] for t in shown]}\npage errors: {page_errors}\n"
                                 f"console errors: {console_errors}") from None
        # (segments are painted on the next animation frame after the header)
        expect(view.locator(".wb-seg").nth(100), "not one segment per message").to_be_attached()
        expect(view.locator(".wb-special").first, "no special token rendered").to_be_visible()
        expect(view.locator(".wb-special", has_text="<|im_start|>").first).to_be_attached()
        # The message editor, the other ES module, and a round trip through the kernel: an edit in
        # the page re-assembles there and comes back as a patch of the token view.
        editor = output.locator(".wb-message-editor")
        expect(editor.locator(".wb-me-row").first, "no message rows in the editor").to_be_visible()
        before = view.locator(".wb-header").inner_text()
        editor.locator(".wb-me-row").last.locator("textarea[data-field=content]").fill(EDITED)
        expect(view, "the edit did not reach the token view").to_contain_text(EDITED, timeout=WIDGET_MS)
        expect(view.locator(".wb-header")).not_to_have_text(before)

        # Every tab's title shows whole (Lumino once cut "Diagnostics" in a 1,280-pixel window).
        titles = output.locator(".wb-tabs > .lm-TabBar .lm-TabBar-tab")
        expect(titles).to_have_count(9)
        cut = titles.evaluate_all("ts => ts.filter(t => { const l = t.querySelector('.lm-TabBar-tabLabel') || t;"
                                  " return l.scrollWidth > l.clientWidth + 1; }).map(t => t.textContent)")
        assert not cut, f"tab titles cut: {cut}"
        assert "Diagnostics" in titles.all_inner_texts()
        # The page as a person sees it: the file browser folded away, the cell and the widget's top.
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
        expect(page.locator("#jp-left-stack")).to_be_hidden()
        notebook.locator(".jp-Cell").first.scroll_into_view_if_needed()
        png = page.screenshot()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("WORKBENCH_SCREENSHOTS") == "1":
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            SCREENSHOT.write_bytes(png)
    finally:
        context.close()
    relevant = [m for m in console_errors if RELEVANT.search(m)]
    assert not page_errors and not relevant, \
        f"JavaScript errors in the page: {page_errors + relevant} (console noise ignored: {console_errors})"
