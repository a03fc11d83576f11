"""When sessions start, how many model calls each makes, and which template each call is served with.

The log covers `days` days from START. Dates of the injected breakers are fixed fractions of that span,
so small logs (tests) and the benchmark's 100,000 requests have the same story:

- from 2/7 of the span, new `agent-sdk` sessions serialize their tool schemas with a key order that
  varies per request (the client's v2 builds them from an unordered map);
- from 3/7, new `support-bot` sessions put the current time in the system prompt;
- from 4/7, the fleet serving the llama model upgrades its template from llama3 to llama3.1 host by
  host (a canary first, the last host 30 h later in a 7-day log); requests go to any host, so a
  conversation alive during the rollout can switch templates, and back, between two calls.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .clients import LLAMA_MODEL, LLAMA_NEW, LLAMA_OLD, MODEL_TEMPLATES

START = datetime(2026, 11, 2, tzinfo=UTC)
MAX_PER_SESSION = 60
# Hours after the rollout starts at which each host switches, for a 7-day log (scaled with the span).
ROLLOUT_HOURS = (0.0, 12.0, 24.0, 30.0)


@dataclass(frozen=True)
class Plan:
    requests: int
    sessions: int
    seed: int
    days: int = 7

    @property
    def span_ms(self) -> int:
        return self.days * 86_400_000

    def at(self, fraction: float) -> int:
        """A moment of the log, in ms since START, as a fraction of the span."""
        return round(self.span_ms * fraction)

    @property
    def flip_from(self) -> int:
        return self.at(2 / 7)

    @property
    def volatile_from(self) -> int:
        return self.at(3 / 7)

    def upgrade_at(self, host: int) -> int:
        """When `host` starts rendering the llama model with llama3.1."""
        return self.at(4 / 7) + round(ROLLOUT_HOURS[host % len(ROLLOUT_HOURS)] * 3_600_000 * self.days / 7)

    def template(self, model: str, host: int, t_ms: int) -> str:
        if model == LLAMA_MODEL:
            return LLAMA_NEW if t_ms >= self.upgrade_at(host) else LLAMA_OLD
        return MODEL_TEMPLATES[model]


HOSTS = len(ROLLOUT_HOURS)


def iso(t_ms: int) -> str:
    """ISO-8601 with milliseconds, UTC (what the logs carry)."""
    return (START + timedelta(milliseconds=t_ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def iso_seconds(t_ms: int) -> str:
    return (START + timedelta(milliseconds=t_ms)).strftime("%Y-%m-%dT%H:%M:%SZ")


def day(t_ms: int) -> str:
    return (START + timedelta(milliseconds=t_ms)).strftime("%Y-%m-%d")


def start_times(plan: Plan, rng: random.Random) -> list[int]:
    """Session start times in ms, sorted, denser in the working hours of the day (UTC)."""
    out: list[int] = []
    while len(out) < plan.sessions:
        t = rng.randrange(plan.span_ms)
        hour = (t / 3_600_000) % 24
        # Traffic peaks mid-afternoon and falls to a fifth at night.
        if rng.random() < 0.2 + 0.8 * max(0.0, math.sin(math.pi * (hour - 6) / 16)) ** 2:
            out.append(t)
    out.sort()
    return out


def session_sizes(plan: Plan, rng: random.Random) -> list[int]:
    """Model calls per session: at least one, heavy-tailed, at most MAX_PER_SESSION, summing to `requests`."""
    extras = plan.requests - plan.sessions
    weights = [rng.lognormvariate(0.0, 0.8) for _ in range(plan.sessions)]
    total = sum(weights)
    sizes = [1 + min(MAX_PER_SESSION - 1, int(extras * w / total)) for w in weights]
    left = plan.requests - sum(sizes)
    while left > 0:
        # Hand out what rounding and the cap left over, one call at a time, to sessions with room.
        i = rng.randrange(plan.sessions)
        if sizes[i] < MAX_PER_SESSION:
            sizes[i] += 1
            left -= 1
    return sizes
