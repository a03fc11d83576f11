"""Image headers and media payloads (workbench/media/headers.py, payload.py) against Pillow.

The oracle is Pillow itself: every file is written by Pillow at a random size and read back by
`PIL.Image.open(...).size` (after `ImageOps.exif_transpose` where orientation is in play, as
transformers' `load_image` and vLLM do). Hostile input: every truncation of each format's header,
a 100,000 × 100,000 PNG header (refused without allocating), non-image bytes, broken checksums,
payloads over the cap (refused by length: the decoder is never called), invalid base64, a data URL
whose declared type is not what its bytes are.
"""

from __future__ import annotations

import ast
import base64
import io
import struct
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from workbench.errors import MediaError, RequestError
from workbench.media import (
    DataUrl,
    ImageHeader,
    ImageLimits,
    decode_base64,
    media_digest,
    parse_data_url,
    read_image_base64,
    read_image_bytes,
    read_image_data_url,
    read_image_header,
    sniff_format,
    url_digest,
)
from workbench.media import headers as headers_module
from workbench.media import payload as payload_module

WHERE = "messages[1].content[0].image_url"

# name -> (Pillow format, save options, mode); "webp-extended" is VP8X (an alpha channel forces it)
FORMS: dict[str, tuple[str, dict[str, object], str]] = {
    "png": ("PNG", {}, "RGB"),
    "png-grey": ("PNG", {}, "L"),
    "jpeg": ("JPEG", {}, "RGB"),
    "jpeg-progressive": ("JPEG", {"progressive": True}, "RGB"),
    "jpeg-cmyk": ("JPEG", {}, "CMYK"),
    "jpeg-grey": ("JPEG", {}, "L"),
    "webp-lossy": ("WEBP", {}, "RGB"),
    "webp-lossless": ("WEBP", {"lossless": True}, "RGB"),
    "webp-extended": ("WEBP", {}, "RGBA"),
    "gif": ("GIF", {}, "RGB"),
}


def encode(im: Image.Image, fmt: str, **options: object) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **options)
    return buf.getvalue()


def image(form: str, width: int, height: int, **extra: object) -> bytes:
    fmt, options, mode = FORMS[form]
    return encode(Image.new(mode, (width, height)), fmt, **{**options, **extra})


def pil_size(data: bytes, *, transpose: bool = False) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as im:
        return ImageOps.exif_transpose(im).size if transpose else im.size


def refused(data: bytes, **kw: object) -> MediaError:
    with pytest.raises(MediaError) as e:
        read_image_header(data, where=WHERE, **kw)  # type: ignore[arg-type]
    assert str(e.value).startswith(WHERE + ": ")     # every refusal names the part
    return e.value


# ----------------------------------------------------------------------------- sizes vs Pillow
@pytest.mark.parametrize("form", sorted(FORMS))
def test_header_size_is_pillows(form: str) -> None:
    reached = 0

    @settings(max_examples=25, deadline=None)
    @given(width=st.one_of(st.integers(1, 64), st.integers(1, 2000)), height=st.one_of(st.integers(1, 64),
                                                                                        st.integers(1, 2000)))
    def check(width: int, height: int) -> None:
        nonlocal reached
        data = image(form, width, height)
        header = read_image_header(data, where=WHERE)
        assert header.format == form.split("-")[0]
        assert header.size == pil_size(data) == (width, height)
        assert header.orientation == 1 and header.display_size == header.size
        reached += 1

    check()
    assert reached == 25


def test_webp_forms_are_the_three_chunk_kinds() -> None:
    kinds = {form: image(form, 33, 17)[12:16] for form in ("webp-lossy", "webp-lossless", "webp-extended")}
    assert kinds == {"webp-lossy": b"VP8 ", "webp-lossless": b"VP8L", "webp-extended": b"VP8X"}


