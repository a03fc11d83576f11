"""Open-weights vision models: how many tokens an image of a given size becomes, and their text.

One small frozen dataclass per processor family, each re-deriving the arithmetic of the model's
`transformers` image processor and processor class from the image's width and height alone
(checked against those classes in tests/test_media_counts.py). Every rule answers:

  placeholder    what the chat template writes for one image
  replaced       the part of the placeholder the processor replaces (often the whole of it)
  tokens(w, h)   the processor's own count of image tokens (the positions the vision encoder fills)
  runs(w, h)     the replacement text as (piece, repeat) runs, in order
  expansion(w, h)  the exact text the processor substitutes for `replaced`: "".join(piece * n)

Sizes are (width, height) in pixels as the loader hands the image to the processor: after the EXIF
orientation for transformers' `load_image` and vLLM (see `headers.ImageHeader.display_size`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal, Protocol

from ..errors import MediaError
from .headers import ImageHeader

Runs = tuple[tuple[str, int], ...]


class VisionRule(Protocol):
    """What every model rule offers (see the module docstring)."""

    @property
    def name(self) -> str: ...
    @property
    def placeholder(self) -> str: ...
    @property
    def replaced(self) -> str: ...
    def tokens(self, width: int, height: int, *, where: str = "image") -> int: ...
    def runs(self, width: int, height: int, *, where: str = "image") -> Runs: ...
    def expansion(self, width: int, height: int, *, where: str = "image") -> str: ...


def join_runs(runs: Runs) -> str:
    return "".join(piece * n for piece, n in runs)


def run_length(runs: Runs) -> int:
    """How many pieces the expansion holds. Where every piece is a special token (Qwen, Pixtral,
    Llama 4) that is its token count; Gemma's "\\n\\n" and pan-and-scan words are text, tokenized
    with what surrounds them."""
    return sum(n for _, n in runs)


def _check_sides(width: int, height: int, where: str) -> None:
    if type(width) is not int or type(height) is not int or width < 1 or height < 1:
        raise MediaError(f"an image size must be two positive ints, got {width!r}×{height!r}", field=where)


# ------------------------------------------------------------------------------------ Qwen2-VL
@dataclass(frozen=True, slots=True)
class Qwen2VL:
    """Qwen2-VL / Qwen2.5-VL (`Qwen2VLImageProcessor`, `Qwen2VLProcessor`): dynamic resolution.

    The image is resized to multiples of `patch_size · merge_size` (28) keeping its aspect, its pixel
    count brought within [min_pixels, max_pixels]; every 2×2 block of 14-pixel patches becomes one
    `<|image_pad|>`. Defaults are the published `preprocessor_config.json` of Qwen2-VL-*-Instruct and
    Qwen2.5-VL-*-Instruct (min 3,136, max 12,845,056 pixels): a model loaded by id, by transformers
    or by vLLM, uses those. `Qwen2VLImageProcessor()` built bare has max 1,003,520 (28·28·1280):
    the preset "qwen2-vl-class-defaults". An aspect ratio over 200 is refused, as the processor does."""

    name: str = "qwen2.5-vl"
    min_pixels: int = 3_136
    max_pixels: int = 12_845_056
    patch_size: int = 14
    merge_size: int = 2
    placeholder: str = "<|vision_start|><|image_pad|><|vision_end|>"
    replaced: str = "<|image_pad|>"

    def resized(self, width: int, height: int, *, where: str = "image") -> tuple[int, int]:
        """(width, height) after the processor's `smart_resize`. The float operations are kept in the
        processor's order, so a size on a rounding boundary lands where the processor's does."""
        _check_sides(width, height, where)
        if max(width, height) / min(width, height) > 200:
            raise MediaError(f"a {width}×{height} image has an aspect ratio over 200; the Qwen2-VL processor "
                             "refuses it", field=where, hint="crop or pad the image to a ratio of at most 200:1")
        f = self.patch_size * self.merge_size
        h, w = round(height / f) * f, round(width / f) * f
        if h * w > self.max_pixels:                       # too many pixels: shrink, rounding down
            beta = math.sqrt(height * width / self.max_pixels)
            h = max(f, math.floor(height / beta / f) * f)
            w = max(f, math.floor(width / beta / f) * f)
        elif h * w < self.min_pixels:                     # too few: grow, rounding up
            beta = math.sqrt(self.min_pixels / (height * width))
            h = math.ceil(height * beta / f) * f
            w = math.ceil(width * beta / f) * f
        return w, h

    def grid(self, width: int, height: int, *, where: str = "image") -> tuple[int, int]:
        """(rows, columns) of patches: the processor's `image_grid_thw` without its t = 1."""
        w, h = self.resized(width, height, where=where)
        return h // self.patch_size, w // self.patch_size

    def tokens(self, width: int, height: int, *, where: str = "image") -> int:
        rows, cols = self.grid(width, height, where=where)
        return rows * cols // (self.merge_size * self.merge_size)

    def runs(self, width: int, height: int, *, where: str = "image") -> Runs:
        return ((self.replaced, self.tokens(width, height, where=where)),)

    def expansion(self, width: int, height: int, *, where: str = "image") -> str:
        return join_runs(self.runs(width, height, where=where))


