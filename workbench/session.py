"""Moved to workbench/assembly/session.py (kept importable while other branches move over)."""

from .assembly.session import Session

__all__ = ["Session"]
