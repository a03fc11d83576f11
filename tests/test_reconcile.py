"""Reconciliation (issue 32, docs/logs.md section 8): each class from a minimal hand-written log.

The reported usage of every line is computed here from the providers' documented rules, on the
token ids a cold `Assembler` renders (another code path than the aggregate's incremental one), and
never from the simulators: OpenAI reads the prefix shared with the previous prompt rounded down
to 1024 + 128k tokens; Anthropic reads the longest prefix an earlier call wrote at one of its
cache_control breakpoints and writes from there to this request's last breakpoint; the local engine
reads what it holds (the previous prompt and the reply as generated, less its last token), never
the prompt's last token. Each test then checks the class the reconciliation gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from workbench import Assembler
from workbench.analysis.aggregate import aggregate
from workbench.difference import first_difference

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = "You answer questions about the shop's catalogue. Titles: " + ", ".join(
    f"book number {i}" for i in range(500))          # about 3,400 tokens: above every minimum
SHORT = "You answer questions about the shop's catalogue."
QUESTIONS = ["Do you have Dune?", "And the sequel?", "How much is it?"]
ANSWERS = ["Yes.", "Dune Messiah is in stock.", "It costs 12 euros."]
ASM = Assembler(template="qwen2.5", cache=None)


def openai_requests(system: str | list[str] = CATALOGUE, turns: int = 3) -> list[dict[str, Any]]:
    """`system`: one prompt, or one per turn (a prompt that changes)."""
    out, msgs = [], []
    for k in range(turns):
        s = system[k] if isinstance(system, list) else system
        msgs.append({"role": "user", "content": QUESTIONS[k]})
        out.append({"model": "m", "messages": [{"role": "system", "content": s}, *msgs]})
        msgs.append({"role": "assistant", "content": ANSWERS[k]})
    return out


def ids(req: dict[str, Any]) -> np.ndarray:
    return ASM.assemble(req).token_ids


def openai_rule(shared: int) -> int:
    return 0 if shared < 1024 else shared - (shared - 1024) % 128


def chat_usage(req: dict[str, Any], cached: int) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion",
            "usage": {"prompt_tokens": len(ids(req)), "completion_tokens": 3,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def ts(seconds: int) -> str:
    return f"2026-03-01T10:{seconds // 60:02d}:{seconds % 60:02d}Z"


def write(tmp: Path, rows: list[dict[str, Any]]) -> Path:
    p = tmp / "log.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return p


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def run(path: Path, **kw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rep = aggregate([str(path)], calls=True, **kw)
    return rep.to_json()["reconciliation"], rep.call_rows()


def log_line(req: dict[str, Any], at: int, response: Any, provider: str | None = "openai",
             cid: str = "c") -> dict[str, Any]:
    d: dict[str, Any] = {"conversation_id": cid, "timestamp": ts(at), "request": req, "response": response}
    if provider:
        d["provider"] = provider
    return d


def classes(rows: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(r["class"], r["cause"]) for r in rows]


# ---------------------------------------------------------------- OpenAI (automatic caching)
def openai_log(tmp: Path, gaps: list[int], reported: list[int | None], system: Any = CATALOGUE) -> Path:
    reqs = openai_requests(system, len(gaps))
    rows, at = [], 0
    for k, (req, gap) in enumerate(zip(reqs, gaps)):
        at += gap
        cached = reported[k]
        if cached is None:       # by the rule: the prefix shared with the previous prompt
            cached = openai_rule(first_difference(ids(reqs[k - 1]), ids(req))) if k else 0
        rows.append(log_line(req, at, chat_usage(req, cached)))
    return write(tmp, rows)


def test_match_when_the_provider_read_what_the_rules_allow(tmp_path: Path) -> None:
    rec, rows = run(openai_log(tmp_path, [0, 60, 60], [None, None, None]))
    assert classes(rows) == [("match", None)] * 3
    assert rows[1]["reported"]["cached"] == rows[1]["predicted"]["cached"] > 1024
    assert rec["calls"] == rec["with_usage"] == 3 and rec["classes"]["match"]["calls"] == 3
    assert rec["unexplained"] == [] and rec["diagnostics"] == []


def test_ttl_lapse_from_the_gap_between_timestamps(tmp_path: Path) -> None:
    # Six minutes after turn 1: the 5-minute entry is gone, the provider reports nothing cached.
    rec, rows = run(openai_log(tmp_path, [0, 360, 60], [None, 0, None]))
    assert classes(rows) == [("match", None), ("ttl_lapse", None), ("match", None)]
    lost = openai_rule(first_difference(ids(openai_requests()[0]), ids(openai_requests()[1])))
    assert rec["classes"]["ttl_lapse"] == {"calls": 1, "tokens": lost,
                                           "cost": round(lost * (2.5 - 0.25) / 1e6, 6)}


def test_provider_miss_on_a_stable_live_prefix(tmp_path: Path) -> None:
    rec, rows = run(openai_log(tmp_path, [0, 60, 60], [None, 0, None]))
    assert classes(rows)[1] == ("provider_miss", None)
    assert rec["classes"]["provider_miss"]["tokens"] == rows[1]["predicted"]["cached"] > 0


def test_over_report_names_the_rule(tmp_path: Path) -> None:
    # A hit after a 10-minute gap (extended retention the preset does not model), a figure off the
    # 128-token steps, and a first call that reads a prefix another conversation cached.
    reqs = openai_requests()
    shared = first_difference(ids(reqs[0]), ids(reqs[1]))
    rec, rows = run(openai_log(tmp_path, [0, 600, 60], [1024, openai_rule(shared), openai_rule(shared) + 5]))
    assert classes(rows) == [("over_report", "cross_conversation"), ("over_report", "ttl_s"),
                             ("over_report", "increment_tokens")]
    assert rec["classes"]["over_report"]["tokens"] == 1024 + openai_rule(shared) + 5


def test_below_minimum(tmp_path: Path) -> None:
    assert len(ids(openai_requests(SHORT)[1])) < 1024
    _, rows = run(openai_log(tmp_path, [0, 60], [0, 0], system=SHORT))
    assert classes(rows) == [("match", None), ("below_minimum", None)]


def test_prefix_break_carries_the_analysis_cause_code(tmp_path: Path) -> None:
    # A clock in the middle of the system prompt: what comes before it is still read.
    half = len(CATALOGUE) // 2
    systems = [CATALOGUE[:half] + f" Current time: 2026-03-01T10:0{k}:17Z. " + CATALOGUE[half:] for k in range(2)]
    _, rows = run(openai_log(tmp_path, [0, 60], [None, None], system=systems))
    assert classes(rows)[1] == ("prefix_break", "volatile_content")
    assert 1024 <= rows[1]["reported"]["cached"] < len(ids(openai_requests(systems, 2)[0])) - 1000
    assert rows[1]["tokens"] > 0


def test_unexplained_is_listed_with_the_call(tmp_path: Path) -> None:
    # Less than predicted, and a figure no OpenAI rule gives (not 0, under the minimum).
    rec, rows = run(openai_log(tmp_path, [0, 60], [None, 1000]))
    assert classes(rows)[1] == ("unexplained", None)
    [u] = rec["unexplained"]
    assert u["line"] == 2 and u["conversation_id"] == "c" and u["provider"] == "openai"
    assert u["reported"] == {"cached": 1000, "written": None} and u["predicted"]["cached"] > 1000


# ---------------------------------------------------------------- Anthropic (explicit breakpoints)
def anthropic_request(pairs: int, marks: set[int]) -> dict[str, Any]:
    """`pairs` user/assistant exchanges then the next question (so each request extends the one with
    a pair fewer); `marks`: which messages (by index) carry cache_control."""
    msgs: list[dict[str, Any]] = []
    for k in range(pairs):
        msgs += [{"role": "user", "content": f"Question {k}: is book number {k} in stock?"},
                 {"role": "assistant", "content": f"Yes, book number {k} is in stock."}]
    msgs.append({"role": "user", "content": f"Question {pairs}: is book number {pairs} in stock?"})
    for i in marks:
        m = msgs[i if i >= 0 else len(msgs) + i]
        m["content"] = [{"type": "text", "text": m["content"], "cache_control": {"type": "ephemeral"}}]
    return {"model": "claude", "max_tokens": 100, "system": CATALOGUE, "messages": msgs}


def end_of(req: dict[str, Any], index: int) -> int:
    """Where message `index` of the request ends in its tokens (its last segment's end)."""
    res = ASM.assemble(req)
    seq = [m.sequence for m in res.conversation.messages if m.role != "system"][index]
    return max(s.end for s in res.segments if s.seq == seq)


def anthropic_usage(req: dict[str, Any], read: int, written: int) -> dict[str, Any]:
    return {"type": "message", "usage": {"input_tokens": len(ids(req)) - read - written, "output_tokens": 5,
                                         "cache_read_input_tokens": read, "cache_creation_input_tokens": written}}


def test_anthropic_match_and_breakpoint_missing(tmp_path: Path) -> None:
    r1, r2, r3 = anthropic_request(1, {-1}), anthropic_request(2, set()), anthropic_request(3, {-1})
    w1 = end_of(r1, -1)                       # turn 1 writes up to its breakpoint
    w3 = end_of(r3, -1)                       # turn 3 reads turn 1's prefix (4 blocks back) and writes on
    rows = [log_line(r1, 0, anthropic_usage(r1, 0, w1), "anthropic"),
            log_line(r2, 60, anthropic_usage(r2, 0, 0), "anthropic"),      # no breakpoint: nothing read
            log_line(r3, 120, anthropic_usage(r3, w1, w3 - w1), "anthropic")]
    rec, got = run(write(tmp_path, rows))
    assert classes(got) == [("match", None), ("breakpoint_missing", None), ("match", None)]
    assert got[2]["predicted"] == {"cached": w1, "written": w3 - w1}
    assert rec["rewrite_factor"]["by_conversation"]["c"] == round(w3 / len(ids(r3)), 4)


def test_anthropic_lookback_exceeded_and_breakpoint_moved(tmp_path: Path) -> None:
    r1 = anthropic_request(1, {-1})
    far = anthropic_request(13, {-1})          # 24 messages later: turn 1's prefix is > 20 blocks back
    moved = anthropic_request(2, {0})          # the only breakpoint on the first message, before it
    w1 = end_of(r1, -1)
    rows = [log_line(r1, 0, anthropic_usage(r1, 0, w1), "anthropic", "far"),
            log_line(far, 60, anthropic_usage(far, 0, end_of(far, -1)), "anthropic", "far"),
            log_line(r1, 0, anthropic_usage(r1, 0, w1), "anthropic", "moved"),
            log_line(moved, 60, anthropic_usage(moved, 0, end_of(moved, 0)), "anthropic", "moved")]
    _, got = run(write(tmp_path, rows))
    by = {(r["conversation_id"], r["line"]): (r["class"], r["cause"]) for r in got}
    assert by[("far", 2)] == ("lookback_exceeded", None)
    assert by[("moved", 4)] == ("breakpoint_moved", None)


def test_anthropic_ttl_lapse(tmp_path: Path) -> None:
    r1, r2 = anthropic_request(1, {-1}), anthropic_request(2, {-1})
    rows = [log_line(r1, 0, anthropic_usage(r1, 0, end_of(r1, -1)), "anthropic"),
            log_line(r2, 400, anthropic_usage(r2, 0, end_of(r2, -1)), "anthropic")]
    _, got = run(write(tmp_path, rows))
    assert classes(got) == [("match", None), ("ttl_lapse", None)]


# ---------------------------------------------------------------- the local engine
def test_engine_prediction_equals_what_it_holds(tmp_path: Path) -> None:
    reqs = openai_requests(SHORT)
    rows = []
    for k, req in enumerate(reqs):
        n = len(ids(req))
        if k == 0:
            cached = 0
        else:   # the previous prompt, then the reply as generated up to its end-of-turn token, less that token
            reply = ASM.tokenizer.encode_with_specials(ANSWERS[k - 1] + "<|im_end|>")
            held = np.concatenate([ids(reqs[k - 1]), np.asarray(reply, np.uint32)[:-1]])
            cached = min(first_difference(held, ids(req)), n - 1)
        rows.append(log_line(req, 60 * k, {"usage": {"prompt_tokens": n, "prompt_tokens_details":
                                                     {"cached_tokens": cached}}}, "workbench-engine"))
    rec, got = run(write(tmp_path, rows))
    assert [r["predicted"]["cached"] for r in got] == [r["reported"]["cached"] for r in got]
    assert got[1]["reported"]["cached"] > len(ids(reqs[0]))       # the reply was held too
    assert rec["classes"]["match"]["calls"] == 3 and rec["classes"]["unexplained"]["calls"] == 0


# ---------------------------------------------------------------- hostile usage, the provider option
HOSTILE = [({"usage": {"prompt_tokens": 10}}, "prompt_tokens_details.cached_tokens: missing"),
           ({"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": -3}}}, "must not be negative"),
           ({"usage": {"prompt_tokens": "10", "prompt_tokens_details": {"cached_tokens": 0}}}, "must be an integer"),
           ({"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": True}}}, "must be an integer"),
           ({"usage": {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 11}}}, "larger than the prompt"),
           ({"usage": [1, 2]}, "usage: must be an object"),
           ({"usage": {"completion_tokens": 3}}, "no prompt token count"),
           ({"usage": {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 10 ** 9}},
            "larger than the prompt")]


