"""The bundle's schema: a JSON Schema (written beside workbench.yaml for other tools) and a checker
with no dependency, so the loader needs only the core install. Errors name the file and the field."""

from __future__ import annotations

import math
from typing import Any

from ..errors import BundleError
from ..injection import ASSISTANT_POLICIES, POLICIES

# 2: the seal (seal.py) and the per-source injection policies. A reader of version 1 would ignore
# both and assemble differently, so it refuses a version 2 bundle as newer; this reader refuses a
# version 1 bundle, which carries no seal, and asks for a new export.
SCHEMA_VERSION = 2
FIRST_SEALED_VERSION = 2

_STR = {"type": "string"}
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}

# Every number a bundle holds has a range: a value out of it is an error naming the field, never an
# OverflowError where it is used (a TTL of 1e308 seconds became an infinite number of
# milliseconds), a negative size, or a NaN that compares false with everything. The bounds are far
# past any real setting; a value beyond them was not written by the exporter.
MAX_COUNT = 2**53              # counts, sizes and limits: past it a JSON number is no longer exact
MAX_TOKENS = 10**9             # a context window or a reserve: past every model's window
MAX_SECONDS = 10 * 365 * 86_400   # a time to live: ten years
MAX_DEADLINE_S = 86_400.0      # a time limit on one render or expansion: a day
_WINDOW = {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_TOKENS}
_RESERVE = {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_TOKENS}
_POSITIVE = {"type": "integer", "minimum": 1, "maximum": MAX_COUNT}
_BYTES = {"type": "integer", "minimum": 0, "maximum": 1 << 40}          # a cache's size: under 1 TiB
_VERSION = {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
_TTL = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SECONDS}
_DEADLINE = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_DEADLINE_S}
_SHARE = {"type": "number", "minimum": 0, "maximum": 1}
_SIMILARITY = {"type": "number", "minimum": -1, "maximum": 1}
# A policy's fields come from its dataclass, and a field added there reaches bundles before this
# schema names it: any number these sections hold, named here or not, is at least 0 and exact.
_ANY_LIMIT = {"minimum": 0, "maximum": MAX_COUNT}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Prompt Workbench export bundle (workbench.yaml)",
    "type": "object",
    "required": ["schema_version", "template", "tokenizer", "policies", "budget", "variables", "cache", "goldens",
                 "seal"],
    "properties": {
        "schema_version": {"type": "integer", "minimum": FIRST_SEALED_VERSION, "maximum": SCHEMA_VERSION},
        "created_by": _STR,
        "template": {"type": "object", "required": ["name", "file", "sha256"], "properties": {
            "name": _STR, "file": _STR, "sha256": _SHA256,
            "description": _STR, "tokenizer": {"type": ["string", "null"]}, "context_window": _WINDOW,
            "reserve": _RESERVE, "bos_token": {"type": ["string", "null"]},
            "eos_token": {"type": ["string", "null"]}, "kwargs": {"type": "object"}, "origin": _STR}},
        "tokenizer": {"type": "object", "required": ["name", "version"],
                      "properties": {"name": _STR, "version": _STR}},
        "policies": {"type": "object", "required": ["injection", "cleaning", "intake", "render_limits"],
                     "properties": {"injection": {"enum": list(POLICIES)},
                                    "tool_injection": {"enum": list(POLICIES)},
                                    "assistant_injection": {"enum": list(ASSISTANT_POLICIES)},
                                    "cleaning": {"type": "object"},
                                    "intake": {"type": "object", "additionalProperties": _POSITIVE},
                                    "render_limits": {"type": "object", "properties": {
                                        "max_output_chars": _POSITIVE, "timeout_s": _DEADLINE,
                                        "max_expansion": {"type": ["number", "null"], "exclusiveMinimum": 0,
                                                          "maximum": MAX_COUNT},
                                        "isolate": {"type": "boolean"}, "max_worker_bytes": _POSITIVE},
                                        "additionalProperties": _ANY_LIMIT},
                                    "template_kwargs": {"type": "object"},
                                    "vision": {"type": ["object", "null"], "additionalProperties": _ANY_LIMIT}}},
        "budget": {"type": "object", "required": ["truncation"],
                   "properties": {"context_window": _WINDOW, "reserve": _RESERVE,
                                  "truncation": {"type": "object", "properties": {
                                      "low_water": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                                      "summary_reserve": {"type": "integer", "minimum": 0, "maximum": MAX_TOKENS}},
                                      "additionalProperties": _ANY_LIMIT}}},
        "variables": {"type": "object", "properties": {"constants": {"type": "object"},
                                                        "declarations": {"type": "object"},
                                                        "builtins": {"type": "boolean"},
                                                        "limits": {"type": "object", "properties": {
                                                            "max_loop_iterations": _POSITIVE, "max_steps": _POSITIVE,
                                                            "max_collection_items": _POSITIVE,
                                                            "max_output_chars": _POSITIVE,
                                                            "max_seconds": _DEADLINE},
                                                            "additionalProperties": _ANY_LIMIT}}},
        "cache": {"type": "object", "required": ["key_recipe", "redis"], "properties": {
            "key_recipe": {"type": "object", "required": ["version"], "properties": {"version": _VERSION}},
            "local_bytes": _BYTES,
            "redis": {"type": "object", "required": ["url_env", "required"],
                      "properties": {"url_env": _STR, "required": {"type": "boolean"},
                                     "ttl_s": _TTL, "namespace": _STR}}}},
        "providers": {"type": "object"},
        "semantic_cache": {"type": ["object", "null"],
                           "required": ["rules_version", "embedder", "window", "thresholds"],
                           "properties": {"rules_version": _VERSION, "embedder": _STR,
                                          "window": {"type": "integer", "minimum": 0, "maximum": 10_000},
                                          "current_weight": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                                          "min_coverage": _SHARE, "min_coverage_cjk": _SHARE,
                                          "ttl_s": _TTL, "short_ttl_s": _TTL,
                                          "scope": _STR,
                                          "thresholds": {"type": "object", "required": ["high", "low"],
                                                         "properties": {"high": _SIMILARITY,
                                                                        "low": _SIMILARITY}}}},
        "seal": {"type": "object", "required": ["version", "sha256", "fields"],
                 "properties": {"version": {"enum": [1, 2]}, "sha256": _SHA256, "fields": {"type": "object"}}},
        "goldens": {"type": "array", "items": {
            "type": "object", "required": ["session", "file"],
            "properties": {"session": _STR, "file": _STR,
                           "turns": {"type": "array", "items": _POSITIVE},
                           # a SHA-256 per field of the golden file (seal.py): its requests, ids and fixes
                           "seal": {"type": "object", "additionalProperties": _SHA256},
                           "fixes": {"type": "array", "items": _STR}, "projection": {"type": "boolean"}}}},
    },
}

