"""The committed generated files are exactly what their sources expand to.

`workbench/semantic/data/*.jsonl` and `sample_sessions/*.json` are written by the expanders in
`tools/` from the YAML under `tools/data/`. Each expander runs here as a user would run it (its own
process, from the repository's root), into a temp folder, and every file it writes must equal the
committed one byte for byte: an edit to a source that is not regenerated, or a hand edit to a
generated file, fails here rather than silently drifting apart.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"


def _run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(TOOLS / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _assert_same_bytes(written: Path, committed: Path) -> None:
    new, old = written.read_bytes(), committed.read_bytes()
    if new == old:
        return
    at = next((i for i, (a, b) in enumerate(zip(new, old)) if a != b), min(len(new), len(old)))
    line = old[:at].count(b"\n") + 1
    pytest.fail(f"{committed.relative_to(ROOT)} differs from what its source expands to, first at byte "
                f"{at} (line {line}); sizes {len(new)} vs {len(old)} committed. Regenerate it with the "
                f"tools/make_*.py that writes it, or fix the source under tools/data/.")


@pytest.mark.parametrize("script, committed", [
    ("make_semantic_eval.py", "workbench/semantic/data/eval.jsonl"),
    ("make_semantic_heldout.py", "workbench/semantic/data/heldout.jsonl"),
])
def test_semantic_set_is_its_source_expanded(tmp_path: Path, script: str, committed: str) -> None:
    out = tmp_path / Path(committed).name
    _run(script, str(out))
    _assert_same_bytes(out, ROOT / committed)


def test_sample_sessions_are_their_sources_expanded(tmp_path: Path) -> None:
    _run("make_sample_sessions.py", "--out", str(tmp_path), "--no-summary")
    written = sorted(p.name for p in tmp_path.iterdir())
    committed = sorted(p.name for p in (ROOT / "sample_sessions").glob("*.json"))
    # every committed session has a source, and every source a committed session
    assert written == committed
    for name in written:
        _assert_same_bytes(tmp_path / name, ROOT / "sample_sessions" / name)
