"""Load a bundle: the same Assembler the workbench exported, in any process, with only the core
install. Nothing is silently assembled differently: a template edited without a new hash, a
tokenizer whose vocabulary is not the one exported, a policy or limit changed after the export (the
seal, seal.py), a newer schema, a missing tokenizer or a required Redis URL that is not set are
each an error naming the file and the field. The bundle is read as untrusted data: YAML without
anchors or aliases and within size bounds (safe_yaml.py), files only inside its folder (paths.py).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..assembly import Assembler, AssemblerConfig
from ..cache.store import TwoTierCache
from ..cleaning import CleaningPolicy
from ..errors import BundleError, WorkbenchError
from ..intake.limits import IntakeLimits
from ..templates.registry import ChatTemplate
from ..templates.render_types import RenderLimits
from ..tokenizers import get_tokenizer
from ..truncation import TruncationPolicy
from ..variables import VariableConfig, VariableSpec
from . import paths, safe_yaml
from .schema import check
from .seal import HINT as SEAL_HINT
from .seal import changes as seal_changes

CONFIG_FILE = "workbench.yaml"
# The shipped templates are under 16 KB; a template this large was not exported from a workbench.
MAX_TEMPLATE_BYTES = 4 << 20


@dataclass
class Bundle:
    path: Path
    config: dict
    # None only from load(strict=False) when the configuration fails its seal: nothing is built
    # from a configuration that is not the one exported.
    assembler: Assembler | None
    mismatches: list[dict] = field(default_factory=list)   # {file, field, message}: hash drift (strict=False)
    sealed: bool = True

    @property
    def seal(self) -> str:
        """The seal's SHA-256: pin it outside the folder (`load(folder, seal=...)`)."""
        return str(self.config["seal"]["sha256"])

    def semantic_cache(self, embedder: Any = None, **kw: Any) -> Any:
        """A SemanticCache that decides as the workbench did (needs the `semantic` extra)."""
        if not self.sealed:
            raise BundleError(f"{CONFIG_FILE}: the configuration fails its seal", file=CONFIG_FILE, field="seal",
                              hint=SEAL_HINT)
        return semantic_cache(self.config, embedder, **kw)


def semantic_cache(config: dict, embedder: Any = None, **kw: Any) -> Any:
    settings = config.get("semantic_cache")
    if not settings:
        raise BundleError(f"{CONFIG_FILE}: the bundle has no semantic_cache section", file=CONFIG_FILE,
                          field="semantic_cache", hint="export it again with this version")
    from ..semantic.cache import from_settings
    try:
        return from_settings(settings, embedder, **kw)
    except WorkbenchError as exc:
        raise BundleError(f"{CONFIG_FILE}: {exc.message}", file=CONFIG_FILE, field="semantic_cache",
                          hint=exc.hint) from None


def read_config(folder: str | Path) -> dict:
    """workbench.yaml, parsed as plain bounded data and checked against the schema; every file
    name in it is checked to lie inside the folder (the seal is checked by `load`)."""
    if not Path(folder).is_dir():
        raise BundleError(f"{folder}: no such bundle folder", file=str(folder),
                          hint="give the folder `workbench export` wrote")
    data = safe_yaml.read(paths.inside(Path(folder), CONFIG_FILE, None, file=CONFIG_FILE), CONFIG_FILE)
    check(data, CONFIG_FILE)
    paths.check_name(data["template"]["file"], "template.file")
    for i, g in enumerate(data["goldens"]):
        paths.check_name(g["file"], f"goldens[{i}].file")
    files = (data.get("providers") or {}).get("files")
    for key, rel in (files.items() if isinstance(files, dict) else ()):
        paths.check_name(rel, f"providers.files.{key}")
    return data


