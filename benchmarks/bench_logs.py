"""`analyze --aggregate` on synthetic production logs: single process against local Ray, and the
injected breakers against their ground truth (issue 20).

It generates (or reuses, keyed by seed and size) request logs with `tools/make_request_logs.py`,
then in one run aggregates them in this process and with local Ray, and prints for each: wall
seconds, requests per second, peak memory of the process tree (driver and every process it started:
Ray's GCS, raylet and workers), and the speed-up. Then, for every injected breaker, the ground-truth
share of lost tokens against the measured share of its cause code, and PASS/FAIL for both bars:
every breaker found with its share within 1 percentage point, Ray at least 1.6x single-process.

Both runs happen in the environment a Ray deployment of the command has: a virtualenv with the
package's core dependencies and its `packs` and `ray` extras only, at this interpreter's versions,
built once under the cache folder (`--here` runs in this interpreter instead). The development
environment also carries JupyterLab, whose jupyter-events pulls in rfc3987-syntax: it builds an Earley
parser when jsonschema's format checkers are imported, and `import ray` imports them, so each of
Ray's ten or more Python processes spends about 0.9 s of CPU on it there (local Ray took 95 s there
against 87 to 88 s, 100,000 requests on two cores). The single-process run never imports
jsonschema, and is the same in both.

With `--usage-overhead` it measures what the reconciliation (issue 32) adds instead: the same logs
in two copies, every line's `response.usage` taken out of one and present in the other (a line the
generator wrote without usage gets an OpenAI-shaped one and `provider: openai`), each aggregated in
one process and on local Ray, the times printed side by side with the ratio (bar: at most 1.15).

Run:  .venv/bin/python benchmarks/bench_logs.py                      (100,000 requests, 10,000 sessions)
      .venv/bin/python benchmarks/bench_logs.py --usage-overhead --here --requests 5000
      .venv/bin/python benchmarks/bench_logs.py --requests 3000      (a small run; sessions = requests / 10)
      .venv/bin/python benchmarks/bench_logs.py --here               (in this interpreter, not the deployment's)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARE_BAR = 0.01      # |measured share − ground-truth share|, as a fraction of all lost tokens
SPEEDUP_BAR = 1.6


def logs_for(requests: int, sessions: int, seed: int, cache: Path, fresh: bool) -> Path:
    """The generated folder for these arguments, generated once (a folder is complete when its
    ground_truth.json exists: the generator writes that last). The key includes a hash of the
    generator's source, so an edited generator never reuses logs the old one wrote."""
    folder = cache / f"logs-r{requests}-s{sessions}-seed{seed}-{generator_hash()}"
    if fresh and folder.exists():
        shutil.rmtree(folder)
    if (folder / "ground_truth.json").exists():
        print(f"reusing {folder}")
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    tmp = cache / f".{folder.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(ROOT / "tools" / "make_request_logs.py"), "--requests", str(requests),
           "--sessions", str(sessions), "--seed", str(seed), "--out", str(tmp)]
    subprocess.run(cmd, check=True)
    tmp.rename(folder)
    return folder


def generator_hash() -> str:
    h = hashlib.sha256()
    for p in sorted([ROOT / "tools" / "make_request_logs.py", *(ROOT / "tools" / "request_logs").glob("*.py")]):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:10]


DEPLOYED = "WORKBENCH_BENCH_DEPLOYMENT"   # set in the deployment environment's run: what it prints


def deployment_requirements() -> list[str]:
    """What a Ray deployment of `analyze --aggregate` installs: the core dependencies and the `packs`
    and `ray` extras of pyproject.toml, each pinned to the version this interpreter has where it has
    one, so that the two environments differ only by what else is installed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pinned = []
    for req in [*project["dependencies"], *extras["packs"], *extras["ray"]]:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?", req)
        try:
            pinned.append(f"{m.group(1)}{m.group(2) or ''}=={importlib.metadata.version(m.group(1))}" if m else req)
        except importlib.metadata.PackageNotFoundError:
            pinned.append(req)
    return pinned


def deployment_python(cache: Path) -> Path:
    """The deployment environment's interpreter, its virtualenv built on first use (keyed by the
    requirements and this Python's version; complete once its marker file exists)."""
    reqs = deployment_requirements()
    key = hashlib.sha256("\n".join([sys.version, *reqs]).encode()).hexdigest()[:10]
    venv = cache / f"ray-deployment-{key}"
    python = venv / "bin" / "python"
    if (venv / "complete").exists():
        print(f"reusing the Ray deployment environment {venv}")
        return python
    shutil.rmtree(venv, ignore_errors=True)
    print(f"building the Ray deployment environment {venv} (once): {' '.join(reqs)}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *reqs],
                   check=True)
    (venv / "complete").write_text("\n".join(reqs) + "\n")
    return python


