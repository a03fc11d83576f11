"""The semantic cache's evaluation harness: the shipped labelled set, the per-category report, the
calibration from the data, the threshold sweep, the CLI and the workbench panel."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.errors import WorkbenchError
from workbench.semantic.bootstrap import Costs, intervals
from workbench.semantic.cache import SemanticCache, Thresholds
from workbench.semantic.embedders import HashingEmbedder
from workbench.semantic.evaluate import (
    CATEGORIES,
    SHOULD_HIT,
    Case,
    calibrate,
    evaluate,
    load_dataset,
    make_cache,
    report,
    score,
    shared,
)

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
    assert not t["calibrated"] and t["source"] == "configured" and t["precision_target_met"] is None
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


# --- evaluation that cannot flatter itself ---------------------------------------------------------
def cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["semantic", "eval", *argv, "--json"]) == 0
    out: dict = json.loads(capsys.readouterr().out)
    return out


def cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one `error:` line a refused command prints (exit 2, nothing on stdout)."""
    assert main(["semantic", "eval", *argv]) == 2
    got = capsys.readouterr()
    assert got.out == "" and got.err.startswith("error: ") and got.err.count("\n") == 1, got.err
    return got.err


def test_eval_scores_with_the_configured_thresholds_not_ones_tuned_on_the_scored_set() -> None:
    cases = load_dataset()
    cache = SemanticCache(HashingEmbedder(), thresholds=Thresholds(0.97, 0.55))
    scored, _ = score(cases, cache)
    tuned, _ = calibrate(scored, 0.95)
    assert (tuned.high, tuned.low) != (0.97, 0.55)     # calibrating here would have picked another pair
    out = evaluate(cache, cases)
    t = out["thresholds"]
    assert (t["high"], t["low"], t["source"], t["calibrated"]) == (0.97, 0.55, "configured", False)
    assert out["overall"] == report(scored, Thresholds(0.97, 0.55))["overall"]
    assert out["overall"] != report(scored, tuned)["overall"]


def test_the_cli_uses_the_caches_own_thresholds_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    d = cli_json(["--embedder", "hashing", "--dataset", "heldout-dev"], capsys)
    own = make_cache("hashing", 5).thresholds
    assert (d["thresholds"]["high"], d["thresholds"]["low"]) == (own.high, own.low)
    assert d["thresholds"]["source"] == "configured" and d["thresholds"]["calibrated_on"] is None
    given = cli_json(["--embedder", "hashing", "--dataset", "heldout-dev", "--thresholds", "0.95,0.6"], capsys)
    t = given["thresholds"]
    assert (t["high"], t["low"], t["source"]) == (0.95, 0.6, "given")


def test_on_the_default_embedder_the_report_carries_intervals_and_the_baseline() -> None:
    """The real default embedder on heldout-dev: the cache's own thresholds, every group's figures
    with an interval around them, for the rules and for similarity alone."""
    cache = make_cache(None, 5)
    out = evaluate(cache, load_dataset("heldout-dev"))
    assert out["embedder"] == cache.embedder.name and out["thresholds"]["source"] == "configured"
    assert (out["thresholds"]["high"], out["thresholds"]["low"]) == (cache.thresholds.high, cache.thresholds.low)
    f = out["figures"]
    assert f["overall"]["cases"] == 120 and f["overall"]["scenarios"] == 10
    assert set(f["by_language"]) == {"en", "zh"} and set(f["by_category"]) == set(CATEGORIES)
    assert set(f["by_category_language"]) == {f"{c}/{lang}" for c in CATEGORIES for lang in ("en", "zh")}
    # the old keys agree with the new figures
    assert f["overall"]["rules"]["precision"]["value"] == out["overall"]["precision"]
    assert f["overall"]["similarity_only"]["recall"]["value"] == out["similarity_only_at_high"]["recall"]
    assert f["by_category"]["paraphrase"]["rules"]["hit_rate"]["value"] == out["categories"]["paraphrase"]["hit_rate"]
    assert_intervals_hold_their_values(f)


