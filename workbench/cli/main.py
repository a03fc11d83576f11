"""Entry point: parse, dispatch, and turn every error into one `error:` line and exit 2."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Sequence

from ..errors import WorkbenchError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{message} (see `{self.prog} --help`)")


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    from . import analyze, app, export, kv, listing, metrics, prefill, render, semantic, simulate
    p = _Parser(prog="workbench", description="See how chat messages become a prompt, tokens and KV cache.")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    render.add_parsers(sub)
    listing.add_parsers(sub)
    analyze.add_parsers(sub)
    simulate.add_parsers(sub)
    prefill.add_parsers(sub)
    kv.add_parsers(sub)
    export.add_parsers(sub)
    semantic.add_parsers(sub)
    metrics.add_parsers(sub)
    app.add_parsers(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list or ["demo"])
        if not getattr(args, "func", None):
            parser.print_help()
            return 0
        return int(args.func(args) or 0)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except WorkbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the CLI contract: one line, exit 2, no traceback
        if os.environ.get("WORKBENCH_DEBUG"):
            traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(f"error: unexpected {type(exc).__name__}: {first} (set WORKBENCH_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
