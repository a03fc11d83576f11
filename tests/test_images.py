"""Images in the prompt (issue 30): counted as the model's processor counts them, placed where its
chat template puts them, keyed by their content, refused with the field's path when they cannot be
counted.

The oracle for Qwen2.5-VL is independent of the workbench: the model's official chat template
rendered by transformers, each `<|image_pad|>` repeated as many times as transformers'
`Qwen2VLImageProcessor` gives the image grid (t·h·w / 2²), tokenized by the Qwen2 GGUF vocabulary
(tests/test_exact_qwen.py builds it). The request is the JSON a client sends: a PNG (or JPEG)
written by Pillow, as a data URL.
"""

from __future__ import annotations

import base64
import io
import json
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from test_exact_qwen import gguf_tokenizer
from transformers.utils.chat_template_utils import render_jinja_template

from workbench import Assembler
from workbench.analysis.providers import TurnPrompt, simulate
from workbench.errors import MediaError, RequestError
from workbench.intake import IntakeLimits, normalize

# The chat template of Qwen/Qwen2-VL-7B-Instruct and Qwen/Qwen2.5-VL-7B-Instruct (chat_template.json),
# the models' own: test data, the oracle our qwen2.5-vl template is held to.
QWEN2_VL_OFFICIAL = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in "
    "content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>{% elif content['type'] "
    "== 'video' or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>{% elif 'text' in content "
    "%}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "<|im_start|>assistant\n{% endif %}")
IMAGE_PAD = 151655


def image_bytes(w: int, h: int, fmt: str = "PNG", color: tuple[int, int, int] = (40, 90, 160)) -> bytes:
    b = io.BytesIO()
    Image.new("RGB", (w, h), color).save(b, fmt)
    return b.getvalue()


def data_url(w: int, h: int, fmt: str = "PNG", color: tuple[int, int, int] = (40, 90, 160)) -> str:
    mime = "jpeg" if fmt == "JPEG" else fmt.lower()
    return f"data:image/{mime};base64," + base64.b64encode(image_bytes(w, h, fmt, color)).decode()


def cc_image(w: int, h: int, **kw) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(w, h, **kw)}}


@pytest.fixture(scope="module")
def processor():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import Qwen2VLImageProcessor
        # The model's own preprocessor_config.json (Qwen/Qwen2.5-VL-7B-Instruct): min_pixels 3,136 and
        # max_pixels 12,845,056 (the class's defaults cap at 1,003,520 instead; docs/media.md).
        return Qwen2VLImageProcessor(size={"shortest_edge": 3136, "longest_edge": 12845056})


def processor_tokens(processor, w: int, h: int) -> int:
    out = processor(images=[Image.new("RGB", (w, h))], return_tensors="np")
    return int(np.prod(out["image_grid_thw"][0])) // 4


REACHED = {"n": 0}
VL = Assembler(template="qwen2.5-vl", cache=None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.tuples(st.integers(28, 1400), st.integers(28, 1400)), min_size=1, max_size=2),
       lead=st.sampled_from(["", "What is in these pictures?", "Compare:"]), jpeg=st.booleans())
def test_qwen25_vl_prompt_equals_the_official_pipeline(processor, sizes, lead, jpeg):
    if any(max(w, h) / min(w, h) > 200 for w, h in sizes):
        return
    fmt = "JPEG" if jpeg else "PNG"
    parts = ([{"type": "text", "text": lead}] if lead else []) + [cc_image(w, h, fmt=fmt) for w, h in sizes]
    req = {"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": "Two images."},
                        {"role": "user", "content": "Which is larger?"}]}
    got = VL.assemble(req)
    # The oracle: official template (transformers) + image processor + the GGUF vocabulary.
    msgs = [{"role": "user", "content": [{"type": "text", "text": lead}] if lead else []},
            {"role": "assistant", "content": "Two images."}, {"role": "user", "content": "Which is larger?"}]
    msgs[0]["content"] += [{"type": "image"} for _ in sizes]
    text = render_jinja_template(conversations=[msgs], chat_template=QWEN2_VL_OFFICIAL,
                                 add_generation_prompt=True)[0][0]
    for w, h in sizes:
        text = text.replace("<|image_pad|>", "<|placeholder|>" * processor_tokens(processor, w, h), 1)
    text = text.replace("<|placeholder|>", "<|image_pad|>")
    assert got.text == text
    want = gguf_tokenizer(151664).encode(text, add_special_tokens=False).ids
    assert got.token_ids.tolist() == want
    images = [s for s in got.segments if s.kind == "image"]
    assert [s.end - s.start for s in images] == [processor_tokens(processor, w, h) for w, h in sizes]
    assert all(set(s.token_ids.tolist()) == {IMAGE_PAD} and s.seq == 0 for s in images)
    assert got.budget.by_kind["image"] == sum(s.end - s.start for s in images)
    assert [i["width"] for i in got.images()] == [w for w, _ in sizes]
    REACHED["n"] += 1


