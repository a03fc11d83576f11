"""`--ray [ADDRESS]`: the per-session analysis as a Ray Data job (docs/logs.md).

The driver indexes the logs (offsets, not requests), cuts the sessions into batches and hands Ray
Data one small item per batch: the sessions' line offsets, as JSON. An actor pool, one actor per
CPU, maps the batches; each actor loads its templates and tokenizers once (`Assemblers` in its
constructor), reads its sessions' lines from the files and runs the same `analyze_batch` as the
local runner, returning the batch's `Tally`. The driver adds them up.

Local Ray (`ray=True`) starts with every CPU of this machine; an address joins that cluster, whose
workers must see the log files at the same absolute paths (shared storage), as Ray Data's own
readers require. Ray Data shows its progress bar on stderr.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import MissingDependencyError, WorkbenchError
from .logs import LineRef, LogIndex
from .session_report import Assemblers, Options
from .tally import Tally, analyze_batch, batches

CONNECT_TIMEOUT_S = 5.0
# Sessions are batched costliest first, so the last batches are the cheapest and the actors finish
# together: with 8 batches per worker in file order and four queued per actor, one actor of two idled
# for about 5 s of a 90 s job (100,000 requests); this way they end within a fraction of a second.
BLOCKS_PER_WORKER = 32
# Two batches in flight per actor: the next one waits at the actor while it works on this one. With
# one, an actor idled about 0.16 s between batches (until Ray Data's scheduling loop noticed it was
# free): 5 s per actor over 32 batches. Two keep the gaps near 10 ms, and the end stays even because
# the batch still queued at the end is one of the cheapest.
IN_FLIGHT_PER_ACTOR = 2
MIN_BATCH = 8                # sessions per batch at least: a batch is one Ray task's worth of work


def _ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401  (Ray Data is the `ray[data]` part)
    except ImportError:
        raise MissingDependencyError("Ray Data is not installed (needed for --ray)",
                                     hint="run: pip install 'prompt-workbench[ray]'  [or: pip install 'ray[data]']"
                                     ) from None
    return ray


class BatchWorker:
    """A Ray Data actor: loads templates and tokenizers once, then analyses batch after batch."""

    def __init__(self, options: Options, paths: Sequence[str], names: Sequence[str]):
        self.assemblers = Assemblers(options)          # with the options' template arguments
        self.assemblers.get(options.default_template)
        self.paths, self.names = list(paths), list(names)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        out = []
        for item in batch["sessions"]:
            sessions = [(cid, [LineRef(*r) for r in refs]) for cid, refs in json.loads(item)]
            tally = analyze_batch(self.paths, self.names, sessions, self.assemblers)
            out.append(json.dumps(tally.to_wire()))
        return {"tally": out}


def _reachable(address: str) -> None:
    """Ray retries an address that does not answer for minutes; a cluster's head that does not
    accept a connection within seconds is an error now ("auto" and the like are Ray's to resolve)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise WorkbenchError(f"cannot reach Ray at {address}: {exc.strerror or exc}",
                             hint="start the cluster (ray start --head) and give the address it prints, "
                                  "or --ray alone for local Ray") from None


def run_on_ray(make_index: Callable[[], LogIndex], names: Sequence[str], options: Options, address: str | None,
               progress: bool) -> tuple[LogIndex, Tally, dict[str, Any]]:
    """Index the logs (`make_index`) while Ray starts, then run the job. Starting local Ray is mostly
    waiting for its processes to come up, so the driver's index pass (about 1.5 s per 100,000
    requests) runs in a thread meanwhile instead of before it. An index error still wins: it is
    raised once Ray is shut down again."""
    ray = _ray()
    started_here = not ray.is_initialized()
    with ThreadPoolExecutor(1, thread_name_prefix="workbench-index") as pool:
        indexed = pool.submit(make_index)
        try:
            if started_here:
                start_ray(ray, address)
            index = indexed.result()
            tally, runner = _run(ray, index, names, options, address, progress)
            return index, tally, runner
        finally:
            if started_here and ray.is_initialized():
                ray.shutdown()


def start_ray(ray: Any, address: str | None) -> None:
    """Local Ray with every CPU of this machine, or join the cluster at `address`."""
    try:
        if address is None:
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        else:
            _reachable(address)
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise WorkbenchError(f"cannot start or join Ray{f' at {address}' if address else ''}: {exc}",
                             hint="give the address of a running Ray cluster (ray start --head prints it), "
                                  "or --ray alone for local Ray") from None


def _run(ray: Any, index: LogIndex, names: Sequence[str], options: Options, address: str | None,
         progress: bool) -> tuple[Tally, dict[str, Any]]:
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = progress
    ctx.verbose_progress = False
    workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
    size = max(MIN_BATCH, -(-len(index.sessions) // (workers * BLOCKS_PER_WORKER)))
    # A session's cost grows with its bytes: every line carries the conversation so far.
    sessions = sorted(index.ordered(), key=lambda s: -sum(r.length for r in s[1]))
    items = [{"sessions": json.dumps([(cid, [(r.file, r.offset, r.length, r.line) for r in refs])
                                      for cid, refs in batch])} for batch in batches(sessions, size)]
    tally = Tally()
    if items:
        ds = ray.data.from_items(items, override_num_blocks=len(items))
        pool = ray.data.ActorPoolStrategy(size=min(workers, len(items)),
                                          max_tasks_in_flight_per_actor=IN_FLIGHT_PER_ACTOR)
        out = ds.map_batches(BatchWorker, batch_size=1, batch_format="numpy", num_cpus=1, compute=pool,
                             fn_constructor_kwargs={"options": options, "paths": list(index.paths),
                                                    "names": list(names)})
        for row in out.iter_rows():
            tally.merge(Tally.from_wire(json.loads(row["tally"])))
    return tally, {"mode": "ray", "address": address, "workers": workers}

