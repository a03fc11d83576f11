"""The docs notebooks run top to bottom in a real Jupyter kernel (nbclient), offline, and leave
the widget state they promise."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def run(name: str) -> nbformat.NotebookNode:
    nb = nbformat.read(ROOT / "docs" / "notebooks" / name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "docs" / "notebooks")}}).execute()
    return nb


def printed(cell: nbformat.NotebookNode) -> dict:
    """The JSON a cell printed."""
    return json.loads("".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream"))


def is_widget(cell: nbformat.NotebookNode) -> bool:
    """The cell displayed a widget (a widget-view output, not just a repr)."""
    return any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in cell.outputs)


def test_quickstart_runs_and_the_view_gets_patches() -> None:
    nb = run("quickstart.ipynb")
    state = printed(nb.cells[6])
    assert state["keep"] > 0 and state["version"] == 2
    first, second = state["sent"]
    assert second * 20 < first
    assert is_widget(nb.cells[3])
    # The whole Workbench, edited and switched from code, and the pieces on their own.
    wb = printed(nb.cells[-1])
    assert wb["edited"] == "Short question now." and wb["view_has"]     # the editor and the prompt agree
    assert wb["template"] == "llama3.1" and wb["special"]
    assert wb["tokens"] != wb["tokens_before"]
    assert wb["providers"] == ["openai", "anthropic", "vllm", "sglang"] and wb["turns"] == 5
    assert wb["first_divergence"] is not None and "volatile_content" in wb["causes"]
    code = [c for c in nb.cells if c.cell_type == "code"]
    shown = [c for c in code if is_widget(c)]
    assert len(shown) >= 5          # token view, Workbench, budget bar, cache panel, prefix diff
    assert wb["diff_marked"]                 # the standalone diff marks the first diverging token
    assert wb["cache_traces"] >= 4           # the standalone cache chart: a line per provider


def test_teaching_runs_and_tells_the_whole_story() -> None:
    nb = run("teaching.ipynb")
    facts = printed(nb.cells[-1])
    assert facts["keys"] == ["messages", "template", "text", "tokens", "budget", "prefill", "reuse"]
    assert facts["tokens"] > 0 and facts["tokens_turn2"] > facts["tokens"]
    assert facts["turn1_previous"] is False
    assert 0 < facts["reused_tokens"] < facts["tokens_turn2"]          # turn 2 reuses turn 1's prefix
    assert facts["prefill_tokens"] == facts["tokens_turn2"] - facts["reused_tokens"]
    assert facts["kv_config"] == "Llama-3-8B" and facts["kv_bytes_per_token"] == 131072   # bf16
    assert facts["view_version"] == 2 and facts["follow_tokens"] == facts["tokens_turn2"]
    # Step 4's token view shows the ids step 4 counts: the follow-along is a view of its own (a user
    # saw 586 tokens under "538": a later cell had shown turn 2 in step 4's view).
    assert facts["step4_view_version"] == 1 and facts["step4_view_tokens"] == facts["tokens"]
    code = [c for c in nb.cells if c.cell_type == "code"]
    states = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    stated = [(k, int(m.group(1))) for k, c in enumerate(code) for o in c.outputs
              if (m := re.search(r"(\d+) token ids in all", o.get("data", {}).get("text/html", "")))]
    assert [n for _, n in stated] == [facts["tokens"]]
    k, n = stated[0]
    shown = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] for o in code[k + 1].outputs
             if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(shown) == 1 and states[shown[0]]["state"]["header"]["total_tokens"] == n   # as the notebook ends
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    # the token view was displayed as a widget, and each step as HTML
    assert any(is_widget(c) for c in nb.cells if c.cell_type == "code")
    assert sum('<mark class="wb-t-special">' in o.get("data", {}).get("text/html", "") for o in outputs) >= 2


def test_each_notebooks_first_cell_runs_outside_the_repository(tmp_path: Path) -> None:
    # Issue 17: the first cell walked up from the current folder looking for sample_sessions/ and,
    # copied out of the repository, never stopped. It reads the package's shipped samples now.
    for name in ("quickstart.ipynb", "teaching.ipynb"):
        nb = nbformat.read(ROOT / "docs" / "notebooks" / name, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        check = nbformat.v4.new_code_cell("import json, os\n"
                                          "print(json.dumps({'cwd': os.getcwd(), 'found': samples.is_dir(), "
                                          "'support_chat': (samples / 'support_chat.json').is_file()}))")
        nb.cells = [first, check]
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        out = printed(nb.cells[1])
        assert Path(out["cwd"]).resolve() == tmp_path.resolve() and not tmp_path.resolve().is_relative_to(ROOT)
        assert out["found"] and out["support_chat"], (name, out)
