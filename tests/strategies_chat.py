"""Template-aware conversation generators for the property tests, and the count of examples that
reached a property's check (issue 35).

A property "for every shipped template" checks something only for the conversations a template
renders. Drawn blind, up to 85 % of a template's examples were refused (Gemma 3: a tool round or a
later system message breaks its role alternation; Phi-4: a tool call without text; Mistral: a
system message after a reply) and the tests returned early for them. Here each template's limits are
written down once (`LIMITS`); the generators draw only shapes the template accepts, and
test_chat_strategies.py checks that every limit is a refusal the template really makes (a typed
`TemplateError`) and that no template refuses anything else the unrestricted generator draws.

Each property test counts its examples with `Reach` and asserts that at least 90 % of every
template's examples reached the check, so a template that refuses most inputs cannot hide.
"""

from __future__ import annotations

import copy
import string
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Literal

from hypothesis import strategies as st

from workbench.errors import TemplateError

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}}, "required": ["city"]}}}
CITIES = ["Paris", "Zürich", "東京", "São Paulo", "Oslo"]
# Words that make up the session generators' messages: multi-byte text, a newline, code, and a
# tag Qwen 3 reads as reasoning.
WORDS = st.lists(st.sampled_from(["hello", " world", " café", " 中文", " 😀", "\n", " x=1;", " über", " the", " ok.",
                                  "<think>", " 42"]), min_size=1, max_size=12).map("".join)
REACH_FLOOR = 0.9


@dataclass(frozen=True)
class Accepts:
    """What a template renders, where it differs from a plain chat with tool calls. Each field that
    is not its default is a refusal test_chat_strategies.py makes the template show."""
    tool_rounds: bool = True
    # The text of an assistant message that calls a tool: "none" refused (Mistral v3 / Tekken: content
    # or calls, not both), "required" (Phi-4 writes only text: a call without text is refused), or "any".
    call_text: Literal["any", "none", "required"] = "any"
    # Where a later system message (a note an application adds mid-session) may go: after a reply,
    # right after a user message (Mistral: not after an assistant or tool message), or nowhere
    # (Gemma 3: any later system message breaks its user/model alternation).
    system_note: Literal["after_reply", "after_user", "nowhere"] = "after_reply"
    empty_reply: bool = True       # Mistral: an assistant message of "" has neither content nor calls
    parallel_calls: bool = True    # Llama 3.1: one tool call per message
    long_call_ids: bool = True     # Mistral: call ids of exactly 9 letters or digits
    tools_need_user: bool = False  # Llama 3.1: tools go in the first user message, so one must exist

    def meet(self, other: Accepts) -> Accepts:
        """What both templates accept (one request sent to two configurations)."""
        texts = {self.call_text, other.call_text} - {"any"}
        order = ["after_reply", "after_user", "nowhere"]
        return Accepts(tool_rounds=self.tool_rounds and other.tool_rounds and len(texts) < 2,
                       call_text=texts.pop() if len(texts) == 1 else "any",  # type: ignore[arg-type]
                       system_note=max(self.system_note, other.system_note, key=order.index),
                       empty_reply=self.empty_reply and other.empty_reply,
                       parallel_calls=self.parallel_calls and other.parallel_calls,
                       long_call_ids=self.long_call_ids and other.long_call_ids,
                       tools_need_user=self.tools_need_user or other.tools_need_user)


_MISTRAL = Accepts(system_note="after_user", empty_reply=False, long_call_ids=False)
LIMITS: dict[str, Accepts] = {
    "gemma3": Accepts(tool_rounds=False, system_note="nowhere"),
    "phi4": Accepts(call_text="required"),
    "mistral-v3": replace(_MISTRAL, call_text="none"),
    "mistral-tekken": replace(_MISTRAL, call_text="none"),
    "mistral-v7": _MISTRAL,
    "llama3.1": Accepts(parallel_calls=False, tools_need_user=True),
}
ANYTHING = Accepts()


def accepts(template: str) -> Accepts:
    return LIMITS.get(template, ANYTHING)


