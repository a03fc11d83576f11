"""`workbench app [SESSION] [--sessions DIR] [--export-dir DIR]`: serve the workbench as a local web
page (Panel) until interrupted. The page opens, saves and uploads sessions in DIR only and exports
bundles to the export folder only (SPEC 7.5; workbench/ui/files.py says how).

`run(argv)` (also `python -m workbench.cli.app [SESSION] ...`) runs the same command without
going through main.py's registry, with the same rule: every error is one `error:` line, exit 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Sequence

from ..errors import WorkbenchError


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
    p.set_defaults(func=cmd_app)


def cmd_app(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise WorkbenchError(f"--port must be between 0 and 65535, got {args.port}",
                             hint="0 picks a free port")
    for flag, value in (("--sessions", args.sessions), ("--export-dir", args.export_dir)):
        if value is not None and not value.strip():
            raise WorkbenchError(f"{flag} is empty", hint="give a folder, or leave the option out for the default")
    from ..ui.app import serve  # Panel is an optional extra: imported only here, with an install hint

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)  # `kill` stops the server like Ctrl-C
    try:
        serve(args.session, host=args.host, port=args.port, show=not args.no_show, sessions=args.sessions,
              export_dir=args.export_dir)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def run(argv: Sequence[str] | None = None) -> int:
    """`workbench app ARGV...` on its own: parse, serve, and turn errors into one `error:` line, exit 2."""
    from .main import _Parser, _UsageError

    parser = _Parser(prog="workbench")
    add_parsers(parser.add_subparsers(dest="command", parser_class=_Parser))
    try:
        args = parser.parse_args(["app", *(sys.argv[1:] if argv is None else argv)])
        return int(args.func(args) or 0)
    except (_UsageError, WorkbenchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run())
