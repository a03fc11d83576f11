"""`workbench render`, `demo` and `variables`: a session turn -> prompt, as JSON or a coloured segment
view (the options they share with other commands are in options.py)."""

from __future__ import annotations

import argparse
import codecs
import json
import os
import re
import sys
from importlib import resources
from typing import TextIO

from ..assembly.result import AssemblyResult
from ..segments import Segment
from ..sessions import SessionFile, load_session, parse_session
from .options import build_assembler, catalog_entry, common_options, model_json, projection_option
from .output import print_json, safe

_RESET = "\x1b[0m"
_KIND_COLOUR = {"bos": "90", "preamble": "90", "system": "35", "tools": "33", "generation_prompt": "96", "image": "95"}
_ROLE_COLOUR = {"user": "32", "assistant": "36", "tool": "34", "system": "35"}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("render", help="render one turn of a session into prompt text and token ids")
    r.add_argument("session", help="session file (JSON: a request, a conversation or a log)")
    common_options(r)
    projection_option(r)
    r.set_defaults(func=cmd_render)
    d = sub.add_parser("demo", help="render the embedded demo session (the default command)")
    common_options(d)
    d.set_defaults(func=cmd_demo, session=None)
    v = sub.add_parser("variables", help="list a turn's prompt-template variables: value, scope, who used them")
    v.add_argument("session", help="session file (JSON)")
    common_options(v)
    v.set_defaults(func=cmd_variables)


def assemble_turn(session: SessionFile, args: argparse.Namespace) -> AssemblyResult:
    request = session.turn(args.turn)
    asm, prepare = build_assembler(session, args)
    return asm.assemble(prepare(request))


def cmd_variables(args: argparse.Namespace) -> int:
    result = assemble_turn(load_session(args.session), args)
    if args.json:
        print_json({"variables": [b.to_json() for b in result.variables]})
        return 0
    print_variables(result, sys.stdout)
    return 0


def print_variables(result: AssemblyResult, out: TextIO) -> None:
    if not result.variables:
        out.write("no prompt-template variables (mark a message with \"template\": true to use them)\n")
        return
    width = max(len(safe(b.name)) for b in result.variables)
    for b in result.variables:
        value = b.value if isinstance(b.value, str) else json.dumps(b.value, ensure_ascii=False)
        if len(value) > 60:
            value = value[:57] + "..."
        flag = "  volatile" if b.volatile else ""
        seqs = ",".join("-" if q is None else str(q) for q in b.seqs)
        out.write(f"{safe(b.name):<{width}}  {b.scope:<8}  seq {seqs:<6} {safe(repr(value))}{flag}\n")


def cmd_render(args: argparse.Namespace) -> int:
    if args.projection:
        from .projection import cmd_render_projection
        return cmd_render_projection(args, print_view)
    session = load_session(args.session)
    return _emit(session, args)


def cmd_demo(args: argparse.Namespace) -> int:
    data = json.loads(resources.files("workbench").joinpath("_data", "demo_session.json").read_text("utf-8"))
    session = parse_session(data, "demo_session.json")
    if not args.json:
        print(f"Prompt Workbench demo: {safe(session.title)} ({len(session.turns)} turns; "
              f"showing turn {args.turn or len(session.turns)})\n")
    return _emit(session, args)


def _emit(session: SessionFile, args: argparse.Namespace) -> int:
    entry = catalog_entry(args)
    result = assemble_turn(session, args)
    if args.json:
        print_json({**result.to_json(), "model": model_json(entry)})   # which catalog model, if one was named
        return 0
    colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty()
                                        and not os.environ.get("NO_COLOR"))
    if entry is not None:
        print(f"model {entry.id} ({entry.label})" + (f"  ·  estimate: {entry.estimate}" if entry.estimate else ""))
    from ..tokenizers import get_tokenizer
    tok = get_tokenizer(result.tokenizer["name"]) if not result.tokenizer["name"].startswith(("hf:", "tiktoken:")) \
        else None
    print_view(result, sys.stdout, colour=colour, tokens=args.tokens, full=args.full, tokenizer=tok)
    return 0


def _paint(text: str, code: str, colour: bool) -> str:
    return f"\x1b[{code}m{text}{_RESET}" if colour and text else text


def _visible(s: str) -> str:
    """Prompt text as shown: line breaks and tabs marked (the text keeps them), every other control
    character an escape (output.safe): a message's ESC never reaches the terminal, colour or not."""
    return safe(s, layout=True).replace("\n", "↵\n").replace("\t", "⇥\t")


