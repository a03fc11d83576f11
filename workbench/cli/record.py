"""`workbench record --upstream URL [--port N] [--log FILE]`: a recording reverse proxy in front of
a provider or engine (workbench/capture/record.py, docs/capture.md). Point the app's SDK at it
(base_url http://127.0.0.1:PORT/v1) and each call to Chat Completions, Responses or Anthropic
Messages goes on upstream unchanged and appends one line to the request log."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..errors import WorkbenchError
from ..redact import redact_url
from . import options


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="a recording proxy: what an app sends to its provider, logged as request-log "
                                      "lines (Chat Completions, Responses, Anthropic Messages)")
    p.add_argument("--upstream", required=True,
                   help="where calls go, e.g. https://api.openai.com or http://127.0.0.1:8000 (a path after the "
                        "host is a prefix: the client's path is appended)")
    p.add_argument("--log", default="requests.jsonl", help="the request log to append to (default requests.jsonl)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080; 0: a free one)")
    p.add_argument("--provider", default=None,
                   help="the `provider` field of each line (default: from the upstream's host, e.g. openai)")
    p.add_argument("--max-body-mb", type=float, default=32.0, help="largest request body, in MiB (default 32)")
    p.add_argument("--connect-timeout", type=float, default=10.0,
                   help="seconds to connect to the upstream; then 502 (default 10)")
    p.add_argument("--read-timeout", type=float, default=600.0,
                   help="seconds the upstream may stay silent within a reply; then 504, or the reply cut "
                        "(default 600)")
    p.add_argument("--body-timeout", type=float, default=60.0,
                   help="seconds for a client to send its whole request body; then 408 (default 60)")
    p.add_argument("--max-inflight", type=int, default=256, help="calls in progress; past it, 503 (default 256)")
    p.add_argument("--rotate-mb", type=float, default=256.0,
                   help="start a new log file past this size, in MiB; the old one becomes FILE.1 (default 256)")
    p.add_argument("--backups", type=int, default=5, help="rotated files kept: FILE.1 ... FILE.N (default 5)")
    p.set_defaults(func=cmd_record, serves=True)


def cmd_record(args: argparse.Namespace) -> int:
    options.port(args.port)
    for flag, value in (("--connect-timeout", args.connect_timeout), ("--read-timeout", args.read_timeout),
                        ("--body-timeout", args.body_timeout)):
        if not 0 < value < float("inf"):      # also refuses nan
            raise WorkbenchError(f"{flag} must be a positive number of seconds, got {value}")
    options.at_least(args.max_inflight, 1, "--max-inflight")
    options.at_least(args.backups, 0, "--backups")
    from .._optional import require

    require("aiohttp", "workbench record")            # the capture extra: an install hint if missing
    from ..capture.record import RecordConfig, serve

    config = RecordConfig(upstream=args.upstream, log=args.log, host=args.host, port=args.port,
                          provider=args.provider,
                          max_body_bytes=options.mebibytes(args.max_body_mb, "--max-body-mb", zero=False),
                          connect_timeout=args.connect_timeout, read_timeout=args.read_timeout,
                          body_timeout=args.body_timeout,
                          max_inflight=args.max_inflight,
                          rotate_bytes=options.mebibytes(args.rotate_mb, "--rotate-mb", zero=False),
                          backups=args.backups)

    def ready(url: str) -> None:
        print(f"recording on {url} -> {redact_url(config.upstream)}, log {config.log}", file=sys.stderr, flush=True)

    asyncio.run(serve(config, ready))
    return 0
