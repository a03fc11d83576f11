"""One-click fixes (workbench/analysis/fixes.py): each fix on the sample sessions reassembles exactly
(cold == incremental ids) and reuses no less; the fixes that address a session's cause gain;
a fix with nothing to fix is a no-op with a note; malformed input and unknown names are typed
errors; `analyze --fix` prints both columns."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from workbench import Assembler
from workbench.analysis.fixes import (
    CAUSE_FIX,
    FIXES,
    apply_fixes,
    fix_for_cause,
    fixed_assembler,
    get_fix,
    measure,
)
from workbench.analysis.prefix import ADVICE
from workbench.cli.main import main
from workbench.errors import (
    FixNotApplicable,
    ProjectionUnavailable,
    SessionFileError,
    UnknownFixError,
    WorkbenchError,
)
from workbench.sessions import load_session, parse_session
from workbench.templates import from_source

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_sessions"
CASES = [("timestamp_system", "qwen2.5"), ("tool_agent", "qwen2.5"), ("coding_corrections", "qwen3"),
         ("templated_system", "qwen2.5"), ("anthropic_minimal", "llama3.1")]
SESSION_FIXES = [n for n in FIXES if n != "projection"]
PROJECTION_BUILT = any(importlib.util.find_spec(m) for m in ("workbench.analysis.projection",
                                                              "workbench.assembly.projection")
                       if importlib.util.find_spec(m.rsplit(".", 1)[0]) is not None)


def raw(name: str) -> dict:
    return load_session(SAMPLES / f"{name}.json").raw


def asm_for(template: str | object) -> Assembler:
    return Assembler(template=template, cache=None)   # type: ignore[arg-type]


def assert_exact(asm: Assembler, session: dict) -> None:
    """Every turn assembles to the same ids cold and through an incremental session."""
    sess = asm.session()
    for req in parse_session(session).turns:
        cold = asm.assemble(req)
        incremental = sess.assemble(req)
        assert cold.token_ids.dtype == np.uint32
        assert np.array_equal(cold.token_ids, incremental.token_ids)


# --- the registry ---------------------------------------------------------------------------------
def test_every_fix_names_the_causes_it_addresses():
    assert set(FIXES) == {"sort-tool-keys", "move-volatile", "keep-reasoning", "pin-date", "merge-system",
                          "split-system", "projection"}
    for fix in FIXES.values():
        assert fix.causes and set(fix.causes) <= set(ADVICE), fix.name
        assert fix.description
    for code, name in CAUSE_FIX.items():
        assert code in FIXES[name].causes
    assert get_fix("pin-strftime").name == "pin-date"          # the brief's name for the SPEC's pin-date
    assert fix_for_cause("template_rewrite", "(the reasoning of the earlier reply is stripped)") == "keep-reasoning"
    assert fix_for_cause("template_rewrite", "(the system prompt moved)") == "projection"
    assert fix_for_cause("edited_message") is None


def test_unknown_fix_is_a_typed_error_listing_the_known():
    with pytest.raises(UnknownFixError) as err:
        apply_fixes(raw("tool_agent"), ["sort-tool-keys", "sort-keys"], asm_for("qwen2.5"))
    assert isinstance(err.value, WorkbenchError)
    assert "'sort-keys'" in str(err.value)
    assert all(name in str(err.value) for name in FIXES)


# --- every fix on the sample sessions ---------------------------------------------------------------
@pytest.mark.parametrize("name,template", CASES)
@pytest.mark.parametrize("fix", SESSION_FIXES)
def test_fix_reassembles_exactly_and_reuses_no_less(fix, name, template):
    session = raw(name)
    kept = copy.deepcopy(session)
    asm = asm_for(template)
    m = measure(asm, session, [fix], providers=("vllm", "sglang"))
    assert session == kept                                   # the input is never changed: undo is keeping it
    out = m.applied.outcomes[0]
    assert out.note
    if not out.changed:
        assert m.applied.session is session and m.applied.settings.empty
        assert m.after.totals() == m.before.totals()
    assert_exact(fixed_assembler(asm, m.applied.settings), m.applied.session)
    b, a = m.before.totals(), m.after.totals()
    assert a["append_only_turns"] >= b["append_only_turns"]
    # No less reuse: more tokens reused, or (a shorter prompt) no more tokens prefilled again.
    assert a["reused_tokens"] >= b["reused_tokens"] or \
        a["tokens"] - a["reused_tokens"] <= b["tokens"] - b["reused_tokens"]


def test_move_volatile_makes_the_timestamp_session_append_only():
    m = measure(asm_for("qwen2.5"), raw("timestamp_system"), ["move-volatile"])
    b, a = m.before.totals(), m.after.totals()
    assert b["append_only_turns"] == 0 and a["append_only_turns"] == 4
    assert a["reused_tokens"] > 10 * b["reused_tokens"]
    assert a["cached_tokens"]["vllm"] > b["cached_tokens"]["vllm"]
    assert a["cost"]["vllm"] < b["cost"]["vllm"]
    # The values went to the last user message of each request, and stay there in later requests.
    reqs = m.applied.session["requests"]
    assert "Current time" not in reqs[0]["messages"][0]["content"]
    lines = raw("timestamp_system")["requests"][0]["messages"][0]["content"].split("\n")
    assert reqs[0]["messages"][-1]["content"].endswith("\n\n" + "\n".join(lines[:2]))
    assert lines[0] in reqs[4]["messages"][1]["content"]      # request 1's last user message, kept as sent


def test_split_system_reuses_the_stable_part():
    m = measure(asm_for("qwen2.5"), raw("timestamp_system"), ["split-system"], providers=("sglang",))
    assert m.after.totals()["reused_tokens"] > 5 * m.before.totals()["reused_tokens"]
    first = m.applied.session["requests"][0]["messages"]
    assert [x["role"] for x in first[:2]] == ["system", "system"]
    assert first[0]["content"].startswith("You are Fieldnote Assistant")


def shuffled_tool_log() -> dict:
    """tool_agent's turns as a log whose every other request serializes the tool schemas with
    their keys in reverse order: the `tool_schema_order` case."""
    def reverse(v):
        if isinstance(v, dict):
            return {k: reverse(v[k]) for k in reversed(list(v))}
        return [reverse(x) for x in v] if isinstance(v, list) else v
    turns = list(load_session(SAMPLES / "tool_agent.json").turns)
    reqs = [{**t, "tools": reverse(t["tools"])} if k % 2 else t for k, t in enumerate(turns)]
    return {"format": "openai", "title": "tool key order", "requests": reqs}


def test_sort_tool_keys_fixes_the_key_order_cause():
    asm = asm_for("qwen2.5")
    session = shuffled_tool_log()
    m = measure(asm, session, ["sort-tool-keys"], providers=("openai", "vllm"))
    assert any(c.code == "tool_schema_order" for t in m.before.analysis for c in t.causes)
    assert not any(c.code == "tool_schema_order" for t in m.after.analysis for c in t.causes)
    b, a = m.before.totals(), m.after.totals()
    assert a["append_only_turns"] == len(m.after.turns) - 1 > b["append_only_turns"]
    assert a["cached_tokens"]["vllm"] > b["cached_tokens"]["vllm"]
    assert_exact(asm, m.applied.session)


def test_merge_system_merges_the_leading_run_only():
    session = {"messages": [{"role": "system", "content": "A."}, {"role": "system", "content": "B."},
                            {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                            {"role": "system", "content": "later"}, {"role": "user", "content": "bye"}]}
    asm = asm_for("chatml")
    out = apply_fixes(session, ["merge-system"], asm)
    msgs = out.session["messages"]
    assert msgs[0]["content"] == "A.\n\nB." and [m["role"] for m in msgs].count("system") == 2
    assert_exact(asm, out.session)


def test_pin_date_pins_the_clock_a_template_reads():
    asm = asm_for("gpt-oss")
    out = apply_fixes(raw("openai_minimal"), ["pin-date"], asm)
    assert out.outcomes[0].changed and out.settings.pinned_at is not None
    pinned = fixed_assembler(asm, out.settings)
    text = pinned.assemble(parse_session(out.session).turns[-1]).text
    assert f"Current date: {out.settings.pinned_at[:10]}" in text
    # Re-applied from what the bundle records, the same instant: the same ids on another day.
    again = apply_fixes(raw("openai_minimal"), [{"fix": "pin-date", "params": {"at": "2031-01-02T00:00:00+00:00"}}],
                        asm)
    assert "Current date: 2031-01-02" in fixed_assembler(asm, again.settings).assemble(
        parse_session(again.session).turns[-1]).text
    assert_exact(pinned, out.session)


def test_pin_date_pins_prompt_template_builtins():
    out = apply_fixes(raw("templated_system"), [{"fix": "pin-date", "params": {"at": "2030-05-06T00:00:00"}}],
                      asm_for("qwen2.5"))
    text = asm_for("qwen2.5").assemble(parse_session(out.session).turns[-1]).text
    assert "Today is 2030-05-06." in text


KEEPS = """{%- set keep = preserve_thinking is defined and preserve_thinking -%}
{%- for m in messages -%}
<|im_start|>{{ m.role }}
{% if m.role == 'assistant' and m.reasoning_content and (loop.last or keep) -%}
<think>{{ m.reasoning_content }}</think>
{% endif %}{{ m.content }}<|im_end|>
{% endfor -%}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


