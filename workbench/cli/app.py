"""`workbench app [SESSION] [--sessions DIR] [--export-dir DIR]`: serve the workbench as a local web
page (Panel) until interrupted. The page opens, saves and uploads sessions in DIR only and exports
bundles to the export folder only (SPEC 7.5; workbench/ui/files.py says how).

`run(argv)` (also `python -m workbench.cli.app [SESSION] ...`) runs the same command without
main.py's other commands, through the same runner: every error is one `error:` line, exit 2, and
Ctrl-C or SIGTERM stops the server (`stopped`, exit 0).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import options
from .runner import Parser
from .runner import run as run_command


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("app", help="serve the workbench as a local web page (session picker, live token view)")
    p.add_argument("session", nargs="?", default=None,
                   help="session file to open (default: sample_sessions/support_chat.json)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    p.add_argument("--no-show", action="store_true", help="do not open a browser")
    p.add_argument("--sessions", metavar="DIR", default=None,
                   help="the only folder the page may open, save and upload sessions in "
                        "(default: WORKBENCH_HOME/sessions; made if missing)")
    p.add_argument("--export-dir", metavar="DIR", default=None,
                   help="the only folder the page may export bundles to (default: exports/ in the sessions folder)")
    p.add_argument("--model", default=None,
                   help="a catalog model to open with (`workbench models` lists them): template, tokenizer, window, "
                        "KV shape and image rule; the page's pickers still override it")
    p.set_defaults(func=cmd_app, serves=True)


def cmd_app(args: argparse.Namespace) -> int:
    options.port(args.port)
    options.folder(args.sessions, "--sessions")
    options.folder(args.export_dir, "--export-dir")
    if args.model is not None:
        from ..catalog import lookup
        args.model = lookup(args.model).id    # an unknown name: one error line naming the closest
    from ..ui.app import serve  # Panel is an optional extra: imported only here, with an install hint

    serve(args.session, host=args.host, port=args.port, show=not args.no_show, sessions=args.sessions,
          export_dir=args.export_dir, model=args.model)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="workbench")
    add_parsers(parser.add_subparsers(dest="command", parser_class=Parser))
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """`workbench app ARGV...` on its own."""
    return run_command(_parser, ["app", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(run())
