"""Following a request log live (`workbench app --follow`, `Workbench.follow`): how soon a call appended
to a log of 10,000 calls shows as a new turn, and how long opening that log takes.

Run:  .venv/bin/python benchmarks/bench_follow.py [--calls 10000] [--turns 10] [--appends 20] [--browser]

The log: `--calls` lines written with capture/log_line.py (as `workbench record` writes them),
`--calls / --turns` conversations of `--turns` calls each, interleaved in time, each line carrying
its conversation so far and a reported usage. Measured in one run, side by side:

  open        the follower reads the whole log (LogTail + the conversation index) until caught up,
              then a page opens the newest conversation (read back from the log, assembled)
  re-read     what re-reading the whole file would cost at every poll (the same read, from scratch),
              against one incremental poll that finds the one appended line
  new turn    from a line appended (written and flushed) to the page's state showing it: the
              follower's thread polls every 0.2 s (as in the app) and hands the change to a "UI
              thread" (a queue, as Panel's next-tick callback), where FollowView.sync adds the turn and
              assembles it; split into "seen" (append -> read by the follower) and "shown" (read ->
              assembled). Twice: with the Tokens tab open (no panels), and with the Cache and Prefix
              diff tabs' panels computed in the same hand-off (every turn, the four simulations)
  picker      a call of a new conversation: from append to the picker's options (newest first)
              putting it first
With --browser, also `workbench app --follow LOG` in Chromium: from append to the page's turn picker
and token view showing the new turn. The target: a new turn within 1 s.
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from workbench.analysis.logs import LogTail  # noqa: E402
from workbench.capture.log_line import log_line, utc_timestamp  # noqa: E402
from workbench.ui.controller import Controller  # noqa: E402
from workbench.ui.follow import KEY, FollowView, LogFollower  # noqa: E402
from workbench.ui.state import WorkbenchState  # noqa: E402

T0 = 1_772_000_000.0
PAUSE = random.Random(7)      # the pauses between appends, so that they land anywhere in the poll's interval
SYSTEM = ("You are the support assistant of a coffee-equipment shop. Answer in two or three sentences, "
          "cite the order number when the customer gives one, and never promise refunds. ") * 3


def request(cid: str, k: int) -> dict:
    msgs: list[dict] = [{"role": "system", "content": SYSTEM}]
    for i in range(k):
        msgs += [{"role": "user", "content": f"[{cid}] question {i}: my grinder makes a noise when set to "
                                             f"espresso, order {1000 + i}. What should I check first?"},
                 {"role": "assistant", "content": f"Answer {i}: check the burrs for a stuck bean, then the "
                                                  "calibration ring; if it persists, send us a short video."}]
    return {"messages": [*msgs, {"role": "user", "content": f"[{cid}] question {k}: and what about the hopper?"}]}


def line(cid: str, k: int, when: float) -> bytes:
    return log_line(cid, utc_timestamp(when), request(cid, k), model="gpt-4o", provider="openai", latency_ms=640,
                    response={"usage": {"prompt_tokens": 300 + 90 * k, "completion_tokens": 40,
                                        "prompt_tokens_details": {"cached_tokens": 256 * (k > 0)}}})


def write_log(path: Path, calls: int, turns: int) -> None:
    convs = calls // turns
    with open(path, "wb") as f:
        for k in range(turns):
            for c in range(convs):
                f.write(line(f"conv-{c:05d}", k, T0 + k * 1000 + c))


class UIThread:
    """One thread that runs what is handed to it, in order (Panel's document lock, a kernel's loop)."""

    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            self.q.get()()

    def call(self, fn: Any) -> None:
        self.q.put(fn)


class Host:
    def __init__(self, ui: UIThread):
        self.ui = ui

    def call_later(self, delay_ms: int, fn: Any) -> None:
        if delay_ms <= 0:
            self.ui.call(fn)     # the summary views (400 ms later in the app) are not part of the turn shown

    def call_from_thread(self, fn: Any) -> None:
        self.ui.call(fn)

    def show_result(self, result: Any) -> None: ...
    def show_summary(self, result: Any) -> None: ...
    def show_error(self, message: str) -> None: print("error:", message)
    def show_editor(self, structural: bool) -> None: ...
    def show_edit_error(self, error: dict) -> None: ...
    def show_panels(self, panels: Any) -> None: ...
    def show_autosaved(self) -> None: ...
    def show_progress(self, text: str) -> None: ...
    def show_panels_failed(self, error: str) -> None: print("panels failed:", error)


def pct(xs: list[float], p: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def row(label: str, xs: list[float]) -> str:
    return (f"{label:52}{statistics.median(xs) * 1e3:9.0f}{pct(xs, 0.9) * 1e3:9.0f}{max(xs) * 1e3:9.0f}"
            f"{'  (n=' + str(len(xs)) + ')':>10}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--appends", type=int, default=20)
    ap.add_argument("--browser", action="store_true", help="also measure in Chromium (`workbench app --follow`)")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="wb-bench-follow-"))
    log = folder / "calls.jsonl"
    t = time.perf_counter()
    write_log(log, args.calls, args.turns)
    size = log.stat().st_size
    print(f"log: {args.calls:,} calls in {args.calls // args.turns:,} conversations of {args.turns} turns, "
          f"{size / 2**20:.1f} MiB ({size / args.calls:,.0f} bytes a line), written in {time.perf_counter() - t:.1f} s")

    # open ---------------------------------------------------------------------------------------------
    t = time.perf_counter()
    follower = LogFollower(log)
    follower.poll()
    read_s = time.perf_counter() - t
    state = WorkbenchState(None, autosave=None)
    ui = UIThread()
    controller = Controller(state, Host(ui), background=False)
    controller.views = frozenset()         # the Tokens tab: no slower panels
    view = FollowView(follower)
    t = time.perf_counter()
    newest = view.newest()
    assert newest is not None
    controller.open(view.make(KEY + newest, state))
    view.attach(state)
    open_s = time.perf_counter() - t
    assert state.result is not None and state.doc.turn_count == args.turns, (state.doc.turn_count, state.error)
    print(f"\n{'open':52}{'seconds':>9}")
    print(f"{'the follower reads the log (caught up)':52}{read_s:9.2f}   "
          f"{read_s / args.calls * 1e6:.0f} µs a line, {follower.calls:,} calls, {follower.bad_lines} bad")
    print(f"{'a page opens the newest conversation':52}{open_s:9.3f}   "
          f"{newest}, {args.turns} turns, {len(state.result.token_ids):,} tokens")

    # re-read vs incremental -----------------------------------------------------------------------------
    t = time.perf_counter()
    with LogTail(log) as again:
        while again.poll().more:
            pass
    reread_s = time.perf_counter() - t
    with open(log, "ab") as f:
        f.write(line(newest, args.turns, T0 + 10**6))
    t = time.perf_counter()
    got = follower.tail.poll()
    incr_s = time.perf_counter() - t
    assert len(got.lines) == 1
    follower._apply(got, "")
    print(f"{'re-reading the whole log (what a poll would cost)':52}{reread_s:9.2f}")
    print(f"{'one incremental poll finding the appended line':52}{incr_s:9.5f}   "
          f"{reread_s / incr_s:,.0f}x less")
    view.seen = -1
    done = threading.Event()
    ui.call(lambda: (view.sync(controller), done.set()))
    done.wait(30)

    # new turn: append -> shown, through the reader thread and the UI thread ------------------------------
    # The page's own subscription first: the hand-offs queued after it (the measurements) run after its sync.
    follower.subscribe(lambda: ui.call(lambda: view.sync(controller)))
    follower.start()
    results: dict[str, tuple[list[float], list[float], list[float]]] = {}
    k = args.turns + 1
    for label, views in (("Tokens tab (token view)", frozenset()),
                         ("Cache + Prefix diff tabs (panels too)", frozenset({"cache", "policies", "diff"}))):
        controller.views = views
        total, seen, shown = [], [], []
        for _ in range(args.appends):
            shown_ev = threading.Event()
            turns_before = state.doc.turn_count
            when_shown: list[float] = []

            def watch(before: int = turns_before, box: list[float] = when_shown,
                      ev: threading.Event = shown_ev) -> None:
                # Queued behind the sync on the UI thread: runs once the turn is assembled (and the panels ran).
                def check() -> None:
                    if state.doc.turn_count > before and not ev.is_set():
                        box.append(time.perf_counter())
                        ev.set()
                ui.call(check)

            unsubscribe = follower.subscribe(watch)
            payload = line(newest, k, T0 + 10**6 + k)
            time.sleep(PAUSE.uniform(0.02, 0.3))      # off the poll's beat: appends land anywhere in its interval
            t = time.perf_counter()
            t_mono = time.monotonic()
            with open(log, "ab") as f:
                f.write(payload)
            assert shown_ev.wait(30), "the new turn was not shown"
            unsubscribe()
            k += 1
            call = view.calls[-1]
            total.append(when_shown[0] - t)
            seen.append(call.seen_at - t_mono)
            shown.append(total[-1] - seen[-1])
            assert state.turn == state.doc.turn_count and state.result is not None
            if views:
                assert controller.last_panels is not None and controller.last_panels.turn == state.turn
        results[label] = (total, seen, shown)

    # picker: a new conversation --------------------------------------------------------------------------
    picker: list[float] = []
    for i in range(args.appends):
        cid = f"new-{i:03d}"
        ev = threading.Event()

        def first(cid: str = cid, ev: threading.Event = ev) -> None:
            def check() -> None:
                opts = view.options(state)
                if next(iter(opts.values())) == KEY + cid:
                    ev.set()
            ui.call(check)

        unsubscribe = follower.subscribe(first)
        time.sleep(PAUSE.uniform(0.02, 0.3))
        t = time.perf_counter()
        with open(log, "ab") as f:
            f.write(line(cid, 0, T0 + 2 * 10**6 + i))
        assert ev.wait(30)
        picker.append(time.perf_counter() - t)
        unsubscribe()
    follower.stop()
    t = time.perf_counter()
    for _ in range(20):
        follower._sorted = (-1, [])
        follower.conversations()
    sort_ms = (time.perf_counter() - t) / 20 * 1e3

    print(f"\nfrom append to shown (the follower polls every {follower.poll_s:.1f} s)"
          f"{'':6}{'median':>9}{'p90':>9}{'max':>9}   ms")
    for label, (total, seen, shown) in results.items():
        print(row(f"new turn, {label}", total))
        print(row("  seen by the follower", seen))
        print(row("  then added and assembled", shown))
    print(row(f"picker: a new conversation first ({follower.status().conversations:,} listed)", picker))
    print(f"{'  ordering the conversations, newest first':52}{sort_ms:9.1f}")
    worst = max(max(r[0]) for r in results.values())
    print(f"\ntarget: a new turn within 1 s; slowest here {worst:.2f} s: {'met' if worst < 1 else 'NOT met'}")
    if args.browser:
        browser_latency(log, newest, k, args.appends)
    return 0


# The token view lives in a shadow root (Panel's AnyWidget component): found once, then its text is
# checked at every animation frame (wait_for_function's polling), so the time is the frame it shows in.
VIEW_SHOWS = ("(text) => { const find = (root) => { const el = root.querySelector('.wb-token-view'); "
              "if (el) return el; for (const h of root.querySelectorAll('*')) { if (h.shadowRoot) { "
              "const f = find(h.shadowRoot); if (f) return f; } } return null; }; "
              "window.__v = window.__v || find(document); "
              "return Boolean(window.__v && window.__v.textContent.includes(text)); }")


def browser_latency(log: Path, cid: str, k: int, appends: int) -> None:
    from browser import AppServer, find_chromium, launch_args
    from playwright.sync_api import sync_playwright
    chromium = find_chromium()
    if chromium is None:
        print("no Chromium: apt-get install chromium (or set WORKBENCH_CHROMIUM)")
        return
    home = tempfile.mkdtemp(prefix="wb-bench-follow-home-")
    t = time.perf_counter()
    app = AppServer("--follow", str(log), "--sessions", os.path.join(home, "sessions"),
                    env={"WORKBENCH_HOME": home}, startup_s=120)
    shown: list[float] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=launch_args())
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(app.url, timeout=120_000)
            page.locator(".wb-follow-mode", has_text=" following live").wait_for(timeout=120_000)
            first_s = time.perf_counter() - t
            session = page.get_by_label("Session")
            label = session.locator("option", has_text=f"{cid} —").inner_text()
            session.select_option(label=label)
            page.locator(".wb-follow-mode", has_text=f"{cid}: following live").wait_for(timeout=60_000)
            for i in range(appends):
                time.sleep(PAUSE.uniform(0.3, 0.6))
                t = time.perf_counter()
                with open(log, "ab") as f:
                    f.write(line(cid, k + i, T0 + 3 * 10**6 + i))
                page.wait_for_function(VIEW_SHOWS, arg=f"question {k + i}:", timeout=30_000)
                shown.append(time.perf_counter() - t)
            browser.close()
    finally:
        app.stop()
    print(f"\nin Chromium (`workbench app --follow`, {len(shown)} appends): first page following in {first_s:.1f} s")
    print(f"{'':52}{'median':>9}{'p90':>9}{'max':>9}   ms")
    print(row("append -> the token view shows the new turn", shown))


if __name__ == "__main__":
    sys.exit(main())
