"""Image headers: the format, width and height of a PNG, JPEG, WebP or GIF from its first bytes.

Nothing here decodes a pixel or allocates in proportion to what a header announces: a reader walks
the container's own structure (PNG chunks, JPEG marker segments, RIFF chunks, GIF blocks) by the
lengths it declares, stops at the image data, and answers with an `ImageHeader`. Sizes are what
Pillow reports (`PIL.Image.open(...).size`), because Pillow is what every oracle loader uses
(transformers' `load_image`, vLLM's `ImageMediaIO`); where Pillow departs from a format's own
rules, the reader follows Pillow and says so.

EXIF orientation. `transformers.image_utils.load_image` applies `PIL.ImageOps.exif_transpose`, and
vLLM's media loader applies the JPEG orientation too since vllm-project/vllm#47566 (July 2026);
SGLang does not yet (sgl-project/sglang#33464, open on 2026-12-06), nor does `mistral_common` when
it opens an image itself. So the header keeps both: `width`/`height` as stored, `orientation` as
Pillow would read it (EXIF IFD0 tag 0x0112, else XMP `tiff:Orientation`), and `display_size`, the
size after the transpose, which is what the counts use by default. Orientation is read from JPEG
APP1 segments, a PNG `eXIf` chunk (before the image data, or after it within the file's last
64 KiB) and WebP `EXIF`/`XMP ` chunks. Not read (orientation 1 is assumed; Pillow would rotate):
a PNG whose orientation sits in an ImageMagick "Raw profile type exif" text chunk or an XMP iTXt
chunk, an EXIF block Pillow itself cannot parse, a tag stored as a rational.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass
from typing import Literal, NoReturn

from ..errors import MediaError

ImageFormat = Literal["png", "jpeg", "webp", "gif"]
KNOWN_FORMATS: tuple[ImageFormat, ...] = ("png", "jpeg", "webp", "gif")
MIME_TYPES: dict[ImageFormat, str] = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp",
                                      "gif": "image/gif"}

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_TAIL = 64 * 1024        # where an eXIf chunk written after the image data is looked for
_MAX_CHUNKS = 4096           # chunks walked before the image data (a real file has a handful)
_SWAPPING = (5, 6, 7, 8)     # EXIF orientations that transpose the axes
_XMP_ORIENTATION = re.compile(rb'tiff:Orientation(="|>)([0-9])')   # the pattern Pillow searches


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """What a header may announce before it is refused.

    `max_side`: 65,535 is the largest side a JPEG or a GIF can even state (16-bit fields) and more
    than any camera writes; only a PNG or an extended WebP can claim more, and no vision model takes
    such a side (they resize to at most a few thousand pixels). `max_pixels`: 178,956,970 is twice
    Pillow's `MAX_IMAGE_PIXELS` (89,478,485, a quarter GiB of RGB), the size above which Pillow
    raises `DecompressionBombError` instead of warning; every oracle loader and vLLM open images
    with Pillow, so a server would refuse such an image before the model sees it."""

    max_side: int = 65_535
    max_pixels: int = 178_956_970

    def __post_init__(self) -> None:
        for name in ("max_side", "max_pixels"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise MediaError(f"ImageLimits.{name} must be a positive int, got {value!r}")


DEFAULT_LIMITS = ImageLimits()


@dataclass(frozen=True, slots=True)
class ImageHeader:
    """An image's format and size as stored, and its EXIF orientation (1 when there is none)."""

    format: ImageFormat
    width: int
    height: int
    orientation: int = 1

    @property
    def swaps_axes(self) -> bool:
        """EXIF orientations 5–8 turn the image by a quarter: width and height trade places."""
        return self.orientation in _SWAPPING

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) as stored: `PIL.Image.open(...).size`."""
        return self.width, self.height

    @property
    def display_size(self) -> tuple[int, int]:
        """(width, height) after the EXIF orientation: `exif_transpose(PIL.Image.open(...)).size`."""
        return (self.height, self.width) if self.swaps_axes else (self.width, self.height)

    @property
    def mime(self) -> str:
        return MIME_TYPES[self.format]


def sniff_format(data: bytes) -> ImageFormat | None:
    """The format the first bytes announce (Pillow's own signatures), or None."""
    if data.startswith(_PNG_SIGNATURE):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None


def read_image_header(data: bytes, *, where: str, limits: ImageLimits = DEFAULT_LIMITS) -> ImageHeader:
    """Read an image's header; refuse what a server would refuse before decoding it.

    `where` names the part in the request (``messages[1].content[0].image_url``) for the error.
    Raises `MediaError`: bytes of no known format, a header cut short, a zero side, a side or a
    pixel count over `limits`, a header Pillow itself refuses (a JPEG of 12-bit samples)."""
    fmt = sniff_format(data)
    if fmt is None:
        raise MediaError(f"not an image this workbench can read ({_describe(data)}); known formats: "
                         f"{', '.join(f.upper() for f in KNOWN_FORMATS)}", field=where,
                         hint="send a PNG, JPEG, WebP or GIF (the formats the vision APIs accept)")
    reader = _READERS[fmt]
    width, height, orientation = reader(data, where)
    header = ImageHeader(fmt, width, height, orientation)
    check_size(header, where=where, limits=limits)
    return header


def check_size(header: ImageHeader, *, where: str, limits: ImageLimits = DEFAULT_LIMITS) -> None:
    """Refuse a zero side, a side over `limits.max_side`, more pixels than `limits.max_pixels`."""
    w, h = header.width, header.height
    name = header.format.upper()
    if w == 0 or h == 0:
        raise MediaError(f"the {name} header announces a {w}×{h} image (a side of 0 pixels)", field=where,
                         hint="the file is damaged or not finished: export the image again")
    if max(w, h) > limits.max_side:
        raise MediaError(f"the {name} header announces {w:,}×{h:,} pixels, a side over {limits.max_side:,}",
                         field=where, hint="resize the image before sending it (vision models resize it "
                         "to a few thousand pixels anyway), or raise ImageLimits.max_side")
    if w * h > limits.max_pixels:
        raise MediaError(f"the {name} header announces {w:,}×{h:,} = {w * h:,} pixels, over the cap of "
                         f"{limits.max_pixels:,} (Pillow refuses such an image as a decompression bomb)",
                         field=where, hint="resize the image before sending it, or raise ImageLimits.max_pixels")


# ------------------------------------------------------------------------------------------- PNG
def _png(data: bytes, where: str) -> tuple[int, int, int]:
    # signature (8), IHDR length (4) and type (4), 13 bytes of IHDR, its CRC (4): 33 bytes
    _need(data, 33, "PNG", "its IHDR chunk", where)
    length, ctype = struct.unpack_from(">I4s", data, 8)
    if ctype != b"IHDR" or length != 13:
        raise MediaError("a PNG must start with a 13-byte IHDR chunk; this one does not", field=where,
                         hint="the file is damaged: export the image again")
    if zlib.crc32(data[12:29]) != struct.unpack_from(">I", data, 29)[0]:
        raise MediaError("the PNG's IHDR chunk fails its CRC check (Pillow refuses it as a broken PNG)",
                         field=where, hint="the file is damaged: export the image again")
    width, height = struct.unpack_from(">II", data, 16)
    return width, height, _png_orientation(data)


def _png_orientation(data: bytes) -> int:
    pos, n = 33, 0
    while pos + 8 <= len(data) and n < _MAX_CHUNKS:
        length, ctype = struct.unpack_from(">I4s", data, pos)
        if ctype == b"IDAT":
            break
        end = pos + 12 + length
        if ctype == b"eXIf" and end <= len(data) and _crc_ok(data, pos, length):
            return _exif_orientation(data[pos + 8:pos + 8 + length])
        pos, n = end, n + 1
    # After the image data: Pillow reads the chunks there too (on load). Look in the file's tail,
    # where such a chunk sits (just before IEND), and trust a hit only if its CRC holds.
    at = data.rfind(b"eXIf", max(33, len(data) - _PNG_TAIL))
    while at >= 37:
        pos = at - 4
        length = struct.unpack_from(">I", data, pos)[0]
        if pos + 12 + length <= len(data) and _crc_ok(data, pos, length):
            return _exif_orientation(data[pos + 8:pos + 8 + length])
        at = data.rfind(b"eXIf", max(33, len(data) - _PNG_TAIL), at)
    return 1


def _crc_ok(data: bytes, pos: int, length: int) -> bool:
    crc = struct.unpack_from(">I", data, pos + 8 + length)[0]
    return bool(zlib.crc32(data[pos + 4:pos + 8 + length]) == crc)


# ------------------------------------------------------------------------------------------ JPEG
# Markers that carry no length (Pillow's table, handler None); every other known marker has one.
_STANDALONE = {0xC8, 0xD8, 0xD9, *range(0xD0, 0xD8), *range(0xF0, 0xFE)}
# Start-of-frame markers (and DHP, which Pillow reads with the same handler): they set the size.
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF, 0xDE}
_XMP_NS = b"http://ns.adobe.com/xap/1.0/\x00"
_NOT_FF = re.compile(b"[^\xff]")
_MAX_SEGMENTS = 4096          # marker segments before the scan (a real file has a few dozen at most)


