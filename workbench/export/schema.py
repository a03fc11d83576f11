"""The bundle's schema: a JSON Schema (written beside workbench.yaml for other tools) and a checker
with no dependency, so the loader needs only the core install. Errors name the file and the field."""

from __future__ import annotations

from typing import Any

from ..errors import BundleError
from ..injection import ASSISTANT_POLICIES, POLICIES

# 2: the seal (seal.py) and the per-source injection policies. A reader of version 1 would ignore
# both and assemble differently, so it refuses a version 2 bundle as newer; this reader refuses a
# version 1 bundle, which carries no seal, and asks for a new export.
SCHEMA_VERSION = 2
FIRST_SEALED_VERSION = 2

_NULLABLE_INT = {"type": ["integer", "null"]}
_STR = {"type": "string"}
_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}

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
            "description": _STR, "tokenizer": {"type": ["string", "null"]}, "context_window": _NULLABLE_INT,
            "reserve": _NULLABLE_INT, "bos_token": {"type": ["string", "null"]},
            "eos_token": {"type": ["string", "null"]}, "kwargs": {"type": "object"}, "origin": _STR}},
        "tokenizer": {"type": "object", "required": ["name", "version"],
                      "properties": {"name": _STR, "version": _STR}},
        "policies": {"type": "object", "required": ["injection", "cleaning", "intake", "render_limits"],
                     "properties": {"injection": {"enum": list(POLICIES)},
                                    "tool_injection": {"enum": list(POLICIES)},
                                    "assistant_injection": {"enum": list(ASSISTANT_POLICIES)},
                                    "cleaning": {"type": "object"}, "intake": {"type": "object"},
                                    "render_limits": {"type": "object"}, "template_kwargs": {"type": "object"},
                                    "vision": {"type": ["object", "null"]}}},
        "budget": {"type": "object", "required": ["truncation"],
                   "properties": {"context_window": _NULLABLE_INT, "reserve": _NULLABLE_INT,
                                  "truncation": {"type": "object"}}},
        "variables": {"type": "object", "properties": {"constants": {"type": "object"},
                                                        "declarations": {"type": "object"},
                                                        "builtins": {"type": "boolean"},
                                                        "limits": {"type": "object"}}},
        "cache": {"type": "object", "required": ["key_recipe", "redis"], "properties": {
            "key_recipe": {"type": "object", "required": ["version"]},
            "local_bytes": {"type": "integer", "minimum": 0},
            "redis": {"type": "object", "required": ["url_env", "required"],
                      "properties": {"url_env": _STR, "required": {"type": "boolean"},
                                     "ttl_s": {"type": "number"}, "namespace": _STR}}}},
        "providers": {"type": "object"},
        "semantic_cache": {"type": ["object", "null"],
                           "required": ["rules_version", "embedder", "window", "thresholds"],
                           "properties": {"rules_version": {"type": "integer"}, "embedder": _STR,
                                          "window": {"type": "integer", "minimum": 0},
                                          "current_weight": {"type": "number"}, "min_coverage": {"type": "number"},
                                          "min_coverage_cjk": {"type": "number"},
                                          "ttl_s": {"type": "number"}, "short_ttl_s": {"type": "number"},
                                          "scope": _STR,
                                          "thresholds": {"type": "object", "required": ["high", "low"],
                                                         "properties": {"high": {"type": "number"},
                                                                        "low": {"type": "number"}}}}},
        "seal": {"type": "object", "required": ["version", "sha256", "fields"],
                 "properties": {"version": {"enum": [1]}, "sha256": _SHA256, "fields": {"type": "object"}}},
        "goldens": {"type": "array", "items": {"type": "object", "required": ["session", "file"],
                                               "properties": {"session": _STR, "file": _STR,
                                                              "turns": {"type": "array"}}}},
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
                       "properties": {"turn": {"type": "integer", "minimum": 1}, "count": {"type": "integer",
                                                                                         "minimum": 0},
                                      "sha256": _SHA256, "ids": _STR, "request": {"type": "object"}}}}},
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
    if isinstance(x, int) and not isinstance(x, bool):
        if "minimum" in s and x < s["minimum"] or "maximum" in s and x > s["maximum"]:
            raise BundleError(f"{where}: {name} = {x} is out of range", file=where, field=path)
    if isinstance(x, str) and "pattern" in s:
        import re
        if not re.fullmatch(s["pattern"], x):
            raise BundleError(f"{where}: {name} is not well formed ({s['pattern']})", file=where, field=path)
    if isinstance(x, dict):
        for key in s.get("required", []):
            if key not in x:
                raise BundleError(f"{where}: {path + '.' if path else ''}{key} is missing", file=where,
                                  field=f"{path + '.' if path else ''}{key}")
        for key, sub in s.get("properties", {}).items():
            if key in x:
                _check(x[key], sub, where, f"{path + '.' if path else ''}{key}")
    if isinstance(x, list) and "items" in s:
        for i, item in enumerate(x):
            _check(item, s["items"], where, f"{path}[{i}]")
