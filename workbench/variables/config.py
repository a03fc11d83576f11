"""Prompt-template variables: their declarations, the configuration of the scopes (constants,
declarations, built-ins, limits), and what each variable resolved to (a Binding)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from types import MappingProxyType
from typing import Any

from ..errors import VariableError

BUILTINS = ("now", "today", "request_id", "strftime_now")
_FILE_KEYS = ("constants", "request", "declare")
_SPEC_FIELDS = ("required", "volatile", "default", "description")


@dataclass(frozen=True, slots=True)
class VariableSpec:
    required: bool = True
    volatile: bool = False  # value changes per request (time, ids): breaks prefix caching
    default: Any = None     # used when defined nowhere (scope "default"); None = no default
    description: str = ""


def _json_default(v: Any) -> Any:
    return v.isoformat() if isinstance(v, (date, datetime)) else str(v)


def jsonable(v: Any, limit: int) -> Any:
    """A JSON copy of a value for the debug view (constants may hold dates, or anything)."""
    try:
        return json.loads(json.dumps(v, default=_json_default))
    except (ValueError, TypeError, RecursionError):  # a circular structure
        return repr(v)[:limit]


@dataclass(frozen=True)
class VariableConfig:
    constants: Mapping[str, Any] = field(default_factory=dict)
    declarations: Mapping[str, VariableSpec] = field(default_factory=dict)
    builtins: bool = True
    clock: Callable[[], datetime] | None = None          # for tests; default: now in UTC
    new_request_id: Callable[[], str] | None = None      # for tests; default: uuid4().hex
    max_loop_iterations: int = 1000                      # per `for` loop
    max_steps: int = 100_000  # loop iterations + calls per render: nested loops and macro recursion
    max_collection_items: int = 1000                     # items in a list/dict value, nested ones counted
    max_output_chars: int = 1_000_000
    max_seconds: float = 2.0  # wall clock for one expand_messages call, checked between operations

    def __post_init__(self) -> None:
        # Read-only copies: `version` is a cache-key input and must not drift after creation.
        object.__setattr__(self, "constants", MappingProxyType(dict(self.constants)))
        object.__setattr__(self, "declarations", MappingProxyType(dict(self.declarations)))

    @property
    def version(self) -> str:
        decl = {n: {f: getattr(s, f) for f in _SPEC_FIELDS} for n, s in self.declarations.items()}
        text = json.dumps({"constants": dict(self.constants), "declare": decl, "builtins": self.builtins},
                          sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_json_default)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def from_json(cls, data: object, *, where: str = "variables file") -> tuple[VariableConfig, dict[str, Any]]:
        """Parse ``{"constants": {}, "request": {}, "declare": {}}``; returns (config, request variables).

        An object with none of those keys is taken as request variables as a whole.
        """
        def bad(msg: str) -> VariableError:
            return VariableError(f"{where}: {msg}")

        if not isinstance(data, dict):
            raise bad("must be a JSON object")
        if not any(k in data for k in _FILE_KEYS):
            return cls(), dict(data)
        unknown = sorted(set(data) - set(_FILE_KEYS))
        if unknown:
            raise bad(f"unknown key {unknown[0]!r}; expected constants, request, declare "
                      "(request variables go under \"request\")")
        parts = {}
        for key in _FILE_KEYS:
            parts[key] = data.get(key, {})
            if not isinstance(parts[key], dict):
                raise bad(f"{key} must be an object of name: value")
        decls = {}
        for name, d in parts["declare"].items():
            if not isinstance(d, dict):
                raise bad(f"declare.{name} must be an object")
            extra = sorted(set(d) - set(_SPEC_FIELDS))
            if extra:
                raise bad(f"declare.{name}: unknown field {extra[0]!r}; expected {', '.join(_SPEC_FIELDS)}")
            for flag in ("required", "volatile"):
                if not isinstance(d.get(flag, False), bool):
                    raise bad(f"declare.{name}.{flag} must be true or false")
            if not isinstance(d.get("description", ""), str):
                raise bad(f"declare.{name}.description must be a string")
            decls[name] = VariableSpec(**d)
        return cls(constants=parts["constants"], declarations=decls), dict(parts["request"])


@dataclass(frozen=True, slots=True)
class Binding:
    name: str
    value: Any      # as the template saw it (derived definitions: their rendered text)
    scope: str      # local | request | system | builtin | default | empty
    volatile: bool
    seqs: tuple[int | None, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "scope": self.scope,
                "volatile": self.volatile, "seqs": list(self.seqs)}


# ---- the sandbox ------------------------------------------------------------------------------
# Besides the loop cap, a per-render _Guard bounds (1) steps: loop iterations plus calls, which stops nested loops and
# macro recursion bombs; (2) size: no single value may exceed max_output_chars, checked *before*
# operations that multiply their input (`*`, widths, replace, indent) and after every call,
# filter and operator; (3) work: the characters built by those results add up to at most
# WORK_FACTOR x max_output_chars per render, so many medium values cannot add up to a huge one;
# (4) time: max_seconds for the whole expansion, checked at every step and charge.