def _jpeg(data: bytes, where: str) -> tuple[int, int, int]:
    """Walk the marker segments to the start of scan, as Pillow's JPEG parser does: junk bytes
    before a marker and 0xFF fill bytes are skipped, segments are skipped by their length, the last
    SOFn before the scan gives the size, the first EXIF APP1 and the last XMP APP1 are kept."""
    size: tuple[int, int] | None = None
    exif: bytes | None = None
    xmp: bytes | None = None
    pos = 2
    for _ in range(_MAX_SEGMENTS):
        pos = data.find(b"\xff", pos)                 # junk between segments is skipped
        fill = _NOT_FF.search(data, pos + 1) if pos >= 0 else None   # and 0xFF fill bytes
        if fill is None:
            _truncated("JPEG", "its start of scan (SOS)", where)
        marker = data[fill.start()]
        pos = fill.start() + 1
        if marker == 0x00:                             # an escaped 0xFF outside a scan: skipped
            continue
        if marker in _STANDALONE:
            continue
        if marker < 0xC0:
            raise MediaError(f"not a valid JPEG: byte 0x{marker:02X} after 0xFF at offset {pos - 1:,} is no marker",
                             field=where, hint="the file is damaged or not a JPEG: export the image again")
        _need(data, pos + 2, "JPEG", f"the length of its 0xFF{marker:02X} segment", where)
        length = struct.unpack_from(">H", data, pos)[0]
        body = pos + 2
        stop = body + max(length - 2, 0)
        _need(data, stop, "JPEG", f"its 0xFF{marker:02X} segment", where)
        if marker == 0xDA:                             # start of scan: the header ends here
            break
        if marker in _SOF:
            size = _jpeg_frame(data[body:stop], marker, where)
        elif marker == 0xE1:
            seg = data[body:stop]
            if seg.startswith(b"Exif\x00\x00"):
                exif = seg if exif is None else exif + seg[6:]
            elif seg.startswith(_XMP_NS):
                xmp = seg[len(_XMP_NS):]
        pos = stop
    else:
        raise MediaError(f"the JPEG has more than {_MAX_SEGMENTS:,} marker segments before its image data; no "
                         "camera or editor writes that many", field=where, hint="export the image again")
    if size is None:
        raise MediaError("the JPEG has no frame header (SOFn) before its scan, so no size", field=where,
                         hint="the file is damaged: export the image again")
    return size[0], size[1], _orientation(exif, xmp)


