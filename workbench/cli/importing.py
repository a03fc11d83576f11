"""`workbench import FILE... --from SOURCE [-o LOG] [--strict] [--json]`: traces and gateway logs
from other tools into request-log lines (docs/importing.md).

The lines go to LOG (written whole or not at all) or to stdout; the summary (records read, lines
written, what was skipped and why) goes to stderr, or as one JSON object to stdout with --json
(then -o is required: stdout carries the summary)."""

from __future__ import annotations

import argparse
import sys

from ..capture.importers import SOURCES, import_files, write_log
from ..errors import LogFileError
from ..files import check_user_file
from .output import print_json, safe


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("import", help="convert traces (OTLP JSON: OpenTelemetry GenAI, OpenInference), Langfuse "
                                      "observations or LiteLLM spend logs into request-log lines")
    p.add_argument("files", nargs="+", metavar="FILE", help="exported file(s): JSON or JSON lines")
    p.add_argument("--from", dest="source", required=True, choices=SOURCES, help="what wrote the files")
    p.add_argument("-o", "--output", metavar="LOG", help="write the log here (whole or not at all); default: stdout")
    p.add_argument("--strict", action="store_true", help="stop at the first record that cannot be imported")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout (needs -o)")
    p.set_defaults(func=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    if args.json and not args.output:
        raise LogFileError("--json prints the summary on stdout, where the lines would go",
                           hint="name the log with -o LOG")
    for path in args.files:   # a FIFO or a device named here is an error now, not a read that never ends
        check_user_file(path, cap=None, what="file to import", error=LogFileError)
    result = import_files(args.files, args.source, strict=args.strict)
    written = write_log(result.calls, args.output)
    if args.json:
        print_json(result.to_json(written=written, output=args.output))
        return 0
    err = sys.stderr
    noun = {"langfuse": "observation(s)", "litellm": "row(s)"}.get(result.source, "span(s) and event(s)")
    # The summary quotes the files (names, ids, values): each shown as data, never as terminal controls.
    print(f"{result.records} {noun} read from {len(result.files)} file(s), {written} line(s) written"
          + (f" to {safe(args.output)}" if args.output else ""), file=err)
    if result.bad:
        print(f"{len(result.bad)} skipped:", file=err)
        for p in result.bad[:20]:
            print(f"  {safe(p)}", file=err)
        if len(result.bad) > 20:
            print(f"  ... and {len(result.bad) - 20} more (--json lists 100)", file=err)
    for reason, n in sorted(result.ignored.items()):
        print(f"{n} ignored: {safe(reason)}", file=err)
    if result.warnings:
        print(f"{len(result.warnings)} warning(s):", file=err)
        for p in result.warnings[:20]:
            print(f"  {safe(p)}", file=err)
    return 0
