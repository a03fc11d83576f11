"""Shortening a text for display without cutting a word: at a space, or, in Chinese (and other
text without spaces), between two characters; never inside a surrogate pair, before a combining
mark or around a zero-width joiner (an emoji sequence stays whole). The cut side gets an ellipsis."""

from __future__ import annotations

import unicodedata

ELLIPSIS = "…"
_JOINERS = {"\u200d", "\ufe0f", "\ufe0e"}


def _wide(ch: str) -> bool:
    """A character that is a word on its own for cutting: CJK ideographs, kana, Hangul, fullwidth."""
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _can_cut(text: str, i: int) -> bool:
    """Whether text[:i] | text[i:] splits no character: not inside a surrogate pair (a str holding
    them as two code points), not before a combining mark or a joiner, not after a joiner."""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    if "\ud800" <= a <= "\udbff" and "\udc00" <= b <= "\udfff":
        return False
    return not (unicodedata.combining(b) or b in _JOINERS or a in _JOINERS
                or "\U0001f3fb" <= b <= "\U0001f3ff")     # a skin tone belongs to the emoji before it


def _boundary(text: str, i: int) -> bool:
    """A word boundary at i: a space on either side, or a wide character on either side."""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    return (a.isspace() or b.isspace() or _wide(a) or _wide(b)) and _can_cut(text, i)


def clip_end(text: str, limit: int) -> str:
    """The start of `text`, at most `limit` characters and an ellipsis, cut at a word boundary."""
    if len(text) <= limit:
        return text
    i = limit
    while i > limit // 2 and not _boundary(text, i):
        i -= 1
    if i <= limit // 2:                   # one long word: cut between two characters
        i = limit
        while i > 1 and not _can_cut(text, i):
            i -= 1
    return text[:i].rstrip() + ELLIPSIS


def clip_start(text: str, limit: int) -> str:
    """The end of `text`, at most `limit` characters after an ellipsis, cut at a word boundary."""
    if len(text) <= limit:
        return text
    n = len(text)
    i = n - limit
    while i < n - limit // 2 and not _boundary(text, i):
        i += 1
    if i >= n - limit // 2:
        i = n - limit
        while i < n - 1 and not _can_cut(text, i):
            i += 1
    return ELLIPSIS + text[i:].lstrip()
