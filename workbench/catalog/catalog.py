"""Models by name: a model id -> its chat template, tokenizer, context window, KV shape, image rule
and provider preset.

The catalog is data (workbench/_data/models.json, shipped in the package): families hold what their
models share, each model its own numbers, each with the page they come from. This module only reads
and checks it. `lookup` finds a model by its id, an alias, or the part of a Hugging Face id after
the organisation (`Qwen2.5-7B-Instruct`), case-insensitively; a name it does not hold is a
`ModelNotFoundError` listing the closest names. How the numbers were chosen and how to add a
model: docs/models.md.

    >>> m = lookup("qwen/qwen2.5-7b-instruct")
    >>> m.id, m.template, m.tokenizer, m.context_window, m.kv.bytes_per_token
    ('Qwen/Qwen2.5-7B-Instruct', 'qwen2.5', 'qwen2.5', 32768, 57344)
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

from .. import strict_json
from ..errors import ModelNotFoundError, WorkbenchError

CATALOG_FILE = ("_data", "models.json")   # inside the workbench package
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8": 1}
CLOSEST = 5                              # names an unknown-model error suggests

_ENTRY_KEYS = {"id", "aliases", "family", "label", "template", "tokenizer", "context_window", "max_output", "kv",
               "kv_note", "dtype", "vision", "vision_options", "provider", "price_model", "hosted", "estimate",
               "source", "synthetic"}
_FAMILY_KEYS = _ENTRY_KEYS - {"id", "aliases", "family", "kv", "price_model", "synthetic"}
_KV_KEYS = {"layers", "kv_heads", "head_dim", "dtype"}


@dataclass(frozen=True)
class KVShape:
    """The attention shape that sets the KV cache size (from the model's config.json)."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype: str = "bfloat16"

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def bytes_per_token(self) -> int:
        """One K and one V vector per layer and KV head."""
        return self.layers * self.kv_heads * self.head_dim * 2 * self.dtype_bytes

    def to_json(self) -> dict[str, Any]:
        return {"layers": self.layers, "kv_heads": self.kv_heads, "head_dim": self.head_dim, "dtype": self.dtype,
                "dtype_bytes": self.dtype_bytes, "bytes_per_token": self.bytes_per_token}


@dataclass(frozen=True)
class ModelEntry:
    id: str
    family: str
    label: str
    template: str                        # a shipped template name
    tokenizer: str | None                # a tokenizer registry name; None: none ships (see `estimate`)
    context_window: int
    provider: str                        # a preset of workbench/analysis/provider_params.json
    source: str                          # where the numbers come from
    aliases: tuple[str, ...] = ()
    max_output: int | None = None        # where the provider or model card publishes one
    kv: KVShape | None = None            # None for hosted models: their shape is not public
    kv_note: str | None = None           # when the plain formula is only an upper bound (sliding windows, MLA)
    vision: str | None = None            # the image rule's name (workbench/media), None for text-only models
    vision_options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    price_model: str | None = None       # the preset's model whose prices apply
    hosted: bool = False
    estimate: str | None = None          # why the template or tokenizer is only an estimate of the real one
    synthetic: str | None = None         # the engine's synthetic architecture of this shape, if it has one

    @property
    def names(self) -> tuple[str, ...]:
        """Every name `lookup` finds this model by: its id, its aliases, and for an `org/name` id the
        name alone."""
        short = (self.id.split("/", 1)[1],) if "/" in self.id else ()
        return tuple(dict.fromkeys((self.id, *self.aliases, *short)))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "aliases": list(self.aliases), "family": self.family, "label": self.label,
                "template": self.template, "tokenizer": self.tokenizer, "context_window": self.context_window,
                "max_output": self.max_output, "kv": self.kv.to_json() if self.kv is not None else None,
                "kv_note": self.kv_note, "vision": self.vision, "vision_options": dict(self.vision_options),
                "provider": self.provider, "price_model": self.price_model, "hosted": self.hosted,
                "estimate": self.estimate, "source": self.source, "synthetic": self.synthetic}


def models() -> list[ModelEntry]:
    """Every model in the catalog, in its order (families together)."""
    return list(_catalog()[0])


def lookup(name: str) -> ModelEntry:
    """The model called `name` (id, alias or the name after `org/`, any case); an unknown name
    raises ModelNotFoundError with the closest names."""
    found = find(name)
    if found is None:
        raise ModelNotFoundError(name if isinstance(name, str) else repr(name), closest(name))
    return found


def find(name: str) -> ModelEntry | None:
    """As `lookup`, None for a name the catalog does not hold."""
    if not isinstance(name, str):
        return None
    return _catalog()[1].get(name.strip().lower())


def closest(name: object, n: int = CLOSEST) -> tuple[str, ...]:
    """Model ids near `name`: those whose names contain it, then the most similar spellings."""
    if not isinstance(name, str) or not name.strip():
        return ()
    q = name.strip().lower()
    index = _catalog()[1]
    keys = list(index)
    picked = [k for k in keys if q in k] + difflib.get_close_matches(q, keys, n=n, cutoff=0.6)
    return tuple(dict.fromkeys(index[k].id for k in picked))[:n]


# ------------------------------------------------------------------ reading the data
@lru_cache(maxsize=1)
def _catalog() -> tuple[tuple[ModelEntry, ...], dict[str, ModelEntry]]:
    where = "/".join(CATALOG_FILE)
    try:
        text = resources.files("workbench").joinpath(*CATALOG_FILE).read_text("utf-8")
        data = strict_json.loads(text)
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkbenchError(f"the model catalog {where} cannot be read: {exc}", hint="reinstall the package") \
            from None
    entries = parse(data, where)
    return entries, index_of(entries, where)