_TYPES = {"object": dict, "string": str, "boolean": bool, "array": list, "number": (int, float), "integer": int,
          "null": type(None)}


def check(data: Any, where: str = "workbench.yaml") -> None:
    """Validate against SCHEMA (the subset of JSON Schema it uses); the first problem raises."""
    if (isinstance(data, dict) and isinstance(data.get("schema_version"), int)
            and data["schema_version"] > SCHEMA_VERSION):
        raise BundleError(f"{where}: schema_version {data['schema_version']} is newer than this workbench reads "
                          f"({SCHEMA_VERSION})", file=where, field="schema_version",
                          hint="upgrade prompt-workbench where the bundle is loaded")
    if isinstance(data, dict) and isinstance(data.get("schema_version"), int) \
            and data["schema_version"] < FIRST_SEALED_VERSION:
        raise BundleError(f"{where}: schema_version {data['schema_version']} was exported before bundles were "
                          "sealed: its policies cannot be checked", file=where, field="schema_version",
                          hint="export it again with this version of prompt-workbench")
    if isinstance(data, dict) and "seal" not in data:
        raise BundleError(f"{where}: the bundle has no seal (it was removed)", file=where, field="seal",
                          hint="export it again from the workbench")
    _check(data, SCHEMA, where, "")


# A golden file (goldens/NAME.json): what verify reads from it, checked before it is trusted.
GOLDEN_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["session", "turns"],
    "properties": {"session": _STR, "template_sha256": _STR, "tokenizer_version": _STR,
                   "turns": {"type": "array", "items": {
                       "type": "object", "required": ["turn", "count", "sha256", "request"],
                       "properties": {"turn": _POSITIVE,
                                      "count": {"type": "integer", "minimum": 0, "maximum": MAX_COUNT},
                                      "sha256": _SHA256, "ids": _STR, "request": {"type": "object"}}}},
                   # The fixes applied at the export (export/fixed.py), applied again by verify.
                   "fixes": {"type": "object", "required": ["applied", "source"], "properties": {
                       "applied": {"type": "array", "items": {
                           "type": "object", "required": ["fix"],
                           "properties": {"fix": _STR, "params": {"type": "object"}}}},
                       "projection": {"type": "boolean"}, "settings": {"type": "object"},
                       "source": {"type": "object"}}}},
}


