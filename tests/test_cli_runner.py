"""The one error wrapper every command runs through (workbench/cli/runner.py), SPEC 7.2: every
error is one `error:` line on stderr and exit 2, a bug included; Ctrl-C in a command that works
and ends is an error (`interrupted`); the two serving commands, `app` and `serve-engine`, are
stopped by Ctrl-C and by SIGTERM alike: `stopped` on stderr, exit 0, no traceback.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import workbench.cli.kv
import workbench.cli.listing
from workbench.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


# --- in process: what each kind of failure prints ------------------------------------------------
def test_a_bug_is_one_line_naming_its_type_and_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    def broken(_args: object) -> int:
        raise RuntimeError("boom\nand a second line nobody needs")

    monkeypatch.setattr(workbench.cli.listing, "cmd_templates", broken)
    monkeypatch.delenv("WORKBENCH_DEBUG", raising=False)
    assert main(["templates"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "error: unexpected RuntimeError: boom (set WORKBENCH_DEBUG=1 for the traceback)\n"
    monkeypatch.setenv("WORKBENCH_DEBUG", "1")
    assert main(["templates"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "in broken" in err and err.endswith("for the traceback)\n")


def test_a_command_that_fails_to_load_is_one_error_line(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def fails(_sub: object) -> None:
        raise ImportError("no module named 'a_missing_part'")

    monkeypatch.setattr(workbench.cli.kv, "add_parsers", fails)
    monkeypatch.delenv("WORKBENCH_DEBUG", raising=False)
    assert main(["templates"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected ImportError: no module named") and len(err.splitlines()) == 1


def test_ctrl_c_in_a_command_that_ends_is_an_error(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(_args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(workbench.cli.listing, "cmd_templates", interrupted)
    assert main(["templates"]) == 2
    assert capsys.readouterr().err == "error: interrupted\n"


def test_listings_print_one_json_line_like_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("templates", "tokenizers"):
        assert main([command, "--json"]) == 0
        out = capsys.readouterr().out
        assert out.count("\n") == 1 and out.startswith("[{")


@pytest.mark.parametrize("argv", [["app", "--port", "70000"], ["serve-engine", "--port", "-1"]])
def test_one_port_check_one_hint(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --port must be between 0 and 65535") and err.endswith("(0 picks a free port)\n")


# --- real processes, real signals: both servers stop the same way --------------------------------
SERVERS = {
    "app": (["app", "--no-show", "--port", "0"], "serving on "),
    "serve-engine": (["serve-engine", "--model", "tiny", "--port", "0"], "serving tiny"),
}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
@pytest.mark.parametrize("command", list(SERVERS))
def test_a_server_stops_on_ctrl_c_and_sigterm_alike(command: str, signum: int, tmp_path: Path) -> None:
    argv, ready = SERVERS[command]
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli.main", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] and lines.put(None),  # type: ignore[union-attr]
                     daemon=True).start()
    try:
        first = lines.get(timeout=180)
        assert first is not None and first.startswith(ready), (first, proc.poll() is not None and proc.stderr.read())
        proc.send_signal(signum)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    err = proc.stderr.read()  # type: ignore[union-attr]
    assert code == 0, err
    assert err.splitlines()[-1:] == ["stopped"] and "Traceback" not in err and "error:" not in err, err
