"""Interval arithmetic on numpy arrays: the union of intervals, and how much of each window they cover.

Every step split is one of these: step_breakdown's Computing / Communication / Free (:mod:`.breakdown`),
the Overlap Analysis slices of the exports (:mod:`..export.overlap`) and the advisor's exposed AI CPU
time and busy gaps (:mod:`..findings.advisor`) all take the union of task spans, so that overlapping
tasks count once.
"""

from __future__ import annotations

import numpy as np


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint intervals, sorted by start, that cover the intervals [``starts``, ``ends``]: sorted by
    start, an interval opens a new one where it starts after every earlier end (touching ones merge), and
    each merged interval ends at the largest end of its members.  An interval with ``end <= start`` is not
    dropped: a caller that wants only non-empty ones filters them first."""
    if len(starts) == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > reach[:-1]]
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new))


def covered_time(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per window [``lo``, ``hi``], how long the intervals [``starts``, ``ends``] cover of it (overlapping
    intervals counted once): a prefix sum over their union, so any number of windows and intervals cost
    a sort and a few searches."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    us, ue = union(np.asarray(starts, float), np.asarray(ends, float))
    if not len(us):
        return np.zeros(len(lo))
    lengths = ue - us
    before = np.concatenate(([0.0], np.cumsum(lengths)))  # union length before each merged interval

    def up_to(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(us, x, "right") - 1
        j = np.maximum(i, 0)
        return np.where(i >= 0, before[j] + np.clip(x - us[j], 0, lengths[j]), 0.0)

    return np.maximum(up_to(hi) - up_to(lo), 0.0)
