"""The budget controls (context window, reserve, truncation policy) and the over-budget view, at the
library level: `WorkbenchState.set_budget`, `budget_settings`, `overflow`, the token view's patch
and the budget bar, the Controller's inline errors, and the export bundle. Real tokenizers and the
shipped sample that overflows its window (overflow.json, 32,768 tokens, about 60k in all).

The oracle for what is struck: a cold assembly of the kept messages alone (a fresh Assembler, no
cache, no truncation) must give exactly the ids of the part that is not struck through.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workbench import Assembler
from workbench.errors import BudgetSettingError, WorkbenchError
from workbench.truncation import TruncationPolicy
from workbench.ui.budget_view import DROPPED, OVER, POLICIES, SUMMARY
from workbench.ui.charts import budget_figure
from workbench.ui.controller import Controller
from workbench.ui.document import SessionDocument
from workbench.ui.state import WorkbenchState, sample_sessions
from workbench.ui.viewmodel import TokenViewModel

OVERFLOW = sample_sessions()["overflow.json"]
TEMPLATE = "chatml"   # renders each message on its own: the kept part alone has the same ids


def state_of(path: str = OVERFLOW, template: str = TEMPLATE) -> WorkbenchState:
    s = WorkbenchState(path, autosave=None, template=template, restore=False)
    s.assemble()
    return s


def alone(state: WorkbenchState, seqs: set[int]) -> np.ndarray:
    """The oracle: the request with only messages `seqs`, assembled cold with nothing dropped."""
    req = state.doc.request(state.turn)
    kept = {**req, "messages": [m for i, m in enumerate(req["messages"]) if i in seqs]}
    asm = Assembler(template=TEMPLATE, context_window=10_000_000, truncation=TruncationPolicy(enabled=False),
                    cache=None)
    return asm.assemble(kept).token_ids


def every_seq(state: WorkbenchState) -> set[int]:
    return set(range(len(state.doc.request(state.turn)["messages"])))


# ------------------------------------------------------------------------------------ the settings
def test_settings_say_where_each_value_came_from() -> None:
    s = state_of()
    got = s.budget_settings()
    assert (got.context_window, got.window_source, got.window_explicit) == (32768, "session file", 32768)
    assert (got.reserve, got.reserve_explicit, got.policy) == (4096, None, "sliding")
    plain = state_of(sample_sessions()["support_chat.json"], "qwen2.5").budget_settings()
    assert (plain.context_window, plain.window_source) == (32768, "template qwen2.5")
    assert set(POLICIES) == {"sliding", "chunked", "summary-slot", "none"}


def test_window_and_reserve_go_into_the_document_and_save_keeps_them(tmp_path: Path) -> None:
    s = state_of()
    s.set_budget(context_window="16,384", reserve="2048")
    r = s.assemble()
    assert (r.budget.context_window, r.budget.reserve, r.budget.input_budget) == (16384, 2048, 14336)
    assert r.budget.reserve_source == "request max_tokens"
    assert s.doc.data["context_window"] == 16384 and s.doc.data["max_tokens"] == 2048 and s.doc.dirty
    got = s.budget_settings()
    assert (got.window_source, got.reserve_source) == ("session file", "session file (max_tokens)")
    s.save(str(tmp_path / "mine.json"))
    saved = json.loads((tmp_path / "mine.json").read_text())
    assert (saved["context_window"], saved["max_tokens"]) == (16384, 2048)
    # Blank: back to the template's own (the field leaves the file).
    s.set_budget(context_window="", reserve=None)
    assert "context_window" not in s.doc.data and "max_tokens" not in s.doc.data
    back = s.budget_settings()
    assert (back.context_window, back.window_source) == (32768, "template chatml")


def test_a_log_gets_the_reserve_in_every_request() -> None:
    doc = SessionDocument({"format": "openai", "requests": [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                      {"role": "user", "content": "again"}], "max_completion_tokens": 100}]})
    s = WorkbenchState(doc, autosave=None, restore=False)
    s.set_budget(reserve=512)
    assert [r.get("max_tokens") for r in doc.data["requests"]] == [512, None]
    assert doc.data["requests"][1]["max_completion_tokens"] == 512   # the key the file already used
    assert s.assemble().budget.reserve == 512


@pytest.mark.parametrize("values, control, says", [
    ({"context_window": "-5"}, "context_window", "must be positive"),
    ({"context_window": "0"}, "context_window", "must be positive"),
    ({"context_window": "abc"}, "context_window", "a whole number of tokens"),
    ({"context_window": "1.5"}, "context_window", "a whole number of tokens"),
    ({"context_window": 10**12}, "context_window", "more than any model reads"),
    ({"reserve": "-1"}, "reserve", "zero or more"),
    ({"reserve": "12.0"}, "reserve", "a whole number of tokens"),
    ({"reserve": "32768"}, "reserve", "leaves no room for input"),
    ({"reserve": "40000"}, "reserve", "leaves no room for input"),
    ({"policy": "newest-first"}, "policy", "unknown truncation policy"),
])
def test_bad_values_name_their_control_and_change_nothing(values: dict, control: str, says: str) -> None:
    s = state_of()
    before, data, shown = s.result, json.dumps(s.doc.data), s.generation
    with pytest.raises(BudgetSettingError) as err:
        s.set_budget(**values)
    assert err.value.control == control and says in str(err.value)
    assert json.dumps(s.doc.data) == data and s.generation == shown and s.result is before
    assert s.policy == "sliding"


def test_a_window_below_an_explicit_reserve_is_refused_at_the_window() -> None:
    s = state_of()
    s.set_budget(reserve="8000")
    with pytest.raises(BudgetSettingError) as err:
        s.set_budget(context_window="6000")
    assert err.value.control == "context_window" and "leaves no room" in str(err.value)
    assert s.doc.data["context_window"] == 32768


def test_a_file_whose_reserve_fills_its_window_is_fixed_from_the_reserve_box() -> None:
    doc = SessionDocument({"format": "openai", "context_window": 1000, "max_tokens": 1000,
                           "messages": [{"role": "user", "content": "hi"}]})
    s = WorkbenchState(doc, autosave=None, restore=False)
    with pytest.raises(WorkbenchError, match="leaves no room for input"):
        s.assemble()                                  # refused, and said: the view has nothing to show yet
    s.set_budget(reserve="200")
    assert s.assemble().budget.input_budget == 800 and doc.data["max_tokens"] == 200


# ------------------------------------------------------------------------------------ what is struck
def test_no_policy_shows_the_whole_prompt_with_the_overflow_struck() -> None:
    s = state_of()
    s.set_budget(policy="none")
    r = s.assemble()
    ov = s.overflow
    assert ov is not None and ov.full is r and not r.dropped
    budget = r.budget.input_budget
    assert r.budget.used > budget and ov.over == r.budget.used - budget
    # What fits is exactly the first `budget` ids of the whole prompt; the rest is flagged "over".
    assert np.array_equal(ov.seen_ids(), r.token_ids[:budget])
    assert np.array_equal(ov.ids(OVER), r.token_ids[budget:])
    assert np.array_equal(ov.kept_ids(), r.token_ids) and not ov.dropped_seqs
    assert ov.note().startswith(f"{ov.over:,} tokens over the window: the struck-through part would not fit")
    # The segments still spell the prompt, the one the budget falls in split at a token boundary.
    assert "".join(seg.text for seg in ov.segments) == r.text
    assert ov.flags[0] == "" and ov.flags[-1] == OVER and len(ov.segments) == len(r.segments) + 1


@pytest.mark.parametrize("policy", ["sliding", "chunked"])
def test_a_truncating_policy_strikes_the_messages_it_drops(policy: str) -> None:
    s = state_of()
    s.set_budget(policy=policy)
    r = s.assemble()
    ov = s.overflow
    assert r.dropped and ov is not None and ov.full is not r and not ov.over
    assert ov.dropped_seqs == {d.seq for d in r.dropped}
    # The part not struck through is what the model sees: the kept result's ids, and a cold
    # assembly of the kept messages alone.
    assert np.array_equal(ov.kept_ids(), r.token_ids)
    assert np.array_equal(ov.kept_ids(), alone(s, every_seq(s) - ov.dropped_seqs))
    assert np.array_equal(ov.ids(DROPPED, ""), ov.full.token_ids)   # nothing else is struck
    assert f"{policy} truncation drops {len(ov.dropped_seqs)} message(s)" in ov.note()


def test_summary_slot_strikes_what_its_summary_stands_for_and_shows_the_summary_sent() -> None:
    s = state_of()
    s.set_budget(policy="summary-slot")
    r = s.assemble()
    ov = s.overflow
    assert ov is not None and ov.dropped_seqs == {d.seq for d in r.dropped}
    # What is not struck is the prompt sent, the summary slot's message included, at its place...
    assert np.array_equal(ov.kept_ids(), r.token_ids) and np.array_equal(ov.seen_ids(), r.token_ids)
    (i,) = [k for k, f in enumerate(ov.flags) if f == SUMMARY]
    slot = ov.segments[i]
    assert slot.seq == -1 and f"[{len(r.dropped)} earlier messages were left out" in slot.text
    assert ov.summary_tokens == slot.token_count > 0 and slot in r.segments
    assert ov.flags[i - 1] == DROPPED and DROPPED not in ov.flags[i + 1:]   # right after what it stands for
    # ...and without it, the kept messages alone, assembled cold.
    assert np.array_equal(ov.ids(""), alone(s, every_seq(s) - ov.dropped_seqs))
    assert f"a summary message of {slot.token_count:,} tokens, inserted by the truncation policy" in ov.note()


def test_a_policy_that_cannot_fit_shows_the_prompt_instead_of_refusing() -> None:
    s = state_of()
    s.set_budget(context_window="200")            # the system prompt and the last user message need more
    r = s.assemble()                              # no error: shown
    ov = s.overflow
    assert s.error == "" and ov is not None and ov.full is r and ov.over > 0
    assert "sliding truncation cannot fit it: the parts that are never dropped need" in ov.note()
    kept = every_seq(s) - ov.dropped_seqs
    assert np.array_equal(ov.kept_ids(), alone(s, kept))           # every droppable message is struck
    budget = r.budget.input_budget
    assert np.array_equal(ov.seen_ids(), ov.kept_ids()[:budget]) and len(ov.seen_ids()) == budget
    assert ov.over == len(ov.kept_ids()) - budget


def test_a_prompt_that_fits_strikes_nothing() -> None:
    s = state_of(sample_sessions()["support_chat.json"], "qwen2.5")
    s.set_budget(policy="none")
    s.assemble()
    assert s.overflow is None


# ------------------------------------------------------------------------------------ views
def test_the_token_view_patch_flags_each_struck_segment() -> None:
    s = state_of()
    s.set_budget(policy="none")
    r = s.assemble()
    ov = s.overflow
    assert ov is not None
    patch = TokenViewModel(s.assembler().tokenizer).update(r, ov)
    flags = [seg.get("struck", "") for seg in patch.segments]
    assert flags == list(ov.flags)
    ids = np.frombuffer(patch.ids, "<u4")
    n_over = sum(seg["end"] - seg["start"] for seg in patch.segments if seg.get("struck") == OVER)
    assert n_over == ov.over and np.array_equal(ids[len(ids) - n_over:], r.token_ids[-n_over:])
    assert patch.header["overflow"]["over"] == ov.over
    assert "the struck-through part would not fit" in patch.header["overflow"]["note"]
    # Back under the policy: the flags change, so the segments travel again with theirs.
    model = TokenViewModel(s.assembler().tokenizer)
    model.update(r, ov)
    s.set_budget(policy="sliding")
    r2 = s.assemble()
    again = model.update(r2, s.overflow)
    assert {seg.get("struck") for seg in again.segments} >= {DROPPED}
    assert again.header["overflow"]["dropped"] == len(r2.dropped)


def test_the_budget_bar_shows_the_overflow() -> None:
    s = state_of()
    s.set_budget(policy="none")
    r = s.assemble()
    b = r.budget
    fig = budget_figure(r, s.overflow)
    window, budget = ({sh["name"]: sh for sh in fig["layout"]["shapes"]}[k] for k in ("context window", "input budget"))
    assert (window["x0"], window["x1"], budget["x0"]) == (b.context_window, b.context_window, b.input_budget)
    # The prompt up to the input budget, the reserve up to the window, then what is over, past it.
    x = {t["name"]: t["x"][0] for t in fig["data"]}
    names = [t["name"] for t in fig["data"]]
    assert names[-2:] == ["reserve", "over the window"] and "free" not in names
    assert sum(t["x"][0] for t in fig["data"][:-2]) == b.input_budget
    assert x["reserve"] == b.context_window - b.input_budget
    assert x["over the window"] == s.overflow.over == b.used - b.input_budget > 0
    assert fig["layout"]["xaxis"]["range"] == [0, b.context_window + s.overflow.over]
    assert f"over budget by {b.used - b.input_budget:,}" in fig["layout"]["title"]["text"]
    s.set_budget(policy="sliding")
    r = s.assemble()
    fig = budget_figure(r, s.overflow)
    dropped = [t for t in fig["data"] if t["name"] == "dropped (not sent)"]
    assert dropped and dropped[0]["x"] == [s.overflow.dropped_tokens]
    assert sum(t["x"][0] for t in fig["data"][:-1]) == r.budget.context_window    # the dropped bar past it
    assert [sh["name"] for sh in fig["layout"]["shapes"]] == ["context window"]
    assert "over budget" not in fig["layout"]["title"]["text"]


class _Host:
    def __init__(self) -> None:
        self.results: list = []
        self.errors: list[str] = []

    def call_later(self, delay_ms, fn): fn()                      # noqa: ANN001, ANN201, E704
    def call_from_thread(self, fn): fn()                          # noqa: ANN001, ANN201, E704
    def show_result(self, result): self.results.append(result)    # noqa: ANN001, ANN201, E704
    def show_summary(self, result): pass                          # noqa: ANN001, ANN201, E704
    def show_error(self, message): self.errors.append(message)    # noqa: ANN001, ANN201, E704
    def show_editor(self, structural): pass                       # noqa: ANN001, ANN201, E704
    def show_edit_error(self, error): pass                        # noqa: ANN001, ANN201, E704
    def show_panels(self, panels): pass                           # noqa: ANN001, ANN201, E704
    def show_autosaved(self): pass                                # noqa: ANN201, E704
    def show_progress(self, text): pass                           # noqa: ANN001, ANN201, E704
    def show_panels_failed(self, error): pass                     # noqa: ANN001, ANN201, E704


def test_the_controller_returns_inline_errors_and_keeps_the_last_good_view() -> None:
    s = WorkbenchState(OVERFLOW, autosave=None, template=TEMPLATE, restore=False)
    host = _Host()
    c = Controller(s, host, background=False)
    c.views = frozenset()
    c.refresh()
    first = s.result
    errors = c.set_budget(reserve="99999")
    assert list(errors) == ["reserve"] and "leaves no room" in errors["reserve"]
    assert s.result is first and host.results == [first] and not host.errors
    assert c.set_budget(context_window="20000") == {}
    assert s.result is not first and s.result.budget.context_window == 20000 and host.results[-1] is s.result
    assert c.set_budget(policy="none") == {} and s.overflow is not None and s.overflow.over > 0


class _HeldHost(_Host):
    """Timers held until the test runs them, and each result shown with the overflow of its time."""

    def __init__(self, state: WorkbenchState) -> None:
        super().__init__()
        self.state, self.later, self.shown = state, [], []

    def call_later(self, delay_ms, fn): self.later.append(fn)     # noqa: ANN001, ANN201, E704
    def show_result(self, result): self.shown.append((result, self.state.overflow))  # noqa: ANN001, ANN201, E704


@pytest.mark.parametrize("policy", ["sliding", "none"])
def test_a_switch_paints_the_kept_prompt_first_then_the_same_overflow_as_inline(policy: str) -> None:
    s = WorkbenchState(OVERFLOW, autosave=None, template=TEMPLATE, restore=False)
    s.set_budget(context_window="6000", policy=policy)
    host = _HeldHost(s)
    c = Controller(s, host, background=False)
    c.views = frozenset()
    c.choose(template="qwen2.5")
    (first, struck_then), = host.shown
    assert struck_then is None and s.overflow_pending            # what the model sees, nothing struck yet
    for fn in list(host.later):
        fn()
    last, overflow = host.shown[-1]
    assert overflow is not None and not s.overflow_pending and last is first
    # The same as a switch that computes the overflow inline.
    again = WorkbenchState(OVERFLOW, autosave=None, template="qwen2.5", restore=False)
    again.set_budget(context_window="6000", policy=policy)
    inline = again.assemble()
    assert np.array_equal(inline.token_ids, last.token_ids) and again.overflow is not None
    assert again.overflow.flags == overflow.flags
    assert np.array_equal(again.overflow.full.token_ids, overflow.full.token_ids)


def test_an_edit_before_the_deferred_overflow_makes_it_a_no_op() -> None:
    s = WorkbenchState(OVERFLOW, autosave=None, template=TEMPLATE, restore=False)
    s.set_budget(context_window="6000")
    host = _HeldHost(s)
    c = Controller(s, host, background=False)
    c.views = frozenset()
    c.choose(template="qwen2.5")
    c.refresh()                                # an edit's assembly: the overflow computed inline
    assert s.overflow is not None and not s.overflow_pending
    shown = len(host.shown)
    for fn in list(host.later):
        fn()
    assert len(host.shown) == shown            # nothing shown twice


# ------------------------------------------------------------------------------------ export
def test_export_carries_the_window_reserve_and_policy(tmp_path: Path) -> None:
    from workbench.export.loader import load_bundle
    s = state_of()
    s.set_budget(context_window="20000", reserve="1000", policy="chunked")
    r = s.assemble()
    assert r.dropped
    folder, report = s.export(str(tmp_path / "bundle"))
    assert report.ok
    asm = load_bundle(folder)
    assert asm.config.context_window == 20000 and asm.config.reserve == 1000
    assert asm.config.truncation.strategy == "chunked" and asm.config.truncation.enabled
    # Production's request may come without max_tokens: the bundle's reserve gives the same ids.
    req = {k: v for k, v in s.doc.request(s.turn).items() if k != "max_tokens"}
    assert np.array_equal(asm.assemble(req).token_ids, r.token_ids)
    assert "context window 20000, reserve 1000" in (folder / "README.md").read_text()
    s.set_budget(policy="none")
    folder, report = s.export(str(tmp_path / "none"))
    assert report.ok and not load_bundle(folder).config.truncation.enabled
