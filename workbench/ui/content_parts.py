"""A message's content parts in the message editor (no UI library here).

A message whose content is a list holding images, audio or files is edited as its text parts, each
in its own box, with the other parts shown beside them as read-only chips (kind, size, bytes, as
intake measured them: `MediaPart`, the same objects `images()` and the CLI report). Editing the
text never drops a part:

- `set_part_text(content, k, text)`: the editor's box for part k (the op's `part`);
- `with_text(content, text)`: text for the message as a whole (`Workbench.edit`, an op without
  `part`): it goes into the one text part, or before the media when there is none; a message with
  several text parts names the part to edit instead of guessing.

`part_chips` gives a list's parts for the editor (text boxes and chips) in either format: Chat
Completions (`messages`) and Responses (`input` items: responses_items.py uses it).

A list that holds anything else (tool results, tool uses, thinking blocks) is edited as JSON, as
before; so is a list of text parts alone.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import EditError, WorkbenchError

TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
MEDIA_TYPES = frozenset({"image_url", "input_image", "image", "input_audio", "audio", "file", "input_file",
                         "document"})
_MEMO_MAX = 512
_memo: dict[int, tuple[list[Any], str, list[dict[str, Any]]]] = {}
_WHERE = re.compile(r"(?:messages|input)\[0\]\.content\[(\d+)\]")


def is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in TEXT_TYPES and isinstance(block.get("text"), str)


def is_media(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") in MEDIA_TYPES


def has_media(content: Any) -> bool:
    """A list of text and media parts with at least one media part: edited as text boxes and chips."""
    return (isinstance(content, list) and any(is_media(b) for b in content)
            and all(is_text(b) or is_media(b) for b in content))


def set_part_text(content: Any, k: Any, text: Any, where: str) -> list[Any]:
    """`content` with part k's text replaced (a new list and a new block; the other parts as they were)."""
    if not isinstance(content, list):
        raise EditError(f"{where}: the content is not a list of parts", hint="edit the content as a whole")
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(content) or not is_text(content[k]):
        raise EditError(f"{where}: part {k!r} is not a text part of this message",
                        hint=f"text parts: {[i for i, b in enumerate(content) if is_text(b)]}")
    if not isinstance(text, str):
        raise EditError(f"{where}: expected text")
    out = list(content)
    out[k] = {**content[k], "text": text}
    return out


def with_text(content: list[Any], text: str, where: str, text_type: str = "text") -> list[Any]:
    """`content` (text and media parts) with `text` as its text, every media part kept in its place
    (`text_type`: the type of a text part made where there is none: "input_text" in a Responses item)."""
    texts = [i for i, b in enumerate(content) if is_text(b)]
    if len(texts) == 1:
        return set_part_text(content, texts[0], text, where)
    if not texts:
        return ([{"type": text_type, "text": text}] if text else []) + list(content)
    raise EditError(f"{where}: the message has {len(texts)} text parts (between its images or files)",
                    hint=f"edit one of them: part={texts[0]} (text parts: {texts})")


def editor_parts(messages: list[Any], fmt: str) -> list[dict[str, Any] | None]:
    """For the editor, per message: None (plain text, or JSON blocks), or its parts: each text part
    ({"k", "text"}) and each media part as a chip ({"k", "kind", "label", "title"}), in order."""
    out: list[dict[str, Any] | None] = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if not has_media(content):
            out.append(None)
            continue
        assert isinstance(content, list)
        role = m.get("role") if isinstance(m.get("role"), str) else "user"
        out.append({"parts": part_chips(content, role, fmt)})
    return out


def part_chips(content: list[Any], role: str, fmt: str) -> list[dict[str, Any]]:
    """A content list's parts for the editor, in order: each text part ({"k", "text"}) and each other
    part as a chip ({"k", "kind", "label", "title"}), measured by the intake in format `fmt`
    ("responses": the list of an input item). Memoized by the list (copy on write: an edit makes a new one)."""
    got = _memo.get(id(content))
    if got is not None and got[0] is content and got[1] == fmt + role:
        return got[2]
    chips = _measure(content, role, fmt)
    parts: list[dict[str, Any]] = []
    for k, b in enumerate(content):
        if is_text(b):
            parts.append({"k": k, "text": b["text"]})
        else:
            parts.append({"k": k, **chips.get(k, {"kind": str(b.get("type")), "label": str(b.get("type")),
                                                  "title": "not measured"})})
    if len(_memo) >= _MEMO_MAX:
        _memo.clear()
    _memo[id(content)] = (content, fmt + role, parts)
    return parts


def _measure(content: list[Any], role: str, fmt: str) -> dict[int, dict[str, Any]]:
    """Each media part's chip, measured by the intake itself (one message alone): kind, size, bytes."""
    from ..intake import normalize
    key = "input" if fmt == "responses" else "messages"
    try:
        conv, _ = normalize({"format": fmt, key: [{"role": role, "content": content}]})
    except WorkbenchError as exc:
        reason = str(exc).split(" (")[0]
        return {k: {"kind": str(b.get("type")), "label": f"{b.get('type')} · not readable", "title": reason}
                for k, b in enumerate(content) if is_media(b)}
    out: dict[int, dict[str, Any]] = {}
    for _seq, p in conv.media:
        m = _WHERE.search(p.where)
        if m is None:
            continue
        bits = [p.kind]
        if p.width and p.height:
            bits.append(f"{p.width}×{p.height}" + (" assumed" if p.size_assumed else ""))
        if p.mime:
            bits.append(p.mime.split("/")[-1].upper())
        if p.name:
            bits.append(p.name)
        if p.byte_size is not None:
            bits.append(f"{p.byte_size:,} bytes")
        elif p.source != "data":
            bits.append(f"by {p.source.replace('_', ' ')}, not fetched")
        where = p.where.replace(m.group(0), f"this message.content[{m.group(1)}]")
        out[int(m.group(1))] = {"kind": p.kind, "label": " · ".join(bits),
                                "title": f"{where} · digest "
                                         f"{p.digest[:16]}… · read-only: kept as it is when the text is edited"}
    return out


__all__ = ["MEDIA_TYPES", "TEXT_TYPES", "editor_parts", "has_media", "is_media", "is_text", "part_chips",
           "set_part_text", "with_text"]
