"""The model picker's logic, for both hosts (no UI library here): what choosing a catalog model sets,
what a hand-picked template or tokenizer overrides, the KV shape the KV tab and Teach use, and the
lines the views show about it. (It takes the WorkbenchState as it comes, `state`: state.py uses
this module, not the other way round.)

A catalog model (workbench/catalog) sets the template, the tokenizer, the context window, the KV
shape and the image rule together, as `--model` does on the command line (cli/options.py,
`build_assembler`): the same assembler settings (`Assembler(model=...)` with the pickers' template
and tokenizer), so the views show what `workbench render --model NAME --json` prints. The
template and tokenizer pickers stay: one chosen by hand after a model wins over the model's (the
model's window and KV shape stay), and the note under the picker says so. The window, highest
first: the session file's own `context_window` (the budget box), the model's, the template's
default. No model (the default) is the workbench as it was: the pickers alone, and the KV views on
Llama-3-8B's shape, which they then say.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from ..catalog import ModelEntry, models
from ..engine.kv import KV_CONFIGS, KVConfig, from_catalog

NO_MODEL = ""                      # the picker's value for "no model"
NO_MODEL_LABEL = "(none: template and tokenizer below)"
DEFAULT_KV = "Llama-3-8B"          # the KV shape without a model's own (no model, or a hosted one)
NOT_PUBLIC = f"KV shape of {DEFAULT_KV} (the model's own is not public)"
NO_MODEL_KV = f"KV shape of {DEFAULT_KV} (no model chosen: pick one above to use its own)"


def model_options() -> dict[str, str]:
    """The picker's options, label -> value: no model first, then the catalog in its order (families
    together), hosted models marked as estimates."""
    out = {NO_MODEL_LABEL: NO_MODEL}
    for m in models():
        out[f"{m.id} (hosted: estimate)" if m.hosted else m.id] = m.id
    return out


# ------------------------------------------------------------------------------------------ the KV shape
@dataclass(frozen=True)
class KVChoice:
    """The KV shape the KV tab and Teach use, and what the view says about it ("" when it is the
    chosen model's own, with nothing to add)."""
    config: KVConfig
    note: str = ""


def kv_for(entry: ModelEntry | None) -> KVChoice:
    """The chosen model's KV shape (with its catalog note, for sliding windows and MLA), else
    Llama-3-8B's, said so."""
    if entry is None:
        return KVChoice(KV_CONFIGS[DEFAULT_KV], NO_MODEL_KV)
    if entry.kv is None:
        return KVChoice(KV_CONFIGS[DEFAULT_KV], NOT_PUBLIC)
    return KVChoice(from_catalog(entry), entry.kv_note or "")


def kv_options(entry: ModelEntry | None) -> list[str]:
    """The KV tab's shapes: the model's own first (when it has one), then the named ones."""
    own = [entry.id] if entry is not None and entry.kv is not None else []
    return own + list(KV_CONFIGS)


def kv_default(entry: ModelEntry | None) -> str:
    """The KV tab's shape when a model is chosen (or none is): its own, else Llama-3-8B."""
    return entry.id if entry is not None and entry.kv is not None else DEFAULT_KV


def resolve_kv(name: str | None, entry: ModelEntry | None) -> KVChoice:
    """The shape the KV tab's picker names: the model's own (its id), a named one, or (anything else)
    the model's choice. Never a path: a name from a page or a link is only looked up."""
    if entry is not None and entry.kv is not None and name == entry.id:
        return kv_for(entry)
    if name in KV_CONFIGS:
        if name == DEFAULT_KV and (entry is None or entry.kv is None):
            return kv_for(entry)          # the default stand-in: say why it is this one
        assert name is not None
        return KVChoice(KV_CONFIGS[name], "" if entry is None else f"chosen by hand (the model's: {kv_default(entry)})")
    return kv_for(entry)


# ------------------------------------------------------------------------------------------ what the views say
def overridden(state: Any) -> list[str]:
    """What was picked by hand over the model's own: 'template', 'tokenizer', 'custom template'."""
    m = state.model
    if m is None:
        return []
    out = []
    if state.custom_source.strip():
        out.append("custom template")
    elif state.template != m.template:
        out.append("template")
    if state.tokenizer != (m.tokenizer or "auto"):
        out.append("tokenizer")
    return out


def model_note_html(state: Any) -> str:
    """The line under the picker: what the model set, what is overridden, an unknown name's error."""
    parts = []
    if state.model_error:
        parts.append(f'<div class="wb-model-error wb-diag-error">{escape(state.model_error)}</div>')
    m = state.model
    if m is None:
        hint = requested_model_hint(state)
        if hint:
            parts.append(f'<div class="wb-model-hint wb-muted">{escape(hint)}</div>')
        return f'<div class="wb-model-note">{"".join(parts)}</div>'
    kv = kv_for(m)
    shape = (f"KV {m.kv.layers} layers × {m.kv.kv_heads} KV heads × {m.kv.head_dim} ({m.kv.dtype}), "
             f"{m.kv.bytes_per_token:,} bytes per token") if m.kv is not None else kv.note
    images = _images_said(m)
    sets = (f"<b>{escape(m.label)}</b>: template {escape(m.template)}, tokenizer "
            f"{escape(m.tokenizer or 'the template’s fallback')}, window {m.context_window:,}, {escape(shape)}"
            f"{'; ' + escape(images) if images else ''}")
    parts.append(f'<div class="wb-model-sets wb-muted">{sets}</div>')
    for what in overridden(state):
        now = {"template": state.template, "tokenizer": state.tokenizer, "custom template": "the box's"}[what]
        own = {"template": m.template, "tokenizer": m.tokenizer or "auto", "custom template": m.template}[what]
        parts.append(f'<div class="wb-model-override wb-diag-warning">{escape(what)} overridden: '
                     f'{escape(now)} (the model’s is {escape(own)}); the model’s window and KV shape stay</div>')
    return f'<div class="wb-model-note">{"".join(parts)}</div>'


def _images_said(m: ModelEntry) -> str:
    if not m.vision:
        return "images not counted (no image rule)"
    if m.hosted:
        return f"images: {m.vision}'s published estimate"
    return f"images: the {m.vision} rule"


def estimate_html(entry: ModelEntry | None) -> str:
    """The model's estimate label, where the summary line is: its counts are not exact (a hosted
    model's tokenizer and chat format are not public; a vocabulary not shipped offline). The first
    sentence shown, the rest on opening."""
    if entry is None or not entry.estimate:
        return ""
    first, _, rest = entry.estimate.partition(". ")
    kind = "hosted model: an estimate" if entry.hosted else "an estimate"
    more = f"<div>{escape(rest)}</div>" if rest else ""
    return (f'<details class="wb-estimate"><summary><b>{escape(entry.label)}</b> · {kind} · '
            f'{escape(first.rstrip("."))}.</summary>{more}</details>')


def requested_model_hint(state: Any) -> str:
    """A session's requests may name a model (the request's own `model` field): never applied (as on
    the command line), but said, when the catalog holds it."""
    from ..catalog import find
    try:
        named = state.doc.request(state.turn).get("model")
    except Exception:  # noqa: BLE001 - a hint only
        return ""
    entry = find(named) if isinstance(named, str) else None
    if entry is None:
        return ""
    return f"this session's requests name {entry.id}: pick it to use its template, window and KV shape"


__all__ = ["DEFAULT_KV", "NOT_PUBLIC", "NO_MODEL", "NO_MODEL_KV", "KVChoice", "estimate_html", "kv_default",
           "kv_for", "kv_options", "model_note_html", "model_options", "overridden", "requested_model_hint",
           "resolve_kv"]
