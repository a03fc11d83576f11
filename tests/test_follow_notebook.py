"""`Workbench.follow(LOG)` in a real Jupyter kernel (nbclient), cell by cell: the test appends lines to
LOG between cells, as another process logging calls would, and the widget shows them without any
call to `wb.poll()`: the reader thread hands each change to the kernel's event loop, which applies it
between cells or while a cell awaits. The new call is a new turn, the same ids as the CLI renders
for its request; a newer conversation goes to the top of the picker; a bad line is named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from test_follow_reader import T0, append, line, request

ROOT = Path(__file__).resolve().parent.parent

WAIT = """
import asyncio, json, time
t = time.monotonic()
while not ({condition}) and time.monotonic() - t < 120:
    await asyncio.sleep(0.05)      # the kernel's loop runs meanwhile: the follower's hand-offs land
"""

CELLS = [
    "import json\nfrom workbench.ui.notebook import Workbench\nwb = Workbench.follow({log!r})\nwb",
    "print(json.dumps({'value': wb.session_select.value, 'turns': wb.state.doc.turn_count}))",
    WAIT.format(condition="wb.state.doc.turn_count == 3") +
    "print(json.dumps({'turns': wb.state.doc.turn_count, 'turn': wb.state.turn, 'select': wb.turn_select.value,\n"
    "                  'ids': wb.result.token_ids.tolist(), 'call': wb.follow_call.value,\n"
    "                  'status': wb.follow_status.value}))",
    WAIT.format(condition="wb.session_select.options[0][1] == 'follow:zeta'") +
    "print(json.dumps({'first': wb.session_select.options[0][1], 'value': wb.session_select.value,\n"
    "                  'status': wb.follow_status.value}))\nwb.stop_following()",
]


def facts(cell: dict) -> dict:
    return json.loads("".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream"))


def test_workbench_follow_in_a_real_kernel(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    append(log, line("alpha", 0, T0), line("alpha", 1, T0 + 10))
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src.replace("{log!r}", repr(str(log)))) for src in CELLS]
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel():
        client.execute_cell(nb.cells[0], 0)
        client.execute_cell(nb.cells[1], 1)
        assert facts(nb.cells[1]) == {"value": "follow:alpha", "turns": 2}
        # Another process logs the next call (with its usage) while the kernel sits idle.
        append(log, line("alpha", 2, T0 + 20, provider="openai",
                         response={"usage": {"prompt_tokens": 80, "prompt_tokens_details": {"cached_tokens": 64}}}))
        client.execute_cell(nb.cells[2], 2)
        got = facts(nb.cells[2])
        assert (got["turns"], got["turn"], got["select"]) == (3, 3, 3)
        assert "prompt_tokens_details.cached_tokens 64" in got["call"] and "provider openai" in got["call"]
        assert "alpha: following live, turn 3 of 3" in got["status"]
        append(log, b"[1, 2]\n", line("zeta", 0, T0 + 30))
        client.execute_cell(nb.cells[3], 3)
        got3 = facts(nb.cells[3])
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in nb.cells[0].outputs)
    assert got3["first"] == "follow:zeta" and got3["value"] == "follow:alpha"    # the one shown stays shown
    assert f"{log}:4: a log line holds a JSON object, got list" in got3["status"]
    # the new turn is the request as logged, rendered as the CLI renders it
    session = tmp_path / "turn3.json"
    session.write_text(json.dumps(request("alpha", 2)))
    cli = subprocess.run([sys.executable, "-m", "workbench.cli.main", "render", str(session), "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True)
    assert got["ids"] == json.loads(cli.stdout)["token_ids"]
