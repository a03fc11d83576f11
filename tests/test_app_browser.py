"""`workbench app` in a real browser: the system Chromium, headless, driven by Playwright.

One server for the module (`workbench app sample_sessions/support_chat.json`); each browser test
opens its own page, which Panel gives its own app state. Every wait is time-boxed. A few checks
first that need no browser: the command's error rule and the app's state outside a server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import ROOT, AppServer, app_command, autosave_settled, clear_autosaves, from_the_file, serving
from browser import open_page as browser_page

# The test setup installs Playwright, Panel and the distribution's Chromium (scripts/test.sh):
# a missing part is a failure that says what to install, never a silent skip.
try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install


FIRST_VIEW_MS = 15_000   # the first page of a fresh server loads Panel's bundle and 222 segments
UPDATE_MS = 5_000        # an edit: debounce (150 ms) + incremental assembly + patch
BROKEN_TEMPLATE = "{% for m in messages %}\n{{ m.content }\n{% endfor %}"   # line 2: unexpected '}'


# ------------------------------------------------------------------------------ without a browser
@pytest.mark.parametrize("argv, says", [
    (["no/such/session.json"], "cannot read"),
    (["--port", "70000"], "--port must be between 0 and 65535"),
    (["--port", "many"], "invalid int value"),
])
def test_app_errors_are_one_line_and_exit_2(argv: list[str], says: str) -> None:
    r = subprocess.run([*app_command(), *argv, "--no-show"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert says in r.stderr and r.stdout == ""


def test_app_state_keeps_the_last_good_prompt(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from workbench.ui.app import WorkbenchApp
    from workbench.ui.document import Autosave
    from workbench.ui.state import sample_sessions

    app = WorkbenchApp(sample_sessions()["coding_corrections.json"], autosave=Autosave(tmp_path))  # no server: inline
    first = app.state.result
    assert first is not None and not app.alert.visible and app.view.version == 1
    last = len(app.editor.messages) - 1
    app.editor.ops = [{"op": "set", "index": last, "field": "content", "value": "Thanks, that works.", "n": 1}]
    edited = app.state.result
    assert edited is not first and edited.reused_segments > 0          # incremental: the prefix is reused
    app.custom.value_input = BROKEN_TEMPLATE
    # Said beside the box being typed in, not at the top of the other column.
    assert app.custom_alert.visible and "line 2" in app.custom_alert.object and not app.alert.visible
    assert app.state.result is edited and "line 2" in app.view.error   # the view keeps the last good prompt
    app.custom.value_input = ""
    assert not app.custom_alert.visible and app.view.error == ""
    app.turn_select.value = 2
    assert app.state.turn == 2 and app.state.result.total_tokens < edited.total_tokens
    assert app.editor.turn_cut < len(app.editor.messages)              # later messages shown as after this turn
    # A bad edit is shown at its message and changes nothing.
    app.editor.ops = [{"op": "set", "index": 1, "field": "tool_calls", "value": "[{oops", "json": True, "n": 2}]
    assert app.editor.error["index"] == 1 and "line 1, column 3" in app.editor.error["message"]
    app.tools.value_input = '[{"type": "function"'
    assert app.tools_alert.visible and "tools: not valid JSON" in app.tools_alert.object
    assert list(tmp_path.rglob("*.json"))                               # the edits were autosaved


# ------------------------------------------------------------------------------ in a real browser
@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return tmp_path_factory.mktemp("workbench-home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[AppServer]:
    with serving("sample_sessions/support_chat.json", env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


def open_page(browser, server: AppServer, errors: list[str]):  # type: ignore[no-untyped-def]
    return browser_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)


@pytest.fixture
def page(browser, server: AppServer, home: Path):  # type: ignore[no-untyped-def]
    # Each test starts from the file, not another's edits (browser.py: autosave_settled, from_the_file).
    clear_autosaves(home)
    errors: list[str] = []
    page = open_page(browser, server, errors)
    from_the_file(page, UPDATE_MS)
    yield page
    autosave_settled(page, UPDATE_MS)
    page.context.close()
    assert not errors, f"errors in the page: {errors}"


def token_count(page) -> int:  # type: ignore[no-untyped-def]
    """The total the token view's header shows ("... 6849 tokens ...")."""
    text = page.locator(".wb-token-view .wb-header").inner_text()
    m = re.search(r"(\d+) tokens", text)
    assert m, f"no token count in the header: {text!r}"
    return int(m.group(1))


