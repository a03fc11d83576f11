"""Consumers of assembled results, not stages of the pipeline: what a serving engine or a provider
would reuse across a session's requests.

- `prefix.py`: prefix-stability analysis (SPEC 3.2): the first token where a turn stops reusing
  what the engine holds after the previous one, the message it falls in, the cause and the advice.
- `providers.py`: provider prefix-cache simulators (SPEC 3.3): OpenAI, Anthropic, Gemini, vLLM and
  SGLang; vLLM's block-hash chain and SGLang's radix tree are the engine's own (`engine/kv.py`,
  `engine/radix.py` in its simulated mode).
- `provider_params.py` with `provider_params.json`: the providers' presets, as data, each with its
  source page and the day it was checked (`openai@gpt-5.6` names a variant).
- `provider_terms.py`: each prefix-analysis cause in Anthropic's and OpenAI's cache-diagnostic terms.
- `turn_prompts.py`: a session's assembled turns as the requests the simulators take (with the
  reply each turn generated, which the engines hold).
- `projection.py`: the prefix-stable projection: each turn is what the engine held after the previous
  one, then the template's own text for the new messages; where it departs from the template's
  rendering (`projection_sweep.py` measures it over many templates).
- `logs.py`, `session_report.py`, `tally.py`, `aggregate.py`, `ray_runner.py`: request logs (JSON
  lines) grouped into sessions and analysed at scale, in one process or as a Ray Data job
  (`analyze LOGS... --aggregate`, docs/logs.md).
- `policies.py`: the truncation policies (sliding, chunked, summary-slot) compared over a whole
  session: tokens sent, cached tokens and cost per provider, prefix-stable turns.

The core never imports this package; it imports the core and the light modules of `engine/`.
"""

from .policies import PolicyRun, compare_policies, prefix_stable_turns
from .prefix import Cause, TurnAnalysis, analyze, analyze_turn, iter_analysis
from .provider_params import ProviderParams
from .providers import PROVIDERS, Simulation, TurnPrompt, TurnResult, make_simulator, simulate
from .turn_prompts import turn_prompts

__all__ = ["PROVIDERS", "Cause", "PolicyRun", "ProviderParams", "Simulation", "TurnAnalysis", "TurnPrompt",
           "TurnResult", "analyze", "analyze_turn", "compare_policies", "iter_analysis", "make_simulator",
           "prefix_stable_turns", "simulate", "turn_prompts"]
