"""`analyze LOGS... --aggregate` (docs/logs.md): small real logs written here, in OpenAI and
Anthropic shapes, over several files, out of order, with bad lines, each injected breaker (a
timestamp in the system prompt, a tool-key order flip, a template upgrade mid-session, an edited
message). Expected figures come from the single-session `analyze` (a separate code path: cold
assembly, whole renders) or are written out; local and Ray runs must print the same JSON."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from needs import need

from workbench import Assembler
from workbench.analysis import analyze
from workbench.analysis.aggregate import COST_PROVIDERS, aggregate
from workbench.analysis.provider_params import ProviderParams
from workbench.difference import first_difference
from workbench.errors import LogFileError

ROOT = Path(__file__).resolve().parents[1]
T0 = "2026-03-01T10:00:00"
TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look a word up.",
                                         "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                                        "required": ["q"]}}}
FLIPPED = {"function": {"parameters": TOOL["function"]["parameters"], "description": "Look a word up.",
                        "name": "lookup"}, "type": "function"}
SYSTEM = "You are a careful assistant for a small bookshop. Answer briefly and cite the catalogue."
QUESTIONS = ["Do you have Dune?", "And the sequel?", "How much is it?", "Can you hold it for me?"]
ANSWERS = ["Yes, two copies of Dune.", "Dune Messiah is in stock.", "It costs 12 euros.", "Held until Friday."]


def ts(minute: int, second: int = 0) -> str:
    return f"2026-03-01T10:{minute:02d}:{second:02d}Z"


def openai_turns(kind: str) -> list[tuple[str | None, dict[str, Any]]]:
    """Four turns of one OpenAI-shaped session, with `kind`'s breaker: (template or None, request)."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    msgs: list[dict[str, Any]] = []
    for k, (q, a) in enumerate(zip(QUESTIONS, ANSWERS)):
        system = SYSTEM + (f" Current time: 2026-03-01T10:0{k}:17Z." if kind == "volatile" else "")
        msgs.append({"role": "user", "content": q})
        if kind == "edited" and k == 2:
            msgs[0] = {"role": "user", "content": "Do you have Dune, the novel?"}
        tools = [FLIPPED if kind == "tools" and k == 2 else TOOL]
        template = ("llama3" if k < 2 else "llama3.1") if kind == "upgrade" else None
        out.append((template, {"model": "m", "messages": [{"role": "system", "content": system}, *msgs],
                               "tools": tools}))
        msgs.append({"role": "assistant", "content": a})
    return out


def anthropic_turns() -> list[tuple[str | None, dict[str, Any]]]:
    out: list[tuple[str | None, dict[str, Any]]] = []
    msgs: list[dict[str, Any]] = []
    for q, a in zip(QUESTIONS[:3], ANSWERS):
        msgs.append({"role": "user", "content": [{"type": "text", "text": q}]})
        out.append((None, {"model": "claude", "max_tokens": 100, "system": SYSTEM, "messages": list(msgs)}))
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": a}]})
    return out


SESSIONS = {"s-clean": openai_turns("clean"), "s-volatile": openai_turns("volatile"),
            "s-tools": openai_turns("tools"), "s-upgrade": openai_turns("upgrade"),
            "s-edited": openai_turns("edited"), "s-anthropic": anthropic_turns()}
BAD = ["this is not json", json.dumps({"timestamp": ts(1), "request": {}}),                 # no conversation_id
       json.dumps({"conversation_id": "s-clean", "timestamp": "yesterday", "request": {}}),  # no ISO timestamp
       json.dumps({"conversation_id": "s-bad", "timestamp": ts(2), "request": ["x"]}),      # request not an object
       json.dumps({"conversation_id": "s-file", "timestamp": ts(2), "template": "/etc/hostname",   # a file, not
                   "request": {"messages": [{"role": "user", "content": "hi"}]}})]             # a shipped name


def line(cid: str, k: int, template: str | None, req: dict[str, Any], **extra: Any) -> str:
    d: dict[str, Any] = {"conversation_id": cid, "timestamp": ts(k, 5), "request": req, **extra}
    if template:
        d["template"] = template
    return json.dumps(d)


PROVIDER = {"s-anthropic": {"provider": "anthropic"}, "s-volatile": {"provider": "openai"}}