def wait_for_count_change(page, before: int) -> int:  # type: ignore[no-untyped-def]
    expect(page.locator(".wb-token-view .wb-header")).not_to_contain_text(f" {before} tokens", timeout=UPDATE_MS)
    return token_count(page)


def last_message(page):  # type: ignore[no-untyped-def]
    """The content box of the last message (open when the page loads)."""
    return page.locator(".wb-me-row").last.locator("textarea[data-field=content]")


def custom_template(page):  # type: ignore[no-untyped-def]
    return page.get_by_placeholder("paste a Jinja chat template here")


def tab(page, name: str):  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text=name).first.click()


def test_view_shows_segments_special_tokens_and_totals(page) -> None:  # type: ignore[no-untyped-def]
    n = token_count(page)
    assert n > 1000                                  # support_chat is a long conversation
    assert page.locator(".wb-seg").count() > 100     # one segment per message, at least
    assert page.locator(".wb-me-row").count() == 220  # the editor: one row per message
    expect(page.locator(".wb-special", has_text="<|im_start|>").first).to_be_visible()  # qwen2.5, the default
    expect(page.locator(".wb-app-header")).to_contain_text(f"{n} tokens")
    expect(page.locator(".wb-app-header")).to_contain_text("budget")
    expect(page.locator(".js-plotly-plot").first).to_be_attached()   # the budget bar
    assert page.get_by_label("Session").input_value().endswith("support_chat.json")
    if os.environ.get("WORKBENCH_SCREENSHOTS") == "1":     # app-cache.png (app.png: test_model_picker_browser.py)
        tab(page, "Cache")
        expect(page.locator(".wb-sources tr", has_text="fresh")).to_be_visible(timeout=FIRST_VIEW_MS)
        page.screenshot(path=str(ROOT / "docs" / "images" / "app-cache.png"))


def test_editing_the_last_message_changes_the_count_and_the_cache_panel(page) -> None:  # type: ignore[no-untyped-def]
    tab(page, "Cache")
    fresh = page.locator(".wb-sources tr", has_text="fresh")
    expect(fresh).to_be_visible(timeout=FIRST_VIEW_MS)           # the panels ran once every turn was assembled
    fresh_before = fresh.inner_text()
    tab(page, "Tokens")
    before = token_count(page)
    segs = page.locator(".wb-seg").count()
    last_message(page).fill("Short now.")
    after = wait_for_count_change(page, before)
    assert after < before
    assert page.locator(".wb-seg").count() == segs   # the same segments, the last one re-rendered
    expect(page.locator(".wb-seg").last.locator(".wb-seg-label")).to_contain_text("generation_prompt")
    expect(page.locator(".wb-token-view")).to_contain_text("Short now.")
    # Incremental: the app's header reports the reused segments of the unchanged prefix.
    # (the summary line follows the token view once typing pauses)
    expect(page.locator(".wb-app-header")).to_contain_text(re.compile(r"\b[1-9]\d\d of \d+ segments reused"))
    # The cache panel follows: this turn's fresh tokens are the edited message's now.
    tab(page, "Cache")
    expect(fresh).not_to_have_text(fresh_before, timeout=UPDATE_MS)
    expect(page.locator(".wb-cache")).to_contain_text("re-assembled 0 turn(s)")   # only the edited turn changed
    # Typing on grows it again.
    tab(page, "Tokens")
    last_message(page).fill("Short now. " + "Tell me more about grinders and burrs. " * 10)
    assert wait_for_count_change(page, after) > after


