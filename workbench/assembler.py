"""Moved to workbench/assembly/assembler.py (kept importable while other branches move over)."""

from .assembly.assembler import AUTO_CACHE_BYTES, FALLBACK_TOKENIZER, Assembler, AssemblerConfig

__all__ = ["AUTO_CACHE_BYTES", "FALLBACK_TOKENIZER", "Assembler", "AssemblerConfig"]