def test_the_qwen_property_reached_its_check():
    print(f"qwen2.5-vl against the official pipeline: {REACHED['n']} examples")
    assert REACHED["n"] >= 50


def test_text_only_qwen25_vl_is_the_official_template():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}]
    for m in (msgs, msgs[1:]):
        want = render_jinja_template(conversations=[m], chat_template=QWEN2_VL_OFFICIAL,
                                     add_generation_prompt=True)[0][0]
        assert VL.assemble({"messages": m}).text == want


def test_the_same_image_three_ways_is_one_image():
    """A data URL (Chat Completions), Anthropic base64 and a Responses input_image: one digest, one prompt."""
    raw = image_bytes(300, 200)
    b64 = base64.b64encode(raw).decode()
    cc = {"messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url",
          "image_url": {"url": "data:image/png;base64," + b64}}]}]}
    an = {"messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image", "source": {
          "type": "base64", "media_type": "image/png", "data": b64}}]}], "max_tokens": 10}
    rs = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "see"}, {"type": "input_image",
          "image_url": "data:image/png;base64," + b64}]}]}
    results = [VL.assemble(r) for r in (cc, an, rs)]
    assert len({r.images()[0]["digest"] for r in results}) == 1
    assert all(np.array_equal(results[0].token_ids, r.token_ids) for r in results[1:])


def test_gemma3_places_256_soft_tokens_per_image():
    r = Assembler(template="gemma3", cache=None).assemble(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Describe"}, cc_image(800, 600)]}]})
    img = [s for s in r.segments if s.kind == "image"]
    assert len(img) == 1 and img[0].text.count("<image_soft_token>") == 256
    assert img[0].text.startswith("\n\n<start_of_image>") and img[0].text.endswith("<end_of_image>\n\n")


def test_a_text_only_template_says_what_it_leaves_out():
    r = Assembler(template="qwen2.5", cache=None).assemble(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Describe"}, cc_image(64, 64)]}]})
    d = next(d for d in r.diagnostics if d.code == "media_not_rendered")
    assert d.level == "warning" and "64×64" in d.message and "messages[0].content[1]" in d.message
    assert not any(s.kind == "image" for s in r.segments)


def test_an_image_url_is_not_fetched_and_says_what_size_it_assumed():
    limits = IntakeLimits(url_image_width=448, url_image_height=448)
    asm = Assembler(template="qwen2.5-vl", cache=None, intake=limits)
    r = asm.assemble({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]})
    d = next(d for d in r.diagnostics if d.code == "image_size_assumed")
    assert "448×448" in d.message and "not fetched" in d.message
    assert r.images()[0]["tokens"] == (448 // 28) ** 2 and r.images()[0]["size_assumed"]


# --- images in caches: another image of the same size is never a hit --------------------------------
def _session(colors: list[tuple[int, int, int]], w: int, h: int) -> list[dict]:
    """Two turns; the first user message holds one image of each color."""
    # Text after the images, so that the first turn's full KV blocks cover them.
    first = {"role": "user", "content": [{"type": "text", "text": "Look:"}] + [cc_image(w, h, color=c) for c in colors]
             + [{"type": "text", "text": "Describe every detail you can see, one by one. " * 12}]}
    return [{"messages": [first]},
            {"messages": [first, {"role": "assistant", "content": "Seen."}, {"role": "user", "content": "And?"}]}]


SWAPS = {"n": 0}


@settings(max_examples=25, deadline=None)
@given(w=st.integers(56, 640), h=st.integers(56, 640), n=st.integers(1, 2), which=st.integers(0, 1),
       color=st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)))