def assert_intervals_hold_their_values(f: dict) -> None:
    rows = [f["overall"]] + [row for kind in ("by_category", "by_language", "by_category_language")
                             for row in f[kind].values()]
    seen = 0
    for row in rows:
        for rule in ("rules", "similarity_only"):
            for metric, fig in row[rule].items():
                if fig["value"] is not None:
                    assert fig["low"] <= fig["value"] <= fig["high"], (metric, fig)
                    seen += 1
    assert seen >= len(rows) * 4      # most figures are defined (precision is not where nothing hit)


def test_calibration_on_a_set_apart_is_accepted_and_used(capsys: pytest.CaptureFixture[str]) -> None:
    d = cli_json(["--embedder", "hashing", "--calibrate-on", "eval", "--dataset", "heldout-dev"], capsys)
    cache = make_cache("hashing", 5)
    th, met = calibrate(score(load_dataset("eval"), cache)[0], 0.95)
    t = d["thresholds"]
    assert (t["high"], t["low"], t["source"], t["calibrated"]) == (th.high, th.low, "calibrated", True)
    assert t["precision_target_met"] is met and t["calibrated_on"]["cases"] == 360
    assert d["overall"] == report(score(load_dataset("heldout-dev"), cache)[0], th)["overall"]
    # the halves of the held-out set are apart, and the shipped sets from each other
    assert shared(load_dataset("heldout-dev"), load_dataset("heldout-test")) == []
    assert shared(load_dataset("eval"), load_dataset("heldout-test")) == []


def test_calibrating_on_the_scored_cases_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for dev, test in (("heldout", "heldout-test"), ("heldout-test", "heldout-test"), ("heldout-dev", "heldout"),
                      ("eval", "eval")):
        err = cli_error(["--embedder", "hashing", "--calibrate-on", dev, "--dataset", test], capsys)
        assert "share" in err and "scenarios" in err, err
    # the same file under another path
    lines = (ROOT / "workbench/semantic/data/eval.jsonl").read_text(encoding="utf-8").splitlines()[:24]
    a, b = tmp_path / "a.jsonl", tmp_path / "copy" / "b.jsonl"
    b.parent.mkdir()
    a.write_text("\n".join(lines) + "\n", encoding="utf-8")
    b.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "24 case ids" in cli_error(["--embedder", "hashing", "--calibrate-on", str(a), "--dataset", str(b)], capsys)


def case(id: str, now: str, before: str, should: bool = True) -> Case:
    return Case(id, (u(now),), (u(before),), "paraphrase" if should else "entity_swap", should, "en")


def test_overlap_is_found_by_id_by_text_and_by_scenario() -> None:
    dev = [case("router/en/paraphrase", "how do I reset my router", "how can I reset the router"),
           case("line-1", "what does the red light mean", "why is the light red")]
    # the same id, other text
    assert shared(dev, [case("router/en/paraphrase", "x", "y")])[0].startswith("1 case ids")
    # the same scenario, another case of it
    assert shared(dev, [case("router/zh/paraphrase", "路由器怎么重置", "怎么重置路由器")]) == ["1 scenarios"]
    # the same texts under other ids: swapped sides, other spacing
    assert shared(dev, [case("other/1", "how can I  reset the router ", "how do I reset my router")]) == ["1 texts"]
    # a loader-made id names a line, not a case: two files' line-1 are different cases
    assert shared(dev, [case("line-1", "how do I bake bread", "bread baking steps")]) == []
    with pytest.raises(WorkbenchError, match="share 1 texts"):
        evaluate(SemanticCache(HashingEmbedder()), [case("b", "why is the light red", "what does the red light mean")],
                 calibrate_on=dev)


def test_bad_inputs_get_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = cli_error(["--embedder", "hashing", "--thresholds", "0.9,0.7", "--calibrate-on", "eval"], capsys)
    assert "--thresholds and --calibrate-on" in err
    assert "cannot read" in cli_error(["--embedder", "hashing", "--calibrate-on", str(tmp_path / "no.jsonl")], capsys)
    assert "--false-hit-cost" in cli_error(["--embedder", "hashing", "--false-hit-cost", "-1"], capsys)
    assert "--cost-per-call" in cli_error(["--embedder", "hashing", "--cost-per-call", "nan"], capsys)
    with pytest.raises(WorkbenchError, match="not both"):
        evaluate(SemanticCache(HashingEmbedder()), load_dataset("heldout-dev"), Thresholds(),
                 calibrate_on=load_dataset("eval"))


