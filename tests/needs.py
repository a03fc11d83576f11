"""A test dependency the test imports where it needs it: missing, the test fails and says what to
install (conftest's rule: never a skip)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest


def need(module: str, install: str) -> Any:
    """The module, or a failure that names what to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pytest.fail(f"{module} is missing: {install}")
