"""Caching: chained keys and the two-tier segment store (local LRU by bytes + Redis). Redis is an
optional extra, imported only when a URL is given. (The provider prefix-cache simulators are a
consumer of results, not a cache of the pipeline: they live in `workbench.analysis`.)"""

from .keys import CacheKey, extend_chain, message_fingerprint, prefix_chain, prompt_key
from .metrics import MetricsSnapshot
from .store import CacheEntry, TwoTierCache

__all__ = ["CacheEntry", "CacheKey", "MetricsSnapshot", "TwoTierCache", "extend_chain", "message_fingerprint",
           "prefix_chain", "prompt_key"]