def import_ray_cpu(python: str | Path) -> float | None:
    """CPU seconds `import ray` takes in a fresh `python` (None when Ray is not there): what each of
    Ray's Python processes pays when it starts."""
    code = "import time; t = time.process_time(); import ray; print(time.process_time() - t)"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return float(done.stdout) if done.returncode == 0 else None


def enter_deployment(args: argparse.Namespace) -> int:
    """Run this benchmark again in the deployment environment (exec: this process becomes it)."""
    try:
        python = deployment_python(args.cache_dir)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"error: cannot build the Ray deployment environment ({exc}); "
              f"run with --here to measure in this interpreter", file=sys.stderr)
        return 2
    here, there = import_ray_cpu(sys.executable), import_ray_cpu(python)
    if here is not None and there is not None:
        why = (" (rfc3987-syntax is installed here: importing it builds an Earley parser)"
               if importlib.util.find_spec("rfc3987_syntax") else "")
        print(f"`import ray` costs {here:.2f} s of CPU in this interpreter{why} and {there:.2f} s in the "
              f"deployment's; each of Ray's Python processes pays it")
    sys.stdout.flush()
    env = {**os.environ, DEPLOYED: "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    os.execve(python, [str(python), str(Path(__file__).resolve()), *sys.argv[1:], "--here"], env)


class TreeMemory:
    """Peak memory of this process and all its descendants, sampled every `every` seconds: the sum of
    PSS (shared pages split between the processes that map them) and of RSS (shared pages counted in
    every process: an upper bound). Read from /proc; psutil where there is no /proc."""

    # One sample of Ray's 12 processes costs about 27 ms of CPU (smaps_rollup walks each process's
    # page tables): four a second took about 5% of this 2-core machine from the run it measured.
    # Once a second is cheap, and the peak is a plateau that lasts the whole job.
    def __init__(self, every: float = 1.0):
        self.every = every
        self.peak_pss = self.peak_rss = self.peak_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        pss = rss = 0
        pids = tree(os.getpid())
        for pid in pids:
            r, p = memory(pid)
            rss, pss = rss + r, pss + p
        self.peak_pss, self.peak_rss = max(self.peak_pss, pss), max(self.peak_rss, rss)
        self.peak_procs = max(self.peak_procs, len(pids))


def tree(root: int) -> list[int]:
    """`root` and its descendants."""
    if not os.path.isdir("/proc"):
        import psutil
        me = psutil.Process(root)
        return [root, *(c.pid for c in me.children(recursive=True))]
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    # The command name (field 2) may hold spaces; the parent id follows its ')'.
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, pp in parent.items() if pp in frontier]
        out += frontier
    return out


def memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in bytes; (0, 0) once it is gone."""
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "Pss"):
                    fields[key] = int(rest.split()[0]) * 1024
    except OSError:
        try:
            import psutil
            rss = psutil.Process(pid).memory_info().rss
            return rss, rss
        except Exception:   # gone, or no psutil: nothing to count
            return 0, 0
    return fields.get("Rss", 0), fields.get("Pss", fields.get("Rss", 0))


def timed(paths: list[str], ray: Any) -> tuple[dict[str, Any], float, TreeMemory]:
    from workbench.analysis.aggregate import aggregate
    with TreeMemory() as mem:
        t0 = time.perf_counter()
        report = aggregate(paths, ray=ray).to_json()
        wall = time.perf_counter() - t0
    return report, wall, mem


USAGE_BAR = 1.15     # the reconciliation may add at most 15 % to `analyze --aggregate`


def usage_copies(paths: list[str], out: Path) -> tuple[list[str], list[str]]:
    """Two copies of the logs: without any `response.usage`, and with one on every line."""
    out.mkdir(parents=True, exist_ok=True)
    without, with_ = [], []
    for i, src in enumerate(paths):
        a, b = out / f"without-{i}.jsonl", out / f"with-{i}.jsonl"
        with open(src, encoding="utf-8") as f, open(a, "w", encoding="utf-8") as fa, \
                open(b, "w", encoding="utf-8") as fb:
            for raw in f:
                if not raw.strip():
                    continue
                d = json.loads(raw)
                resp = d.get("response") if isinstance(d.get("response"), dict) else {}
                bare = {k: v for k, v in resp.items() if k != "usage"}
                fa.write(json.dumps({**d, "response": bare} if "response" in d else d) + "\n")
                if "usage" not in resp:
                    # An OpenAI-shaped usage (what is reported does not change the work: every call is
                    # simulated and classified whatever it says).
                    n = len(raw) // 4
                    resp = {**resp, "usage": {"prompt_tokens": n, "prompt_tokens_details": {"cached_tokens": 0}}}
                    d = {**d, "provider": d.get("provider") or "openai"}
                fb.write(json.dumps({**d, "response": resp}) + "\n")
        without.append(str(a))
        with_.append(str(b))
    return without, with_


def usage_overhead(paths: list[str], cache: Path, ray_address: str | None) -> int:
    """The reconciliation's cost: the same logs with and without usage, one process and Ray."""
    without, with_ = usage_copies(paths, cache / "usage-overhead")
    ok = True
    print(f"{'runner':>15} {'without usage':>14} {'with usage':>11} {'ratio':>6}  reconciled calls")
    for label, ray in (("single process", None), ("local Ray" if not ray_address else "Ray cluster",
                                                   ray_address or True)):
        _, t0, _ = timed(without, ray)
        report, t1, _ = timed(with_, ray)
        ratio = t1 / t0
        ok &= ratio <= USAGE_BAR
        print(f"{label:>15} {t0:13.1f}s {t1:10.1f}s {ratio:6.3f}  {report['reconciliation']['with_usage']:,}")
    print(f"{'PASS' if ok else 'FAIL'}: the reconciliation adds at most {USAGE_BAR - 1:.0%} (each runner)")
    return 0 if ok else 1