def test_keep_reasoning_uses_the_templates_switch():
    asm = Assembler(template=from_source(KEEPS, "keeps"), tokenizer="qwen2.5", cache=None)
    m = measure(asm, raw("coding_corrections"), ["keep-reasoning"], providers=("sglang",))
    out = m.applied.outcomes[0]
    assert out.changed and out.settings.template_kwargs == {"preserve_thinking": True}
    assert m.after.totals()["append_only_turns"] > m.before.totals()["append_only_turns"]
    assert_exact(fixed_assembler(asm, m.applied.settings), m.applied.session)


def test_keep_reasoning_says_when_the_template_has_no_switch():
    out = apply_fixes(raw("coding_corrections"), ["keep-reasoning"], asm_for("qwen3")).outcomes[0]
    assert not out.changed and "no switch" in out.note and "projection" in out.note


# --- hostile input ----------------------------------------------------------------------------------
def test_a_fix_with_nothing_to_fix_is_a_no_op_with_a_note():
    session = raw("openai_minimal")
    for fix in SESSION_FIXES:
        out = apply_fixes(session, [fix], asm_for("qwen2.5"))
        assert out.session is session and not out.outcomes[0].changed, fix
        assert "nothing" in out.outcomes[0].note or "already" in out.outcomes[0].note


