"""One source of truth (issue 33): every figure a tab of the app shows equals the CLI's JSON for the
same state: every shipped sample session, under each truncation policy (and none), with a window
small enough that the long ones truncate.

The page is the app's own panes (`WorkbenchApp`, in process: what each pane holds is what the
browser draws; tests/test_app_browser.py and the other browser tests check that drawing), read back
from their HTML; the CLI is `workbench render | simulate | kv | analyze --json` run in process on the
session file with the same options. Per tab:
- the summary line and the token view: tokens, segments, budget used and input budget, and the
  token view's kept segments (their offsets in the prompt sent, the summary slot's message);
- Cache: each provider's cached tokens on the selected turn and its hit ratio (and a zero's reason);
- KV: each row of the paged view (tokens, blocks, shared, new, KV and held bytes);
- Prefix diff and Teach: where the turn diverges from what the engine held, and the tokens reused;
- Compare (B: another template): each side's total and each provider's cached tokens;
- Diagnostics: the codes of the warnings and errors.
The Semantic and Run tabs run a model (an embedder, an engine): their figures are checked against
`workbench semantic lookup --json` and `workbench generate --json` in
tests/test_semantic_tab_equals_cli.py and tests/test_run_tab_equals_cli.py.
"""

from __future__ import annotations

import json
import re
from html import escape, unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from workbench.cli.main import main
from workbench.engine.kv import format_bytes
from workbench.ui.budget_view import NONE
from workbench.ui.document import Autosave
from workbench.ui.state import PARTS, sample_sessions

WINDOW = 4096
POLICIES = ["sliding", "chunked", "summary-slot", NONE]
SAMPLES = sorted(sample_sessions())


class Tables(HTMLParser):
    """The tables of an HTML string, by their class: rows of cell texts (a cell's own text, the
    reason under a figure, `<div class="wb-why">`, left out)."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self._skip = 0
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class") or ""
        if tag == "table":
            self._table = self.tables.setdefault(cls.split()[-1], [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        elif tag == "div" and self._cell is not None:
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._skip:
            self._skip -= 1
        elif tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._skip:
            self._cell.append(data)


def cli(capsys, *argv: str) -> dict[str, Any] | str:  # type: ignore[no-untyped-def]
    """The command's JSON, or its one `error:` line when it refuses."""
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    if code == 2:
        return err.strip()
    assert code == 0, err
    return json.loads(out)


def options(policy: str) -> list[str]:
    return ["--context-window", str(WINDOW), *(["--no-truncate"] if policy == NONE else ["--truncation", policy])]


