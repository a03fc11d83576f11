"""Provider cache presets (sizes, TTLs, per-model minimums, prices), versioned and dated.

The presets are data, in provider_params.json beside this file (shipped in the package, read
through importlib.resources); a user file of the same shape can add presets or `extend` shipped
ones, and overrides merge key by key. Each shipped preset names the documentation page it follows
(`source`) and the day it was checked against it (`checked`). A provider's rule sets are variants,
`provider@variant` (`openai@gpt-5.4`, `openai@gpt-5.6`); a plain name (`openai`) is an `alias` of
the default variant. The simulators that read these parameters live in providers.py; the errors
(ProviderParamsError, UnknownProviderError) in workbench.errors.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, ClassVar

from .. import strict_json
from ..engine.kv import HASH_ALGOS
from ..errors import ProviderParamsError, UnknownProviderError

PARAMS_FILE: Traversable = resources.files("workbench.analysis").joinpath("provider_params.json")
MILLION = 1_000_000     # prices are per million tokens
Preset = dict[str, Any]   # one preset as read from JSON


# ---------------------------------------------------------------- parameters

_PRICE_KEYS = ("input", "output", "cached_input", "cache_write_5m", "cache_write_1h", "cache_write")
_MULT_KEYS = ("cached_input", "cache_write_5m", "cache_write_1h", "cache_write")
_COMMON_KEYS = ("kind", "model", "models", "prices", "multipliers", "extends", "source", "checked")
VARIANT_SEP = "@"       # provider@variant


@dataclass(frozen=True, slots=True)
class Prices:
    """USD per million tokens. ``cached_input`` is what OpenAI calls cached input and Anthropic a
    cache read; ``cache_write_5m`` and ``cache_write_1h`` are Anthropic's write prices (5-minute and
    1-hour TTL), ``cache_write`` OpenAI's (GPT-5.6 and later: writes billed apart)."""

    input: float
    output: float
    cached_input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_write: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class _Knob:
    """How one numeric or named setting is checked."""

    type: str = "int"                 # int | num | choice | bool
    lo: float = 0                     # smallest allowed (exclusive when strict)
    strict: bool = False
    optional: bool = False            # null allowed (e.g. capacity: unbounded)
    choices: tuple[str, ...] = ()

    def check(self, value: Any, err: Callable[..., ProviderParamsError], name: str) -> Any:
        if value is None:
            if self.optional:
                return None
            raise err(name, "must not be null")
        if self.type == "bool":
            if not isinstance(value, bool):
                raise err(name, f"must be true or false, got {value!r}")
            return value
        if self.choices:
            if value not in self.choices:
                raise err(name, f"must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
            return value
        is_num = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not is_num or not math.isfinite(value) or (self.type == "int" and not float(value).is_integer()):
            raise err(name, f"must be {'an integer' if self.type == 'int' else 'a number'}, got {value!r}")
        if value < self.lo or (self.strict and value == self.lo):
            raise err(name, f"must be {'>' if self.strict else '>='} {self.lo:g}, got {value!r}")
        return int(value) if self.type == "int" else float(value)


@dataclass(frozen=True, kw_only=True)
class ProviderParams:
    """One resolved preset: a provider kind, a model, its prices and the kind's settings.

    ``ProviderParams.load(name, overrides=..., path=...)`` returns the subclass for the preset's
    kind (OpenAIParams, AnthropicParams, GeminiParams, VLLMParams, SGLangParams). ``name`` is the
    name asked for; ``preset`` the preset it resolved to (``openai`` -> ``openai@gpt-5.4``), with
    the page it follows (``source``) and the day it was checked (``checked``, ISO date)."""

    name: str
    kind: str
    model: str
    prices: Prices
    preset: str = ""
    source: str = ""
    checked: str | None = None
    _KNOBS: ClassVar[dict[str, _Knob]] = {}

    @classmethod
    def load(cls, name: str = "openai", overrides: Mapping[str, Any] | None = None, *,
             path: str | Path | None = None) -> ProviderParams:
        """The preset ``name`` from ``path`` (a user JSON file: preset name -> preset) or the shipped
        file, then ``overrides`` on top (dicts such as ``prices`` merge key by key)."""
        if not isinstance(name, str):
            raise UnknownProviderError(f"a provider name must be a string, got {name!r}",
                                       hint=f"use one of: {', '.join(cls.presets())}")
        user, label = ({}, None) if path is None else (_read_presets(Path(path)), str(path))
        canonical = _unalias(name, user, _shipped(), label)
        raw, source = _resolve(canonical, user, _shipped(), label)
        return _build(name, raw, dict(_mapping(overrides or {}, "overrides", name)), source, canonical)

    @classmethod
    def presets(cls, path: str | Path | None = None) -> list[str]:
        """Every preset name, aliases included (``openai`` and ``openai@gpt-5.4``)."""
        user = _read_presets(Path(path)) if path is not None else {}
        return sorted(set(_shipped()) | set(user))

    @property
    def citation(self) -> str:
        """One line: which preset, the page it follows and when it was checked."""
        preset = self.preset or self.name
        head = preset if preset == self.name else f"{self.name} = {preset}"
        if not self.source:
            return f"preset {head} (your own: no source named)"
        return f"preset {head}, checked {self.checked or 'on no date'} against {self.source}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "model": self.model,
                               "prices": self.prices.to_json(), "preset": self.preset or self.name,
                               "source": self.source, "checked": self.checked}
        out.update({k: getattr(self, k) for k in self._KNOBS})
        return out

    def _check(self, err: Callable[..., ProviderParamsError]) -> None:
        """Checks across knobs (a kind's own rules); raise through ``err(field, message)``."""


