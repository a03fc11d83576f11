"""The model catalog: a model id -> template, tokenizer, window, KV shape, image rule, provider preset."""

from .catalog import KVShape, ModelEntry, closest, find, lookup, models

__all__ = ["KVShape", "ModelEntry", "closest", "find", "lookup", "models"]