def test_property_swapping_an_images_pixels_changes_the_key_and_breaks_the_prefix_there(w, h, n, which, color):
    which %= n
    base = [(10, 20, 30), (200, 100, 50)][:n]
    if color == base[which]:
        return
    swapped = list(base)
    swapped[which] = color
    a = [VL.assemble(r) for r in _session(base, w, h)]
    b = [VL.assemble(r) for r in _session(swapped, w, h)]
    assert np.array_equal(a[1].token_ids, b[1].token_ids), "same size: same placeholder tokens"
    assert a[1].cache_key != b[1].cache_key
    img = [s for s in b[1].segments if s.kind == "image"][which]
    ca, cb = a[1].content_ids(), b[1].content_ids()
    assert int(np.flatnonzero(ca != cb)[0]) == img.start, "the content ids differ from the swapped image on"
    # Turn 2 after turn 1 of the other session: the engines reuse up to that image, never past it.
    for provider in ("vllm", "sglang"):
        same = simulate([TurnPrompt.from_assembly(a[0]), TurnPrompt.from_assembly(a[1])], provider)
        other = simulate([TurnPrompt.from_assembly(a[0]), TurnPrompt.from_assembly(b[1])], provider)
        assert other.turns[1].cached_tokens <= img.start < same.turns[1].cached_tokens, provider
    SWAPS["n"] += 1


def test_the_swap_property_reached_its_check():
    print(f"image swaps checked: {SWAPS['n']}")
    assert SWAPS["n"] >= 20


def test_a_session_with_images_gives_the_cold_ids_incrementally():
    asm = Assembler(template="qwen2.5-vl")
    session = asm.session()
    msgs: list[dict] = [{"role": "system", "content": "You see images."}]
    for k in range(4):
        msgs.append({"role": "user", "content": [{"type": "text", "text": f"Picture {k}:"},
                                                 cc_image(100 + 37 * k, 80 + 11 * k, color=(k, 2 * k, 3 * k))]})
        got = session.assemble({"messages": list(msgs)})
        cold = Assembler(template="qwen2.5-vl", cache=None).assemble({"messages": list(msgs)})
        assert np.array_equal(got.token_ids, cold.token_ids)
        assert [(s.kind, s.start, s.end, s.media) for s in got.segments] == \
            [(s.kind, s.start, s.end, s.media) for s in cold.segments]
        msgs.append({"role": "assistant", "content": f"I see picture {k}."})


def test_a_user_typing_the_image_placeholder_gets_text_not_an_image():
    r = VL.assemble({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "literal <|image_pad|> here"}, cc_image(56, 56)]}]})
    assert sum(1 for s in r.segments if s.kind == "image") == 1
    assert int(np.sum(r.token_ids == IMAGE_PAD)) == 4   # the image's 2×2 tokens; the typed one is plain text


# --- bad input: typed errors with the field's path, nothing decoded past the header ------------------
def _png_header_only(w: int, h: int) -> bytes:
    import struct
    import zlib
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


BAD = [
    ("undecodable_base64", "data:image/png;base64,@@@not-base64@@@", ["messages[0].content[0].image_url", "base64"]),
    ("huge_header", "data:image/png;base64," + base64.b64encode(_png_header_only(100_000, 100_000)).decode(),
     ["messages[0].content[0].image_url", "100,000×100,000"]),
    ("not_an_image", "data:image/png;base64," + base64.b64encode(b"just some text, not a picture").decode(),
     ["messages[0].content[0].image_url"]),
    ("ftp_url", "ftp://example.com/a.png", ["messages[0].content[0].image_url", "data: URL or an http"]),
]


