"""The model catalog (workbench/catalog): every entry resolves against what ships, the KV shapes the
engine also knows agree with it, names are unambiguous, no entry pairs a template with a tokenizer
that lacks its control tokens, and `--model` reaches every command that renders."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import pytest

from workbench import Assembler
from workbench.analysis.provider_params import ProviderParams
from workbench.catalog import KVShape, ModelEntry, closest, find, lookup, models
from workbench.catalog.catalog import CATALOG_FILE, index_of, parse
from workbench.cli.main import main
from workbench.engine.kv import KV_CONFIGS, KVConfig, from_catalog, kv_config
from workbench.engine.models import SYNTHETIC
from workbench.errors import EngineError, ModelNotFoundError, WorkbenchError
from workbench.templates import get_template
from workbench.templates.control_tokens import missing_control_tokens
from workbench.tokenizers import get_tokenizer

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = str(ROOT / "sample_sessions" / "support_chat.json")
OVERFLOW = str(ROOT / "sample_sessions" / "overflow.json")
DATA = json.loads((ROOT / "workbench").joinpath(*CATALOG_FILE).read_text("utf-8"))
ENTRIES = models()


def run_json(capsys, *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------ the data against what ships
def test_covers_the_shipped_families():
    ids = {e.id for e in ENTRIES}
    for mid in ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen2.5-VL-7B-Instruct",
                "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
                "mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mistral-Nemo-Instruct-2407",
                "google/gemma-3-27b-it", "deepseek-ai/DeepSeek-V3", "microsoft/phi-4", "openai/gpt-oss-120b",
                "gpt-4o", "gpt-5", "o3", "claude-sonnet-4-5", "gemini-2.5-pro"):
        assert mid in ids, mid
    # every shipped template but the generic chatml belongs to some model of the catalog
    from workbench.templates import shipped_names
    assert set(shipped_names()) - {e.template for e in ENTRIES} <= {"chatml"}


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_every_entry_resolves(entry: ModelEntry):
    template = get_template(entry.template)
    assert template.origin == "shipped"
    if entry.tokenizer is None:
        # no named tokenizer ships for it: only where the template has none either, and the entry says so
        assert template.tokenizer is None and entry.estimate and "tokenizer" in entry.estimate
    else:
        assert get_tokenizer(entry.tokenizer).name == entry.tokenizer
    assert entry.provider in ProviderParams.presets()
    params = ProviderParams.load(entry.provider, {"model": entry.price_model} if entry.price_model else None)
    if entry.price_model:
        assert params.model == entry.price_model
    assert (entry.kv is None) == entry.hosted
    assert entry.context_window >= 4096 and (entry.max_output is None or entry.max_output < entry.context_window)
    assert entry.source.startswith("https://") and "{id}" not in entry.source
    if entry.hosted:
        assert entry.estimate, "a hosted model's template and tokenizer are always an estimate"
    if entry.vision is None:
        assert not entry.vision_options
    assert lookup(entry.id) is entry


def test_image_rules_resolve():
    """An open model's rule is one of workbench/media's vision rules, with options that rule has; a
    hosted model names its provider's published estimate."""
    from workbench.media import VISION_RULES, vision_rule
    with_rules = [e for e in ENTRIES if e.vision and not e.hosted]
    assert {e.vision for e in with_rules} >= {"qwen2-vl", "gemma3", "mistral-small-3.1"}
    for e in with_rules:
        assert e.vision in VISION_RULES
        rule = vision_rule(e.vision, **e.vision_options)
        assert all(getattr(rule, k) == v for k, v in e.vision_options.items())
    assert {e.vision for e in ENTRIES if e.hosted} == {"openai", "anthropic", None}
    assert not any(e.vision for e in ENTRIES if e.family in ("qwen2.5", "qwen3", "llama3.1", "deepseek-v3"))


def test_kv_shapes_agree_with_the_engine():
    """The entries the engine also has an architecture for: same layers, KV heads, head dim and bytes,
    both against its KV table (kv.py) and its synthetic configs (models.py)."""
    paired = [e for e in ENTRIES if e.synthetic]
    assert len(paired) >= 4
    for e in paired:
        assert e.kv is not None
        engine = KV_CONFIGS[e.synthetic]
        mine = from_catalog(e)
        assert (mine.layers, mine.kv_heads, mine.head_dim, mine.dtype_bytes) == \
            (engine.layers, engine.kv_heads, engine.head_dim, engine.dtype_bytes), e.id
        assert mine.bytes_per_token == engine.bytes_per_token == e.kv.bytes_per_token
        _kind, cfg = SYNTHETIC[e.synthetic]
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        assert (cfg["num_hidden_layers"], cfg["num_key_value_heads"], head_dim) == \
            (e.kv.layers, e.kv.kv_heads, e.kv.head_dim), e.id