@dataclass(frozen=True, kw_only=True)
class OpenAIParams(ProviderParams):
    """``caching``: "automatic" (up to GPT-5.4: min_prefix_tokens, then increment_tokens steps) or
    "breakpoints" (GPT-5.6 and later: prompt_cache_breakpoint prefixes, at most max_writes written
    per request, writes billed at ``prices.cache_write``)."""

    caching: str = "automatic"
    min_prefix_tokens: int = 1024
    increment_tokens: int = 128
    ttl_s: float = 300.0
    mode: str = "implicit"
    max_writes: int = 4
    match_breakpoints: int = 80
    retention: str = "in_memory"
    retention_24h_s: float = 86400.0
    _KNOBS: ClassVar[dict[str, _Knob]] = {
        "caching": _Knob(choices=("automatic", "breakpoints")),
        "min_prefix_tokens": _Knob("int"), "increment_tokens": _Knob("int", 1),
        "ttl_s": _Knob("num", 0, strict=True), "mode": _Knob(choices=("implicit", "explicit")),
        "max_writes": _Knob("int", 1), "match_breakpoints": _Knob("int", 1),
        "retention": _Knob(choices=("in_memory", "24h")), "retention_24h_s": _Knob("num", 0, strict=True)}

    @property
    def lifetime_s(self) -> float:
        """How long an entry lives after its last use: the ttl, or the extended retention."""
        return self.retention_24h_s if self.retention == "24h" else self.ttl_s


@dataclass(frozen=True, kw_only=True)
class AnthropicParams(ProviderParams):
    min_cacheable_tokens: int = 1024
    ttl: str = "5m"
    ttl_5m_s: float = 300.0
    ttl_1h_s: float = 3600.0
    max_breakpoints: int = 4
    lookback_blocks: int = 20
    automatic: bool = False
    _KNOBS: ClassVar[dict[str, _Knob]] = {
        "min_cacheable_tokens": _Knob("int"), "ttl": _Knob(choices=("5m", "1h")),
        "ttl_5m_s": _Knob("num", 0, strict=True), "ttl_1h_s": _Knob("num", 0, strict=True),
        "max_breakpoints": _Knob("int", 1), "lookback_blocks": _Knob("int"), "automatic": _Knob("bool")}

    @property
    def ttl_seconds(self) -> float:
        return self.ttl_s_of(self.ttl)

    @property
    def write_price(self) -> float:
        return self.write_price_of(self.ttl)

    def ttl_s_of(self, ttl: str) -> float:
        return self.ttl_5m_s if ttl == "5m" else self.ttl_1h_s

    def write_price_of(self, ttl: str) -> float:
        return self.prices.cache_write_5m if ttl == "5m" else self.prices.cache_write_1h


