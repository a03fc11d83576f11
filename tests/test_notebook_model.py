"""The notebook's `Workbench` with a catalog model, in a real Jupyter kernel (nbclient): `model=` and
`wb.choose(model=...)` set the pickers, the window, the KV tab's shape and the image segment; an
unknown name is shown under the picker with the closest names and changes nothing; the message
editor shows the screenshot as a chip, and `wb.edit` of that message's text keeps the image in the
saved session; the Share cell carries the model. The same figures as `workbench render --model`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "sample_sessions" / "screenshot_support.json"
VL = "Qwen/Qwen2.5-VL-7B-Instruct"

CELLS = [
    "import json\nfrom workbench.ui.notebook import Workbench\n"
    f"wb = Workbench({str(SESSION)!r}, model={VL!r})\nwb",
    "facts = {'template': wb.template_select.value, 'tokenizer': wb.tokenizer_select.value,\n"
    "         'model': wb.model_select.value, 'window': wb.result.budget.context_window,\n"
    "         'ids': wb.result.token_ids.tolist(), 'images': wb.result.images(), 'kv': wb.kv_config.value,\n"
    "         'chip': wb.editor.parts[1]['parts'][1]['label']}\n"
    "panels = wb.wait()\n"
    "facts['kv_html'] = wb.kv.value\n"
    "facts['teach_kv'] = wb.teach.steps[5].data['kv_config']\n"
    "wb.choose(model='qwen2.5-vl-7b')\n"
    "facts.update(error=wb.model_error, note=wb.pickers.note.value, still=wb.model.id,\n"
    "             still_template=wb.template_select.value)\n"
    "wb.edit(1, 'It fails when I press Pay:')\n"
    "facts['image_block_after_edit'] = [s.kind for s in wb.result.segments].count('image')\n"
    "wb.state.save({saved!r})\n"
    "cell = {}\nexec(wb.share(), cell)\nother = cell['wb']\n"
    "facts.update(shared_model=other.model.id, shared_ids=other.result.token_ids.tolist(),\n"
    "             edited_ids=wb.result.token_ids.tolist())\n"
    "wb.choose(model='gpt-4o')\n"
    "facts.update(hosted_kv=wb.kv_config.value, estimate='hosted model: an estimate' in wb.header.value)\n"
    "print(json.dumps(facts))",
]


def test_the_workbench_with_a_model_in_a_real_kernel(tmp_path: Path) -> None:
    saved = tmp_path / "saved.json"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src.replace("{saved!r}", repr(str(saved)))) for src in CELLS]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in nb.cells[0].outputs)
    f = json.loads("".join(o.get("text", "") for o in nb.cells[1].outputs if o.get("output_type") == "stream"))
    cli = subprocess.run([sys.executable, "-m", "workbench.cli.main", "render", str(SESSION), "--model", VL, "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    out = json.loads(cli.stdout)
    assert (f["template"], f["tokenizer"], f["model"], f["window"]) == ("qwen2.5-vl", "qwen2.5", VL, 32768)
    assert f["ids"] == out["token_ids"] and f["images"] == out["images"] and f["images"][0]["tokens"] == 322
    assert f["kv"] == VL and "57,344 bytes per token" in f["kv_html"] and f["teach_kv"] == VL
    assert f["chip"] == "image · 640×400 · PNG · 2,420 bytes"
    # an unknown name: said under the picker, with the closest names; nothing changed
    assert f["error"].startswith("unknown model 'qwen2.5-vl-7b'") and VL in f["error"]
    assert "wb-model-error" in f["note"] and f["still"] == VL and f["still_template"] == "qwen2.5-vl"
    # the edit kept the image: in the prompt, and in the saved file
    assert f["image_block_after_edit"] == 1
    content = json.loads(saved.read_text())["messages"][1]["content"]
    original = json.loads(SESSION.read_text())["messages"][1]["content"]
    assert content == [{"type": "text", "text": "It fails when I press Pay:"}, original[1]]
    # the Share cell carries the model: the same ids in a new Workbench
    assert f["shared_model"] == VL and f["shared_ids"] == f["edited_ids"]
    assert f["hosted_kv"] == "Llama-3-8B" and f["estimate"]
