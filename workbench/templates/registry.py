"""Chat templates: the shipped registry, `.jinja` files and Hugging Face folders.

A template's version is the SHA-256 of its source, so any edit changes every
cache key built on it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from .. import strict_json
from ..errors import TemplateError, TemplateNotFoundError
from .render import compile_checked


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    source: str
    description: str = ""
    tokenizer: str | None = None          # natural tokenizer, selected unless one is given
    context_window: int | None = None     # of the model the template belongs to
    reserve: int | None = None            # default output reserve
    bos_token: str | None = None
    eos_token: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)  # extra template variables
    origin: str = "shipped"               # shipped | file | hf-folder | inline
    # The image rule of the model the template belongs to (workbench/media/vision.py), for a template
    # that places images: each image part becomes that model's image tokens. None: text only.
    vision: str | None = None

    @property
    def version(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "description": self.description,
                "tokenizer": self.tokenizer, "context_window": self.context_window, "vision": self.vision}


@dataclass(frozen=True, slots=True)
class _Shipped:
    name: str
    description: str
    tokenizer: str | None
    context_window: int
    bos: str | None
    eos: str | None
    reserve: int = 4096
    vision: str | None = None


SHIPPED: dict[str, _Shipped] = {s.name: s for s in [
    _Shipped("chatml", "ChatML (<|im_start|>role ... <|im_end|>), the generic format", "qwen2.5", 32768,
             None, "<|im_end|>"),
    _Shipped("qwen2.5", "Qwen2.5 Instruct: ChatML, default system prompt, <tool_call> JSON tools", "qwen2.5",
             32768, None, "<|im_end|>"),
    _Shipped("qwen3", "Qwen3: ChatML, <think> reasoning kept only after the last user query", "qwen3",
             40960, None, "<|im_end|>"),
    _Shipped("llama3", "Llama 3 Instruct: header ids, <|eot_id|>, content trimmed", "llama3", 8192,
             "<|begin_of_text|>", "<|eot_id|>"),
    _Shipped("llama3.1", "Llama 3.1/3.2/3.3 Instruct: date line, JSON tool calls, ipython role", "llama3",
             131072, "<|begin_of_text|>", "<|eot_id|>"),
    _Shipped("mistral-v3", "Mistral v3 ([INST], [AVAILABLE_TOOLS] before the last user turn)", "mistral-v3",
             32768, "<s>", "</s>"),
    _Shipped("mistral-tekken", "Mistral Tekken (Nemo): v3 layout without the SentencePiece spaces",
             "mistral-tekken", 131072, "<s>", "</s>"),
    _Shipped("mistral-v7", "Mistral v7 ([SYSTEM_PROMPT], [TOOL_CONTENT])", "mistral-v7", 131072, "<s>", "</s>"),
    _Shipped("qwen2.5-vl", "Qwen2.5-VL Instruct: ChatML with images (<|vision_start|><|image_pad|>×N"
             "<|vision_end|>, N as Qwen2-VL's processor counts)", "qwen2.5", 32768, None, "<|im_end|>",
             vision="qwen2-vl"),
    _Shipped("gemma3", "Gemma 3 (<start_of_turn>user/model, system folded into the first user turn; "
             "images as 256 soft tokens)", None, 131072, "<bos>", "<end_of_turn>", vision="gemma3"),
    _Shipped("deepseek-v3", "DeepSeek V3 (<｜User｜>/<｜Assistant｜>, tool calls with ｜tool▁sep｜)", "deepseek-v3",
             131072, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    _Shipped("phi4", "Phi-4 (<|im_start|>role<|im_sep|> ... <|im_end|>)", "phi4", 16384, None, "<|im_end|>"),
    _Shipped("gpt-oss", "gpt-oss harmony (<|start|>role<|channel|>...<|message|>...<|end|>)", "gpt-oss", 131072,
             None, "<|return|>"),
]}


# What the command line and the workbench assemble with when no template is named.
DEFAULT_TEMPLATE = "qwen2.5"


def shipped_names() -> list[str]:
    return list(SHIPPED)


@cache
def _shipped(name: str) -> ChatTemplate:
    s = SHIPPED[name]
    try:
        source = resources.files("workbench.templates").joinpath("shipped", f"{name}.jinja").read_text("utf-8")
    except FileNotFoundError:
        raise TemplateNotFoundError(f"the shipped template file {name}.jinja is missing",
                                    hint="reinstall the package") from None
    return ChatTemplate(name=name, source=source, description=s.description, tokenizer=s.tokenizer,
                        context_window=s.context_window, reserve=s.reserve, bos_token=s.bos, eos_token=s.eos,
                        vision=s.vision)


def _token_str(v: object) -> str | None:
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None


def from_hf_folder(path: Path) -> ChatTemplate:
    """A Hugging Face model folder: chat_template.jinja, else tokenizer_config.json's chat_template."""
    cfg_path = path / "tokenizer_config.json"
    cfg: dict[str, Any] = {}
    if cfg_path.exists():
        try:
            cfg = strict_json.loads(cfg_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise TemplateError(f"{cfg_path.name} is not valid JSON ({exc})", template=str(path)) from None
        if not isinstance(cfg, dict):
            raise TemplateError(f"{cfg_path.name} must hold a JSON object, got {type(cfg).__name__}",
                                template=str(path))
    source = None
    jinja = path / "chat_template.jinja"
    if jinja.exists():
        source = jinja.read_text(encoding="utf-8")
    else:
        ct = cfg.get("chat_template")
        if isinstance(ct, list):  # named templates: the default one
            ct = next((t.get("template") for t in ct if isinstance(t, dict) and t.get("name") == "default"), None)
        source = ct if isinstance(ct, str) else None
    if source is None:
        raise TemplateNotFoundError("no chat template in this folder", template=str(path),
                                    hint="expected chat_template.jinja or a chat_template in tokenizer_config.json")
    tokenizer = f"hf:{path}" if (path / "tokenizer.json").exists() else None
    return ChatTemplate(name=path.name, source=source, description=f"chat template from {path}",
                        tokenizer=tokenizer, context_window=cfg.get("model_max_length") if isinstance(
                            cfg.get("model_max_length"), int) and cfg["model_max_length"] < 10**8 else None,
                        bos_token=_token_str(cfg.get("bos_token")), eos_token=_token_str(cfg.get("eos_token")),
                        origin="hf-folder")


def get_template(ref: "str | ChatTemplate") -> ChatTemplate:
    """A template by shipped name, `.jinja` file path, or Hugging Face folder; compiled to check syntax."""
    if isinstance(ref, ChatTemplate):
        tmpl = ref
    elif not isinstance(ref, str) or not ref:
        raise TemplateNotFoundError(f"template must be a name or a path, got {ref!r}")
    elif ref in SHIPPED:
        return _shipped(ref)
    else:
        p = Path(ref).expanduser()
        if p.is_dir():
            tmpl = from_hf_folder(p)
        elif p.is_file():
            try:
                source = p.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise TemplateError("file is not UTF-8 text", template=str(p)) from None
            tmpl = ChatTemplate(name=p.stem, source=source, description=f"template file {p.name}", origin="file")
        else:
            raise TemplateNotFoundError(f"no shipped template or file named {ref!r}",
                                        hint="run `workbench templates` to list them, or pass a .jinja file / "
                                             "a Hugging Face folder")
    compile_checked(tmpl.source, tmpl.name)
    return tmpl


def from_source(source: str, name: str = "custom") -> ChatTemplate:
    tmpl = ChatTemplate(name=name, source=source, description="inline template", origin="inline")
    compile_checked(source, name)
    return tmpl