def _jpeg_frame(seg: bytes, marker: int, where: str) -> tuple[int, int]:
    if len(seg) < 6:
        raise MediaError(f"the JPEG's frame header (0xFF{marker:02X}) is {len(seg) + 2} bytes, too short to "
                         "hold a size", field=where, hint="the file is damaged: export the image again")
    bits, height, width, layers = struct.unpack_from(">BHHB", seg, 0)
    if bits != 8:
        raise MediaError(f"the JPEG has {bits}-bit samples; Pillow (and so every server that loads images "
                         "with it) reads only 8-bit JPEGs", field=where, hint="convert it to an 8-bit JPEG or a PNG")
    if layers not in (1, 3, 4):
        raise MediaError(f"the JPEG has {layers} colour components; Pillow reads 1 (grey), 3 (YCbCr/RGB) or 4 "
                         "(CMYK)", field=where, hint="convert it to an RGB JPEG or a PNG")
    return width, height


# ------------------------------------------------------------------------------------------ WebP
def _webp(data: bytes, where: str) -> tuple[int, int, int]:
    _need(data, 20, "WebP", "its first chunk header", where)
    fourcc = data[12:16]
    body = 20
    if fourcc == b"VP8 ":
        # frame tag (3 bytes, bit 0 clear on a key frame), start code 9D 01 2A, 14-bit sizes
        _need(data, body + 10, "WebP", "its VP8 frame header", where)
        if data[body] & 1 or data[body + 3:body + 6] != b"\x9d\x01\x2a":
            raise MediaError("the WebP's VP8 frame header is not a key frame header", field=where,
                             hint="the file is damaged: export the image again")
        w, h = struct.unpack_from("<HH", data, body + 6)
        return w & 0x3FFF, h & 0x3FFF, 1
    if fourcc == b"VP8L":
        # signature 0x2F, then 14 bits width − 1, 14 bits height − 1 (little-endian bit order)
        _need(data, body + 5, "WebP", "its VP8L header", where)
        if data[body] != 0x2F:
            raise MediaError("the WebP's lossless (VP8L) header lacks its signature byte 0x2F", field=where,
                             hint="the file is damaged: export the image again")
        bits = struct.unpack_from("<I", data, body + 1)[0]
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, 1
    if fourcc == b"VP8X":
        # flags (1), reserved (3), canvas width − 1 (24 bits), canvas height − 1 (24 bits)
        _need(data, body + 10, "WebP", "its VP8X header", where)
        flags = data[body]
        w = int.from_bytes(data[body + 4:body + 7], "little") + 1
        h = int.from_bytes(data[body + 7:body + 10], "little") + 1
        return w, h, _webp_orientation(data, flags)
    raise MediaError(f"the WebP's first chunk is {fourcc!r}, not VP8, VP8L or VP8X", field=where,
                     hint="the file is damaged: export the image again")