def test_messages_can_be_added_moved_and_deleted(page) -> None:  # type: ignore[no-untyped-def]
    rows = page.locator(".wb-me-row")
    before = token_count(page)
    page.locator(".wb-me-add-role").select_option("assistant")
    page.get_by_role("button", name="+ add").click()
    expect(rows).to_have_count(221)
    expect(page.get_by_label("Turn")).to_have_value("111")        # an assistant message opens a new turn
    rows.last.locator("textarea[data-field=content]").fill("A new reply.")
    expect(page.locator(".wb-token-view")).to_contain_text("A new reply.", timeout=UPDATE_MS)
    rows.last.locator("button[title='move up']").click()           # reorder: above the last user message
    expect(rows.nth(219)).to_contain_text("A new reply.")
    rows.nth(219).locator("button[title='delete this message']").click()
    expect(rows).to_have_count(220)
    expect(page.locator(".wb-token-view")).not_to_contain_text("A new reply.", timeout=UPDATE_MS)
    expect(page.locator(".wb-token-view .wb-header")).to_contain_text(f" {before} tokens")


def test_switching_the_template_changes_the_special_tokens(page) -> None:  # type: ignore[no-untyped-def]
    page.get_by_label("Template", exact=True).select_option("llama3")
    expect(page.locator(".wb-special", has_text="<|start_header_id|>").first).to_be_visible(timeout=UPDATE_MS)
    expect(page.locator(".wb-special", has_text="<|im_start|>")).to_have_count(0)
    expect(page.locator(".wb-token-view .wb-header")).to_contain_text("llama3")
    page.get_by_label("Tokenizer", exact=True).select_option("o200k_base")   # any tokenizer, same template
    expect(page.locator(".wb-token-view .wb-header")).to_contain_text("o200k_base", timeout=UPDATE_MS)


def test_a_broken_template_shows_inline_and_the_page_keeps_working(page) -> None:  # type: ignore[no-untyped-def]
    before = token_count(page)
    custom_template(page).fill(BROKEN_TEMPLATE)
    alert = page.locator(".wb-custom-alert")            # beside the box, not at the top of the right column
    expect(alert).to_be_visible(timeout=UPDATE_MS)
    expect(alert).to_contain_text("line 2")
    expect(page.locator(".wb-main-alert")).to_be_hidden()
    box, said = custom_template(page).bounding_box(), alert.bounding_box()
    assert box is not None and said is not None and 0 <= said["y"] - (box["y"] + box["height"]) < 80
    # The last good view stays, and says why it is not updating.
    assert token_count(page) == before
    expect(page.locator(".wb-seg").first).to_be_visible()
    expect(page.locator(".wb-token-view .wb-error")).to_contain_text("line 2")
    # Still alive: clearing the template brings the live view back, and edits re-assemble.
    custom_template(page).fill("")
    expect(alert).to_be_hidden(timeout=UPDATE_MS)
    expect(page.locator(".wb-token-view .wb-error")).to_have_count(0)
    last_message(page).fill("Still here?")
    assert wait_for_count_change(page, before) < before
    # A custom template that works overrides the select.
    custom_template(page).fill("{% for m in messages %}<|im_start|>{{ m.role }}: {{ m.content }}<|im_end|>\n"
                               "{% endfor %}")
    expect(page.locator(".wb-token-view .wb-header")).to_contain_text("custom", timeout=UPDATE_MS)
    expect(alert).to_be_hidden()


def test_an_edit_survives_a_reload(page) -> None:  # type: ignore[no-untyped-def]
    last_message(page).fill("Remember me after a reload.")
    expect(page.locator(".wb-token-view")).to_contain_text("Remember me after a reload.", timeout=UPDATE_MS)
    expect(page.locator(".wb-file-status")).to_contain_text("autosaved", timeout=UPDATE_MS)
    count = token_count(page)
    page.reload()
    expect(page.locator(".wb-seg").first).to_be_visible(timeout=FIRST_VIEW_MS)
    expect(last_message(page)).to_have_value("Remember me after a reload.")
    expect(page.locator(".wb-file-status")).to_contain_text("restored your unsaved edits")
    assert token_count(page) == count
    page.get_by_role("button", name="Revert").click()                 # back to the file as saved
    expect(last_message(page)).not_to_have_value("Remember me after a reload.", timeout=UPDATE_MS)


