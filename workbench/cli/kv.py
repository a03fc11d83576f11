"""`workbench kv SESSION`: the KV cache a session needs under a model shape, no model run: bytes per
token, and per turn the blocks of the paged view, those shared with what the engine already holds
(earlier prompts and the replies generated after them), and the KV held. The KV tab computes its
rows from the same `paged_view` over the same turns (ui/kv_panel.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..analysis.turn_prompts import turn_prompts
from ..catalog import ModelEntry
from ..engine.kv import (
    BLOCK_SIZE,
    HELD_NOTE,
    KV_CONFIGS,
    KVConfig,
    format_bytes,
    from_catalog,
    kv_config,
    no_share_reason,
    paged_view,
)
from ..files import check_user_file
from ..sessions import load_session
from . import options
from .options import announce, build_assembler, catalog_entry, common_options, model_json
from .output import print_json, safe

DEFAULT_CONFIG = "Llama-3-8B"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kv", help="KV cache size of a session under a model shape: bytes, blocks, sharing")
    p.add_argument("session", help="session file (JSON: a conversation or a log of requests)")
    p.add_argument("--config", default=None,
                   help=f"{' | '.join(KV_CONFIGS)}, a catalog model, or a model folder / config.json (default: the "
                        f"--model's KV shape, else {DEFAULT_CONFIG})")
    p.add_argument("--dtype", default=None, help="bytes per value from this dtype: bf16 (default), fp32, fp8 …")
    p.add_argument("--block-size", type=int, default=BLOCK_SIZE, help=f"tokens per block (default {BLOCK_SIZE})")
    common_options(p, turn=False)
    p.set_defaults(func=cmd_kv)


def cmd_kv(args: argparse.Namespace) -> int:
    options.at_least(args.block_size, 1, "--block-size")
    entry = catalog_entry(args)
    cfg = _config(args.config, entry)
    if args.dtype:
        cfg = cfg.with_dtype(args.dtype)
    session = load_session(args.session)
    asm, prepare = build_assembler(session, args)
    announce(asm, entry)
    sess = asm.session()
    results = [sess.assemble(prepare(t)) for t in session.turns]
    # With the assembler each turn carries the reply generated after it: what the engine holds
    # after the turn, whose blocks the next prompt shares (as the vLLM simulation counts them).
    turns = paged_view(turn_prompts(results, "auto", asm), cfg, args.block_size)
    out = {"config": cfg.to_json(), "block_size": args.block_size, "model": model_json(entry),
           "kv_note": entry.kv_note if entry is not None and not args.config else None,
           "held_note": HELD_NOTE, "turns": [t.to_json() for t in turns]}
    if args.json:
        print_json(out)
        return 0
    o = sys.stdout
    o.write(f"{safe(session.title)}: {safe(cfg.name)}, {cfg.layers} layers × {cfg.kv_heads} KV heads × "
            f"{cfg.head_dim} × 2 × {cfg.dtype_bytes} bytes = {cfg.bytes_per_token:,} bytes per token; blocks of "
            f"{args.block_size}\n")
    o.write(f"{'turn':>4} {'tokens':>8} {'blocks':>7} {'shared':>7} {'new':>6} {'KV':>11} {'held':>11}"
            f"  ({HELD_NOTE})\n")
    for t in turns:
        why = no_share_reason(t, args.block_size)
        o.write(f"{t.turn:>4} {t.tokens:>8} {t.blocks:>7} {t.shared_blocks:>7} {t.new_blocks:>6} "
                f"{format_bytes(t.kv_bytes):>11} {format_bytes(t.held_bytes):>11}"
                + (f"  shared 0: {safe(why)}\n" if why else "\n"))
    if out["kv_note"]:
        o.write(f"note: {safe(out['kv_note'])}\n")
    return 0


def _config(config: str | None, entry: ModelEntry | None) -> KVConfig:
    """`--config` when given; else the `--model`'s KV shape; else the default."""
    if config:
        # A model's config.json, read by engine/kv.py: checked first as every file a user names is.
        p = Path(config)
        target = p / "config.json" if p.is_dir() else p
        if os.path.lexists(target):
            check_user_file(target, cap=options.MAX_SETTINGS_BYTES, what="model config")
        return kv_config(config)
    if entry is not None:
        return from_catalog(entry)
    return kv_config(DEFAULT_CONFIG)