def _webp_orientation(data: bytes, flags: int) -> int:
    # libwebp's demuxer keeps the EXIF and XMP chunks only when the VP8X flags announce them.
    if not flags & 0x0C:
        return 1
    exif: bytes | None = None
    xmp: bytes | None = None
    pos, n = 12, 0
    end = min(len(data), 8 + struct.unpack_from("<I", data, 4)[0])
    while pos + 8 <= end and n < _MAX_CHUNKS:
        fourcc, length = struct.unpack_from("<4sI", data, pos)
        chunk = data[pos + 8:pos + 8 + length]
        if fourcc == b"EXIF" and flags & 0x08 and exif is None:
            exif = chunk
        elif fourcc == b"XMP " and flags & 0x04 and xmp is None:
            xmp = chunk
        pos, n = pos + 8 + length + (length & 1), n + 1
    return _orientation(exif, xmp)


# ------------------------------------------------------------------------------------------- GIF
_GIF_BLOCK = re.compile(b"[!,;]")


def _gif(data: bytes, where: str) -> tuple[int, int, int]:
    """The logical screen, grown to hold the first frame where that frame reaches past it, as Pillow
    does (processors take Pillow's first frame, at Pillow's size)."""
    _need(data, 13, "GIF", "its logical screen descriptor", where)
    width, height, flags = struct.unpack_from("<HHB", data, 6)
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)     # the global colour table
    end = len(data)
    while pos < end:
        block = data[pos]
        if block == 0x3B:                              # trailer: no image at all
            break
        if block == 0x2C:                              # image descriptor: x, y, width, height
            _need(data, pos + 10, "GIF", "its first image descriptor", where)
            x0, y0, w, h = struct.unpack_from("<HHHH", data, pos + 1)
            return max(width, x0 + w), max(height, y0 + h), 1
        if block == 0x21:                              # extension: label, then sub-blocks to a 0
            pos += 2
            while True:
                _need(data, pos + 1, "GIF", "an extension block before its first image", where)
                if data[pos] == 0:
                    pos += 1
                    break
                pos += 1 + data[pos]
            continue
        found = _GIF_BLOCK.search(data, pos + 1)        # stray bytes: Pillow skips them too
        pos = found.start() if found else end
    raise MediaError("the GIF holds no image (no image descriptor before its end)", field=where,
                     hint="the file is damaged or empty: export the image again")