def refused_by_template(exc: BaseException) -> bool:
    """The template itself refused the conversation (its raise_exception), not a limit or a policy."""
    return type(exc) is TemplateError and "the template raised:" in str(exc)


# ------------------------------------------------------------------------------------ pieces
def call(ids: list[str], city: str = "Oslo", text: str | None = None) -> dict:
    """An assistant message calling the weather tool once per id."""
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'}}
        for i in ids]}


def tool_round(acc: Accepts, cid: str, result: str, city: str = "Oslo", text: str = "Let me check.") -> list[dict]:
    """An assistant's call of the weather tool and its result, as the template accepts it."""
    return [call([cid], city, text if acc.call_text == "required" else None),
            {"role": "tool", "tool_call_id": cid, "content": result}]


def add_system_note(acc: Accepts, msgs: list[dict], note: str) -> None:
    """A system message added mid-conversation, where the template accepts one."""
    if acc.system_note == "after_reply":
        msgs.append({"role": "system", "content": note})
    elif acc.system_note == "after_user":
        last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        msgs.insert(last_user + 1, {"role": "system", "content": note})


def reply_text(acc: Accepts, text: str) -> str:
    return text if text or acc.empty_reply else " "   # whitespace is content to Mistral; "" is not


# ------------------------------------------------------------------------------------ one request
@st.composite
def conversation(draw: st.DrawFn, template: str, content: st.SearchStrategy[str], *,
                 turns: tuple[int, int] = (1, 4), tool_odds: int = 2, end: Literal["user", "either"] = "either",
                 ) -> dict:
    """One request: a system prompt or not, turns of user / tool round / reply, the weather tool's
    schema when tool rounds may come (1 in `tool_odds` turns has one)."""
    acc = accepts(template)
    msgs: list[dict] = []
    use_tools = draw(st.booleans())
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(content)})
    n = draw(st.integers(*turns))
    for i in range(n):
        msgs.append({"role": "user", "content": draw(content)})
        if use_tools and acc.tool_rounds and draw(st.integers(0, tool_odds - 1)) == 0:
            # ids of 9 letters and digits, as Mistral requires
            msgs += tool_round(acc, f"call{i:05d}", draw(content), draw(st.sampled_from(CITIES)))
        if i < n - 1 or (end == "either" and draw(st.booleans())):
            msgs.append({"role": "assistant", "content": reply_text(acc, draw(content))})
    return {"messages": msgs, **({"tools": [WEATHER]} if use_tools else {})}


# ------------------------------------------------------------------------------------ sessions
@st.composite
def growing_session(draw: st.DrawFn, template: str, *, turns: tuple[int, int] = (3, 7), tools: bool = True,
                    reasoning_odds: int = 4, edit_odds: int = 6) -> dict:
    """A growing conversation as the requests a client sends: replies with reasoning now and then, a
    system note in the history, an earlier message edited. {"steps": [messages...], "tools": ...}."""
    acc = accepts(template)
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(WORDS)})
    use_tools = tools and draw(st.booleans())
    steps, calls = [], 0
    for _ in range(draw(st.integers(*turns))):
        msgs.append({"role": "user", "content": draw(WORDS)})
        steps.append(copy.deepcopy(msgs))
        if use_tools and acc.tool_rounds and draw(st.integers(0, 2)) == 0:
            msgs += tool_round(acc, f"call{calls:05d}", draw(WORDS))
            calls += 1
            steps.append(copy.deepcopy(msgs))
        reply = {"role": "assistant", "content": draw(WORDS)}
        if draw(st.integers(0, reasoning_odds - 1)) == 0:
            reply["reasoning_content"] = draw(WORDS)
        msgs.append(reply)
        edit = draw(st.integers(0, edit_odds - 1))
        if edit == 1:   # a system message in the history (DeepSeek gathers them all at the start)
            add_system_note(acc, msgs, draw(WORDS))
        if edit == 0 and len(msgs) > 2:   # the client edits an earlier message
            i = draw(st.integers(0, len(msgs) - 1))
            if msgs[i].get("content"):
                msgs[i] = {**msgs[i], "content": msgs[i]["content"] + " (edited)"}
    steps.append(copy.deepcopy(msgs) + [{"role": "user", "content": "last"}])
    return {"steps": steps, "tools": [WEATHER] if use_tools else None}


@st.composite
def overflowing_session(draw: st.DrawFn, template: str, system: bool = True) -> dict:
    """The requests of a session that outgrows its window: new turns, edits of any message, the last
    turn taken back, now and then a tool round; a system prompt or not (never with `system=False`).
    {"steps", "tools", "fill"}."""
    acc = accepts(template)
    text = st.lists(WORDS, min_size=1, max_size=4).map(" ".join)
    msgs: list[dict] = []
    if draw(st.booleans()) and system:
        msgs.append({"role": "system", "content": draw(WORDS)})
    use_tools = draw(st.booleans())
    steps, calls = [], 0
    for _ in range(draw(st.integers(6, 16))):
        msgs.append({"role": "user", "content": draw(text)})
        steps.append(copy.deepcopy(msgs))
        if use_tools and acc.tool_rounds and draw(st.integers(0, 3)) == 0:
            msgs += tool_round(acc, f"call{calls:05d}", draw(WORDS))
            calls += 1
            steps.append(copy.deepcopy(msgs))
        msgs.append({"role": "assistant", "content": draw(text)})
        what = draw(st.integers(0, 7))
        if what == 0:      # an edit anywhere (a dropped message, a kept one, the system prompt)
            i = draw(st.integers(0, len(msgs) - 1))
            if msgs[i].get("content"):
                msgs[i] = {**msgs[i], "content": msgs[i]["content"] + draw(WORDS)}
        elif what == 1 and len(msgs) > 4:   # the last turn taken back
            while msgs and msgs[-1]["role"] != "user":
                msgs.pop()
            if msgs and len(msgs) > 2:
                msgs.pop()
            if msgs[-1]["role"] == "user":   # too short to take the user message back: answer it (alternation)
                msgs.append({"role": "assistant", "content": draw(text)})
        elif what == 3:    # a system message in the history (a note an application adds)
            add_system_note(acc, msgs, draw(WORDS))
        elif what == 2:    # the last message edited, twice in a row (a user typing)
            steps.append(copy.deepcopy(msgs) + [{"role": "user", "content": draw(WORDS)}])
    steps.append(copy.deepcopy(msgs) + [{"role": "user", "content": "last"}])
    # the window is the test's to size (a share `fill` of what the last request could drop)
    return {"steps": steps, "tools": [WEATHER] if use_tools else None, "fill": draw(st.floats(0.1, 0.8))}


# ------------------------------------------------------------------------------------ anything
ID_CHARS = string.ascii_letters + string.digits


@st.composite
def unrestricted(draw: st.DrawFn) -> dict:
    """One request drawn without regard to any template's limits: tool rounds with or without text
    beside the call, parallel calls, long OpenAI-style ids, empty replies, system notes after a reply
    or after a user message. What a template refuses of these must be in its `LIMITS`."""
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(WORDS)})
    for i in range(draw(st.integers(1, 3))):
        msgs.append({"role": "user", "content": draw(WORDS)})
        if draw(st.integers(0, 3)) == 0:
            long_ids = draw(st.booleans())
            # distinct ids: the intake refuses two open calls with one id
            ids = [("call_" + "".join(draw(st.lists(st.sampled_from(ID_CHARS), min_size=23, max_size=23))) + str(k)
                    if long_ids else f"call{i}{k}000") for k in range(draw(st.integers(1, 2)))]
            msgs.append(call(ids, text=draw(st.sampled_from([None, "Let me check."]))))
            msgs += [{"role": "tool", "tool_call_id": x, "content": draw(WORDS)} for x in ids]
        note = draw(st.sampled_from([None] * 6 + ["after_user", "after_reply"]))   # a note in 1 turn of 4
        if note == "after_user":
            add_system_note(Accepts(system_note="after_user"), msgs, draw(WORDS))
        msgs.append({"role": "assistant", "content": draw(st.sampled_from(["Sure.", "Sure.", "Sure.", ""]))})
        if note == "after_reply":
            msgs.append({"role": "system", "content": draw(WORDS)})
    if draw(st.booleans()):
        msgs.append({"role": "user", "content": draw(WORDS)})
    return {"messages": msgs, "tools": [WEATHER]}


