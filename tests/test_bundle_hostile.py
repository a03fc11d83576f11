"""Export bundles against a hostile editor, the second probe's cases (issue 34, item 5): a golden's
`fixes` record malformed or edited (`error: unexpected TypeError/KeyError` before: goldens were not
sealed), `cache.redis.ttl_s: 1e308` (`unexpected OverflowError`, and a raw OverflowError from
`load_bundle`), and bundles that verified "ok: identical ids" having checked nothing (`goldens: []`,
a golden with `turns: []`). Every case runs `workbench verify` as the user does."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from workbench import Assembler, load_bundle, load_session
from workbench.cli.main import main
from workbench.errors import BundleError
from workbench.export.bundle import export_bundle
from workbench.export.loader import load
from workbench.export.seal import fields_of, golden_seal, seal_of, total_of
from workbench.export.verify import verify

ROOT = Path(__file__).resolve().parents[1]
SESSION = ROOT / "sample_sessions" / "tool_agent.json"
TIMESTAMPS = ROOT / "sample_sessions" / "timestamp_system.json"
GOLDEN = "goldens/tool_agent.json"
FIXED_GOLDEN = "goldens/timestamp_system.json"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    asm = Assembler(template="qwen2.5", cache=None)
    return export_bundle(asm, tmp_path_factory.mktemp("exported") / "bundle",
                         [("tool_agent.json", list(load_session(SESSION).turns))], turns="last")


@pytest.fixture(scope="module")
def exported_fixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fixed") / "bundle"
    assert main(["export", str(TIMESTAMPS), "-o", str(out), "--fix", "move-volatile,sort-tool-keys"]) == 0
    return out


@pytest.fixture
def bundle(exported: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(exported, tmp_path / "bundle"))


@pytest.fixture
def fixed(exported_fixed: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(exported_fixed, tmp_path / "fixed"))


def edit_yaml(folder: Path, fn: Callable[[dict[str, Any]], Any], *, reseal: bool = False) -> None:
    path = folder / "workbench.yaml"
    data = yaml.safe_load(path.read_text())
    fn(data)
    if reseal:           # what someone who knows the recipe can do; a pinned seal is the defence
        data["seal"] = seal_of(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def edit_golden(folder: Path, rel: str, fn: Callable[[dict[str, Any]], Any], *, reseal: bool = False) -> None:
    """Edit a golden file by hand; with `reseal`, its entry's seal and the bundle's seal follow."""
    path = folder / rel
    golden = json.loads(path.read_text())
    fn(golden)
    path.write_text(json.dumps(golden))
    if reseal:
        def entry(d: dict[str, Any]) -> None:
            next(g for g in d["goldens"] if g["file"] == rel)["seal"] = golden_seal(golden)
        edit_yaml(folder, entry, reseal=True)


def verify_cli(capsys: pytest.CaptureFixture[str], folder: Path, *more: str) -> tuple[int, str, str]:
    code = main(["verify", str(folder), *more])
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------ fixes are sealed

def test_the_honest_fixed_bundle_verifies_and_its_goldens_are_sealed_per_field(fixed: Path) -> None:
    entry = yaml.safe_load((fixed / "workbench.yaml").read_text())["goldens"][0]
    assert sorted(entry["seal"]) == ["fixes", "session", "template_sha256", "tokenizer_version", "turns"]
    assert "goldens" in load(fixed).config["seal"]["fields"]
    assert verify(fixed).ok


def test_an_edited_fixes_record_fails_verify_naming_it(fixed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fix taken out of the record, the rest left valid: before, verify applied what it found."""
    edit_golden(fixed, FIXED_GOLDEN, lambda g: g["fixes"]["applied"].pop(0))
    code, out, _ = verify_cli(capsys, fixed)
    assert code == 1
    assert (f"MISMATCH {FIXED_GOLDEN} (fixes): fixes was changed after the export (it no longer matches the "
            "seal)") in out
    assert out.rstrip().endswith("drift: this instance does not assemble what was exported")


@pytest.mark.parametrize("fixes, field", [
    ([], "fixes"),                                                  # TypeError before
    ({}, "fixes.applied"),                                          # KeyError before
    ({"applied": [5], "source": {}}, "fixes.applied[0]"),           # AttributeError before
    ({"applied": [{"fix": ["pin-date"]}], "source": {}}, "fixes.applied[0].fix"),
    ({"applied": [{"fix": "pin-date", "params": "at"}], "source": {}}, "fixes.applied[0].params"),
    ({"applied": [], "source": []}, "fixes.source"),
])
def test_a_malformed_fixes_record_is_one_error_line_naming_the_field(
        fixed: Path, capsys: pytest.CaptureFixture[str], fixes: Any, field: str) -> None:
    edit_golden(fixed, FIXED_GOLDEN, lambda g: g.update(fixes=fixes), reseal=True)
    with pytest.raises(BundleError) as e:
        verify(fixed)
    assert (e.value.file, e.value.field) == (FIXED_GOLDEN, field)
    code, out, err = verify_cli(capsys, fixed)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {FIXED_GOLDEN}: {field} ") and err.count("\n") == 1