def test_exif_orientation_gives_exif_transposes_size() -> None:
    reached = {"swapped": 0, "kept": 0}

    # Whether the axes swap is drawn first (a boolean, about even), then the orientation in that half:
    # st.integers(1, 8) leans to the small values, and once gave 9 swapped examples of 60.
    @settings(max_examples=60, deadline=None)
    @given(fmt=st.sampled_from(["JPEG", "PNG", "WEBP"]), swap=st.booleans(), turn=st.integers(1, 4),
           width=st.integers(1, 400), height=st.integers(1, 400))
    def check(fmt: str, swap: bool, turn: int, width: int, height: int) -> None:
        orientation = turn + 4 if swap else turn
        im = Image.new("RGB", (width, height))
        exif = im.getexif()
        exif[0x0112] = orientation
        data = encode(im, fmt, exif=exif)
        header = read_image_header(data, where=WHERE)
        assert header.orientation == orientation
        assert header.size == pil_size(data)
        assert header.display_size == pil_size(data, transpose=True)
        assert header.swaps_axes == (orientation >= 5)
        reached["swapped" if header.swaps_axes else "kept"] += 1

    check()
    assert reached["swapped"] >= 10 and reached["kept"] >= 10 and sum(reached.values()) >= 60, reached


def test_jpeg_with_a_large_exif_block_and_orientation_6() -> None:
    im = Image.new("RGB", (640, 480))
    exif = im.getexif()
    exif[0x0112] = 6
    exif[0x010E] = "x" * 60_000                       # ImageDescription: a 60 KB APP1 segment to skip
    data = encode(im, "JPEG", exif=exif)
    assert len(data) > 60_000
    header = read_image_header(data, where=WHERE)
    assert header.size == (640, 480) and header.display_size == (480, 640) == pil_size(data, transpose=True)


def test_jpeg_orientation_from_xmp_when_exif_has_none() -> None:
    xmp = (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
           b'<rdf:Description xmlns:tiff="http://ns.adobe.com/tiff/1.0/" tiff:Orientation="8"/></rdf:RDF></x:xmpmeta>')
    data = encode(Image.new("RGB", (300, 100)), "JPEG", xmp=xmp)
    header = read_image_header(data, where=WHERE)
    assert header.orientation == 8
    assert header.display_size == (100, 300) == pil_size(data, transpose=True)


def test_png_exif_after_the_image_data_is_read_as_pillow_does() -> None:
    im = Image.new("RGB", (120, 50))
    exif = im.getexif()
    exif[0x0112] = 5
    data = encode(im, "PNG", exif=exif)
    at = data.index(b"eXIf") - 4
    length = struct.unpack_from(">I", data, at)[0]
    chunk = data[at:at + 12 + length]
    moved = data[:at] + data[at + len(chunk):-12] + chunk + data[-12:]   # before IEND
    assert moved.index(b"eXIf") > moved.index(b"IDAT")
    header = read_image_header(moved, where=WHERE)
    assert header.display_size == (50, 120) == pil_size(moved, transpose=True)


def test_gif_first_frame_past_the_logical_screen_grows_the_size_as_pillow_does() -> None:
    data = bytearray(image("gif", 20, 20))
    struct.pack_into("<HH", data, 6, 10, 10)          # logical screen 10 × 10
    at = data.index(b"\x2c\x00\x00\x00\x00\x14\x00\x14\x00")
    struct.pack_into("<HH", data, at + 1, 5, 7)       # the 20 × 20 frame placed at (5, 7)
    header = read_image_header(bytes(data), where=WHERE)
    assert header.size == (25, 27) == pil_size(bytes(data))


def test_animated_gif_and_webp_report_the_canvas() -> None:
    frames = [Image.new("RGB", (64, 40), c) for c in ((255, 0, 0), (0, 255, 0))]
    for fmt in ("GIF", "WEBP"):
        buf = io.BytesIO()
        frames[0].save(buf, fmt, save_all=True, append_images=frames[1:])
        assert read_image_header(buf.getvalue(), where=WHERE).size == (64, 40) == pil_size(buf.getvalue())