def test_bytes_per_token_is_the_engine_formula():
    for e in ENTRIES:
        if e.kv is None:
            continue
        k = e.kv
        assert k.bytes_per_token == KVConfig("x", k.layers, k.kv_heads, k.head_dim, k.dtype_bytes).bytes_per_token
    # Llama 3 8B in bf16: 128 KiB per token (engine/kv.py's docstring)
    assert lookup("meta-llama/Meta-Llama-3-8B-Instruct").kv.bytes_per_token == 128 * 1024


def test_names_are_unique():
    seen: dict[str, str] = {}
    for e in ENTRIES:
        for n in e.names:
            assert seen.setdefault(n.lower(), e.id) == e.id, f"{n!r}: {seen[n.lower()]} and {e.id}"
    assert len(seen) > len(ENTRIES)   # aliases and short names besides the ids
    # and the loader refuses a catalog where two models share a name
    data = copy.deepcopy(DATA)
    data["models"][1]["aliases"] = [data["models"][0]["id"].upper()]
    with pytest.raises(WorkbenchError, match="belongs to both"):
        index_of(parse(data))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.tokenizer], ids=lambda e: e.id)
def test_no_entry_template_lacks_its_control_tokens(entry: ModelEntry):
    """Item 4's check on the catalog itself, computed two ways: the function, and independently
    the template's own control tokens (special tokens of its natural tokenizer in a real render)
    encoded by the entry's tokenizer as single special ids."""
    template, tok = get_template(entry.template), get_tokenizer(entry.tokenizer)
    assert missing_control_tokens(template, tok) == ()
    result = Assembler(template=template, tokenizer=tok, cache=None).assemble(
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                      {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}]})
    assert "control_tokens_missing" not in {d.code for d in result.diagnostics}
    natural = get_tokenizer(template.tokenizer) if template.tokenizer else tok
    written = {t for _s, _e, t in natural.find_specials(result.text)}
    assert written, "the render writes control tokens"
    for t in written:
        ids = tok.encode(t)
        assert len(ids) == 1 and int(ids[0]) in set(tok.specials.values()), (t, ids)


def test_a_model_without_a_shipped_tokenizer_warns():
    """Gemma 3's vocabulary does not ship: its entries say so, and assembling warns that the control
    tokens are plain text (the fallback tokenizer lacks them)."""
    gemma = [e for e in ENTRIES if e.tokenizer is None]
    assert gemma and all(e.template == "gemma3" for e in gemma)
    asm = Assembler(template=gemma[0].template, tokenizer=gemma[0].tokenizer, cache=None)
    codes = [d.code for d in asm.assemble({"messages": [{"role": "user", "content": "Hi"}]}).diagnostics]
    assert "no_natural_tokenizer" in codes and "control_tokens_missing" in codes


# ------------------------------------------------------------------ lookup
def test_lookup_by_id_alias_short_name_any_case():
    m = lookup("Qwen/Qwen2.5-7B-Instruct")
    assert lookup("qwen/qwen2.5-7b-instruct") is m and lookup("Qwen2.5-7B-Instruct") is m
    assert lookup("  QWEN2.5-7B-INSTRUCT ") is m
    assert lookup("claude-sonnet-4.5") is lookup("claude-sonnet-4-5-20250929") is lookup("claude-sonnet-4-5")
    assert lookup("gpt-4o-2024-08-06").id == "gpt-4o"
    assert find("no-such-model") is None and find(None) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "expected"), [
    ("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct"), ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"),
    ("gpt4o", "gpt-4o"), ("claude-sonnet", "claude-sonnet-4-5"), ("gemma-3-27b", "google/gemma-3-27b-it")])
def test_unknown_names_list_the_closest(name, expected):
    with pytest.raises(ModelNotFoundError) as info:
        lookup(name)
    assert expected in info.value.closest and expected in str(info.value)
    assert len(closest(name)) <= 5


