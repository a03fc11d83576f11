"""Counting an image's tokens from its header vs Pillow and the transformers processor.

Run:  .venv/bin/python benchmarks/bench_media.py [--runs 2000] [--proc-runs 5]

Measured side by side in one run, on the same bytes (a 1920×1080 PNG of noise, a 4032×3024 phone
JPEG with a 64 KB EXIF block and orientation 6, a 1920×1080 lossy WebP, an 800×600 GIF):
  ours           read_image_header + Qwen2.5-VL's rule: tokens (what the intake does per image)
  ours, all      the same header, then the count under every shipped rule (8 presets)
  PIL size       PIL.Image.open(...).size (lazy: Pillow also reads the header only)
  PIL + exif     exif_transpose(Image.open(...)).size (decodes the pixels: what load_image does)
  processor      Image.open + convert("RGB") + Qwen2VLImageProcessorPil: the processor's own count
Also the data-URL path for the PNG: strict base64 decode + SHA-256 digest + header + count.
The issue's bar: ours ≤ 1 ms per image. Checks that every count equals the processor's.
Needs the `test` extra (Pillow, transformers).
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PIL import Image, ImageOps  # noqa: E402

from workbench.media import VISION_RULES, read_image_data_url, read_image_header, vision_rule  # noqa: E402


def images() -> dict[str, bytes]:
    rng = np.random.default_rng(0)

    def noise(w: int, h: int) -> Image.Image:
        small = rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8)   # blocky noise: photo-sized files
        return Image.fromarray(small).resize((w, h), Image.Resampling.NEAREST)

    def save(im: Image.Image, fmt: str, **kw: object) -> bytes:
        buf = io.BytesIO()
        im.save(buf, fmt, **kw)
        return buf.getvalue()

    photo = noise(4032, 3024)
    exif = photo.getexif()
    exif[0x0112] = 6
    exif[0x010E] = "x" * 64_000                  # a large EXIF block (phones add maker notes, thumbnails)
    return {
        "PNG 1920×1080": save(noise(1920, 1080), "PNG"),
        "JPEG 4032×3024, EXIF 64 KB, rot.": save(photo, "JPEG", quality=85, exif=exif),
        "WebP 1920×1080 (lossy)": save(noise(1920, 1080), "WEBP", quality=80),
        "GIF 800×600": save(noise(800, 600).convert("P"), "GIF"),
    }


def per_call_us(fn: Callable[[], object], runs: int) -> float:
    fn()
    samples = []
    batch = max(1, runs // 50)
    for _ in range(50):
        t = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t) / batch * 1e6)
    return statistics.median(samples)


def measure(name: str, data: bytes, rule: Any, proc: Any, runs: int, proc_runs: int) -> tuple[bool, float]:
    """One image's row: our header + count, every rule, Pillow, the processor. Returns (same, our µs)."""
    rules = list(VISION_RULES.values())

    def ours() -> int:
        return int(rule.tokens(*read_image_header(data, where="bench").display_size))

    def ours_all() -> list[int]:
        size = read_image_header(data, where="bench").display_size
        return [r.tokens(*size) for r in rules]

    def pil_size() -> tuple[int, int]:
        with Image.open(io.BytesIO(data)) as im:
            return im.size

    def pil_exif() -> tuple[int, int]:
        with Image.open(io.BytesIO(data)) as im:
            return ImageOps.exif_transpose(im).size

    def processor() -> int:
        with Image.open(io.BytesIO(data)) as im:
            im = ImageOps.exif_transpose(im).convert("RGB")
        return int(proc(im, return_tensors="np")["image_grid_thw"][0].prod()) // 4

    us = per_call_us(ours, runs)
    us_all = per_call_us(ours_all, runs)
    pil_us = per_call_us(pil_size, runs)
    exif_ms = statistics.median(per_call_us(pil_exif, 1) for _ in range(proc_runs)) / 1e3
    proc_ms = statistics.median(per_call_us(processor, 1) for _ in range(proc_runs)) / 1e3
    same = ours() == processor() and read_image_header(data, where="b").display_size == pil_exif()
    print(f"{name:34}{len(data):>11,}{us:9.1f}{us_all:9.1f}{pil_us:12.1f}{exif_ms:12.1f}{proc_ms:13.1f}"
          f"{pil_us / us:11.1f}×{proc_ms * 1e3 / us:12,.0f}×  {ours()}{'' if same else '  MISMATCH'}")
    return same, us


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--proc-runs", type=int, default=5)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    from transformers import Qwen2VLImageProcessorPil

    rule = vision_rule("qwen2.5-vl")
    proc = Qwen2VLImageProcessorPil(min_pixels=rule.min_pixels, max_pixels=rule.max_pixels)  # type: ignore[attr-defined]
    print(f"{os.cpu_count()} CPUs; median per call; ours and Pillow over {args.runs} calls, the processor over "
          f"{args.proc_runs}")
    head = f"{'image':34}{'bytes':>11}{'ours µs':>9}{'all 8 µs':>9}{'PIL size µs':>12}{'PIL+exif ms':>12}" \
           f"{'processor ms':>13}{'vs PIL size':>12}{'vs processor':>13}  tokens"
    print(head)
    ok = True
    worst = 0.0
    for name, data in images().items():
        same, us = measure(name, data, rule, proc, args.runs, args.proc_runs)
        ok &= same
        worst = max(worst, us)

    png = next(iter(images().values()))
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    url_us = per_call_us(lambda: rule.tokens(*read_image_data_url(url, where="b").header.display_size), 50)
    print(f"data URL path for the PNG ({len(url):,} characters): base64 decode + SHA-256 + header + count "
          f"{url_us / 1e3:.2f} ms")
    print(f"slowest header + count: {worst:.1f} µs (bar: ≤ 1,000 µs): {'met' if worst <= 1000 else 'NOT met'}")
    print(f"counts equal the processor's and sizes equal exif_transpose's: {ok}")
    return 0 if ok and worst <= 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
