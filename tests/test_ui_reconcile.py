"""The Cache tab's reconciliation (issue 32; workbench/ui/reconcile_view.py, the reconcile step of
WorkbenchState.panels): per turn, the reported cache figures beside the predicted ones, the class
and the advice, every figure the very one `workbench analyze SESSION --json` prints.

The session is tests/fixtures/usage_reconcile.json: a hand-written but realistic log of one
support conversation (five calls, OpenAI Chat Completions usage computed from OpenAI's documented
rules on the qwen2.5 token counts): turn 2 reads what it may (match), turn 3 comes 7 min 40 s
later (ttl_lapse), turn 4 reads nothing 38 s later (provider_miss), turn 5 logged no usage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_follow import Host

from workbench.analysis import analyze
from workbench.analysis.reconcile import ADVICE
from workbench.analysis.reconcile_session import reconcile_turns
from workbench.errors import Cancelled
from workbench.sessions import load_session
from workbench.ui.controller import Controller
from workbench.ui.follow import KEY, FollowView, LogFollower
from workbench.ui.html import cache_html
from workbench.ui.reconcile_view import NO_USAGE, reconcile_rows
from workbench.ui.state import NEEDS, PARTS, WorkbenchState

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "fixtures" / "usage_reconcile.json"


def cli_turns(path: Path) -> list[dict[str, Any]]:
    p = subprocess.run([sys.executable, "-m", "workbench.cli.main", "analyze", str(path), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    turns: list[dict[str, Any]] = json.loads(p.stdout)["turns"]
    return turns


def cli_figures(row: dict[str, Any]) -> dict[str, Any]:
    """A view row less what the view adds (turn, advice): the CLI's row."""
    return {k: v for k, v in row.items() if k not in ("turn", "advice")}


@pytest.fixture(scope="module")
def cli() -> list[dict[str, Any]]:
    return cli_turns(SAMPLE)


def test_rows_are_the_cli_json_rows_and_reconcile_turns_own(cli: list[dict[str, Any]]) -> None:
    state = WorkbenchState(str(SAMPLE), autosave=None, restore=False)
    p = state.panels(NEEDS["Cache"])
    assert p.reconciled and not p.reconcile_error
    rows = reconcile_rows(p.reconciliation)
    assert [r["turn"] for r in rows] == [1, 2, 3, 4, 5]
    # The CLI's JSON, figure for figure; a turn without usage has no row there and says so here.
    for row, t in zip(rows, cli):
        if "reconciliation" in t:
            assert cli_figures(row) == t["reconciliation"]
            assert row["advice"] == ADVICE[row["class"]]
        else:
            assert row == {"turn": t["turn"], "usage": None, "note": NO_USAGE}
    # ... and reconcile_turns called as the CLI calls it, on a cold assembly of the file.
    session = load_session(str(SAMPLE))
    asm = state.assembler()
    direct = reconcile_turns(session.raw, analyze(asm, list(session.turns)), asm, None)
    assert [cli_figures(r) if "class" in r else None for r in rows] == list(direct.per_turn)
    assert [r.get("class") for r in rows] == ["match", "match", "ttl_lapse", "provider_miss", None]
    assert rows[1]["reported"]["cached"] == rows[1]["predicted"]["cached"] == 1152
    assert rows[3]["reported"]["cached"] == 0 and rows[3]["predicted"]["cached"] == 1408


def test_the_cache_tab_shows_reported_predicted_class_and_advice(cli: list[dict[str, Any]]) -> None:
    state = WorkbenchState(str(SAMPLE), autosave=None, restore=False)
    html = cache_html(state.panels(NEEDS["Cache"]))
    for t in cli:
        r = t.get("reconciliation")
        if r is not None:
            assert f'<td class="wb-rec-reported">{r["reported"]["cached"]:,}</td>' in html
            assert f'<td class="wb-rec-predicted">{r["predicted"]["cached"]:,}</td>' in html
            assert f"<b>{r['class']}</b>" in html
    assert "prompt_cache_key" in html and "between 5 and 60 minutes" in html and NO_USAGE in html