def test_hostile_usage_fields_are_diagnostics(tmp_path: Path) -> None:
    req = openai_requests(SHORT, 1)[0]
    rows = [log_line(req, 0, resp, cid=f"h{i}") for i, (resp, _) in enumerate(HOSTILE)]
    rows.append(log_line(req, 0, chat_usage(req, 0), cid="ok"))
    rows.append(log_line(req, 0, {"id": "no usage"}, cid="none"))       # no usage: nothing wrong
    rec, got = run(write(tmp_path, rows))
    assert rec["calls"] == len(HOSTILE) + 2 and rec["with_usage"] == 1
    assert [r["conversation_id"] for r in got] == ["ok"]
    problems = {d["line"]: d["problem"] for d in rec["diagnostics"]}
    assert sorted(problems) == list(range(1, len(HOSTILE) + 1))
    for i, (_, fragment) in enumerate(HOSTILE, start=1):
        assert fragment in problems[i], (i, problems[i])


def test_same_timestamp_different_usage_is_a_diagnostic(tmp_path: Path) -> None:
    reqs = openai_requests(CATALOGUE, 2)
    rows = [log_line(reqs[0], 0, chat_usage(reqs[0], 0)), log_line(reqs[1], 0, chat_usage(reqs[1], 1024))]
    rec, got = run(write(tmp_path, rows))
    assert len(got) == 2
    [d] = rec["diagnostics"]
    assert d["line"] == 2 and "also the timestamp of" in d["problem"]


