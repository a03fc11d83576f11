"""Synthetic production request logs (SPEC 7.1) with known prefix-cache breakers and exact ground truth.

`clients` describes the apps that send requests and writes what they say; `timeline` draws when
sessions start, how many model calls each makes and which host and template serve each call;
`sessions` builds each session's requests (with the injected breakers); `truth` measures, per turn,
what a prefix-caching engine holds and what the next prompt reuses. `tools/make_request_logs.py` is
the command line; `benchmarks/bench_logs.py` checks `analyze --aggregate` against the ground truth.
"""
