"""Moved to workbench/assembly/result.py (kept importable while other branches move over)."""

from .assembly.result import AssemblyResult, LazyIds, LazyText, ids_array, text_slice
from .truncation import Dropped, DroppedList

__all__ = ["AssemblyResult", "Dropped", "DroppedList", "LazyIds", "LazyText", "ids_array", "text_slice"]