# ----------------------------------------------------------------------------------- hostile
def header_region(data: bytes) -> int:
    """How many leading bytes hold the header: what the reader needs before the image data."""
    fmt = sniff_format(data)
    if fmt == "png":
        return 33
    if fmt == "webp":
        return 30 if data[12:16] != b"VP8L" else 25
    if fmt == "gif":
        pos = 13 + (3 << ((data[10] & 7) + 1) if data[10] & 0x80 else 0)
        while data[pos] == 0x21:                       # extensions: label, sub-blocks, terminator
            pos += 2
            while data[pos]:
                pos += data[pos] + 1
            pos += 1
        assert data[pos] == 0x2C
        return pos + 10
    sos = data.index(b"\xff\xda")
    return sos + 2 + struct.unpack_from(">H", data, sos + 2)[0]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_truncation_of_the_header_is_refused(form: str) -> None:
    data = image(form, 97, 41)
    assert read_image_header(data, where=WHERE).size == (97, 41)
    region = header_region(data)
    for n in range(region):
        refused(data[:n])
    assert read_image_header(data[:region], where=WHERE).size == (97, 41)


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature and IHDR, then an empty IDAT and IEND: enough for Pillow to open it."""
    ihdr = struct.pack(">II5B", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"") + chunk(b"IEND", b"")


def test_a_100000_square_png_header_is_refused_without_allocating() -> None:
    data = png_header(100_000, 100_000)
    tracemalloc.start()
    try:
        error = refused(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "100,000×100,000" in str(error) and "65,535" in str(error)
    assert peak < 256 * 1024
    with pytest.raises(Image.DecompressionBombError):  # Pillow refuses it too
        Image.open(io.BytesIO(data))


def test_the_pixel_cap_is_pillows_decompression_bomb_limit() -> None:
    assert ImageLimits().max_pixels == 2 * Image.MAX_IMAGE_PIXELS
    just_over = png_header(13_380, 13_376)              # 178,970,880 pixels, both sides under 65,535
    assert "pixels, over the cap of 178,956,970" in str(refused(just_over))
    assert read_image_header(png_header(13_000, 13_000), where=WHERE).size == (13_000, 13_000)
    assert read_image_header(just_over, where=WHERE, limits=ImageLimits(max_pixels=10**9)).width == 13_380
    with pytest.raises(MediaError, match="positive int"):
        ImageLimits(max_side=0)


@pytest.mark.parametrize("data", [b"", b"%PDF-1.7\n%\xe2\xe3", b"hello world, not an image", b"\x00" * 64,
                                  b"BM\x36\x00\x00\x00", b"RIFF\x10\x00\x00\x00WAVEfmt "])
def test_bytes_of_no_known_format_are_refused_naming_the_formats(data: bytes) -> None:
    error = refused(data)
    assert "PNG, JPEG, WEBP, GIF" in str(error)
    assert isinstance(error, RequestError) and error.field == WHERE


def test_zero_sides_and_broken_checksums_are_refused() -> None:
    assert "a side of 0 pixels" in str(refused(png_header(0, 10)))
    broken = bytearray(png_header(10, 10))
    broken[20] ^= 1                                    # the height changes, the CRC does not
    assert "CRC" in str(refused(bytes(broken)))


def test_jpeg_headers_pillow_refuses_are_refused() -> None:
    data = bytearray(image("jpeg", 30, 20))
    sof = data.index(b"\xff\xc0")
    twelve = bytearray(data)
    twelve[sof + 4] = 12                               # sample precision
    assert "12-bit" in str(refused(bytes(twelve)))
    no_marker = bytearray(data)
    no_marker[2:4] = b"\xff\x05"                       # not a marker Pillow knows
    assert "no marker" in str(refused(bytes(no_marker)))
    with pytest.raises(OSError):
        Image.open(io.BytesIO(bytes(no_marker)))


def test_jpeg_fill_bytes_and_restart_markers_are_skipped_as_pillow_does() -> None:
    data = image("jpeg", 70, 30)
    padded = data[:2] + b"\xff\xff\xff\xd0" + data[2:]   # fill bytes and a stray RST0 before the first segment
    assert read_image_header(padded, where=WHERE).size == (70, 30) == pil_size(padded)


@pytest.mark.parametrize("form", ["png", "jpeg", "webp-extended", "gif"])
def test_damaged_headers_give_a_header_or_a_media_error_never_another_exception(form: str) -> None:
    original = image(form, 61, 37)
    region = header_region(original)
    reached = {"header edited": 0, "refused": 0, "after the header edited": 0}

    @settings(max_examples=150, deadline=None)
    @given(in_header=st.booleans(), data=st.data())
    def check(in_header: bool, data: st.DataObject) -> None:
        lo, hi = (0, region - 1) if in_header else (region, len(original) - 1)
        edits = data.draw(st.lists(st.tuples(st.integers(lo, hi), st.integers(0, 255)), min_size=1, max_size=4))
        cut = data.draw(st.integers(0, len(original) if in_header else len(original) - region))
        damaged = bytearray(original)
        for at, value in edits:
            damaged[at] = value
        try:
            header = read_image_header(bytes(damaged[:len(damaged) - cut]), where=WHERE)
        except MediaError as e:
            assert in_header and str(e).startswith(WHERE + ": ")
            reached["refused"] += 1
            return
        assert header.width >= 1 and header.height >= 1 and header.format == form.split("-")[0]
        if not in_header:                              # the image data is not read: nothing changes
            assert header == read_image_header(original, where=WHERE)
        reached["header edited" if in_header else "after the header edited"] += 1

    check()
    assert sum(reached.values()) == 150, reached
    assert reached["refused"] >= 10 and reached["after the header edited"] >= 30, reached


@pytest.mark.parametrize("data", [
    b"\xff\xd8\xff" + b"\x01" * (20 * 1024 * 1024),                    # junk where markers should be
    b"\xff\xd8" + b"\xff" * (20 * 1024 * 1024),                         # fill bytes and nothing else
    b"\xff\xd8" + b"\xff\xfe\x00\x02" * (5 * 1024 * 1024),              # 5 million empty comments
    b"GIF89a\x01\x00\x01\x00\x00\x00\x00" + b"\x00" * (20 * 1024 * 1024),  # stray bytes, no image
])
def test_hostile_20_mb_headers_are_refused_quickly(data: bytes) -> None:
    # "Quickly" as a count, not a stopwatch: the lines of headers.py that Python runs. The parser
    # hands its scans to C (bytes.find, re.search) and walks at most 4,096 marker segments, about 20
    # lines each; a walk byte by byte through these 20 MB would be tens of millions.
    steps = python_steps(headers_module.__file__, lambda: refused(data), cap=STEP_CAP)
    print(f"{steps} lines of headers.py run")
    assert steps <= STEP_CAP


STEP_CAP = 100_000


class _Overrun(BaseException):
    """Raised from the trace function: not an Exception, so no handler in the parser takes it."""


def python_steps(path: str, fn: Callable[[], object], cap: int) -> int:
    """How many lines of the file `path` Python ran during `fn()`; it stops at `cap` + 1 (an overrun
    is not waited out)."""
    n = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal n
        if event == "line":
            n += 1
            if n > cap:
                raise _Overrun
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code.co_filename == path else None

    sys.settrace(calls)
    try:
        fn()
    except _Overrun:
        pass
    finally:
        sys.settrace(None)
    return n


# ------------------------------------------------------------------------------------- payloads
def test_a_payload_over_the_cap_is_refused_by_its_length_without_decoding() -> None:
    text = "A" * (28 * 1024 * 1024)                   # 21 MiB once decoded
    with mock.patch.object(payload_module.base64, "b64decode", side_effect=AssertionError("decoded")) as dec:
        with pytest.raises(MediaError, match="over the cap of 20,971,520 bytes"):
            parse_data_url("data:image/png;base64," + text, where=WHERE)
        with pytest.raises(MediaError, match="over the cap"):
            decode_base64(text[:4000], max_bytes=2999, where=WHERE)
        assert dec.call_count == 0
    assert len(decode_base64(text[:4000], max_bytes=3000, where=WHERE)) == 3000


@pytest.mark.parametrize("text,problem", [
    ("iVBORw0K\nGgo=", "whitespace at character 8"),
    ("iVBORw0KGgo", "Incorrect padding"),
    ("iVBO-w0KGgo=", "'-' at character 4"),
    ("iVBORé0KGgo=", "'é' at character 5"),
])
def test_invalid_base64_is_refused_with_where_and_how(text: str, problem: str) -> None:
    with pytest.raises(MediaError) as e:
        decode_base64(text, where=WHERE)
    assert str(e.value).startswith(f"{WHERE}: not valid base64") and problem in str(e.value)
    assert "base64 -w0" in str(e.value)


def test_whitespace_is_accepted_only_when_asked() -> None:
    raw = image("png", 9, 9)
    wrapped = "\n".join(base64.b64encode(raw).decode()[i:i + 76] for i in range(0, 200, 76))
    wrapped += base64.b64encode(raw).decode()[228:]
    with pytest.raises(MediaError, match="whitespace"):
        decode_base64(wrapped, where=WHERE)
    assert decode_base64(wrapped, where=WHERE, allow_whitespace=True) == raw


def test_data_url_shapes() -> None:
    raw = image("png", 5, 4)
    b64 = base64.b64encode(raw).decode()
    assert parse_data_url("data:image/png;base64," + b64, where=WHERE) == DataUrl("image/png", raw)
    assert parse_data_url("DATA:Image/PNG;name=x.png;base64," + b64, where=WHERE).mime == "image/png"
    assert parse_data_url("data:;base64," + b64, where=WHERE).mime is None
    for bad, needle in [("data:image/png," + b64, "not base64"), ("data:image/png;base64" + b64, "no ','"),
                        ("https://example.com/a.png", "not a data URL")]:
        with pytest.raises(MediaError, match=needle):
            parse_data_url(bad, where=WHERE)


def test_mime_mismatch_uses_the_header_and_flags_it() -> None:
    png = image("png", 12, 8)
    jpeg = image("jpeg", 12, 8)
    p = read_image_data_url("data:image/jpeg;base64," + base64.b64encode(png).decode(), where=WHERE)
    assert p.mime_mismatch and p.mime == "image/png" and p.declared_mime == "image/jpeg"
    assert p.header == ImageHeader("png", 12, 8)
    jpg_alias = "data:image/jpg;base64," + base64.b64encode(jpeg).decode()     # not registered, but common
    assert not read_image_data_url(jpg_alias, where=WHERE).mime_mismatch
    assert not read_image_bytes(jpeg, where=WHERE).mime_mismatch          # nothing declared
    a = read_image_base64(base64.b64encode(jpeg).decode(), media_type="image/webp", where=WHERE)
    assert a.mime_mismatch and a.mime == "image/jpeg"


def test_the_same_image_hashes_the_same_however_it_is_sent() -> None:
    raw = image("webp-lossy", 40, 30)
    b64 = base64.b64encode(raw).decode()
    via_url = read_image_data_url("data:image/webp;base64," + b64, where=WHERE)       # Chat Completions / Responses
    via_anthropic = read_image_base64(b64, media_type="image/webp", where=WHERE)      # Anthropic base64 source
    assert via_url.digest == via_anthropic.digest == media_digest(raw)
    assert len(via_url.digest) == 64 and via_url.byte_size == len(raw)
    other = read_image_bytes(image("webp-lossy", 40, 31), where=WHERE)
    assert other.digest != via_url.digest
    url = "https://example.com/cat.png"
    assert url_digest(url) != media_digest(url.encode()) and url_digest(url) == url_digest(url)
    assert url_digest(url) != url_digest(url + "?v=2")


def test_media_core_imports_no_pillow_nor_transformers() -> None:
    allowed = {"__future__", "base64", "binascii", "collections", "dataclasses", "functools", "hashlib", "math",
               "re", "struct", "types", "typing", "zlib", "numpy"}
    for path in (Path(__file__).resolve().parent.parent / "workbench" / "media").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            assert {n.split(".")[0] for n in names} <= allowed, (path.name, names)
