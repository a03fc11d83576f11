"""Export to production: the bundle (bundle.py), its schema (schema.py), the loader (loader.py) and
the drift check (verify.py)."""

from .loader import Bundle, load, load_bundle

__all__ = ["Bundle", "load", "load_bundle"]
