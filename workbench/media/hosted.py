"""Hosted APIs: the image token counts OpenAI and Anthropic publish, as estimates.

These are the providers' published formulas, not their tokenizers (which are not public): every
name here says "estimate", and each rule carries the page it comes from and the date it was read,
as data. docs/media.md lists what could and could not be confirmed on those pages.

OpenAI, two rules by model family:
  tiles   (GPT-4o, GPT-4.1, GPT-4.5, GPT-4o-mini's constants): `detail="low"` costs the base tokens;
          "high" fits the image within 2048×2048, then scales its short side down to 768, and costs
          base + tile tokens per 512-pixel tile. "auto" lets OpenAI choose; the estimate counts it
          as "high", the upper bound.
  patches (GPT-4.1-mini, GPT-4.1-nano, GPT-5-mini, GPT-5-nano): 32-pixel patches, at most 1,536
          (a larger image is scaled down to fit), times the model's multiplier; `detail` has no
          published effect there.
Anthropic: tokens ≈ width · height / 750 after Anthropic's own resize (long edge over 1,568 px, or
more than about 1.15 megapixels, is scaled down keeping the aspect ratio): approximate by
Anthropic's own words ("approximate tokenization").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from ..errors import MediaError

Detail = Literal["low", "high", "auto"]
CHECKED = "2026-12-06"
OPENAI_VISION_DOC = "https://platform.openai.com/docs/guides/images-vision#calculating-costs"
ANTHROPIC_VISION_DOC = "https://platform.claude.com/docs/en/build-with-claude/vision#calculate-image-costs"


@dataclass(frozen=True, slots=True)
class Source:
    """Where a published estimate comes from, and when it was read."""

    url: str
    checked: str = CHECKED
    note: str = ""


def _sides(width: int, height: int, where: str) -> None:
    if type(width) is not int or type(height) is not int or width < 1 or height < 1:
        raise MediaError(f"an image size must be two positive ints, got {width!r}×{height!r}", field=where)


def _detail(detail: str, where: str) -> Detail:
    if detail not in ("low", "high", "auto"):
        raise MediaError(f"detail must be 'low', 'high' or 'auto', got {detail!r}", field=where)
    return detail  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class OpenAITileEstimate:
    """OpenAI's published tile estimate (GPT-4o family): base + tile tokens per 512-px tile."""

    name: str
    base_tokens: int
    tile_tokens: int
    source: Source
    max_fit: int = 2048
    short_side: int = 768
    tile: int = 512

    def resized(self, width: int, height: int, *, where: str = "image") -> tuple[int, int]:
        """The size the tiles are counted on for "high": within 2048×2048, short side at most 768
        (never scaled up; sides rounded down)."""
        _sides(width, height, where)
        w, h = float(width), float(height)
        if max(w, h) > self.max_fit:
            s = self.max_fit / max(w, h)
            w, h = w * s, h * s
        if min(w, h) > self.short_side:
            s = self.short_side / min(w, h)
            w, h = w * s, h * s
        return max(1, math.floor(w + 1e-9)), max(1, math.floor(h + 1e-9))

    def tiles(self, width: int, height: int, *, where: str = "image") -> int:
        w, h = self.resized(width, height, where=where)
        return math.ceil(w / self.tile) * math.ceil(h / self.tile)

    def tokens(self, width: int, height: int, *, detail: str = "auto", where: str = "image") -> int:
        if _detail(detail, where) == "low":
            _sides(width, height, where)
            return self.base_tokens
        return self.base_tokens + self.tile_tokens * self.tiles(width, height, where=where)


@dataclass(frozen=True, slots=True)
class OpenAIPatchEstimate:
    """OpenAI's published patch estimate (GPT-4.1-mini/nano, GPT-5-mini/nano): 32-px patches, at most
    1,536, times the model's multiplier (rounded up: OpenAI does not say how it rounds)."""

    name: str
    multiplier: float
    source: Source
    patch: int = 32
    max_patches: int = 1536

    def patches(self, width: int, height: int, *, where: str = "image") -> int:
        _sides(width, height, where)
        p = self.patch
        raw = math.ceil(width / p) * math.ceil(height / p)
        if raw <= self.max_patches:
            return raw
        # Shrink to about the budget, then a little more so whole patches cover each side.
        r = math.sqrt(p * p * self.max_patches / (width * height))
        r *= min(math.floor(width * r / p) / (width * r / p), math.floor(height * r / p) / (height * r / p))
        w, h = math.floor(width * r + 1e-9), math.floor(height * r + 1e-9)
        return min(self.max_patches, math.ceil(w / p) * math.ceil(h / p))

    def tokens(self, width: int, height: int, *, detail: str = "auto", where: str = "image") -> int:
        _detail(detail, where)
        return math.ceil(self.patches(width, height, where=where) * self.multiplier - 1e-9)


