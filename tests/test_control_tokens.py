"""A template whose control tokens the tokenizer lacks gets a warning (issue 30, item 4).

The warning is checked against what really happens: the template's control tokens (the special
tokens of its own tokenizer in a real render) are looked up in the other tokenizer's encoding of
that same text; a control token "becomes plain text" when no single special id covers its span.
The warning must appear exactly then, name those tokens, and never appear for a template with its
own tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench import Assembler
from workbench.cli.main import main
from workbench.errors import TemplateError
from workbench.templates import from_source, get_template, shipped_names
from workbench.templates.control_tokens import control_token_notes, control_tokens, missing_control_tokens
from workbench.templates.registry import from_hf_folder
from workbench.tokenizers import get_tokenizer
from workbench.tokenizers import names as tokenizer_names

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = str(ROOT / "sample_sessions" / "support_chat.json")
CODE = "control_tokens_missing"

PLAIN = {"messages": [{"role": "system", "content": "You answer in one line."},
                      {"role": "user", "content": "Where is the station?"},
                      {"role": "assistant", "content": "Two streets north."},
                      {"role": "user", "content": "Thanks, and the museum?"}]}
TOOLS = {"messages": [{"role": "user", "content": "Weather in Oslo?"},
                      {"role": "assistant", "content": None, "tool_calls": [
                          {"id": "abc123XYZ", "type": "function",
                           "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                      {"role": "tool", "tool_call_id": "abc123XYZ", "content": "Rain, 8 C."},
                      {"role": "user", "content": "And tomorrow?"}],
         "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather now.",
                                                     "parameters": {"type": "object", "properties": {
                                                         "city": {"type": "string"}}, "required": ["city"]}}}]}
# Gemma 3 has no tokenizer that ships: its control tokens as google/gemma-3-*-it's tokenizer_config.json
# declares them (the ones its template writes).
GEMMA3_CONTROL = {"<bos>", "<start_of_turn>", "<end_of_turn>"}


def _texts(template_name: str) -> list[str]:
    """Real renders of the template (with a tokenizer that has all its control tokens, or any for
    gemma3): plain, and with tools where the template takes them."""
    t = get_template(template_name)
    out = []
    for request in (PLAIN, TOOLS):
        try:
            out.append(Assembler(template=t, tokenizer=t.tokenizer or "o200k_base", cache=None).assemble(request).text)
        except TemplateError:
            continue
    assert out
    return out


def _written(template_name: str, text: str) -> list[tuple[int, int, str]]:
    """Where the template's own control tokens stand in `text` (start, end, token)."""
    t = get_template(template_name)
    if t.tokenizer is None:
        spans = []
        for tok in GEMMA3_CONTROL:
            start = text.find(tok)
            while start >= 0:
                spans.append((start, start + len(tok), tok))
                start = text.find(tok, start + 1)
        return spans
    return get_tokenizer(t.tokenizer).find_specials(text)


def _really_plain(template_name: str, tokenizer_name: str) -> set[str]:
    """The control tokens that the tokenizer encodes as something other than one special id, found by
    encoding the template's real renders with it."""
    tok = get_tokenizer(tokenizer_name)
    special_ids = set(tok.specials.values())
    plain = set()
    for text in _texts(template_name):
        covered = {(c.start, c.end) for c in tok.chunks(text) if c.special and int(c.ids[0]) in special_ids}
        for s, e, t in _written(template_name, text):
            if (s, e) not in covered:
                plain.add(t)
    return plain


PAIRS = [(t, k) for t in shipped_names() for k in tokenizer_names() if k != get_template(t).tokenizer]


@pytest.mark.parametrize(("template_name", "tokenizer_name"), PAIRS)
def test_warning_exactly_when_a_control_token_becomes_plain_text(template_name, tokenizer_name):
    tok = get_tokenizer(tokenizer_name)
    missing = missing_control_tokens(get_template(template_name), tok)
    plain = _really_plain(template_name, tokenizer_name)
    assert bool(missing) == bool(plain), (missing, plain)
    assert plain <= set(missing)
    for t in missing:   # each one named is really split (or at least not one special id)
        ids = tok.encode(t)
        assert not (len(ids) == 1 and int(ids[0]) in set(tok.specials.values())), t
    result = Assembler(template=template_name, tokenizer=tokenizer_name, cache=None).assemble(PLAIN)
    warnings = [d for d in result.diagnostics if d.code == CODE]
    assert len(warnings) == (1 if missing else 0)
    if missing:
        w = warnings[0]
        assert w.level == "warning" and w.seq is None
        assert missing[0] in w.message and f" {len(missing)} control token" in w.message
        assert tokenizer_name in w.message


