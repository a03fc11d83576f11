"""Role cleaning: named, configurable policies; every change is reported.

Each policy is a small function `(messages, policy) -> (messages, diagnostics)`.
Messages keep their original `sequence`, so diagnostics and segments point
at what the user wrote even after a merge or a drop.
"""

from __future__ import annotations

import hashlib
from operator import attrgetter
from dataclasses import asdict, dataclass
from typing import Callable, Literal

from .conversation import Conversation, Message
from .diagnostics import Diagnostic, info, warning
from .errors import CleaningError


@dataclass(frozen=True, slots=True)
class CleaningPolicy:
    merge_consecutive: bool = False          # merge same-role user/system neighbours
    merge_separator: str = "\n\n"
    drop_empty: bool = False                 # drop messages with empty content and no tool calls
    system_first: Literal["allow", "move", "error"] = "allow"
    orphan_tool_results: Literal["error", "drop"] = "error"
    tool_pairs: Literal["warn", "error"] = "warn"  # a call's results must follow it directly

    @property
    def version(self) -> str:
        return hashlib.sha256(repr(sorted(asdict(self).items())).encode()).hexdigest()[:16]


_ROLE = attrgetter("role")
_CONTENT = attrgetter("content")
_CALLS = attrgetter("tool_calls")

Stage = Callable[[list[Message], CleaningPolicy], tuple[list[Message], list[Diagnostic]]]


def _is_empty(m: Message) -> bool:
    c = m.content
    return (not c or c.isspace()) and not m.tool_calls and m.role != "tool"


def drop_empty(msgs: list[Message], p: CleaningPolicy) -> tuple[list[Message], list[Diagnostic]]:
    # Most messages are not empty: rule that out in C before looking at each message in Python.
    # (isspace() stops at the first non-space character, so it costs nothing on real text.)
    contents = list(map(_CONTENT, msgs))
    if None not in contents and "" not in contents and not any(map(str.isspace, contents)):
        return msgs, []
    diags, out = [], []
    for m in msgs:
        empty = _is_empty(m)
        if empty and p.drop_empty:
            diags.append(info("dropped_empty", f"empty {m.role} message dropped", m.sequence))
            continue
        if empty:
            diags.append(info("empty_message", f"{m.role} message is empty", m.sequence))
        out.append(m)
    return out, diags


def system_first(msgs: list[Message], p: CleaningPolicy) -> tuple[list[Message], list[Diagnostic]]:
    if "system" not in map(_ROLE, msgs[1:]):  # C-speed scan for the common case
        return msgs, []
    late = [i for i, m in enumerate(msgs) if m.role == "system" and i > 0]
    if not late:
        return msgs, []
    first = msgs[late[0]]
    if p.system_first == "error":
        raise CleaningError("system message is not first", index=first.sequence,
                            hint="put the system prompt first, or use CleaningPolicy(system_first='move')")
    if p.system_first == "move" and msgs[0].role != "system":
        moved = [msgs[late[0]]] + msgs[:late[0]] + msgs[late[0] + 1:]
        return moved, [warning("system_moved", "system message moved to the front", first.sequence)]
    return msgs, [warning("system_not_first", "system message is not first; templates may reject or move it",
                          first.sequence)]


def merge_consecutive(msgs: list[Message], p: CleaningPolicy) -> tuple[list[Message], list[Diagnostic]]:
    if not p.merge_consecutive:
        return msgs, []
    out: list[Message] = []
    diags = []
    for m in msgs:
        prev = out[-1] if out else None
        if (prev is not None and prev.role == m.role and m.role in ("user", "system")
                and prev.content is not None and m.content is not None):
            out[-1] = prev.with_(content=prev.content + p.merge_separator + m.content)
            diags.append(info("merged_consecutive",
                              f"{m.role} message merged into seq {prev.sequence} with separator "
                              f"{p.merge_separator!r}", m.sequence))
        else:
            out.append(m)
    return out, diags


def pair_tool_results(msgs: list[Message], p: CleaningPolicy) -> tuple[list[Message], list[Diagnostic]]:
    """Every tool result answers a call made earlier; results follow their call directly."""
    if "tool" not in map(_ROLE, msgs) and not any(map(_CALLS, msgs)):
        return msgs, []  # no tools in this conversation: nothing to pair
    diags: list[Diagnostic] = []
    out: list[Message] = []
    open_calls: dict[str, int] = {}   # call id -> sequence of the assistant message
    answered: set[str] = set()
    in_tool_block = False
    for m in msgs:
        if m.role == "tool":
            cid = m.tool_call_id or ""
            if cid not in open_calls:
                if p.orphan_tool_results == "error":
                    raise CleaningError(f"tool result for unknown call id {cid!r}", index=m.sequence,
                                        hint="send the assistant message with that tool call first, or use "
                                             "CleaningPolicy(orphan_tool_results='drop')")
                diags.append(warning("orphan_tool_result", f"tool result for unknown call {cid!r} dropped",
                                     m.sequence))
                continue
            if not in_tool_block:
                msg = f"tool result for {cid!r} does not follow its call (seq {open_calls[cid]})"
                if p.tool_pairs == "error":
                    raise CleaningError(msg, index=m.sequence, hint="keep each tool result right after its call")
                diags.append(warning("tool_result_separated", msg, m.sequence))
            answered.add(cid)
            out.append(m)
            continue
        if m.role == "assistant" and m.tool_calls:
            for tc in m.tool_calls:
                open_calls[tc.id] = m.sequence
            in_tool_block = True
        else:
            in_tool_block = False
        out.append(m)
    for cid, seq in open_calls.items():
        if cid not in answered:
            diags.append(warning("missing_tool_result", f"tool call {cid!r} has no result", seq))
    return out, diags


STAGES: tuple[Stage, ...] = (drop_empty, system_first, merge_consecutive, pair_tool_results)


def clean(conv: Conversation, policy: CleaningPolicy = CleaningPolicy()) -> tuple[Conversation, list[Diagnostic]]:
    msgs = list(conv.messages)
    diags: list[Diagnostic] = []
    for stage in STAGES:
        msgs, d = stage(msgs, policy)
        diags.extend(d)
    return conv.with_messages(tuple(msgs)), diags
