"""Test oracles: official chat templates and vocab test vectors, extracted at test time, and the
conversion of a raw request into what an official chat template is handed.

The llama-cpp-python source distribution vendors llama.cpp, which carries 70
chat templates copied from the models' own repositories and vocab-only GGUF
tokenizers with test vectors. We download it once into `.oracles/` (or
$WORKBENCH_ORACLES) and extract just those folders. Nothing from it is shipped.

`hf_chat` / `anthropic_to_openai` build the official side of the exactness tests straight from the
raw request, with no workbench code (intake, cleaning, Conversation) in the way: an intake or cleaning
bug then shows as a difference instead of reaching both sides.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

SDIST = "llama-cpp-python==0.3.36"
ROOT = Path(os.environ.get("WORKBENCH_ORACLES", Path(__file__).resolve().parent.parent / ".oracles"))


def ensure() -> Path:
    """Download and extract the oracle files if they are not there yet; return the folder."""
    marker = ROOT / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
    if marker.exists():
        return ROOT
    ROOT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        SDIST, "-d", tmp], check=True)
        archive = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                parts = member.name.split("/")
                if "models" not in parts or not member.isfile():
                    continue
                tail = parts[parts.index("models") + 1:]
                if tail[0] == "templates" and len(tail) == 2:
                    dest = ROOT / "templates" / tail[1]
                elif len(tail) == 1 and tail[0].startswith("ggml-vocab-"):
                    dest = ROOT / "vocab" / tail[0]
                else:
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None
                dest.write_bytes(src.read())
    return ROOT


@cache
def official_template(filename: str) -> str:
    return (ensure() / "templates" / filename).read_text(encoding="utf-8")


def vocab_vectors(name: str) -> list[tuple[str, list[int]]]:
    """(input text, expected ids) pairs of ggml-vocab-NAME.gguf.inp/.out."""
    d = ensure() / "vocab"
    # Inputs are separated by a marker line; expected ids come one line per input.
    inp = (d / f"ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    out = (d / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")[:len(inp)]
    assert len(inp) == len(out), f"{name}: {len(inp)} inputs, {len(out)} outputs"
    return [(text, [int(x) for x in ids.split()]) for text, ids in zip(inp, out)]


# ----------------------------------------------------------------------------- raw requests
def hf_chat(request: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, bool]:
    """A raw OpenAI Chat Completions request as (messages, tools, add_generation_prompt) for a Hugging
    Face chat template, the way transformers' `apply_chat_template` hands them over. Step by step:

    1. Every message is copied with its keys as sent (role names, content, tool_calls, tool_call_id,
       name, reasoning_content), less the keys whose value is null: `apply_chat_template` drops them
       before rendering (utils/chat_template_utils.py `_normalize_chat_messages`: templates handle a
       missing key, and many print "None" or fail on a null one). So an assistant turn with only tool
       calls reaches the template without `content`.
    2. A tool call's `function.arguments`, a JSON string in the OpenAI format, becomes the object it
       encodes ({} when empty): chat templates take arguments as a mapping (transformers' chat
       template guide), and vLLM's chat server parses them the same way before rendering
       (vllm/entrypoints/chat_utils.py `_postprocess_messages`).
    3. Nothing else changes. Reasoning stays under the name it was sent with: `render_jinja_template`
       itself copies it to `thinking` and `reasoning_content`, the names templates read.
    4. `tools` as sent (each {"type": "function", "function": {...}}); None when absent or empty.
    5. add_generation_prompt unless the last message is the assistant's: a conversation that ends
       with an assistant turn is rendered as written, that turn closed.
    """
    messages = []
    for sent in request["messages"]:
        m = {k: copy.deepcopy(v) for k, v in sent.items() if v is not None}
        for call in m.get("tool_calls") or []:
            args = call["function"].get("arguments")
            if isinstance(args, str):
                call["function"]["arguments"] = json.loads(args) if args.strip() else {}
        messages.append(m)
    tools = copy.deepcopy(request.get("tools")) or None
    return messages, tools, not messages or messages[-1]["role"] != "assistant"


def anthropic_to_openai(request: dict[str, Any]) -> dict[str, Any]:
    """A raw Anthropic Messages request as the OpenAI Chat Completions request it stands for, by
    the Messages API's own definitions; only the block types below are defined here (anything
    else is an error, not a guess):

    - `system` (a string, or text blocks whose texts are joined) is a first system message;
    - a message whose content is a string keeps it;
    - text blocks are the message's content, their texts joined with "\n";
    - `tool_use` blocks of an assistant message are its tool_calls: id, name, and `input` as the
      JSON arguments string (content null when the message has no text);
    - each `tool_result` block of a user message is a tool message, in order (tool_use_id →
      tool_call_id; its content a string, or text blocks joined); the message's text blocks, if
      any, form a user message after them;
    - `tools`: name, description and `input_schema` as the function's parameters.
    `cache_control` marks change nothing in a prompt and are left out.
    """
    def text_of(blocks: Any) -> str:
        if isinstance(blocks, str):
            return blocks
        assert all(b["type"] == "text" for b in blocks), blocks
        return "\n".join(b["text"] for b in blocks)

    out: list[dict[str, Any]] = []
    if request.get("system"):
        out.append({"role": "system", "content": text_of(request["system"])})
    for m in request["messages"]:
        if isinstance(m["content"], str):
            out.append({"role": m["role"], "content": m["content"]})
            continue
        kinds = {b["type"] for b in m["content"]}
        assert kinds <= {"text", "tool_use", "tool_result"}, kinds
        texts = [b for b in m["content"] if b["type"] == "text"]
        if m["role"] == "assistant":
            assert "tool_result" not in kinds
            msg: dict[str, Any] = {"role": "assistant", "content": text_of(texts) if texts else None}
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"], "arguments": json.dumps(b["input"], ensure_ascii=False)}}
                     for b in m["content"] if b["type"] == "tool_use"]
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        assert m["role"] == "user" and "tool_use" not in kinds
        out += [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": text_of(b["content"])}
                for b in m["content"] if b["type"] == "tool_result"]
        if texts or "tool_result" not in kinds:
            out.append({"role": "user", "content": text_of(texts)})
    req: dict[str, Any] = {"messages": out}
    if request.get("tools"):
        req["tools"] = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                          "parameters": t["input_schema"]}}
                        for t in request["tools"]]
    return req


if __name__ == "__main__":
    print(ensure())
