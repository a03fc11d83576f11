"""Caching: keys now; tiers, single-flight and metrics arrive with the caching issue."""

from .keys import CacheKey, cache_key, message_fingerprint, prefix_chain

__all__ = ["CacheKey", "cache_key", "message_fingerprint", "prefix_chain"]
