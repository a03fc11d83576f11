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
    arguments: str  # the arguments' text exactly as the client sent it (JSON, or not: see `mapping`)
    # "function", or "custom" (a Responses / Chat Completions custom tool: `arguments` is its free-form input)
    kind: str = "function"
    # Whether `arguments` is a JSON object (intake checked it). When not — a reply cut at max_tokens,
    # "[1, 2]", a custom tool's free text — templates get {} in its place, as vLLM's chat
    # preprocessing gives them, and the text stays here as sent.
    is_object: bool = True

    def arguments_obj(self) -> Any:
        return json.loads(self.arguments) if self.is_object and self.arguments.strip() else {}

    def to_template(self) -> dict[str, Any]:
        # transformers' convention: templates receive arguments as a mapping.
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments_obj()}}

    def to_openai(self) -> dict[str, Any]:
        if self.kind == "custom":
            return {"id": self.id, "type": "custom", "custom": {"name": self.name, "input": self.arguments}}
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class MediaPart:
    """An image, audio clip or file in a message's content, as intake measured it (never its pixels).

    `digest` identifies the content: the SHA-256 of the decoded bytes, so one image sent as a data
    URL, as Anthropic base64 or as a Responses `input_image` is the same part; of the URL or file id
    when only that was sent (then the pixels are unknown, and so is their size: `size_assumed`)."""

    kind: str                   # image | audio | file
    digest: str
    where: str                  # the field it came from: messages[1].content[0]
    mime: str | None = None
    width: int | None = None
    height: int | None = None
    byte_size: int | None = None
    detail: str | None = None   # OpenAI's detail: low | high | auto
    source: str = "data"        # data (bytes sent) | url | file_id
    size_assumed: bool = False  # a URL with no size: the configured default size stands in
    name: str | None = None     # a file's name, as sent

    def to_template(self) -> dict[str, Any]:
        # transformers' convention for a part the processor fills in: {"type": "image"}.
        return {"type": self.kind}

    def key_parts(self) -> tuple[str, ...]:
        """What changes the prompt: the content, its size, and how it is to be seen."""
        return (self.kind, self.digest, str(self.width), str(self.height), self.detail or "")


# A message's content parts, in order: text as str, everything else as MediaPart.
Part = str | MediaPart


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
    # The content's parts in order, when it holds more than text (images, audio, files); then
    # `content` is its text parts joined with a newline. Empty: `content` is the whole content.
    parts: tuple[Part, ...] = ()

    @property
    def media(self) -> tuple[MediaPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, MediaPart)) if self.parts else ()

    def to_template(self, media: bool | str = False) -> dict[str, Any]:
        """The dict a chat template sees; keys with no value are left out, as transformers does.
        `media` True: the template renders media parts (a vision template): a message with parts gets
        its content as a list of parts, text as {"type": "text", "text": ...}, as transformers passes
        it. A string: the content is text, that string standing where each image is (joined with
        newlines, as text parts are). False: the text alone."""
        d: dict[str, Any] = {"role": self.role}
        if media is True and self.parts:
            d["content"] = [{"type": "text", "text": p} if isinstance(p, str) else p.to_template()
                            for p in self.parts]
        elif media and self.parts:
            d["content"] = "\n".join(p if isinstance(p, str) else str(media) for p in self.parts
                                     if isinstance(p, str) or p.kind == "image")
        elif self.content is not None:
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
     s_vars, s_parts) = (d[n].__set__ for n in ("role", "content", "sequence", "tool_calls", "tool_call_id", "name",
                                                 "reasoning", "cache_control", "template", "variables", "parts"))

    def __init__(self: Message, role: str, content: str | None, sequence: int, tool_calls: tuple[ToolCall, ...] = (),
                 tool_call_id: str | None = None, name: str | None = None, reasoning: str | None = None,
                 cache_control: bool = False, template: bool = False, variables: str | None = None,
                 parts: tuple[Part, ...] = ()) -> None:
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
        s_parts(self, parts)

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

    def to_template_messages(self, media: bool | str = False) -> list[dict[str, Any]]:
        return [m.to_template(media) for m in self.messages]

    @property
    def media(self) -> tuple[tuple[int, MediaPart], ...]:
        """Every media part, in order, with its message's sequence number."""
        return tuple((m.sequence, p) for m in self.messages if m.parts for p in m.media)

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
