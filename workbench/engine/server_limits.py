"""The limits `workbench serve-engine` holds every client to, in one frozen object.

A client is untrusted: it may send a huge or endless body, stall after connecting, send deep or
malformed JSON, or a prompt that would hold the engine for minutes. Each limit below bounds one of
those, and each is a `serve-engine` option (the name in `OPTIONS`), so an error can name the knob.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass, fields

from ..errors import WorkbenchError

# The option that sets each field, for error messages and `--help`.
OPTIONS = {
    "workers": "--workers", "queue": "--queue", "max_connections": "--max-connections",
    "max_body_bytes": "--max-body-mb", "read_timeout_s": "--read-timeout",
    "request_deadline_s": "--request-deadline", "engine_wait_s": "--engine-wait",
    "prefill_chunk": "--prefill-chunk", "max_prompt_tokens": "--max-prompt-tokens",
    "max_new_tokens": "--max-new-tokens",
}


def default_max_connections() -> int:
    """512, or fewer when the process may not open that many files: past the file limit, accept()
    fails and asyncio logs an error on every try; below it, the server answers 503 instead."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 512
    return max(8, min(512, soft - 64))


@dataclass(frozen=True)
class ServerLimits:
    workers: int = 4                      # handler threads: a fixed pool, never one per connection
    queue: int = 32                       # complete requests waiting for a worker; past it: 503 at once
    max_connections: int = 0              # open sockets, reading ones included (0: default_max_connections())
    max_body_bytes: int = 4 << 20         # a 32k-token prompt is about 250 KB of JSON ids
    max_header_bytes: int = 16 << 10      # request line and headers together
    max_headers: int = 100
    max_json_depth: int = 32              # a completion body is 3 levels deep at most
    read_timeout_s: float = 10.0          # the longest wait for the next header line or piece of body
    request_deadline_s: float = 30.0      # the whole request (line, headers, body) must arrive in this
    engine_wait_s: float = 30.0           # the longest a request waits for its turn on the engine
    prefill_chunk: int = 512              # tokens prefilled per turn on the engine (bounds one hold)
    max_prompt_tokens: int = 0            # 0: the model's window
    max_new_tokens: int = 64
    linger_s: float = 2.0                 # after an early error answer, how long to drain the client's rest

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise WorkbenchError(f"{OPTIONS.get(f.name, f.name)} must be a finite number, got {value!r}")
        at_least_one = ("workers", "max_body_bytes", "max_header_bytes", "max_headers", "max_json_depth",
                        "prefill_chunk")
        for name in at_least_one:
            if getattr(self, name) < 1:
                raise WorkbenchError(f"{OPTIONS.get(name, name)} must be at least 1, got {getattr(self, name)}")
        for name in ("queue", "max_connections", "max_prompt_tokens", "max_new_tokens", "linger_s"):
            if getattr(self, name) < 0:
                raise WorkbenchError(f"{OPTIONS.get(name, name)} must be at least 0, got {getattr(self, name)}")
        for name in ("read_timeout_s", "request_deadline_s", "engine_wait_s"):
            if not getattr(self, name) > 0:
                raise WorkbenchError(f"{OPTIONS[name]} must be more than 0 seconds, got {getattr(self, name)}")
        if self.request_deadline_s < self.read_timeout_s:
            raise WorkbenchError(f"--request-deadline ({self.request_deadline_s} s) is shorter than --read-timeout "
                                 f"({self.read_timeout_s} s)", hint="the deadline covers the whole request: "
                                                                      "make it at least the read timeout")

    @property
    def connections(self) -> int:
        return self.max_connections or default_max_connections()

    def prompt_cap(self, window: int) -> int:
        """The most prompt tokens a request may send: the option, else the model's window."""
        if self.max_prompt_tokens and window:
            return min(self.max_prompt_tokens, window)
        return self.max_prompt_tokens or window or 32768