# -------------------------------------------------------------------------------------- Gemma 3
@dataclass(frozen=True, slots=True)
class Gemma3:
    """Gemma 3 (`Gemma3ImageProcessor`, `Gemma3Processor`): a fixed 256 soft tokens per image.

    The processor replaces each `<start_of_image>` the template writes with
    ``"\\n\\n<start_of_image>" + "<image_soft_token>" × 256 + "<end_of_image>\\n\\n"``. With
    `pan_and_scan` (off by default, `do_pan_and_scan`) a wide or tall image is also cut into 2 to 4
    crops, each another 256 tokens, announced by the processor's own English sentence."""

    name: str = "gemma3"
    tokens_per_image: int = 256
    pan_and_scan: bool = False
    min_crop_size: int = 256
    max_crops: int = 4
    min_ratio_to_activate: float = 1.2
    placeholder: str = "<start_of_image>"
    replaced: str = "<start_of_image>"
    soft_token: str = "<image_soft_token>"
    end_token: str = "<end_of_image>"

    def crops(self, width: int, height: int, *, where: str = "image") -> int:
        """How many pan-and-scan crops the processor adds (0 unless `pan_and_scan`)."""
        _check_sides(width, height, where)
        if not self.pan_and_scan:
            return 0
        long, short = (width, height) if width >= height else (height, width)
        if long / short < self.min_ratio_to_activate:
            return 0
        n = int(math.floor(long / short + 0.5))           # the ratio, rounded half up
        n = min(int(math.floor(long / self.min_crop_size)), n)
        n = min(self.max_crops, max(2, n))
        if min(int(math.ceil(long / n)), short) < self.min_crop_size:
            return 0
        return n

    def tokens(self, width: int, height: int, *, where: str = "image") -> int:
        return self.tokens_per_image * (1 + self.crops(width, height, where=where))

    def runs(self, width: int, height: int, *, where: str = "image") -> Runs:
        full: Runs = (("\n\n", 1), (self.replaced, 1), (self.soft_token, self.tokens_per_image),
                      (self.end_token, 1), ("\n\n", 1))
        n = self.crops(width, height, where=where)
        if n == 0:
            return full
        out = (("Here is the original image ", 1), *full, (" and here are some crops to help you see better ", 1),
               *full)
        for _ in range(n - 1):
            out = (*out, (" ", 1), *full)
        return out

    def expansion(self, width: int, height: int, *, where: str = "image") -> str:
        return join_runs(self.runs(width, height, where=where))