def ray_start_stop() -> float | None:
    """What starting and stopping local Ray costs on its own, with the settings `--ray` starts it with
    (None, said on the output, when it fails to start: on a loaded machine Ray's own startup can time out,
    and this figure is only for information)."""
    import ray
    t0 = time.perf_counter()
    try:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # Ray raises a bare Exception when its node does not start in time
        print(f"local Ray's start and stop alone: not measured, Ray did not start ({exc})")
        return None
    ray.shutdown()
    return time.perf_counter() - t0


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--sessions", type=int, default=None, help="default: requests / 10")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "workbench-bench-logs")
    ap.add_argument("--fresh", action="store_true", help="generate again even if the logs are cached")
    ap.add_argument("--ray-address", default=None, help="a Ray cluster to join instead of local Ray")
    ap.add_argument("--usage-overhead", action="store_true",
                    help="measure what reconciliation adds: the logs with and without usage, side by side")
    ap.add_argument("--here", action="store_true",
                    help="measure in this interpreter instead of a Ray deployment's environment")
    args = ap.parse_args()
    if not args.here:
        return enter_deployment(args)
    sessions = args.sessions or max(1, args.requests // 10)
    try:
        import workbench.analysis.aggregate  # noqa: F401
    except ImportError as exc:
        print(f"error: this checkout has no `analyze --aggregate` to measure ({exc})", file=sys.stderr)
        return 2

    folder = logs_for(args.requests, sessions, args.seed, args.cache_dir, args.fresh)
    truth = json.loads((folder / "ground_truth.json").read_text())
    gen = json.loads((folder / "generation.json").read_text())
    paths = [str(folder / f) for f in truth["files"]]
    size = sum(os.path.getsize(p) for p in paths)
    print(f"logs: {truth['requests']:,} requests, {truth['sessions']:,} sessions, {len(paths)} files, "
          f"{size / 2**20:,.0f} MiB; generated in {gen['seconds']:.1f} s "
          f"({gen['seconds_per_1k_requests']:.2f} s per 1k requests, ground truth included)")
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("environment: " + ("a Ray deployment's (core, packs and ray extras)" if os.environ.get(DEPLOYED)
                             else "this interpreter (--here)"))
    if args.usage_overhead:
        return usage_overhead(paths, folder, args.ray_address)

    runs = {}
    for label, ray in (("single process", None), ("local Ray" if not args.ray_address else "Ray cluster",
                                                   args.ray_address or True)):
        report, wall, mem = timed(paths, ray)
        runs[label] = (report, wall)
        print(f"{label:>15}: {wall:8.1f} s  {truth['requests'] / wall:8,.0f} requests/s  "
              f"peak memory {mib(mem.peak_pss)} PSS ({mib(mem.peak_rss)} RSS) over {mem.peak_procs} processes  "
              f"runner {report['runner']}")
    (local, t_local), (distributed, t_ray) = runs.values()
    speedup = t_local / t_ray
    start = ray_start_stop() if not args.ray_address else None
    if start is not None:
        print(f"local Ray's start and stop alone (a separate ray.init + shutdown): {start:.1f} s; without it "
              f"the speed-up would be {t_local / max(t_ray - start, 1e-9):.2f}x (for information; the bar uses the "
              f"whole run)")
    same = {k: v for k, v in local.items() if k != "runner"} == {k: v for k, v in distributed.items() if k != "runner"}
    print(f"speed-up: {speedup:.2f}x; the two reports agree (but for runner): {'yes' if same else 'NO'}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return verdict(truth, local, speedup, same)


def verdict(truth: dict[str, Any], report: dict[str, Any], speedup: float, same: bool) -> int:
    causes = {c["code"]: c for c in report["causes"]}
    print(f"\nlost tokens: ground truth {truth['total_lost_tokens']:,}, measured {report['lost_tokens']:,}; "
          f"sessions {truth['sessions']:,} / {report['sessions']:,}; requests {truth['requests']:,}, of which "
          f"{truth['turns']:,} follow an earlier one (the report counts {report['turns']:,} turns)")
    print("| breaker | code | sessions (truth / measured) | turns | lost tokens | share truth | share measured "
          "| difference |")
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    for b in truth["breakers"]:
        m = causes.get(b["code"], {"sessions": 0, "turns": 0, "lost_tokens": 0, "share": 0.0})
        diff = round(m["share"] - b["share"], 6) + 0.0   # + 0.0: no "-0.00"
        found = m["lost_tokens"] > 0
        ok &= found and abs(diff) <= SHARE_BAR
        print(f"| {b['name']}{' (organic)' if b['organic'] else ''} | {b['code']} | {b['sessions']:,} / "
              f"{m['sessions']:,} | {b['turns']:,} / {m['turns']:,} | {b['lost_tokens']:,} / {m['lost_tokens']:,} "
              f"| {b['share']:.2%} | {m['share']:.2%} | {diff * 100:+.2f} pt{'' if found else ' NOT FOUND'} |")
    known = {b["code"] for b in truth["breakers"]}
    for code, c in causes.items():
        if code not in known:
            print(f"| (not injected) | {code} | - / {c['sessions']:,} | - / {c['turns']:,} | - / "
                  f"{c['lost_tokens']:,} | - | {c['share']:.2%} | |")
    print()
    print(f"{'PASS' if ok else 'FAIL'}: every injected breaker found, each share within "
          f"{SHARE_BAR * 100:.0f} point of the ground truth")
    fast = speedup >= SPEEDUP_BAR
    print(f"{'PASS' if fast else 'FAIL'}: Ray {speedup:.2f}x the single-process run (bar {SPEEDUP_BAR}x)")
    if not same:
        print("FAIL: the Ray report differs from the single-process one")
    return 0 if ok and fast and same else 1


if __name__ == "__main__":
    sys.exit(main())