def test_unknown_model_on_the_command_line(capsys):
    assert main(["render", SUPPORT, "--model", "llama-3.1-8b", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: unknown model 'llama-3.1-8b'")
    assert "meta-llama/Llama-3.1-8B-Instruct" in err


@pytest.mark.parametrize(("field", "value", "message"), [
    ("kv", None, "KV shape"), ("kv", {"layers": 0, "kv_heads": 8, "head_dim": 128}, "layers"),
    ("context_window", "big", "integer"), ("colour", "red", "unknown field"), ("family", "nope", "family"),
    ("kv", {"layers": 32, "kv_heads": 8, "head_dim": 128, "dtype": "int3"}, "dtype")])
def test_bad_catalog_data_is_refused_with_its_place(field, value, message):
    data = copy.deepcopy(DATA)
    data["models"][0][field] = value
    with pytest.raises(WorkbenchError, match=message) as info:
        parse(data, "models.json")
    assert "models[0]" in str(info.value)
    hosted = copy.deepcopy(DATA)
    row = next(r for r in hosted["models"] if r["family"] == "openai")
    row["kv"] = {"layers": 1, "kv_heads": 1, "head_dim": 1}
    with pytest.raises(WorkbenchError, match="not public"):
        parse(hosted)


# ------------------------------------------------------------------ --model on the commands
def test_render_with_a_model(capsys):
    d = run_json(capsys, "render", SUPPORT, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--json")
    assert (d["template"]["name"], d["tokenizer"]["name"], d["budget"]["context_window"]) == \
        ("llama3.1", "llama3", 131072)
    assert d["model"] == {"id": "meta-llama/Llama-3.1-8B-Instruct", "label": "Llama 3.1 8B Instruct",
                          "estimate": None, "hosted": False}
    plain = run_json(capsys, "render", SUPPORT, "--template", "llama3.1", "--json")
    assert plain["model"] is None and plain["token_ids"] == d["token_ids"]


def test_each_option_still_overrides_the_model(capsys):
    d = run_json(capsys, "render", SUPPORT, "--model", "Qwen/Qwen3-8B", "--template", "chatml", "--context-window",
                 "9000", "--json")
    assert (d["template"]["name"], d["tokenizer"]["name"], d["budget"]["context_window"]) == ("chatml", "qwen3", 9000)
    d = run_json(capsys, "render", SUPPORT, "--model", "Qwen/Qwen3-8B", "--tokenizer", "qwen2.5", "--json")
    assert (d["template"]["name"], d["tokenizer"]["name"]) == ("qwen3", "qwen2.5")
    assert "control_tokens_missing" in {x["code"] for x in d["diagnostics"]}   # qwen2.5 lacks <think>


def test_a_session_files_window_ranks_between_the_option_and_the_model(capsys):
    raw = json.loads(Path(OVERFLOW).read_text("utf-8"))["context_window"]
    d = run_json(capsys, "render", OVERFLOW, "--model", "gpt-4.1", "--json")
    assert d["budget"]["context_window"] == raw != lookup("gpt-4.1").context_window
    d = run_json(capsys, "render", OVERFLOW, "--model", "gpt-4.1", "--context-window", "65536", "--json")
    assert d["budget"]["context_window"] == 65536


def test_hosted_model_renders_as_a_labelled_estimate(capsys):
    d = run_json(capsys, "render", SUPPORT, "--model", "gpt-4o", "--json")
    assert d["model"]["hosted"] and "estimate" in d["model"] and d["model"]["estimate"]
    assert (d["template"]["name"], d["tokenizer"]["name"]) == ("gpt-oss", "gpt-oss")
    # the text is o200k_base's: every ordinary piece encodes to the same ids with o200k_base
    o200k = get_tokenizer("o200k_base")
    for s in d["segments"][:5]:
        for c in get_tokenizer("gpt-oss").chunks(s["text"]):
            if not c.special:
                assert o200k.encode_ordinary(s["text"][c.start:c.end]).tolist() == c.ids.tolist()
    assert main(["render", SUPPORT, "--model", "gpt-4o"]) == 0
    assert "estimate:" in capsys.readouterr().out.splitlines()[0]


def test_models_listing(capsys):
    rows = run_json(capsys, "models", "--json")
    assert [r["id"] for r in rows] == [e.id for e in ENTRIES]
    llama = next(r for r in rows if r["id"] == "meta-llama/Llama-3.1-70B-Instruct")
    assert llama["kv"]["bytes_per_token"] == 80 * 8 * 128 * 2 * 2 and llama["template"] == "llama3.1"
    assert all(r["kv"] is None for r in rows if r["hosted"])
    assert main(["models"]) == 0
    text = capsys.readouterr().out
    assert "Qwen/Qwen2.5-VL-7B-Instruct" in text and "qwen2-vl" in text and "327,680" in text


def test_kv_takes_the_models_shape(capsys):
    d = run_json(capsys, "kv", SUPPORT, "--model", "Qwen/Qwen2.5-72B-Instruct", "--json")
    assert (d["config"]["layers"], d["config"]["kv_heads"], d["config"]["head_dim"]) == (80, 8, 128)
    assert d["turns"][0]["kv_bytes"] == d["turns"][0]["tokens"] * 327680
    assert d["model"]["id"] == "Qwen/Qwen2.5-72B-Instruct"
    # --config wins, and takes catalog ids too
    d = run_json(capsys, "kv", SUPPORT, "--model", "Qwen/Qwen2.5-72B-Instruct", "--config", "deepseek-ai/DeepSeek-V3",
                 "--json")
    assert d["config"]["bytes_per_token"] == 61 * 576 * 2
    assert kv_config("Llama-3-8B") is KV_CONFIGS["Llama-3-8B"]     # the engine's own names first
    assert main(["kv", SUPPORT, "--model", "gpt-4o"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "hosted" in err and "--config" in err
    with pytest.raises(EngineError, match="not public"):
        from_catalog(lookup("claude-opus-4-6"))


def test_simulate_takes_the_models_preset_and_prices(capsys):
    a = run_json(capsys, "simulate", SUPPORT, "--model", "claude-haiku-4-5", "--json")
    b = run_json(capsys, "simulate", SUPPORT, "--model", "claude-opus-4-6", "--json")
    assert a["provider"] == b["provider"] == "anthropic"
    assert [t["tokens"] for t in a["turns"]] == [t["tokens"] for t in b["turns"]]
    assert b["turns"][0]["cost"] > a["turns"][0]["cost"] > 0     # each model's own prices
    assert a["model"]["id"] == "claude-haiku-4-5"
    # an explicit provider wins; a price model its preset lacks falls back to the preset's own
    c = run_json(capsys, "simulate", SUPPORT, "--model", "claude-haiku-4-5", "--provider", "vllm", "--json")
    assert c["provider"] == "vllm" and [t["tokens"] for t in c["turns"]] == [t["tokens"] for t in a["turns"]]
    # a preset's model that is not in the catalog is still a price model, as before
    d = run_json(capsys, "simulate", SUPPORT, "--provider", "anthropic", "--model", "claude-haiku-3", "--json")
    e = run_json(capsys, "simulate", SUPPORT, "--provider", "anthropic", "--json")
    assert d["model"] is None and d["turns"] != e["turns"]                          # its own prices ...
    assert [t["tokens"] for t in d["turns"]] == [t["tokens"] for t in e["turns"]]   # ... and the default template


def test_prefill_maps_a_catalog_model_to_the_engines_architecture(capsys):
    from workbench.cli.prefill import engine_model
    args = argparse.Namespace(model="Qwen/Qwen2.5-7B-Instruct")
    assert engine_model(args) == "Qwen2.5-7B" and args.catalog_model is lookup("Qwen2.5-7B-Instruct")
    args = argparse.Namespace(model="tiny")
    assert engine_model(args) == "tiny" and not hasattr(args, "catalog_model")
    for name, why in (("meta-llama/Llama-3.1-70B-Instruct", "KV shape"), ("gpt-4o", "hosted")):
        assert main(["prefill", SUPPORT, "--model", name]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no architecture" in err and why in err


def test_kvshape_is_plain_data():
    k = KVShape(32, 8, 128)
    assert k.dtype_bytes == 2 and k.to_json()["bytes_per_token"] == 131072


def test_docstring_examples_run():
    import doctest

    from workbench.catalog import catalog as module
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_the_app_refuses_an_unknown_model_with_one_line_naming_the_closest(capsys: pytest.CaptureFixture) -> None:
    from workbench.cli.main import main as cli_main
    assert cli_main(["app", "--model", "gpt-4q", "--no-show"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown model 'gpt-4q'") and "gpt-4o" in err[0]