# -------------------------------------------------------------------------------------- Pixtral
@dataclass(frozen=True, slots=True)
class Pixtral:
    """Pixtral / Mistral Small 3.1 (`PixtralImageProcessor`, `PixtralProcessor`).

    An image larger than `longest_edge` on either side is scaled down to fit, then covered by
    squares of `patch_size · spatial_merge_size` pixels: one `[IMG]` per square, each row closed by
    `[IMG_BREAK]`, the last of them replaced by `[IMG_END]`. Pixtral-12B: patch 16, merge 1, edge
    1024; Mistral-Small-3.1: patch 14, merge 2, edge 1540. `rounding`: "floor" is transformers'
    resize (it floors the scaled sides); "round" is mistral_common's `ImageEncoder` (Python's round,
    at least 1 pixel), what vLLM uses with `--tokenizer-mode mistral`: the two differ by a row or a
    column on some sizes."""

    name: str = "pixtral-12b"
    patch_size: int = 16
    spatial_merge_size: int = 1
    longest_edge: int = 1024
    rounding: Literal["floor", "round"] = "floor"
    placeholder: str = "[IMG]"
    replaced: str = "[IMG]"
    img_token: str = "[IMG]"
    break_token: str = "[IMG_BREAK]"
    end_token: str = "[IMG_END]"

    def grid(self, width: int, height: int, *, where: str = "image") -> tuple[int, int]:
        """(rows, columns) of `[IMG]` tokens."""
        _check_sides(width, height, where)
        w: int = width
        h: int = height
        ratio = max(height / self.longest_edge, width / self.longest_edge)
        if ratio > 1:
            if self.rounding == "floor":
                w, h = int(math.floor(width / ratio)), int(math.floor(height / ratio))
            else:
                w, h = max(round(width / ratio), 1), max(round(height / ratio), 1)
        if w < 1 or h < 1:
            raise MediaError(f"a {width}×{height} image scales to {w}×{h} pixels in the Pixtral processor: no "
                             "row of patches is left (transformers fails on it)", field=where,
                             hint="pad the image to a less extreme aspect ratio")
        p = self.patch_size * self.spatial_merge_size
        return (h - 1) // p + 1, (w - 1) // p + 1

    def tokens(self, width: int, height: int, *, where: str = "image") -> int:
        rows, cols = self.grid(width, height, where=where)
        return rows * cols

    def runs(self, width: int, height: int, *, where: str = "image") -> Runs:
        rows, cols = self.grid(width, height, where=where)
        row: Runs = ((self.img_token, cols), (self.break_token, 1))
        return (*row * (rows - 1), (self.img_token, cols), (self.end_token, 1))

    def expansion(self, width: int, height: int, *, where: str = "image") -> str:
        return join_runs(self.runs(width, height, where=where))


