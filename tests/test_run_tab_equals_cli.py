"""One source of truth (issue 33), the Run tab: every figure the tab shows after Generate equals what
`workbench generate --json` prints for the same state, for every shipped sample session with
test_page_equals_cli's window, on the synthetic `tiny` engine (greedy: the same weights, seed 0,
give the same reply on both sides).

Policies: every session under the app's default (sliding); the other policies, and none, only for
the sessions whose last turn overflows the window (OVERFLOWING, checked against the page). A
policy decides which prompt the turn is, nothing else here: where the whole session fits, every
policy assembles the same prompt, and each case costs two tiny engines (their random init takes
1-2 s on this shared 2-core machine), so those cases would repeat one another at 4 s apiece.

The page is the app's own Run pane (`WorkbenchApp`, in process, the button's path: `RunPanel.run`),
read back from its HTML; the CLI runs in process. Compared: the model, the turn answered, how the
prompt was assembled, the reply, the tokens generated and how the reply ended, the prompt's tokens
reused and computed, what the engine held and where the prompt parted from it (the token, its
segment, both token texts). Timings differ run to run: each is present and positive on both sides.
A state the tab refuses (a budget the prompt cannot fit, a prompt past the model's window, a session
that ends with the model's reply, a model that does not exist) is refused by the command in the same
words. Two generations in a row on one engine (the tab: Generate, add the next turn's messages,
Generate) are `generate --turns 2`.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from browser import free_port
from test_page_equals_cli import WINDOW, cli, options

from workbench.cli.main import main
from workbench.sessions import load_session, turn_ends
from workbench.ui.budget_view import NONE
from workbench.ui.document import Autosave
from workbench.ui.state import sample_sessions

POLICIES = ["sliding", "chunked", "summary-slot", NONE]
SAMPLES = sorted(sample_sessions())
# The sessions whose last turn does not fit WINDOW (the page strikes what it leaves out).
OVERFLOWING = {"bench_1000.json", "coding_corrections.json", "overflow.json", "rag_long.json", "support_chat.json",
               "tool_agent.json"}
CASES = [(name, policy) for name in SAMPLES for policy in POLICIES if policy == "sliding" or name in OVERFLOWING]
MAX_NEW = 3            # a few decode steps: the figures, not the reply's length, are under test
TINY = "tiny (synthetic, CPU)"


class RunPane(HTMLParser):
    """The Run pane's paragraphs (and the reply's <pre>) by their first class: their text, the tags
    inside them (bold figures, the break's span, token texts in <code>) read through."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.text: dict[str, str] = {}
        self._open: str | None = None
        self._buf: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("p", "pre"):
            self._open, self._buf = (dict(attrs).get("class") or "").split()[0], []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("p", "pre") and self._open is not None:
            assert self._open not in self.text, f"two {self._open} paragraphs"
            self.text[self._open], self._open = "".join(self._buf), None

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._buf.append(data)


NUMBER = r"([\d,]+(?:\.\d+)?)"


def number(text: str) -> float:
    return float(text.replace(",", ""))


def shown(html: str) -> tuple[dict[str, Any], list[float]]:
    """What the pane shows: its figures (named as in the CLI's JSON), and its timings."""
    t = RunPane(html).text
    assert "wb-run-error" not in t, t["wb-run-error"]
    head = re.fullmatch(r"(.+) · the reply to turn (\d+) · (.+)", t["wb-run-model"])
    fig = re.fullmatch(rf"([\d,]+) tokens generated in {NUMBER} ms, ended by (an end-of-turn token|the token limit)\."
                       rf" Prefill {NUMBER} ms, decode {NUMBER} ms \({NUMBER} ms per token\)\.", t["wb-run-figures"])
    reuse = re.fullmatch(r"Prompt: ([\d,]+) tokens: ([\d,]+) reused from the engine's KV cache, ([\d,]+) computed\."
                         r"(.*)", t["wb-run-reuse"])
    assert head and fig and reuse, t
    out: dict[str, Any] = {
        "model": head[1], "turn": int(head[2]), "assembled_with": head[3],
        "text": "" if t["wb-run-reply"] == "(empty reply)" else t["wb-run-reply"],
        "completion_tokens": int(number(fig[1])), "finish_reason": "stop" if fig[3].startswith("an end") else "length",
        "prompt_tokens": int(number(reuse[1])), "reused_tokens": int(number(reuse[2])),
        "computed_tokens": int(number(reuse[3])), "note": t.get("wb-muted", ""),
        "synthetic": "wb-run-synthetic" in t}
    rest = reuse[4]
    if rest in ("", " The engine held nothing of this session yet."):
        out["held_before"] = 0
        out["held_nothing_said"] = bool(rest)
    elif m := re.fullmatch(r" The engine held ([\d,]+) tokens \(the previous prompt and its reply\): this prompt "
                           r"repeats all of them\.", rest):
        out["held_before"] = int(number(m[1]))
    else:
        m = re.fullmatch(r" The engine held ([\d,]+) tokens \(the previous prompt and its reply\): this prompt repeats "
                         r"the first ([\d,]+) and parts at (.+?): the engine held (.+), the prompt has (.+)\. "
                         r"Everything after that is computed again\.", rest)
        assert m, rest
        out.update(held_before=int(number(m[1])), common=int(number(m[2])), break_where=m[3],
                   break_tokens=(m[4], m[5]))
    return out, [number(fig[k]) for k in (2, 4, 5, 6)]


def printed(got: dict[str, Any]) -> tuple[dict[str, Any], list[float]]:
    """The same figures from `generate --json`, and its timings."""
    local = got["local"]
    out = {k: got[k] for k in ("model", "turn", "assembled_with", "text", "completion_tokens", "finish_reason",
                               "prompt_tokens", "reused_tokens", "computed_tokens", "note", "synthetic")}
    out["held_before"] = local["held_before"]
    if local["held_before"] == 0:
        out["held_nothing_said"] = got["reused_tokens"] == 0
    if "break_where" in got:
        out.update(common=local["common"], break_where=got["break_where"],
                   break_tokens=(repr(got["break_tokens"]["held"]), repr(got["break_tokens"]["prompt"])))
    return out, [got["ms"], local["prefill_ms"], local["decode_ms"], got["ms_per_token"]]


def same(html: str, got: dict[str, Any]) -> None:
    page, page_ms = shown(html)
    cli_figures, cli_ms = printed(got)
    assert page == cli_figures
    assert all(ms > 0 for ms in page_ms + cli_ms), (page_ms, cli_ms)


def opened(path: str, policy: str, tmp: Path) -> Any:
    from workbench.ui.app import WorkbenchApp
    app = WorkbenchApp(path, autosave=Autosave(tmp))          # no server: the work runs inline
    assert app.controller.set_budget(context_window=str(WINDOW)) == {}
    assert app.controller.set_budget(policy=policy) == {}
    return app


def generate(app: Any, engine: str = TINY, typed: str = "") -> str:
    """Generate as the button does (the engine picker, the box beside it, Max new tokens)."""
    app.run.engine.value, app.run.target.value, app.run.max_new.value = engine, typed, MAX_NEW
    app.run.run()
    return str(app.run.out.object)


def refused_alike(html: str, said: str) -> None:
    assert said.startswith("error: ") and "\n" not in said, said
    assert RunPane(html).text["wb-run-error"] == "no reply: " + said.removeprefix("error: ")


@pytest.mark.parametrize(("name", "policy"), CASES)
def test_the_run_tab_shows_what_generate_prints(name: str, policy: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = sample_sessions()[name]
    app = opened(path, policy, tmp_path)
    if policy == "sliding":
        assert (app.state.overflow is not None) == (name in OVERFLOWING), "OVERFLOWING is out of date"
    html = generate(app)
    got = cli(capsys, "generate", path, "--max-new-tokens", str(MAX_NEW), *options(policy))
    if isinstance(got, str):
        # The tab cannot generate here (the turn does not fit the window under this policy, or the
        # prompt sent whole is past tiny's window): it says so in the command's words.
        refused_alike(html, got)
        assert not app.run.append.visible
        return
    assert got["turn"] == app.state.doc.turn_count and got["synthetic"] and got["engine"] == "tiny"
    same(html, got)
    assert app.run.append.visible and app.run.last.text == got["text"]


def test_a_session_that_ends_with_the_models_reply_is_refused_alike(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(Path(sample_sessions()["openai_minimal.json"]).read_text("utf-8"))
    data["messages"] = data["messages"][:3]                        # system, user, assistant
    path = tmp_path / "ends_with_reply.json"
    path.write_text(json.dumps(data), "utf-8")
    html = generate(opened(str(path), "sliding", tmp_path / "autosave"))
    said = cli(capsys, "generate", str(path), *options("sliding"))
    assert isinstance(said, str) and "turn 2 ends with an assistant reply" in said
    refused_alike(html, said)
    # An earlier turn of it ends with the user's message: the command answers that one.
    got = cli(capsys, "generate", str(path), "--turn", "1", "--max-new-tokens", str(MAX_NEW), *options("sliding"))
    assert isinstance(got, dict) and got["turn"] == 1 and got["completion_tokens"] >= 1


def test_a_model_that_does_not_exist_is_refused_alike(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = sample_sessions()["openai_minimal.json"]
    missing = str(tmp_path / "no-such-model")
    html = generate(opened(path, "sliding", tmp_path / "autosave"), "a model folder or .gguf file", missing)
    said = cli(capsys, "generate", path, "--model", missing, *options("sliding"))
    assert isinstance(said, str) and "no such folder or .gguf file" in said
    refused_alike(html, said)


def test_two_turns_in_a_row_reuse_what_the_engine_held_alike(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`generate --turn K+1 --turns 2` is the tab on the session cut at turn K: Generate, then the
    next turn's messages added in the editor (the file's own reply among them), Generate again."""
    path = sample_sessions()["tool_agent.json"]
    session = load_session(path)
    k = 2
    msgs = session.raw["messages"]
    cuts = list(turn_ends(msgs))
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps({**session.raw, "messages": msgs[:cuts[k - 1]]}), "utf-8")
    app = opened(str(cut), "sliding", tmp_path / "autosave")
    assert app.state.doc.turn_count == k
    first = generate(app)
    app.controller.ops([{"op": "insert", "index": i, "message": msgs[i]} for i in range(cuts[k - 1], cuts[k])])
    assert app.state.doc.turn_count == k + 1 and app.state.doc.request(k + 1)["messages"] == msgs[:cuts[k]]
    second = generate(app)
    got = cli(capsys, "generate", path, "--turn", str(k + 1), "--turns", "2", "--max-new-tokens", str(MAX_NEW),
              *options("sliding"))
    assert isinstance(got, dict) and [g["turn"] for g in got["generations"]] == [k, k + 1]
    same(first, got["generations"][0])
    same(second, got["generations"][1])
    # The second prompt repeats the first and parts where the file's reply follows it (the engine
    # held its own reply there): said on both sides, with the message it falls in.
    after = got["generations"][1]
    assert after["local"]["held_before"] == got["generations"][0]["prompt_tokens"] + got["generations"][0][
        "completion_tokens"]
    assert after["reused_tokens"] >= got["generations"][0]["prompt_tokens"] - 1
    assert after["break_where"] == f"token {after['local']['break_at']}, in message {cuts[k - 1]} (assistant)"
    # Without --json the command prints the tab's own sentences.
    assert main(["generate", path, "--turn", str(k + 1), "--turns", "2", "--max-new-tokens", str(MAX_NEW),
                 *options("sliding")]) == 0
    text = capsys.readouterr().out
    pane = RunPane(second).text
    for cls in ("wb-run-model", "wb-run-reuse", "wb-run-synthetic"):
        assert pane[cls] in text, (cls, pane[cls], text)


@pytest.mark.parametrize(("argv", "words"), [
    (["--max-new-tokens", "0"], "max new tokens must be from 1 to 512 (got 0)"),
    (["--max-new-tokens", "513"], "max new tokens must be from 1 to 512 (got 513)"),
    (["--turn", "3"], "turn 3 does not exist: the session has 2 turns"),
    (["--turn", "0"], "turn 0 does not exist: the session has 2 turns"),
    (["--turns", "0"], "--turns must be at least 1, got 0"),
    (["--turns", "3"], "--turns 3 reaches before turn 1"),
    (["--model", "tiny", "--remote", "http://127.0.0.1:9"], "not allowed with argument"),
    (["--remote", f"http://127.0.0.1:{free_port()}"], "cannot reach the server"),
])
def test_bad_input_is_one_error_line_and_exit_2(argv: list[str], words: str, capsys) -> None:  # type: ignore[no-untyped-def]
    path = sample_sessions()["openai_minimal.json"]
    for mode in ([], ["--json"]):
        assert main(["generate", path, *argv, *mode]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("error: ") and err.count("\n") == 1 and words in err, err