def test_provider_option_and_lines_without_one(tmp_path: Path) -> None:
    reqs = openai_requests(CATALOGUE, 2)
    rows = [log_line(r, 60 * k, chat_usage(r, 0), provider=None) for k, r in enumerate(reqs)]
    path = write(tmp_path, rows)
    rec, _ = run(path)
    assert rec["with_usage"] == 0 and "no --provider" in rec["diagnostics"][0]["problem"]
    rec, got = run(path, provider="openai")
    assert rec["with_usage"] == 2 and classes(got)[1] == ("provider_miss", None)


def test_cli_writes_one_line_per_call(tmp_path: Path) -> None:
    path = openai_log(tmp_path, [0, 360, 60], [None, 0, None])
    out = tmp_path / "calls.jsonl"
    p = cli("analyze", str(path), "--aggregate", "--json", "--no-progress", "--reconcile-calls", str(out))
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)["reconciliation"]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["class"] for x in lines] == ["match", "ttl_lapse", "match"]
    assert set(lines[0]) == {"file", "line", "conversation_id", "timestamp", "provider", "class", "cause",
                             "predicted", "reported", "tokens"}
    assert report["classes"]["ttl_lapse"]["calls"] == 1
    p = cli("analyze", str(path), "--aggregate", "--no-progress")
    assert "ttl_lapse" in p.stdout and "reconciliation: 3 of 3 calls" in p.stdout


