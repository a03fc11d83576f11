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
    ("make_semantic_dev2.py", "workbench/semantic/data/dev2.jsonl"),
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


# --- the expanders refuse sources that are not what they expect --------------------------------

@pytest.fixture
def tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TOOLS))


@pytest.mark.usefixtures("tools")
def test_a_key_written_twice_in_a_source_is_refused(tmp_path: Path) -> None:
    from datafile import DataFileError, load_yaml

    source = tmp_path / "twice.yaml"
    source.write_text("en:\n  base: [a]\n  paraphrase: [b]\n  paraphrase: [c]\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"line 4: the key 'paraphrase' is written twice"):
        load_yaml(source)


@pytest.mark.usefixtures("tools")
def test_an_unquoted_date_in_a_source_stays_text(tmp_path: Path) -> None:
    from datafile import load_yaml

    source = tmp_path / "date.yaml"
    source.write_text("depart_date: 2026-03-14\nat: 2026-01-13T06:41:00+01:00\n", encoding="utf-8")
    assert load_yaml(source) == {"depart_date": "2026-03-14", "at": "2026-01-13T06:41:00+01:00"}


@pytest.mark.usefixtures("tools")
def test_the_eval_expander_refuses_a_case_that_tests_nothing() -> None:
    from datafile import DataFileError
    from make_semantic_eval import CATEGORIES, build_cases

    block = {"base": ["how do I deploy billing to staging?"], **{c: ["another question?"] for c in CATEGORIES}}
    block["coreference"] = ["which services?", "billing and auth.", "how do I deploy the first one?"]
    assert len(build_cases([{"id": "s", "en": block, "zh": block}])) == 12
    block["entity_swap"] = block["base"]  # the new conversation is the cached one
    with pytest.raises(DataFileError, match="s/en/entity_swap: context and cached_context are identical"):
        build_cases([{"id": "s", "en": block, "zh": block}])


@pytest.mark.usefixtures("tools")
def test_the_sample_session_expander_writes_objects_as_json_text_and_checks_tool_pairs() -> None:
    from datafile import DataFileError
    from make_sample_sessions import build_session, check_session

    call = {"id": "$call0", "type": "function", "function": {"name": "f", "arguments": {"city": "Kyoto", "n": 2}}}
    source = {"session": {"format": "openai", "title": "t", "description": "d", "tools": [], "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "$call0", "content": {"ok": True}}]},
        "build": {"kind": "call_ids", "seed": 1, "count": 1}}
    session = build_session("s", source)
    assert list(session) == ["format", "title", "description", "messages", "tools"]
    tc = session["messages"][1]["tool_calls"][0]
    assert tc["id"].startswith("call_") and len(tc["id"]) == 29
    assert tc["function"]["arguments"] == '{"city": "Kyoto", "n": 2}'
    assert session["messages"][2] == {"role": "tool", "tool_call_id": tc["id"], "content": '{"ok": true}'}
    check_session("s", session)
    del session["messages"][2]  # a call without its result
    with pytest.raises(DataFileError, match="every tool call needs exactly one tool message"):
        check_session("s", session)
