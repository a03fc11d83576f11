"""`workbench prefill SESSION`: run every turn's prompt through a real forward pass (a synthetic
architecture, a model folder or a GGUF file), reusing the KV cache of earlier turns; per turn the
tokens reused and prefilled, the prefill time (and, with --baseline, the time without reuse
measured in the same run) and the KV bytes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..catalog import find, models
from ..engine.server_limits import ServerLimits
from ..errors import EngineError
from ..sessions import load_session
from . import options
from .options import announce, build_assembler, common_options, model_json
from .output import print_json, safe


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prefill", help="prefill every turn on a real model (CPU or CUDA) with KV-cache reuse")
    p.add_argument("session", help="session file (JSON: a conversation or a log of requests)")
    p.add_argument("--model", default="tiny",
                   help="a synthetic architecture (tiny, Llama-3-8B, Qwen2.5-7B, Mistral-7B, Gemma-3-1B: random "
                        "weights), a catalog model whose architecture the engine has (`workbench models`: its "
                        "synthetic architecture, with the model's template, tokenizer and window), gemma3-270m (a "
                        "real base model, offline package), a model folder or a .gguf file (default tiny)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda[:N]")
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16 (default bf16 on CUDA, fp32 on CPU)")
    p.add_argument("--baseline", action="store_true", help="also time each prompt without reuse, in the same run")
    p.add_argument("--kv-cap-mb", type=float, default=2048.0, help="KV cache held across turns, in MiB (LRU)")
    p.add_argument("--top-k", type=int, default=0, help="show the k most likely next tokens after the last turn")
    p.add_argument("--remote", metavar="URL", default=None,
                   help="send the ids to an OpenAI-compatible server (vLLM, SGLang, workbench serve-engine) "
                        "instead: its cached_tokens per turn, and its tokenization compared with ours")
    p.add_argument("--remote-model", default=None, help="the server's model name (default: its first)")
    common_options(p, turn=False, model=False)
    p.set_defaults(func=cmd_prefill)

    s = sub.add_parser("serve-engine", help="serve the local engine as an OpenAI- and Anthropic-compatible endpoint "
                                            "(/v1/chat/completions, /v1/responses, /v1/messages, /v1/completions "
                                            "with cached_tokens, /tokenize)")
    s.add_argument("--model", default="tiny", help="as for prefill, catalog models included (default tiny)")
    s.add_argument("--template", default=None,
                   help="the chat template the chat routes render with, and whose tokenizer to use (shipped name, "
                        ".jinja file or HF folder; default: the model's, else qwen2.5)")
    s.add_argument("--tokenizer", default=None, help="name, hf:DIR, tiktoken:NAME (default: the model's, else the "
                                                     "template's)")
    s.add_argument("--device", default="auto")
    s.add_argument("--dtype", default=None)
    s.add_argument("--kv-cap-mb", type=float, default=2048.0)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000)
    # Limits that hold untrusted clients (engine/server_limits.py; each bounds one way to stall the server)
    s.add_argument("--workers", type=int, default=4, help="handler threads, a fixed pool (default 4)")
    s.add_argument("--queue", type=int, default=32,
                   help="complete requests that may wait for a worker; past it, 503 at once (default 32)")
    s.add_argument("--max-connections", type=int, default=0,
                   help="open connections, stalled ones included; past it, 503 (default 512, or under the "
                        "file limit)")
    s.add_argument("--max-body-mb", type=float, default=4.0, help="largest request body, in MiB (default 4)")
    s.add_argument("--read-timeout", type=float, default=10.0,
                   help="seconds to wait for the next header line or piece of body (default 10)")
    s.add_argument("--request-deadline", type=float, default=30.0,
                   help="seconds for a whole request to arrive (default 30)")
    s.add_argument("--engine-wait", type=float, default=30.0,
                   help="seconds a request may wait for its turn on the engine; then 503 (default 30)")
    s.add_argument("--prefill-chunk", type=int, default=512,
                   help="prompt tokens prefilled per turn on the engine: a long prompt lets others in "
                        "between its chunks (default 512)")
    s.add_argument("--max-prompt-tokens", type=int, default=0,
                   help="longest prompt accepted, in tokens (default: the model's window)")
    s.add_argument("--max-new-tokens", type=int, default=64,
                   help="most tokens a reply may have: /v1/completions refuses a larger max_tokens, the chat routes "
                        "cap it (default 64)")
    s.set_defaults(func=cmd_serve_engine, serves=True)


def cmd_prefill(args: argparse.Namespace) -> int:
    from ..engine.engine import Engine

    kv_cap = options.mebibytes(args.kv_cap_mb, "--kv-cap-mb", zero=True)
    options.at_least(args.top_k, 0, "--top-k")
    from ..engine.models import REAL_TEMPLATES, model_tokenizer

    session = load_session(args.session)
    if args.remote:
        args.catalog_model = find(args.model)   # a catalog model sets the template and tokenizer the server uses
        return _remote(args, session)
    name = engine_model(args)
    # A real model counts with its own vocabulary, and its family's template, unless told otherwise.
    if args.tokenizer is None:
        args.tokenizer = model_tokenizer(name)
    if args.template is None:
        args.template = REAL_TEMPLATES.get(name)
    asm, prepare = build_assembler(session, args)
    announce(asm, getattr(args, "catalog_model", None))
    tok = asm.tokenizer
    engine = Engine.load(name, vocab_size=tok.vocab_size, device=args.device, dtype=args.dtype,
                         kv_cap_bytes=kv_cap)
    sess = asm.session()
    turns = []
    n = len(session.turns)
    for k, t in enumerate(session.turns, 1):
        result = sess.assemble(prepare(t))
        r = engine.prefill(result.token_ids, keys=result.content_ids(), baseline=args.baseline,
                           top_k=args.top_k if k == n else 0,
                           tokenizer=tok)
        turns.append({"turn": k, **r.to_json()})
        if not args.json:
            print(f"turn {k}/{n}: {r.tokens} tokens, {r.reused_tokens} reused, {r.prefill_ms:.0f} ms",
                  file=sys.stderr, flush=True)
    out = {"model": engine.m.to_json(), "turns": turns, "processed_tokens": engine.processed_tokens,
           "catalog_model": model_json(getattr(args, "catalog_model", None))}
    if args.json:
        print_json(out)
        return 0
    o = sys.stdout
    m = engine.m
    o.write(f"{safe(session.title)}: {n} turns · model {safe(m.label)} · {m.device} {m.dtype} · "
            f"KV {m.kv.bytes_per_token:,} bytes/token\n")
    o.write(f"{'turn':>4} {'tokens':>8} {'reused':>8} {'prefill':>8} {'ms':>9}" +
            (f" {'no reuse ms':>12}" if args.baseline else "") + f" {'KV MiB':>8}\n")
    for t in turns:
        o.write(f"{t['turn']:>4} {t['tokens']:>8} {t['reused_tokens']:>8} {t['prefilled_tokens']:>8} "
                f"{t['prefill_ms']:>9.1f}" + (f" {t['baseline_ms']:>12.1f}" if args.baseline else "") +
                f" {t['kv_bytes'] / 2**20:>8.2f}\n")
    if turns and turns[-1].get("top"):
        words = ", ".join(f"{x['text']!r} {x['prob']:.2%}" for x in turns[-1]["top"])
        about = "words meaningless: synthetic" if m.source == "synthetic" else m.label
        o.write(safe(f"next token after the last turn ({about}): {words}") + "\n")
    return 0


def engine_model(args: argparse.Namespace) -> str:
    """What the engine loads for `--model`: a synthetic architecture, a real model, a folder or a
    file as given; a catalog model as the engine's synthetic architecture of its shape (and the
    model is noted in `args.catalog_model`, so it sets template, tokenizer and window). A catalog
    model the engine has no architecture for is an error naming those it has."""
    from ..engine.models import REAL, SYNTHETIC
    name = args.model
    if name in SYNTHETIC or name in REAL or Path(name).exists():
        return str(name)
    entry = find(name)
    if entry is None:
        return str(name)   # the engine says what is wrong with it
    args.catalog_model = entry
    if entry.synthetic is None:
        known = ", ".join(m.id for m in models() if m.synthetic)
        why = "a hosted model, whose architecture is not public" if entry.hosted else \
            f"the catalog holds only its KV shape; `workbench kv SESSION --model {entry.id}` sizes its cache"
        raise EngineError(f"the engine has no architecture for {entry.id}: {why}",
                          hint=f"prefill a catalog model it has ({known}), a synthetic architecture "
                               f"({', '.join(SYNTHETIC)}), or the model's own folder or .gguf file")
    return entry.synthetic


def _remote(args: argparse.Namespace, session: object) -> int:
    from ..engine.remote import FLAGS_HINT, RemoteEngine

    asm, prepare = build_assembler(session, args)
    announce(asm, getattr(args, "catalog_model", None))
    remote = RemoteEngine(args.remote, model=args.remote_model)
    sess = asm.session()
    turns = []
    for k, t in enumerate(session.turns, 1):
        result = sess.assemble(prepare(t))
        r = remote.prefill(result.token_ids)
        parity = remote.parity(result)
        turns.append({"turn": k, **r.to_json(), "reused_tokens": r.cached_tokens,
                      "prefilled_tokens": None if r.cached_tokens is None else r.tokens - r.cached_tokens,
                      "parity": parity.to_json()})
    out = {"model": {"name": remote.model, "source": "remote", "url": remote.base}, "turns": turns,
           "cached_tokens_reported": all(t["cached_tokens"] is not None for t in turns)}
    if args.json:
        print_json(out)
        return 0
    o = sys.stdout
    # The server's model name and its tokenization notes come from the server: shown as data.
    o.write(f"{safe(session.title)}: {len(turns)} turns · remote {safe(remote.model)} at {safe(remote.base)}\n")
    o.write(f"{'turn':>4} {'tokens':>8} {'server':>8} {'cached':>8} {'ms':>9}  tokenization\n")
    for t in turns:
        p = t["parity"]
        o.write(f"{t['turn']:>4} {t['tokens']:>8} {t['prompt_tokens']:>8} "
                f"{'-' if t['cached_tokens'] is None else t['cached_tokens']:>8} {t['ms']:>9.1f}  "
                f"{'same ids' if p['equal'] else safe('DIFFERS at ' + p['detail'] + ' (' + str(p['segment']) + ')')}\n")
    if not out["cached_tokens_reported"]:
        o.write(f"the server did not report cached tokens; start it with {FLAGS_HINT}\n")
    return 0


def cmd_serve_engine(args: argparse.Namespace) -> int:
    from ..assembly import Assembler
    from ..engine.engine import Engine
    from ..engine.models import REAL_TEMPLATES, model_tokenizer
    from ..engine.server import EngineServer
    from ..templates import DEFAULT_TEMPLATE, SHIPPED, RenderLimits
    from ..truncation import TruncationPolicy

    options.port(args.port)
    kv_cap = options.mebibytes(args.kv_cap_mb, "--kv-cap-mb", zero=True)
    limits = _server_limits(args)            # checked before the model loads: a typo fails at once
    model = engine_model(args)
    entry = getattr(args, "catalog_model", None)
    # The chat routes render as `workbench render` does with the same model, template and tokenizer:
    # the catalog model's (or a real model's own vocabulary and family template), else the options.
    template = args.template or REAL_TEMPLATES.get(model) or (entry.template if entry is not None else None) \
        or DEFAULT_TEMPLATE
    tokenizer = args.tokenizer or model_tokenizer(model) or (entry.tokenizer if entry is not None else None)
    extra = {"render_limits": RenderLimits(isolate=True)} if template not in SHIPPED else {}  # unreviewed: own process
    # A server never cuts a conversation to fit: one over the window is a 400 naming the limit.
    asm = Assembler(template=template, tokenizer=tokenizer, model=entry.id if entry is not None else None,
                    cache=None, truncation=TruncationPolicy(enabled=False), **extra)
    tok = asm.tokenizer
    engine = Engine.load(model, vocab_size=tok.vocab_size, device=args.device, dtype=args.dtype,
                         kv_cap_bytes=kv_cap)
    server = EngineServer(engine, tok, host=args.host, port=args.port, limits=limits, assembler=asm,
                          names=entry.names() if entry is not None else ())
    try:
        # until Ctrl-C or SIGTERM: the runner says "stopped"
        server.serve_forever(on_ready=lambda: print(f"serving {engine.m.name} ({engine.m.label}) on "
                                                    f"{server.url}/v1", flush=True))
    finally:
        server.stop()
    return 0


def _server_limits(args: argparse.Namespace) -> ServerLimits:
    max_body = options.mebibytes(args.max_body_mb, "--max-body-mb", zero=False)
    return ServerLimits(workers=args.workers, queue=args.queue, max_connections=args.max_connections,
                        max_body_bytes=max_body, read_timeout_s=args.read_timeout,
                        request_deadline_s=args.request_deadline, engine_wait_s=args.engine_wait,
                        prefill_chunk=args.prefill_chunk, max_prompt_tokens=args.max_prompt_tokens,
                        max_new_tokens=args.max_new_tokens)
