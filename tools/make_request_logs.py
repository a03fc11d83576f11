"""Write synthetic production request logs (SPEC 7.1) with known prefix-cache breakers and their ground truth.

    python tools/make_request_logs.py --requests 100000 --sessions 10000 --seed 1 --out DIR

DIR/logs/requests-DAY-hostN.jsonl   one model call per line, as a serving fleet of four hosts logs them:
                                    {"conversation_id", "timestamp", "template", "client", "request"},
                                    in time order within a file, conversations interleaved and spread
                                    over hosts and days
DIR/ground_truth.json               per injected breaker: the cause code `analyze --aggregate` should
                                    report, sessions, turns, tokens not reused and share of all tokens
                                    not reused (written last: its presence means the folder is complete)
DIR/ground_truth_turns.jsonl        every turn's figures and the breaker it is charged to
DIR/generation.json                 how long generating took (the only file that differs between runs)

With --usage providers (issue 32), each line also carries "provider" (openai for the OpenAI-shaped
clients, anthropic for the others), "model" and "response": the provider's response object with its
`usage` exactly in that provider's shape, computed from the presets' documented cache rules
(workbench/analysis/provider_params.json) with known differences injected (provider misses, reports
over the rules, Anthropic breakpoints removed or moved; TTL lapses come from the schedule's gaps);
Anthropic requests then carry cache_control marks. The class of every call is kept apart:
DIR/ground_truth_usage.jsonl           one line per call: conversation_id, timestamp, provider, class,
                                    injected, cause, rules and reported {cached, written}
and ground_truth.json gains "usage": calls per class (tools/request_logs/usage.py). Without the
option the files are byte for byte what they were.

The same arguments write the same bytes (apart from generation.json). Bad arguments get one `error:`
line and exit status 2. The story of the log (clients, dates, breakers) is in tools/request_logs/.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Run as a script from anywhere: the checkout's workbench package wins over an installed one.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from request_logs.clients import Client, make_clients  # noqa: E402
from request_logs.sessions import (  # noqa: E402
    BREAKERS,
    Figures,
    Line,
    Session,
    UsageRun,
    assign,
    build,
    schedule,
)
from request_logs.timeline import (  # noqa: E402
    HOSTS,
    MAX_PER_SESSION,
    Plan,
    day,
    iso,
    session_sizes,
    start_times,
)
from request_logs.truth import Assemblers, SessionTruth  # noqa: E402
from request_logs.usage import load_presets  # noqa: E402

MAX_REQUESTS = 10_000_000


class ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ArgumentError(message)


def parse(argv: list[str] | None) -> tuple[Plan, Path, str | None]:
    ap = _Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000, help="model calls in all (default 100,000)")
    ap.add_argument("--sessions", type=int, default=10_000, help="conversations (default 10,000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=int, default=7, help="days the log covers (default 7)")
    ap.add_argument("--out", type=Path, required=True, help="a new or empty folder")
    ap.add_argument("--usage", choices=["providers"], default=None,
                    help="add each call's provider response with its usage under the documented cache rules, "
                         "known differences injected, the classes in DIR/ground_truth_usage.jsonl")
    a = ap.parse_args(argv)
    if not 1 <= a.requests <= MAX_REQUESTS:
        raise ArgumentError(f"--requests must be between 1 and {MAX_REQUESTS:,}, got {a.requests}")
    if not 1 <= a.sessions <= a.requests:
        raise ArgumentError(f"--sessions must be between 1 and --requests ({a.requests}), got {a.sessions}: "
                            f"every session makes at least one request")
    if a.requests > MAX_PER_SESSION * a.sessions:
        raise ArgumentError(f"--requests {a.requests} over --sessions {a.sessions} is more than "
                            f"{MAX_PER_SESSION} requests per session; add sessions")
    if not 1 <= a.days <= 366:
        raise ArgumentError(f"--days must be between 1 and 366, got {a.days}")
    out: Path = a.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ArgumentError(f"--out {out} exists and is not an empty folder; name a new one")
    return Plan(a.requests, a.sessions, a.seed, a.days), out, a.usage


class Writer:
    """Log lines out in time order, per day and host, while sessions are still being generated: a
    session's lines wait in a heap until no session yet to come can start before them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.heap: list[tuple[int, int, int, str]] = []
        self.files: dict[str, IO[str]] = {}
        self.count = 0
        self.pending = self.peak_pending = 0     # characters of lines waiting in the heap

    def add(self, lines: list[Line]) -> None:
        for ln in lines:
            heapq.heappush(self.heap, (ln.t_ms, self.count, ln.host, ln.text))
            self.count += 1
            self.pending += len(ln.text)
        self.peak_pending = max(self.peak_pending, self.pending)

    def flush_before(self, t_ms: int | None) -> None:
        while self.heap and (t_ms is None or self.heap[0][0] < t_ms):
            t, _, host, text = heapq.heappop(self.heap)
            self.pending -= len(text)
            name = f"requests-{day(t)}-host{host + 1}.jsonl"
            f = self.files.get(name)
            if f is None:
                f = self.files[name] = open(self.folder / name, "w", encoding="utf-8", newline="\n")
            f.write(text + "\n")

    def close(self) -> None:
        self.flush_before(None)
        for f in self.files.values():
            f.close()


def sessions(plan: Plan, clients: tuple[Client, ...]) -> Iterator[tuple[Session, random.Random]]:
    """Sessions in order of their start, each with its own random stream (so one session's draws never
    shift another's)."""
    rng = random.Random(f"timeline-{plan.seed}")
    starts, sizes = start_times(plan, rng), session_sizes(plan, rng)
    weights = [c.weight for c in clients]
    for i, (start, n) in enumerate(zip(starts, sizes)):
        srng = random.Random(f"session-{plan.seed}-{i}")
        client = srng.choices(clients, weights)[0]
        cid = f"{client.name[:4]}-{srng.getrandbits(64):016x}"
        s = Session(cid, client, start, schedule(plan, srng, client, start, n))
        assign(plan, srng, s)
        yield s, srng


