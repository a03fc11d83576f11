"""`workbench import --from litellm`: LiteLLM spend-log rows. LiteLLM's package does not install
here, so tests/import_fixtures/litellm_spend_logs.json is written by hand after LiteLLM's own
schema (model LiteLLM_SpendLogs in its schema.prisma) and its payload builder (JSON columns stored
as JSON text in the table, returned as objects by the API: both occur in the file)."""

from __future__ import annotations

import json
from pathlib import Path

from import_fixtures.harness import read_log, run_import

ROWS = Path(__file__).resolve().parent / "import_fixtures" / "litellm_spend_logs.json"


def _import(path: Path, tmp_path: Path) -> tuple[dict, list[dict]]:
    log = tmp_path / "o.jsonl"
    code, out, err = run_import(str(path), "--from", "litellm", "-o", str(log), "--json")
    assert code == 0, err
    return json.loads(out), read_log(log)


def test_spend_log_rows(tmp_path: Path) -> None:
    rows = json.loads(ROWS.read_text(encoding="utf-8"))
    summary, lines = _import(ROWS, tmp_path)
    assert summary["records"] == 8 and summary["lines_written"] == 5
    assert summary["ignored"] == {"failed call (status failure)": 1, "not a chat call (call_type aembedding)": 1}
    assert [b["where"] for b in summary["bad"]] == ["row 5 (request_id chatcmpl-nostore)"]
    assert "store_prompts_in_spend_logs" in summary["bad"][0]["problem"]
    assert [w["where"] for w in summary["warnings"]] == ["row 7 (request_id chatcmpl-cut)"]
    by_id = {line["request"]["messages"][-1]["content"][:12]: line for line in lines}
    first, second = lines[0], lines[1]
    # the body the client sent the proxy, from JSON text (row 1) and from an object (row 2)
    assert first["request"] == json.loads(rows[0]["proxy_server_request"])
    assert second["request"] == rows[1]["proxy_server_request"]
    assert first["conversation_id"] == second["conversation_id"] == "litellm-session-1"
    assert first["response"] == json.loads(rows[0]["response"])             # as LiteLLM stored it
    assert second["response"] == {"usage": rows[1]["metadata"]["usage_object"]}
    assert first["latency_ms"] == 900 and first["client"] == "support-bot" and first["provider"] == "openai"
    anthropic = next(line for line in lines if line["provider"] == "anthropic")
    assert anthropic["request"] == rows[5]["proxy_server_request"] and anthropic["response"] == rows[5]["response"]
    assert anthropic["timestamp"].startswith("2026-03-01T10:01:00")
    old = by_id["<|im_start|>"]
    assert old["request"] == {"messages": rows[7]["messages"]}               # control tokens kept as text
    assert old["conversation_id"] == "chatcmpl-old"                           # no session: the request id
    assert old["response"] == {"usage": {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43,
                                         "prompt_tokens_details": {"cached_tokens": 32}}}


def test_json_lines_name_the_line(tmp_path: Path) -> None:
    rows = json.loads(ROWS.read_text(encoding="utf-8"))
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:5]) + '{"request_id": "cut", "call_ty\n',
                    encoding="utf-8")
    summary, lines = _import(path, tmp_path)
    assert len(lines) == 2
    where = [b["where"] for b in summary["bad"]]
    assert where == ["line 5 (request_id chatcmpl-nostore)", "line 6"]
    assert summary["bad"][1]["problem"].startswith("not valid JSON")
