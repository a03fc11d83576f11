"""Image token counts (workbench/media/vision.py) against the models' own processors, offline.

Oracles (no hub download, no model weights):
  Qwen2-VL / 2.5-VL  `Qwen2VLImageProcessorPil` built with each preset's min/max pixels, run on a
                     Pillow image of each size: image_grid_thw.prod() / 4 is our count, and
                     `Qwen2VLProcessor.replace_image_token` on its output is our expansion.
  Gemma 3            `Gemma3Processor` (with a tiny stand-in tokenizer holding Gemma's image tokens)
                     on a Pillow image: the <image_soft_token> ids it emits, and its
                     `replace_image_token` text, with and without pan-and-scan.
  Pixtral            `PixtralImageProcessorPil` (Pixtral-12B and Mistral-Small-3.1 settings) on a
                     Pillow image, its `image_sizes` fed to `PixtralProcessor.replace_image_token`;
                     and mistral_common's `ImageEncoder` for rounding="round".
  Llama 4            `Llama4ImageProcessor.get_number_of_image_patches` and its `get_best_fit`,
                     `Llama4Processor._get_num_multimodal_tokens` and `_prompt_split_image`: the
                     processor's own arithmetic. Its pixel path needs torchvision, which the test
                     extra does not install; the modules import with a stand-in for torchvision,
                     whose functions the arithmetic never calls.
Every property test counts the examples that reached its check and asserts the count.
Published hosted estimates are checked against the worked examples on the providers' pages.
"""

from __future__ import annotations

import inspect
import io
import math
import sys
import types
import wave
from functools import cache
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mistral_common.protocol.instruct.chunk import ImageChunk
from mistral_common.tokens.tokenizers import image as mistral_image
from mistral_common.tokens.tokenizers.image import ImageConfig, ImageEncoder, SpecialImageIDs
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    Gemma3ImageProcessorPil,
    Gemma3Processor,
    PixtralImageProcessorPil,
    PreTrainedTokenizerFast,
    Qwen2VLImageProcessorPil,
)
from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor

from workbench.errors import MediaError
from workbench.media import (
    ANTHROPIC_ESTIMATE,
    OPENAI_ESTIMATES,
    ImageHeader,
    Llama4,
    Pixtral,
    Qwen2VL,
    count_audio,
    count_file,
    count_image,
    openai_estimate,
    read_wav_header,
    vision_rule,
)
from workbench.media.vision import run_length


@st.composite
def sized(draw: st.DrawFn, **kinds: tuple[tuple[int, int], tuple[int, int]]) -> tuple[str, int, int]:
    """(kind, width, height): a kind drawn first, then each side in that kind's (low, high) range,
    so that every kind of size a test names is reached (and counted) whatever hypothesis favours."""
    kind = draw(st.sampled_from(sorted(kinds)))
    (w0, w1), (h0, h1) = kinds[kind]
    return kind, draw(st.integers(w0, w1)), draw(st.integers(h0, h1))


# Qwen: under min_pixels (55² < 3,136), anywhere, over the class default's 1,003,520 (1100² is)
QWEN_SIZES = sized(small=((1, 55), (1, 55)), any=((1, 2000), (1, 2000)), large=((1100, 2000), (1100, 2000)))


def blank(width: int, height: int) -> Image.Image:
    return Image.new("RGB", (width, height), (90, 120, 200))


def defaults(cls: type) -> types.SimpleNamespace:
    """A processor's constructor defaults, as the attributes its methods read."""
    params = inspect.signature(cls.__init__).parameters.values()
    return types.SimpleNamespace(**{p.name: p.default for p in params if p.default is not inspect.Parameter.empty})


