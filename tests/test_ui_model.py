"""The model picker, images in the views and the editor's content parts, without a browser
(issue 30's UI parts): what choosing a catalog model sets in the workbench's state, its parity with
`workbench render --model NAME --json`, a template chosen by hand over it, the KV shape the KV tab
and Teach use, shared links with and without a model, an unknown name shown inline, the token
view's image block, the budget bar's image tokens, the diagnostics, and a message's image part kept
when its text is edited. The browser side: test_model_picker_browser.py."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from inline_host import InlineHost

from workbench import Assembler
from workbench.catalog import lookup
from workbench.errors import EditError, ModelNotFoundError
from workbench.share import decode
from workbench.ui.charts import budget_figure
from workbench.ui.content_parts import editor_parts
from workbench.ui.controller import Controller, message_counts
from workbench.ui.document import SessionDocument
from workbench.ui.html import diagnostics_html, header_html
from workbench.ui.kv_panel import kv_figure, kv_html
from workbench.ui.model_choice import (
    NO_MODEL_KV,
    NOT_PUBLIC,
    estimate_html,
    kv_options,
    model_note_html,
    model_options,
    resolve_kv,
)
from workbench.ui.sharing import open_text, share_text
from workbench.ui.state import WorkbenchState, sample_sessions
from workbench.ui.teaching import StepThrough
from workbench.ui.viewmodel import TokenViewModel

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sample_sessions()
SHOT = "screenshot_support.json"
VL = "Qwen/Qwen2.5-VL-7B-Instruct"


def state_of(name: str, model: str | None = None) -> WorkbenchState:
    s = WorkbenchState(SAMPLES[name], autosave=None, restore=False)
    if model is not None:
        s.choose(model=model)
    s.assemble()
    return s


def cli_json(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "workbench.cli.main", *args, "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# ------------------------------------------------------------------------------ the model's choices
def test_no_model_is_the_workbench_as_before() -> None:
    s = state_of("support_chat.json")
    assert s.model is None and s.template == "qwen2.5" and s.tokenizer == "auto"
    r, cold = s.result, Assembler(template="qwen2.5").assemble(s.doc.request(s.turn))
    assert r is not None and r.token_ids.tolist() == cold.token_ids.tolist() and r.cache_key == cold.cache_key
    assert r.budget.context_window == cold.budget.context_window
    kv = s.kv_choice()
    assert kv.config.name == "Llama-3-8B" and kv.note == NO_MODEL_KV
    assert s.budget_settings().window_source == "template qwen2.5"


def test_a_vision_model_sets_everything_and_equals_the_cli_json() -> None:
    s = state_of(SHOT, VL)
    entry = lookup(VL)
    assert (s.template, s.tokenizer) == ("qwen2.5-vl", "qwen2.5")
    r = s.result
    assert r is not None and r.budget.context_window == entry.context_window == 32768
    assert s.budget_settings().window_source == f"model {VL}"
    kv = s.kv_choice()
    assert (kv.config.name, kv.config.layers, kv.config.kv_heads, kv.config.head_dim) == (VL, 28, 4, 128)
    assert kv.config.bytes_per_token == entry.kv.bytes_per_token == 57344 and kv.note == ""
    [img] = r.images()
    assert (img["width"], img["height"], img["tokens"]) == (640, 400, 322)
    # What the screen shows is the CLI's result: the same ids, key, images and budget.
    out = cli_json("render", str(ROOT / "sample_sessions" / SHOT), "--model", VL)
    assert out["token_ids"] == r.token_ids.tolist() and out["cache_key"] == r.cache_key.hex
    assert out["images"] == r.images() and out["budget"] == r.budget.to_json()


def test_a_template_chosen_by_hand_overrides_the_model_and_keeps_its_window_and_kv() -> None:
    s = state_of("support_chat.json", "Qwen/Qwen2.5-7B-Instruct")
    s.choose(template="llama3")            # its own window is 8,192; the model's 32,768 stays
    r = s.assemble()
    assert s.model is not None and s.model.id == "Qwen/Qwen2.5-7B-Instruct"
    assert r.template["name"] == "llama3" and r.budget.context_window == 32768
    assert s.kv_choice().config.name == "Qwen/Qwen2.5-7B-Instruct"
    note = model_note_html(s)
    assert "template overridden: llama3" in note and "the model’s is qwen2.5" in note
    # the tokenizer stayed the model's: llama3's control tokens are not in it, and the result says so
    assert "control_tokens_missing" in {d.code for d in r.diagnostics}
    assert "control_tokens_missing" in diagnostics_html(r)
    s.choose(template="qwen2.5")           # back to the model's own: nothing overridden
    assert "overridden" not in model_note_html(s)


def test_an_unknown_model_changes_nothing_and_lists_close_names() -> None:
    s = state_of("support_chat.json", "Qwen/Qwen2.5-7B-Instruct")
    before = (s.model, s.template, s.tokenizer, s.generation)
    with pytest.raises(ModelNotFoundError, match="Qwen/Qwen2.5-VL-7B-Instruct"):
        s.choose(model="qwen2.5-vl-7b")
    assert (s.model, s.template, s.tokenizer, s.generation) == before
    c = Controller(s, InlineHost(), background=False)
    error = c.choose(model="qwen2.5-vl-7b")
    assert error.startswith("unknown model 'qwen2.5-vl-7b'") and "did you mean" in error
    assert s.model_error == error and "wb-model-error" in model_note_html(s)
    assert c.choose(model="") == "" and s.model is None and s.model_error == ""


def test_hosted_models_keep_llama_kv_say_so_and_show_their_estimate() -> None:
    s = state_of("support_chat.json", "gpt-4o")
    kv = s.kv_choice()
    assert kv.config.name == "Llama-3-8B" and kv.note == NOT_PUBLIC
    assert "KV shape of Llama-3-8B (the model's own is not public)" in NOT_PUBLIC
    assert kv_options(s.model) == kv_options(None)        # no own shape to offer
    label = estimate_html(s.model)
    assert "GPT-4o" in label and "hosted model: an estimate" in label
    assert estimate_html(None) == "" and estimate_html(lookup(VL)) == ""
    h = TokenViewModel(s.assembler().tokenizer).update(s.result).header
    assert header_html(h, label).endswith(label)
    assert VL in model_options().values() and "gpt-4o (hosted: estimate)" in model_options()


def test_the_kv_tab_and_teach_use_the_models_shape() -> None:
    s = state_of(SHOT, VL)
    s.select_turn(2)
    p = s.panels()
    kv = s.kv_choice()
    page = kv_html(p, kv.config, None, "", kv.note)
    assert f"<b class=\"wb-kv-shape\">{VL}</b>" in page and "57,344 bytes per token" in page
    assert VL in kv_figure(p, kv.config)["layout"]["title"]["text"]
    walk = StepThrough()
    assert walk.load(p, p.previous, kv)
    prefill = walk.steps[5].data
    assert prefill["kv_config"] == VL and prefill["kv_bytes_per_token"] == 57344
    assert prefill["kv_bytes_prompt"] == p.analysis.result.total_tokens * 57344
    # a named shape picked by hand over the model's, and the stand-in note without a model
    assert resolve_kv("Mistral-7B", s.model).config.name == "Mistral-7B"
    assert resolve_kv("Llama-3-8B", None).note == NO_MODEL_KV
    none = state_of(SHOT)
    walk.load(none.panels(), none.panels().previous, none.kv_choice())
    assert walk.steps[5].data["kv_note"] == NO_MODEL_KV and NO_MODEL_KV.split(" (")[0] in walk.steps[5].html


# ------------------------------------------------------------------------------ shared links
def test_a_link_carries_the_model_and_one_made_before_models_still_opens() -> None:
    s = state_of(SHOT, VL)
    s.choose(tokenizer="qwen3")
    text = share_text(s)
    assert decode(text).model == VL
    t = state_of("support_chat.json")
    open_text(t, text)
    assert t.model is not None and t.model.id == VL and (t.template, t.tokenizer) == ("qwen2.5-vl", "qwen3")
    assert t.assemble().token_ids.tolist() == s.assemble().token_ids.tolist()
    # a link of the format before models (no "model" field) opens as it did: no model
    old = {"v": 1, "session": json.loads(Path(SAMPLES["openai_minimal.json"]).read_text()), "name": "m.json",
           "template": "llama3.1", "tokenizer": "auto"}
    old_text = base64.urlsafe_b64encode(zlib.compress(json.dumps(old).encode())).rstrip(b"=").decode()
    u = state_of("support_chat.json", VL)
    open_text(u, old_text)
    assert u.model is None and u.template == "llama3.1" and u.model_error == ""
    # and a state without a model writes no "model" field: the same string as before
    assert "model" not in json.loads(zlib.decompress(base64.urlsafe_b64decode(
        share_text(u) + "=" * (-len(share_text(u)) % 4))))


def test_a_link_with_an_unknown_model_opens_its_session_and_says_why_inline() -> None:
    s = state_of(SHOT, VL)
    raw = json.loads(zlib.decompress(base64.urlsafe_b64decode(share_text(s) + "=" * (-len(share_text(s)) % 4))))
    raw["model"] = "Qwen/Qwen9-VL"
    text = base64.urlsafe_b64encode(zlib.compress(json.dumps(raw).encode())).rstrip(b"=").decode()
    t = state_of("support_chat.json")
    open_text(t, text)
    assert t.doc.name == SHOT and t.model is None and t.template == "qwen2.5-vl"
    assert t.model_error.startswith("this link's model: unknown model 'Qwen/Qwen9-VL'")
    assert "did you mean" in t.model_error and t.assemble().images()


# ------------------------------------------------------------------------------ images in the views
def test_the_token_view_sends_an_image_as_one_block_from_images() -> None:
    s = state_of(SHOT, VL)
    r = s.result
    patch = TokenViewModel(s.assembler().tokenizer).update(r)
    [seg] = [m for m in patch.segments if m["kind"] == "image"]
    [img] = r.images()
    assert seg["image"]["width"] == 640 and seg["image"]["height"] == 400
    assert seg["image"]["tokens"] == img["tokens"] == seg["end"] - seg["start"] == 322
    assert seg["image"]["where"] == "messages[1].content[1].image_url" and seg["image"]["digest"] == img["digest"]
    assert seg["image"]["rule"] == "qwen2-vl"
    # a text-only template: no image segment, and the warning instead
    t = state_of(SHOT)
    assert not [m for m in TokenViewModel(t.assembler().tokenizer).update(t.result).segments if m["kind"] == "image"]
    assert "media_not_rendered" in diagnostics_html(t.result)


def test_an_image_by_url_is_a_block_of_the_assumed_size_and_says_so_in_diagnostics() -> None:
    data = json.loads(Path(SAMPLES[SHOT]).read_text())
    data["messages"][1]["content"][1] = {"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}}
    s = WorkbenchState(SessionDocument(data, None, "url.json"), autosave=None)
    s.choose(model=VL)
    r = s.assemble()
    [img] = r.images()
    assert img["size_assumed"] and "image_size_assumed" in diagnostics_html(r)
    [seg] = [m for m in TokenViewModel(s.assembler().tokenizer).update(r).segments if m["kind"] == "image"]
    assert seg["image"]["size_assumed"] and (seg["image"]["width"], seg["image"]["height"]) == (img["width"],
                                                                                                img["height"])
    parts = editor_parts(s.doc.messages(1), s.doc.format)[1]["parts"]
    assert "assumed" in parts[1]["label"] and "by url, not fetched" in parts[1]["label"]


def test_the_budget_bar_shows_image_tokens_as_their_own_bar() -> None:
    s = state_of(SHOT, VL)
    s.select_turn(1)
    r = s.assemble()
    fig = budget_figure(r)
    bars = {t["name"]: t["x"][0] for t in fig["data"]}
    assert bars["images"] == r.budget.by_kind["image"] == 322
    assert bars["last user"] + bars["images"] == r.budget.parts["last_user"]     # taken out of its part
    assert sum(bars.values()) == r.budget.used + r.budget.reserve + r.budget.free
    later = s.turn_result(3) or state_of(SHOT, VL).result
    assert later is not None
    bars = {t["name"]: t["x"][0] for t in budget_figure(later)["data"]}
    assert bars["history"] + bars["images"] == later.budget.parts["history"]   # by turn 3 it is history
    plain = {t["name"] for t in budget_figure(state_of("support_chat.json").result)["data"]}
    assert "images" not in plain                                                  # as before without images


def test_the_editor_counts_a_messages_image_tokens() -> None:
    s = state_of(SHOT, VL)
    counts = message_counts(s.result, len(s.doc.messages(s.turn)))
    segs = [x for x in s.result.segments if x.seq == 1]
    assert counts[1] == sum(x.token_count for x in segs) and counts[1] > 322


# ------------------------------------------------------------------------------ the editor's parts
def test_the_editor_shows_media_parts_as_chips_beside_the_text() -> None:
    d = SessionDocument.load(SAMPLES[SHOT])
    parts = editor_parts(d.messages(1), d.format)
    assert parts[0] is None and parts[2] is None                   # plain text messages
    text, chip = parts[1]["parts"]
    assert text == {"k": 0, "text": d.messages(1)[1]["content"][0]["text"]}
    assert chip["kind"] == "image" and chip["label"] == "image · 640×400 · PNG · 2,420 bytes"
    assert "digest 5146a26252cc73d1" in chip["title"]
    assert editor_parts(SessionDocument.load(SAMPLES["openai_minimal.json"]).messages(1), "openai") == \
        [None] * 4                                                  # text parts alone: edited as before


@pytest.mark.parametrize("op", [
    {"op": "set", "index": 1, "field": "content", "part": 0, "value": "It fails at Pay. See:"},   # the editor
    {"op": "set", "index": 1, "field": "content", "value": "It fails at Pay. See:"},              # Workbench.edit
])
def test_editing_the_text_keeps_the_image_part(tmp_path: Path, op: dict[str, Any]) -> None:
    s = WorkbenchState(SAMPLES[SHOT], autosave=None, restore=False)
    image = s.doc.messages(1)[1]["content"][1]
    s.apply(op)
    content = s.doc.messages(1)[1]["content"]
    assert content == [{"type": "text", "text": "It fails at Pay. See:"}, image]
    out = tmp_path / "saved.json"
    s.save(str(out))
    saved = json.loads(out.read_text())["messages"][1]["content"]
    assert saved[1] == image and saved[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_text_for_a_message_with_several_text_parts_must_name_one() -> None:
    data = json.loads(Path(SAMPLES[SHOT]).read_text())
    img = data["messages"][1]["content"][1]
    data["messages"][1]["content"] = [{"type": "text", "text": "a"}, img, {"type": "text", "text": "b"}]
    d = SessionDocument(data, None, "x.json")
    with pytest.raises(EditError, match=r"2 text parts.*part=0"):
        d.apply({"op": "set", "index": 1, "field": "content", "value": "c"}, 1)
    d.apply({"op": "set", "index": 1, "field": "content", "part": 2, "value": "c"}, 1)
    assert d.messages(1)[1]["content"] == [{"type": "text", "text": "a"}, img, {"type": "text", "text": "c"}]
    with pytest.raises(EditError, match="part 1 is not a text part"):
        d.apply({"op": "set", "index": 1, "field": "content", "part": 1, "value": "x"}, 1)
    # an image alone: the text goes before it
    data["messages"][1]["content"] = [img]
    d = SessionDocument(data, None, "x.json")
    d.apply({"op": "set", "index": 1, "field": "content", "value": "look"}, 1)
    assert d.messages(1)[1]["content"] == [{"type": "text", "text": "look"}, img]


def test_undo_of_a_part_edit_puts_the_message_back() -> None:
    s = WorkbenchState(SAMPLES[SHOT], autosave=None, restore=False)
    before = s.doc.messages(1)[1]
    s.apply({"op": "set", "index": 1, "field": "content", "part": 0, "value": "x"})
    s.apply({"op": "set", "index": 1, "field": "content", "part": 0, "value": "xy"})
    assert s.undo() is not None and s.doc.messages(1)[1] is before      # one burst, one step


def test_compare_keeps_the_model_on_both_sides() -> None:
    from workbench.ui.compare import Choice, assemble_side, sides
    s = state_of(SHOT, VL)
    a, b = sides(s, Choice("tokenizer", "qwen3"))
    left, right = assemble_side(a, s.turn), assemble_side(b, s.turn)
    assert s.result is not None and left.ids.tolist() == s.result.token_ids.tolist()     # A is the live view
    assert right.result is not None and right.result.budget.context_window == 32768    # the model's window
    assert right.result.tokenizer["name"] == "qwen3" and [i["tokens"] for i in right.result.images()] == [322]


def test_the_apps_pickers_follow_a_model_and_say_an_unknown_one(tmp_path: Path) -> None:
    from workbench.ui.app import WorkbenchApp
    from workbench.ui.document import Autosave
    app = WorkbenchApp(SAMPLES[SHOT], autosave=Autosave(tmp_path), model=VL)            # no server: inline
    assert (app.template_select.value, app.tokenizer_select.value, app.kv_config.value) == ("qwen2.5-vl", "qwen2.5", VL)
    assert app.state.result is not None and [i["tokens"] for i in app.state.result.images()] == [322]
    app.model_select.value = "gpt-4o"                                   # a choice in the page
    assert (app.state.template, app.template_select.value, app.kv_config.value) == ("gpt-oss", "gpt-oss", "Llama-3-8B")
    app.controller.run_panels(frozenset({"cache"}))                     # what the KV tab waits for
    app.tabs.active = app._tab_names.index("KV")                        # drawn when its tab is open
    assert "GPT-4o" in app.header.object and "KV shape of Llama-3-8B (the model&#x27;s own is not public)" in \
        app.kv.object
    app.template_select.value = "chatml"                                # by hand, over the model
    assert app.state.model is not None and "template overridden: chatml" in app.pickers.note.object
    bad = WorkbenchApp(SAMPLES[SHOT], autosave=Autosave(tmp_path), model="qwen-vl-7")
    assert bad.state.model is None and bad.state.result is not None
    assert "unknown model &#x27;qwen-vl-7&#x27;" in bad.pickers.note.object
    assert f"requests name {VL}" in bad.pickers.note.object           # the session's own model, offered


@pytest.mark.parametrize("model, says", [("x" * 201, "model is 201 characters"), (7, "model is text")])
def test_a_links_model_field_is_bounded_text(model: Any, says: str) -> None:
    from workbench.errors import ShareError
    from workbench.share import from_json
    good = json.loads(zlib.decompress(base64.urlsafe_b64decode(
        (t := share_text(state_of("openai_minimal.json", VL))) + "=" * (-len(t) % 4))))
    assert from_json(good).model == VL
    with pytest.raises(ShareError, match=says):
        from_json({**good, "model": model})
