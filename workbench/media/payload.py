"""What a request carries for a media part: data URLs and base64, decoded under a cap; digests.

A payload over the cap is refused from its length, before a byte is decoded. Base64 is strict
(`base64.b64decode(..., validate=True)`, what vLLM's loader does): the standard alphabet, `=`
padding, and by default no whitespace at all. A payload wrapped at 76 columns (what `base64`
without `-w0` writes) is refused with a hint, since vLLM refuses it too; `allow_whitespace=True`
strips ASCII whitespace first for callers that know their server is lenient.

The digest of a media part is the SHA-256 of its decoded bytes, so one image sent as a data URL,
as Anthropic base64 or as a Responses `input_image` hashes the same. An image given only by URL is
never fetched: its digest is that of the URL text (`url_digest`), which says nothing about the
pixels: the same URL may serve other bytes tomorrow, and two URLs may serve one image.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from typing import NamedTuple, NewType

from ..errors import MediaError
from .headers import DEFAULT_LIMITS, MIME_TYPES, ImageHeader, ImageLimits, read_image_header

DEFAULT_MAX_BYTES = 20 * 1024 * 1024       # OpenAI's cap on one image input (20 MB); issue 30's default

MediaDigest = NewType("MediaDigest", str)  # 64 hex digits: SHA-256 of decoded bytes, or of b"url\0" + URL

_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=]")
_WHITESPACE = str.maketrans("", "", " \t\r\n\v\f")
# Names a request may declare that mean the same format (image/jpg is not registered, but common).
_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-png": "image/png"}


class DataUrl(NamedTuple):
    """A data URL split: the media type it declares (lower case, parameters dropped; None when it
    declares none) and the decoded bytes."""

    mime: str | None
    data: bytes


def decoded_size(text: str) -> int:
    """How many bytes `text` decodes to, from its length alone (exact for valid base64)."""
    n = len(text)
    pad = 2 if text.endswith("==") else 1 if text.endswith("=") else 0
    return (n // 4) * 3 + max(n % 4 - 1, 0) - pad


def decode_base64(text: str, *, max_bytes: int = DEFAULT_MAX_BYTES, where: str,
                  allow_whitespace: bool = False) -> bytes:
    """Strict base64 → bytes; refused over `max_bytes` (by length, before decoding) or when invalid."""
    if not isinstance(text, str):
        raise MediaError(f"base64 data must be a string, not {type(text).__name__}", field=where)
    if allow_whitespace:
        text = text.translate(_WHITESPACE)
    size = decoded_size(text)
    if size > max_bytes:
        raise MediaError(f"the base64 payload is {len(text):,} characters, {size:,} bytes once decoded: over "
                         f"the cap of {max_bytes:,} bytes", field=where,
                         hint="send a smaller or more compressed file, or raise the media size cap")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise MediaError(f"not valid base64 ({_base64_problem(text, e)})", field=where,
                         hint="encode with the standard alphabet and '=' padding, on one line "
                         "(base64 -w0; Python: base64.b64encode(data).decode())") from None


def parse_data_url(url: str, *, max_bytes: int = DEFAULT_MAX_BYTES, where: str,
                   allow_whitespace: bool = False) -> DataUrl:
    """`data:<mime>[;params];base64,<payload>` → (mime, bytes). Only base64 data URLs carry media
    (vLLM refuses the percent-encoded form with "Only base64 data URLs are supported")."""
    if not isinstance(url, str) or url[:5].lower() != "data:":
        raise MediaError("not a data URL (it must start with 'data:')", field=where)
    comma = url.find(",", 5)
    if comma < 0:
        raise MediaError("the data URL has no ',' between its media type and its data", field=where,
                         hint="write data:image/png;base64,<base64 data>")
    params = [p.strip() for p in url[5:comma].split(";")]
    if len(params) < 2 or params[-1].lower() != "base64":
        raise MediaError(f"the data URL is not base64 ({url[:min(comma, 60)]!r}); only base64 data URLs carry "
                         "media", field=where, hint="write data:image/png;base64,<base64 data>")
    payload = url[comma + 1:]
    return DataUrl(params[0].lower() or None, decode_base64(payload, max_bytes=max_bytes, where=where,
                                                    allow_whitespace=allow_whitespace))


def media_digest(raw: bytes) -> MediaDigest:
    """SHA-256 (hex) of the decoded bytes: the same image hashes the same however it was sent."""
    return MediaDigest(hashlib.sha256(raw).hexdigest())


def url_digest(url: str) -> MediaDigest:
    """SHA-256 (hex) of ``b"url\\0" + url``: names a URL-only image in cache keys. The pixels behind
    the URL are unknown (never fetched): another URL may serve the same image, and this one may serve
    another image later. The prefix keeps it apart from any `media_digest`."""
    return MediaDigest(hashlib.sha256(b"url\x00" + url.encode("utf-8", "surrogatepass")).hexdigest())


def normalize_mime(mime: str) -> str:
    """Lower case, parameters dropped, common aliases folded (image/jpg → image/jpeg)."""
    base = mime.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


@dataclass(frozen=True, slots=True)
class ImagePayload:
    """An image part as decoded: its header, digest and size, and what its sender claimed.

    `mime` is the header's (what the bytes are); `declared_mime` is what the data URL or the
    Anthropic `media_type` said. `mime_mismatch` is True when they differ: the caller turns that
    into a warning and counts the image as what its header says."""

    header: ImageHeader
    digest: MediaDigest
    byte_size: int
    declared_mime: str | None
    mime_mismatch: bool

    @property
    def mime(self) -> str:
        return self.header.mime


def read_image_bytes(raw: bytes, *, where: str, declared_mime: str | None = None,
                     limits: ImageLimits = DEFAULT_LIMITS) -> ImagePayload:
    """Decoded image bytes → `ImagePayload` (the header read, never the pixels)."""
    header = read_image_header(raw, where=where, limits=limits)
    declared = None if declared_mime is None else normalize_mime(declared_mime)
    mismatch = declared is not None and declared != MIME_TYPES[header.format]
    return ImagePayload(header, media_digest(raw), len(raw), declared_mime, mismatch)


def read_image_data_url(url: str, *, where: str, max_bytes: int = DEFAULT_MAX_BYTES,
                        limits: ImageLimits = DEFAULT_LIMITS, allow_whitespace: bool = False) -> ImagePayload:
    """A `data:image/...;base64,...` URL (OpenAI `image_url`, Responses `input_image`) → `ImagePayload`."""
    mime, raw = parse_data_url(url, max_bytes=max_bytes, where=where, allow_whitespace=allow_whitespace)
    return read_image_bytes(raw, where=where, declared_mime=mime, limits=limits)


def read_image_base64(data: str, *, media_type: str | None, where: str, max_bytes: int = DEFAULT_MAX_BYTES,
                      limits: ImageLimits = DEFAULT_LIMITS, allow_whitespace: bool = False) -> ImagePayload:
    """Anthropic's `{"type": "base64", "media_type": ..., "data": ...}` source → `ImagePayload`."""
    raw = decode_base64(data, max_bytes=max_bytes, where=where, allow_whitespace=allow_whitespace)
    return read_image_bytes(raw, where=where, declared_mime=media_type, limits=limits)


def _base64_problem(text: str, error: Exception) -> str:
    bad = _NOT_BASE64.search(text)
    if bad is None:
        return str(error).rstrip(".")
    ch, i = bad.group(), bad.start()
    if ch in " \t\r\n\v\f":
        return f"whitespace at character {i:,}; line breaks are not allowed"
    return f"{ch!r} at character {i:,} is not in the base64 alphabet"
