"""Caching: chained keys, the two-tier segment store (local LRU by bytes + Redis), and the
provider prefix-cache simulators. Redis is an optional extra, imported only when a URL is given."""

from .keys import CacheKey, extend_chain, message_fingerprint, prefix_chain, prompt_key
from .metrics import MetricsSnapshot
from .providers import ProviderParams, Simulation, TurnPrompt, simulate
from .store import CacheEntry, TwoTierCache

__all__ = ["CacheEntry", "CacheKey", "MetricsSnapshot", "ProviderParams", "Simulation", "TurnPrompt",
           "TwoTierCache", "extend_chain", "message_fingerprint", "prefix_chain", "prompt_key", "simulate"]
