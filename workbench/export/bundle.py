"""Export: a versioned bundle that makes production assemble exactly what the workbench assembled.

    DIR/workbench.yaml          the configuration (schema: workbench.schema.json beside it)
    DIR/workbench.schema.json   its JSON Schema
    DIR/chat_template.jinja     the template, usable as vLLM / SGLang --chat-template
    DIR/goldens/NAME.json       per chosen session and turn: the prepared request and the expected
                                ids (base64 uint32 little-endian), their count and SHA-256
    DIR/README.md               for the production team

Only stable configuration goes in: the template (name, source file and SHA-256), the tokenizer
(name and the SHA-256 of its vocabulary files), the normalization limits and role-cleaning
policy, the injection policy, prompt-template constants and declarations (request variables are
declared, never valued), the budget and truncation policy, the cache-key recipe and the cache
tiers (the Redis URL only as the name of an environment variable), provider cache hints, and the
semantic cache's settings (embedder, window, thresholds, rules version). Everything of it that
changes the output is sealed (seal.py): a SHA-256 per field, checked by the loader and by verify.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..assembly import AUTO_CACHE_BYTES, Assembler
from ..assembly.media import rule_spec
from ..cache.store import ENV_REDIS_URL
from ..errors import WorkbenchError
from . import safe_yaml
from .goldens import golden_of
from .schema import SCHEMA, SCHEMA_VERSION
from .seal import SEALED, changes, fields_of, golden_seal, seal_of

KEY_RECIPE = {
    "version": 2,
    "hash": "sha256",
    "joined_by": "the parts' lengths in characters, then the parts joined by \\x00",
    "inputs": ["build context fingerprint: template (name, source hash, origin, arguments), tokenizer (name, "
               "vocabulary hash), every setting that changes the output (cleaning, injection per source, intake "
               "and render limits, variables, budget and truncation), the date a clock-reading template reads",
               "tool schemas exactly as sent (key order included)",
               "chain of (message position, message fingerprint: role, content, name, ids, reasoning, tool calls)",
               "generation-prompt flag"],
    "never": ["timestamps", "request ids", "user ids"],
}
TEMPLATE_FILE = "chat_template.jinja"


def _plain(x: Any) -> Any:
    """A JSON-able copy of a config dataclass or value."""
    if dataclasses.is_dataclass(x):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x) if not callable(getattr(x, f.name))}
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def config_of(asm: Assembler, *, redis_env: str = ENV_REDIS_URL, redis_required: bool = False,
              provider_hints: dict | None = None, semantic: dict | None = None) -> dict:
    """The bundle's configuration for an assembler (what workbench.yaml holds). `semantic`: the
    semantic cache's settings (`SemanticCache.settings()`); the defaults when not given."""
    if semantic is None:
        from ..semantic.cache import settings
        semantic = settings()
    c, t, tok = asm.config, asm.template, asm.tokenizer
    cache = asm.cache
    v = c.variables
    tok_name = c.tokenizer if isinstance(c.tokenizer, str) else tok.name
    return {
        "schema_version": SCHEMA_VERSION,
        "created_by": f"prompt-workbench {__version__}",
        "template": {"name": t.name, "file": TEMPLATE_FILE, "sha256": t.version, "description": t.description,
                     "tokenizer": t.tokenizer, "context_window": t.context_window, "reserve": t.reserve,
                     "bos_token": t.bos_token, "eos_token": t.eos_token, "kwargs": _plain(t.kwargs),
                     "origin": t.origin},
        "tokenizer": {"name": tok_name, "version": tok.version},
        "policies": {"injection": c.injection, "tool_injection": c.tool_injection,
                     "assistant_injection": c.assistant_injection, "cleaning": _plain(c.cleaning),
                     "intake": _plain(c.intake),
                     "render_limits": _plain(c.render_limits), "template_kwargs": _plain(c.template_kwargs),
                     # How images become tokens (None: text only): the exported template is a file,
                     # which carries no image rule of its own.
                     "vision": rule_spec(asm.context.vision)},
        "budget": {"context_window": c.context_window, "reserve": c.reserve, "truncation": _plain(c.truncation)},
        "variables": {"constants": _plain(dict(v.constants)), "builtins": v.builtins,
                      "declarations": {k: _plain(s) for k, s in v.declarations.items()},
                      "limits": {k: getattr(v, k) for k in ("max_loop_iterations", "max_steps",
                                                            "max_collection_items", "max_output_chars",
                                                            "max_seconds")}},
        "cache": {"key_recipe": KEY_RECIPE,
                  "local_bytes": AUTO_CACHE_BYTES if cache is None else cache_local_bytes(cache),
                  "redis": {"url_env": redis_env, "required": redis_required, "ttl_s": 3600,
                            "namespace": "segments"}},
        "providers": provider_hints or {},
        "semantic_cache": semantic,
        "goldens": [],
    }


