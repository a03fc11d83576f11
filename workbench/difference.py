"""Where two sequences first differ: token-id arrays, texts, lists and tuples. The one helper the
pipeline, the analysis, the simulators, the engine, the export check and the UI all use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def first_difference(a: Sequence[Any] | np.ndarray, b: Sequence[Any] | np.ndarray) -> int:
    """Index of the first differing item; the shorter length if one is a prefix of the other (so
    the length of the common prefix, and `min(len(a), len(b))` when nothing differs).

        >>> first_difference(np.array([1, 2, 3], np.uint32), np.array([1, 2, 4], np.uint32))
        2
        >>> first_difference("abc", "abcdef"), first_difference((1, 2), (1, 2))
        (3, 2)
    """
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return _first_difference_ids(np.asarray(a), np.asarray(b))
    n = min(len(a), len(b))
    # Sequence equality runs in C and checks identity before equality, so unchanged items that are
    # the same objects cost almost nothing; a difference is found by bisection (log n slices). The
    # whole of the shorter one is compared as it is: a slice is a copy that touches every item (a
    # long conversation's messages, on every turn).
    if (a if len(a) == n else a[:n]) == (b if len(b) == n else b[:n]) if type(a) is type(b) else a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _first_difference_ids(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differs = a[:n] != b[:n]
    # argmax over booleans stops at the first True: one vectorised pass, no index array built.
    i = int(differs.argmax())
    return i if differs[i] else n
