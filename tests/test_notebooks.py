"""The docs notebooks run top to bottom in a real Jupyter kernel (nbclient), offline, and leave
the widget state they promise."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def run(name: str) -> nbformat.NotebookNode:
    nb = nbformat.read(ROOT / "docs" / "notebooks" / name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "docs" / "notebooks")}}).execute()
    return nb


def test_quickstart_runs_and_the_view_gets_patches() -> None:
    nb = run("quickstart.ipynb")
    last = nb.cells[-1].outputs
    state = json.loads("".join(o.get("text", "") for o in last if o.get("output_type") == "stream"))
    assert state["keep"] > 0 and state["version"] == 2
    first, second = state["sent"]
    assert second * 20 < first
    # the view was displayed as a widget (a widget-view output, not just a repr)
    view_out = nb.cells[3].outputs
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in view_out)