@cache
def torchvision_free_modules() -> tuple[Any, Any, Any]:
    """transformers' Llama 4 image processor and processor, and Pixtral's processor module."""
    from transformers.utils.import_utils import is_torchvision_available

    stand_ins: list[str] = []
    if not is_torchvision_available():                # (cached False before the stand-in exists)
        import transformers.image_processing_backends  # noqa: F401  (imported first: they see no torchvision)
        import transformers.image_transforms  # noqa: F401
        stand_ins = ["torchvision", "torchvision.transforms", "torchvision.transforms.v2",
                     "torchvision.transforms.v2.functional"]
        for name in stand_ins:
            sys.modules[name] = types.ModuleType(name)
    try:
        import transformers.models.llama4.image_processing_llama4 as llama4_images
        import transformers.models.llama4.processing_llama4 as llama4_processing
        import transformers.models.pixtral.processing_pixtral as pixtral_processing
    finally:
        for name in stand_ins:
            sys.modules.pop(name, None)
    return llama4_images, llama4_processing, pixtral_processing


def tiny_tokenizer(specials: dict[str, str], tokens: list[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer that knows only the given special tokens: enough for a processor class."""
    vocab = {"[UNK]": 0, **{t: i + 1 for i, t in enumerate(tokens)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", extra_special_tokens=specials)


# ---------------------------------------------------------------------------------- Qwen2-VL
@pytest.mark.parametrize("preset,processor", [
    ("qwen2.5-vl", lambda: Qwen2VLImageProcessorPil(min_pixels=3_136, max_pixels=12_845_056)),
    ("qwen2-vl-class-defaults", Qwen2VLImageProcessorPil),      # the class built bare
])
def test_qwen2vl_tokens_and_expansion_equal_the_processors(preset: str, processor: Any) -> None:
    rule = vision_rule(preset)
    proc = processor()
    # the token Qwen2VLProcessor replaces when its tokenizer names none (its __init__)
    replacer = types.SimpleNamespace(image_processor=proc, image_token="<|image_pad|>")
    assert rule.replaced == replacer.image_token and replacer.image_token in rule.placeholder
    reached = {"small": 0, "any": 0, "large": 0}

    @settings(max_examples=60, deadline=None)
    @given(size=QWEN_SIZES)
    def check(size: tuple[str, int, int]) -> None:
        kind, width, height = size
        assume(max(width, height) / min(width, height) <= 200)
        out = proc(blank(width, height), return_tensors="np")
        grid = out["image_grid_thw"][0]
        assert rule.tokens(width, height) == int(grid.prod()) // 4
        assert rule.expansion(width, height) == Qwen2VLProcessor.replace_image_token(replacer, out, 0)
        assert rule.runs(width, height) == (("<|image_pad|>", rule.tokens(width, height)),)
        reached[kind] += 1

    check()
    assert sum(reached.values()) >= 50 and min(reached.values()) >= 5, reached


def test_qwen2vl_class_defaults_are_what_the_presets_say() -> None:
    bare = Qwen2VLImageProcessorPil()
    assert (bare.size["shortest_edge"], bare.size["longest_edge"]) == (3_136, 1_003_520)
    published = vision_rule("qwen2.5-vl")
    assert (published.min_pixels, published.max_pixels) == (3_136, 12_845_056)  # type: ignore[attr-defined]
    assert vision_rule("qwen2-vl") == Qwen2VL(name="qwen2-vl")


def test_qwen2vl_arithmetic_on_large_and_extreme_sizes() -> None:
    """Sizes too large to draw: the processor's own `get_number_of_image_patches` (no pixels)."""
    proc = Qwen2VLImageProcessorPil(min_pixels=3_136, max_pixels=12_845_056)
    rule = vision_rule("qwen2.5-vl")
    reached = 0

    @settings(max_examples=300, deadline=None)
    @given(width=st.integers(1, 65_535), height=st.integers(1, 65_535))
    def check(width: int, height: int) -> None:
        nonlocal reached
        if max(width, height) / min(width, height) > 200:
            with pytest.raises(ValueError, match="aspect ratio"):
                proc.get_number_of_image_patches(height, width)
            with pytest.raises(MediaError, match="aspect ratio over 200"):
                rule.tokens(width, height, where="messages[0].content[0].image_url")
            return
        assert rule.tokens(width, height) == proc.get_number_of_image_patches(height, width) // 4
        reached += 1

    check()
    assert reached >= 50


# ----------------------------------------------------------------------------------- Gemma 3
# wide and tall images (ratio 1.2 to 8, sides from 256): what pan-and-scan cuts into crops
GEMMA_SIZES = sized(any=((1, 2000), (1, 2000)), wide=((800, 2000), (256, 660)), tall=((256, 660), (800, 2000)))


@cache
def gemma3_processor() -> Gemma3Processor:
    specials = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    return Gemma3Processor(image_processor=Gemma3ImageProcessorPil(),
                           tokenizer=tiny_tokenizer(specials, list(specials.values())))


@pytest.mark.parametrize("preset", ["gemma3", "gemma3-pan-and-scan"])
def test_gemma3_tokens_and_expansion_equal_the_processors(preset: str) -> None:
    rule = vision_rule(preset)
    proc = gemma3_processor()
    pan = preset.endswith("pan-and-scan")
    kwargs = {**Gemma3Processor.images_kwargs, "do_pan_and_scan": pan}       # the processor's own defaults
    soft = proc.tokenizer.image_token_id
    reached = {"crops": 0, "whole": 0}

    @settings(max_examples=60, deadline=None)
    @given(size=GEMMA_SIZES)
    def check(size: tuple[str, int, int]) -> None:
        _, width, height = size
        im = blank(width, height)
        ids = proc(text="Look: <start_of_image> now", images=[im], do_pan_and_scan=pan)["input_ids"][0]
        assert rule.tokens(width, height) == list(ids).count(soft)
        image_inputs = proc.image_processor(im, **kwargs)
        assert rule.expansion(width, height) == proc.replace_image_token(image_inputs, 0)
        reached["crops" if image_inputs["num_crops"][0] else "whole"] += 1

    check()
    assert sum(reached.values()) >= 50 and reached["whole"] >= 5, reached
    assert (reached["crops"] >= 10) if pan else (reached["crops"] == 0), reached


def test_gemma3_expansion_text() -> None:
    rule = vision_rule("gemma3")
    text = rule.expansion(640, 480)
    assert text == "\n\n<start_of_image>" + "<image_soft_token>" * 256 + "<end_of_image>\n\n"
    assert rule.placeholder == rule.replaced == gemma3_processor().image_token == "<start_of_image>"


# ----------------------------------------------------------------------------------- Pixtral
@pytest.mark.parametrize("preset", ["pixtral-12b", "mistral-small-3.1"])
def test_pixtral_tokens_and_expansion_equal_the_processors(preset: str) -> None:
    rule = vision_rule(preset)
    assert isinstance(rule, Pixtral)
    _, _, pixtral_processing = torchvision_free_modules()
    proc_cls = pixtral_processing.PixtralProcessor
    replacer = defaults(proc_cls)
    replacer.patch_size, replacer.spatial_merge_size = rule.patch_size, rule.spatial_merge_size
    assert rule.replaced == rule.placeholder == replacer.image_token
    images = PixtralImageProcessorPil(size={"longest_edge": rule.longest_edge})
    reached = {"scaled": 0, "as is": 0}
    edge = rule.longest_edge

    @settings(max_examples=60, deadline=None)
    @given(size=sized(**{"as is": ((1, edge), (1, edge)), "scaled": ((edge + 1, 2600), (1, 2600))}),
           transpose=st.booleans())
    def check(size: tuple[str, int, int], transpose: bool) -> None:
        kind, width, height = size
        width, height = (height, width) if transpose else (width, height)
        assume(min(width, height) * 40 >= max(width, height))   # transformers fails where a side scales to 0
        out = images(blank(width, height), patch_size=rule.patch_size * rule.spatial_merge_size)
        expected = proc_cls.replace_image_token(replacer, out, 0)
        assert rule.expansion(width, height) == expected
        assert rule.tokens(width, height) == expected.count("[IMG]")
        assert run_length(rule.runs(width, height)) == len(expected.replace("]", "]\0").split("\0")) - 1
        reached[kind] += 1

    check()
    assert sum(reached.values()) >= 50 and min(reached.values()) >= 10, reached


def test_pixtral_mistral_common_rounding_equals_its_image_encoder() -> None:
    ids = SpecialImageIDs(img=10, img_break=12, img_end=13)
    piece_ids = {"[IMG]": 10, "[IMG_BREAK]": 12, "[IMG_END]": 13}
    reached = {"differs from floor": 0, "same": 0}
    rules = [Pixtral(rounding="round"), Pixtral(name="ms31", patch_size=14, spatial_merge_size=2, longest_edge=1540,
                                                rounding="round")]
    encoders = [ImageEncoder(ImageConfig(r.patch_size, r.longest_edge, r.spatial_merge_size), ids) for r in rules]
    # The encoder resizes the pixels with OpenCV (mistral-common's opencv extra); the tokens come first,
    # from the size alone, so the pixel step is stood in for.
    no_pixels = mock.patch.object(mistral_image, "transform_image", lambda image, size: np.zeros((3, 1, 1)))

    @settings(max_examples=60, deadline=None)
    @given(which=st.sampled_from([0, 1]), width=st.integers(1, 4000), height=st.integers(1, 4000))
    def check(which: int, width: int, height: int) -> None:
        rule, encoder = rules[which], encoders[which]
        with no_pixels:
            expected = encoder(ImageChunk(image=blank(width, height))).tokens
        got = [piece_ids[p] for p, n in rule.runs(width, height) for _ in range(n)]
        assert got == expected
        floor = Pixtral(patch_size=rule.patch_size, spatial_merge_size=rule.spatial_merge_size,
                        longest_edge=rule.longest_edge)
        try:
            same = floor.grid(width, height) == rule.grid(width, height)
        except MediaError:
            same = False
        reached["same" if same else "differs from floor"] += 1

    check()
    assert sum(reached.values()) >= 50, reached
    # The two roundings part ways: 1026 × 514 scales to 1024 × 512.998, floor 512 (32 rows) vs round
    # 513 (33 rows); 3000 × 2 scales to 1024 × 0.68: floor leaves no row at all, round keeps one.
    assert Pixtral().grid(1026, 514) == (32, 64) and Pixtral(rounding="round").grid(1026, 514) == (33, 64)
    assert Pixtral(rounding="round").grid(3000, 2) == (1, 64)
    with pytest.raises(MediaError, match="no row of patches"):
        Pixtral().grid(3000, 2, where="messages[2].content[0].image_url")


def test_pixtral_expansion_text() -> None:
    assert vision_rule("pixtral-12b").expansion(40, 20) == "[IMG][IMG][IMG][IMG_BREAK][IMG][IMG][IMG][IMG_END]"
    assert vision_rule("pixtral-12b").expansion(1, 1) == "[IMG][IMG_END]"


# ----------------------------------------------------------------------------------- Llama 4
@cache
def llama4_processor() -> Any:
    images, processing, _ = torchvision_free_modules()
    names = ["<|image|>", "<|image_start|>", "<|image_end|>", "<|patch|>", "<|tile_x_separator|>",
             "<|tile_y_separator|>"]
    return processing.Llama4Processor(image_processor=images.Llama4ImageProcessor(),
                                      tokenizer=tiny_tokenizer({}, names))


def test_llama4_tokens_and_expansion_equal_the_processors() -> None:
    images, _, _ = torchvision_free_modules()
    proc = llama4_processor()
    tile = proc.image_processor.size
    canvases = torch.tensor(images.find_supported_resolutions(max_num_chunks=proc.image_processor.max_patches,
                                                              patch_size=tile))
    rule = Llama4()
    assert rule.replaced == rule.placeholder == proc.fake_image_token
    reached = {"tiled": 0, "one tile": 0}

    @settings(max_examples=400, deadline=None)
    @given(size=sized(small=((1, 336), (1, 336)), any=((1, 12_000), (1, 12_000))))
    def check(size: tuple[str, int, int]) -> None:
        _, width, height = size
        data = proc._get_num_multimodal_tokens(image_sizes=[(height, width)])
        assert rule.tokens(width, height) == data["num_image_tokens"][0]
        canvas = images.get_best_fit((height, width), canvases)
        aspect = (int(canvas[0]) // tile.height, int(canvas[1]) // tile.width)
        assert rule.tiles(width, height) == aspect
        per_tile = data["num_image_tokens"][0] // data["num_image_patches"][0]
        assert rule.expansion(width, height) == proc._prompt_split_image(aspect, per_tile)
        reached["tiled" if aspect != (1, 1) else "one tile"] += 1

    check()
    assert sum(reached.values()) >= 300 and min(reached.values()) >= 20, reached


# ---------------------------------------------------------------------------- count_image glue
def test_count_image_uses_the_size_after_exif_orientation_unless_told_not_to() -> None:
    header = ImageHeader("jpeg", 2000, 600, orientation=6)
    turned = count_image(vision_rule("qwen2.5-vl"), header, where="messages[1].content[0].image_url")
    stored = count_image(vision_rule("qwen2.5-vl"), header, where="x", orientation=False)
    assert (turned.width, turned.height) == (600, 2000) and (stored.width, stored.height) == (2000, 600)
    assert turned.tokens == vision_rule("qwen2.5-vl").tokens(600, 2000)
    assert turned.expansion == "<|image_pad|>" * turned.tokens
    with pytest.raises(MediaError, match="no vision rule named 'qwen3-vl'.*qwen2.5-vl"):
        vision_rule("qwen3-vl")


def test_vision_rule_options_change_a_preset_and_are_checked() -> None:
    small = vision_rule("qwen2.5-vl", max_pixels=1_003_520)
    assert small == Qwen2VL(max_pixels=1_003_520) and small.tokens(2000, 2000) == 1225
    assert vision_rule("gemma3", pan_and_scan=True).tokens(1600, 500) == 256 * 4
    with pytest.raises(MediaError, match="no option 'max_pixel'.*max_pixels"):
        vision_rule("qwen2.5-vl", max_pixel=10)
    for bad in ({"max_pixels": "1003520"}, {"max_pixels": 0}, {"pan_and_scan": 1}):
        with pytest.raises(MediaError, match="must be a"):
            vision_rule("gemma3" if "pan_and_scan" in bad else "qwen2.5-vl", **bad)


# ------------------------------------------------------------------------ hosted (published)
def test_openai_tile_estimate_matches_the_guides_worked_examples() -> None:
    gpt4o = openai_estimate("gpt-4o")
    assert gpt4o.tokens(1024, 1024, detail="high") == 765          # 768×768: 4 tiles · 170 + 85
    assert gpt4o.tokens(2048, 4096, detail="high") == 1105         # 1024×2048 → 768×1536: 6 tiles
    assert gpt4o.tokens(4096, 8192, detail="low") == 85
    assert gpt4o.tokens(2048, 4096, detail="auto") == 1105         # auto counted as high
    assert openai_estimate("gpt-4o-2024-08-06") is gpt4o
    assert openai_estimate("gpt-4o-mini").tokens(1024, 1024, detail="high") == 2833 + 4 * 5667
    assert openai_estimate("gpt-4.1").tokens(1800, 2400, detail="high") == 765   # billed 773 with 8 of overhead
    with pytest.raises(MediaError, match="detail must be"):
        gpt4o.tokens(10, 10, detail="medium", where="input[0].content[1]")
    with pytest.raises(MediaError, match="no published image estimate"):
        openai_estimate("o3")


def test_openai_patch_estimate_matches_the_guides_worked_examples() -> None:
    mini = openai_estimate("gpt-4.1-mini-2025-04-14")
    assert mini is OPENAI_ESTIMATES["gpt-4.1-mini"]
    assert mini.patches(1024, 1024) == 1024                        # 32 × 32 patches, under the cap
    assert mini.patches(1800, 2400) == 1452                        # scaled: 33 × 44
    assert mini.tokens(1024, 1024) == math.ceil(1024 * 1.62)
    assert openai_estimate("gpt-4.1-nano").tokens(1800, 2400) == math.ceil(1452 * 2.46)
    reached = 0

    @settings(max_examples=200, deadline=None)
    @given(width=st.integers(1, 20_000), height=st.integers(1, 20_000))
    def check(width: int, height: int) -> None:
        nonlocal reached
        assert 1 <= mini.patches(width, height) <= 1536
        reached += 1

    check()
    assert reached == 200


def test_anthropic_estimate_matches_the_docs_examples() -> None:
    a = ANTHROPIC_ESTIMATE
    assert (a.tokens(200, 200), a.tokens(1000, 1000), a.tokens(1092, 1092)) == (54, 1334, 1590)
    for w, h in [(1092, 1092), (951, 1268), (896, 1344), (819, 1456), (784, 1568)]:   # "not resized"
        assert a.resized(w, h) == (w, h) and a.resized(h, w) == (h, w)
    w, h = a.resized(3000, 2000)
    assert max(w, h) <= 1568 and w * h <= a.max_pixels and abs(w / h - 1.5) < 0.01
    with pytest.raises(MediaError, match="over 8,000 px"):
        a.tokens(8001, 10)


# -------------------------------------------------------------------------------- audio / files
def test_wav_duration_from_the_header_equals_the_wave_module() -> None:
    reached = 0

    @settings(max_examples=60, deadline=None)
    @given(rate=st.sampled_from([8000, 16000, 22050, 44100, 48000]), channels=st.integers(1, 2),
           width=st.sampled_from([1, 2, 3, 4]), frames=st.integers(0, 50_000))
    def check(rate: int, channels: int, width: int, frames: int) -> None:
        nonlocal reached
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(channels)
            w.setsampwidth(width)
            w.setframerate(rate)
            w.writeframes(b"\x00" * (frames * channels * width))
        data = buf.getvalue()
        header = read_wav_header(data, where="messages[0].content[1].input_audio")
        with wave.open(io.BytesIO(data)) as r:
            assert header.frames == r.getnframes() and header.sample_rate == r.getframerate()
        counted = count_audio(data, mime="audio/wav", where="x", rule="gemini")
        assert counted.tokens == math.ceil(np.float64(frames) / rate * 32 - 1e-9)
        reached += 1

    check()
    assert reached == 60


def test_gemini_audio_estimate_matches_the_docs_example() -> None:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:                   # one minute of 16 kHz mono: "1,920 tokens"
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(b"\x00\x00" * 16_000 * 60)
    counted = count_audio(buf.getvalue(), mime="audio/wav", where="x", rule="gemini")
    assert (counted.tokens, counted.duration_s) == (1920, 60.0)


def test_audio_and_files_without_a_rule_report_their_byte_size() -> None:
    assert count_audio(b"ID3\x04" + b"\x00" * 100, mime="audio/mpeg", where="x").tokens is None
    assert count_audio(b"ID3\x04" + b"\x00" * 100, mime="audio/mpeg", where="x").byte_size == 104
    assert count_file(b"%PDF-1.7" * 10, mime="application/pdf").tokens is None
    with pytest.raises(MediaError, match="not a WAV"):
        read_wav_header(b"OggS" + b"\x00" * 40, where="messages[0].content[1].input_audio")
