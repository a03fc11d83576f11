"""Tokenizers: real vocabularies, offline, behind one small interface."""

from .base import Chunk, TokenIds, Tokenizer
from .registry import ENTRIES, get_tokenizer, names

__all__ = ["Tokenizer", "TokenIds", "Chunk", "get_tokenizer", "names", "ENTRIES"]
