"""Linear analysis (issue 34, item 1): `workbench analyze`, `analyze --fix` and `analyze --projection`
on sessions of 1k / 2k / 4k / 8k / 16k messages, time and peak memory side by side in one run, with
the growth ratio of each doubling (2k/1k, 4k/2k, ...; the goal is at most 2.3, linear being 2.0).

Run:  .venv/bin/python benchmarks/bench_analyze_scaling.py [--sizes 1000,2000,4000,8000,16000]
                                                           [--modes analyze,fix,projection] [--huge]

Each command runs in a process of its own, `python -m workbench.cli.main analyze FILE --json ...`,
its JSON written to a file and checked (one row per turn); the wall time, and the child's CPU time
and peak resident memory (getrusage of that child, os.wait4), are its own. The sessions are made
here: the 1,000-message sample session's messages (a system prompt, then user and assistant turns
of about 250 tokens each) repeated to the size, each repeat marked so that no two messages are
equal, ending with a user message; a turn is a request per assistant message, so n messages make
n/2 turns. Everything else is the command's defaults (template qwen2.5, its 32,768-token window,
sliding truncation: what the issue's probe measured); `--args` adds options (`--args=--no-truncate`
analyses the whole history of every turn instead).

`--huge` also runs 100,000 messages (the intake's limit on messages; each message cut to
HUGE_CHARS characters, to stay under its limit on a request's text), `--huge-modes` which commands
(default: all three): they must finish. `--pythonpath DIR` runs another copy of the package (the
code before a change, for a before/after table: a checkout, whose folder the commands run in),
`--timeout S` stops a command that runs longer.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_sessions" / "bench_1000.json"
MODES = {"analyze": [], "fix": ["--fix", "move-volatile"], "projection": ["--projection"]}
SIZES = (1000, 2000, 4000, 8000, 16000)
HUGE = 100_000
# The huge session's messages are cut to this many characters: at the sample's length (1,280 on
# average) 100,000 messages are 128 M characters, over the intake's limit on a request's text
# (IntakeLimits.max_request_bytes, 64 Mi); cut, the last request is about 45 M.
HUGE_CHARS = 450
GOAL = 2.3


def make_session(n: int, path: Path, chars: int | None = None) -> Path:
    """n messages from the sample's (see the module doc), written as a conversation file; `chars`:
    each message's text cut to that many characters."""
    src = json.loads(SAMPLE.read_text(encoding="utf-8"))
    body = src["messages"][1:]            # user, assistant, ..., user
    cycle = len(body) - 1                 # an even count: user and assistant keep alternating across repeats
    msgs = [src["messages"][0]]
    for i in range(n - 1):
        m = dict(body[i % cycle])
        text = m["content"] if chars is None else m["content"][:chars]
        m["content"] = f"[{i // cycle}] {text}" if i >= cycle else text
        msgs.append(m)
    path.write_text(json.dumps({"format": "openai", "title": f"{n:,} messages", "messages": msgs, "tools": []}),
                    encoding="utf-8")
    return path


@dataclass
class Run:
    mode: str
    messages: int
    turns: int
    wall_s: float
    cpu_s: float
    peak_mb: float
    error: str = ""


def run(mode: str, n: int, session: Path, out: Path, extra: list[str], env: dict[str, str],
        timeout: float | None, where: Path = ROOT) -> Run:
    """`where`: the folder the command runs in; `python -m` puts it first on the import path, so it
    is the package that runs (PYTHONPATH comes after it)."""
    argv = [sys.executable, "-m", "workbench.cli.main", "analyze", str(session), "--json", *MODES[mode], *extra]
    t0 = time.perf_counter()
    errs = out.with_suffix(".err")
    with out.open("wb") as f, errs.open("wb") as e:     # files, not pipes: nothing the child writes can block it
        proc = subprocess.Popen(argv, stdout=f, stderr=e, cwd=where, env=env, start_new_session=True)
        deadline = None if timeout is None else t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.perf_counter() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)     # its own process group: the command and nothing else
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
    wall = time.perf_counter() - t0
    err = errs.read_text(encoding="utf-8", errors="replace")
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code           # reaped here: Popen must not wait for it again
    cpu, peak = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024   # Linux: KiB
    if code != 0:
        why = "timed out" if deadline is not None and wall >= (timeout or 0) else f"exit {code}"
        return Run(mode, n, 0, wall, cpu, peak, f"{why}: {err.strip().splitlines()[-1] if err.strip() else ''}")
    turns = len(json.loads(out.read_bytes())["turns"])
    error = "" if turns == n // 2 else f"{turns} turns, expected {n // 2}"
    return Run(mode, n, turns, wall, cpu, peak, error)


