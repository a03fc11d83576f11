"""Text from data never drives the terminal (issue 34, item 6; workbench/cli/output.py `safe`).

The probe's payload: a window-title escape followed by clear-screen, `ESC ] 0 ; pwned BEL ESC [ 2 J`,
went through the aggregate table (a log's `client`, a system prompt's preview) and through `render`
even with `--color never`. Here it sits in every place a text-mode command prints from the data:
message text, titles, file names, a log's fields, a bundle's session names, an import's problems,
the `error:` line. The output must hold no control character but the layout's own (line breaks,
and with --color the workbench's own colour codes), and must show the payload as escapes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from workbench.cli.main import main
from workbench.cli.output import safe

PAYLOAD = "\x1b]0;pwned\x07\x1b[2J"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J"
# The workbench's own colour codes (render --color always): SGR sequences and nothing else.
OWN_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


def clean(text: str, *, colours: bool = False) -> bool:
    """No control character left but line breaks (and, with `colours`, the workbench's SGR codes)."""
    if colours:
        text = OWN_COLOURS.sub("", text)
    return not any(ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) < 0xA0 for c in text)


@pytest.fixture
def session(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps({
        "title": "Title " + PAYLOAD,
        "messages": [{"role": "system", "content": "You help. " + PAYLOAD},
                     {"role": "user", "content": "hi " + PAYLOAD + " there\r\x9b31m"},
                     {"role": "assistant", "content": "hello"},
                     {"role": "user", "content": "again"}]}))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_safe_escapes_every_control_character_and_keeps_layout_when_asked() -> None:
    every = "".join(map(chr, range(0x20))) + "\x7f" + "".join(map(chr, range(0x80, 0xA0)))
    inline = safe(every)
    assert clean(inline) and "\n" not in inline and inline.count("\\x") == len(every)
    assert safe("a\r\nb\tc\x1b", layout=True) == "a\\x0d\nb\tc\\x1b"
    assert safe("plain text: é, 中文, emoji 🙂") == "plain text: é, 中文, emoji 🙂"


@pytest.mark.parametrize("color", ["never", "always"])
def test_render_shows_message_text_as_data_with_or_without_colour(session: Path, color: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "render", str(session), "--color", color)
    assert code == 0 and clean(out, colours=color == "always")
    assert "hi " + SHOWN + " there\\x0d\\x9b31m" in OWN_COLOURS.sub("", out)


def test_render_with_token_boundaries_escapes_each_piece(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "render", str(session), "--tokens", "--color", "never")
    assert code == 0 and clean(out) and "\\x1b" in out


@pytest.mark.parametrize("command", [["analyze"], ["simulate"], ["kv"], ["render", "--color", "never"],
                                     ["analyze", "--projection"], ["analyze", "--fix", "sort-tool-keys"]])
def test_a_title_from_the_session_is_shown_as_data(session: Path, command: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, command[0], str(session), *command[1:])
    assert code == 0, err
    assert clean(out) and clean(err)
    if command[0] != "render":
        assert out.startswith("Title " + SHOWN)


def test_the_error_line_shows_a_hostile_file_name_as_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "render", str(tmp_path / f"no{PAYLOAD}.json"))
    assert code == 2 and out == ""
    assert clean(err) and err.count("\n") == 1 and f"no{SHOWN}.json" in err


def test_the_aggregate_table_shows_clients_previews_and_file_names_as_data(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: a log's `client` and a system prompt's preview printed raw."""
    lines = []
    for k in range(3):
        system = f"{PAYLOAD} You help. Current time: 2026-03-01T10:0{k}:00Z."
        lines.append({"conversation_id": "c", "timestamp": f"2026-03-01T10:0{k}:00Z", "client": "app " + PAYLOAD,
                      "request": {"messages": [{"role": "system", "content": system},
                                               {"role": "user", "content": f"question {k}"}]}})
    log = tmp_path / f"log{PAYLOAD}.jsonl"
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n{}\n")
    code, out, err = run(capsys, "analyze", str(log), "--aggregate", "--no-progress")
    assert code == 0, err
    assert clean(out)
    assert f"clients: app {SHOWN} (" in out
    assert re.search(r"system [0-9a-f]{12} \([0-9,]+\): " + re.escape(SHOWN), out)
    assert f"(first: {tmp_path}/log{SHOWN}.jsonl:4: conversation_id" in out


def test_export_and_verify_show_the_bundle_names_as_data(session: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    named = tmp_path / f"s{PAYLOAD}.json"
    named.write_text(session.read_text())
    out_dir = tmp_path / f"bundle{PAYLOAD}"
    code, out, err = run(capsys, "export", str(named), "-o", str(out_dir), "--turns", "last")
    assert code == 0, err
    assert clean(out) and f"wrote {tmp_path}/bundle{SHOWN}" in out
    code, out, _ = run(capsys, "verify", str(out_dir))
    assert code == 0 and clean(out) and f"checked s{SHOWN}.json: 1 turn(s)" in out


def test_the_import_summary_shows_problems_as_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = tmp_path / f"spend{PAYLOAD}.jsonl"
    export.write_text("{}\nnot json " + PAYLOAD + "\n")
    code, out, err = run(capsys, "import", str(export), "--from", "litellm", "-o", str(tmp_path / "out.jsonl"))
    assert code == 0, err
    assert clean(err) and f"spend{SHOWN}.jsonl" in err


def test_json_stays_json_and_writes_c1_controls_as_escapes(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """JSON escapes the C0 controls itself; DEL and C1 (U+009B is CSI) it wrote raw without ensure_ascii."""
    code, out, _ = run(capsys, "render", str(session), "--json")
    assert code == 0 and clean(out)
    assert "\\u009b31m" in out and "\\u001b]0;pwned" in out
    d = json.loads(out)
    assert "hi " + PAYLOAD + " there\r\x9b31m" in d["text"]          # the same value, escaped only in transit


def test_the_examples_in_the_docstrings_hold() -> None:
    import doctest

    import workbench.cli.output
    import workbench.files
    for module in (workbench.cli.output, workbench.files):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


@pytest.mark.parametrize("argv", [["semantic", "lookup", "--embedder", "hashing", "--turn", "2"],
                                  ["generate", "--max-new-tokens", "4", "--turn", "2"]],
                         ids=["semantic-lookup", "generate"])
def test_the_semantic_lookup_and_the_next_reply_print_text_from_the_data_safely(
        capsys: pytest.CaptureFixture[str], session: Path, argv: list[str]) -> None:
    code, out, _ = run(capsys, *argv, str(session))
    assert code == 0 and clean(out.replace("\t", "")), out
    assert "\x1b" not in out and "\\x1b" in out       # the turn's text is quoted, as escapes
