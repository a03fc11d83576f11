"""tools/make_request_logs.py --usage providers (issue 32): provider-shaped reported usage under the
presets' documented cache rules, with injected differences and the class of every call kept apart.

These check the generator on its own (no reconciliation): the same arguments write the same bytes;
without the option nothing changes; every line's `usage` is in its provider's exact shape and equals
what the ground truth says was reported; each injected class is in the log the way the ground truth
says (a miss reads less than the rules, an over-report more, a missing breakpoint has no
cache_control, a moved one sits on an earlier message, a TTL lapse follows a gap over the TTL).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "make_request_logs.py"
SIZE = ("--requests", "1500", "--sessions", "150", "--seed", "3")
INJECTED = ("provider_miss", "over_report", "breakpoint_missing", "breakpoint_moved", "ttl_lapse")
OPENAI_USAGE = {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details",
                "completion_tokens_details"}
ANTHROPIC_USAGE = {"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation",
                   "output_tokens", "service_tier"}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.fixture(scope="module")
def usage_logs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("usage") / "out"
    done = run(*SIZE, "--usage", "providers", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def lines_of(folder: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for f in sorted((folder / "logs").glob("*.jsonl")):
        for text in f.read_text(encoding="utf-8").splitlines():
            line = json.loads(text)
            out[(line["conversation_id"], line["timestamp"])] = line
    return out


def truth_of(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "ground_truth_usage.jsonl").read_text(encoding="utf-8").splitlines()]


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "generation.json"}


def test_same_arguments_same_bytes(usage_logs, tmp_path):
    again = tmp_path / "again"
    assert run(*SIZE, "--usage", "providers", "--out", str(again)).returncode == 0
    assert files(again) == files(usage_logs)


def test_without_the_option_nothing_changes(usage_logs, tmp_path):
    """The plain run writes no usage and no provider; the conversations, their times and every
    OpenAI request are the same with and without usage (only Anthropic requests gain cache_control)."""
    plain = tmp_path / "plain"
    assert run(*SIZE, "--out", str(plain)).returncode == 0
    assert not (plain / "ground_truth_usage.jsonl").exists()
    a, b = lines_of(plain), lines_of(usage_logs)
    assert a.keys() == b.keys()
    for key, line in a.items():
        assert "provider" not in line and "response" not in line
        if "stream" in line["request"]:                      # the OpenAI shape
            assert b[key]["request"] == line["request"]
        else:
            assert "cache_control" not in json.dumps(line["request"])
    truth_plain = json.loads((plain / "ground_truth.json").read_text())
    truth_usage = json.loads((usage_logs / "ground_truth.json").read_text())
    assert "usage" not in truth_plain
    # The breakers and their figures do not move: cache_control does not change a prompt's tokens.
    assert truth_usage["breakers"] == truth_plain["breakers"]


def test_usage_is_in_each_providers_shape_and_equals_the_ground_truth(usage_logs):
    lines, truth = lines_of(usage_logs), truth_of(usage_logs)
    assert len(truth) == len(lines) == 1500
    seen = set()
    for t in truth:
        line = lines[(t["conversation_id"], t["timestamp"])]
        assert line["provider"] == t["provider"]
        u = line["response"]["usage"]
        if t["provider"] == "openai":
            assert line["response"]["object"] == "chat.completion"
            assert set(u) == OPENAI_USAGE
            assert set(u["prompt_tokens_details"]) == {"cached_tokens", "audio_tokens"}
            assert u["prompt_tokens"] == t["tokens"]
            assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
            assert u["prompt_tokens_details"]["cached_tokens"] == t["reported"]["cached"]
            assert t["reported"]["written"] == 0
        else:
            assert line["response"]["type"] == "message"
            assert set(u) == ANTHROPIC_USAGE
            assert u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] == t["tokens"]
            assert u["cache_read_input_tokens"] == t["reported"]["cached"]
            assert u["cache_creation_input_tokens"] == t["reported"]["written"]
            assert sum(u["cache_creation"].values()) == u["cache_creation_input_tokens"]
        assert all(type(x) is int and x >= 0 for x in _ints(u))
        seen.add(t["provider"])
    assert seen == {"openai", "anthropic"}


def _ints(obj) -> list:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _ints(v)]
    return [obj] if not isinstance(obj, str) else []


def test_reported_figures_keep_the_documented_rules_unless_injected(usage_logs):
    """OpenAI hits are 0 or 1,024 plus whole 128-token steps, except the injected over-reports; no
    report exceeds the prompt; a call not injected reports exactly what the rules give."""
    for t in truth_of(usage_logs):
        rep, rules = t["reported"], t["rules"]
        assert rep["cached"] + rep["written"] <= t["tokens"]
        if t["provider"] == "openai" and t["class"] != "over_report":
            assert rep["cached"] == 0 or (rep["cached"] >= 1024 and (rep["cached"] - 1024) % 128 == 0), t
        if not t["injected"] or t["class"] in ("ttl_lapse", "breakpoint_missing", "breakpoint_moved"):
            assert rep == rules, t


def test_each_injected_class_is_in_the_log_as_recorded(usage_logs):
    lines, truth = lines_of(usage_logs), truth_of(usage_logs)
    prev: dict[str, datetime] = {}
    counts = dict.fromkeys(INJECTED, 0)
    for t in truth:                  # per conversation, in call order
        line = lines[(t["conversation_id"], t["timestamp"])]
        when = datetime.fromisoformat(t["timestamp"].replace("Z", "+00:00"))
        gap = (when - prev[t["conversation_id"]]).total_seconds() if t["conversation_id"] in prev else None
        prev[t["conversation_id"]] = when
        if not t["injected"]:
            continue
        counts[t["class"]] += 1
        c, rep, rules = t["class"], t["reported"], t["rules"]
        if c == "provider_miss":
            assert rep["cached"] < rules["cached"], t
        elif c == "over_report":
            assert rep["cached"] > rules["cached"], t
        elif c == "ttl_lapse":
            assert gap is not None and gap > 300, t            # both presets' shortest TTL is 5 minutes
        elif c == "breakpoint_missing":
            assert "cache_control" not in json.dumps(line["request"]), t
            assert rep["cached"] < t["intended"]["cached"]
        elif c == "breakpoint_moved":
            msgs = line["request"]["messages"]
            assert "cache_control" not in json.dumps(msgs[-1]), t
            assert any("cache_control" in json.dumps(m) for m in msgs[:-2] if m["role"] == "user"), t
            assert rep["cached"] < t["intended"]["cached"]
    for c, n in counts.items():
        assert n >= 5, (c, counts)
    summary = json.loads((usage_logs / "ground_truth.json").read_text())["usage"]["classes"]
    assert {c: summary[c]["injected"] for c in INJECTED} == counts


def test_anthropic_requests_carry_their_breakpoints(usage_logs):
    """Every Anthropic request not injected marks its system prompt and its last message."""
    lines = lines_of(usage_logs)
    for t in truth_of(usage_logs):
        if t["provider"] != "anthropic" or t["class"] in ("breakpoint_missing", "breakpoint_moved"):
            continue
        req = lines[(t["conversation_id"], t["timestamp"])]["request"]
        assert req["messages"][-1]["content"][-1]["cache_control"]["type"] == "ephemeral"
        assert req["system"][-1]["cache_control"]["type"] == "ephemeral"