def ratio(a: float, b: float) -> str:
    return f"{b / a:5.2f}" if a else "    -"


def table(runs: list[Run]) -> str:
    lines = [f"{'command':<11} {'messages':>9} {'turns':>7} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}   "
             f"{'wall x':>6} {'CPU x':>6} {'mem x':>6}"]
    for mode in MODES:
        prev = None
        for r in (r for r in runs if r.mode == mode):
            doubled = prev is not None and not prev.error and r.messages == 2 * prev.messages
            grow = ("  " + "  ".join((ratio(prev.wall_s, r.wall_s), ratio(prev.cpu_s, r.cpu_s),
                                      ratio(prev.peak_mb, r.peak_mb)))) if prev is not None and doubled else ""
            lines.append(f"{mode:<11} {r.messages:>9,} {r.turns:>7,} {r.wall_s:>8.1f} {r.cpu_s:>8.1f} "
                         f"{r.peak_mb:>8.0f} {grow}" + (f"   {r.error}" if r.error else ""))
            prev = r
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="messages per session, comma-separated")
    ap.add_argument("--modes", default=",".join(MODES), help="which commands: analyze, fix, projection")
    ap.add_argument("--huge", action="store_true", help=f"also {HUGE:,} messages (must finish)")
    ap.add_argument("--huge-modes", default=",".join(MODES), help="the commands --huge runs")
    ap.add_argument("--args", default="", help="more options for every command, space-separated")
    ap.add_argument("--pythonpath", default=None, help="run the package found here instead (before/after)")
    ap.add_argument("--timeout", type=float, default=None, help="seconds a command may run")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",") if s]
    modes = [m for m in a.modes.split(",") if m]
    for m in modes + [m for m in a.huge_modes.split(",") if m]:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}: use {', '.join(MODES)}")
    env = dict(os.environ)
    where = Path(a.pythonpath).resolve() if a.pythonpath else ROOT
    extra = a.args.split()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; sessions from "
          f"{SAMPLE.name}; options: {' '.join(extra) or '(defaults)'}"
          + (f"; package from {a.pythonpath}" if a.pythonpath else ""), flush=True)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench_analyze_") as tmp:
        work = Path(tmp)
        plan = [(n, modes) for n in sizes] + ([(HUGE, [m for m in a.huge_modes.split(",") if m])] if a.huge else [])
        for n, ms in plan:
            session = make_session(n, work / f"s{n}.json", HUGE_CHARS if n == HUGE else None)
            for mode in ms:
                r = run(mode, n, session, work / "out.json", extra, env, a.timeout, where)
                runs.append(r)
                print(f"  {mode} {n:,}: {r.wall_s:.1f} s, CPU {r.cpu_s:.1f} s, peak {r.peak_mb:.0f} MB"
                      + (f" ({r.error})" if r.error else ""), flush=True)
            session.unlink()
    print()
    print(table(runs))
    worst = [float(b.wall_s / p.wall_s) for m in modes for p, b in
             zip([r for r in runs if r.mode == m and r.messages in sizes],
                 [r for r in runs if r.mode == m and r.messages in sizes][1:]) if not p.error and not b.error]
    if worst:
        print(f"\nlargest wall-time ratio per doubling: {max(worst):.2f} (goal <= {GOAL})")
    return 1 if any(r.error for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