def cache_local_bytes(cache: Any) -> int:
    local = getattr(cache, "_local", None)
    return int(getattr(local, "max_bytes", AUTO_CACHE_BYTES) or AUTO_CACHE_BYTES)


def export_bundle(asm: Assembler, out: str | Path, sessions: Sequence[tuple[str, Sequence[dict]]] = (), *,
                  turns: str = "all", redis_env: str = ENV_REDIS_URL, redis_required: bool = False,
                  provider_hints: dict | None = None, overwrite: bool = False, requests: bool = True,
                  semantic: dict | None = None, fixes: dict[str, Any] | None = None) -> Path:
    """Write the bundle to `out` (built in a temporary folder beside it, then moved into place:
    a bundle is whole or absent). `sessions`: (name, prepared requests) pairs for the goldens; with
    `requests`, the first session's last turn is also written as provider requests (requests/).
    `fixes`: session name -> the fixes applied to it (analysis/fixes.py `Applied`; its requests are
    the fixed ones): the golden records them, and verify applies them again (export/fixed.py)."""
    if turns not in ("all", "last"):
        raise WorkbenchError(f"turns must be 'all' or 'last', got {turns!r}")
    dest = Path(out)
    if dest.exists() and any(dest.iterdir()):
        if not overwrite:
            raise WorkbenchError(f"{dest} exists and is not empty", hint="choose a new folder, or pass --force")
        if not (dest / "workbench.yaml").is_file():
            raise WorkbenchError(f"{dest} holds files but no workbench.yaml: not replacing a folder that is not "
                                 "a bundle", hint="choose a new folder")
    config = config_of(asm, redis_env=redis_env, redis_required=redis_required, provider_hints=provider_hints,
                       semantic=semantic)
    provider = None
    if requests and sessions:
        from .requests import provider_requests
        sess = asm.session()
        provider = provider_requests([sess.assemble(r) for r in sessions[0][1]])
        config["providers"] = {**config["providers"], "session": sessions[0][0],
                               "anthropic_breakpoints": provider["breakpoints"]["rules"],
                               "files": {"openai": "requests/openai.json", "anthropic": "requests/anthropic.json",
                                         "predicted": "requests/predicted.json"}}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        (tmp / "goldens").mkdir()
        (tmp / TEMPLATE_FILE).write_text(asm.template.source, encoding="utf-8", newline="")
        seen: set[str] = set()
        for name, requests in sessions:
            stem = _safe_stem(name, seen)
            applied = (fixes or {}).get(name)
            if applied is not None:
                from .fixed import fixed_golden
                golden = fixed_golden(asm, name, list(requests), applied, turns)
            else:
                golden = golden_of(asm, name, requests, turns=turns)
            text = json.dumps(golden, ensure_ascii=False)
            (tmp / "goldens" / f"{stem}.json").write_text(text, encoding="utf-8")
            entry = {"session": name, "file": f"goldens/{stem}.json", "turns": [t["turn"] for t in golden["turns"]]}
            if applied is not None:
                entry.update(fixes=[o.fix for o in applied.outcomes], projection=applied.settings.projection)
            # Sealed over the golden as verify will read it back (JSON's types, not Python's).
            entry["seal"] = golden_seal(json.loads(text))
            config["goldens"].append(entry)
        if provider is not None:
            (tmp / "requests").mkdir()
            for key in ("openai", "anthropic"):
                (tmp / "requests" / f"{key}.json").write_text(json.dumps(provider[key], ensure_ascii=False, indent=1),
                                                               encoding="utf-8")
            (tmp / "requests" / "predicted.json").write_text(
                json.dumps({"breakpoints": provider["breakpoints"], **provider["predicted"]}, indent=1),
                encoding="utf-8")
        text, config["seal"] = _sealed_yaml(config)
        (tmp / "workbench.yaml").write_text(text, encoding="utf-8")
        (tmp / "workbench.schema.json").write_text(json.dumps(SCHEMA, indent=2), encoding="utf-8")
        (tmp / "README.md").write_text(_readme(config), encoding="utf-8")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _safe_stem(name: str, seen: set[str]) -> str:
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in Path(name).stem) or "session"
    base, n = stem, 2
    while stem in seen:
        stem, n = f"{base}_{n}", n + 1
    seen.add(stem)
    return stem


