"""One source of truth (issue 33), the Semantic tab: what the tab shows for a turn equals what
`workbench semantic lookup SESSION --turn K --json` prints, on every shipped sample session.

The page is the app's own Semantic pane (`WorkbenchApp` in process, as tests/test_page_equals_cli.py
opens it), its turn chosen in the turn selector and its button clicked, read back from its HTML; the
CLI runs in process on the session file. Per session: the last turn (the app's default selection),
a turn in the middle where the session has more than two, and turn 1, which has nothing earlier to
look up against: the page and the command refuse it in the same words. Every figure the pane shows
is compared: the verdict, its reason and the similarity in it, the entry decided on, this turn's
fingerprint sentence, the thresholds, the embedder and the window; per neighbour its row (turn,
similarity, whether the fingerprints agree, state, verdict, the end of its context) and its block
(heading, how they differ, its verdict and reason, the fingerprints and messages side by side). The
timings are measured on each run and differ, so they are only checked to be shown.

The embedder is the hashing one (no model to load). The app's tab keeps the cache its first lookup
made, embedder and all: a first lookup through the state's own `semantic(embedder)` makes every
click after it use that embedder, as the CLI's `--embedder hashing` does.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from test_page_equals_cli import Tables, cli

from workbench.errors import WorkbenchError
from workbench.semantic.clip import clip_start
from workbench.semantic.embedders import HashingEmbedder
from workbench.ui.document import Autosave
from workbench.ui.semantic_panel import CONTEXT_CHARS, MESSAGE_CHARS, VERDICTS
from workbench.ui.state import sample_sessions

SAMPLES = sorted(sample_sessions())
ERROR = "error: "


def turns_of(count: int) -> list[int]:
    """The last turn, one in the middle where there are more than two, and turn 1."""
    return sorted({count, (count + 1) // 2 if count > 2 else count, 1}, reverse=True)


def hashing_app(path: str, tmp: Path) -> Any:
    from workbench.ui.app import WorkbenchApp
    app = WorkbenchApp(path, autosave=Autosave(tmp))      # no server: the work runs inline
    try:
        app.state.semantic(HashingEmbedder())
    except WorkbenchError:
        pass          # the selected turn has nothing to look up: the cache is made all the same
    return app


def click(app: Any, turn: int) -> str:
    """Select `turn` in the turn selector and click the Semantic tab's button: the pane's HTML."""
    if app.state.turn != turn:
        app.turn_select.value = turn
    assert app.state.turn == turn
    app.semantic_run.clicks += 1
    assert not app.semantic_run.disabled                 # the lookup ran and ended (inline, no server)
    return str(app.semantic.object)


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html)).strip()


def one(pattern: str, html: str) -> str:
    m = re.search(pattern, html, re.S)
    assert m is not None, (pattern, html[:2000])
    return m.group(1)


@pytest.mark.parametrize("name", SAMPLES)
def test_the_semantic_tab_shows_what_semantic_lookup_prints(name: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = sample_sessions()[name]
    app = hashing_app(path, tmp_path)
    count = app.state.doc.turn_count
    assert count >= 2, name                 # a sample session shows at least one lookup with an earlier turn
    looked_up = 0
    for turn in turns_of(count):
        html = click(app, turn)
        got = cli(capsys, "semantic", "lookup", path, "--turn", str(turn), "--embedder", "hashing")
        if isinstance(got, str):
            # Refused (turn 1; a turn that does not end with a user message): the page says why, in
            # the command's words.
            said = next(line for line in got.splitlines() if line.startswith(ERROR))[len(ERROR):]
            assert text(html) == f"failed: {said}", (turn, html)
            assert turn > 1 or said.startswith("turn 1 has no earlier turns"), said
            continue
        looked_up += 1
        assert got["turn"] == turn and got["embedder"] == HashingEmbedder().name and got["window"] == 5
        same_decision(html, got)
        same_neighbours(html, got)
    assert looked_up >= 1, name              # the last turn of every sample ends with a user message


def same_decision(html: str, v: dict[str, Any]) -> None:
    assert one(r'<b class="wb-semantic-verdict">([^<]*)</b>', html) == VERDICTS[v["verdict"]]
    reason = unescape(one(r'<span class="wb-semantic-reason">(.*?)</span>', html))
    # the page's sentence is the command's reason with its verdict word left to the heading
    assert reason.endswith(".") and v["reason"].endswith(reason[:1].lower() + reason[1:-1]), (reason, v["reason"])
    if v["similarity"] is None:
        assert v["neighbours"] == [] and 'class="wb-semantic-on"' not in html
    else:
        sim = f"similarity {v['similarity']:.3f}"
        on = unescape(one(r'<span class="wb-semantic-on">\((.*?)\)</span>', html))
        assert on.endswith(f"turn {v['decided_turn']}, {sim}"), (on, v)
        assert sim in reason or "no entry" in reason, reason
    th = v["thresholds"]
    assert (f"{v['this_turn']} Thresholds: high {th['high']}, low {th['low']}; embedder {v['embedder']}, a window "
            f"of {v['window']} turns.") in unescape(html)
    assert re.search(r"Embedding \d+\.\d ms, search \d+\.\d\d ms\.", html)     # measured per run: shown, not compared


def same_neighbours(html: str, v: dict[str, Any]) -> None:
    rows = Tables(html).tables["wb-semantic-nearest"][1:]
    assert rows == [[str(n["rank"]), str(n["turn"]), f"{n['similarity']:.3f}", n["fingerprints"], n["state"],
                     VERDICTS[n["verdict"]], clip_start(n["context"], CONTEXT_CHARS)] for n in v["neighbours"]]
    blocks = html.split('<div class="wb-semantic-nb"')[1:]
    assert len(blocks) == len(v["neighbours"])
    for block, n in zip(blocks, v["neighbours"]):
        said = VERDICTS[n["verdict"]]
        assert text(one(r"<h4>(.*?)</h4>", block)) == \
            f"Neighbour {n['rank']}: turn {n['turn']}, similarity {n['similarity']:.3f}: {said}"
        assert text(one(r'<p class="wb-semantic-differ">(.*?)</p>', block)) == n["how_they_differ"]
        why = text(one(r'<p class="wb-semantic-why">(.*?)</p>', block))
        assert why.startswith(f"{said}: ") and n["reason"].endswith(why[len(said) + 3:-1]), (why, n["reason"])
        same_fingerprints(block, v, n)


def same_fingerprints(block: str, v: dict[str, Any], n: dict[str, Any]) -> None:
    """The side-by-side table: this turn's message and fingerprint beside the neighbour's."""
    table = Tables(block).tables["wb-semantic-fp"]
    assert table[0][1:] == [f"this turn (turn {v['turn']})", f"turn {n['turn']}"]
    rows = {r[0]: r[1:] for r in table[1:]}
    assert rows["the message"] == [clip_start(v["message"], MESSAGE_CHARS), clip_start(n["message"], MESSAGE_CHARS)]
    for k, fp in enumerate((v["fingerprint"], n["fingerprint"])):
        names = rows["names"][k]
        assert all(f"“{e.lstrip('#')}”" in names for e in fp["entities"]) and \
            (names == "no particular thing") == (not fp["entities"]), (names, fp)
        assert rows["says not to do it"][k] == ("yes" if fp["negated"] else "no")
        assert rows["corrects an earlier turn"][k] == ("yes" if fp["correction"] else "no")
        assert (rows["asks to"][k] == "names no action") == (not fp["action"]), (rows["asks to"], fp)


@pytest.mark.parametrize("argv, says", [
    (["--turn", "1"], "turn 1 has no earlier turns: there is nothing to look it up against (select a turn from 2"),
    (["--turn", "999"], "turn 999 does not exist: the session has 110 turns"),
    (["--turn", "0"], "turn 0 does not exist"),
    (["--embedder", "word2vec"], "unknown embedder 'word2vec' (one of: use, minilm, hashing)"),
    (["--window", "-1"], "--window must be at least 0, got -1"),
])
def test_bad_lookups_are_one_error_line(argv: list[str], says: str, capsys) -> None:  # type: ignore[no-untyped-def]
    from workbench.cli.main import main
    code = main(["semantic", "lookup", sample_sessions()["support_chat.json"], *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and err.startswith(f"{ERROR}{says}"), err


def test_the_text_report_says_the_verdict_and_each_neighbour(capsys) -> None:  # type: ignore[no-untyped-def]
    from workbench.cli.main import main
    path = sample_sessions()["support_chat.json"]
    v = cli(capsys, "semantic", "lookup", path, "--embedder", "hashing")
    assert isinstance(v, dict) and v["neighbours"], v
    assert main(["semantic", "lookup", path, "--embedder", "hashing"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f"turn {v['turn']} of {v['turn']} · embedder {v['embedder']} · window 5 · thresholds "
                             f"high {v['thresholds']['high']} low {v['thresholds']['low']}")
    assert lines[1].startswith(f"{VERDICTS[v['verdict']]} (") and \
        f"turn {v['decided_turn']}, similarity {v['similarity']:.3f})" in lines[1]
    assert lines[2] == v["this_turn"]
    shown = [line.split() for line in lines[4::3]]
    assert [(int(r[0]), int(r[1]), r[2]) for r in shown] == \
        [(n["rank"], n["turn"], f"{n['similarity']:.3f}") for n in v["neighbours"]]
