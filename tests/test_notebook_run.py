"""docs/notebooks/run_it.ipynb in a real Jupyter kernel (nbclient): the Workbench generates a reply
on the synthetic `tiny` engine, appends it, and the next turn reuses the engine's KV cache."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def test_the_run_notebook_generates_appends_and_reuses() -> None:
    nb = nbformat.read(ROOT / "docs" / "notebooks" / "run_it.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "docs" / "notebooks")}}).execute()
    facts = json.loads("".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream"))
    assert facts["first_reused"] == 0 and facts["first_tokens"] == 8
    # system, user, assistant, user, then the generated reply, the next user message and its reply
    assert facts["messages"] == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
    held = facts["first_prompt"] + facts["first_tokens"]
    assert facts["held_before"] == held
    assert facts["first_prompt"] <= facts["second_reused"] == min(facts["common"], facts["second_prompt"] - 1)
    assert facts["tab_shows_reuse"]
    widget = nb.cells[1].outputs
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in widget)
