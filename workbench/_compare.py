"""Where two sequences (lists, tuples, strings) first differ, comparing slices in C."""

from __future__ import annotations

from typing import Sequence


def first_difference(a: Sequence, b: Sequence) -> int:
    """Index of the first differing item; the shorter length if one is a prefix of the other.

    Slice equality runs in C and checks identity before equality, so unchanged items that are
    the same objects cost almost nothing; a difference is found by bisection (log n slices).
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo
