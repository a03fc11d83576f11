"""The internal, immutable form every request is normalized into.

`Conversation` is what the later stages (cleaning, rendering, segmenting) read.
Messages keep `sequence`: their position in the original request, so a
diagnostic or a segment can point back at what the user wrote even after
cleaning merged or dropped messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # canonical JSON text as the client sent it

    def arguments_obj(self) -> Any:
        return json.loads(self.arguments)

    def to_template(self) -> dict[str, Any]:
        # transformers' convention: templates receive arguments as a mapping.
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments_obj()}}

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    content: str | None
    sequence: int
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None  # reasoning_content / thinking as the model produced it
    cache_control: bool = False   # Anthropic cache breakpoint on this message
    # The content is a prompt template (SPEC 2.3) to expand before the chat template renders;
    # `variables` is its template-local scope as canonical JSON (None: no local variables).
    template: bool = False
    variables: str | None = None

    def to_template(self) -> dict[str, Any]:
        """The dict a chat template sees; keys with no value are left out, as transformers does."""
        d: dict[str, Any] = {"role": self.role}
        if self.content is not None:
            d["content"] = self.content
        if self.tool_calls:
            d["tool_calls"] = [tc.to_template() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        if self.reasoning is not None:
            # transformers aliases reasoning the same way (templates read either name).
            d = {"thinking": self.reasoning, **d, "reasoning_content": self.reasoning}
        return d

    def to_openai(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        if self.reasoning is not None:
            d["reasoning_content"] = self.reasoning
        return d

    def text_fields(self) -> list[str]:
        """Every piece of user-supplied text the template may copy into the prompt."""
        out = [s for s in (self.content, self.reasoning, self.name) if s]
        for tc in self.tool_calls:
            out.extend((tc.name, tc.arguments))
        return out

    def with_(self, **changes: Any) -> "Message":
        return replace(self, **changes)


def _fast_init() -> None:
    """Replace Message's generated __init__ with one that sets the slots directly.

    A frozen dataclass assigns each field through object.__setattr__ (2.7 µs per message);
    calling the slot descriptors is 4x faster, and intake builds one Message per message
    of every request. Same signature, same defaults, still immutable afterwards.
    """
    d = Message.__dict__
    (s_role, s_content, s_seq, s_calls, s_call_id, s_name, s_reasoning, s_cache, s_template,
     s_vars) = (d[n].__set__ for n in ("role", "content", "sequence", "tool_calls", "tool_call_id", "name",
                                        "reasoning", "cache_control", "template", "variables"))

    def __init__(self: Message, role: str, content: str | None, sequence: int, tool_calls: tuple[ToolCall, ...] = (),
                 tool_call_id: str | None = None, name: str | None = None, reasoning: str | None = None,
                 cache_control: bool = False, template: bool = False, variables: str | None = None) -> None:
        s_role(self, role)
        s_content(self, content)
        s_seq(self, sequence)
        s_calls(self, tool_calls)
        s_call_id(self, tool_call_id)
        s_name(self, name)
        s_reasoning(self, reasoning)
        s_cache(self, cache_control)
        s_template(self, template)
        s_vars(self, variables)

    Message.__init__ = __init__  # type: ignore[method-assign]


_fast_init()


@dataclass(frozen=True, slots=True)
class ModelParams:
    """Sampling and output parameters carried with the request (budget uses max_tokens)."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    response_format: str | None = None  # JSON text of the response_format object
    extra: tuple[tuple[str, str], ...] = ()  # other fields, as sorted (key, JSON text)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for k in ("model", "max_tokens", "temperature", "top_p"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.stop:
            d["stop"] = list(self.stop)
        if self.response_format is not None:
            d["response_format"] = json.loads(self.response_format)
        for k, v in self.extra:
            d[k] = json.loads(v)
        return d


@dataclass(frozen=True, slots=True)
class Conversation:
    messages: tuple[Message, ...]
    # Each tool schema as JSON text in the OpenAI function form, keys in the order the
    # client sent them: templates render them with tojson, so the order is visible.
    tools: tuple[str, ...] = ()
    params: ModelParams = field(default_factory=ModelParams)
    source_format: str = "workbench"
    variables: str | None = None  # request-scope prompt-template variables, canonical JSON

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [json.loads(t) for t in self.tools]

    def to_template_messages(self) -> list[dict[str, Any]]:
        return [m.to_template() for m in self.messages]

    def to_openai(self) -> dict[str, Any]:
        d: dict[str, Any] = {"messages": [m.to_openai() for m in self.messages]}
        if self.tools:
            d["tools"] = self.tool_schemas()
        d.update(self.params.to_json())
        return d

    def request_variables(self) -> dict[str, Any]:
        return json.loads(self.variables) if self.variables else {}

    def with_messages(self, messages: tuple[Message, ...]) -> "Conversation":
        return replace(self, messages=messages)


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys: the stable form used in cache keys and tool schemas."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
