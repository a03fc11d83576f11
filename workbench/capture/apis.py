"""The three chat APIs the recorder knows, read from what passes through it: which API a call is
(by its path), the reply each returns (the non-streaming response body), and the conversation
each call continues, in a form that compares across the shapes a client sends back.

A client sends the model's earlier reply back in its next request, but rarely byte for byte: the
SDKs add or drop nulls (`refusal: null`, `annotations: []`), reorder keys, or send a string where
the reply held text parts. Prefix chaining (conversations.py) therefore compares messages by what
a template renders from them: role, text, tool calls (id, name, arguments) and tool results."""

from __future__ import annotations

import json
from typing import Any

# Path suffix -> API. A gateway may mount them under any prefix (/v1, /openai/v1, /api/...).
APIS = {"/chat/completions": "chat.completions", "/responses": "responses", "/messages": "messages"}
# Provider by upstream host: what `provider` says in a line when --provider is not given.
HOSTS = {"api.openai.com": "openai", "api.anthropic.com": "anthropic", "api.deepseek.com": "deepseek",
         "api.mistral.ai": "mistral", "api.groq.com": "groq", "api.together.xyz": "together",
         "openrouter.ai": "openrouter", "api.fireworks.ai": "fireworks", "api.x.ai": "xai",
         "generativelanguage.googleapis.com": "google"}


def api_of(method: str, path: str) -> str | None:
    """The API a call is, or None for anything else (models lists, files, embeddings: passed through)."""
    if method != "POST":
        return None
    path = path.rstrip("/")
    return next((api for suffix, api in APIS.items() if path.endswith(suffix)), None)


def request_problem(api: str, body: Any) -> str | None:
    """Why a JSON body is not a request of `api` (None: it is one)."""
    if not isinstance(body, dict):
        return f"the body is JSON but not an object ({type(body).__name__})"
    if api == "responses":
        if "input" not in body and "previous_response_id" not in body and "prompt" not in body:
            return "a Responses request has 'input'"
        return None
    if not isinstance(body.get("messages"), list):
        return f"a {api} request has a 'messages' list"
    return None


# ------------------------------------------------------------------ canonical messages
Canon = tuple[Any, ...]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
            elif isinstance(p, dict) and p.get("type") not in (None, "text", "input_text", "output_text"):
                out.append(f"<{p.get('type')}:{_digestable(p)}>")
        return "".join(out)
    return "" if content is None else json.dumps(content, sort_keys=True)


def _digestable(v: Any) -> str:
    return json.dumps(v, sort_keys=True, ensure_ascii=False)[:4096]


def _args(a: Any) -> str:
    """Tool-call arguments as canonical JSON when they parse (a client may re-serialise them)."""
    if isinstance(a, str):
        try:
            return json.dumps(json.loads(a), sort_keys=True)
        except ValueError:
            return a
    return json.dumps(a, sort_keys=True)


def _chat_message(m: Any) -> list[Canon]:
    if not isinstance(m, dict):
        return [("?", _digestable(m))]
    role = m.get("role")
    fns = [(c.get("id"), c.get("function") or {}) for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    calls = tuple((cid, fn.get("name"), _args(fn.get("arguments"))) for cid, fn in fns if isinstance(fn, dict))
    return [(role, _text(m.get("content")), calls, m.get("tool_call_id"))]


def _anthropic_message(m: Any) -> list[Canon]:
    if not isinstance(m, dict):
        return [("?", _digestable(m))]
    c = m.get("content")
    if isinstance(c, str):          # the same as one text block
        return [(m.get("role"), (("text", c),))]
    blocks: list[Any] = []
    for b in c if isinstance(c, list) else []:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            blocks.append(("text", b.get("text")))
        elif t == "tool_use":
            blocks.append(("tool_use", b.get("id"), b.get("name"), _args(b.get("input"))))
        elif t == "tool_result":
            blocks.append(("tool_result", b.get("tool_use_id"), _text(b.get("content"))))
        elif t in ("thinking", "redacted_thinking"):
            continue          # clients may drop or keep them; what the model wrote is in the text
        else:
            blocks.append((t, _digestable(b)))
    return [(m.get("role"), tuple(blocks))]


def _responses_item(it: Any) -> list[Canon]:
    if isinstance(it, str):
        return [("user", it)]
    if not isinstance(it, dict):
        return [("?", _digestable(it))]
    t = it.get("type", "message")
    if t == "message":
        return [(it.get("role"), _text(it.get("content")))]
    if t == "function_call":
        return [("function_call", it.get("call_id"), it.get("name"), _args(it.get("arguments")))]
    if t == "function_call_output":
        return [("function_call_output", it.get("call_id"), _text(it.get("output")))]
    if t == "reasoning":
        return []             # stateless clients may leave reasoning items out of the next request
    return [(t, _digestable({k: v for k, v in it.items() if k not in ("id", "status")}))]


def request_messages(api: str, body: dict[str, Any]) -> list[Canon]:
    """The conversation a request sends, canonical (system prompts and instructions left out: a
    history whose system prompt is rewritten each call is still one conversation)."""
    if api == "responses":
        inp = body.get("input")
        items = [inp] if isinstance(inp, str) else inp if isinstance(inp, list) else []
        return [c for it in items for c in _responses_item(it)]
    msgs = body.get("messages") or []
    if api == "messages":
        return [c for m in msgs for c in _anthropic_message(m)]
    return [c for m in msgs if not (isinstance(m, dict) and m.get("role") in ("system", "developer"))
            for c in _chat_message(m)]


def reply_messages(api: str, response: Any) -> list[Canon]:
    """The reply a response holds, canonical as the next request sends it back."""
    if not isinstance(response, dict):
        return []
    if api == "responses":
        return [c for it in response.get("output") or [] for c in _responses_item(it)]
    if api == "messages":
        return _anthropic_message({"role": "assistant", "content": response.get("content")})
    choices = response.get("choices") or []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    return _chat_message(first.get("message")) if first.get("message") is not None else []


def response_model(response: Any, request: dict[str, Any]) -> str | None:
    m = response.get("model") if isinstance(response, dict) else None
    m = m if isinstance(m, str) and m else request.get("model")
    return m if isinstance(m, str) and m else None
