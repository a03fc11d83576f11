"""Entry point: every command's parser in one `workbench` parser, run through the one error
wrapper (runner.py: one `error:` line and exit 2 for every error)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .runner import Parser, run


def build_parser() -> argparse.ArgumentParser:
    from . import (
        analyze,
        app,
        export,
        generate,
        importing,
        kv,
        listing,
        metrics,
        prefill,
        record,
        render,
        semantic,
        simulate,
    )
    p = Parser(prog="workbench", description="See how chat messages become a prompt, tokens and KV cache.")
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    render.add_parsers(sub)
    listing.add_parsers(sub)
    analyze.add_parsers(sub)
    simulate.add_parsers(sub)
    prefill.add_parsers(sub)
    generate.add_parsers(sub)
    kv.add_parsers(sub)
    export.add_parsers(sub)
    semantic.add_parsers(sub)
    metrics.add_parsers(sub)
    app.add_parsers(sub)
    importing.add_parsers(sub)
    record.add_parsers(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run(build_parser, args or ["demo"])


if __name__ == "__main__":
    sys.exit(main())
