"""Teaching mode (SPEC 6): the seven steps, their HTML and the numbers they show."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from workbench import Assembler
from workbench.analysis import analyze
from workbench.errors import WorkbenchError
from workbench.sessions import load_session
from workbench.ui.teaching import KV_CONFIGS, STEP_KEYS, KVConfig, teaching_for_turn, teaching_html, teaching_steps

ROOT = Path(__file__).resolve().parent.parent
MARK = '<mark class="wb-t-special">'
CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "Seven."}, {"role": "user", "content": "Another?"}]


@pytest.fixture(scope="module")
def asm() -> Assembler:
    return Assembler(template="qwen2.5")


def steps_for(asm: Assembler, messages: list[dict], **kw) -> dict:  # type: ignore[no-untyped-def]
    res = asm.assemble({"messages": messages})
    steps = teaching_steps(res, tokenizer=asm.tokenizer, template_source=asm.template.source, **kw)
    return {s.key: s for s in steps}


def test_steps_come_in_story_order_with_json_data(asm: Assembler) -> None:
    res = asm.assemble({"messages": CHAT})
    steps = teaching_steps(res, tokenizer=asm.tokenizer)
    assert [s.key for s in steps] == list(STEP_KEYS) == ["messages", "template", "text", "tokens", "budget",
                                                         "prefill", "reuse"]
    for s in steps:
        json.dumps(s.data)
        assert s.summary and s.html.count("<div") == s.html.count("</div>")
    by = {s.key: s for s in steps}
    assert by["tokens"].data["tokens"] == res.total_tokens
    assert by["tokens"].data["first_ids"] == res.token_ids[:len(by["tokens"].data["first_ids"])].tolist()
    assert by["budget"].data["used"] == res.budget.used
    assert by["messages"].data["messages"] == 4 and by["messages"].data["roles"] == {"system": 1, "user": 2,
                                                                                      "assistant": 1}
    # without the source, the template step says so instead of showing an empty block
    assert "not given" in by["template"].html and by["template"].data["lines"] == 0


def test_template_step_shows_the_first_lines_of_the_source(asm: Assembler) -> None:
    by = steps_for(asm, CHAT)
    src_lines = asm.template.source.splitlines()
    assert by["template"].data["shown"] == min(40, len(src_lines))
    assert by["template"].data["version"] == asm.template.version
    assert "im_start" in by["template"].html
    if len(src_lines) > 40:
        assert f"{len(src_lines) - 40} more lines" in by["template"].html


@pytest.mark.parametrize("template", ["qwen2.5", "llama3.1"])
def test_text_step_marks_every_special_token(template: str) -> None:
    a = Assembler(template=template)
    # a special-token string typed by the user is plain text: it must not be marked
    msgs = [*CHAT[:-1], {"role": "user", "content": "what does <|im_end|> or <|eot_id|> do?"}]
    res = a.assemble({"messages": msgs})
    steps = {s.key: s for s in teaching_steps(res, tokenizer=a.tokenizer)}
    n_special = int(np.isin(res.token_ids, a.tokenizer.special_ids).sum())
    assert n_special > 4
    assert steps["text"].html.count(MARK) == n_special == steps["text"].data["special_tokens"]
    assert steps["tokens"].data["special_tokens"] == n_special
    # the marked strings, in order, are exactly the special tokens of the ids
    marked = re.findall(re.escape(MARK) + r"(.*?)</mark>", steps["text"].html)
    special = np.isin(res.token_ids, a.tokenizer.special_ids)
    assert [html.unescape(m) for m in marked] == a.tokenizer.token_strings(res.token_ids[special])


def test_text_step_shortens_long_runs_but_keeps_every_special(asm: Assembler) -> None:
    doc = "lorem ipsum " * 2000
    by = steps_for(asm, [{"role": "user", "content": doc}, {"role": "assistant", "content": "ok"},
                         {"role": "user", "content": "more"}])
    assert len(by["text"].html) < len(doc) / 4
    assert "characters …]" in by["text"].html
    assert by["text"].html.count(MARK) == by["tokens"].data["special_tokens"]


def test_html_is_escaped(asm: Assembler) -> None:
    evil = "<script>alert('x')</script> & <b>bold</b>"
    by = steps_for(asm, [{"role": "user", "content": evil}])
    for key in ("messages", "text"):
        page = by[key].html
        assert "<script>" not in page and "<b>bold" not in page
        assert "&lt;script&gt;alert(" in page
    assert "<script>" not in teaching_html(list(by.values()))


@pytest.mark.parametrize("name,expected", [("Llama-3-8B", 32 * 8 * 128 * 2 * 2), ("Qwen2.5-7B", 28 * 4 * 128 * 4),
                                           ("Mistral-7B", 32 * 8 * 128 * 4), ("Gemma-3-1B", 26 * 1 * 256 * 4)])
def test_kv_bytes_per_token_for_each_named_config(asm: Assembler, name: str, expected: int) -> None:
    assert KV_CONFIGS[name].bytes_per_token == expected
    by = steps_for(asm, CHAT, kv_config=name)
    d = by["prefill"].data
    assert d["kv_config"] == name and d["kv_bytes_per_token"] == expected
    assert d["kv_bytes_prompt"] == expected * d["prompt_tokens"]
    assert d["prefill_tokens"] == d["prompt_tokens"] - d["reusable_tokens"]


def test_kv_default_and_custom_and_unknown(asm: Assembler) -> None:
    assert steps_for(asm, CHAT)["prefill"].data["kv_bytes_per_token"] == 131072   # Llama-3-8B, bf16
    fp32 = KVConfig("tiny-fp32", layers=2, kv_heads=1, head_dim=4, dtype_bytes=4)
    assert steps_for(asm, CHAT, kv_config=fp32)["prefill"].data["kv_bytes_per_token"] == 2 * 1 * 4 * 2 * 4
    with pytest.raises(WorkbenchError, match="Llama-3-8B"):
        steps_for(asm, CHAT, kv_config="GPT-5")
    # no invented timings: the step says the sizes are computed, not measured
    s = steps_for(asm, CHAT)["prefill"].summary
    assert "computed" in s and "not a measured prefill" in s
    assert not re.search(r"\d\s*(ms|s)\b", s)


def test_reuse_step_equals_the_analysis(asm: Assembler) -> None:
    turns = load_session(ROOT / "sample_sessions" / "timestamp_system.json").turns[:2]
    first, second = analyze(asm, turns)
    assert second.first_divergence is not None   # the timestamp breaks the prefix
    steps = teaching_steps(second.result, tokenizer=asm.tokenizer, previous=first.result, analysis=second)
    by = {s.key: s for s in steps}
    d = by["reuse"].data
    assert d["previous"] is True
    assert d["first_divergence"] == second.first_divergence
    assert d["reused_tokens"] == second.reused_tokens and d["held_tokens"] == second.held_tokens
    assert d["new_tokens"] == second.tokens - second.reused_tokens
    assert [c["code"] for c in d["causes"]] == [c.code for c in second.causes] and d["causes"]
    assert f"token {second.first_divergence}" in by["reuse"].summary
    assert all(c.advice[:40] in html.unescape(by["reuse"].html) for c in second.causes)
    assert by["prefill"].data["reusable_tokens"] == second.reused_tokens


def test_reuse_without_analysis_is_the_common_prefix(asm: Assembler) -> None:
    prev = asm.assemble({"messages": CHAT[:2]})
    res = asm.assemble({"messages": CHAT})
    by = {s.key: s for s in teaching_steps(res, tokenizer=asm.tokenizer, previous=prev)}
    a, b = prev.token_ids, res.token_ids
    n = min(len(a), len(b))
    common = int(np.argmax(a[:n] != b[:n])) if (a[:n] != b[:n]).any() else n
    assert by["reuse"].data["reused_tokens"] == common > 0
    assert by["reuse"].data["new_tokens"] == len(b) - common


def test_turn_one_says_there_is_no_previous_turn(asm: Assembler) -> None:
    session = load_session(ROOT / "sample_sessions" / "support_chat.json")
    steps = teaching_for_turn(asm, session, 1)
    reuse = steps[-1]
    assert reuse.key == "reuse" and reuse.data["previous"] is False and reuse.data["reused_tokens"] == 0
    assert "no previous turn" in reuse.summary
    assert steps[5].data["prefill_tokens"] == steps[3].data["tokens"]


def test_teaching_for_turn_matches_a_full_analysis(asm: Assembler) -> None:
    session = load_session(ROOT / "sample_sessions" / "support_chat.json")
    full = analyze(asm, session.turns[:4])[-1]
    steps = {s.key: s for s in teaching_for_turn(asm, session, 4)}
    assert steps["reuse"].data["reused_tokens"] == full.reused_tokens > 0
    assert steps["tokens"].data["tokens"] == full.tokens
    assert steps["template"].data["lines"] > 0
    with pytest.raises(WorkbenchError, match="turn"):
        teaching_for_turn(asm, session, len(session.turns) + 1)


def test_teaching_html_numbers_the_sections_and_styles_once(asm: Assembler) -> None:
    steps = list(steps_for(asm, CHAT).values())
    page = teaching_html(steps)
    assert page.count("<style>") == 1 and page.count("<section") == 7
    assert [int(n) for n in re.findall(r"<h3>(\d+)\. ", page)] == list(range(1, 8))
    assert page.count(MARK) == sum(s.html.count(MARK) for s in steps)


def test_step_through_says_each_caption_once_and_draws_spaces_and_split_bytes(asm: Assembler) -> None:
    from types import SimpleNamespace

    from workbench.ui.teaching import StepThrough

    turns = analyze(asm, [{"messages": [{"role": "user", "content": "a  b 🫘"}]},
                          {"messages": [{"role": "user", "content": "a  b 🫘"}, {"role": "assistant", "content": "ok"},
                                        {"role": "user", "content": "more"}]}])
    walk = StepThrough()
    assert walk.load(SimpleNamespace(analysis=turns[1], assembler=asm), turns[0].result)
    for i, step in enumerate(walk.steps):
        walk.index = i
        body = walk.body_html()
        assert body.count(html.escape(step.summary)) == 1, step.key      # the caption, once
    prefill = {s.key: s for s in walk.steps}["prefill"].summary
    assert "KV tab runs a real prefill" in prefill and "comes with the engine" not in prefill
    pieces = [html.unescape(p) for p in re.findall(r'<span class="wb-t-piece">(.*?)</span>',
                                                    {s.key: s for s in walk.steps}["tokens"].html)]
    assert pieces and all(p.strip() for p in pieces)               # no piece is an empty cell
    assert any("␣" in p for p in pieces) and any("<0xF0>" in p for p in pieces), pieces