# The refusal each limit stands for, as the template words it.
WHY = {"tool_rounds": "roles must alternate|Invalid content type",
       "system_note": r"roles must alternate|Unexpected role 'system'",
       "call_text": r"renders only text content|either content or tool_calls|tool calls and content",
       "empty_reply": r"neither content nor tool calls|either content or tool_calls",
       "parallel_calls": "only supports single tool-calls", "long_call_ids": "must be 9 letters or digits",
       "tools_need_user": "no first user message"}


def limits_crossed(template: str, request: dict) -> set[str]:
    """The limits of `template` that `request` crosses (the keys of WHY)."""
    acc, crossed = accepts(template), set()
    msgs = request["messages"]
    for i, m in enumerate(msgs):
        calls = m.get("tool_calls") or []
        if (calls or m["role"] == "tool") and not acc.tool_rounds:
            crossed.add("tool_rounds")
        if calls and acc.call_text != "any" and bool(m.get("content")) != (acc.call_text == "required"):
            crossed.add("call_text")
        if len(calls) > 1 and not acc.parallel_calls:
            crossed.add("parallel_calls")
        ids = [c["id"] for c in calls] + ([m["tool_call_id"]] if m["role"] == "tool" else [])
        if not acc.long_call_ids and any(len(x) != 9 or not x.isalnum() for x in ids):
            crossed.add("long_call_ids")
        if m["role"] == "assistant" and m.get("content") == "" and not calls and not acc.empty_reply:
            crossed.add("empty_reply")
        # Gemma takes only messages[0] as its system prompt; Mistral refuses one after a reply or a result.
        if m["role"] == "system" and i > 0 and (
                acc.system_note == "nowhere" or
                acc.system_note == "after_user" and msgs[i - 1]["role"] not in ("user", "system")):
            crossed.add("system_note")
    if acc.tools_need_user and request.get("tools") and not any(m["role"] == "user" for m in msgs):
        crossed.add("tools_need_user")
    return crossed


# ------------------------------------------------------------------------------------ reach
class Reach:
    """How many of a property's examples reached its check, per template.

    `seen(t)` when an example starts, `hit(t)` when it got to the property; `check()` prints one line
    per template and asserts the floor: at least 90 % of every template's examples."""

    def __init__(self, test: str) -> None:
        self.test = test
        self.examples: Counter[str] = Counter()
        self.reached: Counter[str] = Counter()

    def seen(self, template: str) -> None:
        self.examples[template] += 1

    def hit(self, template: str) -> None:
        self.reached[template] += 1

    def line(self, template: str) -> str:
        n, k = self.examples[template], self.reached[template]
        return f"reach {self.test}[{template}]: {k}/{n} = {100 * k / max(n, 1):.0f} %"

    def check(self, templates: list[str], floor: float = REACH_FLOOR) -> None:
        lines = [self.line(t) for t in templates]
        print("\n" + "\n".join(lines))
        low = [ln for t, ln in zip(templates, lines)
               if not self.examples[t] or self.reached[t] < floor * self.examples[t]]
        assert not low, f"under {floor:.0%} of the examples reached the check: {low}"


def ids_cut_to_nine(request: dict[str, Any]) -> dict[str, Any]:
    """A request's tool call ids cut to their last 9 characters, as vLLM does for Mistral models
    (vllm/transformers_utils/tokenizers/mistral.py, truncate_tool_call_ids) before the template runs:
    Mistral's templates accept ids of exactly 9 letters or digits, OpenAI's are "call_" + 24."""
    req = copy.deepcopy(request)
    for m in req["messages"]:
        for c in m.get("tool_calls") or []:
            c["id"] = c["id"][-9:]
        if m.get("tool_call_id"):
            m["tool_call_id"] = m["tool_call_id"][-9:]
    return req