def test_malformed_input_is_a_typed_error():
    asm = asm_for("qwen2.5")
    with pytest.raises(SessionFileError):
        apply_fixes(["not", "a", "session"], ["sort-tool-keys"], asm)   # type: ignore[arg-type]
    with pytest.raises(FixNotApplicable, match="tools is not a list of tool schemas"):
        apply_fixes({"messages": [{"role": "user", "content": "x"}], "tools": ["get_weather"]},
                    ["sort-tool-keys"], asm)
    log = {"requests": [{"messages": [{"role": "user", "content": "x"}], "tools": "nope"}]}
    with pytest.raises(FixNotApplicable, match=r"requests\[0\]\.tools"):
        apply_fixes(log, ["sort-tool-keys"], asm)
    with pytest.raises(FixNotApplicable, match="not an ISO date-time"):
        apply_fixes(raw("templated_system"), [{"fix": "pin-date", "params": {"at": "tomorrow"}}], asm)


def test_projection_is_named_and_hooked():
    asm = asm_for("qwen3")
    if not PROJECTION_BUILT:
        with pytest.raises(ProjectionUnavailable, match="not available yet"):
            apply_fixes(raw("coding_corrections"), ["projection"], asm)
        return
    m = measure(asm, raw("coding_corrections"), ["projection"], providers=("sglang",))
    assert m.after.totals()["append_only_turns"] == len(m.after.turns) - 1


# --- the local engine ---------------------------------------------------------------------------------
def test_measure_times_the_tiny_engines_prefill():
    m = measure(asm_for("qwen2.5"), raw("timestamp_system"), ["move-volatile"], providers=("vllm",), engine="tiny")
    for side in (m.before, m.after):
        assert all(t.prefill_ms is not None and t.prefill_ms > 0 for t in side.turns)
    # The engine itself reuses what the fix made stable (a count, not a time).
    assert sum(t.engine_reused or 0 for t in m.after.turns) > 10 * sum(t.engine_reused or 0 for t in m.before.turns)


