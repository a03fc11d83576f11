"""The semantic cache's evaluation harness: the shipped labelled set, the per-category report, the
calibration from the data, the threshold sweep, the CLI and the workbench panel."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.errors import WorkbenchError
from workbench.semantic.cache import SemanticCache, Thresholds
from workbench.semantic.embedders import HashingEmbedder
from workbench.semantic.evaluate import CATEGORIES, SHOULD_HIT, Case, calibrate, evaluate, load_dataset, score

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_set_covers_six_categories_in_two_languages() -> None:
    cases = load_dataset()
    assert len(cases) >= 300
    by = Counter((c.category, c.lang) for c in cases)
    for cat in CATEGORIES:
        assert by[(cat, "en")] >= 25 and by[(cat, "zh")] >= 25, cat
    assert all(c.should_hit is SHOULD_HIT[c.category] for c in cases)
    multi = sum(len(c.context) > 1 or len(c.cached_context) > 1 for c in cases)
    assert multi >= len(cases) // 2
    assert len({c.id for c in cases}) == len(cases)


def test_a_bad_dataset_line_names_its_line(tmp_path: Path) -> None:
    f = tmp_path / "set.jsonl"
    good = {"context": [{"role": "user", "content": "a"}], "cached_context": [{"role": "user", "content": "b"}],
            "category": "paraphrase", "should_hit": True, "lang": "en"}
    f.write_text(json.dumps(good) + "\n" + json.dumps({**good, "context": [{"role": "assistant", "content": "x"}]}))
    with pytest.raises(WorkbenchError, match="line 2: context and cached_context must end with a user message"):
        load_dataset(f)


def u(text: str) -> dict:
    return {"role": "user", "content": text}


def test_calibration_meets_the_precision_target_where_the_data_allows_it() -> None:
    easy = [Case(f"p{i}", (u(f"how do I reset the router model {i}"),), (u(f"how do I reset the router model {i}"),),
                 "paraphrase", True, "en") for i in range(20)]
    easy += [Case(f"n{i}", (u(f"what is the capital of country number {i}"),), (u(f"best pizza topping {i}"),),
                  "related_different", False, "en") for i in range(20)]
    cache = SemanticCache(HashingEmbedder())
    scored, _ = score(easy, cache)
    th, met = calibrate(scored, 0.95)
    neg = np.percentile([s.similarity for s in scored if not s.case.should_hit], 95)
    assert met and abs(th.high - float(neg)) <= 0.1 + 1e-9          # anchored on the negatives' 95th percentile
    out = evaluate(cache, easy)
    assert out["overall"]["precision"] == 1.0 and out["overall"]["recall"] == 1.0
    assert out["categories"]["paraphrase"]["hit_rate"] == 1.0 and out["categories"]["related_different"]["hits"] == 0


def test_the_report_on_the_shipped_set() -> None:
    out = evaluate(SemanticCache(HashingEmbedder()), load_dataset())
    assert list(out["categories"]) == list(CATEGORIES)
    assert sum(c["cases"] for c in out["categories"].values()) == out["cases"] >= 300
    assert set(out["by_language"]) == {"en", "zh"}
    t = out["thresholds"]
    assert t["calibrated"] and t["precision_target_met"] in (True, False)
    if not t["precision_target_met"]:
        assert t["high"] == t["low"] == round(t["negatives_p95"], 3)
    # Similarity alone: raising the threshold never raises the hit rate.
    rates = [r["similarity_only"]["hit_rate"] for r in out["sweep"]]
    assert all(a >= b for a, b in zip(rates, rates[1:]))
    fixed = evaluate(SemanticCache(HashingEmbedder()), load_dataset(), Thresholds(0.9, 0.8))
    assert fixed["thresholds"]["calibrated"] is False and fixed["thresholds"]["high"] == 0.9


def test_semantic_eval_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = tmp_path / "sweep.html"
    assert main(["semantic", "eval", "--embedder", "hashing", "--window", "3", "--json", "--chart", str(chart)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["window"] == 3 and d["embedder"].startswith("hashing")
    assert {k: {"hit_rate", "precision"} <= set(v) for k, v in d["categories"].items()} == {c: True for c in CATEGORIES}
    assert chart.read_text().count("Plotly") > 0 and "threshold sweep" in chart.read_text()
    assert main(["semantic", "eval", "--embedder", "hashing", "--thresholds", "0.9"]) == 2
    assert "HIGH,LOW" in capsys.readouterr().err
    assert main(["semantic", "eval", "--embedder", "hashing", "--thresholds", "0.5,0.9"]) == 2
    assert capsys.readouterr().err.startswith("error: thresholds must satisfy")
    assert main(["semantic", "eval", "--dataset", str(tmp_path / "none.jsonl")]) == 2


def test_the_workbench_panel_replays_the_session_and_explains(tmp_path: Path) -> None:
    from workbench.ui.semantic_panel import semantic_html
    from workbench.ui.state import WorkbenchState

    state = WorkbenchState(str(ROOT / "sample_sessions" / "tool_agent.json"), autosave=None)
    state.assemble()
    decision, cache = state.semantic(HashingEmbedder())
    # the earlier turns that end with a user message, and hold no correction (read-only), are stored
    assert 1 <= len(cache.entries) <= state.doc.turn_count - 1
    assert decision.nearest and decision.reason
    html = semantic_html(decision, cache)
    assert ("Reused" in html or "Not reused" in html) and "fingerprints" in html
    assert f"{decision.nearest[0].similarity:.3f}" in html


def test_the_held_out_set_ships_whole_and_in_two_halves_by_scenario() -> None:
    held = load_dataset("heldout")
    dev, test = load_dataset("heldout-dev"), load_dataset("heldout-test")
    assert len(held) == 240 and len(dev) == len(test) == 120
    assert {c.id.split("/")[0] for c in dev}.isdisjoint({c.id.split("/")[0] for c in test})
    assert {c.id for c in dev} | {c.id for c in test} == {c.id for c in held}
    for half in (dev, test):
        assert {c.category for c in half} == set(CATEGORIES) and {c.lang for c in half} == {"en", "zh"}
    # no scenario of the held-out set is one the rules were developed on
    assert {c.id.split("/")[0] for c in held}.isdisjoint({c.id.split("/")[0] for c in load_dataset()})
