"""Assembly metrics (issue 4): counts that match what the results say, and Prometheus text."""

from __future__ import annotations

import json
import re
from pathlib import Path

from workbench import Assembler
from workbench.cli.main import main
from workbench.sessions import load_session

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"
LINE = re.compile(r'^(# (HELP|TYPE) \w+ .+|\w+(\{(\w+="[^"]*",?)+\})? (-?[0-9.e+-]+|NaN))$')


def test_metrics_match_the_results() -> None:
    asm = Assembler(template="qwen2.5")
    session = asm.session()
    results = [session.assemble(t) for t in load_session(SESSIONS / "tool_agent.json").turns]
    snap = asm.metrics.snapshot()
    assert snap.assemblies == {"cold": 1, "incremental": len(results) - 1, "cached": 0}
    assert snap.segments["local"] == sum(r.reused_segments for r in results)
    assert snap.segments["local"] + snap.segments["fresh"] == sum(len(r.segments) for r in results)
    assert snap.tokens["local"] + snap.tokens["fresh"] == sum(r.total_tokens for r in results)
    local = sum(s.token_count for r in results for s in r.segments if s.source == "local")
    assert snap.tokens["local"] == local > 0
    assert snap.latency.count == len(results) and snap.latency.p50_s > 0
    assert snap.distinct_keys == len({r.cache_key.hex for r in results})
    assert snap.truncations == 0 and 0 < snap.reuse_ratio < 1


def test_truncations_counted() -> None:
    asm = Assembler(template="qwen2.5", context_window=8192, reserve=1024)
    r = asm.assemble(load_session(SESSIONS / "overflow.json").turn(None))
    snap = asm.metrics.snapshot()
    assert snap.truncations == 1 and snap.dropped_messages == len(r.dropped) > 0


def test_cli_prometheus_text_and_json(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["metrics", str(SESSIONS / "tool_agent.json")]) == 0
    text = capsys.readouterr().out
    lines = text.strip().splitlines()
    assert all(LINE.match(line) for line in lines), [x for x in lines if not LINE.match(x)]
    assert 'workbench_assembly_total{mode="incremental"} 8' in lines
    assert any(x.startswith('workbench_cache_hits_total{tier="local"}') for x in lines)
    assert main(["metrics", str(SESSIONS / "tool_agent.json"), "--cold", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["assemblies"] == {"cold": 9, "incremental": 0, "cached": 0} and d["segments"]["local"] == 0