def print_view(result: AssemblyResult, out: TextIO, *, colour: bool, tokens: bool = False, full: bool = False,
               tokenizer=None, fold: int = 1600) -> None:  # type: ignore[no-untyped-def]
    b = result.budget
    out.write(f"template {safe(result.template['name'])} ({result.template['version'][:12]})  ·  tokenizer "
              f"{safe(result.tokenizer['name'])} ({result.tokenizer['version'][:12]})\n")
    out.write(f"{result.total_tokens} tokens · {len(result.segments)} segments · budget {b.used}/{b.input_budget} "
              f"(window {b.context_window} − reserve {b.reserve}) · cache key {result.cache_key.short}\n")
    out.write("  " + " · ".join(f"{k.replace('_', ' ')} {v['tokens']} ({v['share']:.1%})"
                                for k, v in b.breakdown().items()) + "\n")
    if result.dropped:
        seqs = [d.seq for d in result.dropped]
        out.write(_paint(f"  dropped {len(seqs)} message(s), oldest first: seq {_ranges(seqs)}", "33", colour) + "\n")
    if result.variables:
        out.write("  variables:\n")
        for line in _lines(print_variables, result):
            out.write("    " + line + "\n")
    out.write("\n")
    specials = set(tokenizer.specials.values()) if tokenizer is not None else set()
    images = {(i["start"], i["end"]): i for i in result.images()}
    for s in result.segments:
        code = _ROLE_COLOUR.get(s.role or "", "37") if s.kind == "message" else _KIND_COLOUR.get(s.kind, "37")
        label = safe(s.kind + (f" · {s.role}" if s.role and s.kind == "message" else "")) + \
            (f" · seq {s.seq}" if s.seq is not None else "")
        out.write(_paint(f"── {label} · {s.token_count} tokens [{s.start}:{s.end}] ", code + ";1", colour) + "\n")
        img = images.get((s.start, s.end))
        if img is not None and not full:
            # An image is its placeholder tokens: say what the image is and how they were counted.
            out.write(_paint(safe(_image_line(s, img)), code, colour) + "\n")
            continue
        if tokenizer is not None and (tokens or specials):
            body = _token_text(s, tokenizer, specials, code, colour, tokens)
        else:
            body = _paint(_visible(s.text), code, colour)
        if not full and len(s.text) > fold:
            body = _fold(s, tokenizer, specials, code, colour, tokens, fold)
        out.write(body + "\n")
    for d in result.diagnostics:
        where = f" (seq {d.seq})" if d.seq is not None else ""
        out.write(_paint(safe(f"{d.level}: {d.code}{where}: {d.message}"), "33" if d.level != "info" else "90",
                         colour) + "\n")


def _image_line(s: Segment, img: dict) -> str:
    runs: list[tuple[str, int]] = []
    for tok in re.findall(r"<\|[^|]*\|>|\[[A-Z_]+\]|<[a-z_]+>|\n|[^<\[\n]+", s.text):
        if runs and runs[-1][0] == tok:
            runs[-1] = (tok, runs[-1][1] + 1)
        else:
            runs.append((tok, 1))
    shown = " ".join(t.replace("\n", "↵") + (f"×{n}" if n > 1 else "") for t, n in runs[:6]) + \
        (" …" if len(runs) > 6 else "")
    size = f"{img['width']}×{img['height']}" + (" (assumed: not fetched)" if img["size_assumed"] else "")
    return f"[image {size} from {img['where']}, counted by {img['rule']}] {shown}"


def _fold(s, tokenizer, specials, code, colour, tokens, fold):  # type: ignore[no-untyped-def]
    head, tail = s.text[: fold // 2], s.text[-fold // 4:]
    hidden = len(s.text) - len(head) - len(tail)
    return (_paint(_visible(head), code, colour) + _paint(f" … {hidden:,} characters folded (--full shows them) … ",
                                                          "90;3", colour) + _paint(_visible(tail), code, colour))


def _token_text(s, tokenizer, specials, code, colour, tokens) -> str:  # type: ignore[no-untyped-def]
    """Segment text rebuilt from its tokens: special tokens inverted, boundaries shown on request."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parts: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            parts.append(_paint(_visible("".join(run)), code, colour))
            run.clear()

    for k, tid in enumerate(s.token_ids.tolist()):
        piece = dec.decode(tokenizer.token_bytes(tid))
        if tid in specials and piece in tokenizer.specials:
            flush()
            parts.append(_paint(safe(piece), "7;" + code, colour) if colour else safe(piece))
        elif tokens:
            flush()
            parts.append(_paint(_visible(piece), code + (";4" if k % 2 else ""), colour) if colour
                         else _visible(piece) + "|")
        else:
            run.append(piece)
    flush()
    return "".join(parts)


def _ranges(seqs: list[int]) -> str:
    out, start, prev = [], None, None
    for q in sorted(seqs):
        if start is None:
            start = prev = q
        elif q == prev + 1:
            prev = q
        else:
            out.append(f"{start}" if start == prev else f"{start}–{prev}")
            start = prev = q
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}–{prev}")
    return ", ".join(out)


def _lines(fn, result: AssemblyResult) -> list[str]:  # type: ignore[no-untyped-def]
    import io
    buf = io.StringIO()
    fn(result, buf)
    return buf.getvalue().splitlines()