@pytest.mark.parametrize("applied, fragment", [
    ([{"fix": "rm-rf"}], "unknown fix 'rm-rf'"),
    ([{"fix": "pin-date", "params": {"at": "yesterday"}}], "at: 'yesterday' is not an ISO date-time"),
])
def test_fixes_that_cannot_be_applied_again_are_a_bundle_error(fixed: Path, capsys: pytest.CaptureFixture[str],
                                                               applied: list[dict[str, Any]], fragment: str) -> None:
    """Well formed and resealed (an unpinned seal proves nothing): still a typed error, not a traceback."""
    edit_golden(fixed, FIXED_GOLDEN, lambda g: g["fixes"].update(applied=applied), reseal=True)
    code, _, err = verify_cli(capsys, fixed)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {FIXED_GOLDEN}: fixes: the recorded fixes cannot be applied again")
    assert fragment in err


def test_a_resealed_golden_is_refused_under_the_pinned_seal(fixed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pinned = load(fixed).seal
    edit_golden(fixed, FIXED_GOLDEN, lambda g: g["turns"][0]["request"]["messages"].append(
        {"role": "user", "content": "and one more thing"}), reseal=True)
    code, out, _ = verify_cli(capsys, fixed, "--seal", pinned)
    assert code == 1 and "MISMATCH workbench.yaml (seal.sha256): seal.sha256 is not the pinned seal" in out


def test_any_golden_field_edited_is_named(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_golden(bundle, GOLDEN, lambda g: g.update(session="other.json"))
    code, out, _ = verify_cli(capsys, bundle)
    assert code == 1 and f"MISMATCH {GOLDEN} (session): session was changed after the export" in out


def test_a_golden_sealed_before_goldens_were_is_reported_unsealed(bundle: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A bundle sealed by seal version 1 (its goldens not covered) still loads: its assembler's
    settings are all sealed. Its goldens cannot be trusted, and verify says so."""
    def version_1(d: dict[str, Any]) -> None:
        for g in d["goldens"]:
            g.pop("seal")
        fields = fields_of(d, 1)
        d["seal"] = {"version": 1, "sha256": total_of(fields, 1), "fields": fields}
    edit_yaml(bundle, version_1)
    assert "goldens" not in load(bundle).config["seal"]["fields"] and load_bundle(bundle) is not None
    code, out, _ = verify_cli(capsys, bundle)
    assert code == 1
    assert f"MISMATCH {GOLDEN} (seal): the golden is not sealed (the bundle was exported before goldens were " \
           "sealed)" in out


# ------------------------------------------------------------------------------ every number in range

@pytest.mark.parametrize("path, value, bound", [
    ("cache.redis.ttl_s", 1e308, "more than 0 and at most 315,360,000"),      # the issue's payload
    ("cache.redis.ttl_s", -1, "more than 0"),
    ("cache.redis.ttl_s", float("nan"), "more than 0"),
    ("cache.redis.ttl_s", 0, "more than 0"),
    ("cache.local_bytes", -1, "at least 0"),
    ("cache.local_bytes", 1 << 41, "at least 0 and at most 1,099,511,627,776"),
    ("template.context_window", 0, "at least 1"),
    ("template.reserve", -5, "at least 0"),
    ("budget.context_window", 10**12, "at least 1 and at most 1,000,000,000"),
    ("budget.reserve", -1, "at least 0"),
    ("budget.truncation.low_water", 1.5, "more than 0 and less than 1"),
    ("budget.truncation.summary_reserve", -64, "at least 0"),
    ("policies.render_limits.timeout_s", float("inf"), "more than 0 and at most 86,400"),
    ("policies.render_limits.timeout_s", -1, "more than 0"),
    ("policies.render_limits.max_output_chars", -1, "at least 1"),
    ("policies.render_limits.max_worker_bytes", 0, "at least 1"),
    ("policies.intake.max_messages", 10**30, "at least 1 and at most 9,007,199,254,740,992"),
    ("variables.limits.max_seconds", 0, "more than 0"),
    ("variables.limits.max_loop_iterations", -1, "at least 1"),
    ("semantic_cache.current_weight", 2.0, "more than 0 and at most 1"),
    ("semantic_cache.thresholds.high", 5.0, "at least -1 and at most 1"),
    ("semantic_cache.min_coverage", -0.5, "at least 0"),
    ("semantic_cache.short_ttl_s", float("-inf"), "more than 0"),
    ("semantic_cache.window", 10**9, "at least 0 and at most 10,000"),
    ("cache.key_recipe.version", 0, "at least 1"),
])
def test_every_number_in_the_bundle_is_range_checked_naming_the_field(
        bundle: Path, capsys: pytest.CaptureFixture[str], path: str, value: Any, bound: str) -> None:
    def put(d: dict[str, Any]) -> None:
        *head, last = path.split(".")
        for part in head:
            d = d[part]
        d[last] = value
    edit_yaml(bundle, put)
    with pytest.raises(BundleError) as e:
        load(bundle)
    assert (e.value.file, e.value.field) == ("workbench.yaml", path)
    assert f"workbench.yaml: {path} must be {bound}" in str(e.value)
    code, out, err = verify_cli(capsys, bundle)
    assert code == 2 and out == "" and err.startswith(f"error: workbench.yaml: {path} must be ")


def test_a_golden_turn_number_out_of_range_is_named(bundle: Path) -> None:
    edit_yaml(bundle, lambda d: d["goldens"][0].update(turns=[0]), reseal=True)
    with pytest.raises(BundleError, match=r"goldens\[0\]\.turns\[0\] must be at least 1") as e:
        load(bundle)
    assert e.value.field == "goldens[0].turns[0]"


def test_the_issue_ttl_with_redis_configured_is_a_bundle_error_not_an_overflow(
        bundle: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """With the Redis URL set, the TTL reached int(ttl_s * 1000): OverflowError, from load_bundle too."""
    monkeypatch.setenv("WORKBENCH_REDIS_URL", "redis://127.0.0.1:9/0")
    seal = load(bundle).seal
    edit_yaml(bundle, lambda d: d["cache"]["redis"].update(ttl_s=1e308))    # a deployment field: not sealed
    with pytest.raises(BundleError, match="cache.redis.ttl_s must be more than 0 and at most 315,360,000, got 1e"):
        load_bundle(bundle, seal=seal)
    code, _, err = verify_cli(capsys, bundle)
    assert code == 2 and err.startswith("error: workbench.yaml: cache.redis.ttl_s must be")
    edit_yaml(bundle, lambda d: d["cache"]["redis"].update(ttl_s=60))      # the honest edit still loads
    assert load_bundle(bundle, seal=seal) is not None


def test_an_integer_yaml_cannot_convert_is_a_bundle_error(bundle: Path) -> None:
    path = bundle / "workbench.yaml"
    path.write_text(path.read_text().replace("ttl_s: 3600", "ttl_s: 1" + "0" * 5_000))
    with pytest.raises(BundleError, match="workbench.yaml: a value YAML cannot read"):
        load(bundle)


# ------------------------------------------------------------------------------ nothing to check

def test_a_bundle_with_no_goldens_is_not_verified(bundle: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's payload: `goldens: []` printed "ok: identical ids" having compared nothing."""
    emptied = Path(shutil.copytree(bundle, tmp_path / "emptied"))
    edit_yaml(emptied, lambda d: d.update(goldens=[]))
    code, out, _ = verify_cli(capsys, emptied)
    assert code == 1 and "MISMATCH workbench.yaml (goldens): goldens was changed after the export" in out
    edit_yaml(emptied, lambda d: None, reseal=True)            # sealed again: the list is empty on purpose
    code, out, _ = verify_cli(capsys, emptied, str(SESSION))    # a session given alone is only assembled
    assert code == 1
    assert "MISMATCH workbench.yaml (goldens): the bundle holds no goldens: there are no exported ids to compare" in out
    assert out.rstrip().endswith("not verified: the bundle holds no exported ids to compare (see above)")
    report = verify(emptied)
    assert not report.ok and report.compared == 0 and report.to_json()["compared"] == 0
    # An export with no session chosen (the library allows it) is the same: nothing to verify.
    asm = Assembler(template="qwen2.5", cache=None)
    assert not verify(export_bundle(asm, tmp_path / "none", [])).ok


def test_a_golden_with_no_turns_is_not_verified(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_golden(bundle, GOLDEN, lambda g: g.update(turns=[]), reseal=True)
    code, out, _ = verify_cli(capsys, bundle)
    assert code == 1
    assert f"MISMATCH {GOLDEN} (turns): the golden holds no turns" in out
    assert out.rstrip().endswith("not verified: the bundle holds no exported ids to compare (see above)")


def test_golden_turns_the_fixes_no_longer_give_are_named_not_skipped(
        fixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The session file given to verify has fewer turns than the golden: those were passed over."""
    data = json.loads(TIMESTAMPS.read_text())
    data["requests"] = data["requests"][:2]
    short = tmp_path / TIMESTAMPS.name
    short.write_text(json.dumps(data))
    code, out, _ = verify_cli(capsys, fixed, str(short))
    assert code == 1
    assert f"MISMATCH {FIXED_GOLDEN} (turns): the fixes applied again give 2 of the golden's 5 turns" in out
    assert "checked timestamp_system.json: 2 turn(s)" in out


def test_a_golden_file_over_its_cap_names_the_cap(bundle: Path) -> None:
    with open(bundle / GOLDEN, "r+b") as f:
        f.truncate((256 << 20) + 1)          # sparse: judged on its size, never read
    with pytest.raises(BundleError, match="larger than 268,435,456 bytes .256 MiB., the cap on a bundle file") as e:
        verify(bundle)
    assert (e.value.file, e.value.field) == (GOLDEN, "goldens[0].file")
    assert "--turns last" in str(e.value)