def test_the_text_report_shows_each_group_with_intervals_and_the_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["semantic", "eval", "--embedder", "hashing", "--dataset", "heldout-dev", "--cost-per-call", ".5"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"at 0\.5 per call, the rules save [+-]\d+\.\d\d \[", text)
    assert "(the cache's own)" in text and "resamples by scenario" in text
    for group in ("overall", *CATEGORIES, "en", "zh", "paraphrase/zh"):
        assert any(line.startswith(group + " ") for line in text.splitlines()), group
    assert text.count("  similarity alone") == 1 + len(CATEGORIES) + 2 + 2 * len(CATEGORIES)
    assert re.search(r"\d\.\d\d \[\d\.\d\d–\d\.\d\d\]", text)


# --- the bootstrap ---------------------------------------------------------------------------------
def scenarios(n: int, per: int, hit_scenes: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """n scenarios of `per` positive cases each; the first `hit_scenes` hit in every case, the rest in
    none: the cases of a scenario succeed or fail together."""
    ids = [f"s{i}/{j}" for i in range(n) for j in range(per)]
    hit = np.array([i < hit_scenes for i in range(n) for _ in range(per)])
    return hit, np.ones(n * per, dtype=bool), ids


def width(fig: dict) -> float:
    return float(fig["high"] - fig["low"])


def test_the_bootstrap_resamples_scenarios_and_is_reproducible() -> None:
    hit, should, ids = scenarios(10, 12, 5)
    by_scene = intervals({"r": hit}, should, ids, Costs())["r"]
    by_case = intervals({"r": hit}, should, [str(i) for i in range(len(ids))], Costs())["r"]
    assert by_scene["recall"]["value"] == by_case["recall"]["value"] == 0.5
    # correlated cases: scenario resampling gives the honest, wider interval
    assert width(by_scene["recall"]) > 2 * width(by_case["recall"])
    assert intervals({"r": hit}, should, ids, Costs()) == intervals({"r": hit}, should, ids, Costs())
    # the seed is what fixes them (few resamples: the interval's ends fall between draws, so show it)
    few = [intervals({"r": hit}, should, ids, Costs(), resamples=50, seed=seed)["r"]["recall"] for seed in (1, 2)]
    assert few[0] != few[1]


def test_intervals_hold_the_estimate_and_shrink_with_more_data() -> None:
    widths = []
    for n in (10, 40, 160):
        hit, should, ids = scenarios(n, 3, int(n * 0.3))
        should[::3] = False                       # some negatives, so precision is not trivially 1
        r = intervals({"r": hit}, should, ids, Costs())["r"]
        for fig in r.values():
            assert fig["low"] <= fig["value"] <= fig["high"]
        widths.append(width(r["hit_rate"]))
    assert widths[0] > widths[1] > widths[2] > 0


def test_the_saved_cost_estimate_is_what_the_docs_say() -> None:
    # 4 true hits, 1 false hit, 5 misses out of 10 lookups
    should = np.array([True] * 4 + [False] + [True] * 5)
    hit = np.array([True] * 5 + [False] * 5)
    ids = [f"s{i}" for i in range(10)]
    r = intervals({"r": hit}, should, ids, Costs(false_hit=3, per_call=0.02))["r"]
    assert r["saved_per_1000"]["value"] == 1000 * (4 - 3 * 1) / 10
    assert r["money_saved_per_1000"]["value"] == pytest.approx(100 * 0.02)
    assert Costs(false_hit=3).break_even_precision == 0.75
    # at the break-even precision the cache saves nothing; nothing hit: no precision, no interval
    even = intervals({"r": np.array([True] * 4)}, np.array([True] * 3 + [False]), list("abcd"), Costs())["r"]
    assert even["saved_per_1000"]["value"] == 0.0
    none = intervals({"r": np.zeros(4, dtype=bool)}, np.ones(4, dtype=bool), list("abcd"), Costs())["r"]
    assert none["precision"] == {"value": None, "low": None, "high": None} and none["recall"]["value"] == 0.0
