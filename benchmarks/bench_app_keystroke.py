"""Keystroke to repainted token view, in a real browser: `workbench app` on the 1,000-message sample
session, Chromium driven by Playwright, typing into the last message.

Run:  .venv/bin/python benchmarks/bench_app_keystroke.py [--keys 60] [--session sample_sessions/bench_1000.json]

For each key: the time from its keydown (a listener in the page, `performance.now()`) to the
first `wb-painted-N` performance mark after it. The token view sets that mark in the animation
frame after it applied a patch, so it is the repaint, not just the arrival of the data. Keys are
typed one at a time, each after the previous repaint plus a typing pause (--pause-ms), like a
person typing; a burst of keys typed faster than the app can assemble is reported too (from the
last key to the repaint that shows it: edits arriving meanwhile are coalesced).

Where the time goes: the app runs with WORKBENCH_TRACE=1 and logs, per assembly shown, when the
first edit it folds in arrived in Python, when the assembly started and when its patch was handed
to Panel (wall clock); each key's keydown and repaint are taken on the same clock
(performance.timeOrigin), so a key splits into browser -> server (the page's handler, the websocket,
Bokeh applying the change), server (assembly, patch), and server -> repaint.

Bytes: every websocket frame the page receives while a key is handled is counted, and compared
with the frames of the first full view (the whole prompt). The issue's bar: p95 <= 100 ms, and
bytes per update proportional to the changed segments, not to the prompt.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import AppServer, find_chromium, launch_args  # noqa: E402

PAINTS = "performance.getEntriesByType('mark').filter(m => m.name.startsWith('wb-painted-'))"


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--session", default="sample_sessions/bench_1000.json")
    ap.add_argument("--keys", type=int, default=60)
    ap.add_argument("--pause-ms", type=int, default=120, help="typing pause after each repaint")
    ap.add_argument("--burst", type=int, default=15, help="keys typed 30 ms apart, for the coalescing figure")
    args = ap.parse_args()
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
            page.on("websocket", lambda ws: ws.on("framereceived", lambda f: received.append(
                len(f) if isinstance(f, (bytes, str)) else 0)))
            t0 = time.perf_counter()
            page.goto(app.url, timeout=120_000)
            page.locator(".wb-seg").first.wait_for(timeout=120_000)
            page.wait_for_function(f"{PAINTS}.length >= 1", timeout=60_000)
            load_s = time.perf_counter() - t0
            time.sleep(3)                      # let the first panels run finish (every turn assembled once)
            first_view_bytes = sum(received)
            header = page.locator(".wb-token-view .wb-header").inner_text()
            page.evaluate("() => { window.__keys = []; document.addEventListener('keydown', "
                          "() => window.__keys.push(performance.now()), true); }")
            box = page.locator(".wb-me-row").last.locator("textarea[data-field=content]")
            box.click()
            page.keyboard.press("End")
            origin = page.evaluate("() => performance.timeOrigin")
            lat, sizes, recv, keys_at = [], [], [], []
            for i in range(args.keys):
                n = page.evaluate(f"() => {PAINTS}.length")
                received.clear()
                page.keyboard.type("abcdefghij"[i % 10])
                page.wait_for_function(f"() => {PAINTS}.length > {n}", timeout=10_000)
                got = page.evaluate(f"() => {{ const k = window.__keys[window.__keys.length - 1]; "
                                    f"return {PAINTS}.filter(m => m.startTime > k).map(m => m.startTime - k)[0]; }}")
                lat.append(got)
                keys_at.append(origin + page.evaluate("() => window.__keys[window.__keys.length - 1]"))
                recv.append(page.evaluate("() => { const k = window.__keys[window.__keys.length - 1]; return "
                                          "performance.getEntriesByName('wb-received').filter(m => m.startTime > k)"
                                          ".map(m => m.startTime - k)[0]; }"))
                time.sleep(args.pause_ms / 1000)
                sizes.append(sum(received))
            # A burst: keys faster than an update; measure from the last key to the repaint after it.
            marker = "Z" * args.burst
            for ch in marker:
                page.keyboard.type(ch)
                time.sleep(0.03)
            page.locator(".wb-token-view", has_text=marker).wait_for(timeout=20_000)   # pierces shadow roots
            burst = page.evaluate(f"() => {{ const k = window.__keys[window.__keys.length - 1]; "
                                  f"return {PAINTS}.filter(m => m.startTime > k).map(m => m.startTime - k)[0]; }}")
            browser.close()
    finally:
        app.stop()
    traces = [dict((k, float(v)) for k, v in (f.split("=") for f in line.split()[1:]))
              for line in app.stderr(None).splitlines() if line.startswith("trace ")]
    split = []   # per key: browser -> server, server, server -> repaint
    for at, total in zip(keys_at, lat):
        t = next((t for t in traces if t["edit"] >= at - 1), None)
        if t is not None:
            split.append((t["edit"] - at, t["sent"] - t["edit"], at + total - t["sent"]))
    print(f"session {args.session}: {header.split(' · ')[2]} , first view in {load_s:.1f} s "
          f"({first_view_bytes / 1e6:.2f} MB received)")
    print(f"keystroke -> repainted token view, {len(lat)} keys typed one at a time:")
    print(f"  median {statistics.median(lat):.1f} ms   p95 {percentile(lat, 0.95):.1f} ms   max {max(lat):.1f} ms"
          f"   (bar: p95 <= 100 ms)")
    print(f"  of which keystroke -> patch received: median {statistics.median(recv):.1f} ms, "
          f"p95 {percentile(recv, 0.95):.1f} ms (the rest is applying and painting it)")
    if split:
        med = [statistics.median(x[i] for x in split) for i in range(3)]
        p95 = [percentile([x[i] for x in split], 0.95) for i in range(3)]
        print(f"  split (median / p95 ms): keydown -> edit in Python {med[0]:.1f} / {p95[0]:.1f}; "
              f"edit -> patch sent {med[1]:.1f} / {p95[1]:.1f}; patch sent -> repaint {med[2]:.1f} / {p95[2]:.1f}")
    print(f"bytes received per keystroke: median {statistics.median(sizes):,.0f}, max {max(sizes):,} "
          f"= {statistics.median(sizes) / max(first_view_bytes, 1):.4%} of the first full view")
    print(f"burst of {args.burst} keys 30 ms apart: "
          f"last key -> repaint {burst if burst is None else round(burst, 1)} ms")


if __name__ == "__main__":
    main()