def usage(cid: str, k: int) -> dict[str, Any]:
    """What the provider reported (reconciliation, issue 32): nothing cached (the prompts are under
    every minimum); one line of s-volatile reports a count of the wrong type (a diagnostic)."""
    if cid == "s-anthropic":
        return {"response": {"usage": {"input_tokens": 40, "output_tokens": 5, "cache_read_input_tokens": 0,
                                       "cache_creation_input_tokens": 0}}}
    if cid == "s-volatile":
        cached: Any = "0" if k == 2 else 0
        return {"response": {"usage": {"prompt_tokens": 50, "prompt_tokens_details": {"cached_tokens": cached}}}}
    return {}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two files; each session's turns split across both, written newest first, bad lines among them."""
    d = tmp_path_factory.mktemp("logs")
    files: list[list[str]] = [[], []]
    for i, (cid, turns) in enumerate(SESSIONS.items()):
        for k, (template, req) in reversed(list(enumerate(turns))):
            files[(i + k) % 2].append(line(cid, k, template, req, client=f"app-{i % 2}",
                                           **PROVIDER.get(cid, {}), **usage(cid, k)))
    files[0][2:2] = BAD[:2]
    files[1][1:1] = BAD[2:] + [""]           # a blank line is no request and no error
    paths = [d / "a.jsonl", d / "b.jsonl"]
    for p, lines in zip(paths, files):
        p.write_text("\n".join(lines) + "\n", "utf-8")
    return paths


# ---------------------------------------------------------------- the reference
def reference_turns(turns: list[tuple[str | None, dict[str, Any]]]) -> list[tuple[int, int, str | None]]:
    """(held, reused, first cause) per turn from 2, by the single-session analysis; across a
    template change, the held tokens of the old template against the new template's prompt."""
    reqs = [r for _, r in turns]
    names = [t or "qwen2.5" for t, _ in turns]
    out: list[tuple[int, int, str | None]] = []
    start = 0
    for k in range(1, len(turns) + 1):
        if k == len(turns) or names[k] != names[start]:
            asm = Assembler(template=names[start], cache=None)
            for t in analyze(asm, reqs[start:k])[1:]:
                out.append((t.held_tokens, t.reused_tokens, t.causes[0].code if t.causes else None))
            if k < len(turns):
                held = analyze(asm, reqs[start:k + 1])[-1].held
                assert held is not None
                new = Assembler(template=names[k], cache=None).assemble(reqs[k]).token_ids
                out.append((len(held), first_difference(held, new), "template_changed"))
                start = k
    return out


@pytest.fixture(scope="module")
def expected() -> dict[str, list[tuple[int, int, str | None]]]:
    return {cid: reference_turns(turns) for cid, turns in SESSIONS.items()}


@pytest.fixture(scope="module")
def local(logs: list[Path]) -> dict[str, Any]:
    return aggregate([str(p) for p in logs]).to_json()


# ---------------------------------------------------------------- figures
def test_totals_equal_the_single_session_analysis(local: dict[str, Any], expected: dict[str, Any]) -> None:
    rows = [r for turns in expected.values() for r in turns]
    # + the two lines the grouping pass accepts and the analysis refuses
    assert local["requests"] == sum(len(t) for t in SESSIONS.values()) + 2
    assert local["sessions"] == len(SESSIONS) and local["turns"] == 23 and local["bad_lines"] == 5
    assert local["held_tokens"] == sum(h for h, _, _ in rows)
    assert local["reused_tokens"] == sum(r for _, r, _ in rows)
    assert local["lost_tokens"] == local["held_tokens"] - local["reused_tokens"] > 0


