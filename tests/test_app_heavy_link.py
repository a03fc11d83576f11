"""Heavy work for one page never delays another page's keystrokes (issue 34, item 2), in a real
Chromium: page B types while page A opens a heavy `?state=` link (four 1 MB messages in a 5 KB
link, within the link's limits, seconds of assembly) or the probe's link whose custom template
loops. A's page is built off the server's event loop (ui/opening.py): it shows what it is opening,
then the page (or the error inline), while B's keys repaint as before.

Each key in B is timed in B's own page, from its keydown to the token view's repaint after it (the
`wb-painted-N` marks, as benchmarks/bench_app_keystroke.py times them). Keys are typed one after
another until A has painted its own token view, so that they span A's whole opening. Built on the
loop (before), one of B's keys waited for the whole of A's build (with four 2 MB messages: 28 s and
31 s in two runs here, 2 shared cores, loaded), so that key was B's p95; built off it, B's p95 was 0.3
to 1.3 s over 61 to 138 keys, and with the 1 MB messages 0.2 s over 40 keys while A opened for 7 s.
The looping template ends within a second or two since the steps budget (issue 34, item
7), before as now: that test shows A's inline error and B's keys, not a difference.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from browser import ROOT, AppServer, open_page

from workbench.share import SharedState, encode, link

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install
    PlaywrightError = Exception  # type: ignore[assignment, misc]

FIRST_VIEW_MS = 60_000   # the first page of a server (Panel's bundle), on 2 shared cores
UPDATE_MS = 10_000
STOP_S = 120.0           # the server's exit (see `patient`)
OPEN_S = 180.0           # page A's whole opening, on 2 shared cores: generous, it is not what is measured
# B types this many keys at least, and on until A has painted its view. Few: with up to 20 keys, p95
# is the slowest one, so the one key that waits for A's build (built on the loop) is the p95.
MIN_KEYS = 8
# B's keystroke p95 while A opens. Unloaded, a key repaints in tens of ms; on 2 shared cores beside
# A's build and Chromium, a few hundred. Built on the loop, a key waited for A's whole build (seconds).
P95_BOUND_MS = 2_500
SIZE = 1_000_000         # characters per message of the heavy link: 4 of them (4 MB), a 5 KB link
HEAVY = {"context_window": 4_000_000,      # the whole prompt fits: no truncation, one total to compare
         "messages": [{"role": role, "content": "a" * SIZE} for role in ("system", "user", "assistant", "user")]}
# The probe's 203-character link: a template that loops without writing (10 s per link before the
# steps budget; the budget stops it now, and it renders in the template worker, off the loop too).
LOOPING = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
PAINTS = "performance.getEntriesByType('mark').filter(m => m.name.startsWith('wb-painted-'))"


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return tmp_path_factory.mktemp("workbench-home")


@contextmanager
def patient(**env: str) -> Iterator[AppServer]:
    """`workbench app` on support_chat, stopped at the end: cleanly, though maybe not within
    browser.serving's 10 s. Its exit waits for the tokenizer's pool threads, which may still be
    encoding megabytes a heavy assembly queued (seconds each on 2 busy cores)."""
    app = AppServer("sample_sessions/support_chat.json", env=env, startup_s=120)
    try:
        yield app
    finally:
        app.proc.terminate()
        try:
            code = app.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            app.proc.kill()
            code = app.proc.wait(timeout=10)
    assert code == 0, f"the server did not stop cleanly within {STOP_S:.0f} s ({code}): {app.stderr()}"


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[AppServer]:
    # The heavy link takes tens of seconds on 2 busy cores: past the default deadline there (the
    # deadline has its own server below).
    with patient(WORKBENCH_HOME=str(home), WORKBENCH_OPEN_DEADLINE_S=str(OPEN_S)) as app:
        yield app


def percentile(xs: list[float], q: float) -> float:
    """Nearest rank: with 20 keys or fewer, p95 is the slowest."""
    xs = sorted(xs)
    return xs[max(0, math.ceil(round(q * len(xs), 6)) - 1)]


class Typist:
    """Page B: keys typed into its last message, each timed from its keydown to the repaint after it."""

    def __init__(self, page):  # type: ignore[no-untyped-def]
        self.page = page
        page.evaluate("() => { window.__keys = []; document.addEventListener('keydown', "
                      "() => window.__keys.push(performance.now()), true); }")
        self.origin = page.evaluate("() => performance.timeOrigin")
        box = page.locator(".wb-me-row").last.locator("textarea[data-field=content]")
        box.click()
        page.keyboard.press("End")
        self.keys: list[tuple[float, float]] = []      # (keydown, repaint), ms since the epoch

    def key(self, ch: str) -> None:
        n = self.page.evaluate(f"() => {PAINTS}.length")
        self.page.keyboard.type(ch)
        self.page.wait_for_function(f"() => {PAINTS}.length > {n}", timeout=OPEN_S * 1000)
        down, painted = self.page.evaluate(f"() => {{ const k = window.__keys.at(-1); "
                                           f"return [k, {PAINTS}.filter(m => m.startTime > k)[0].startTime]; }}")
        self.keys.append((self.origin + down, self.origin + painted))

    @property
    def latencies_ms(self) -> list[float]:
        return [painted - down for down, painted in self.keys]


def first_paint(page) -> float:  # type: ignore[no-untyped-def]
    """When page A first painted its token view (ms since the epoch); 0 while it has not (or while it
    is still navigating: about:blank has no marks)."""
    try:
        return float(page.evaluate(f"() => {{ const m = {PAINTS}[0]; return m ? performance.timeOrigin + "
                                   "m.startTime : 0; }"))
    except PlaywrightError:     # between two documents: the navigation is committing
        return 0.0


def opening(page) -> bool:  # type: ignore[no-untyped-def]
    try:
        return page.locator(".wb-opening").count() > 0
    except PlaywrightError:
        return False


def start_opening(browser, url: str, errors: list[str]):  # type: ignore[no-untyped-def]
    """Page A, navigating to `url` without waiting for it (the sync API's goto would block until the
    server answers: before, not until A's page was built)."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("about:blank")
    started = time.time() * 1000
    page.evaluate("(u) => { setTimeout(() => { location.href = u; }, 0); }", url)
    return page, started


def type_while(b, a, until: Any, *, at_least: int = MIN_KEYS,  # type: ignore[no-untyped-def]
               text: str = "qwertyuiop") -> tuple[Typist, bool]:
    """Keys in B until `until(a)` holds and `at_least` were typed; whether A was seen opening meanwhile."""
    typist, seen_opening, deadline = Typist(b), False, time.monotonic() + OPEN_S
    while len(typist.keys) < at_least or not until(a):
        assert time.monotonic() < deadline, f"page A did not finish opening within {OPEN_S:.0f} s"
        typist.key(text[len(typist.keys) % len(text)])
        seen_opening = seen_opening or opening(a)
    return typist, seen_opening


def render_total(tmp_path: Path, session: dict[str, Any]) -> int:
    """`workbench render SESSION --json`'s total_tokens: what the app must show for the same state."""
    f = tmp_path / "heavy.json"
    f.write_text(json.dumps(session), "utf-8")
    r = subprocess.run([sys.executable, "-m", "workbench.cli.main", "render", str(f), "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return int(json.loads(r.stdout)["total_tokens"])


def header_total(page) -> int:  # type: ignore[no-untyped-def]
    text = page.locator(".wb-token-view .wb-header").inner_text()
    m = re.search(r"(\d+) tokens", text)
    assert m, f"no token count in the header: {text!r}"
    return int(m.group(1))


# ------------------------------------------------------------------------------ the heavy link
def test_page_b_keystrokes_stay_quick_while_page_a_opens_a_heavy_link(browser, server: AppServer,  # type: ignore[no-untyped-def]
                                                                      tmp_path: Path) -> None:
    text = encode(SharedState(session=HEAVY))
    assert len(text) < 12_000                  # a small link, megabytes of messages
    errors: list[str] = []
    b = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    a, started = start_opening(browser, link(server.url, text), errors)
    typist, seen_opening = type_while(b, a, lambda a: first_paint(a) > 0)
    lat = typist.latencies_ms
    shown = first_paint(a)
    during = [k for k in typist.keys if k[0] >= started and k[1] <= shown]
    print(f"B: {len(lat)} keys while A opened ({(shown - started) / 1000:.1f} s), {len(during)} of them "
          f"wholly inside it; latency median {sorted(lat)[len(lat) // 2]:.0f} ms, p95 "
          f"{percentile(lat, 0.95):.0f} ms, max {max(lat):.0f} ms")
    assert percentile(lat, 0.95) < P95_BOUND_MS, f"B's keystrokes waited for A: {sorted(lat)}"
    assert len(during) >= 3, "B's keys did not overlap A's opening: the test measured nothing"
    assert seen_opening                        # A said what it was opening meanwhile
    # A shows the link's state: the same total as `workbench render` on the same session.
    expect(a.locator(".wb-token-view .wb-header")).to_contain_text("tokens", timeout=UPDATE_MS)
    assert header_total(a) == render_total(tmp_path, HEAVY)
    expect(a.locator(".wb-me-row")).to_have_count(4)
    expect(a.locator(".wb-share-status")).not_to_contain_text("could not be opened")
    expect(a.locator(".js-plotly-plot").first).to_be_attached()      # the budget bar: plotly came with the page
    # And A is a live page: its own edit assembles (the last message, open in the editor, shortened).
    a.locator(".wb-me-row").last.locator("textarea[data-field=content]").fill("A short question.")
    expect(a.locator(".wb-token-view")).to_contain_text("A short question.", timeout=OPEN_S * 1000)
    a.context.close()
    b.context.close()
    assert not errors, f"errors in the pages: {errors}"


# ------------------------------------------------------------------------------ a looping template
def test_a_link_with_a_looping_template_ends_inline_and_page_b_stays_quick(browser, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    text = encode(SharedState(session={"messages": [{"role": "user", "content": "Hello?"}]}, custom_template=LOOPING))
    assert len(text) < 250
    errors: list[str] = []
    b = open_page(browser, server.url, errors, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS)
    a, _started = start_opening(browser, link(server.url, text), errors)

    def said(a) -> bool:  # type: ignore[no-untyped-def]
        try:
            return a.locator(".wb-custom-alert").filter(has_text="line 1").count() > 0
        except PlaywrightError:
            return False

    # A's template fails within a second or two, so few keys span its opening: 20 at least, so that
    # the one key that may wait for A's page to be put in (its Bokeh models are made on the loop, as
    # for any page: opening a plain page costs B's key the same) is the 5 % that p95 leaves out.
    typist, _seen = type_while(b, a, said, at_least=20)
    lat = typist.latencies_ms
    print(f"B: {len(lat)} keys while A's template looped; p95 {percentile(lat, 0.95):.0f} ms, max {max(lat):.0f} ms")
    assert percentile(lat, 0.95) < P95_BOUND_MS, f"B's keystrokes waited for A's template: {sorted(lat)}"
    # Said beside the custom template's box: what stopped it, at which line, and how to fix it.
    alert = a.locator(".wb-custom-alert")
    expect(alert).to_contain_text("custom, line 1: the template took more than 250,")
    expect(alert).to_contain_text("the template loops or recurses far more than its input needs")
    expect(a.get_by_placeholder("paste a Jinja chat template here")).to_have_value(LOOPING)
    a.context.close()
    b.context.close()
    assert not errors, f"errors in the pages: {errors}"


# ------------------------------------------------------------------------------ the deadline
@pytest.fixture(scope="module")
def hurried(home: Path) -> Iterator[AppServer]:
    """A server whose pages must open within 0.5 s: a link of four 500 KB messages passes that deadline
    (seconds of assembly), and its build stops at its next step."""
    with patient(WORKBENCH_HOME=str(home), WORKBENCH_OPEN_DEADLINE_S="0.5") as app:
        yield app


def test_a_link_past_the_deadline_says_so_and_opens_the_default_session(browser, hurried: AppServer) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    late = {**HEAVY, "messages": [{**m, "content": "a" * (SIZE // 2)} for m in HEAVY["messages"]]}
    a, _started = start_opening(browser, link(hurried.url, encode(SharedState(session=late))), errors)
    status = a.locator(".wb-share-status")
    expect(status).to_contain_text("this link did not open within 0.5 s", timeout=OPEN_S * 1000)   # what
    expect(status).to_contain_text("showing the default session instead")          # where the page is
    expect(status).to_contain_text("WORKBENCH_OPEN_DEADLINE_S")                      # how to fix
    expect(a.locator(".wb-me-row")).to_have_count(220, timeout=UPDATE_MS)           # support_chat
    expect(a.locator(".wb-token-view .wb-header")).to_contain_text("qwen2.5", timeout=UPDATE_MS)
    a.context.close()
    assert not errors, f"errors in the page: {errors}"
