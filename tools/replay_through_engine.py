"""Replay a request log's conversations through a running `workbench serve-engine` (issue 32) and write
the log again with the usage the engine reported: the reconciliation's check against our own engine.

    python tools/replay_through_engine.py LOG... --engine http://127.0.0.1:8000 --out replay.jsonl
        [--conversations 3] [--client NAME]... [--max-calls 6] [--max-tokens 16] [--template qwen2.5]

LOG: request-log files or folders of them (tools/make_request_logs.py's DIR/logs). Each call is sent
to the chat route of its shape (OpenAI lines to /v1/chat/completions, Anthropic lines to
/v1/messages) as logged, with five changes a client of this engine would make: `model` is the
engine's, `max_tokens` is --max-tokens (a synthetic model's replies are random words: short ones
keep the replay quick), `temperature` 0, no streaming, and `return_token_ids` (vLLM's extension:
the response then carries the prompt's and the reply's token ids, which the log keeps). Each
earlier reply of the conversation is the one the engine gave, not the logged one: a client sends
back what the model answered, and only then is the conversation's next prompt one the engine
could have cached. So only conversations without tool calls are replayed (the engine cannot make
the logged calls); a call the engine refuses (a prompt over its window) ends its conversation
there, reported on stderr.

Conversations go one after another, each whole, in the order of their first call; calls within one
in timestamp order. Every line of OUT is what `workbench record` would have logged in front of the
engine: {"conversation_id", "timestamp" (when it was sent), "template" (--template: the one the
engine renders with), "client", "provider": "workbench-engine", "model", "request" (as sent),
"response" (the engine's answer, its usage as reported, with the reply's `token_ids`)}. The engine
serves every conversation from one radix cache, so a conversation's first call may read what an
earlier one left (the template's opening, a shared system prompt): the reconciliation simulates it
so (docs/logs.md section 8).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

PROVIDER = "workbench-engine"


def log_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        out += sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    return out


def conversations(files: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """Every conversation's lines, in timestamp order (file order breaks ties)."""
    by: dict[str, list[tuple[str, int, dict[str, Any]]]] = {}
    n = 0
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for text in fh:
                if not text.strip():
                    continue
                line = json.loads(text)
                if isinstance(line.get("conversation_id"), str) and isinstance(line.get("request"), dict):
                    by.setdefault(line["conversation_id"], []).append((line["timestamp"], n, line))
                    n += 1
    return {cid: [x[2] for x in sorted(v, key=lambda x: (x[0], x[1]))]
            for cid, v in sorted(by.items(), key=lambda kv: min((x[0], x[1]) for x in kv[1]))}


def is_anthropic(req: dict[str, Any]) -> bool:
    """An Anthropic Messages request: a top-level system, or max_tokens (required there) on a request
    that does not stream the OpenAI way (the generator's OpenAI requests stream)."""
    return "system" in req or ("max_tokens" in req and "stream" not in req)


def has_tools(lines: list[dict[str, Any]]) -> bool:
    for line in lines:
        req = line["request"]
        if req.get("tools"):
            return True
        for m in req.get("messages", []):
            if m.get("role") == "tool" or m.get("tool_calls"):
                return True
            content = m.get("content")
            if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
                                                 for b in content):
                return True
    return False


def _text_of(m: dict[str, Any]) -> str | None:
    """An assistant message's text (string content, or its text blocks joined), None for anything else."""
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list) and c and all(isinstance(b, dict) and b.get("type") == "text" for b in c):
        return "".join(b["text"] for b in c)
    return None


def _with_text(m: dict[str, Any], text: str) -> dict[str, Any]:
    out = dict(m)
    out["content"] = text if isinstance(m.get("content"), str) else [{"type": "text", "text": text}]
    return out


def reply_text(anthropic: bool, body: dict[str, Any]) -> str:
    if anthropic:
        return "".join(b.get("text", "") for b in body.get("content", []) if b.get("type") == "text")
    return body["choices"][0]["message"].get("content") or ""


def replay(lines: list[dict[str, Any]], client: httpx.Client, base: str, model: str, max_tokens: int,
           template: str) -> Iterator[dict[str, Any]]:
    """One conversation's calls through the engine, each earlier reply the engine's own."""
    replies: dict[str, str] = {}       # a logged reply's text -> the engine's reply in its place
    prev_msgs: list[dict[str, Any]] | None = None
    prev_reply: str | None = None
    for line in lines:
        req = copy.deepcopy(line["request"])
        msgs = req["messages"]
        if prev_msgs is not None and prev_reply is not None and len(msgs) > len(prev_msgs) \
                and msgs[len(prev_msgs)].get("role") == "assistant":
            logged = _text_of(msgs[len(prev_msgs)])
            if logged is not None:
                replies.setdefault(logged, prev_reply)
        prev_msgs = line["request"]["messages"]
        req["messages"] = [_with_text(m, replies[t]) if m.get("role") == "assistant"
                           and (t := _text_of(m)) is not None and t in replies else m for m in msgs]
        anthropic = is_anthropic(line["request"])
        # return_token_ids (vLLM's extension, docs/engine.md): the reply's ids as generated come back in
        # the response (`choices[0].token_ids`, or `token_ids` for Messages) and are logged with it: the
        # reply's text tokenized again need not give them back (a reply cut at the length limit), and
        # the engine holds the ids, so the reconciliation predicts the next turn from those.
        req.update(model=model, max_tokens=max_tokens, temperature=0, return_token_ids=True)
        req.pop("stream", None)
        req.pop("stream_options", None)
        sent_at = datetime.now(UTC)
        r = client.post(f"{base}/v1/messages" if anthropic else f"{base}/v1/chat/completions", json=req)
        if r.status_code != 200:
            print(f"{line['conversation_id']}: the engine answered {r.status_code} ({r.text[:200]}); "
                  "the conversation ends here", file=sys.stderr)
            return
        body = r.json()
        prev_reply = reply_text(anthropic, body)
        out = {"conversation_id": line["conversation_id"],
               "timestamp": sent_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "template": template}
        if "client" in line:
            out["client"] = line["client"]
        out.update(provider=PROVIDER, model=body.get("model", model), request=req, response=body)
        yield out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--engine", required=True, help="serve-engine's base URL (http://127.0.0.1:8000, with or "
                                                    "without /v1)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--conversations", type=int, default=3, help="conversations to replay (per --client where given)")
    ap.add_argument("--client", action="append", default=[], help="replay this client's conversations only "
                                                                   "(the lines' `client`; may be repeated)")
    ap.add_argument("--max-calls", type=int, default=6, help="calls per conversation, at most")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--template", default="qwen2.5", help="the template serve-engine renders with (its "
                                                         "--template; qwen2.5 unless told)")
    a = ap.parse_args(argv)
    base = a.engine.rstrip("/").removesuffix("/v1")
    with httpx.Client(timeout=120) as client:
        model = client.get(f"{base}/v1/models").json()["data"][0]["id"]
        replayable = [v for v in conversations(log_files(a.logs)).values() if not has_tools(v)]
        if a.client:
            picked = {id(v) for c in a.client
                      for v in [v for v in replayable if v[0].get("client") == c][:a.conversations]}
            chosen = [v for v in replayable if id(v) in picked]
        else:
            chosen = replayable[:a.conversations]
        written = 0
        with open(a.out, "w", encoding="utf-8", newline="\n") as out:
            for lines in chosen:
                for line in replay(lines[:a.max_calls], client, base, model, a.max_tokens, a.template):
                    out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
                    written += 1
    print(f"{written} calls of {len(chosen)} conversations replayed through {base} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
