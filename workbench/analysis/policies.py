"""Truncation policies compared over a whole session (issue 16): for each of sliding, chunked and
summary-slot, the session's requests assembled through one `Session` (a truncated turn is refitted
from the previous one), then fed to the provider simulators.

Per policy: the tokens sent, what each provider would report as cached and what it would cost, and
the prefix-stable turns: turns whose prompt starts with the whole previous prompt, so an engine
that holds the previous turn prefills only what is new. Sliding drops the fewest turns each time,
so once the history overflows almost no turn is prefix-stable; chunked drops to a chunk boundary
and the kept prefix holds until the history has grown by a chunk.

    >>> import numpy as np
    >>> doc = np.arange(10, dtype=np.uint32)
    >>> prefix_stable_turns([TurnPrompt(doc[:4]), TurnPrompt(doc[:6]), TurnPrompt(doc[2:8])])
    1
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ..assembly import Assembler
from ..assembly.result import AssemblyResult
from ..difference import first_difference
from ..truncation import STRATEGIES
from .provider_params import ProviderParams
from .providers import PROVIDERS, Simulation, TurnPrompt, simulate
from .turn_prompts import turn_prompts


def prefix_stable_turns(prompts: Sequence[TurnPrompt]) -> int:
    """Turns (from the second) whose prompt starts with the whole previous prompt."""
    return sum(1 for a, b in zip(prompts, prompts[1:])
               if len(b.token_ids) >= len(a.token_ids) and first_difference(a.token_ids, b.token_ids)
               == len(a.token_ids))


@dataclass(frozen=True)
class PolicyRun:
    """One truncation policy over a whole session."""

    policy: str
    prompts: tuple[TurnPrompt, ...]
    truncated: tuple[int, ...]              # the turns (from 1) whose prompt dropped messages
    simulations: tuple[Simulation, ...]     # one per provider, in the order asked

    @property
    def truncated_turns(self) -> int:
        return len(self.truncated)

    @property
    def tokens(self) -> int:
        """Prompt tokens sent over the session."""
        return sum(len(p.token_ids) for p in self.prompts)

    @property
    def prefix_stable_turns(self) -> int:
        return prefix_stable_turns(self.prompts)

    def simulation(self, provider: str) -> Simulation:
        found = next((s for s in self.simulations if s.provider == provider or
                      (s.params is not None and s.params.kind == provider)), None)
        if found is None:
            raise KeyError(f"no simulation of {provider!r} in this run "
                           f"({', '.join(s.provider for s in self.simulations)})")
        return found

    def cached_tokens(self, provider: str) -> int:
        return sum(t.cached_tokens for t in self.simulation(provider).turns)

    def to_json(self) -> dict[str, Any]:
        """The totals, side by side with other policies' (`workbench simulate --truncation all`)."""
        return {"truncation": self.policy, "turn_count": len(self.prompts), "tokens": self.tokens,
                "truncated_turns": self.truncated_turns, "prefix_stable_turns": self.prefix_stable_turns,
                "providers": {s.provider: {"cached_tokens": sum(t.cached_tokens for t in s.turns),
                                           "hit_ratio": s.hit_ratio, "cost": s.total_cost}
                              for s in self.simulations}}


def with_policy(asm: Assembler, strategy: str) -> Assembler:
    """An Assembler configured as `asm`, with truncation `strategy` (its other settings kept; a
    sliding policy's `cut` is dropped for the chunked ones, which do not cut). No shared cache: a
    comparison assembles through a session."""
    policy = asm.config.truncation
    policy = replace(policy, strategy=strategy, cut=policy.cut and strategy == "sliding")  # type: ignore[arg-type]
    options = {f.name: getattr(asm.config, f.name) for f in fields(asm.config)}
    options.update(template=asm.template, tokenizer=asm.tokenizer, truncation=policy, cache=None)
    return Assembler(**options)


def run_policy(asm: Assembler, requests: Iterable[Any], providers: Mapping[str, ProviderParams | None] | None = None,
               breakpoints: str = "auto", results: Sequence[AssemblyResult] | None = None) -> PolicyRun:
    """The session's requests through `asm`'s own truncation policy, and each provider over them.
    `results`: the turns already assembled with this assembler (the requests are not used then)."""
    if results is None:
        sess = asm.session()
        results = [sess.assemble(r) for r in requests]
    prompts = tuple(turn_prompts(results, breakpoints, asm))
    sims = tuple(simulate(prompts, name, params) for name, params in (providers or _defaults()).items())
    truncated = tuple(k for k, r in enumerate(results, start=1) if r.dropped)
    return PolicyRun(asm.config.truncation.strategy, prompts, truncated, sims)


def compare_policies(asm: Assembler, requests: Sequence[Any],
                     providers: Mapping[str, ProviderParams | None] | None = None, breakpoints: str = "auto",
                     strategies: Sequence[str] = STRATEGIES) -> tuple[PolicyRun, ...]:
    """`run_policy` under each strategy, `asm`'s other settings kept."""
    return tuple(run_policy(asm if asm.config.truncation.strategy == s else with_policy(asm, s), requests,
                            providers, breakpoints) for s in strategies)


def _defaults() -> dict[str, ProviderParams | None]:
    return dict.fromkeys(PROVIDERS)


__all__ = ["PolicyRun", "compare_policies", "prefix_stable_turns", "run_policy", "with_policy"]