@dataclass(frozen=True, slots=True)
class AnthropicEstimate:
    """Anthropic's published estimate: ceil(width · height / 750) after its resize.

    The resize keeps images within `max_long_edge` (1,568 px) and `max_pixels`. Anthropic gives the
    pixel bound only as "~1,600 tokens" / "1.15 megapixels" and lists sizes it does not resize
    (1092×1092, 951×1268, 896×1344, 819×1456, 784×1568); the bound here, 1,229,312 pixels
    (784×1568), is the smallest that leaves every listed size alone: approximate. Sides over
    `max_side` (8,000 px) are refused, as the API does."""

    name: str = "anthropic"
    divisor: int = 750
    max_long_edge: int = 1568
    max_pixels: int = 1_229_312
    max_side: int = 8000
    source: Source = Source(ANTHROPIC_VISION_DOC, note="formula, resize rule, examples 200×200 → ~54, "
                            "1000×1000 → ~1334, 1092×1092 → ~1590 and the not-resized sizes read on the page")

    def resized(self, width: int, height: int, *, where: str = "image") -> tuple[int, int]:
        _sides(width, height, where)
        if max(width, height) > self.max_side:
            raise MediaError(f"a {width}×{height} image: Anthropic rejects images with a side over "
                             f"{self.max_side:,} px", field=where, hint="resize it before sending")
        s = min(1.0, self.max_long_edge / max(width, height), math.sqrt(self.max_pixels / (width * height)))
        if s >= 1.0:
            return width, height
        return max(1, math.floor(width * s + 1e-9)), max(1, math.floor(height * s + 1e-9))

    def tokens(self, width: int, height: int, *, where: str = "image") -> int:
        w, h = self.resized(width, height, where=where)
        return math.ceil(w * h / self.divisor)


_OPENAI = Source(OPENAI_VISION_DOC)
OPENAI_ESTIMATES: Mapping[str, OpenAITileEstimate | OpenAIPatchEstimate] = MappingProxyType({
    # Confirmed on the guide (85/170, the worked examples 1024² → 765 and 2048×4096 → 1105).
    "gpt-4o": OpenAITileEstimate("gpt-4o", 85, 170, _OPENAI),
    "gpt-4.1": OpenAITileEstimate("gpt-4.1", 85, 170, Source(OPENAI_VISION_DOC, note=(
        "listed with gpt-4o; billing of 773 tokens (765 + message overhead) for 1800×2400 reported on "
        "community.openai.com/t/1230130 agrees"))),
    "gpt-4.5": OpenAITileEstimate("gpt-4.5", 85, 170, _OPENAI),
    # 2,833 / 5,667: OpenAI prices gpt-4o-mini images like gpt-4o's by giving them more tokens (a
    # billing device: they do not take context). Read in the guide's table as remembered, corroborated
    # by OpenRouter's listed $7.225 per 1K images = (2,833 + 8 · 5,667) tokens · $0.15/M.
    "gpt-4o-mini": OpenAITileEstimate("gpt-4o-mini", 2833, 5667, Source(OPENAI_VISION_DOC, note=(
        "billing tokens, not context tokens; corroborated indirectly (OpenRouter price), see docs/media.md"))),
    # Patch models: the guide's 1.62 / 2.46 (measured billing is reported lower: 1.20 for gpt-5-mini,
    # community.openai.com/t/1344040). o4-mini's 1.72 could not be confirmed: not shipped.
    "gpt-4.1-mini": OpenAIPatchEstimate("gpt-4.1-mini", 1.62, _OPENAI),
    "gpt-4.1-nano": OpenAIPatchEstimate("gpt-4.1-nano", 2.46, _OPENAI),
    "gpt-5-mini": OpenAIPatchEstimate("gpt-5-mini", 1.62, _OPENAI),
    "gpt-5-nano": OpenAIPatchEstimate("gpt-5-nano", 2.46, _OPENAI),
})
ANTHROPIC_ESTIMATE = AnthropicEstimate()


def openai_estimate(model: str) -> OpenAITileEstimate | OpenAIPatchEstimate:
    """The published estimate for an OpenAI model id (a dated id matches its family: gpt-4o-2024-08-06
    → gpt-4o; the longest matching family name wins)."""
    best = max((k for k in OPENAI_ESTIMATES if model == k or model.startswith(k + "-")), key=len, default=None)
    if best is None:
        raise MediaError(f"no published image estimate for the OpenAI model {model!r}",
                         hint=f"known: {', '.join(OPENAI_ESTIMATES)}; build an OpenAITileEstimate or "
                         "OpenAIPatchEstimate with the numbers from OpenAI's vision guide")
    return OPENAI_ESTIMATES[best]
