"""Lists flattened into numbered attribute keys, put back together.

Span attributes are flat, so the older GenAI attributes and OpenInference's number their list
items in the key: `gen_ai.prompt.0.role`, `gen_ai.prompt.0.tool_calls.1.name`,
`llm.input_messages.2.message.contents.0.message_content.text`. `tree(attrs, prefix)` turns every key
under a prefix into nested dicts and lists. The numbers must run 0, 1, 2, ... with none missing:
a gap means items were lost (an SDK's attribute count limit drops whatever comes past it), and
a request with messages missing is not the request that was sent, so a gap is an error, as is
one number written two ways (`1` and `01`) or a number that is not one."""

from __future__ import annotations

from typing import Any

from .records import RecordError


def tree(attrs: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Every attribute under `prefix.` as a nested dict keyed by the remaining dotted parts."""
    root: dict[str, Any] = {}
    start = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(start):
            continue
        parts = key[len(start):].split(".")
        node = root
        for i, part in enumerate(parts):
            if i == len(parts) - 1:
                if isinstance(node.get(part), dict):
                    raise RecordError(f"{key}: set both as a value and as a prefix of other attributes")
                node[part] = value
            else:
                nxt = node.setdefault(part, {})
                if not isinstance(nxt, dict):
                    raise RecordError(f"{prefix}.{'.'.join(parts[:i + 1])}: set both as a value and as a prefix "
                                      "of other attributes")
                node = nxt
    return root


def items(node: Any, name: str) -> list[Any]:
    """The numbered children of `node` (a dict keyed "0", "1", ...) as a list, in order. `name`
    says where they are, for the error."""
    if node is None:
        return []
    if not isinstance(node, dict):
        raise RecordError(f"{name}: expected numbered items ({name}.0, {name}.1, ...), got a single value")
    numbered: dict[int, Any] = {}
    for key, value in node.items():
        if not key.isdigit() or not key.isascii():
            raise RecordError(f"{name}.{key}: {key!r} is not an item number")
        n = int(key)
        if n in numbered or key != str(n) and str(n) in node:
            raise RecordError(f"{name}.{key}: item {n} is given twice (as {str(n)!r} and {key!r})")
        if n > 100_000:
            raise RecordError(f"{name}.{key}: item number {n} is out of range")
        numbered[n] = value
    top = max(numbered, default=-1)
    missing = [n for n in range(top + 1) if n not in numbered]
    if missing:
        have = sorted(numbered)
        raise RecordError(f"{name}: items {_ranges(missing)} are missing (found {_ranges(have)}): "
                          "the list is incomplete, so the request is not the one that was sent "
                          "(an attribute count limit drops what comes past it)")
    return [numbered[n] for n in range(len(numbered))]


def _ranges(ns: list[int]) -> str:
    if len(ns) > 6:
        return ", ".join(map(str, ns[:5])) + f", ... ({len(ns)} in all)"
    return ", ".join(map(str, ns))