@dataclass(frozen=True, kw_only=True)
class GeminiParams(ProviderParams):
    """Implicit caching: a minimum per model, whole tokens, an idle lifetime (assumed)."""

    min_prefix_tokens: int = 2048
    ttl_s: float = 300.0
    increment_tokens: ClassVar[int] = 1       # the page names no step: whole tokens
    _KNOBS: ClassVar[dict[str, _Knob]] = {
        "min_prefix_tokens": _Knob("int"), "ttl_s": _Knob("num", 0, strict=True)}


@dataclass(frozen=True, kw_only=True)
class VLLMParams(ProviderParams):
    block_size: int = 16
    hash_block_size: int | None = None       # None: block_size
    capacity_blocks: int | None = None
    hash_algo: str = "sha256"
    _KNOBS: ClassVar[dict[str, _Knob]] = {
        "block_size": _Knob("int", 1), "hash_block_size": _Knob("int", 1, optional=True),
        "capacity_blocks": _Knob("int", 1, optional=True), "hash_algo": _Knob(choices=HASH_ALGOS)}

    @property
    def hash_size(self) -> int:
        return self.hash_block_size or self.block_size

    def _check(self, err: Callable[..., ProviderParamsError]) -> None:
        if self.block_size % self.hash_size:
            raise err("hash_block_size", f"must divide block_size ({self.block_size}), got {self.hash_size}",
                      "vLLM merges the hashes of hash_block_size tokens into each block: use a divisor")


@dataclass(frozen=True, kw_only=True)
class SGLangParams(ProviderParams):
    page_size: int = 1
    capacity_tokens: int | None = None
    _KNOBS: ClassVar[dict[str, _Knob]] = {
        "page_size": _Knob("int", 1), "capacity_tokens": _Knob("int", 1, optional=True)}


_KINDS: dict[str, type[ProviderParams]] = {
    "openai": OpenAIParams, "anthropic": AnthropicParams, "gemini": GeminiParams, "vllm": VLLMParams,
    "sglang": SGLangParams}


def _read_presets(path: Path | Traversable) -> dict[str, Preset]:
    label = str(path)
    try:
        data = strict_json.loads(path.read_text(encoding="utf-8"))  # NaN, too deep...: a JSONDecodeError
    except OSError as e:
        raise ProviderParamsError(f"cannot read the file ({e.strerror or e})", source=label,
                                  hint="check the path of the provider params file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProviderParamsError(f"not valid JSON ({e})", source=label,
                                  hint="fix the JSON syntax at the position named") from None
    if not isinstance(data, dict) or "kind" in data:
        raise ProviderParamsError("the file must be a JSON object mapping preset names to presets",
                                  source=label,
                                  hint='write {"my-preset": {"extends": "openai", "prices": {...}}}')
    out = {}
    for name, preset in data.items():
        if name.startswith("_"):
            continue
        out[name] = dict(_mapping(preset, label, name))
    return out


@lru_cache(maxsize=1)
def _shipped() -> dict[str, Preset]:
    return _read_presets(PARAMS_FILE)


