"""The CLI on hostile files and options (issue 14, case 8): every one ends with exit 2 and one
`error:` line that says what and where, never `error: unexpected ...` (the fallback for bugs).

Run in-process through workbench.cli.main.main, as a user's shell would call it. The files are
the issue's payloads: a 10,000-deep file, a 5,000-digit integer, NaN, lone surrogates in ids and
names, duplicate tool-call ids, an empty Anthropic tool name, "context_window": "8k"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.engine.engine import Engine

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = str(ROOT / "sample_sessions" / "support_chat.json")
USER = {"role": "user", "content": "hi"}
DEEP = "[" * 10_000 + "]" * 10_000


def _tc(cid: str, name: str = "f", args: str = "{}") -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}]}


# name -> file text (JSON written as is: json.dumps would escape what the payloads need raw)
FILES = {
    "deep.json": '{"messages": [{"role": "user", "content": "hi"}], "x": ' + DEEP + "}",
    "bigint.json": '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": ' + "1" * 5000 + "}",
    "nan.json": '{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
    "surrogate_id.json": '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, '
                         '"tool_calls": [{"id": "a\\ud800", "type": "function", "function": {"name": "f", '
                         '"arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "a\\ud800", "content": "1"}]}',
    "surrogate_name.json": '{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null, '
                           '"tool_calls": [{"id": "a", "type": "function", "function": {"name": "f\\ud800", '
                           '"arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "a", "content": "1"}]}',
    "surrogate_tool_use.json": '{"system": "s", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", '
                               '"content": [{"type": "tool_use", "id": "t1", "name": "f\\udc00", "input": {}}]}, '
                               '{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", '
                               '"content": "ok"}]}]}',
    "surrogate_in_arguments.json": json.dumps({"messages": [USER, _tc("a", args='{"k": "\\ud800"}'),
                                                            {"role": "tool", "tool_call_id": "a", "content": "1"}]}),
    "surrogate_title.json": '{"title": "t\\ud800", "messages": [{"role": "user", "content": "x"}]}',
    "deep_arguments.json": json.dumps({"messages": [USER, _tc("a", args="[" * 3000 + "]" * 3000)]}),
    "bigint_arguments.json": json.dumps({"messages": [USER, _tc("a", args='{"n": ' + "9" * 5000 + "}")]}),
    "duplicate_ids.json": json.dumps({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "a", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "1"}]}),
    "empty_tool_name.json": json.dumps({"system": "s", "messages": [USER],
                                        "tools": [{"name": "", "input_schema": {"type": "object"}}]}),
    "context_8k.json": json.dumps({"context_window": "8k", "messages": [USER]}),
    "role_list.json": json.dumps({"messages": [{"role": ["user"], "content": "x"}]}),
    "no_messages.json": json.dumps({"messages": []}),
    "log_deep.json": '{"requests": [{"messages": [{"role": "user", "content": "x"}], "y": ' + DEEP + "}]}",
    "vars_nan.json": '{"constants": {"a": NaN}}',
    "vars_deep.json": '{"constants": {"a": ' + DEEP + "}}",
    "params_deep.json": '{"x": ' + DEEP + "}",
    "dataset_deep.jsonl": '{"context": ' + DEEP + "}\n",
    "list.json": "[1, 2]",
}

# (argv, with {name} for a file above and {tmp} for the folder; fragments the error line must hold)
CASES = [
    (["render", "{deep.json}"], ["deep.json", "nested more than 200 levels deep at line 1, column"]),
    (["render", "{bigint.json}"], ["bigint.json", "an integer longer than 100 digits at line 1"]),
    (["render", "{nan.json}"], ["nan.json", "NaN is not a JSON number at line 1"]),
    (["render", "{surrogate_id.json}"], ["messages[1].tool_calls[0].id", "lone surrogate"]),
    (["render", "{surrogate_name.json}"], ["messages[1].tool_calls[0].function.name", "lone surrogate"]),
    (["render", "{surrogate_tool_use.json}"], ["messages[1].content[0].name", "lone surrogate"]),
    (["render", "{duplicate_ids.json}"], ["messages[1].tool_calls[1].id", "already used", "no result yet"]),
    (["render", "{empty_tool_name.json}"], ["tools[0].name", "non-empty"]),
    (["render", "{context_8k.json}", "--json"], ["context_8k.json", "context_window", "'8k'"]),
    (["render", "{role_list.json}"], ["messages[0].role", "unknown role"]),
    (["render", "{no_messages.json}"], ["messages", "at least one"]),
    (["render", "{log_deep.json}"], ["log_deep.json", "nested more than 200"]),
    (["render", "{list.json}"], ["JSON object", "list"]),
    (["variables", "{surrogate_id.json}"], ["messages[1].tool_calls[0].id"]),
    (["analyze", "{surrogate_title.json}"], ["surrogate_title.json", "title", "lone surrogate"]),
    (["analyze", "{deep.json}"], ["deep.json", "nested"]),
    (["simulate", "{nan.json}"], ["nan.json", "NaN"]),
    (["export", "{deep.json}", "-o", "{tmp}/bundle"], ["deep.json", "nested"]),
    (["kv", "{bigint.json}"], ["bigint.json", "longer than 100 digits"]),
    (["metrics", "{surrogate_title.json}"], ["title", "lone surrogate"]),
    (["render", SAMPLE, "--vars", "{vars_nan.json}"], ["vars_nan.json", "NaN is not a JSON number"]),
    (["render", SAMPLE, "--vars", "{vars_deep.json}"], ["vars_deep.json", "nested more than 200"]),
    (["simulate", SAMPLE, "--params", "{params_deep.json}"], ["params_deep.json", "nested more than 200"]),
    (["kv", SAMPLE, "--config", "{params_deep.json}"], ["params_deep.json", "nested more than 200"]),
    (["kv", SAMPLE, "--config", "{list.json}"], ["list.json", "JSON object", "list"]),
    (["render", SAMPLE, "--template", "{tmp}/hf_template"], ["tokenizer_config.json", "nested more than 200"]),
    (["render", SAMPLE, "--tokenizer", "hf:{tmp}/hf_tokenizer"], ["hf_tokenizer", "not a tokenizer"]),
    (["semantic", "eval", "--dataset", "{dataset_deep.jsonl}", "--embedder", "hashing"],
     ["dataset_deep.jsonl, line 1", "nested more than 200"]),
    (["semantic", "eval", "--min-precision", "nan", "--embedder", "hashing"], ["--min-precision", "nan"]),
    (["prefill", "{deep.json}"], ["deep.json", "nested"]),
    (["prefill", SAMPLE, "--kv-cap-mb", "nan"], ["--kv-cap-mb", "nan"]),
    (["prefill", SAMPLE, "--kv-cap-mb", "inf"], ["--kv-cap-mb", "inf"]),
]


# Arguments text OpenAI accepts as sent (it never parses a call's arguments in the history): rendered,
# with a warning that names the field and what is wrong (the template gets {} in their place).
KEPT = [
    ("surrogate_in_arguments.json", ["messages[1].tool_calls[0].function.arguments", "at k", "lone surrogate"]),
    ("deep_arguments.json", ["messages[1].tool_calls[0].function.arguments", "nested more than 200"]),
    ("bigint_arguments.json", ["messages[1].tool_calls[0].function.arguments", "longer than 100"]),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "hf_template").mkdir()
    (folder / "hf_template" / "tokenizer_config.json").write_text('{"chat_template": "x", "a": ' + DEEP + "}",
                                                                  encoding="utf-8")
    (folder / "hf_tokenizer").mkdir()
    (folder / "hf_tokenizer" / "tokenizer.json").write_text('{"model": ' + DEEP + "}", encoding="utf-8")
    return folder


@pytest.mark.parametrize("argv,fragments", CASES, ids=[" ".join(Path(a).name for a in c[0])[:60] for c in CASES])
def test_hostile_input_gets_one_precise_error_line(files: Path, capsys: pytest.CaptureFixture,
                                                   monkeypatch: pytest.MonkeyPatch, argv, fragments):
    args = [a.replace("{tmp}", str(files)) for a in argv]
    args = [str(files / a[1:-1]) if a.startswith("{") and a.endswith("}") else a for a in args]
    loads: list[object] = []          # the one costly step of these commands: loading a model
    monkeypatch.setattr(Engine, "load", classmethod(lambda cls, *a, **k: loads.append(a) or pytest.fail(
        "a model was loaded for input that is refused")))
    rc = main(args)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "unexpected" not in err and "Traceback" not in err, err
    for f in fragments:
        assert f in lines[0], f"{f!r} not in {lines[0]!r}"
    assert loads == []                # refused before any real work


@pytest.mark.parametrize("name,fragments", KEPT, ids=[k[0] for k in KEPT])
def test_arguments_openai_accepts_render_with_a_warning(files: Path, capsys: pytest.CaptureFixture, name, fragments):
    assert main(["render", str(files / name), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    warned = [d for d in out["diagnostics"] if d["code"] == "tool_arguments_not_json"]
    assert len(warned) == 1 and warned[0]["level"] == "warning"
    for f in fragments:
        assert f in warned[0]["message"], (f, warned[0]["message"])
