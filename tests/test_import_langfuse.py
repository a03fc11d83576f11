"""`workbench import --from langfuse`: observations made by the Langfuse SDK's OpenAI integration
around the official openai SDK (in a process of their own: tests/import_fixtures/langfuse_producer.py),
built with the SDK's own `ObservationV2` type. The oracle is what the local upstream received."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from import_fixtures.harness import read_log, run_import

importlib.import_module("langfuse")   # in the test extra: missing is a failure, not a skip

PRODUCER = Path(__file__).resolve().parent / "import_fixtures" / "langfuse_producer.py"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]], list[dict[str, Any]]]:
    out = tmp_path_factory.mktemp("langfuse")
    proc = subprocess.run([sys.executable, str(PRODUCER), str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    observations = json.loads((out / "observations.json").read_text(encoding="utf-8"))
    received = json.loads((out / "received.json").read_text(encoding="utf-8"))
    return out, observations, received


@pytest.mark.parametrize("layout", ["array", "lines", "page"])
def test_generations_rebuild_the_requests(made: Any, layout: str, tmp_path: Path) -> None:
    out, observations, received = made
    assert {o["type"] for o in observations} == {"GENERATION", "SPAN"}
    path = tmp_path / f"export.{layout}"
    if layout == "array":
        path.write_text(json.dumps(observations), encoding="utf-8")
    elif layout == "lines":
        path.write_text("".join(json.dumps(o) + "\n" for o in observations), encoding="utf-8")
    else:    # a page of the public API's list endpoint
        path.write_text(json.dumps({"data": observations, "meta": {"page": 1, "totalItems": len(observations)}}),
                        encoding="utf-8")
    log = tmp_path / "o.jsonl"
    code, stdout, err = run_import(str(path), "--from", "langfuse", "-o", str(log), "--json")
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["records"] == 3 and summary["lines_written"] == 2
    assert summary["ignored"] == {"not a generation (type SPAN)": 1}
    lines = read_log(log)
    generations = sorted((o for o in observations if o["type"] == "GENERATION"), key=lambda o: o["startTime"])
    for line, sent, obs in zip(lines, received, generations):
        assert line["request"]["messages"] == sent["messages"]
        assert line["request"]["tools"] == sent["tools"]
        assert line["conversation_id"] == "lf-session-1"
        assert line["response"]["usage"] == obs["usageDetails"]      # Langfuse's usage types, as they are
        assert line["model"] == obs["model"]
    assert lines[0]["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"city":"Oslo"}'
    assert lines[1]["response"]["choices"][0]["message"]["content"] == "Cold and clear."
    assert lines[0]["timestamp"] < lines[1]["timestamp"]


def test_media_reference_string_input_and_missing_session(made: Any, tmp_path: Path) -> None:
    out, observations, received = made
    gen = next(o for o in observations if o["type"] == "GENERATION")
    media = json.loads(json.dumps(gen))
    media["id"] = "obs-media"
    media["input"]["messages"][1]["content"] = [
        {"type": "image_url", "image_url": {"url": "@@@langfuseMedia:type=image/png|id=m1|source=base64_data_uri@@@"}}]
    text = {**gen, "id": "obs-text", "input": "Complete this sentence"}
    orphan = {**gen, "id": "obs-orphan", "sessionId": None, "traceId": None}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([gen, media, text, orphan]), encoding="utf-8")      # one line
    code, stdout, err = run_import(str(path), "--from", "langfuse", "-o", str(tmp_path / "o.jsonl"), "--json")
    assert code == 0, err
    bad = {b["where"]: b["problem"] for b in json.loads(stdout)["bad"]}
    # one line holding the array: the line and the record within it
    assert bad["line 1, record 2 (id obs-media)"].startswith(
        "input.messages[1].content[0].image_url.url: an image or file stored in Langfuse's media store")
    assert bad["line 1, record 3 (id obs-text)"].startswith("input: a string, not chat messages")
    assert bad["line 1, record 4 (id obs-orphan)"].startswith("no sessionId and no traceId")
    assert len(read_log(tmp_path / "o.jsonl")) == 1
    code, stdout, err = run_import(str(path), "--from", "langfuse", "-o", str(tmp_path / "s.jsonl"), "--strict")
    assert code == 2 and not (tmp_path / "s.jsonl").exists()
    assert err.startswith(f"error: {path}: line 1, record 2 (id obs-media): input.messages[1]")
    assert err.count("\n") == 1
