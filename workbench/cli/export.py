"""`workbench export` writes a bundle that reproduces the same token ids in production, and verifies
it at once; `workbench verify` re-assembles a bundle's goldens. Both print the verify report (with
--json, inside one JSON object) and exit 1 when it finds drift, 0 when the ids are identical; an
error (a bundle that cannot be written or loaded) is one `error:` line and exit 2."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..sessions import load_session
from . import options
from .options import build_assembler, common_options
from .output import print_json, safe

if TYPE_CHECKING:
    from ..export.verify import VerifyReport


def add_parsers(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("export", help="write a bundle (config, template, goldens) that production loads and verifies")
    e.add_argument("session", nargs="+", help="session files whose ids become the goldens")
    e.add_argument("-o", "--out", required=True, metavar="DIR", help="the bundle folder to write")
    e.add_argument("--turns", choices=("all", "last"), default="all", help="which turns get golden ids")
    e.add_argument("--redis-env", default="WORKBENCH_REDIS_URL",
                   help="the environment variable production reads the Redis URL from")
    e.add_argument("--redis-required", action="store_true", help="refuse to load without that variable")
    e.add_argument("--force", action="store_true", help="replace a non-empty DIR")
    e.add_argument("--semantic-thresholds", metavar="HIGH,LOW", default=None,
                   help="the semantic cache's thresholds for production (default: the built-in pair; "
                        "calibrate with `workbench semantic eval`)")
    e.add_argument("--fix", metavar="NAME[,NAME]", default=None,
                   help="apply these one-click fixes to each session first (analyze --fix); the bundle records "
                        "them and verify applies them again")
    e.add_argument("--semantic-window", type=int, default=5, metavar="N", help="the semantic cache's window")
    common_options(e, turn=False)
    e.set_defaults(func=cmd_export)

    v = sub.add_parser("verify", help="re-assemble a bundle's goldens here: exit 1 on any drift")
    v.add_argument("bundle", help="the bundle folder")
    v.add_argument("session", nargs="*", help="session files to check too (a golden's own file: against its ids)")
    v.add_argument("--seal", metavar="SHA256", default=None,
                   help="the seal `workbench export` printed, pinned outside the folder: a bundle sealed otherwise "
                        "(edited and sealed again) is drift")
    v.add_argument("--json", action="store_true", help="print the report as one JSON object")
    v.set_defaults(func=cmd_verify)


def cmd_export(args: argparse.Namespace) -> int:
    from ..export.bundle import export_bundle
    from ..export.verify import verify
    from ..semantic.cache import settings

    options.at_least(args.semantic_window, 0, "--semantic-window")
    th = options.thresholds(args.semantic_thresholds, "--semantic-thresholds")   # None: the embedder's defaults
    files = [load_session(p) for p in args.session]
    asm, prepare = build_assembler(files[0], args, cache=None)
    sessions = [(Path(p).name, f.turns.map(prepare)) for p, f in zip(args.session, files)]   # turns built on use
    fixes = None
    if args.fix is not None:
        from ..analysis.fixes import apply_fixes, parse_names
        from ..sessions import parse_session
        names = parse_names(args.fix)
        fixes = {Path(p).name: apply_fixes(f.raw, names, asm) for p, f in zip(args.session, files)}
        sessions = [(n, parse_session(a.session).turns.map(prepare)) for n, a in fixes.items()]
    out = export_bundle(asm, args.out, sessions, turns=args.turns, redis_env=args.redis_env,
                        redis_required=args.redis_required, overwrite=args.force,
                        semantic=settings(th, window=args.semantic_window), fixes=fixes)
    report = verify(out)
    if args.json:
        print_json({"bundle": str(out), "verify": report.to_json()})
    else:
        print(f"wrote {safe(out)}: template {safe(asm.template.name)} ({asm.template.version[:12]}), tokenizer "
              f"{safe(asm.tokenizer.name)} ({asm.tokenizer.version[:12]}), {len(sessions)} golden session(s); "
              f"verify: {'ok' if report.ok else 'DRIFT'}")
        if not report.ok:   # written, but this process does not assemble what it wrote: say where
            _print_report(report)
        print(f"seal {report.seal} (pin it: workbench verify DIR --seal SEAL, load_bundle(DIR, seal=SEAL))")
    return 0 if report.ok else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from ..export.verify import verify

    report = verify(args.bundle, args.session, seal=args.seal)
    if args.json:
        print_json(report.to_json())
    else:
        _print_report(report)
        print(_verdict(report))
    return 0 if report.ok else 1


def _verdict(report: VerifyReport) -> str:
    if report.ok:
        return "ok: identical ids"
    if not report.drift and report.not_assembled is None and report.compared == 0:
        return "not verified: the bundle holds no exported ids to compare (see above)"
    return "drift: this instance does not assemble what was exported"


def _print_report(report: VerifyReport) -> None:
    # Session names, file names and messages come from the bundle, which may be anyone's.
    for m in report.mismatches:
        print(safe(f"MISMATCH {m['file']} ({m['field']}): {m['message']}"))
    for d in report.drift:
        print(safe(f"DRIFT {d.describe()}"))
    if report.not_assembled:
        print(f"not assembled: {safe(report.not_assembled)}")
    for c in report.checked:
        print(f"checked {safe(c['session'])}: {c['turns']} turn(s), {c['tokens']} tokens"
              + ("" if c.get("golden", True) else " (no golden: assembled only)"))
