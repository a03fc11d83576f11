"""Audio and file parts: counted where a rule is published and derivable from a header, else sized.

One published rule is size-derivable: Google documents that Gemini represents audio at 32 tokens
per second, and a WAV header gives the duration exactly (its data chunk's byte count over the byte
rate), so `gemini_audio_estimate` counts a WAV. Everything else returns `tokens=None` with the byte
size, for the caller to warn with: OpenAI's gpt-4o audio tokens are not a published function of
size or duration; Qwen2-Audio's processor counts frames of 16 kHz audio, which needs the audio
resampled first (a WAV at another rate has no exact count without decoding it); compressed
formats (MP3, Ogg, FLAC) state their duration only approximately or not at all in their headers;
PDFs and other files have no published size rule.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ..errors import MediaError

GEMINI_AUDIO_TOKENS_PER_SECOND = 32
GEMINI_AUDIO_DOC = "https://ai.google.dev/gemini-api/docs/audio#technical-details"   # read 2026-12-06


@dataclass(frozen=True, slots=True)
class WavHeader:
    """A RIFF/WAVE file's format and the length of its sample data."""

    format_tag: int          # 1 PCM, 3 IEEE float, 0xFFFE extensible, ...
    channels: int
    sample_rate: int
    bits_per_sample: int
    block_align: int
    data_bytes: int          # the data chunk's size (what the file holds, if it was cut short)

    @property
    def frames(self) -> int:
        return self.data_bytes // self.block_align

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate


@dataclass(frozen=True, slots=True)
class MediaCount:
    """What an audio or file part costs: `tokens` when a rule applies, else None and the byte size
    for a warning. `rule` names the rule (or why none applied)."""

    tokens: int | None
    byte_size: int
    rule: str
    duration_s: float | None = None


def read_wav_header(data: bytes, *, where: str) -> WavHeader:
    """Walk a WAV's RIFF chunks to `fmt ` and `data`; no sample is read."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise MediaError("not a WAV file (no RIFF/WAVE header)", field=where,
                         hint="only WAV audio has a size rule here; other formats are counted by bytes")
    fmt: tuple[int, int, int, int, int] | None = None
    pos = 12
    while pos + 8 <= len(data):
        cid, size = struct.unpack_from("<4sI", data, pos)
        body = pos + 8
        if cid == b"fmt ":
            if size < 16 or body + 16 > len(data):
                raise MediaError("the WAV's fmt chunk is cut short", field=where, hint="send the whole file")
            tag, channels, rate, _byte_rate, align, bits = struct.unpack_from("<HHIIHH", data, body)
            fmt = (tag, channels, rate, align, bits)
        elif cid == b"data":
            if fmt is None:
                raise MediaError("the WAV's data chunk comes before its fmt chunk", field=where)
            tag, channels, rate, align, bits = fmt
            if channels < 1 or rate < 1 or align < 1:
                raise MediaError(f"the WAV's fmt chunk is invalid ({channels} channels, {rate} Hz, "
                                 f"{align}-byte frames)", field=where)
            held = min(size, len(data) - body)     # a streamed WAV may state 0xFFFFFFFF
            return WavHeader(tag, channels, rate, bits, align, held)
        pos = body + size + (size & 1)
    raise MediaError("the WAV has no data chunk", field=where, hint="send the whole file")


def gemini_audio_estimate(duration_s: float) -> int:
    """Gemini's published rate: 32 tokens per second of audio (rounded up: Google does not say how)."""
    return math.ceil(duration_s * GEMINI_AUDIO_TOKENS_PER_SECOND - 1e-9)


def count_audio(data: bytes, *, mime: str | None, where: str, rule: str | None = None) -> MediaCount:
    """An audio part: `rule="gemini"` on a WAV gives Gemini's published estimate; anything else gives
    tokens=None and the byte size (see the module docstring for why)."""
    if rule == "gemini" and data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        wav = read_wav_header(data, where=where)
        return MediaCount(gemini_audio_estimate(wav.duration_s), len(data), "gemini-32-tokens-per-second",
                          wav.duration_s)
    why = "no published size rule" if rule is None else f"no {rule!r} rule for {mime or 'this audio'}"
    return MediaCount(None, len(data), why)


def count_file(data: bytes, *, mime: str | None = None) -> MediaCount:
    """A file part (PDF, text, ...): no published size rule; the byte size for the warning."""
    return MediaCount(None, len(data), f"no published size rule for {mime or 'files'}")