class Tally:
    def __init__(self) -> None:
        self.by: dict[str, dict[str, Any]] = {b: {"sessions": 0, "turns": 0, "lost_tokens": 0,
                                                  "designated_sessions": 0} for b in BREAKERS}
        self.total = self.unattributed = self.unattributed_turns = 0

    def add(self, s: Session, fig: Figures, out: IO[str]) -> None:
        if s.breaker:
            self.by[s.breaker]["designated_sessions"] += 1
        hit = False
        for k, turn, breaker in fig.turns:
            lost = turn.lost
            self.total += lost
            if lost and breaker:
                self.by[breaker]["turns"] += 1
                self.by[breaker]["lost_tokens"] += lost
                hit = True
            elif lost:
                self.unattributed += lost
                self.unattributed_turns += 1
            out.write(json.dumps({"conversation_id": s.cid, "turn": k + 1, "template": s.calls[k].template,
                                  "tokens": turn.tokens, "held_tokens": turn.held, "reused_tokens": turn.reused,
                                  "lost_tokens": lost, "breaker": breaker if lost else None},
                                 separators=(",", ":")) + "\n")
        if hit and s.breaker:
            self.by[s.breaker]["sessions"] += 1


def generate(plan: Plan, out: Path, stats: dict[str, Any], usage: str | None = None) -> dict[str, Any]:
    clients = make_clients(plan.seed)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    writer, tally, asms = Writer(out / "logs"), Tally(), Assemblers()
    run = UsageRun(load_presets()) if usage == "providers" else None
    classes: dict[str, dict[str, int]] = {}
    usage_out = open(out / "ground_truth_usage.jsonl", "w", encoding="utf-8", newline="\n") if run else None
    try:
        with open(out / "ground_truth_turns.jsonl", "w", encoding="utf-8", newline="\n") as turns_out:
            for s, srng in sessions(plan, clients):
                writer.flush_before(s.start)
                lines, fig = build(plan, srng, s, SessionTruth(asms), run)
                writer.add(lines)
                tally.add(s, fig, turns_out)
                if usage_out is not None:
                    for rec in fig.usage:
                        usage_out.write(json.dumps(rec, separators=(",", ":")) + "\n")
                        c = classes.setdefault(rec["class"], {"calls": 0, "injected": 0})
                        c["calls"] += 1
                        c["injected"] += rec["injected"]
    finally:
        if usage_out is not None:
            usage_out.close()
    writer.close()
    stats["peak_pending_lines_mib"] = round(writer.peak_pending / 2**20, 1)
    truth = truth_json(plan, clients, tally, sorted(writer.files))
    if run is not None:
        truth["usage"] = {"providers": {p: {"model": v["model"]} for p, v in run.presets.items()},
                          "classes": dict(sorted(classes.items()))}
    return truth


def truth_json(plan: Plan, clients: tuple[Client, ...], tally: Tally, files: list[str]) -> dict[str, Any]:
    total = tally.total
    breakers = [{"name": name, "code": code, "organic": organic, **tally.by[name],
                 "share": tally.by[name]["lost_tokens"] / total if total else 0.0}
                for name, (code, organic) in BREAKERS.items()]
    return {
        "requests": plan.requests, "sessions": plan.sessions, "turns": plan.requests - plan.sessions,
        "seed": plan.seed, "days": plan.days, "files": [f"logs/{f}" for f in files],
        "total_lost_tokens": total, "unattributed_lost_tokens": tally.unattributed,
        "unattributed_turns": tally.unattributed_turns, "breakers": breakers,
        "dates": {"tool_key_order_flip_from": iso(plan.flip_from),
                  "timestamp_in_system_prompt_from": iso(plan.volatile_from),
                  "template_upgrade_per_host": [iso(plan.upgrade_at(h)) for h in range(HOSTS)]},
        "clients": [{"name": c.name, "shape": c.shape, "model": c.model, "tools": len(c.tools)} for c in clients],
    }


def main(argv: list[str] | None = None) -> int:
    try:
        plan, out, usage = parse(argv)
    except ArgumentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        out.mkdir(parents=True, exist_ok=True)
        stats: dict[str, Any] = {}
        truth = generate(plan, out, stats, usage)
    except OSError as exc:
        print(f"error: cannot write under {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - t0
    (out / "generation.json").write_text(json.dumps(
        {"seconds": round(seconds, 3), "seconds_per_1k_requests": round(seconds * 1000 / plan.requests, 3),
         **stats},
        indent=1) + "\n", encoding="utf-8")
    tmp = out / "ground_truth.json.tmp"
    tmp.write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out / "ground_truth.json")
    print(f"{plan.requests:,} requests, {plan.sessions:,} sessions in {seconds:.1f} s "
          f"({seconds * 1000 / plan.requests:.2f} s per 1k requests; at most "
          f"{stats['peak_pending_lines_mib']} MiB of lines waited to be written in time order) -> {out}")
    for b in truth["breakers"]:
        print(f"  {b['name']:<28} {b['code']:<18} sessions {b['sessions']:>6,}  turns {b['turns']:>7,}  "
              f"lost {b['lost_tokens']:>12,}  share {b['share']:.2%}")
    print(f"  unattributed lost tokens: {truth['unattributed_lost_tokens']:,}")
    for name, c in truth.get("usage", {}).get("classes", {}).items():
        print(f"  usage class {name:<20} calls {c['calls']:>7,}  injected {c['injected']:>6,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