def check_golden(data: Any, where: str) -> None:
    _check(data, GOLDEN_SCHEMA, where, "")


def _check(x: Any, s: dict, where: str, path: str) -> None:
    name = path or "(top level)"
    if "enum" in s and x not in s["enum"]:
        raise BundleError(f"{where}: {name} must be one of {s['enum']}, got {x!r}", file=where, field=path)
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        ok = any(isinstance(x, _TYPES[t]) and not (t in ("integer", "number") and isinstance(x, bool)) for t in types)
        if not ok:
            raise BundleError(f"{where}: {name} must be {' or '.join(types)}, got {type(x).__name__}",
                              file=where, field=path)
    if isinstance(x, int | float) and not isinstance(x, bool):
        _range(x, s, where, name, path)
    if isinstance(x, str) and "pattern" in s:
        import re
        if not re.fullmatch(s["pattern"], x):
            raise BundleError(f"{where}: {name} is not well formed ({s['pattern']})", file=where, field=path)
    if isinstance(x, dict):
        for key in s.get("required", []):
            if key not in x:
                raise BundleError(f"{where}: {path + '.' if path else ''}{key} is missing", file=where,
                                  field=f"{path + '.' if path else ''}{key}")
        props, extra = s.get("properties", {}), s.get("additionalProperties")
        for key, value in x.items():
            sub = props.get(key, extra)
            if sub is not None:
                _check(value, sub, where, f"{path + '.' if path else ''}{key}")
    if isinstance(x, list) and "items" in s:
        for i, item in enumerate(x):
            _check(item, s["items"], where, f"{path}[{i}]")


def _range(x: int | float, s: dict, where: str, name: str, path: str) -> None:
    """A number within the schema's bounds (and never NaN or infinite: JSON has neither)."""
    low, high = s.get("minimum", s.get("exclusiveMinimum")), s.get("maximum", s.get("exclusiveMaximum"))
    ok = (isinstance(x, int) or math.isfinite(x)) and not (
        "minimum" in s and x < s["minimum"] or "exclusiveMinimum" in s and x <= s["exclusiveMinimum"]
        or "maximum" in s and x > s["maximum"] or "exclusiveMaximum" in s and x >= s["exclusiveMaximum"])
    if ok:
        return
    if low is None and high is None:
        span = "a finite number"
    else:
        lo = "" if low is None else f"{'more than' if 'exclusiveMinimum' in s else 'at least'} {low:,}"
        hi = "" if high is None else f"{'less than' if 'exclusiveMaximum' in s else 'at most'} {high:,}"
        span = " and ".join(p for p in (lo, hi) if p)
    got = f"a {x.bit_length()}-bit integer" if isinstance(x, int) and x.bit_length() > 64 else repr(x)
    raise BundleError(f"{where}: {name} must be {span}, got {got}", file=where, field=path,
                      hint="only cache.redis and cache.local_bytes may be edited in place, within these bounds; "
                           "for anything else, export again")