# ------------------------------------------------------------------------------------ orientation
def _orientation(exif: bytes | None, xmp: bytes | None) -> int:
    """Pillow's `getexif()` order: the EXIF IFD0 tag 0x0112 if present, else XMP tiff:Orientation."""
    if exif is not None:
        found = _exif_orientation_or_none(exif)
        if found is not None:
            return found
    if xmp is not None:
        m = _XMP_ORIENTATION.search(xmp)
        if m:
            return int(m.group(2))
    return 1


def _exif_orientation(exif: bytes) -> int:
    found = _exif_orientation_or_none(exif)
    return 1 if found is None else found


# TIFF field types whose single value Pillow returns as an int: BYTE, SHORT, LONG, SBYTE, SSHORT, SLONG
_INT_TYPES = {1: "B", 3: "H", 4: "I", 6: "b", 8: "h", 9: "i"}
_EXIF_PREFIX = re.compile(b"^(Exif\x00\x00){1,2}")
_TIFF_HEADS = (b"II*\x00", b"MM\x00*", b"II\x00*", b"MM*\x00")   # the classic-TIFF heads Pillow accepts


def _exif_orientation_or_none(exif: bytes) -> int | None:
    tiff = _EXIF_PREFIX.sub(b"", exif)               # Pillow strips one or two "Exif\0\0"
    if len(tiff) < 8 or tiff[:4] not in _TIFF_HEADS:
        return None
    order = "<" if tiff[0] == 0x49 else ">"
    ifd = struct.unpack_from(order + "I", tiff, 4)[0]
    if ifd + 2 > len(tiff):
        return None
    count = struct.unpack_from(order + "H", tiff, ifd)[0]
    found: int | None = None
    for i in range(count):                             # a cut-short directory keeps what it holds
        at = ifd + 2 + 12 * i
        if at + 12 > len(tiff):
            break
        tag, typ, n = struct.unpack_from(order + "HHI", tiff, at)
        if tag == 0x0112 and typ in _INT_TYPES and n == 1:
            found = struct.unpack_from(order + _INT_TYPES[typ], tiff, at + 8)[0]
    return found


# --------------------------------------------------------------------------------------- helpers
def _need(data: bytes, n: int, fmt: str, what: str, where: str) -> None:
    if len(data) < n:
        _truncated(fmt, what, where, n)


def _truncated(fmt: str, what: str, where: str, n: int | None = None) -> NoReturn:
    need = f" (needs {n} bytes)" if n is not None else ""
    raise MediaError(f"the {fmt} data ends before {what}{need}: the header is cut short", field=where,
                     hint="send the whole file; if it came as base64, check that it was not truncated")


def _describe(data: bytes) -> str:
    if not data:
        return "no bytes at all"
    head = data[:8]
    shown = head.decode("ascii") if head.isascii() and head.decode("ascii").isprintable() else head.hex(" ")
    return f"{len(data):,} bytes starting {shown!r}"


_READERS = {"png": _png, "jpeg": _jpeg, "webp": _webp, "gif": _gif}
