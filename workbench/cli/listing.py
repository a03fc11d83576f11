"""`workbench templates`, `workbench tokenizers` and `workbench models`: what is available."""

from __future__ import annotations

import argparse

from ..catalog import models
from ..errors import WorkbenchError
from ..templates import get_template, shipped_names
from ..tokenizers import ENTRIES, get_tokenizer
from .output import print_json, safe


def add_parsers(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("templates", help="list the shipped chat templates")
    t.add_argument("--json", action="store_true", help="print JSON")
    t.set_defaults(func=cmd_templates)
    k = sub.add_parser("tokenizers", help="list the named tokenizers (and hf: / tiktoken: prefixes)")
    k.add_argument("--json", action="store_true", help="print JSON")
    k.set_defaults(func=cmd_tokenizers)
    m = sub.add_parser("models", help="list the model catalog: template, tokenizer, window, KV shape per model id")
    m.add_argument("--json", action="store_true", help="print JSON")
    m.set_defaults(func=cmd_models)


def cmd_templates(args: argparse.Namespace) -> int:
    rows = [get_template(n).info() for n in shipped_names()]
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['name']:<15} {r['version'][:12]}  {r['tokenizer'] or '-':<15} {safe(r['description'])}")
    return 0


def cmd_tokenizers(args: argparse.Namespace) -> int:
    rows = []
    for name, entry in ENTRIES.items():
        try:
            tok = get_tokenizer(name)
            rows.append({"name": name, "version": tok.version, "description": entry.description,
                         "vocab_size": tok.vocab_size, "available": True})
        except WorkbenchError as exc:
            rows.append({"name": name, "version": None, "description": entry.description, "available": False,
                         "error": str(exc)})
    rows.append({"name": "hf:", "version": None, "description": "prefix: hf:FOLDER (tokenizer.json) or a hub id "
                 "when online", "available": True})
    rows.append({"name": "tiktoken:", "version": None, "description": "prefix: tiktoken:ENCODING or a .tiktoken "
                 "file", "available": True})
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            v = (r["version"] or "")[:12]
            state = "" if r["available"] else "  (not installed)"
            print(f"{r['name']:<15} {v:<12}  {safe(r['description'])}{state}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """Every catalog model: what `--model ID` sets (docs/models.md)."""
    entries = models()
    if args.json:
        print_json([e.to_json() for e in entries])
        return 0
    width = max(len(e.id) for e in entries)
    print(f"{'model':<{width}}  {'family':<11} {'template':<14} {'tokenizer':<14} {'window':>9}  "
          f"{'KV B/token':>10}  {'vision':<9} notes")
    for e in entries:
        kv = f"{e.kv.bytes_per_token:,}" if e.kv is not None else "-"
        notes = ", ".join(x for x in ("hosted" if e.hosted else "", "estimate" if e.estimate else "") if x)
        print(f"{e.id:<{width}}  {e.family:<11} {e.template:<14} {e.tokenizer or '(fallback)':<14} "
              f"{e.context_window:>9,}  {kv:>10}  {e.vision or '-':<9} {notes}".rstrip())
    print("estimate: the template or tokenizer only approximates the model's own (`workbench models --json` says "
          "why); hosted: an API model, no public KV shape")
    return 0
