"""The export bundle records the fixes applied to a session (export/fixed.py), and verify holds them:
it applies them again and checks the requests and the ids."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from workbench.cli.main import main
from workbench.export.verify import verify

ROOT = Path(__file__).resolve().parent.parent
TIMESTAMPS = str(ROOT / "sample_sessions" / "timestamp_system.json")
MINIMAL = str(ROOT / "sample_sessions" / "openai_minimal.json")


def golden(folder: Path) -> tuple[Path, dict]:
    path = next((folder / "goldens").glob("*.json"))
    return path, json.loads(path.read_text("utf-8"))


def test_bundle_records_the_fixes_and_verify_applies_them_again(tmp_path, capsys):
    out = tmp_path / "b"
    assert main(["export", TIMESTAMPS, "-o", str(out), "--fix", "move-volatile,sort-tool-keys", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verify"]["ok"] and d["verify"]["checked"][0]["tokens"] == 3496   # the fixed session's tokens
    path, g = golden(out)
    assert [f["fix"] for f in g["fixes"]["applied"]] == ["move-volatile", "sort-tool-keys"]
    assert g["fixes"]["projection"] is False
    assert "Current time" not in g["turns"][0]["request"]["messages"][0]["content"]
    assert "move-volatile" in (out / "workbench.yaml").read_text("utf-8")
    assert verify(out, [TIMESTAMPS]).ok                 # applied again to the session file as it is
    # A golden whose recorded fixes no longer give its requests: verify says so, and the ids drift.
    g["fixes"]["applied"] = [a for a in g["fixes"]["applied"] if a["fix"] != "move-volatile"]
    path.write_text(json.dumps(g), "utf-8")
    report = verify(out)
    assert not report.ok
    assert [m["field"] for m in report.mismatches] == ["fixes"] and report.drift


def test_pin_date_holds_a_clock_reading_template_across_days(tmp_path, monkeypatch):
    from workbench.templates import sandbox

    pinned, unpinned = tmp_path / "pinned", tmp_path / "unpinned"
    assert main(["export", MINIMAL, "-o", str(pinned), "--template", "gpt-oss", "--fix", "pin-date"]) == 0
    assert main(["export", MINIMAL, "-o", str(unpinned), "--template", "gpt-oss"]) == 0
    _, g = golden(pinned)
    assert g["fixes"]["applied"][0]["params"]["at"]           # the instant is recorded, to apply it again

    class Later(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def, override]
            return datetime(2031, 7, 1, 12, 0, 0, tzinfo=tz)

    monkeypatch.setattr(sandbox, "datetime", Later)          # verify runs on another day
    assert verify(pinned).ok
    moved = verify(unpinned)
    assert not moved.ok and moved.drift[0].first_difference is not None


def test_the_projection_when_chosen_is_recorded_and_verified(tmp_path, capsys):
    out = tmp_path / "p"
    code = main(["export", str(ROOT / "sample_sessions" / "coding_corrections.json"), "-o", str(out),
                 "--template", "qwen3", "--fix", "projection"])
    from workbench.errors import ProjectionUnavailable  # noqa: F401 - the error the build without it raises
    try:
        from workbench.analysis.fixes import projection_hook
        projection_hook()
    except ProjectionUnavailable:
        assert code == 2 and "not available yet" in capsys.readouterr().err
        return
    assert code == 0
    _, g = golden(out)
    assert g["fixes"]["projection"] is True and g["fixes"]["settings"]["projection"] is True
    assert "projection: true" in (out / "workbench.yaml").read_text("utf-8")
    assert verify(out).ok