def opened(name: str, policy: str, tmp: Path) -> Any:
    from workbench.ui.app import WorkbenchApp
    app = WorkbenchApp(sample_sessions()[name], autosave=Autosave(tmp))   # no server: the work runs inline
    assert app.controller.set_budget(context_window=str(WINDOW)) == {}
    assert app.controller.set_budget(policy=policy) == {}
    app.controller.run_panels(frozenset(PARTS))
    return app


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", SAMPLES)
def test_every_tab_shows_what_the_cli_prints(name: str, policy: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = sample_sessions()[name]
    app = opened(name, policy, tmp_path)
    state, opts = app.state, options(policy)
    rendered = cli(capsys, "render", path, *opts)
    header = unescape(re.sub(r"<[^>]+>", "", app.header.object))
    if isinstance(rendered, str):
        # The policy cannot fit the turn: the CLI refuses and says by how much; the page shows the
        # whole prompt struck, and says the same figures in the token view's line.
        assert policy != NONE, rendered
        note = app.view.header["overflow"]["note"]
        assert refusal(rendered) is not None and refusal(rendered) == refusal(note), (rendered, note)
    else:
        # The summary line and the token view.
        b = rendered["budget"]
        assert f"{rendered['total_tokens']} tokens" in header
        assert f"budget {b['used']}/{b['input_budget']}" in header
        assert f"of {len(rendered['segments'])} segments" in header
        view = app.view.header
        assert view["total_tokens"] == rendered["total_tokens"]
        assert [d.seq for d in state.result.dropped] == [d["seq"] for d in rendered.get("dropped", [])]
        shown = [(s["start"], s["end"], s.get("seq"), s["kind"]) for s in sent_segments(app, over=policy == NONE)]
        want = [(s["start"], s["end"], s.get("seq"), s["kind"]) for s in rendered["segments"]]
        assert shown == want
        assert any(s[2] == -1 for s in want) == (policy == "summary-slot" and bool(rendered.get("dropped")))
        # Diagnostics: each one the CLI prints, with its message.
        for d in rendered["diagnostics"]:
            assert d["code"] in app.diagnostics.object and escape(d["message"]) in app.diagnostics.object, d
    refused = cli(capsys, "kv", path, *opts)
    if isinstance(refused, str):
        # A turn of the session cannot be fitted: every command over the whole session refuses, and
        # the tabs over it say so, naming the turn, with that turn's figures (those `render --turn`
        # prints), not the figures of another state.
        said = app.controller.panel_error
        turn = int(re.match(r"turn (\d+): ", said).group(1))      # type: ignore[union-attr]
        alone = cli(capsys, "render", path, "--turn", str(turn), *opts)
        assert isinstance(alone, str) and refusal(said) == refusal(alone) is not None, (said, alone)
        for tab in (app.cache.object, app.diff.object):
            assert "Not computed" in tab and f"turn {turn}: " in tab and refusal(tab) == refusal(said), tab
        for provider in ("openai", "anthropic", "vllm"):
            assert refusal(str(cli(capsys, "simulate", path, "--provider", provider, "--breakpoints", "auto",
                                   *opts))) is not None
        return
    panels = app.controller.last_panels
    assert panels is not None and panels.generation == state.generation
    # Cache: the providers table, row by row.
    rows = {r[0]: r for r in Tables(app.cache.object).tables["wb-providers"][1:]}
    for sim in panels.simulations:
        got = cli(capsys, "simulate", path, "--provider", sim.provider, "--breakpoints", "auto", *opts)
        assert isinstance(got, dict), got
        turn = got["turns"][state.turn - 1]
        row = rows[sim.provider]
        assert row[1] == f"{turn['cached_tokens']:,}", (sim.provider, row, turn)
        assert row[2] == f"{got['hit_ratio']:.1%}", (sim.provider, row, got["hit_ratio"])
        if turn["cached_tokens"] == 0:
            assert turn["why"] and escape(turn["why"]) in app.cache.object
    # KV: the paged view's rows (drawn when its tab opens).
    kv = refused
    app.tabs.active = app._tab_names.index("KV")
    table = Tables(app.kv.object).tables["wb-kv-table"][1:]
    for row in table:                        # a zero shared count says why beside it: "0 (the first turn…)"
        figure, _, why = row[3].partition(" ")
        assert figure != "0" or why.startswith("("), row
        row[3] = figure
    want_rows = [[str(t["turn"]), f"{t['tokens']:,}", f"{t['blocks']:,}", f"{t['shared_blocks']:,}",
                  f"{t['new_blocks']:,}", format_bytes(t["kv_bytes"]), format_bytes(t["held_bytes"])]
                 for t in kv["turns"]][-len(table):]
    assert table == want_rows
    # Prefix diff and Teach: the selected turn against what the engine held after the previous one.
    analysis = cli(capsys, "analyze", path, *opts)
    assert isinstance(analysis, dict), analysis
    turn = next(t for t in analysis["turns"] if t["turn"] == state.turn)
    at = re.search(r'class="wb-diff-at">(\d+)<', app.diff.object)
    assert (int(at.group(1)) if at else None) == (turn["first_divergence"] if state.turn > 1 else None)
    reuse = next(s for s in app.teaching.walk.steps if s.key == "reuse")
    if state.turn > 1:
        assert (reuse.data["reused_tokens"], reuse.data["held_tokens"]) == (turn["reused_tokens"],
                                                                             turn["held_tokens"])
        assert f"{turn['reused_tokens']:,}" in reuse.html or str(turn["reused_tokens"]) in reuse.html
    # Compare (B: another template): each side's total, and each provider's cached tokens this turn.
    app.tabs.active = app._tab_names.index("Compare")
    other = "qwen3" if state.template != "qwen3" else "qwen2.5"      # side B: another template
    app.comparer.choose(kind="template", value=other)
    html = app.compare_out.object
    counts = Tables(html).tables["wb-cmp-counts"]
    sides = [(state.template, counts[1][1]), (other, counts[1][2])]
    caches = {r[0]: r for r in Tables(html).tables["wb-cmp-cache-table"][1:]}
    for k, (template, shown_total) in enumerate(sides):
        side = cli(capsys, "render", path, "--template", template, *opts)
        assert isinstance(side, dict), side
        assert shown_total == f"{side['total_tokens']:,}", (template, shown_total, side["total_tokens"])
        for provider in ("openai", "anthropic", "vllm"):
            got = cli(capsys, "simulate", path, "--template", template, "--provider", provider, "--breakpoints",
                      "auto", *opts)
            assert isinstance(got, dict), got
            turn_got = got["turns"][state.turn - 1]
            assert caches[provider][3 + k] == f"{turn_got['cached_tokens']:,}", (template, provider, caches[provider])
            if turn_got["cached_tokens"] == 0:            # a zero says why, the reason simulate prints
                assert escape(turn_got["why"]) in html, (template, provider)


def refusal(text: str) -> tuple[int, ...] | None:
    """The figures of a budget refusal ("need 3354 tokens, 282 over the input budget of 3072")."""
    m = re.search(r"need ([\d,]+) tokens, ([\d,]+) over the input budget of ([\d,]+)", unescape(text))
    return tuple(int(g.replace(",", "")) for g in m.groups()) if m else None


def sent_segments(app: Any, over: bool) -> list[dict[str, Any]]:
    """The token view's segments that make the prompt sent (dropped ones left out), as the page
    holds them. `over`: with no truncation the prompt sent is the whole one, its tokens past the
    window struck but sent: a segment split where the budget falls is one segment again."""
    model = app.view._feed_model
    assert model is not None
    out: list[dict[str, Any]] = []
    before = ""
    for s, (_key, flag) in zip(model._segs, model.sent):
        if flag == "dropped" or s.kind == "folded" or (flag == "over" and not over):
            continue
        last = out[-1] if out else None
        if flag == "over" and before != "over" and last is not None and last["end"] == s.start \
                and (last["seq"], last["kind"]) == (s.seq, s.kind):
            last["end"] = s.end              # the second half of a segment split where the budget falls
        else:
            out.append({"start": s.start, "end": s.end, "seq": s.seq, "kind": s.kind})
        before = flag
    return out
