"""Role cleaning: named, configurable policies; every change is reported.

Each policy is a small function `(messages, policy) -> (messages, diagnostics)`.
Messages keep their original `sequence`, so diagnostics and segments point
at what the user wrote even after a merge or a drop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from operator import attrgetter
from typing import Literal

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


class _Pairing:
    """Tool calls seen so far and the results that answered them, fed one message at a time."""

    def __init__(self, policy: CleaningPolicy):
        self.policy = policy
        self.open_calls: dict[str, int] = {}   # call id -> sequence of the assistant message
        self.answered: set[str] = set()
        self.in_block = False                  # right after a tool call or one of its results
        self.diags: list[Diagnostic] = []

    def feed(self, m: Message) -> bool:
        """Note one message; False for an orphan result the policy drops."""
        p = self.policy
        if m.role == "tool":
            cid = m.tool_call_id or ""
            if cid not in self.open_calls:
                if p.orphan_tool_results == "error":
                    raise CleaningError(f"tool result for unknown call id {cid!r}", index=m.sequence,
                                        hint="send the assistant message with that tool call first, or use "
                                             "CleaningPolicy(orphan_tool_results='drop')")
                self.diags.append(warning("orphan_tool_result", f"tool result for unknown call {cid!r} dropped",
                                          m.sequence))
                return False
            if not self.in_block:
                msg = f"tool result for {cid!r} does not follow its call (seq {self.open_calls[cid]})"
                if p.tool_pairs == "error":
                    raise CleaningError(msg, index=m.sequence, hint="keep each tool result right after its call")
                self.diags.append(warning("tool_result_separated", msg, m.sequence))
            self.answered.add(cid)
            return True
        if m.role == "assistant" and m.tool_calls:
            for tc in m.tool_calls:
                self.open_calls[tc.id] = m.sequence
            self.in_block = True
        else:
            self.in_block = False
        return True

    def missing(self) -> list[Diagnostic]:
        return [warning("missing_tool_result", f"tool call {cid!r} has no result", seq)
                for cid, seq in self.open_calls.items() if cid not in self.answered]


def pair_tool_results(msgs: list[Message], p: CleaningPolicy) -> tuple[list[Message], list[Diagnostic]]:
    """Every tool result answers a call made earlier; results follow their call directly."""
    if "tool" not in map(_ROLE, msgs) and not any(map(_CALLS, msgs)):
        return msgs, []  # no tools in this conversation: nothing to pair
    pairing = _Pairing(p)
    out = [m for m in msgs if pairing.feed(m)]
    return out, pairing.diags + pairing.missing()


STAGES: tuple[Stage, ...] = (drop_empty, system_first, merge_consecutive, pair_tool_results)


def clean(conv: Conversation, policy: CleaningPolicy = CleaningPolicy()) -> tuple[Conversation, list[Diagnostic]]:
    msgs = list(conv.messages)
    diags: list[Diagnostic] = []
    for stage in STAGES:
        msgs, d = stage(msgs, policy)
        diags.extend(d)
    return conv.with_messages(tuple(msgs)), diags


# --- the next request of a session: clean only the new tail ----------------------------------------

@dataclass(frozen=True)
class CleanState:
    """What cleaning the previous request left: its input, its diagnostics, where its tool messages are."""

    messages: tuple[Message, ...]
    diagnostics: tuple[Diagnostic, ...]
    tool_idx: tuple[int, ...]          # indices of tool results and of assistant messages with tool calls


def _tool_indices(msgs: Sequence[Message], start: int) -> list[int]:
    return [i for i in range(start, len(msgs)) if msgs[i].role == "tool" or msgs[i].tool_calls]


def clean_next(conv: Conversation, policy: CleaningPolicy, prev: CleanState | None, k: int,
               head_known: bool = False) -> tuple[Conversation, list[Diagnostic], CleanState]:
    """clean(), reusing what cleaning the previous request found for its first `k` messages (the same
    objects as this request's). Only for policies that report without changing anything; otherwise,
    or when the previous run changed messages, everything is cleaned again. `head_known`: the caller
    knows the first `k` messages are the previous request's, the same objects (a session's intake
    kept them), so they are not compared (two copies of a long history per turn)."""
    msgs = conv.messages
    report_only = not (policy.merge_consecutive or policy.drop_empty or policy.system_first == "move")
    if prev is None or not report_only or k <= 0 or k > len(prev.messages) or \
            any(d.code == "orphan_tool_result" for d in prev.diagnostics) or \
            not (head_known or msgs[:k] == prev.messages[:k]):
        out, diags = clean(conv, policy)
        return out, diags, CleanState(msgs, tuple(diags), tuple(_tool_indices(msgs, 0)))
    head_seq = msgs[k].sequence if k < len(msgs) else float("inf")

    def carried(code: str) -> list[Diagnostic]:
        return [d for d in prev.diagnostics if d.code == code and d.seq is not None and d.seq < head_seq]

    tail = list(msgs[k:])
    _, empties = drop_empty(tail, policy)
    diags = carried("empty_message") + empties
    late = carried("system_not_first")
    if not late:
        first_late = next((i for i in range(max(k, 1), len(msgs)) if msgs[i].role == "system"), None)
        if first_late is not None:
            _, late = system_first([msgs[0], msgs[first_late]], policy)
    diags += late
    # Tool pairing: replay the head's tool messages only, then the tail as clean() would.
    head_tools = [i for i in prev.tool_idx if i < k]
    tools = head_tools + _tool_indices(msgs, k)
    pairing = _Pairing(policy)
    for i in head_tools:
        pairing.feed(msgs[i])
    # Right after a call or its results? Walk back over the results to what precedes them.
    j = k - 1
    while j >= 0 and msgs[j].role == "tool":
        j -= 1
    pairing.in_block = j >= 0 and msgs[j].role == "assistant" and bool(msgs[j].tool_calls)
    pairing.diags = carried("tool_result_separated")
    for m in tail:
        if not pairing.feed(m):  # an orphan dropped: the messages change, so clean() reports it all
            out, full = clean(conv, policy)
            return out, full, CleanState(msgs, tuple(full), tuple(tools))
    diags += pairing.diags + pairing.missing()
    return conv, diags, CleanState(msgs, tuple(diags), tuple(tools))
