"""`workbench app [SESSION] [--sessions DIR] [--export-dir DIR] [--follow LOG]`: serve the workbench as a
local web page (Panel) until interrupted. The page opens, saves and uploads sessions in DIR only and
exports bundles to the export folder only (SPEC 7.5; workbench/ui/files.py says how). `--follow LOG`
lists the request log's conversations in the session picker and shows each call logged from then on
as a new turn (workbench/ui/follow.py); the log is only read, never written.

`run(argv)` (also `python -m workbench.cli.app [SESSION] ...`) runs the same command without
main.py's other commands, through the same runner: every error is one `error:` line, exit 2, and
Ctrl-C or SIGTERM stops the server (`stopped`, exit 0).
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Sequence

from ..errors import LogFileError, WorkbenchError
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
    p.add_argument("--follow", metavar="LOG", default=None,
                   help="a request log (JSON lines, SPEC 7.1) to follow live: its conversations in the session "
                        "picker, newest first, each new call a new turn within a second; read only (it may not "
                        "exist yet; a rotated LOG is followed to the new file)")
    p.set_defaults(func=cmd_app, serves=True)


def cmd_app(args: argparse.Namespace) -> int:
    options.port(args.port)
    options.folder(args.sessions, "--sessions")
    options.folder(args.export_dir, "--export-dir")
    if args.model is not None:
        from ..catalog import lookup
        args.model = lookup(args.model).id    # an unknown name: one error line naming the closest
    if args.follow is not None:
        if args.session is not None:
            raise WorkbenchError("give a SESSION or --follow LOG, not both",
                                 hint="with --follow the picker lists the log's conversations")
        follow_target(args.follow)
    from ..ui.app import serve  # Panel is an optional extra: imported only here, with an install hint

    serve(args.session, host=args.host, port=args.port, show=not args.no_show, sessions=args.sessions,
          export_dir=args.export_dir, model=args.model, follow=args.follow)
    return 0


def follow_target(log: str) -> None:
    """`--follow LOG`: a plain file, or a name not taken yet in an existing folder (the recorder
    makes it later). Anything else fails now, with one error line, not in the page."""
    try:
        st = os.stat(log)
    except FileNotFoundError:
        folder = os.path.dirname(os.path.abspath(log))
        if not os.path.isdir(folder):
            raise LogFileError(f"--follow: {log}: no such file, and its folder does not exist",
                               hint="name a log file in an existing folder") from None
        return
    except OSError as exc:
        raise LogFileError(f"--follow: cannot read {log}: {exc.strerror}", hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise LogFileError(f"--follow: {log} is not a plain file", hint="name a JSON-lines request log")
    if not os.access(log, os.R_OK):
        raise LogFileError(f"--follow: cannot read {log}: permission denied", hint="check the permissions")


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="workbench")
    add_parsers(parser.add_subparsers(dest="command", parser_class=Parser))
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """`workbench app ARGV...` on its own."""
    return run_command(_parser, ["app", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(run())