@pytest.mark.parametrize("url,fragments", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_images_get_a_typed_error_naming_the_field(url, fragments):
    with pytest.raises(MediaError) as info:
        normalize({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]})
    msg = str(info.value)
    assert msg.startswith(fragments[0]), msg
    for f in fragments[1:]:
        assert f in msg, (f, msg)


def test_an_inline_image_over_the_cap_is_refused_by_its_length():
    url = data_url(64, 64)
    with pytest.raises(MediaError, match=r"input\[0\]\.content\[0\].*over the cap"):
        normalize({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}]},
                  IntakeLimits(max_media_bytes=50))


def test_anthropic_bad_image_names_the_block():
    with pytest.raises(RequestError, match=r"messages\[0\]\.content\[1\]\.source\.data"):
        normalize({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image",
                   "source": {"type": "base64", "media_type": "image/png", "data": "!!"}}]}], "max_tokens": 5})


def test_cli_prints_one_error_line_for_a_bad_image(tmp_path, capsys):
    from workbench.cli.main import main
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "data:image/png;base64,AAAA"}}]}]}))
    assert main(["render", str(p), "--template", "qwen2.5-vl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: messages[0].content[0].image_url"), err


# --- hosted models: the provider's published estimate, labelled ---------------------------------------
def test_hosted_models_count_images_by_the_providers_published_estimate():
    req = {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, {
        "type": "image_url", "image_url": {"url": data_url(1024, 1024), "detail": "high"}}]}]}
    gpt = Assembler(model="gpt-4o", cache=None).assemble(req)
    # OpenAI's worked example: a 1024×1024 image in high detail is 85 + 170 · 4 = 765 tokens.
    assert gpt.images()[0]["tokens"] == 765 and "published estimate" in gpt.images()[0]["rule"]
    low = Assembler(model="gpt-4o", cache=None).assemble(
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
            "url": data_url(1024, 1024), "detail": "low"}}]}]})
    assert low.images()[0]["tokens"] == 85
    claude = Assembler(model="claude-sonnet-4-5", cache=None).assemble(req)
    assert claude.images()[0]["tokens"] == -(-1024 * 1024 // 750)   # Anthropic: ceil(w·h / 750) under its limits
    no_rule = Assembler(model="gpt-5.4", cache=None).assemble(req)
    assert {"no_image_estimate", "media_not_rendered"} <= {d.code for d in no_rule.diagnostics}


def test_an_exported_bundle_places_images_as_the_workbench_did(tmp_path):
    from workbench.export.bundle import export_bundle
    from workbench.export.loader import load_bundle
    asm = Assembler(model="Qwen/Qwen2.5-VL-7B-Instruct", vision={"rule": "qwen2-vl", "max_pixels": 200_704},
                    cache=None)
    req = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Describe"}, cc_image(900, 700)]}]}
    want = asm.assemble(req)
    folder = export_bundle(asm, tmp_path / "vl", [("vision.json", [req])])
    got = load_bundle(folder).assemble(req)
    assert np.array_equal(got.token_ids, want.token_ids)
    assert got.images()[0]["tokens"] == want.images()[0]["tokens"] <= 200_704 // 784


def test_mistral_small_31_places_its_image_rows_where_the_image_part_is():
    from workbench.media import vision_rule
    from workbench.media.vision import run_length
    asm = Assembler(model="mistralai/Mistral-Small-3.1-24B-Instruct-2503", cache=None)
    r = asm.assemble({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Before"}, cc_image(640, 480), {"type": "text", "text": "after"}]}]})
    img = [s for s in r.segments if s.kind == "image"]
    rule = vision_rule("mistral-small-3.1")
    assert len(img) == 1 and img[0].end - img[0].start == run_length(rule.runs(640, 480))
    text = img[0].text
    rows = text.count("[IMG_BREAK]") + 1            # every row ends with a break, the last with [IMG_END]
    assert text.endswith("[IMG_END]") and text.count("[IMG_END]") == 1
    assert text.count("[IMG]") == rule.tokens(640, 480) and rule.tokens(640, 480) % rows == 0
    assert "Before[IMG]" in r.text and "[IMG_END]after" in r.text


def test_the_cli_view_says_what_the_image_is_instead_of_printing_its_tokens(tmp_path, capsys):
    from workbench.cli.main import main
    p = tmp_path / "v.json"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": "What is it?"},
                                                                       cc_image(640, 480)]}]}))
    assert main(["render", str(p), "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "── image · seq 0 · 391 tokens" in out
    assert "[image 640×480 from messages[0].content[1].image_url, counted by qwen2-vl] <|image_pad|>×391" in out
    assert out.count("<|image_pad|>") == 1
    assert main(["render", str(p), "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["images"][0]["tokens"] == 391 and d["budget"]["by_kind"]["image"] == 391
    assert [s["kind"] for s in d["segments"]].count("image") == 1


def test_a_text_only_template_chosen_over_a_vision_model_leaves_images_out_and_says_so():
    r = Assembler(model="Qwen/Qwen2.5-VL-7B-Instruct", template="llama3", cache=None).assemble(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Look"}, cc_image(100, 100)]}]})
    codes = {d.code for d in r.diagnostics}
    assert {"template_places_no_images", "media_not_rendered"} <= codes
    assert not r.images() and "[{'type'" not in r.text and "Look" in r.text


def test_the_engine_never_reuses_one_images_kv_for_another_of_the_same_size():
    """A real prefill (tiny synthetic model, CPU): the KV is held by content ids, so the next turn with
    the same image reuses past it, and with another image of the same size stops before it."""
    from workbench.engine.engine import Engine
    engine = Engine.load("tiny", vocab_size=VL.tokenizer.vocab_size)
    a = [VL.assemble(r) for r in _session([(10, 20, 30)], 112, 112)]
    b = [VL.assemble(r) for r in _session([(200, 100, 50)], 112, 112)]
    img = next(s for s in b[1].segments if s.kind == "image")
    engine.prefill(a[0].token_ids, keys=a[0].content_ids())
    same = engine.prefill(a[1].token_ids, keys=a[1].content_ids())
    engine.clear()
    engine.prefill(a[0].token_ids, keys=a[0].content_ids())
    other = engine.prefill(b[1].token_ids, keys=b[1].content_ids())
    assert other.reused_tokens <= img.start < img.end <= same.reused_tokens
    assert np.array_equal(a[1].token_ids, b[1].token_ids)    # the ids alone could not tell them apart


def test_analyze_names_a_swapped_image_as_the_cause(tmp_path, capsys):
    from workbench.cli.main import main
    first = [{"role": "user", "content": [{"type": "text", "text": "Look"}, cc_image(112, 112, color=(1, 2, 3))]}]
    other = [{"role": "user", "content": [{"type": "text", "text": "Look"}, cc_image(112, 112, color=(9, 9, 9))]}]
    p = tmp_path / "swap.json"
    p.write_text(json.dumps({"requests": [{"messages": first}, {"messages": other + [
        {"role": "assistant", "content": "Seen."}, {"role": "user", "content": "And?"}]}]}))
    assert main(["analyze", str(p), "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--json"]) == 0
    turn = json.loads(capsys.readouterr().out)["turns"][1]
    img = next(s for s in VL.assemble({"messages": other}).segments if s.kind == "image")
    assert turn["first_divergence"] == img.start and turn["divergence_kind"] == "image"
    assert "another image" in turn["causes"][0]["message"] and "other content of the same size" in \
        turn["causes"][0]["message"]


def test_many_large_images_stop_at_the_output_cap_before_the_prompt_is_built():
    from workbench.errors import TemplateLimitError
    from workbench.templates import RenderLimits
    asm = Assembler(template="qwen2.5-vl", cache=None, render_limits=RenderLimits(max_output_chars=200_000))
    url = "data:image/png;base64," + base64.b64encode(_png_header_only(3000, 3000)).decode()
    parts = [{"type": "image_url", "image_url": {"url": url}} for _ in range(5)]   # 5 × 11,449 pads
    with pytest.raises(TemplateLimitError, match=r"5 image\(s\) would make the prompt .* over the cap of 200,000"):
        asm.assemble({"messages": [{"role": "user", "content": parts}]})