def test_each_breaker_is_found_with_its_code(local: dict[str, Any], expected: dict[str, Any]) -> None:
    by = {c["code"]: c for c in local["causes"]}
    assert set(by) == {"volatile_content", "tool_schema_order", "template_changed", "edited_message"}
    # The single-session analysis: the clean sessions lose nothing, each breaker its own code.
    assert all(code is None and h == r for h, r, code in expected["s-clean"] + expected["s-anthropic"])
    assert [c for _, _, c in expected["s-upgrade"]] == [None, "template_changed", None]
    lost: Counter[str] = Counter()
    turns: Counter[str] = Counter()
    for rows in expected.values():
        for h, r, code in rows:
            if code is not None:
                lost[code] += h - r
                turns[code] += 1
    assert {k: v["lost_tokens"] for k, v in by.items()} == dict(lost)
    assert {k: v["turns"] for k, v in by.items()} == dict(turns) == {
        "volatile_content": 3, "tool_schema_order": 2, "template_changed": 1, "edited_message": 1}
    assert all(v["sessions"] == 1 for v in by.values())
    total = local["lost_tokens"]
    for c in local["causes"]:
        assert c["share"] == round(c["lost_tokens"] / total, 6)
        for p in COST_PROVIDERS:
            prices = ProviderParams.load(p).prices
            assert c["cost"][p] == round(c["lost_tokens"] * (prices.input - prices.cached_input) / 1e6, 6)
    assert [c["lost_tokens"] for c in local["causes"]] == sorted((c["lost_tokens"] for c in local["causes"]),
                                                                 reverse=True)
    assert by["template_changed"]["top_templates"] == [{"template": "llama3.1",
                                                        "lost_tokens": by["template_changed"]["lost_tokens"]}]
    # The client and the provider each line names: the flip comes from one client (app-0 sent s-tools).
    assert by["tool_schema_order"]["top_clients"] == [{"client": "app-0",
                                                       "lost_tokens": by["tool_schema_order"]["lost_tokens"]}]
    assert by["volatile_content"]["logged_cost"] == {"openai": by["volatile_content"]["cost"]["openai"]}
    assert by["tool_schema_order"]["logged_cost"] == {}
    # One system prompt with a clock in it counts as one prompt: its timestamp masked.
    (vol,) = by["volatile_content"]["top_system_prompts"]
    assert vol["sha256"] == hashlib.sha256(f"{SYSTEM} Current time: <volatile>.".encode()).hexdigest()
    assert vol["preview"] == SYSTEM[:80] and vol["lost_tokens"] == by["volatile_content"]["lost_tokens"]


def test_fixes_sorted_by_what_they_recover(local: dict[str, Any]) -> None:
    by = {c["code"]: c["lost_tokens"] for c in local["causes"]}
    fixes = {f["fix"]: f for f in local["fixes"]}
    assert fixes["sort-tool-keys"]["recovered_tokens"] == by["tool_schema_order"]
    assert fixes["move-volatile"]["recovered_tokens"] == by["volatile_content"]
    assert fixes["sort-tool-keys"]["kind"] == "fix" and fixes["pin-template-per-conversation"]["kind"] == "advice"
    assert all(f["estimate"] is True for f in local["fixes"])
    rec = [f["recovered_tokens"] for f in local["fixes"]]
    assert rec == sorted(rec, reverse=True) and sum(rec) == local["lost_tokens"]


def test_bad_lines_are_typed_diagnostics(logs: list[Path], local: dict[str, Any]) -> None:
    a, b = (str(p) for p in logs)
    got = {(d["file"], d["line"]): d["problem"] for d in local["diagnostics"]}
    assert got[(a, 3)].startswith("not valid JSON")
    assert got[(a, 4)].startswith("conversation_id:")
    assert got[(b, 2)].startswith("timestamp:") and "'yesterday'" in got[(b, 2)]
    assert got[(b, 3)].startswith("request:")
    assert got[(b, 4)].startswith("template: '/etc/hostname' is not a shipped template name")
    with pytest.raises(LogFileError, match=r"a\.jsonl:3: not valid JSON"):
        aggregate([a, b], strict=True)


def test_a_provider_the_presets_do_not_know_is_counted_not_priced(tmp_path: Path) -> None:
    """A line may name any provider: a path or an unknown preset is only a name, never opened, never
    priced (its logged cost is null), and the turn's figures stand."""
    hostile = "../../../etc/passwd"
    p = tmp_path / "x.jsonl"
    p.write_text("\n".join(line("c", k, t, r, provider=hostile) for k, (t, r) in enumerate(SESSIONS["s-volatile"]))
                 + "\n", "utf-8")
    c = next(c for c in aggregate([p]).to_json()["causes"] if c["code"] == "volatile_content")
    assert c["lost_tokens"] > 0 and c["logged_cost"] == {hostile: None}


def test_ties_follow_file_order(tmp_path: Path) -> None:
    """Two turns logged at the same instant: the order of the files (then lines) decides."""
    (t1, r1), (t2, r2) = openai_turns("clean")[:2]
    one, two = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    one.write_text(json.dumps({"conversation_id": "c", "timestamp": T0, "request": r1}) + "\n")
    two.write_text(json.dumps({"conversation_id": "c", "timestamp": T0, "request": r2}) + "\n")
    assert aggregate([one, two]).to_json()["lost_tokens"] == 0
    assert aggregate([two, one]).to_json()["lost_tokens"] > 0      # turn 2 first: the shorter turn 1 follows