def load(folder: str | Path, *, strict: bool = True, cache: Any = "config", seal: str | None = None) -> Bundle:
    """Build the bundle's assembler. With strict=False, hash mismatches are recorded in
    `mismatches` instead of raised (what `workbench verify` reports as drift); a configuration that
    fails its seal is recorded too, and then no assembler is built (`assembler` is None).
    `seal`: the seal's SHA-256 as pinned by the caller (printed by `workbench export`); a bundle
    sealed otherwise is refused, even one re-sealed after an edit."""
    root = Path(folder)
    c = read_config(root)
    mismatches: list[dict] = []

    broken = seal_changes(c, seal)
    if broken:
        if strict:
            more = f" (and {', '.join(ch.field for ch in broken[1:])})" if len(broken) > 1 else ""
            raise BundleError(f"{CONFIG_FILE}: {broken[0].describe()}{more}", file=CONFIG_FILE,
                              field=broken[0].field, hint=SEAL_HINT)
        mismatches += [{"file": CONFIG_FILE, "field": ch.field, "message": ch.describe()} for ch in broken]
        return Bundle(root, c, None, mismatches, sealed=False)

    def mismatch(file: str, fld: str, message: str, hint: str) -> None:
        if strict:
            raise BundleError(f"{file}: {message}", file=file, field=fld, hint=hint)
        mismatches.append({"file": file, "field": fld, "message": message})

    t = c["template"]
    tfile = paths.inside(root, t["file"], "template.file")
    try:
        source = paths.read_bytes(tfile, MAX_TEMPLATE_BYTES, t["file"], "template.file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"{t['file']}: not UTF-8 ({exc})", file=t["file"], field="template.file") from None
    actual = hashlib.sha256(source.encode("utf-8")).hexdigest()
    if actual != t["sha256"]:
        mismatch(t["file"], "template.sha256",
                 f"the template's SHA-256 is {actual[:12]}…, {CONFIG_FILE} says {t['sha256'][:12]}… "
                 "(edited without a new hash)", "re-export from the workbench instead of editing the bundle")
    template = ChatTemplate(name=t["name"], source=source, description=t.get("description", ""),
                            tokenizer=t.get("tokenizer"), context_window=t.get("context_window"),
                            reserve=t.get("reserve"), bos_token=t.get("bos_token"), eos_token=t.get("eos_token"),
                            kwargs=dict(t.get("kwargs") or {}), origin="bundle")

    tk = c["tokenizer"]
    try:
        tokenizer = get_tokenizer(tk["name"])
    except WorkbenchError as exc:
        raise BundleError(f"{CONFIG_FILE}: tokenizer.name {tk['name']!r} cannot be loaded here: {exc}",
                          file=CONFIG_FILE, field="tokenizer.name",
                          hint="install the tokenizer pack it names (pip install 'prompt-workbench[packs]')") from None
    if tokenizer.version != tk["version"]:
        mismatch(CONFIG_FILE, "tokenizer.version",
                 f"the tokenizer {tk['name']!r} here has vocabulary hash {tokenizer.version[:12]}…, the bundle was "
                 f"exported with {tk['version'][:12]}…", "install the exported tokenizer version")

    p, b, v = c["policies"], c["budget"], c["variables"]

    def build(kind: Any, data: Any, fld: str) -> Any:
        try:
            return kind(**(data or {}))
        except (TypeError, WorkbenchError) as exc:
            # An unknown field (TypeError), or a known one with a value its policy refuses.
            raise BundleError(f"{CONFIG_FILE}: {fld}: {exc}", file=CONFIG_FILE, field=fld) from None

    variables = build(VariableConfig, {
        "constants": dict(v.get("constants") or {}), "builtins": v.get("builtins", True),
        "declarations": {k: build(VariableSpec, d, f"variables.declarations.{k}")
                         for k, d in (v.get("declarations") or {}).items()},
        **(v.get("limits") or {})}, "variables")
    if cache == "config":
        cache = _cache(c["cache"])
    try:
        # Bundles written before the per-source policies existed get their defaults.
        asm = Assembler(template=template, tokenizer=tokenizer, injection=p["injection"],
                        tool_injection=p.get("tool_injection", AssemblerConfig.tool_injection),
                        assistant_injection=p.get("assistant_injection", AssemblerConfig.assistant_injection),
                        cleaning=build(CleaningPolicy, p["cleaning"], "policies.cleaning"),
                        intake=build(IntakeLimits, p["intake"], "policies.intake"),
                        render_limits=build(RenderLimits, p["render_limits"], "policies.render_limits"),
                        template_kwargs=dict(p.get("template_kwargs") or {}),
                        vision=p.get("vision") or False,
                        context_window=b.get("context_window"), reserve=b.get("reserve"),
                        truncation=build(TruncationPolicy, b["truncation"], "budget.truncation"),
                        variables=variables, cache=cache)
    except BundleError:
        raise
    except WorkbenchError as exc:
        raise BundleError(f"{CONFIG_FILE}: {exc}", file=CONFIG_FILE) from None
    return Bundle(root, c, asm, mismatches)


def _cache(cfg: dict) -> TwoTierCache:
    r = cfg["redis"]
    url = os.environ.get(r["url_env"], "").strip()
    if r["required"] and not url:
        raise BundleError(f"{CONFIG_FILE}: cache.redis.url_env names {r['url_env']}, which is not set, and the "
                          "Redis tier is required", file=CONFIG_FILE, field="cache.redis.url_env",
                          hint=f"export {r['url_env']}=redis://HOST:6379/0")
    return TwoTierCache(local_bytes=int(cfg.get("local_bytes", 64 << 20)), redis_url=url or None,
                        namespace=r.get("namespace", "segments"), ttl_s=float(r.get("ttl_s", 3600)))


def load_bundle(folder: str | Path, *, seal: str | None = None) -> Assembler:
    """The exported assembler (strict: any hash or seal mismatch is an error). `seal`: pin the
    seal `workbench export` printed, so that a bundle edited and re-sealed is refused too."""
    asm = load(folder, seal=seal).assembler
    assert asm is not None   # strict loading raises instead
    return asm
