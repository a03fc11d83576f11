"""Keystroke to repainted token view, in a real browser: `workbench app` on the 1,000-message sample
session, Chromium driven by Playwright, typing into the last message; then a template switch.

Run:  .venv/bin/python benchmarks/bench_app_keystroke.py [--keys 60] [--session sample_sessions/bench_1000.json]
      [--wait-panels] [--heavy-link MB]

For each key: the time from its keydown (a listener in the page, `performance.now()`) to the
first `wb-painted-N` performance mark after it. The token view sets that mark in the animation
frame after it applied a patch, so it is the repaint, not just the arrival of the data. Keys are
typed one at a time, each after the previous repaint plus a typing pause (--pause-ms), like a
person typing; a burst of keys typed faster than the app can assemble is reported too (from the
last key to the repaint that shows it: edits arriving meanwhile are coalesced).

Typing starts 3 s after the first view, on the Tokens tab. Since issue 17 the slower panels run
only for the tab that shows them, so nothing runs beside the typing; with --wait-panels the Cache
tab is opened first, its run over every turn awaited, and the Tokens tab opened again.

Where the time goes: the app runs with WORKBENCH_TRACE=1 and logs, per assembly shown, when the
edit it folds in arrived in Python (the keystroke channel's frame, or Bokeh's change when the page
uses the model sync), when the assembly started and when its patch was handed on (wall clock);
each key's keydown and repaint are taken on the same clock (performance.timeOrigin), so a key
splits into browser -> server (the page's handler, the socket), server (the hop onto the
document's lock, the assembly, the patch) and server -> repaint (the frame, applying it, the
next animation frame).

Bytes: every websocket frame the page receives while a key is handled is counted (on the channel
and on Bokeh's socket), and compared with the frames of the first full view; the frames it sends
are counted too. The issue's bar: p95 <= 100 ms, and bytes per update proportional to the change,
not to the prompt.

With --heavy-link MB, a second page opens a share link holding four messages of MB megabytes each
(a few KB of link; issue 34) as the typing starts: the keys typed before that page showed its view
are reported apart (its page is built off the server's event loop, ui/opening.py).

Template switch: the Template select is changed to llama3 and back, each after the view settled.
From the select's `input` event to the frame that paints the token spans of the segments in sight
(`wb-drawn-painted`: a whole view draws the text first and each segment's tokens as it scrolls
near); the first repaint is split as above (browser -> server ends when the assembly starts).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import AppServer, find_chromium, launch_args  # noqa: E402

PAINTS = "performance.getEntriesByType('mark').filter(m => m.name.startsWith('wb-painted-'))"
# The first mark named `prefix`... after the last event of `kind` the page recorded: ms after that event.
AFTER = ("([kind, prefix]) => { const k = window.__at[kind].at(-1); return performance.getEntriesByType('mark')"
         ".filter(m => m.startTime > k && m.name.startsWith(prefix)).map(m => m.startTime - k)[0]; }")


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def med_p95(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} / {percentile(xs, 0.95):.1f}" if xs else "n/a"


def read_traces(text: str) -> list[dict[str, float]]:
    return [dict((k, float(v)) for k, v in (f.split("=") for f in line.split()[1:]))
            for line in text.splitlines() if line.startswith("trace ")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--session", default="sample_sessions/bench_1000.json")
    ap.add_argument("--keys", type=int, default=60)
    ap.add_argument("--pause-ms", type=int, default=120, help="typing pause after each repaint")
    ap.add_argument("--burst", type=int, default=15, help="keys typed 30 ms apart, for the coalescing figure")
    ap.add_argument("--wait-panels", action="store_true", help="type once the first panels run is shown")
    ap.add_argument("--heavy-link", type=float, default=0.0, metavar="MB",
                    help="meanwhile another page opens a link of 4 messages of MB megabytes each")
    args = ap.parse_args()
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    if chromium is None:
        sys.exit("no Chromium: apt-get install chromium (or set WORKBENCH_CHROMIUM)")
    app = AppServer(args.session, env={"WORKBENCH_HOME": tempfile.mkdtemp(prefix="wb-bench-"),
                                       "WORKBENCH_TRACE": "1"})
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=launch_args())
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            received: list[int] = []
            sent: list[int] = []
            channel: list[int] = []      # received on the keystroke channel
            size = lambda f: len(f) if isinstance(f, (bytes, str)) else 0   # noqa: E731
            page.on("websocket", lambda ws: (
                ws.on("framereceived", lambda f: (received.append(size(f)),
                                                  "/wb-channel" in ws.url and channel.append(size(f)))),
                ws.on("framesent", lambda f: sent.append(size(f)))))
            t0 = time.perf_counter()
            page.goto(app.url, timeout=120_000)
            page.locator(".wb-seg").first.wait_for(timeout=120_000)
            page.wait_for_function(f"{PAINTS}.length >= 1", timeout=60_000)
            load_s = time.perf_counter() - t0
            if args.wait_panels:     # the first panels run over every turn is shown (they run for the Cache tab)
                page.locator(".bk-tab", has_text="Cache").first.click()
                page.locator(".wb-sources").first.wait_for(state="attached", timeout=300_000)
                page.locator(".bk-tab", has_text="Tokens").first.click()
            time.sleep(3)
            first_view_bytes = sum(received)
            header = page.locator(".wb-token-view .wb-header").inner_text()
            via = page.locator(".wb-token-view").evaluate("el => el.wbChannel && el.wbChannel.readyState === 1")
            page.evaluate("() => { window.__at = {keydown: [], input: []}; for (const k of ['keydown', 'input']) "
                          "document.addEventListener(k, () => window.__at[k].push(performance.now()), true); }")
            box = page.locator(".wb-me-row").last.locator("textarea[data-field=content]")
            box.click()
            page.keyboard.press("End")
            origin = page.evaluate("() => performance.timeOrigin")
            heavy = open_heavy_link(browser, app.url, args.heavy_link) if args.heavy_link else None
            lat, sizes, up, recv, keys_at = [], [], [], [], []
            for i in range(args.keys):
                n = page.evaluate(f"() => {PAINTS}.length")
                received.clear()
                sent.clear()
                page.keyboard.type("abcdefghij"[i % 10])
                # (a key may wait for the other page's build on a server that runs it on the loop)
                page.wait_for_function(f"() => {PAINTS}.length > {n}", timeout=120_000 if heavy else 10_000)
                lat.append(page.evaluate(AFTER, ["keydown", "wb-painted-"]))
                keys_at.append(origin + page.evaluate("() => window.__at.keydown.at(-1)"))
                recv.append(page.evaluate(AFTER, ["keydown", "wb-received"]))
                time.sleep(args.pause_ms / 1000)
                sizes.append(sum(received))
                up.append(sum(sent))
            # A burst: keys faster than an update; measure from the last key to the repaint after it.
            marker = "Z" * args.burst
            for ch in marker:
                page.keyboard.type(ch)
                time.sleep(0.03)
            page.locator(".wb-token-view", has_text=marker).wait_for(timeout=20_000)   # pierces shadow roots
            burst = page.evaluate(AFTER, ["keydown", "wb-painted-"])
            # Template switches: to llama3 and back, each from the select's change to the repaint.
            switches = []
            for name in ("llama3", "qwen2.5"):
                time.sleep(2)
                page.get_by_label("Template", exact=True).select_option(name)
                page.locator(".wb-token-view .wb-header", has_text=f"{name} ·").wait_for(timeout=60_000)
                page.wait_for_function(f"() => {PAINTS}.filter(m => m.startTime > window.__at.input.at(-1)).length",
                                       timeout=60_000)
                at = origin + page.evaluate("() => window.__at.input.at(-1)")
                try:
                    page.wait_for_function("() => performance.getEntriesByName('wb-drawn-painted').filter(m => "
                                           "m.startTime > window.__at.input.at(-1)).length", timeout=10_000)
                except PlaywrightTimeout:   # a view that draws every token at once (before issue 16)
                    pass
                got = [page.evaluate(AFTER, ["input", m]) for m in
                       ("wb-painted-", "wb-received", "wb-patched-", "wb-drawn-painted")]
                switches.append((name, at, *got[:3], got[3] if got[3] is not None else got[0]))
            if heavy is not None:
                other, started, chars = heavy
                other.wait_for_function(f"() => {PAINTS}.length > 0", timeout=600_000)
                shown = other.evaluate(f"() => performance.timeOrigin + {PAINTS}[0].startTime")
                during = [t for at, t in zip(keys_at, lat) if started <= at and at + t <= shown]
            browser.close()
    finally:
        app.stop()
    traces = read_traces(app.stderr(None))
    split = []   # per key: browser -> server, server, server -> repaint
    for at, total in zip(keys_at, lat):
        t = next((t for t in traces if t["edit"] >= at - 1), None)
        if t is not None:
            split.append((t["edit"] - at, t["sent"] - t["edit"], at + total - t["sent"]))
    print(f"session {args.session}: {header.split(' · ')[2]}, first view in {load_s:.1f} s "
          f"({first_view_bytes / 1e6:.2f} MB received); keystroke channel {'open' if via else 'NOT open'}; "
          f"typing {'after' if args.wait_panels else 'during'} the first panels run")
    print(f"keystroke -> repainted token view, {len(lat)} keys typed one at a time:")
    print(f"  median {statistics.median(lat):.1f} ms   p95 {percentile(lat, 0.95):.1f} ms   max {max(lat):.1f} ms"
          f"   (bar: p95 <= 100 ms)")
    print(f"  of which keystroke -> patch received: {med_p95(recv)} ms (median / p95; the rest applies and paints it)")
    if split:
        print("  split (median / p95 ms): " + "; ".join(
            f"{name} {med_p95([x[i] for x in split])}" for i, name in
            enumerate(("browser -> server", "server", "server -> repaint"))))
    print(f"bytes per keystroke: received median {statistics.median(sizes):,.0f} (max {max(sizes):,}), "
          f"{statistics.median(sizes) / max(first_view_bytes, 1):.4%} of the first full view; "
          f"sent median {statistics.median(up):,.0f}")
    if heavy is not None:
        print(f"while another page opened a {chars:,}-character link (4 x {args.heavy_link:g} MB of messages; its "
              f"view after {(shown - started) / 1000:.1f} s): {len(during)} keys, "
              + (f"median {statistics.median(during):.1f} ms   p95 {percentile(during, 0.95):.1f} ms   max "
                 f"{max(during):.1f} ms" if during else "none typed before it showed (raise --keys)"))
    print(f"burst of {args.burst} keys 30 ms apart: "
          f"last key -> repaint {burst if burst is None else round(burst, 1)} ms")
    for name, at, total, got, applied, drawn in switches:
        t = next((t for t in traces if t["assemble"] >= at - 1), None)
        parts = "" if t is None or total is None else (
            f" (browser -> server {t['assemble'] - at:.0f}, server {t['sent'] - t['assemble']:.0f}, "
            f"server -> repaint {at + total - t['sent']:.0f}: the frame in at {got:.0f}, applied at {applied:.0f})")
        print(f"template switch to {name}: change -> its tokens on screen {drawn:.0f} ms   (bar: <= 1 s); "
              f"first repaint (the text) {total:.0f} ms{parts}")


def open_heavy_link(browser, url: str, mb: float) -> tuple[Any, float, int]:  # type: ignore[no-untyped-def]
    """A second page navigating to a link of four `mb`-megabyte messages, not waited for: the page,
    when it started (ms since the epoch) and the link's length."""
    from workbench.share import SharedState, encode, link
    n = int(mb * 1_000_000)
    text = encode(SharedState(session={"context_window": 5 * n, "messages": [
        {"role": role, "content": "a" * n} for role in ("system", "user", "assistant", "user")]}))
    other = browser.new_page(viewport={"width": 1500, "height": 1000})
    other.goto("about:blank")
    started = time.time() * 1000
    other.evaluate("(u) => { setTimeout(() => { location.href = u; }, 0); }", link(url, text))
    return other, started, len(text)


if __name__ == "__main__":
    main()