def test_session_intake_sees_a_tool_key_flip() -> None:
    """An incremental session reused the previous request's parsed tools when the new ones differed
    only in key order (dict == ignores it), so the flip never reached the prompt."""
    asm = Assembler(template="qwen2.5", cache=None)
    s = asm.session()
    for _, req in openai_turns("tools"):
        assert np.array_equal(s.assemble(req).token_ids, asm.assemble(req).token_ids)


# ---------------------------------------------------------------- Ray
@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    """Ray, started once for the module as `--ray` starts it (ray_runner.start_ray), shut down after."""
    ray = need("ray", "pip install -e .[test] (ray[data] is a test dependency)")
    from workbench.analysis.ray_runner import start_ray
    start_ray(ray, None)
    yield ray
    ray.shutdown()


def test_ray_prints_the_same_report(ray_cluster: Any, logs: list[Path], local: dict[str, Any]) -> None:
    ray = aggregate([str(p) for p in logs], ray=True).to_json()
    assert ray["runner"]["mode"] == "ray" and ray["runner"]["workers"] >= 1
    assert {k: v for k, v in ray.items() if k != "runner"} == {k: v for k, v in local.items() if k != "runner"}


def test_ray_reconciles_the_same_calls(ray_cluster: Any, logs: list[Path]) -> None:
    """--reconcile-calls' rows, every call with usage, are the same from Ray as from one process."""
    paths = [str(p) for p in logs]
    here, there = aggregate(paths, calls=True), aggregate(paths, ray=True, calls=True)
    assert here.call_rows() == there.call_rows() and len(here.call_rows()) == 6
    assert here.to_json()["reconciliation"] == there.to_json()["reconciliation"]


def test_reconciliation_counts_the_calls_with_usage(local: dict[str, Any]) -> None:
    r = local["reconciliation"]
    # s-anthropic's 3 lines and s-volatile's 4, less the one whose usage has a string for a count.
    assert r["calls"] == local["turns"] and r["with_usage"] == 6
    assert sum(c["calls"] for c in r["classes"].values()) == 6
    [d] = r["diagnostics"]
    assert "cached_tokens: must be an integer" in d["problem"]
    assert set(r["rewrite_factor"]["by_conversation"]) == {"s-anthropic", "s-volatile"}


def test_ray_strict_raises_the_index_error(ray_cluster: Any, logs: list[Path]) -> None:
    """With --ray the index pass runs in a thread while Ray starts: its error still reaches the caller,
    the same as without Ray, and Ray stays usable."""
    a, b = (str(p) for p in logs)
    with pytest.raises(LogFileError, match=r"a\.jsonl:3: not valid JSON"):
        aggregate([a, b], ray=True, strict=True)
    assert ray_cluster.is_initialized()


def test_cli_joins_a_cluster_by_address(ray_cluster: Any, logs: list[Path], local: dict[str, Any]) -> None:
    """`--ray ADDRESS` from another process: it joins the cluster this module started."""
    address = ray_cluster.get_runtime_context().gcs_address
    p = cli("analyze", *map(str, logs), "--aggregate", "--ray", address, "--json", "--no-progress")
    assert p.returncode == 0, p.stderr[-2000:]
    d = json.loads(p.stdout)
    assert d["runner"]["mode"] == "ray" and d["runner"]["address"] == address
    assert {k: v for k, v in d.items() if k != "runner"} == {k: v for k, v in local.items() if k != "runner"}