def test_unknown_provider_option_is_one_error(tmp_path: Path) -> None:
    path = openai_log(tmp_path, [0], [None])
    p = cli("analyze", str(path), "--aggregate", "--provider", "nope")
    assert p.returncode == 2 and "nope" in p.stderr and "Traceback" not in p.stderr


# ---------------------------------------------------------------- analyze SESSION, per turn
def test_analyze_session_shows_reported_beside_predicted(tmp_path: Path) -> None:
    reqs = openai_requests(CATALOGUE, 3)
    good = openai_rule(first_difference(ids(reqs[1]), ids(reqs[2])))
    session = {"format": "openai", "provider": "openai", "requests": [
        {**reqs[0], "response": chat_usage(reqs[0], 0)},
        {**reqs[1], "response": chat_usage(reqs[1], 0)},          # 60 s later, nothing read: a miss
        {**reqs[2], "response": chat_usage(reqs[2], good)}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(session), "utf-8")
    p = cli("analyze", str(path), "--json")
    assert p.returncode == 0, p.stderr
    turns = json.loads(p.stdout)["turns"]
    assert [t["reconciliation"]["class"] for t in turns] == ["match", "provider_miss", "match"]
    last = turns[2]["reconciliation"]
    assert last["reported"]["cached"] == good == last["predicted"]["cached"]
    p = cli("analyze", str(path))
    assert p.returncode == 0, p.stderr
    assert f"reported {good} cached; predicted {good} cached" in p.stdout and "provider_miss" in p.stdout


@pytest.mark.parametrize("provider", ["openai@gpt-5.6", "vllm", "sglang", "gemini"])
def test_every_preset_reconciles_without_unexplained_on_its_own_prediction(tmp_path: Path, provider: str) -> None:
    """A log whose reported figures are a first run's predictions reconciles as all explained:
    whatever the preset, no class but the loss classes and match (a check of consistency between
    the classifier's account and the simulator, not of the rules themselves)."""
    reqs = openai_requests(CATALOGUE, 3)
    rows = [log_line(r, 60 * k, chat_usage(r, 0), provider) for k, r in enumerate(reqs)]
    _, first = run(write(tmp_path, rows))
    for row, f in zip(rows, first):
        row["response"] = chat_usage(row["request"], f["predicted"]["cached"])
    rec, got = run(write(tmp_path, rows))
    assert rec["classes"]["unexplained"]["calls"] == 0 and rec["classes"]["provider_miss"]["calls"] == 0
    assert all(r["class"] in ("match", "prefix_break", "ttl_lapse", "below_minimum") for r in got), got
