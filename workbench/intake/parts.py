"""Content parts that are not text — images, audio, files — as every request format sends them.

Each becomes a `MediaPart`: what it is, the digest of its content, and for an image its width and
height read from the file header (no pixel is decoded, nothing is fetched). Text parts stay text.
The three request formats share this: OpenAI Chat Completions (`image_url`, `input_audio`, `file`),
the Responses API (`input_image`, `input_file`, `input_audio`) and Anthropic (`image`, `document`).

A part the workbench cannot measure is refused with a `MediaError` naming its field path; a part
it measures on an assumption (an image URL: its size is unknown offline) gets a warning that says
which assumption.
"""

from __future__ import annotations

from typing import Any

from ..conversation import MediaPart
from ..diagnostics import Diagnostic, warning
from ..errors import MediaError
from ..media import decode_base64, media_digest, parse_data_url, read_image_bytes, url_digest
from .limits import IntakeLimits

_DETAILS = ("low", "high", "auto", "original")


def _str(value: Any, where: str, what: str, index: int | None, container: str) -> str:
    if not isinstance(value, str) or not value:
        raise MediaError(f"{what} must be a non-empty string", field=where, index=index, container=container)
    return value


def image(url: str, *, where: str, detail: Any, limits: IntakeLimits, seq: int | None,
          diags: list[Diagnostic], index: int | None = None, container: str = "messages") -> MediaPart:
    """An image given as a URL: a data URL is measured from its header; any other URL is not
    fetched and counts at the configured size, with a warning."""
    path = _path(container, index, where)
    if detail is not None and detail not in _DETAILS:
        raise MediaError(f"detail must be one of {', '.join(_DETAILS)}, got {detail!r}",
                         field=f"{where}.detail" if "." in where else "detail", index=index, container=container)
    if url.startswith("data:"):
        mime, raw = parse_data_url(url, max_bytes=limits.max_media_bytes, where=path)
        return _measured(raw, mime, where=path, detail=detail, seq=seq, diags=diags)
    if url.startswith(("http://", "https://")):
        w, h = limits.url_image_width, limits.url_image_height
        diags.append(warning("image_size_assumed",
                             f"{path}: an image given by URL is not fetched (the workbench stays offline); "
                             f"it is counted as {w}×{h} pixels (set IntakeLimits.url_image_width/height, or "
                             "send it as a data URL to count its real size)", seq))
        return MediaPart("image", url_digest(url), path, width=w, height=h, detail=detail, source="url",
                         size_assumed=True)
    raise MediaError("an image URL must be a data: URL or an http(s) URL",
                     field=where, index=index, container=container,
                     hint="send the image as data:image/png;base64,... or as an https URL")


def image_base64(data: Any, media_type: Any, *, where: str, limits: IntakeLimits, seq: int | None,
                 diags: list[Diagnostic], index: int | None, container: str = "messages") -> MediaPart:
    """An image sent as base64 with its media type beside it (Anthropic's `source`)."""
    path = _path(container, index, where)
    text = _str(data, f"{where}.data", "the image data", index, container)
    raw = decode_base64(text, max_bytes=limits.max_media_bytes, where=f"{path}.data")
    mime = media_type if isinstance(media_type, str) else None
    return _measured(raw, mime, where=path, detail=None, seq=seq, diags=diags)


def image_file_id(file_id: Any, *, where: str, limits: IntakeLimits, seq: int | None, diags: list[Diagnostic],
                  index: int | None, container: str = "messages") -> MediaPart:
    """An image uploaded earlier (a file id): its bytes live on the provider's servers."""
    fid = _str(file_id, f"{where}.file_id", "file_id", index, container)
    path = _path(container, index, where)
    w, h = limits.url_image_width, limits.url_image_height
    diags.append(warning("image_size_assumed",
                         f"{path}: an image given by file id ({fid}) is stored on the provider's servers; it is "
                         f"counted as {w}×{h} pixels (send it inline as base64 to count its real size)", seq))
    return MediaPart("image", url_digest("file:" + fid), path, width=w, height=h, source="file_id",
                     size_assumed=True)


def _measured(raw: bytes, mime: str | None, *, where: str, detail: Any, seq: int | None,
              diags: list[Diagnostic]) -> MediaPart:
    """Bytes that must be an image: its header read (never its pixels), its size as the processors
    see it (after the EXIF orientation, as transformers' load_image and vLLM turn the image)."""
    img = read_image_bytes(raw, where=where, declared_mime=mime)
    if img.mime_mismatch:
        diags.append(warning("media_type_mismatch",
                             f"{where}: declared {img.declared_mime!r} but the bytes are {img.mime}; counted as "
                             f"{img.mime} (fix the media type the client sends)", seq))
    width, height = img.header.display_size
    return MediaPart("image", img.digest, where, mime=img.mime, width=width, height=height, byte_size=img.byte_size,
                     detail=detail)


def audio(data: Any, fmt: Any, *, where: str, limits: IntakeLimits, seq: int | None, diags: list[Diagnostic],
          index: int | None, container: str = "messages") -> MediaPart:
    """An audio clip sent as base64 (OpenAI's `input_audio`): kept and counted by its bytes."""
    path = _path(container, index, where)
    text = _str(data, f"{where}.data", "the audio data", index, container)
    raw = decode_base64(text, max_bytes=limits.max_media_bytes, where=f"{path}.data")
    mime = f"audio/{fmt}" if isinstance(fmt, str) and fmt else None
    diags.append(warning("media_not_counted",
                         f"{path}: an audio clip of {len(raw):,} bytes is kept, but no offline rule gives its "
                         "tokens: the prompt's count leaves it out", seq))
    return MediaPart("audio", media_digest(raw), path, mime=mime, byte_size=len(raw))


def file(*, data: Any = None, file_id: Any = None, url: Any = None, filename: Any = None, where: str,
         limits: IntakeLimits, seq: int | None, diags: list[Diagnostic], index: int | None,
         container: str = "messages") -> MediaPart:
    """A file (a PDF, a document): inline as a data URL or base64, or by id or URL."""
    path = _path(container, index, where)
    name = filename if isinstance(filename, str) else None
    if data is not None:
        text = _str(data, f"{where}.file_data", "file_data", index, container)
        if text.startswith("data:"):
            mime, raw = parse_data_url(text, max_bytes=limits.max_media_bytes, where=path)
        else:
            mime, raw = None, decode_base64(text, max_bytes=limits.max_media_bytes, where=path)
        diags.append(warning("media_not_counted",
                             f"{path}: a file{f' ({name})' if name else ''} of {len(raw):,} bytes is kept, but no "
                             "offline rule gives its tokens (providers extract its text and page images): the "
                             "prompt's count leaves it out", seq))
        return MediaPart("file", media_digest(raw), path, mime=mime, byte_size=len(raw), name=name)
    ref = file_id if file_id is not None else url
    if ref is None:
        raise MediaError("a file part needs file_data, file_id or file_url", field=where, index=index,
                         container=container)
    ref = _str(ref, where, "the file reference", index, container)
    diags.append(warning("media_not_counted",
                         f"{path}: a file given by {'id' if file_id is not None else 'URL'} is not fetched: its "
                         "tokens are not counted", seq))
    return MediaPart("file", url_digest("file:" + ref), path, source="file_id" if file_id is not None else "url",
                     name=name)


def _path(container: str, index: int | None, where: str) -> str:
    return f"{container}[{index}].{where}" if index is not None else where
