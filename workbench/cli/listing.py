"""`workbench templates` and `workbench tokenizers`: what is available."""

from __future__ import annotations

import argparse

from ..errors import WorkbenchError
from ..templates import get_template, shipped_names
from ..tokenizers import ENTRIES, get_tokenizer
from .output import print_json


def add_parsers(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("templates", help="list the shipped chat templates")
    t.add_argument("--json", action="store_true", help="print JSON")
    t.set_defaults(func=cmd_templates)
    k = sub.add_parser("tokenizers", help="list the named tokenizers (and hf: / tiktoken: prefixes)")
    k.add_argument("--json", action="store_true", help="print JSON")
    k.set_defaults(func=cmd_tokenizers)


def cmd_templates(args: argparse.Namespace) -> int:
    rows = [get_template(n).info() for n in shipped_names()]
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            print(f"{r['name']:<15} {r['version'][:12]}  {r['tokenizer'] or '-':<15} {r['description']}")
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
            print(f"{r['name']:<15} {v:<12}  {r['description']}{state}")
    return 0
