"""Prompt cache keys: SHA-256 over length-prefixed stable inputs, chained over the prefix.

Nothing volatile goes in: no timestamps, request ids or user ids (a template that reads the clock
puts what it reads in the build context). Each message has a content fingerprint; the chain makes a
changed message invalidate everything after it and nothing before it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..conversation import Message

KEY_FORMAT = 2   # 2: keys derive from the build context


@dataclass(frozen=True, slots=True)
class CacheKey:
    """A prompt's digest, and the hash tag of its conversation (empty: none). The tag is not part of
    the digest (it is derived from the same inputs); the Redis tier writes it as `{tag}` in the key, so
    every prompt of one conversation lands in one cluster hash slot (multi-key reads, no CROSSSLOT)."""

    hex: str
    tag: str = ""

    @property
    def short(self) -> str:
        return self.hex[:8]

    def __str__(self) -> str:
        return self.hex


def _h(*parts: str) -> str:
    # The parts' lengths are hashed too: text may hold any character, \x00 included, so a separator
    # alone would let two different lists of parts join to the same bytes (another request's prompt).
    # One join, one copy of the text, as before; intake refuses lone surrogates, so UTF-8 always works.
    h = hashlib.sha256("\x00".join(parts).encode("utf-8"))
    h.update(repr(tuple(map(len, parts))).encode("ascii"))
    return h.hexdigest()


def _message_parts(m: Message) -> tuple[str, ...]:
    """What a message's fingerprint covers. None and "" differ (the flags part says which fields are
    None); the lengths in `_h` keep the parts apart, so no text is copied to tag it."""
    c, n, i, r = m.content, m.name, m.tool_call_id, m.reasoning
    if n is None and i is None and r is None and not m.tool_calls and not m.parts:
        return (m.role, "1111" if c is None else "0111", c or "")   # most messages
    parts = [m.role, f"{c is None:d}{n is None:d}{i is None:d}{r is None:d}", c or "", n or "", i or "", r or ""]
    for tc in m.tool_calls:
        parts += [tc.id, tc.name, tc.arguments]
        if tc.kind != "function":
            parts.append(tc.kind)
    if m.parts:
        # Where each part sits among the text, and what each image is: its digest and size (another
        # image of the same size renders the same placeholder tokens, and must not share a key).
        parts.append("parts")
        for p in m.parts:
            parts += ("text", p) if isinstance(p, str) else p.key_parts()
    return tuple(parts)


def message_fingerprint(m: Message) -> str:
    return _h(*_message_parts(m))


def prefix_chain(messages: Iterable[Message], root: str = "") -> list[str]:
    """chain[i] = H(chain[i-1], sequence of message i, message i's fingerprinted parts), one hash per
    message. The sequence is in the chain because segments and diagnostics name it: the same text at
    another position in the request is another prompt."""
    out, prev = [], root
    for m in messages:
        prev = _h(prev, str(m.sequence), *_message_parts(m))
        out.append(prev)
    return out


def extend_chain(chain: Sequence[str], messages: Sequence[Message], start: int) -> tuple[str, ...]:
    """The chain of `messages`, reusing `chain[:start]` (the messages before `start` are unchanged)."""
    head = tuple(chain[:start])
    return head + tuple(prefix_chain(messages[start:], head[-1] if head else ""))


def tag_index(messages: Sequence[Message]) -> int:
    """Where a conversation's hash tag is taken: its first message that is not a system message (the
    last one when all are). Every later turn of the conversation keeps that message, so its prompts
    share the tag; two conversations with one system prompt differ there, so they spread over slots
    (a tag of the system prompt alone would make one hot slot per deployment)."""
    for i, m in enumerate(messages):
        if m.role != "system":
            return i
    return len(messages) - 1


def prompt_key(context: str, tools: Sequence[str], chain: Sequence[str], add_generation_prompt: bool,
               *, tag_at: int | None = None) -> CacheKey:
    """The key of one assembled prompt, and the only place keys are made: the build context's
    fingerprint (`context`: every setting that changes the output, workbench/assembly/context.py),
    the tool schemas exactly as the client sent them (templates render them in that key order), the
    message chain, the generation flag. `tag_at` (`tag_index` of the messages) names the link of the
    chain the conversation's hash tag is taken from; None: no tag."""
    tools_h = _h(*tools) if tools else ""
    tag = ""
    if tag_at is not None and 0 <= tag_at < len(chain):
        # 16 hex digits: plenty to spread conversations over 16,384 slots, short in every key.
        tag = _h("tag", context, tools_h, chain[tag_at])[:16]
    return CacheKey(_h(f"prompt/{KEY_FORMAT}", context, tools_h,
                       chain[-1] if chain else "", "gen" if add_generation_prompt else "nogen"), tag)
