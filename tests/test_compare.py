"""Compare (workbench/ui/compare.py): two templates, tokenizers or versions of a session, side by
side. Real tokenizers and templates; each side held to a cold assembly; the diff held to what it
claims (its runs cover both prompts, equal runs are equal ids); the cache figures held to a fresh
simulation over cold turns. Then the Compare tab in the app (inline, no server) and the notebook's
`Workbench` in a real Jupyter kernel."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workbench.analysis.providers import PROVIDERS, simulate
from workbench.analysis.turn_prompts import turn_prompts
from workbench.assembly import Assembler
from workbench.ui.compare import (
    CHANGED,
    EQUAL,
    ONLY,
    PINNED,
    SAVED,
    CacheFigures,
    Choice,
    CompareRunner,
    Side,
    assemble_side,
    compare,
    diff_ids,
    labels_of,
    pin,
    sides,
)
from workbench.ui.compare_html import compare_html
from workbench.ui.document import SessionDocument
from workbench.ui.state import AUTO, WorkbenchState

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = str(ROOT / "sample_sessions" / "support_chat.json")
CODING = str(ROOT / "sample_sessions" / "coding_corrections.json")
BROKEN_TEMPLATE = "{% for m in messages %}\n{{ m.content }\n{% endfor %}"   # line 2: unexpected '}'


def state(path: str = CODING) -> WorkbenchState:
    s = WorkbenchState(path, autosave=None, restore=False)
    s.assemble()
    return s


def cold_ids(side: Side, turn: int) -> np.ndarray:
    tok = None if side.tokenizer == AUTO else side.tokenizer
    return Assembler(template=side.template, tokenizer=tok, cache=None).assemble(side.doc.request(turn)).token_ids


def check_runs(c, n: int, m: int) -> None:  # type: ignore[no-untyped-def]
    """The runs cover both prompts in order, without gaps; equal runs are equal ids, others differ."""
    at_l = at_r = 0
    for r in c.runs:
        assert r.left[0] == at_l and r.right[0] == at_r, r
        a, b = c.a.ids[r.left[0]:r.left[1]], c.b.ids[r.right[0]:r.right[1]]
        if r.op == "equal":
            assert np.array_equal(a, b) and len(a) > 0
        else:
            assert not np.array_equal(a, b)
        at_l, at_r = r.left[1], r.right[1]
    assert (at_l, at_r) == (n, m)


@pytest.mark.parametrize("kind, value", [("template", "llama3"), ("template", "qwen3"), ("template", "mistral-v7"),
                                         ("tokenizer", "o200k_base"), ("tokenizer", "llama3")])
def test_each_side_equals_a_cold_assembly_and_the_runs_cover_both(kind: str, value: str) -> None:
    s = state()
    a, b = sides(s, Choice(kind, value))
    c = compare(a, b, s.turn)
    assert c.a.ok and c.b.ok, (c.a.error, c.b.error)
    for side in (c.a, c.b):
        assert side.ids.dtype == np.uint32
        assert np.array_equal(side.ids, cold_ids(side.side, s.turn))
        assert len(side.labels) == len(side.ids) == len(side.marks)
    check_runs(c, len(c.a.ids), len(c.b.ids))
    # The marks say the same as the runs, token by token.
    for r in c.runs:
        want = EQUAL if r.op == "equal" else CHANGED if r.op == "changed" else ONLY
        assert set(c.a.marks[r.left[0]:r.left[1]].tolist()) <= {want}
        assert set(c.b.marks[r.right[0]:r.right[1]].tolist()) <= {want}
    # Every segment of each side is in exactly one row, with its own count.
    assert sorted(r.left for r in c.rows if r.left is not None) == list(range(len(c.a.segments)))
    assert sorted(r.right for r in c.rows if r.right is not None) == list(range(len(c.b.segments)))
    assert sum(r.delta for r in c.rows) == c.delta == len(c.b.ids) - len(c.a.ids)


def test_a_side_against_itself_is_all_equal() -> None:
    s = state(SUPPORT)
    a, _ = sides(s, Choice("template", "llama3"))
    c = compare(a, a, s.turn)
    assert c.identical and c.delta == 0
    assert [(r.op, r.left, r.right) for r in c.runs] == [("equal", (0, len(c.a.ids)), (0, len(c.a.ids)))]
    assert not c.a.marks.any() and not c.b.marks.any()
    assert all(r.delta == 0 and r.left == r.right for r in c.rows)
    assert "the same prompt on both sides" in compare_html(c)


def test_llama3_against_qwen_shows_the_special_tokens_differing() -> None:
    s = state()
    assert s.template == "qwen2.5"
    c = compare(*sides(s, Choice("template", "llama3")), s.turn)

    def specials(side):  # type: ignore[no-untyped-def]
        return {side.labels[i] for i, t in enumerate(side.ids.tolist()) if t in side.specials}

    assert {"<|im_start|>", "<|im_end|>"} <= specials(c.a) and "<|start_header_id|>" not in specials(c.a)
    assert {"<|begin_of_text|>", "<|start_header_id|>", "<|eot_id|>"} <= specials(c.b)
    assert "<|im_start|>" not in specials(c.b)
    # Each side's special tokens are marked as differing, and llama3's BOS segment is B's alone.
    for side in (c.a, c.b):
        at = [i for i, t in enumerate(side.ids.tolist()) if t in side.specials]
        assert at and all(side.marks[i] != EQUAL for i in at)
    bos = [r for r in c.rows if r.label == "bos"]
    assert len(bos) == 1 and bos[0].left is None and bos[0].right_tokens == 1 and bos[0].delta == 1
    page = compare_html(c)
    assert "wb-cmp-special" in page and "&lt;|start_header_id|&gt;" in page and "&lt;|im_start|&gt;" in page


def test_same_tokenizer_templates_differ_only_where_the_templates_do() -> None:
    # qwen2.5 and qwen3 share a tokenizer: the messages' own tokens are equal runs. (On a session
    # with a system prompt and no tools, the two render the same prompt.)
    plain = state()
    assert compare(*sides(plain, Choice("template", "qwen3")), plain.turn).identical
    s = state(SUPPORT)
    c = compare(*sides(s, Choice("template", "qwen3")), s.turn)
    equal = sum(r.left[1] - r.left[0] for r in c.runs if r.op == "equal")
    assert not c.identical and len(c.a.ids) // 2 < equal <= min(len(c.a.ids), len(c.b.ids))
    check_runs(c, len(c.a.ids), len(c.b.ids))


def test_versions_the_saved_file_and_a_pinned_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(Path(CODING).read_text("utf-8"), "utf-8")
    s = state(str(path))
    choice = Choice("version", SAVED)
    assert compare(*sides(s, choice), s.turn).identical          # nothing edited yet
    last = len(s.doc.messages(s.turn)) - 1
    s.apply({"op": "set", "index": last, "field": "content", "value": "A different last message, longer now."})
    s.assemble()
    c = compare(*sides(s, choice), s.turn)
    assert not c.identical and c.b.side.version == "saved file"
    changed = [r for r in c.rows if r.left_changed or r.right_changed]
    assert changed and all(r.label.endswith(f"#{last}") or r.label == "generation_prompt" for r in changed), changed
    assert np.array_equal(c.b.ids, cold_ids(c.b.side, s.turn))
    # Pin, edit again: B is the pinned version, and the edit after the pin is the difference.
    choice.pinned, choice.value, choice.pinned_source = pin(s.doc), PINNED, s.source
    assert compare(*sides(s, choice), s.turn).identical
    s.apply({"op": "set", "index": last, "field": "content", "value": "Edited after the pin."})
    c = compare(*sides(s, choice), s.turn)
    assert not c.identical and "pinned at" in c.b.side.label
    assert "A different last message" in c.b.result.text and "Edited after the pin." in c.a.result.text
    # Another session opened: the snapshot was of the other one, so it is not offered.
    s.load(SUPPORT, restore=False)
    from workbench.errors import WorkbenchError
    with pytest.raises(WorkbenchError, match="no other version"):
        sides(s, choice)
    # The saved file is read again when it changes on disk.
    s.load(str(path), restore=False)
    choice.value = SAVED
    first = sides(s, choice)[1].doc
    assert sides(s, choice)[1].doc is first
    path.write_text(Path(SUPPORT).read_text("utf-8"), "utf-8")
    assert sides(s, choice)[1].doc is not first and sides(s, choice)[1].doc.turn_count != first.turn_count


def test_no_other_version_says_so() -> None:
    doc = SessionDocument(json.loads(Path(CODING).read_text("utf-8")), None, "upload.json")
    s = WorkbenchState(doc, autosave=None)
    from workbench.errors import WorkbenchError
    with pytest.raises(WorkbenchError, match="no other version"):
        sides(s, Choice("version", SAVED))


def test_a_side_that_fails_shows_its_error_and_the_other_side_still_shows() -> None:
    s = state()
    a, _ = sides(s, Choice("template", "llama3"))
    bad = Side("B: broken", s.doc, "qwen2.5", AUTO, BROKEN_TEMPLATE)
    c = compare(a, bad, s.turn)
    assert c.a.ok and len(c.a.ids) > 0 and not c.b.ok and "line 2" in c.b.error
    assert not c.identical and c.runs == ()
    page = compare_html(c)
    assert "line 2" in page and page.count('class="wb-cmp-tok') >= min(len(c.a.ids), 2000)
    missing = assemble_side(a, 999)
    assert not missing.ok and "turn 999 does not exist" in missing.error


def test_cache_figures_equal_a_fresh_simulation_and_follow_an_edit() -> None:
    s = state()
    figures = CacheFigures()
    c = figures.of_both(compare(*sides(s, Choice("template", "llama3")), s.turn))
    assert c.cache and [m.provider for m in c.a.simulations] == list(PROVIDERS)

    def fresh(side: Side) -> list:
        tok = None if side.tokenizer == AUTO else side.tokenizer
        asm = Assembler(template=side.template, tokenizer=tok, cache=None)
        results = [asm.assemble(r) for r in side.doc.requests()]
        return [simulate(turn_prompts(results, "auto", asm), p).to_json() for p in PROVIDERS]

    assert [m.to_json() for m in c.a.simulations] == fresh(c.a.side)
    assert [m.to_json() for m in c.b.simulations] == fresh(c.b.side)
    assert c.a.simulations != c.b.simulations
    # An edit: the turns before it are kept, and the figures are those of the edited session.
    last = len(s.doc.messages(s.turn)) - 1
    s.apply({"op": "set", "index": last, "field": "content", "value": "Shorter."})
    c2 = figures.of_both(compare(*sides(s, Choice("template", "llama3")), s.turn))
    assert [m.to_json() for m in c2.a.simulations] == fresh(c2.a.side) != [m.to_json() for m in c.a.simulations]


def test_split_characters_are_shown_as_bytes() -> None:
    from workbench.tokenizers import get_tokenizer
    tok = get_tokenizer("qwen2.5")
    labels = labels_of(tok, tok.encode("a 🦜 b"))
    assert "<0xA6>" in labels and any(lbl.startswith(" <0xF0>") for lbl in labels)
    assert "".join(labels) != "a 🦜 b" and labels[0] == "a"


def test_the_runner_computes_only_while_open_and_a_closed_tab_cancels() -> None:
    s = state()
    shown: list = []
    later: list = []
    r = CompareRunner(s, lambda _ms, fn: later.append(fn), lambda fn: fn(), lambda c, e: shown.append((c, e)),
                      lambda _t: None)
    r.request(0)
    assert later == [] and shown == []                      # the tab is closed: nothing
    r.set_open(True)
    assert len(later) == 1
    r.set_open(False)
    later.pop()()                                           # the closed tab's run never starts
    assert shown == [] and not r._running
    out = r.run()                                           # here and now
    assert out is not None and out.cache and shown[-1][0] is out and out.b.side.template == "qwen3"
    # Side A is the live state: its figures are the cache panel's, equal to its own simulation.
    own = CacheFigures().simulations(out.a.side)
    assert [m.to_json() for m in out.a.simulations] == [m.to_json() for m in own]
    assert s._last_panels is not None and s._last_panels.simulations == out.a.simulations


def test_the_app_has_a_compare_tab(tmp_path: Path) -> None:
    from workbench.ui.app import WorkbenchApp
    from workbench.ui.document import Autosave
    app = WorkbenchApp(CODING, autosave=Autosave(tmp_path))   # no server: the runner works inline
    app.tabs.active = len(app.tabs) - 3                        # Compare, before Run and Diagnostics
    assert app.comparer.open
    page = app.compare_out.object
    assert "wb-cmp-grid" in page and "B: qwen3" in page and "Cache figures" in page
    app.compare_value.value = "llama3"
    assert "&lt;|start_header_id|&gt;" in app.compare_out.object
    app.compare_kind.value = "tokenizer"
    assert app.comparer.choice.kind == "tokenizer" and app.compare_value.value in app.compare_value.options
    assert "B: qwen2.5 / " + app.compare_value.value in app.compare_out.object
    app.compare_pin.clicks += 1
    assert app.compare_kind.value == "version" and app.compare_value.value == PINNED
    assert "the same prompt on both sides" in app.compare_out.object


KERNEL_CELLS = [
    "import json\nfrom workbench.ui.notebook import Workbench\nwb = Workbench({path!r})\nwb",
    "c = wb.compare('template', 'llama3')\n"
    "facts = {{'a': c.a.result.template['name'], 'b': c.b.result.template['name'], 'delta': c.delta,\n"
    "         'b_specials': sorted({{c.b.labels[i] for i, t in enumerate(c.b.ids.tolist()) if t in c.b.specials}}),\n"
    "         'providers': [m.provider for m in c.b.simulations],\n"
    "         'shown': '&lt;|start_header_id|&gt;' in wb.compare_out.value, 'value': wb.compare_value.value}}\n"
    "wb.edit(len(wb.state.doc.messages(wb.state.turn)) - 1, 'Edited in the kernel.')\n"
    "v = wb.compare('version', 'saved file')\n"
    "facts.update(version_identical=v.identical, version_b=v.b.side.version,\n"
    "             version_shown='saved file' in wb.compare_out.value)\n"
    "print(json.dumps(facts))",
]


def test_the_notebook_workbench_compares_in_a_real_kernel(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src.format(path=CODING)) for src in KERNEL_CELLS]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in nb.cells[0].outputs)
    facts = json.loads("".join(o.get("text", "") for o in nb.cells[1].outputs if o.get("output_type") == "stream"))
    assert facts["a"] == "qwen2.5" and facts["b"] == "llama3" and facts["delta"] != 0
    assert "<|start_header_id|>" in facts["b_specials"] and facts["shown"] and facts["value"] == "llama3"
    assert facts["providers"] == list(PROVIDERS)
    assert facts["version_identical"] is False and facts["version_b"] == "saved file" and facts["version_shown"]


def test_diff_ids_finds_an_insertion_and_a_change_in_the_middle() -> None:
    left = np.arange(100, dtype=np.uint32)
    right = np.concatenate([left[:50], np.array([900, 901, 902], np.uint32), left[50:]])
    right[3 + 80] = 999
    runs = diff_ids(left, right)
    assert [(r.op, r.left, r.right) for r in runs] == [
        ("equal", (0, 50), (0, 50)), ("only-right", (50, 50), (50, 53)), ("equal", (50, 80), (53, 83)),
        ("changed", (80, 81), (83, 84)), ("equal", (81, 100), (84, 103))]
    assert diff_ids(left, left[:0]) == (type(runs[0])("only-left", (0, 100), (0, 0)),)


def test_closing_the_tab_cancels_a_background_run_and_reopening_finishes_it() -> None:
    import threading
    s = state(SUPPORT)
    gate, finished = threading.Event(), threading.Event()
    shown: list = []
    r = CompareRunner(s, lambda _ms, fn: fn(), lambda fn: fn(), lambda c, e: shown.append((c, e)),
                      lambda text: None if text else finished.set(), hold=gate.wait)
    r.set_open(True)            # the worker starts, and waits at its first check for the gate
    assert r._running
    r.set_open(False)
    gate.set()
    assert finished.wait(60)
    assert not r._running and all(c is None or not c.cache for c, _ in shown) and all(not e for _, e in shown)
    finished.clear()
    r.set_open(True)
    assert finished.wait(120)
    assert shown and shown[-1][0] is not None and shown[-1][0].cache and not shown[-1][1]
