"""The bundle's seal: a SHA-256 per field of everything that changes what the bundle assembles, and
one SHA-256 over those. Written at export, checked by the loader and by `workbench verify`, so
flipping `policies.injection` from escape to allow, or raising a limit, is refused naming the field.

What it covers (SEALED): the whole template section (template.sha256 binds the .jinja file),
tokenizer.version (binds the vocabulary; tokenizer.name is only where to load it from), policies,
budget, variables, the cache-key recipe, the semantic cache's settings and, from seal version 2,
the goldens: their list, and in each entry a SHA-256 per field of its golden file (`seal`:
session, turns with their requests and ids, fixes), so a golden's recorded fixes, requests or ids
edited by hand are named by `workbench verify` like a policy is (`golden_changes`). What it leaves free:
the deployment's own choices, which change where prompts are cached but never which prompt is
built: cache.redis (the URL's variable, required, TTL, namespace), cache.local_bytes, and the
informational created_by and providers sections; schema_version is checked on its own.

A seal is a checksum, not a signature: whoever can write the folder can compute a new one. Pin it
where the folder cannot reach (`load(folder, seal=...)`, `workbench verify DIR --seal HEX`) and any
change, re-sealed or not, is refused. Bundles are not edited by hand: export again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

SEAL_VERSION = 2
SEALED = ("template", "tokenizer.version", "policies", "budget", "variables", "cache.key_recipe", "semantic_cache",
          "goldens")
# What each seal version covers: a bundle sealed before the goldens were keeps loading (its
# assembler's settings are all sealed), and `workbench verify` says its goldens are not sealed.
SEALED_BY_VERSION = {1: SEALED[:-1], 2: SEALED}
# Free-form maps are sealed whole: their keys are the user's, not the schema's.
_WHOLE = {"template.kwargs", "policies.template_kwargs", "variables.constants", "variables.declarations",
          "cache.key_recipe"}
_DEPTH = 3   # policies.render_limits.max_output_chars: deep enough to name the limit that changed
_MISSING = object()


@dataclass(frozen=True)
class Change:
    field: str
    how: str        # "changed", "added", "removed", or for the seal itself "missing", "changed", "not pinned"

    def describe(self) -> str:
        if self.field == "seal":
            return "the bundle has no seal: it was exported before bundles were sealed, or the seal was removed"
        if self.field == "seal.sha256":
            return ("seal.sha256 is not the pinned seal" if self.how == "not pinned" else
                    "seal.sha256 does not match the seal's own fields (the seal was edited)")
        return {"changed": f"{self.field} was changed after the export (it no longer matches the seal)",
                "added": f"{self.field} was added after the export (the seal does not cover it)",
                "removed": f"{self.field} was removed after the export (the seal covers it)"}[self.how]


HINT = ("bundles are not edited by hand: export again from the workbench (`workbench export SESSION... -o DIR "
        "--force`); only cache.redis and cache.local_bytes may be changed in place")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()


def _at(config: dict, path: str) -> Any:
    x: Any = config
    for part in path.split("."):
        if not isinstance(x, dict) or part not in x:
            return _MISSING
        x = x[part]
    return x


def _leaves(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value and path not in _WHOLE and path.count(".") + 1 < _DEPTH:
        for k, v in value.items():
            yield from _leaves(f"{path}.{k}", v)
    else:
        yield path, value


def fields_of(config: dict, version: int = SEAL_VERSION) -> dict[str, str]:
    """field path -> SHA-256 of its canonical JSON, over every field present that a seal of
    `version` covers."""
    out: dict[str, str] = {}
    for root in SEALED_BY_VERSION.get(version, SEALED):
        value = _at(config, root)
        if value is not _MISSING:
            out.update((p, _digest(v)) for p, v in _leaves(root, value))
    return out


def total_of(fields: dict[str, str], version: int = SEAL_VERSION) -> str:
    return _digest({"version": version, "fields": fields})


def seal_of(config: dict) -> dict:
    """The seal section for a configuration (computed over it as the loader will read it)."""
    fields = fields_of(config)
    return {"version": SEAL_VERSION, "sha256": total_of(fields), "fields": fields}


def golden_seal(golden: dict) -> dict[str, str]:
    """A golden file's seal (its entry's `seal` in workbench.yaml): a SHA-256 per top-level field,
    so that an edit is named by the field it touched (`fixes`, `turns`)."""
    return {k: _digest(v) for k, v in golden.items()}


def golden_changes(golden: dict, sealed: dict[str, str]) -> list[Change]:
    """The golden's fields that differ from its seal (empty: the golden is the one exported)."""
    actual = golden_seal(golden)
    return [Change(k, "changed" if k in sealed and k in actual else "added" if k in actual else "removed")
            for k in sorted(sealed.keys() | actual.keys()) if sealed.get(k) != actual.get(k)]


def changes(config: dict, pinned: str | None = None) -> list[Change]:
    """What differs from the seal, field by field (empty: the configuration is the exported one).
    `pinned`: the seal SHA-256 the caller expects, from outside the folder."""
    seal = config.get("seal")
    if not isinstance(seal, dict) or not isinstance(seal.get("fields"), dict):
        return [Change("seal", "missing")]
    version = seal.get("version", SEAL_VERSION)
    stored, actual = seal["fields"], fields_of(config, version)
    out = [Change(p, "changed" if p in stored and p in actual else "added" if p in actual else "removed")
           for p in sorted(stored.keys() | actual.keys()) if stored.get(p) != actual.get(p)]
    if not out and seal.get("sha256") != total_of(stored, version):
        out.append(Change("seal.sha256", "changed"))
    if not out and pinned is not None and seal.get("sha256") != pinned.strip().lower():
        out.append(Change("seal.sha256", "not pinned"))
    return out