@pytest.mark.parametrize("template_name", [t for t in shipped_names() if get_template(t).tokenizer])
def test_never_with_the_templates_own_tokenizer(template_name):
    t = get_template(template_name)
    own = get_tokenizer(t.tokenizer)
    assert control_tokens(t), "the template writes control tokens"
    assert missing_control_tokens(t, own) == ()
    assert _really_plain(template_name, t.tokenizer) == set()
    for request in (PLAIN, TOOLS):
        try:
            result = Assembler(template=template_name, cache=None).assemble(request)
        except TemplateError:
            continue
        assert CODE not in {d.code for d in result.diagnostics}


def test_a_real_mismatch_is_counted_and_named():
    """The issue's example: llama3.1 with cl100k_base makes each header marker several tokens."""
    t, cl100k = get_template("llama3.1"), get_tokenizer("cl100k_base")
    missing = missing_control_tokens(t, cl100k)
    assert {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"} <= set(missing)
    assert len(cl100k.encode("<|start_header_id|>")) > 1
    (note,) = control_token_notes(t, cl100k)
    assert "and 2 more" in note.message and "llama3" in note.message and "--model" in note.message


def test_every_result_carries_it_sessions_included():
    """The result objects the app and the notebook read (result.diagnostics), cold and incremental."""
    asm = Assembler(template="qwen3", tokenizer="qwen2.5", cache=None)
    session = asm.session()
    first = session.assemble({"messages": PLAIN["messages"][:2]})
    second = session.assemble(PLAIN)
    assert second.reused_segments > 0      # the incremental path
    for r in (first, second):
        (w,) = [d for d in r.diagnostics if d.code == CODE]
        assert "<think>" in w.message or "<tool_response>" in w.message


def test_custom_templates_are_judged_by_shape():
    chatml_like = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
                   "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
    t = from_source(chatml_like, "mine")
    assert missing_control_tokens(t, get_tokenizer("qwen2.5")) == ()
    assert missing_control_tokens(t, get_tokenizer("o200k_base")) == ("<|im_start|>", "<|im_end|>")
    # XML-like tags are special in some vocabularies and text in others: no warning without the model's own
    think_only = from_source("{% for m in messages %}<think>{{ m['content'] }}</think>{% endfor %}", "think")
    assert missing_control_tokens(think_only, get_tokenizer("qwen2.5")) == ()
    mistral_like = from_source("{{ bos_token }}{% for m in messages %}[INST]{{ m['content'] }}[/INST]{% endfor %}",
                               "mistralish")
    assert missing_control_tokens(mistral_like, get_tokenizer("mistral-v3")) == ()
    assert set(missing_control_tokens(mistral_like, get_tokenizer("llama3"))) == {"[INST]", "[/INST]"}


def test_a_folders_template_with_its_bos_token(tmp_path):
    (tmp_path / "chat_template.jinja").write_text(
        "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
        "{% endfor %}", encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<BOS>"}), encoding="utf-8")
    t = from_hf_folder(tmp_path)
    assert set(control_tokens(t)) == {"<BOS>", "<start_of_turn>", "<end_of_turn>"}
    assert "<BOS>" in missing_control_tokens(t, get_tokenizer("qwen2.5"))


def test_cached_per_template_and_tokenizer_version():
    a = from_source("{% for m in messages %}<|im_start|>{{ m['content'] }}{% endfor %}", "v")
    b = from_source("{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}", "v")
    tok = get_tokenizer("cl100k_base")
    first = missing_control_tokens(a, tok)
    assert missing_control_tokens(a, tok) is first      # the same tuple: computed once
    assert missing_control_tokens(b, tok) == ("<|im_start|>", "<|im_end|>")   # another version, computed anew


def test_cli_render_json_carries_the_warning(capsys):
    assert main(["render", SUPPORT, "--template", "llama3.1", "--tokenizer", "cl100k_base", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    (w,) = [x for x in d["diagnostics"] if x["code"] == CODE]
    assert w["level"] == "warning" and w["seq"] is None and "<|start_header_id|>" in w["message"]
    assert main(["render", SUPPORT, "--template", "llama3.1", "--tokenizer", "llama3", "--json"]) == 0
    assert CODE not in {x["code"] for x in json.loads(capsys.readouterr().out)["diagnostics"]}
    # the human view prints it too
    assert main(["render", SUPPORT, "--template", "llama3.1", "--tokenizer", "cl100k_base", "--color", "never"]) == 0
    assert f"warning: {CODE}:" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["analyze"], ["simulate", "--provider", "vllm"], ["kv"]])
def test_cli_commands_without_diagnostics_say_it_on_stderr(capsys, command):
    argv = [command[0], SUPPORT, *command[1:], "--template", "llama3.1", "--tokenizer", "cl100k_base", "--json"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    json.loads(out)                      # stdout stays one JSON object
    assert f"warning: {CODE}:" in err and "<|start_header_id|>" in err
    assert main([*argv[:-5], "--template", "llama3.1", "--json"]) == 0
    assert CODE not in capsys.readouterr().err


def test_docstring_examples_run():
    import doctest

    from workbench.templates import control_tokens as module
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
