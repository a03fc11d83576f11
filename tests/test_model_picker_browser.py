"""The model picker and images in `workbench app`, driven by a real Chromium (Playwright): picking
Qwen/Qwen2.5-VL-7B-Instruct moves the template and tokenizer pickers, the window and the KV tab's
shape, and the screenshot in screenshot_support.json becomes one image block with the token count
`workbench render --model ... --json` gives; the message editor shows the image as a chip and keeps
it when the text is edited and saved; a hosted model shows its estimate label and the stand-in KV
shape; a link carries the model, and one with an unknown model opens its session and says why
inline. With WORKBENCH_SCREENSHOTS=1 it rewrites docs/images/app.png (the README's picture)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import ROOT, AppServer, app_pages, serving

try:
    from playwright.sync_api import expect
except ImportError:
    expect = None  # type: ignore[assignment]   # the browser fixture (conftest.py) says what to install

FIRST_VIEW_MS = 30_000    # a fresh server's first page (Panel's bundle), on two shared cores
UPDATE_MS = 15_000        # a choice: every turn assembled again, the patch, the summary after it
VL = "Qwen/Qwen2.5-VL-7B-Instruct"
SESSION = "sample_sessions/screenshot_support.json"
NONE = "(none: template and tokenizer below)"     # the picker's "no model" (Bokeh's options are their labels)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return tmp_path_factory.mktemp("workbench-home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[AppServer]:
    with serving(SESSION, env={"WORKBENCH_HOME": str(home)}) as app:
        yield app


@pytest.fixture(scope="module")
def cli() -> dict:  # type: ignore[type-arg]
    """What `workbench render --model VL --json` prints for the session's last turn."""
    done = subprocess.run([sys.executable, "-m", "workbench.cli.main", "render", SESSION, "--model", VL, "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def pages(browser, server: AppServer, home: Path):  # type: ignore[no-untyped-def]
    with app_pages(browser, server, home, step_ms=UPDATE_MS, first_ms=FIRST_VIEW_MS) as open_:
        yield open_


def header(page):  # type: ignore[no-untyped-def]
    return page.locator(".wb-token-view .wb-header")


def pick(page, label: str, value: str) -> None:  # type: ignore[no-untyped-def]
    page.get_by_label(label, exact=True).select_option(value)


def tab(page, name: str) -> None:  # type: ignore[no-untyped-def]
    page.locator(".bk-tab", has_text=name).first.click()


def test_picking_a_vision_model_sets_the_pickers_window_kv_and_shows_the_image(pages, cli) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    # No model: the workbench as before; the default template renders text only and says so.
    expect(page.get_by_label("Model", exact=True)).to_have_value(NONE)
    expect(header(page)).to_contain_text("qwen2.5 · qwen2.5")
    assert page.locator(".wb-kind-image").count() == 0
    tab(page, "Diagnostics")
    expect(page.locator(".wb-diags")).to_contain_text("media_not_rendered", timeout=UPDATE_MS)
    tab(page, "Tokens")

    pick(page, "Model", VL)
    expect(page.get_by_label("Template", exact=True)).to_have_value("qwen2.5-vl", timeout=UPDATE_MS)
    expect(page.get_by_label("Tokenizer", exact=True)).to_have_value("qwen2.5")
    expect(page.locator(".wb-model-note")).to_contain_text("window 32,768")
    expect(page.locator(".wb-note-context_window")).to_contain_text(f"32,768 tokens · from model {VL}",
                                                                    timeout=UPDATE_MS)
    # The image: one block, its size and the CLI's token count; its placeholders folded.
    [img] = cli["images"]
    block = page.locator(".wb-kind-image .wb-image-block")
    expect(block).to_have_text(f"image 640×400 · {img['tokens']} tokens · {img['where']}", timeout=UPDATE_MS)
    assert img["tokens"] == 322
    expect(page.locator(".wb-kind-image .wb-seg-label")).to_contain_text(f"[{img['start']}:{img['end']}]")
    assert page.locator(".wb-kind-image .wb-image-tokens span").count() == 0      # not hundreds of chips
    assert "<|image_pad|>" not in page.locator(".wb-kind-image").inner_text()
    expect(header(page)).to_contain_text(f"qwen2.5-vl · qwen2.5 · {len(cli['token_ids'])} tokens")
    expect(page.locator(".wb-app-header")).to_contain_text(f"budget {cli['budget']['used']}/"
                                                           f"{cli['budget']['input_budget']}", timeout=UPDATE_MS)
    block.click()                                                                  # unfolds its tokens
    expect(page.locator(".wb-kind-image .wb-image-tokens span")).to_have_count(img["tokens"])
    assert page.locator(".wb-kind-image .wb-special", has_text="<|image_pad|>").count() == img["tokens"]
    block.click()
    expect(page.locator(".wb-kind-image .wb-image-tokens")).to_be_hidden()
    # The budget bar has the images as their own bar.
    expect(page.locator(".js-plotly-plot .legendtext", has_text="images").first).to_be_attached(timeout=UPDATE_MS)
    # The KV tab: the model's shape.
    tab(page, "KV")
    expect(page.get_by_label("Model shape (KV)", exact=True)).to_have_value(VL)
    expect(page.locator(".wb-kv-shape")).to_have_text(VL, timeout=UPDATE_MS)
    expect(page.locator(".wb-kv")).to_contain_text("28 layers × 4 KV heads × 128 head dim")
    expect(page.locator(".wb-kv")).to_contain_text("57,344 bytes per token")
    # No model again: the KV tab is back on Llama-3-8B and says why.
    tab(page, "Tokens")
    pick(page, "Model", NONE)
    expect(page.get_by_label("Model", exact=True)).to_have_value(NONE)
    tab(page, "KV")
    expect(page.locator(".wb-kv-shape")).to_have_text("Llama-3-8B", timeout=UPDATE_MS)
    expect(page.locator(".wb-kv-shape-note")).to_contain_text("KV shape of Llama-3-8B (no model chosen")
    tab(page, "Tokens")
    if os.environ.get("WORKBENCH_SCREENSHOTS") == "1":     # the README's picture: the picker and the image
        pick(page, "Model", VL)
        expect(block).to_be_visible(timeout=UPDATE_MS)
        page.locator(".wb-me-row").nth(1).locator(".wb-me-head").click()
        expect(page.locator(".wb-me-chip")).to_be_visible()
        expect(page.locator(".wb-note-context_window")).to_contain_text("from model", timeout=UPDATE_MS)
        page.screenshot(path=str(ROOT / "docs" / "images" / "app.png"))


def test_a_tokenizer_by_hand_overrides_the_model_and_keeps_its_window(pages) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    pick(page, "Model", "Qwen/Qwen2.5-VL-3B-Instruct")
    expect(page.get_by_label("Template", exact=True)).to_have_value("qwen2.5-vl", timeout=UPDATE_MS)
    pick(page, "Tokenizer", "qwen3")
    expect(page.locator(".wb-model-override")).to_contain_text("tokenizer overridden: qwen3", timeout=UPDATE_MS)
    expect(page.locator(".wb-model-override")).to_contain_text("the model’s is qwen2.5")
    expect(header(page)).to_contain_text("qwen2.5-vl · qwen3", timeout=UPDATE_MS)
    expect(page.locator(".wb-kind-image .wb-image-block")).to_contain_text("322 tokens")
    expect(page.locator(".wb-note-context_window")).to_contain_text("32,768 tokens · from model", timeout=UPDATE_MS)
    tab(page, "KV")
    expect(page.locator(".wb-kv-shape")).to_have_text("Qwen/Qwen2.5-VL-3B-Instruct", timeout=UPDATE_MS)
    expect(page.locator(".wb-kv")).to_contain_text("36 layers × 2 KV heads")


def test_editing_the_text_of_the_image_message_keeps_the_image_when_saved(pages, home: Path) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    pick(page, "Model", VL)
    expect(page.locator(".wb-kind-image .wb-image-block")).to_be_visible(timeout=UPDATE_MS)
    row = page.locator(".wb-me-row").nth(1)
    row.locator(".wb-me-head").click()
    chip = row.locator(".wb-me-chip")
    expect(chip).to_have_text("image · 640×400 · PNG · 2,420 bytes")
    box = row.locator("textarea[data-field=content][data-part='0']")
    box.fill("Checkout fails when I press Pay, see the screenshot:")
    expect(page.locator(".wb-token-view")).to_contain_text("see the screenshot", timeout=UPDATE_MS)
    expect(chip).to_be_visible()                                   # still beside the text
    expect(page.locator(".wb-kind-image .wb-image-block")).to_contain_text("322 tokens")
    page.get_by_label("Save to (a .json name in the app's folder)").fill("kept-image.json")
    page.get_by_role("button", name="Save", exact=True).click()
    saved = home / "sessions" / "kept-image.json"
    expect(page.locator(".wb-file-status")).to_contain_text("saved to", timeout=UPDATE_MS)
    content = json.loads(saved.read_text())["messages"][1]["content"]
    original = json.loads((ROOT / SESSION).read_text())["messages"][1]["content"]
    assert content == [{"type": "text", "text": "Checkout fails when I press Pay, see the screenshot:"}, original[1]]


def test_a_hosted_model_shows_its_estimate_and_the_stand_in_kv_shape(pages) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    pick(page, "Model", "gpt-4o (hosted: estimate)")
    expect(page.get_by_label("Template", exact=True)).to_have_value("gpt-oss", timeout=UPDATE_MS)
    estimate = page.locator(".wb-app-header + .wb-estimate, .wb-estimate").first
    expect(estimate).to_contain_text("GPT-4o · hosted model: an estimate", timeout=UPDATE_MS)
    tab(page, "KV")
    expect(page.locator(".wb-kv-shape-note")).to_have_text("KV shape of Llama-3-8B (the model's own is not public)",
                                                           timeout=UPDATE_MS)
    expect(page.locator(".wb-kv-shape")).to_have_text("Llama-3-8B")


def test_a_link_carries_the_model_and_an_unknown_one_is_said_inline(pages, server: AppServer) -> None:  # type: ignore[no-untyped-def]
    page = pages()
    pick(page, "Model", VL)
    expect(page.get_by_label("Template", exact=True)).to_have_value("qwen2.5-vl", timeout=UPDATE_MS)
    page.get_by_role("button", name="Share").click()
    link_box = page.locator(".wb-share-link input")
    expect(link_box).to_have_value(re.compile(r"\?state=[A-Za-z0-9_-]+$"), timeout=UPDATE_MS)
    url = link_box.input_value()
    other = pages(url)
    expect(other.get_by_label("Model", exact=True)).to_have_value(VL)
    expect(other.locator(".wb-kind-image .wb-image-block")).to_contain_text("322 tokens", timeout=UPDATE_MS)

    from dataclasses import replace

    from workbench.share import decode, encode
    bad = encode(replace(decode(url.split("state=", 1)[1]), model="Qwen/Qwen2.5-VL-8B"))
    third = pages(f"{server.url}?state={bad}")
    note = third.locator(".wb-model-error")
    expect(note).to_contain_text("this link's model: unknown model 'Qwen/Qwen2.5-VL-8B'", timeout=UPDATE_MS)
    expect(note).to_contain_text(re.compile(f"did you mean [^?]*{re.escape(VL)}"))
    expect(third.get_by_label("Model", exact=True)).to_have_value(NONE)
    expect(third.get_by_label("Template", exact=True)).to_have_value("qwen2.5-vl")   # the rest of the link opened
    # the page keeps working: typing still updates the view
    box = third.locator(".wb-me-row").last.locator("textarea[data-field=content]")
    box.fill("Still typing after the bad model.")
    expect(third.locator(".wb-token-view")).to_contain_text("Still typing after the bad model.", timeout=UPDATE_MS)