# --- the command line ---------------------------------------------------------------------------------
def test_cli_fix_json_has_both_columns(capsys):
    path = str(SAMPLES / "timestamp_system.json")
    assert main(["analyze", path, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["analyze", path, "--fix", "move-volatile,split-system", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["turns"]) == len(plain["turns"]) == 5
    for t, p in zip(d["turns"], plain["turns"]):
        assert set(t) >= {"turn", "tokens", "reused_tokens", "first_divergence", "divergence_seq", "causes",
                          "before", "after"}
        assert t["before"]["reused_tokens"] == p["reused_tokens"]           # SPEC 7.2: the figures without
        assert t["before"]["first_divergence"] == p["first_divergence"]
        assert t["after"]["reused_tokens"] == t["reused_tokens"]
    assert [f["fix"] for f in d["fixes"]] == ["move-volatile", "split-system"]
    assert d["totals"]["after"]["reused_tokens"] > d["totals"]["before"]["reused_tokens"]
    assert set(d["totals"]["after"]["cached_tokens"]) == {"openai", "anthropic", "vllm", "sglang"}


def test_cli_fix_table_and_bad_name(capsys):
    path = str(SAMPLES / "timestamp_system.json")
    assert main(["analyze", path, "--fix", "move-volatile"]) == 0
    out = capsys.readouterr().out
    assert "move-volatile: applied" in out and " all " in out and "89 -> 2851" in out
    assert main(["analyze", path, "--fix", "move-volatile,nope"]) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown fix 'nope'") and "sort-tool-keys" in lines[0]
    assert cap.out == ""


def test_move_volatile_leaves_rules_examples_and_cached_blocks_alone():
    asm = asm_for("qwen2.5")
    # A fixed rule with a clock time (support_chat: "changes after Thursday 12:00"), a log line in a
    # code block and a block the client marked for caching (rag_long's handbook) stay where they are.
    for name in ("support_chat", "rag_long"):
        out = apply_fixes(raw(name), ["move-volatile", "split-system"], asm)
        assert out.session is raw(name) or out.session == raw(name)
        assert not any(o.changed for o in out.outcomes), [o.note for o in out.outcomes]
    fenced = {"messages": [{"role": "system", "content": "Logs look like:\n```\n2026-01-01T10:00:00Z start\n```\n"
                                                         "Request id: 0f8fad5b-d9cb-469f-a165-70867728950e"},
                           {"role": "user", "content": "hi"}]}
    out = apply_fixes(fenced, ["move-volatile"], asm).session
    assert out["messages"][0]["content"] == "Logs look like:\n```\n2026-01-01T10:00:00Z start\n```"
    assert out["messages"][1]["content"] == "hi\n\nRequest id: 0f8fad5b-d9cb-469f-a165-70867728950e"


def test_cli_projection_rows_keep_the_spec_fields(capsys):
    if not PROJECTION_BUILT:
        assert main(["analyze", str(SAMPLES / "coding_corrections.json"), "--template", "qwen3",
                     "--fix", "projection", "--json"]) == 2
        assert "not available yet" in capsys.readouterr().err
        return
    assert main(["analyze", str(SAMPLES / "coding_corrections.json"), "--template", "qwen3", "--fix", "projection",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for t in d["turns"]:
        assert set(t) >= {"turn", "tokens", "reused_tokens", "first_divergence", "divergence_seq", "causes",
                          "before"}
    assert d["totals"]["after"]["append_only_turns"] == len(d["turns"]) - 1 > d["totals"]["before"]["append_only_turns"]


def as_responses(session: dict) -> dict:
    """A Chat Completions log as the Responses API would send it: the first system message as
    `instructions`, the other messages as input items (assistant text as an output message)."""
    def req(r: dict) -> dict:
        msgs = r["messages"]
        out: dict = {k: v for k, v in r.items() if k not in ("messages", "format")}
        if msgs and msgs[0]["role"] == "system":
            out["instructions"], msgs = msgs[0]["content"], msgs[1:]
        out["input"] = [{"type": "message", "role": "assistant", "content": [{"type": "output_text",
                         "text": m["content"]}]} if m["role"] == "assistant" else dict(m) for m in msgs]
        return out
    return {"format": "responses", "title": session.get("title", ""), "requests": [req(r) for r in session["requests"]]}


@pytest.mark.parametrize("fix", ["move-volatile", "split-system"])
def test_fixes_apply_to_responses_sessions_as_to_their_chat_equivalent(fix):
    chat = raw("timestamp_system")
    resp = as_responses(chat)
    asm = asm_for("qwen2.5")
    want, got = measure(asm, chat, [fix], providers=("vllm",)), measure(asm, resp, [fix], providers=("vllm",))
    assert got.before.totals()["reused_tokens"] == want.before.totals()["reused_tokens"]
    assert got.after.totals()["reused_tokens"] == want.after.totals()["reused_tokens"] > \
        5 * got.before.totals()["reused_tokens"]
    first = got.applied.session["requests"][0]
    assert "Current time" not in first["instructions"] and "messages" not in first
    assert_exact(asm, got.applied.session)