def test_without_ray_a_typed_error_names_the_extra(logs: list[Path]) -> None:
    code = ("import sys; sys.modules['ray'] = None\n"      # what an environment without Ray imports
            "from workbench.analysis.aggregate import aggregate\n"
            "from workbench.errors import MissingDependencyError\n"
            "try:\n    aggregate(sys.argv[1:], ray=True)\n"
            "except MissingDependencyError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code, *map(str, logs)], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert "prompt-workbench[ray]" in p.stdout, p.stderr


# ---------------------------------------------------------------- the command line
def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_cli_json_is_one_object(logs: list[Path], local: dict[str, Any]) -> None:
    p = cli("analyze", *map(str, logs), "--aggregate", "--json", "--no-progress")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert {k: v for k, v in d.items() if k != "runner"} == {k: v for k, v in local.items() if k != "runner"}
    assert set(d["runner"]) == {"mode", "address", "workers", "seconds"} and d["runner"]["mode"] == "local"
    table = cli("analyze", *map(str, logs), "--aggregate")
    assert table.returncode == 0 and "tool_schema_order" in table.stdout and "sort-tool-keys" in table.stdout
    assert "analyze" in table.stderr          # the progress bar, on stderr


@pytest.mark.parametrize("args,fragment", [
    (["analyze", "sample_sessions/tool_agent.json", "sample_sessions/tool_agent.json"], "one session file"),
    (["analyze", "sample_sessions/tool_agent.json", "--ray"], "--ray goes with --aggregate"),
    (["analyze", "no/such.jsonl", "--aggregate", "--json"], "cannot read no/such.jsonl"),
    (["analyze", "sample_sessions/tool_agent.json", "--aggregate", "--fix", "sort-tool-keys"], "--fix"),
    (["analyze", "sample_sessions/tool_agent.json", "--aggregate", "--strict"], "tool_agent.json:1:"),
    (["analyze", "sample_sessions/tool_agent.json", "--aggregate", "--ray", "127.0.0.1:1"],   # nothing listens
     "cannot reach Ray at 127.0.0.1:1"),
])
def test_cli_errors_exit_2_with_one_line(args: list[str], fragment: str) -> None:
    p = cli(*args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], p.stderr


def test_single_session_unchanged() -> None:
    p = cli("analyze", "sample_sessions/tool_agent.json", "--json")
    assert p.returncode == 0 and [t["turn"] for t in json.loads(p.stdout)["turns"]][:2] == [1, 2]


def test_lines_the_grouping_shortcut_cannot_read(tmp_path: Path) -> None:
    """An escaped id and fields in another order take the full parse (and still group together, a
    zone-less timestamp read as UTC); bytes that are not UTF-8, and a duplicate key that would move a
    line to another conversation, are bad lines."""
    (_, r1), (_, r2) = openai_turns("clean")[:2]
    p = tmp_path / "odd.jsonl"
    p.write_bytes(b"\n".join([
        json.dumps({"conversation_id": "caf\u00e9", "timestamp": "2026-03-01T10:00:00Z", "request": r1}).encode(),
        b"\xff\xfe",
        json.dumps({"timestamp": "2026-03-01T10:00:01", "conversation_id": "caf\u00e9", "request": r2}).encode(),
        b'{"conversation_id": "b", "timestamp": "2026-03-01T10:00:00Z", "request": {}, "conversation_id": "c"}',
    ]) + b"\n")
    d = aggregate([p]).to_json()
    assert (d["requests"], d["sessions"], d["turns"], d["lost_tokens"], d["bad_lines"]) == (3, 1, 2, 0, 2)
    assert [(x["line"], x["problem"]) for x in d["diagnostics"]] == [
        (2, "not UTF-8 (bad byte at column 1)"), (4, "conversation_id: given more than once, with different values")]


def test_responses_logs_resolve_previous_response_id_from_their_own_lines(tmp_path: Path) -> None:
    """A Responses API client that sends only the new input and names the response it continues: each
    line logs the response it got, so the log holds the whole conversation. The report equals the
    same conversation logged as full Chat Completions requests; a chain the log lacks is a bad line."""
    chained, full = [], []
    history: list[dict[str, Any]] = []
    for k, (q, a) in enumerate(zip(QUESTIONS, ANSWERS)):
        req: dict[str, Any] = {"instructions": SYSTEM, "input": q}
        if k:
            req["previous_response_id"] = f"resp_{k}"
        out = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": a}]}
        chained.append(json.dumps({"conversation_id": "r", "timestamp": ts(k), "request": req,
                                   "response": {"id": f"resp_{k + 1}", "output": [out]}}))
        history.append({"role": "user", "content": q})
        full.append(line("c", k, None, {"messages": [{"role": "system", "content": SYSTEM}, *history]}))
        history.append({"role": "assistant", "content": a})
    (tmp_path / "r.jsonl").write_text("\n".join(chained) + "\n")
    (tmp_path / "c.jsonl").write_text("\n".join(full) + "\n")
    got, want = aggregate([tmp_path / "r.jsonl"]).to_json(), aggregate([tmp_path / "c.jsonl"]).to_json()
    assert got["turns"] == want["turns"] == 4 and got["tokens"] == want["tokens"] > 0
    assert got["lost_tokens"] == want["lost_tokens"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text(chained[2] + "\n")     # its response resp_2 is not in this log
    report = aggregate([broken]).to_json()
    assert report["turns"] == 0 and "previous_response_id" in json.dumps(report)