def _sealed_yaml(config: dict) -> tuple[str, dict]:
    """The YAML text with its seal, computed over the configuration as the loader will read it back
    (after the YAML round trip), and proved to read back sealed."""
    head = ("# Prompt Workbench export bundle. Edit nothing by hand: export again. The loader checks the\n"
            "# template's SHA-256, the tokenizer's vocabulary hash and the seal (a SHA-256 per field of\n"
            f"# {', '.join(SEALED)}).\n"
            "# `workbench verify` re-assembles the goldens. Only cache.redis and cache.local_bytes may be edited.\n")
    plain = _plain({k: v for k, v in config.items() if k != "seal"})
    data = safe_yaml.loads(safe_yaml.dump(plain), "workbench.yaml")
    data["seal"] = seal_of(data)
    # What the loader will read must be what this process assembled with, value for value.
    wrote, read = fields_of(plain), fields_of(data)
    differ = sorted(k for k in wrote.keys() | read.keys() if wrote.get(k) != read.get(k))
    text = head + safe_yaml.dump(data)
    if differ or changes(safe_yaml.loads(text, "workbench.yaml")):
        raise WorkbenchError(f"the configuration does not read back as it was written ({', '.join(differ)})",
                             hint="report this: the bundle would load as another configuration")
    return text, data["seal"]


def _readme(c: dict) -> str:
    t, tok, b = c["template"], c["tokenizer"], c["budget"]
    goldens = "\n".join(f"- `{g['file']}`: {g['session']}, turn(s) {', '.join(map(str, g['turns']))}"
                        for g in c["goldens"]) or "- (none chosen at export)"
    return f"""# Prompt assembly bundle

Exported by {c['created_by']} (schema version {c['schema_version']}).

- Template: `{t['name']}`, in `{t['file']}` (SHA-256 `{t['sha256']}`). Serve the model with the same
  template: `vllm serve MODEL --chat-template {t['file']}` (SGLang: `--chat-template {t['file']}`).
- Tokenizer: `{tok['name']}`, vocabulary SHA-256 `{tok['version']}`.
- Budget: context window {b['context_window'] or 'the template default'}, reserve {b['reserve'] or 'default'};
  truncation {b['truncation']}.
- Redis tier: the URL comes from the environment variable `{c['cache']['redis']['url_env']}`
  ({'required' if c['cache']['redis']['required'] else 'optional: unset means in-process cache only'}).

## Use

```python
import workbench
asm = workbench.load_bundle("path/to/this/folder", seal=SEAL)
result = asm.assemble(request)                         # the same ids the workbench showed
```

Only the core install is needed. The seal is a SHA-256 per field of everything that changes the
prompt (template, tokenizer version, policies, budget, variables, cache-key recipe, semantic
cache). The loader refuses a bundle whose fields no longer match it. SEAL is the seal's SHA-256
that `workbench export` printed: keep it in your deployment, outside this folder (a copy read from
here proves nothing), and a bundle that was edited and sealed again is refused too.
Do not edit this folder by hand: export again. Only `cache.redis` and `cache.local_bytes` in
`workbench.yaml` may be changed in place.

## Provider requests

{_requests_note(c)}

## Prove it, on every instance and every deploy

```bash
workbench verify path/to/this/folder --seal SEAL [more_sessions.json ...]
```

It re-assembles the goldens below and exits 1 on any drift, naming the first differing token,
its segment and message, and any template or tokenizer hash mismatch. Run it in CI and at
start-up: instances running different template or tokenizer versions are the drift it catches.

## Goldens

{goldens}
"""


def _requests_note(c: dict) -> str:
    p = c.get("providers") or {}
    if "files" not in p:
        return "None written (no session chosen at export)."
    return (f"`requests/openai.json` and `requests/anthropic.json` hold the last turn of {p['session']} as an "
            f"OpenAI Chat Completions and an Anthropic Messages request. The Anthropic one carries `cache_control` "
            f"where the simulation over the session's turns found it cheapest (rules: "
            f"{', '.join(p['anthropic_breakpoints']) or 'none'}); `requests/predicted.json` has the cached tokens "
            f"predicted per turn for both (counted with this bundle's tokenizer; example prices).")