def test_prefix_diff_and_teaching(page) -> None:  # type: ignore[no-untyped-def]
    page.get_by_label("Session").select_option(label="timestamp_system.json")
    expect(page.get_by_label("Turn")).to_have_value("5", timeout=UPDATE_MS)
    tab(page, "Prefix diff")
    diff = page.locator(".wb-diff")
    expect(diff).to_contain_text("diverges from turn 4 at token", timeout=FIRST_VIEW_MS)
    expect(diff).to_contain_text("volatile_content")
    expect(page.locator(".wb-diff-first")).to_have_count(2)          # highlighted in both prompts
    tab(page, "Teach")
    expect(page.locator(".wb-teach-title")).to_contain_text("Step 1 of 7")
    for _ in range(6):
        page.get_by_role("button", name="Next ▶").click()
    expect(page.locator(".wb-teach-title")).to_contain_text("Step 7 of 7")


def test_teach_presentation_mode(page) -> None:  # type: ignore[no-untyped-def]
    # Large type, one idea per screen, the rest of the page out of the way; and back.
    tab(page, "Teach")
    expect(page.locator(".wb-teach-title")).to_contain_text("Step 1 of 7", timeout=FIRST_VIEW_MS)
    expect(page.locator(".wb-t-summary")).to_have_count(1)             # the caption once, not twice
    page.get_by_role("button", name="Present").click()
    idea = page.locator(".wb-p-idea")
    expect(idea).to_contain_text("list of", timeout=UPDATE_MS)          # step 1's idea: the messages
    assert float(idea.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")) >= 30
    # The step-through covers the window, the editor column under it (the page keeps its layout).
    box, size = page.locator(".wb-teach").first.bounding_box(), page.viewport_size
    assert box is not None and size is not None
    assert (box["x"], box["y"], box["width"], box["height"]) == (0, 0, size["width"], size["height"])
    expect(page.locator(".wb-present .wb-p-dot")).to_have_count(7)
    page.get_by_role("button", name="Next ▶").click()
    expect(page.locator(".wb-p-step")).to_contain_text("2 / 7 · Chat template")
    expect(page.locator(".wb-p-dot.wb-p-on")).to_have_count(1)
    # A presenter's clicker: its keys step through, Escape ends the presentation.
    page.keyboard.press("PageDown")
    expect(page.locator(".wb-p-step")).to_contain_text("3 / 7")
    page.keyboard.press("ArrowRight")
    expect(page.locator(".wb-p-step")).to_contain_text("4 / 7")
    page.keyboard.press(" ")
    expect(page.locator(".wb-p-step")).to_contain_text("5 / 7")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("PageUp")
    page.keyboard.press("ArrowLeft")
    expect(page.locator(".wb-p-step")).to_contain_text("2 / 7")
    if os.environ.get("WORKBENCH_SCREENSHOTS") == "1":     # the README's picture of the mode
        for _ in range(4):
            page.get_by_role("button", name="Next ▶").click()
        expect(page.locator(".wb-p-step")).to_contain_text("6 / 7")
        page.screenshot(path=str(ROOT / "docs" / "images" / "present.png"))
    page.keyboard.press("Escape")
    expect(page.locator(".wb-present")).to_have_count(0, timeout=UPDATE_MS)
    width = page.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= page.evaluate("() => window.innerWidth"), f"the page is {width} pixels wide after Present"


# The token view's module, alone in a blank page, with a stand-in model of each host: anywidget
# (buffers as the callback's second argument, model.send) and Panel (buffers inside the message,
# no model.send: the view bumps `sync`).
HOSTS_HARNESS = """
async ({src, anywidget}) => {
  const mod = await import("data:text/javascript;base64," + src);
  const handlers = {}, sent = [];
  const attrs = {error: "", version: 1, sync: 0, header: {template: "t", tokenizer: "k", total_tokens: 3,
                 segments: 1, reused_segments: 0, budget: {used: 3, input_budget: 10}, cache_key: "abc"}};
  const model = {get: (k) => attrs[k], set: (k, v) => { attrs[k] = v; }, on: (ev, cb) => { handlers[ev] = cb; },
                 save_changes: () => sent.push({sync: attrs.sync})};
  if (anywidget) model.send = (m) => sent.push(m);
  const el = document.createElement("div");
  document.body.appendChild(el);
  mod.default.render({model, el});
  const ids = new Uint32Array([7, 8, 9]), ends = new Uint32Array([2, 3, 5]), special = new Uint8Array([1, 0, 0]);
  const msg = {type: "patch", keep: 0, header: attrs.header,
               segments: [{kind: "message", role: "user", seq: 0, text: "ABcDE", start: 0, end: 3, source: "fresh"}]};
  if (anywidget) handlers["msg:custom"](msg, [ids, ends, special].map((a) => new DataView(a.buffer)));
  else handlers["msg:custom"]({...msg, buffers: [ids.buffer, ends.buffer, special.buffer]});
  return {sent, pieces: [...el.querySelectorAll(".wb-seg span")].map((e) => [e.textContent, e.className])};
}
"""


def in_blank_page(browser, harness: str, css: bool = False, **args: object) -> dict:  # type: ignore[no-untyped-def]
    """Run a harness over the token view's module (as `src`) in a blank page; what it returns."""
    import base64

    page = browser.new_page(viewport={"width": 1000, "height": 600})
    try:
        page.goto("about:blank")
        if css:
            page.add_style_tag(content=(ROOT / "widgets" / "token_view.css").read_text("utf-8"))
        src = base64.b64encode((ROOT / "widgets" / "token_view.js").read_bytes()).decode()
        return page.evaluate(harness, {"src": src, **args})
    finally:
        page.close()


@pytest.mark.parametrize("anywidget", [True, False], ids=["anywidget", "panel"])
def test_the_token_view_module_speaks_both_hosts_protocols(browser, anywidget: bool) -> None:  # type: ignore[no-untyped-def]
    got = in_blank_page(browser, HOSTS_HARNESS, anywidget=anywidget)
    assert got["sent"] == ([{"type": "sync"}] if anywidget else [{"sync": 1}])
    assert got["pieces"] == [["AB", "wb-special"], ["c", "wb-tok"], ["DE", "wb-tok"]]   # boundaries shown


# The token view's module in a blank page with a stand-in anywidget model; `handlers` gets its callbacks.
VIEW_IN_A_PAGE = """
async ({src}) => {
  const mod = await import("data:text/javascript;base64," + src);
  const handlers = {}, sent = [];
  const attrs = {error: "", version: 1, header: {}};
  const model = {get: (k) => attrs[k], set: (k, v) => { attrs[k] = v; }, on: (ev, cb) => { handlers[ev] = cb; },
                 save_changes: () => {}, send: (m) => sent.push(m)};
  const el = document.createElement("div");
  document.body.appendChild(el);
  mod.default.render({model, el});
"""

RUNS_HARNESS = VIEW_IN_A_PAGE + """
  const seg = (seq, text, start, end) => ({kind: "message", role: "user", seq, text, start, end, source: "fresh"});
  const bufs = (ids, ends) => [new Uint32Array(ids), new Uint32Array(ends), new Uint8Array(ids.length)]
    .map((a) => new DataView(a.buffer));
  handlers["msg:custom"]({type: "patch", keep: 0, header: {}, segments: [seg(0, "A", 0, 1), seg(1, "B", 1, 2),
                          seg(2, "C", 2, 3)]}, bufs([1, 2, 3], [1, 1, 1]));
  const first = [...el.querySelectorAll(".wb-seg")];
  // Segment 1 dropped, a new one at the end, segment 2 moved up by one token.
  handlers["msg:custom"]({type: "patch", keep: 1, header: {}, segments: [seg(3, "D", 2, 3)],
                          runs: [{old: 0, count: 1, shift: 0}, {old: 2, count: 1, shift: -1}, {new: 1}]},
                         bufs([4], [1]));
  const now = [...el.querySelectorAll(".wb-seg")];
  return {texts: now.map((e) => e.lastChild.textContent), labels: now.map((e) => e.firstChild.textContent),
          reused: [now[0] === first[0], now[1] === first[2]]};
}
"""


def test_the_token_view_module_keeps_moved_segments(browser) -> None:  # type: ignore[no-untyped-def]
    got = in_blank_page(browser, RUNS_HARNESS)
    assert got["texts"] == ["A", "C", "D"]
    assert got["reused"] == [True, True]                 # the same DOM nodes, not redrawn
    assert "[1:2]" in got["labels"][1] and "[2:3]" in got["labels"][2]   # the moved one relabelled


SPLICE_HARNESS = VIEW_IN_A_PAGE + """
  const seg = (text, end, more) => ({kind: "message", role: "user", seq: 0, text, start: 0, end, source: "fresh",
                                    ...more});
  const bufs = (ids, ends) => [new Uint32Array(ids), new Uint32Array(ends), new Uint8Array(ids.length)]
    .map((a) => new DataView(a.buffer));
  // "a😀 b c" as four tokens: "a", "😀" (two UTF-16 units), " b", " c".
  handlers["msg:custom"]({type: "patch", keep: 0, header: {}, segments: [seg("a😀 b c", 4)]},
                         bufs([1, 2, 3, 4], [1, 3, 5, 7]));
  const before = [...el.querySelectorAll(".wb-seg span")];
  // " b" becomes " B!" (two tokens): head 2 ("a😀", 3 units), tail 1 (" c", 2 units).
  handlers["msg:custom"]({type: "patch", keep: 0, header: {}, runs: [{new: 1}],
                          segments: [seg(" B!", 5, {from: 0, head: 2, tail: 1, chars: [3, 2]})]},
                         bufs([5, 6], [2, 3]));
  const after = [...el.querySelectorAll(".wb-seg span")];
  // A change to a segment it does not hold: not applied, the whole view asked for instead.
  const asked = sent.length;
  handlers["msg:custom"]({type: "patch", keep: 0, header: {}, runs: [{new: 1}],
                          segments: [seg("x", 1, {from: 7, head: 0, tail: 0, chars: [0, 0]})]}, bufs([9], [1]));
  return {pieces: after.map((e) => e.textContent), titles: after.map((e) => e.title.split(" ")[1]),
          same: [after[0] === before[0], after[1] === before[1], after[4] === before[3]],
          label: el.querySelector(".wb-seg-label").textContent, resync: sent.slice(asked),
          still: [...el.querySelectorAll(".wb-seg span")].map((e) => e.textContent).join("")};
}
"""


def test_the_token_view_module_splices_a_change_in_place(browser) -> None:  # type: ignore[no-untyped-def]
    got = in_blank_page(browser, SPLICE_HARNESS)
    assert got["pieces"] == ["a", "😀", " B", "!", " c"] and got["titles"] == ["1", "2", "5", "6", "4"]
    assert got["same"] == [True, True, True]          # the kept tokens' spans were not redrawn
    assert "5 tokens [0:5]" in got["label"]
    assert got["resync"] == [{"type": "sync"}] and got["still"] == "a😀 B! c"   # a stale change: not applied


LAZY_HARNESS = VIEW_IN_A_PAGE + """
  const N = 60, T = 100, segs = [];
  const ids = new Uint32Array(N * T), ends = new Uint32Array(N * T), special = new Uint8Array(N * T);
  for (let s = 0; s < N; s++) {
    let text = "";
    for (let t = 0; t < T; t++) { text += `w${t} `; ids[s * T + t] = t; ends[s * T + t] = text.length; }
    segs.push({kind: "message", role: "user", seq: s, text, start: s * T, end: (s + 1) * T, source: "fresh"});
  }
  handlers["msg:custom"]({type: "patch", keep: 0, header: {}, segments: segs},
                         [ids, ends, special].map((a) => new DataView(a.buffer)));
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const spans = () => [...el.querySelectorAll(".wb-seg")].map((s) => s.querySelectorAll("span").length);
  await frame(); await frame();
  const first = spans();
  el.querySelector(".wb-token-view").scrollTop = 1e9;
  await frame(); await frame();
  return {first, after: spans(), sameText: [...el.querySelectorAll(".wb-seg")].every((s, i) =>
    s.lastChild.textContent === segs[i].text)};
}
"""


def test_a_whole_view_draws_tokens_where_they_are_seen(browser) -> None:  # type: ignore[no-untyped-def]
    got = in_blank_page(browser, LAZY_HARNESS, css=True)
    assert got["sameText"]                                   # every segment shows its text, drawn or not
    assert got["first"][0] == 100 and got["first"][-1] == 0  # tokens near the top only
    assert got["after"][-1] == 100                           # scrolled down: drawn there too


def test_the_kv_tab_shows_blocks_and_runs_a_real_prefill(page) -> None:  # type: ignore[no-untyped-def]
    tab(page, "KV")
    kv = page.locator(".wb-kv")
    expect(kv).to_contain_text("131,072 bytes per token", timeout=FIRST_VIEW_MS)     # Llama-3-8B, bf16
    expect(kv.locator(".wb-kv-table tr").nth(1)).to_be_attached()
    # The rows are `workbench kv --json`'s (issue 33), their bytes in a unit that fits, held explained.
    from workbench.engine.kv import HELD_NOTE, format_bytes
    cli = subprocess.run([sys.executable, "-m", "workbench.cli.main", "kv", "sample_sessions/support_chat.json",
                          "--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    last = json.loads(cli.stdout)["turns"][-1]
    cells = kv.locator(".wb-kv-table tr").last.locator("td")
    expect(cells.nth(0)).to_have_text(str(last["turn"]))
    expect(cells.nth(3)).to_have_text(f"{last['shared_blocks']:,}")
    expect(cells.nth(6)).to_have_text(format_bytes(last["held_bytes"]))
    expect(kv.locator(".wb-kv-held")).to_contain_text(HELD_NOTE)
    page.get_by_label("Model shape (KV)").select_option("Qwen2.5-7B")
    expect(kv).to_contain_text("57,344 bytes per token")
    page.get_by_role("button", name=re.compile("Prefill this turn")).click()
    expect(kv.locator(".wb-kv-prefill")).to_contain_text("tokens reused", timeout=60_000)
    expect(kv.locator(".wb-kv-prefill")).to_contain_text("synthetic tiny")


FRESH_LOAD = """
import json, sys
import workbench
from workbench.export.goldens import decode_ids
asm = workbench.load_bundle(sys.argv[1])
golden = json.load(open(sys.argv[2]))
last = golden["turns"][-1]
ids = asm.assemble(last["request"]).token_ids
print(json.dumps({"equal": ids.tolist() == decode_ids(last["ids"]).tolist(), "tokens": len(ids)}))
"""


def test_a_bundle_exported_from_the_app_reproduces_the_ids_in_a_fresh_process(page, home: Path) -> None:  # type: ignore[no-untyped-def]
    import json
    import sys

    last_message(page).fill("Exported as edited.")
    expect(page.locator(".wb-token-view")).to_contain_text("Exported as edited.", timeout=UPDATE_MS)
    count = token_count(page)
    out = home / "sessions" / "exports" / "browser-bundle"     # the app exports only to its export folder
    box = page.get_by_label("Export a bundle to (production)")
    box.fill(out.name)
    box.press("Enter")
    page.get_by_role("button", name="Export", exact=True).click()
    expect(page.locator(".wb-export-ok")).to_contain_text("identical ids", timeout=120_000)
    golden = next((out / "goldens").glob("*.json"))
    r = subprocess.run([sys.executable, "-c", FRESH_LOAD, str(out), str(golden)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got == {"equal": True, "tokens": count}        # the app's prompt, edit included



BYTES_HARNESS = VIEW_IN_A_PAGE.replace("async ({src}) =>", "async ({src, msg, bufs}) =>") + """
  handlers["msg:custom"](msg, bufs.map((b) => new DataView(new Uint8Array(b).buffer)));
  return [...el.querySelectorAll(".wb-seg span")].map((e) => [e.textContent, e.className]);
}
"""


def test_the_token_view_shows_a_split_character_as_its_bytes(browser) -> None:  # type: ignore[no-untyped-def]
    # A real patch (the view model over a real assembly): the halves of an emoji that byte-level BPE
    # splits show as <0xF0>-style bytes, not as an empty span next to a whole emoji.
    from workbench import Assembler
    from workbench.ui import TokenViewModel

    asm = Assembler(template="qwen2.5", cache=None)
    patch = TokenViewModel(asm.tokenizer).update(asm.assemble({"messages": [{"role": "user", "content": "beans 🫘"}]}))
    content, buffers = patch.message()
    spans = in_blank_page(browser, BYTES_HARNESS, msg=content, bufs=[list(b) for b in buffers])
    marked = [text for text, cls in spans if "wb-bytes" in cls]
    assert any("<0xF0>" in t for t in marked), spans
    assert not any(text == "" for text, cls in spans if "wb-special" not in cls), spans   # no empty span left
    assert "🫘" not in "".join(text for text, _ in spans)      # the emoji is shown as the bytes that make it