def _mapping(value: Any, source: str, preset: str, field: str | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ProviderParamsError(f"must be a JSON object, got {type(value).__name__}", source=source,
                                  preset=preset, field=field, hint="write it as {\"key\": value, ...}")
    return value


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> Preset:
    """Deep merge for nested objects (prices, multipliers, models); anything else is replaced."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _unalias(name: str, user: dict[str, Preset], shipped: dict[str, Preset], label: str | None) -> str:
    """The preset an alias stands for (``openai`` -> ``openai@gpt-5.4``); other names as they are.
    An alias is a preset holding only ``{"alias": "other-name"}``; the user's file comes first."""
    seen = [name]
    while True:
        raw = user.get(name, shipped.get(name))
        if raw is None or "alias" not in raw:
            return name
        src = label if name in user else "provider_params.json"
        target = raw["alias"]
        if not isinstance(target, str) or set(raw) - {"alias"} - {k for k in raw if k.startswith("_")}:
            raise ProviderParamsError("an alias holds only {\"alias\": \"preset-name\"}", source=src,
                                      preset=name, field="alias",
                                      hint="name another preset, or write the preset itself (\"extends\" copies one)")
        if target in seen:
            raise ProviderParamsError(f"'alias' goes round in a circle: {' -> '.join(seen + [target])}",
                                      source=src, preset=name, field="alias")
        seen.append(target)
        name = target


def _unknown(name: str, user: dict[str, Preset], shipped: dict[str, Preset], label: str | None) -> UnknownProviderError:
    known = sorted(set(shipped) | set(user))
    provider, sep, variant = name.partition(VARIANT_SEP)
    variants = [k for k in known if k.startswith(provider + VARIANT_SEP)]
    if sep and variants:
        return UnknownProviderError(f"unknown variant {variant!r} of provider {provider!r}", source=label,
                                    hint=f"use one of: {', '.join(variants)} (or {provider}, the default)")
    return UnknownProviderError(f"unknown provider {name!r}", source=label,
                                hint=f"use one of: {', '.join(known)}, or define it in your own params file")


def _resolve(name: str, user: dict[str, Preset], shipped: dict[str, Preset], label: str | None,
             chain: tuple[tuple[str, str], ...] = ()) -> tuple[Preset, str]:
    """Follow ``extends`` links; a user preset may extend the shipped preset of its own name.
    ``label`` names the user's file (None: no file)."""
    for where, presets, src in (("user", user, label or ""), ("shipped", shipped, "provider_params.json")):
        if name in presets and (where, name) not in chain:
            raw = presets[name]
            if "alias" in raw:          # checked by _unalias when asked for by name; followed here
                return _resolve(str(raw["alias"]), user, shipped, label, chain + ((where, name),))
            base = raw.get("extends")
            if base is None:
                return raw, src
            if not isinstance(base, str):
                raise ProviderParamsError(f"must name a preset, got {base!r}", source=src, preset=name,
                                          field="extends")
            parent, _ = _resolve(base, user, shipped, label, chain + ((where, name),))
            return _merge(parent, {k: v for k, v in raw.items() if k != "extends"}), src
    if any(n == name for _, n in chain):
        path = " -> ".join(n for _, n in chain) + f" -> {name}"
        raise ProviderParamsError(f"'extends' goes round in a circle: {path}", source=label,
                                  hint="make one preset in the chain stand on its own")
    raise _unknown(name, user, shipped, label)


def _build(name: str, raw: Preset, over: Preset, source: str, preset_name: str = "") -> ProviderParams:
    def err(src: str) -> Callable[..., ProviderParamsError]:
        def make(field: str, msg: str, hint: str | None = None) -> ProviderParamsError:
            return ProviderParamsError(msg, preset=name, field=field, source=src, hint=hint or (
                f"fix it in {src}" if src != "overrides" else "fix the overrides you passed"))
        return make

    kind = raw.get("kind")
    if kind is None:
        raise err(source)("kind", "missing", f"add \"kind\": one of {', '.join(_KINDS)}, "
                                             "or \"extends\": a shipped preset")
    if kind not in _KINDS:
        raise err(source)("kind", f"unknown kind {kind!r}", f"use one of: {', '.join(_KINDS)}")
    if "kind" in over and over["kind"] != kind:
        raise err("overrides")("kind", f"cannot turn a {kind} preset into {over['kind']!r}",
                               f"load the {over['kind']!r} preset instead")
    if "extends" in over:
        raise err("overrides")("extends", "has no effect in overrides",
                               "load the preset to extend, or put 'extends' in your params file")
    cls = _KINDS[kind]
    allowed = set(_COMMON_KEYS) | set(cls._KNOBS)
    for keys, src in ((over, "overrides"), (raw, source)):
        for k in keys:
            if not k.startswith("_") and k not in allowed:
                raise err(src)(k, f"unknown field for a {kind} preset",
                               f"known fields: {', '.join(sorted(allowed - {'extends'}))}")

    preset = _merge(raw, {"models": over["models"]}) if "models" in over else raw
    models = _mapping(preset.get("models") or {}, source, name, "models")
    model = over.get("model", preset.get("model", name))
    if not isinstance(model, str):
        raise err(source)("model", f"must be a string, got {model!r}")
    entry: Mapping[str, Any] = {}
    if models:
        if model not in models:
            raise err(source)("model", f"unknown model {model!r}",
                              f"use one of: {', '.join(sorted(m for m in models if not m.startswith('_')))}"
                              ", or add it under \"models\"")
        entry = _mapping(models[model], source, name, f"models.{model}")
        for k in entry:
            if not k.startswith("_") and k not in {"prices", "multipliers", *cls._KNOBS}:
                raise err(source)(f"models.{model}.{k}", "unknown field for a model entry",
                                  f"a model entry holds prices, multipliers, {', '.join(cls._KNOBS)}")
    flat = _merge(_merge(preset, entry), over)

    knobs = {k: cls._KNOBS[k].check(flat[k], err(source if k not in over else "overrides"), k)
             for k in cls._KNOBS if k in flat}
    prices = _prices(flat.get("prices") or {}, flat.get("multipliers") or {},
                     err("overrides" if {"prices", "multipliers"} & set(over) else source))
    cited = _citation(flat, err(source if not {"source", "checked"} & set(over) else "overrides"))
    out = cls(name=name, kind=kind, model=model, prices=prices, preset=preset_name or name, **cited, **knobs)
    out._check(err(source if not set(cls._KNOBS) & set(over) else "overrides"))
    return out


def _citation(flat: Preset, err: Callable[..., ProviderParamsError]) -> dict[str, Any]:
    """``source`` (the page a preset follows, as text) and ``checked`` (an ISO date, YYYY-MM-DD)."""
    src, day = flat.get("source", ""), flat.get("checked")
    if not isinstance(src, str):
        raise err("source", f"must be a string (the page's address), got {src!r}")
    if day is not None:
        try:
            if not isinstance(day, str) or len(day) != 10:
                raise ValueError
            datetime.date.fromisoformat(day)
        except ValueError:
            raise err("checked", f"must be a date written YYYY-MM-DD, got {day!r}",
                      "write the day you checked the rules against the source page") from None
    return {"source": src, "checked": day}


def _prices(raw: Any, mult: Any, err: Callable[..., ProviderParamsError]) -> Prices:
    for label, d, keys in (("prices", raw, _PRICE_KEYS), ("multipliers", mult, _MULT_KEYS)):
        if not isinstance(d, Mapping):
            raise err(label, f"must be a JSON object, got {type(d).__name__}")
        for k, v in d.items():
            if k.startswith("_"):
                continue
            if k not in keys:
                raise err(f"{label}.{k}", f"unknown {label[:-1]}", f"known: {', '.join(keys)}")
            _Knob("num").check(v, err, f"{label}.{k}")
    for k in ("input", "output"):
        if k not in raw:
            raise err(f"prices.{k}", "missing", "give the model's price in USD per million tokens")
    got = {k: float(raw[k]) for k in _PRICE_KEYS if k in raw}
    # An explicit price wins; else input x multiplier (none given: no discount). Rounded so that
    # 3 x 0.1 shows as 0.3 in the JSON, not 0.30000000000000004.
    for k in _MULT_KEYS:
        got.setdefault(k, round(got["input"] * float(mult.get(k, 1.0)), 12))
    return Prices(**got)
