"""Truncation policies compared (issue 16): analysis/policies.py, and what `analyze` advises when a
turn's prefix changed because truncation dropped messages."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import numpy as np

from workbench import Assembler
from workbench.analysis import policies
from workbench.analysis.policies import compare_policies, prefix_stable_turns, with_policy
from workbench.analysis.providers import TurnPrompt
from workbench.cli.main import main
from workbench.sessions import load_session
from workbench.truncation import TruncationPolicy

SESSIONS = Path(__file__).resolve().parent.parent / "sample_sessions"


def test_module_docstring_examples_run() -> None:
    assert doctest.testmod(policies).failed == 0


def test_prefix_stable_turns_counts_turns_that_extend_the_whole_previous_prompt() -> None:
    doc = np.arange(100, dtype=np.uint32)
    edited = doc.copy()
    edited[5] += 1
    prompts = [TurnPrompt(doc[:10]), TurnPrompt(doc[:20]), TurnPrompt(doc[:20]), TurnPrompt(edited[:30]),
               TurnPrompt(edited[:15])]
    # 2 extends 1; 3 repeats 2 (nothing new, still whole); 4 is edited at 5; 5 is shorter than 4
    assert prefix_stable_turns(prompts) == 2
    assert prefix_stable_turns(prompts[:1]) == 0 and prefix_stable_turns([]) == 0


def test_with_policy_keeps_every_other_setting() -> None:
    asm = Assembler(template="qwen2.5", context_window=20000, reserve=500, injection="reject", cache=None,
                    truncation=TruncationPolicy(strategy="sliding", low_water=0.3, cut=True, unit="message"))
    other = with_policy(asm, "summary-slot")
    t = other.config.truncation
    assert (t.strategy, t.low_water, t.unit, t.cut) == ("summary-slot", 0.3, "message", False)
    assert other.template is asm.template and other.tokenizer is asm.tokenizer
    assert (other.config.context_window, other.config.reserve, other.config.injection) == (20000, 500, "reject")
    assert with_policy(asm, "sliding").config.truncation.cut   # sliding may cut


def test_each_policy_equals_its_own_session() -> None:
    turns = list(load_session(SESSIONS / "overflow.json").turns)
    asm = Assembler(template="qwen2.5", context_window=32768, cache=None)
    runs = compare_policies(asm, turns, {"vllm": None, "anthropic": None})
    assert [r.policy for r in runs] == ["sliding", "chunked", "summary-slot"]
    for r in runs:
        own = Assembler(template="qwen2.5", context_window=32768, cache=None,
                        truncation=TruncationPolicy(strategy=r.policy)).session()
        ids = [own.assemble(t).token_ids for t in turns]
        assert all(np.array_equal(a, p.token_ids) for a, p in zip(ids, r.prompts))
        assert r.tokens == sum(len(a) for a in ids) and r.truncated_turns > 0
        assert r.to_json()["providers"]["vllm"]["cached_tokens"] == r.cached_tokens("vllm")
    sliding, chunked, slot = runs
    assert chunked.cached_tokens("vllm") > sliding.cached_tokens("vllm")
    assert chunked.prefix_stable_turns > sliding.prefix_stable_turns
    assert slot.prefix_stable_turns > sliding.prefix_stable_turns


def test_analyze_names_the_policy_and_what_to_do(capsys) -> None:  # type: ignore[no-untyped-def]
    """`workbench analyze --truncation POLICY`: a `truncated` cause's advice is the policy's own."""
    advice: dict[str, list[dict]] = {}
    for policy in ("sliding", "chunked", "summary-slot"):
        assert main(["analyze", str(SESSIONS / "overflow.json"), "--truncation", policy, "--json"]) == 0
        turns = json.loads(capsys.readouterr().out)["turns"]
        advice[policy] = [c for t in turns for c in t["causes"] if c["code"] == "truncated"]
        assert advice[policy], policy
        assert all(f"truncation ({policy})" in c["message"] for c in advice[policy])
    sliding = advice["sliding"][0]["advice"]
    assert "--truncation chunked" in sliding and "holds for about" in sliding and "turns" in sliding
    assert all("chunk boundary" in c["advice"] and "Expected" in c["advice"] for c in advice["chunked"])
    assert all("summary slot's text changed" in c["advice"] for c in advice["summary-slot"])
    # sliding changes the prefix on most turns once the history overflows; chunked once per chunk
    assert len(advice["chunked"]) * 3 <= len(advice["sliding"])
    # the text view prints the advice under the turn
    assert main(["analyze", str(SESSIONS / "overflow.json"), "--truncation", "chunked"]) == 0
    assert "advice: Chunked truncation dropped down to a chunk boundary" in capsys.readouterr().out