def index_of(entries: tuple[ModelEntry, ...], where: str = "catalog") -> dict[str, ModelEntry]:
    """Lower-cased name -> model; a name two models share is an error (lookups must be unambiguous)."""
    index: dict[str, ModelEntry] = {}
    for e in entries:
        for n in e.names:
            key = n.lower()
            other = index.get(key)
            if other is not None and other is not e:
                raise WorkbenchError(f"{where}: the name {n!r} belongs to both {other.id!r} and {e.id!r}",
                                     hint="give each model its own ids and aliases")
            index[key] = e
    return index


def parse(data: Any, where: str = "catalog") -> tuple[ModelEntry, ...]:
    """Check the catalog's data and build its entries (families merged under each model)."""
    if not isinstance(data, dict):
        raise _bad(where, "", "must be a JSON object with 'families' and 'models'")
    families = data.get("families", {})
    if not isinstance(families, dict):
        raise _bad(where, "families", "must be an object: family name -> shared fields")
    for fname, fam in families.items():
        if not isinstance(fam, dict):
            raise _bad(where, f"families.{fname}", "must be an object")
        _known(fam, _FAMILY_KEYS, where, f"families.{fname}")
    rows = data.get("models")
    if not isinstance(rows, list):
        raise _bad(where, "models", "must be a list of models")
    out = []
    for i, row in enumerate(rows):
        at = f"models[{i}]"
        if not isinstance(row, dict):
            raise _bad(where, at, "must be an object")
        _known(row, _ENTRY_KEYS, where, at)
        fam_name = row.get("family")
        if not isinstance(fam_name, str) or fam_name not in families:
            raise _bad(where, f"{at}.family", f"must name a family ({', '.join(families)}), got {fam_name!r}")
        # (a family's label names the family; each model has its own)
        fam = {k: v for k, v in families[fam_name].items() if not k.startswith("_") and k != "label"}
        merged = {**fam, **{k: v for k, v in row.items() if not k.startswith("_")}}
        out.append(_entry(merged, where, at))
    return tuple(out)


def _entry(m: dict[str, Any], where: str, at: str) -> ModelEntry:
    def get(key: str, kind: type | tuple[type, ...], required: bool = False) -> Any:
        v = m.get(key)
        if v is None:
            if required:
                raise _bad(where, f"{at}.{key}", "is missing")
            return None
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise _bad(where, f"{at}.{key}", f"must be {_kind_name(kind)}, got {v!r}")
        return v

    mid = get("id", str, True)
    aliases = get("aliases", list) or []
    if not all(isinstance(a, str) and a for a in aliases):
        raise _bad(where, f"{at}.aliases", "must be a list of names")
    for key in ("context_window", "max_output"):
        v = get(key, int, key == "context_window")
        if v is not None and v < 1:
            raise _bad(where, f"{at}.{key}", f"must be at least 1, got {v}")
    hosted = bool(get("hosted", bool))
    kv = _kv(m.get("kv"), get("dtype", str) or "bfloat16", where, f"{at}.kv")
    if kv is None and not hosted:
        raise _bad(where, f"{at}.kv", "is missing: a model that is not hosted has a published KV shape")
    if kv is not None and hosted:
        raise _bad(where, f"{at}.kv", "a hosted model's KV shape is not public: leave it out")
    vision_options = get("vision_options", dict) or {}
    return ModelEntry(
        id=mid, family=get("family", str, True), label=get("label", str) or mid, template=get("template", str, True),
        tokenizer=get("tokenizer", str), context_window=m["context_window"], provider=get("provider", str, True),
        source=get("source", str, True).replace("{id}", mid), aliases=tuple(aliases), max_output=m.get("max_output"),
        kv=kv, kv_note=get("kv_note", str), vision=get("vision", str),
        vision_options=MappingProxyType(dict(vision_options)), price_model=get("price_model", str), hosted=hosted,
        estimate=get("estimate", str), synthetic=get("synthetic", str))


def _kv(raw: Any, dtype: str, where: str, at: str) -> KVShape | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad(where, at, "must be an object: layers, kv_heads, head_dim (and dtype)")
    _known(raw, _KV_KEYS, where, at)
    vals = []
    for key in ("layers", "kv_heads", "head_dim"):
        v = raw.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise _bad(where, f"{at}.{key}", f"must be a positive integer, got {v!r}")
        vals.append(v)
    dtype = raw.get("dtype", dtype)
    if dtype not in DTYPE_BYTES:
        raise _bad(where, f"{at}.dtype", f"must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
    return KVShape(vals[0], vals[1], vals[2], dtype)


def _known(obj: dict[str, Any], allowed: set[str], where: str, at: str) -> None:
    for k in obj:
        if not k.startswith("_") and k not in allowed:
            raise _bad(where, f"{at}.{k}", f"unknown field (known: {', '.join(sorted(allowed))})")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", bool: "true or false", list: "a list", dict: "an object"}
    return " or ".join(names.get(k, k.__name__) for k in (kind if isinstance(kind, tuple) else (kind,)))


def _bad(where: str, at: str, message: str) -> WorkbenchError:
    return WorkbenchError(f"{where}: {at + ': ' if at else ''}{message}", hint="fix the model catalog's data")


__all__ = ["CATALOG_FILE", "DTYPE_BYTES", "KVShape", "ModelEntry", "closest", "find", "index_of", "lookup", "models",
           "parse"]
