"""Small helpers shared by the sample-session builders."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Session = dict[str, Any]
Builder = Callable[[Session, dict[str, Any], random.Random], Session]
T = TypeVar("T")

_SLOT = re.compile(r"\{(\w+)\}")
_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
FENCE = "```"


def fill(rng: random.Random, template: str, vocab: dict[str, list[Any]]) -> str:
    """Replace every ``{key}`` in *template* with a random choice from vocab[key]."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in vocab:
            return m.group(0)
        return str(rng.choice(vocab[key]))

    return _SLOT.sub(sub, template)


def pick(rng: random.Random, pool: Sequence[T], k: int) -> list[T]:
    """k distinct items of *pool* in random order (all of them when k is larger)."""
    k = max(0, min(k, len(pool)))
    return rng.sample(list(pool), k)


def random_id(rng: random.Random, prefix: str = "call_", n: int = 24) -> str:
    """A provider-style id: *prefix* and *n* random letters and digits."""
    return prefix + "".join(rng.choice(_ID_ALPHABET) for _ in range(n))


def args_json(obj: Any) -> str:
    """A tool call's arguments or a tool's result as the JSON text a request carries."""
    return json.dumps(obj, ensure_ascii=False)


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args_json(arguments)}}


def wrap_join(parts: Sequence[str]) -> str:
    return " ".join(p.strip() for p in parts if p.strip())


def code_block(lang: str, body: str) -> str:
    return f"{FENCE}{lang}\n{body.strip()}\n{FENCE}"


def substitute(node: Any, names: dict[str, str]) -> Any:
    """*node* with every string equal to a key of *names* replaced by its value (ids drawn at
    build time, written as placeholders such as ``$call0`` in the source)."""
    if isinstance(node, str):
        return names.get(node, node)
    if isinstance(node, list):
        return [substitute(v, names) for v in node]
    if isinstance(node, dict):
        return {k: substitute(v, names) for k, v in node.items()}
    return node
