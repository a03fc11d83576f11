"""The one place every command runs through: parse, dispatch, and turn whatever goes wrong into
one `error:` line on stderr and exit status 2, never a traceback (SPEC 7.2).

- a usage mistake (argparse), a WorkbenchError: `error: <message>`;
- Ctrl-C in a command that works and ends (render, prefill, ...): `error: interrupted`;
- a bug: `error: unexpected <type>: <first line>`; WORKBENCH_DEBUG=1 prints the traceback first;
- stdout closed early (`workbench render ... | head`): exit 0, nothing more to say.

A command that serves until stopped (`app`, `serve-engine`: `set_defaults(serves=True)`) is ended
by Ctrl-C or `kill` (SIGTERM) on purpose: both stop it the same way, it says `stopped` on stderr
and exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence

from ..errors import WorkbenchError
from .output import safe


class UsageError(Exception):
    """A command line argparse refused; carries argparse's own message."""


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so the runner words the error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def run(build_parser: Callable[[], argparse.ArgumentParser], argv: Sequence[str]) -> int:
    """Build the parser, parse `argv` and run the command it names; the exit status. The parser is
    built inside the wrapper too: a command module that fails to import is one `error:` line."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 0
        if getattr(args, "serves", False):
            return _serve(args)
        return int(args.func(args) or 0)
    except (UsageError, WorkbenchError) as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        return _error("interrupted")
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the CLI contract: one line, exit 2, no traceback
        if os.environ.get("WORKBENCH_DEBUG"):
            traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else ""
        return _error(f"unexpected {type(exc).__name__}: {first} (set WORKBENCH_DEBUG=1 for the traceback)")


def _error(message: str) -> int:
    # A message may quote the data (a file name, a field's value): one line, nothing a terminal acts on.
    print(f"error: {safe(message)}", file=sys.stderr)
    return 2


def _serve(args: argparse.Namespace) -> int:
    """Run a serving command until Ctrl-C or SIGTERM; either is its normal end, and so is the
    command returning (it returns only once stopped)."""
    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    # signal.signal works on the main thread only (a test may call main() from another)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, interrupt) if main_thread else None
    try:
        code = int(args.func(args) or 0)
    except KeyboardInterrupt:
        code = 0
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    # Here either way: Panel catches Ctrl-C itself and returns from its loop, where serve-engine's
    # asyncio loop raises KeyboardInterrupt; a server that could not start raised above instead.
    print("stopped", file=sys.stderr, flush=True)
    return code