# -------------------------------------------------------------------------------------- Llama 4
@dataclass(frozen=True, slots=True)
class Llama4:
    """Llama 4 (`Llama4ImageProcessor`, `Llama4Processor`): tiles of 336 pixels plus a global view.

    The processor picks the canvas of at most `max_patches` tiles that needs the least upscaling
    (or, failing that, the least downscaling), the smallest such canvas on a tie, and cuts it into
    336-pixel tiles of (336/14)² / 4 = 144 `<|patch|>` tokens each; with more than one tile a
    global 336×336 view is added. Text: `<|image_start|>`, the tiles row by row (`<|tile_x_separator|>`
    between tiles of a row, `<|tile_y_separator|>` after each row), `<|image|>` and the global
    tile's patches, `<|image_end|>`. The processor compares its scales as float32 tensors, these
    are Python floats: two different scales (tile multiples over sides up to 65,535) differ by at
    least 1/(16 · 65,535) ≈ 1e-6 relatively (a·w − b·h is a non-zero integer), far more than float32's
    6e-8, so the choice is the same."""

    name: str = "llama4"
    tile_size: int = 336
    max_patches: int = 16
    patch_size: int = 14
    pixel_shuffle_ratio: float = 0.5
    resize_to_max_canvas: bool = False
    placeholder: str = "<|image|>"
    replaced: str = "<|image|>"

    @property
    def tokens_per_tile(self) -> int:
        downsample = int(round(1.0 / (self.pixel_shuffle_ratio ** 2)))
        return (self.tile_size // self.patch_size) ** 2 // downsample

    def tiles(self, width: int, height: int, *, where: str = "image") -> tuple[int, int]:
        """(rows, columns) of tiles on the canvas the processor picks (its `aspect_ratios`)."""
        _check_sides(width, height, where)
        canvases = _llama4_canvases(self.max_patches)
        t = self.tile_size
        scales = [min(r * t / height, c * t / width) for r, c in canvases]
        up = [s for s in scales if s >= 1]
        if up:
            chosen = max(up) if self.resize_to_max_canvas else min(up)
        else:
            chosen = max(scales)
        # the smallest canvas at that scale; on equal areas the first listed, as torch.argmin takes
        best = min((r * c, i) for i, ((r, c), s) in enumerate(zip(canvases, scales)) if s == chosen)[1]
        return canvases[best]

    def tokens(self, width: int, height: int, *, where: str = "image") -> int:
        rows, cols = self.tiles(width, height, where=where)
        n = rows * cols
        return self.tokens_per_tile * (n + 1 if n > 1 else 1)

    def runs(self, width: int, height: int, *, where: str = "image") -> Runs:
        rows, cols = self.tiles(width, height, where=where)
        per = self.tokens_per_tile
        out: list[tuple[str, int]] = [("<|image_start|>", 1)]
        if rows * cols > 1:
            row: list[tuple[str, int]] = []
            for x in range(cols):
                row.append(("<|patch|>", per))
                if x < cols - 1:
                    row.append(("<|tile_x_separator|>", 1))
            row.append(("<|tile_y_separator|>", 1))
            out.extend(row * rows)
        out.extend((("<|image|>", 1), ("<|patch|>", per), ("<|image_end|>", 1)))
        return tuple(out)

    def expansion(self, width: int, height: int, *, where: str = "image") -> str:
        return join_runs(self.runs(width, height, where=where))


@lru_cache(maxsize=8)
def _llama4_canvases(max_patches: int) -> tuple[tuple[int, int], ...]:
    """Every canvas of at most `max_patches` tiles as (rows, columns), in the order the processor
    lists them: grouped by aspect ratio in order of first appearance, tile counts from the largest
    down, factors in increasing order."""
    by_ratio: dict[float, list[tuple[int, int]]] = {}
    for count in range(max_patches, 0, -1):
        for r in sorted(d for d in range(1, count + 1) if count % d == 0):
            by_ratio.setdefault(r / (count // r), []).append((r, count // r))
    return tuple(p for group in by_ratio.values() for p in group)


# --------------------------------------------------------------------------------------- presets
VISION_RULES: Mapping[str, VisionRule] = MappingProxyType({
    "qwen2-vl": Qwen2VL(name="qwen2-vl"),
    "qwen2.5-vl": Qwen2VL(name="qwen2.5-vl"),
    "qwen2-vl-class-defaults": Qwen2VL(name="qwen2-vl-class-defaults", max_pixels=1_003_520),
    "gemma3": Gemma3(),
    "gemma3-pan-and-scan": Gemma3(name="gemma3-pan-and-scan", pan_and_scan=True),
    "pixtral-12b": Pixtral(),
    "mistral-small-3.1": Pixtral(name="mistral-small-3.1", patch_size=14, spatial_merge_size=2, longest_edge=1540),
    "llama4": Llama4(),
})


def vision_rule(name: str, **options: Any) -> VisionRule:
    """A preset by name (`VISION_RULES`), with any of its fields changed: ``vision_rule("qwen2.5-vl",
    max_pixels=1_003_520)``. Unknown names and options list the known ones."""
    try:
        rule = VISION_RULES[name]
    except KeyError:
        raise MediaError(f"no vision rule named {name!r}",
                         hint=f"use one of {', '.join(VISION_RULES)}, or build a rule with your "
                         "model's processor settings (Qwen2VL, Gemma3, Pixtral, Llama4)") from None
    if not options:
        return rule
    known = {f.name: f.type for f in fields(rule)}  # type: ignore[arg-type]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise MediaError(f"the {name!r} vision rule has no option {', '.join(map(repr, unknown))}",
                         hint=f"its options: {', '.join(k for k in known if k != 'name')}")
    for key, value in options.items():
        default = getattr(rule, key)
        if type(value) is not type(default) or (isinstance(value, int) and not isinstance(value, bool)
                                                and value < 1):
            raise MediaError(f"vision option {key!r} must be a {'positive ' if type(default) is int else ''}"
                             f"{type(default).__name__} like {default!r}, got {value!r}")
    return replace(rule, **options)  # type: ignore[type-var]


@dataclass(frozen=True, slots=True)
class ImageCount:
    """One image counted by one rule: the size it was counted at, its tokens and its text runs."""

    rule: str
    width: int
    height: int
    tokens: int
    runs: Runs

    @property
    def expansion(self) -> str:
        return join_runs(self.runs)


def count_image(rule: VisionRule, header: ImageHeader, *, where: str, orientation: bool = True) -> ImageCount:
    """Count an image from its header. `orientation=True` (transformers' `load_image`, vLLM) counts
    the size after the EXIF transpose; False counts the stored size (SGLang, mistral_common)."""
    width, height = header.display_size if orientation else header.size
    return ImageCount(rule.name, width, height, rule.tokens(width, height, where=where),
                      rule.runs(width, height, where=where))
