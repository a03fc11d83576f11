"""Media parts counted from their headers: images (PNG, JPEG, WebP, GIF), audio, files.

No pixel is decoded: `read_image_header` reads the size, a model's `VisionRule` turns it into the
processor's token count and placeholder text, `hosted` gives OpenAI's and Anthropic's published
estimates. docs/media.md has the rules, the choices and what could not be confirmed.
"""

from .audio import MediaCount, WavHeader, count_audio, count_file, gemini_audio_estimate, read_wav_header
from .headers import (
    DEFAULT_LIMITS,
    KNOWN_FORMATS,
    ImageFormat,
    ImageHeader,
    ImageLimits,
    read_image_header,
    sniff_format,
)
from .hosted import (
    ANTHROPIC_ESTIMATE,
    OPENAI_ESTIMATES,
    AnthropicEstimate,
    OpenAIPatchEstimate,
    OpenAITileEstimate,
    openai_estimate,
)
from .payload import (
    DEFAULT_MAX_BYTES,
    DataUrl,
    ImagePayload,
    MediaDigest,
    decode_base64,
    media_digest,
    parse_data_url,
    read_image_base64,
    read_image_bytes,
    read_image_data_url,
    url_digest,
)
from .vision import (
    VISION_RULES,
    Gemma3,
    ImageCount,
    Llama4,
    Pixtral,
    Qwen2VL,
    VisionRule,
    count_image,
    vision_rule,
)

__all__ = [
    "DEFAULT_LIMITS", "KNOWN_FORMATS", "ImageFormat", "ImageHeader", "ImageLimits", "read_image_header",
    "sniff_format",
    "DEFAULT_MAX_BYTES", "DataUrl", "ImagePayload", "MediaDigest", "decode_base64", "media_digest",
    "parse_data_url", "read_image_base64", "read_image_bytes", "read_image_data_url", "url_digest",
    "VISION_RULES", "Gemma3", "ImageCount", "Llama4", "Pixtral", "Qwen2VL", "VisionRule", "count_image",
    "vision_rule",
    "ANTHROPIC_ESTIMATE", "OPENAI_ESTIMATES", "AnthropicEstimate", "OpenAIPatchEstimate", "OpenAITileEstimate",
    "openai_estimate",
    "MediaCount", "WavHeader", "count_audio", "count_file", "gemini_audio_estimate", "read_wav_header",
]