def test_a_session_without_usage_shows_no_reconciliation_and_analyses_nothing() -> None:
    state = WorkbenchState(None, autosave=None, restore=False)      # support_chat.json: messages, no usage
    p = state.panels(NEEDS["Cache"])
    assert p.reconciled and p.reconciliation is None and not p.reconcile_error
    assert "wb-reconcile" not in cache_html(p) and state._analyses == []


def test_a_bad_usage_is_said_in_words_and_the_others_still_reconcile(tmp_path: Path) -> None:
    raw = json.loads(SAMPLE.read_text("utf-8"))
    raw["requests"][1]["response"]["usage"]["prompt_tokens_details"]["cached_tokens"] = "1152"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw), "utf-8")
    state = WorkbenchState(str(path), autosave=None, restore=False)
    rows = reconcile_rows(state.panels(NEEDS["Cache"]).reconciliation)
    assert rows[1]["usage"] is None and rows[1]["note"].startswith("usage not usable: ")
    assert "must be an integer" in rows[1]["note"]
    cli = cli_turns(path)
    assert [cli_figures(r) if "class" in r else None for r in rows] == [t.get("reconciliation") for t in cli]


def test_cancelled_midway_then_complete_gives_the_same_rows(cli: list[dict[str, Any]]) -> None:
    state = WorkbenchState(str(SAMPLE), autosave=None, restore=False)
    seen: list[str] = []

    def progress(what: str, done: int, total: int) -> None:
        seen.append(what)

    def stop_in_reconcile() -> None:
        if seen and seen[-1].startswith("reconciling") and len([s for s in seen if s.startswith("reconciling")]) > 2:
            raise Cancelled("superseded")

    with pytest.raises(Cancelled):
        state.panels(PARTS, check=stop_in_reconcile, progress=progress)
    rows = reconcile_rows(state.panels(PARTS).reconciliation)
    assert [cli_figures(r) if "class" in r else None for r in rows] == [t.get("reconciliation") for t in cli]


def test_another_turn_selected_reanalyses_nothing() -> None:
    """The turns' analyses are kept while their results are: selecting another turn (new panels)
    reuses every one, the same objects."""
    state = WorkbenchState(str(SAMPLE), autosave=None, restore=False)
    state.panels(NEEDS["Cache"])
    first = [a[2] for a in state._analyses]
    state.select_turn(2)
    p = state.panels(NEEDS["Cache"])
    assert p.turn == 2 and len(first) == 5
    assert all(a is b for a, b in zip((a[2] for a in state._analyses), first))


def test_a_followed_log_reconciles_its_calls_as_the_session_file_does(tmp_path: Path,
                                                                      cli: list[dict[str, Any]]) -> None:
    """The same five calls logged as JSON lines and followed: the log's timestamps and usage (which
    the requests read back from the log do not carry) give the same rows, as calls arrive."""
    raw = json.loads(SAMPLE.read_text("utf-8"))
    lines = []
    for r in raw["requests"]:
        req = {k: v for k, v in r.items() if k not in ("timestamp", "response")}
        lines.append(json.dumps({"timestamp": r["timestamp"], "conversation_id": "brewline-4821",
                                 "provider": "openai", "request": req, "response": r["response"]}) + "\n")
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(lines[:3]), "utf-8")
    follower = LogFollower(log)
    follower.poll()
    state = WorkbenchState(None, autosave=None)
    controller = Controller(state, Host(), background=False)
    view = FollowView(follower)
    controller.open(view.make(KEY + "brewline-4821", state))
    view.attach(state)
    rows = reconcile_rows(state.panels(NEEDS["Cache"]).reconciliation)
    assert [cli_figures(r) for r in rows] == [t["reconciliation"] for t in cli[:3]]
    with open(log, "a", encoding="utf-8") as f:
        f.write("".join(lines[3:]))
    follower.poll()
    update = view.sync(controller)
    assert update.added == 2 and state.doc.turn_count == 5
    rows = reconcile_rows(state.panels(NEEDS["Cache"]).reconciliation)
    assert [cli_figures(r) if "class" in r else None for r in rows] == [t.get("reconciliation") for t in cli]
    assert rows[4] == {"turn": 5, "usage": None, "note": NO_USAGE}
