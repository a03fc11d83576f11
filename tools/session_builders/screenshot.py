"""A chat whose user sends a screenshot: the image is a PNG this builder writes itself.

The PNG is drawn from rectangles (``build.image``: size, palette, rectangles in drawing order) and
encoded here byte by byte: an 8-bit palette image, each row unfiltered, compressed with a small
deflate of our own (fixed Huffman codes; runs and repeated rows as back-references), wrapped in
zlib's header and Adler-32, each chunk with its CRC-32. No image library and no zlib compressor
is involved, so the bytes depend on nothing but this file and the source: zlib builds (zlib-ng,
a newer zlib) and Pillow versions compress differently, and the committed session is compared
byte for byte. ``zlib`` is used only for the two checksums and to check the stream decompresses
to the pixels drawn.

In ``session.messages``, an image part whose URL is ``{image}`` gets the PNG as a data URL.
"""

from __future__ import annotations

import base64
import random
import struct
import zlib
from typing import Any

from .common import Session

IMAGE_SLOT = "{image}"
MAX_MATCH = 258

# Deflate's length codes (257...285) and distance codes (0...29): (base, extra bits).
_LENGTHS = [(3, 0), (4, 0), (5, 0), (6, 0), (7, 0), (8, 0), (9, 0), (10, 0), (11, 1), (13, 1), (15, 1), (17, 1),
            (19, 2), (23, 2), (27, 2), (31, 2), (35, 3), (43, 3), (51, 3), (59, 3), (67, 4), (83, 4), (99, 4),
            (115, 4), (131, 5), (163, 5), (195, 5), (227, 5), (258, 0)]
_DISTANCES = [(1, 0), (2, 0), (3, 0), (4, 0), (5, 1), (7, 1), (9, 2), (13, 2), (17, 3), (25, 3), (33, 4), (49, 4),
              (65, 5), (97, 5), (129, 6), (193, 6), (257, 7), (385, 7), (513, 8), (769, 8), (1025, 9), (1537, 9),
              (2049, 10), (3073, 10), (4097, 11), (6145, 11), (8193, 12), (12289, 12), (16385, 13), (24577, 13)]


class _Bits:
    """Deflate's bit order: values least significant bit first, Huffman codes most significant first."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def put(self, value: int, nbits: int) -> None:
        self.acc |= value << self.n
        self.n += nbits
        while self.n >= 8:
            self.out.append(self.acc & 0xFF)
            self.acc >>= 8
            self.n -= 8

    def code(self, code: int, nbits: int) -> None:
        self.put(int(f"{code:0{nbits}b}"[::-1], 2), nbits)

    def done(self) -> bytes:
        if self.n:
            self.out.append(self.acc & 0xFF)
        return bytes(self.out)


def _literal(bits: _Bits, sym: int) -> None:
    """A literal/length symbol in the fixed Huffman code (RFC 1951, 3.2.6)."""
    if sym < 144:
        bits.code(0x30 + sym, 8)
    elif sym < 256:
        bits.code(0x190 + sym - 144, 9)
    elif sym < 280:
        bits.code(sym - 256, 7)
    else:
        bits.code(0xC0 + sym - 280, 8)


def _match(bits: _Bits, length: int, distance: int) -> None:
    k = max(i for i, (base, _) in enumerate(_LENGTHS) if base <= length)
    base, extra = _LENGTHS[k]
    _literal(bits, 257 + k)
    bits.put(length - base, extra)
    k = max(i for i, (base, _) in enumerate(_DISTANCES) if base <= distance)
    base, extra = _DISTANCES[k]
    bits.code(k, 5)
    bits.put(distance - base, extra)


def deflate(data: bytes, distances: tuple[int, ...]) -> bytes:
    """`data` as one fixed-Huffman deflate block; back-references only at `distances` (the previous
    byte, the previous row), greedy, longest first."""
    bits = _Bits()
    bits.put(1, 1)          # BFINAL
    bits.put(1, 2)          # BTYPE 01: fixed Huffman codes
    i, n = 0, len(data)
    while i < n:
        best, at = 0, 0
        for d in distances:
            if d > i:
                continue
            length = 0
            while length < MAX_MATCH and i + length < n and data[i + length] == data[i + length - d]:
                length += 1
            if length > best:
                best, at = length, d
        if best >= 3:
            _match(bits, best, at)
            i += best
        else:
            _literal(bits, data[i])
            i += 1
    _literal(bits, 256)     # end of block
    return bits.done()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def png(width: int, height: int, palette: list[list[int]], rects: list[list[Any]]) -> bytes:
    """A palette PNG: colour 0 everywhere, then each [x0, y0, x1, y1, colour index] filled in order."""
    if not 1 <= len(palette) <= 256:
        raise ValueError("a PNG palette holds 1 to 256 colours")
    pixels = [bytearray(width) for _ in range(height)]
    for x0, y0, x1, y1, c in rects:
        if not 0 <= c < len(palette):
            raise ValueError(f"colour {c} is not in the palette")
        for y in range(max(0, y0), min(height, y1)):
            pixels[y][max(0, x0):min(width, x1)] = bytes([c]) * (min(width, x1) - max(0, x0))
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)       # filter 0 on every row
    stream = b"\x78\x01" + deflate(raw, (1, width + 1)) + struct.pack(">I", zlib.adler32(raw) & 0xFFFFFFFF)
    if zlib.decompress(stream) != raw:
        raise AssertionError("the deflate stream does not decompress to the image")
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)   # 8-bit palette, no interlace
    plte = b"".join(bytes(c) for c in palette)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"PLTE", plte) + _chunk(b"IDAT", stream) + \
        _chunk(b"IEND", b"")


def screenshot_chat(session: Session, spec: dict[str, Any], rng: random.Random) -> Session:
    """The session's messages with the drawn image in place of each `{image}` URL."""
    img = spec["image"]
    data = png(img["width"], img["height"], img["palette"], img["rects"])
    url = "data:image/png;base64," + base64.b64encode(data).decode("ascii")

    def fill(part: Any) -> Any:
        if isinstance(part, dict) and part.get("type") == "image_url" and part["image_url"].get("url") == IMAGE_SLOT:
            return {**part, "image_url": {**part["image_url"], "url": url}}
        return part

    return {"messages": [{**m, "content": [fill(p) for p in m["content"]]} if isinstance(m.get("content"), list)
                         else m for m in session["messages"]]}
