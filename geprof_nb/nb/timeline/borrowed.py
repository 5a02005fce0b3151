"""Thin wrappers over private helpers of other modules that the timeline reuses rather than copies.

Each of these should become a public name of :mod:`..plots` (then this file goes away): the PNG
figures already compute what the interactive timeline needs, and a second implementation would
drift from theirs.

* :func:`step_curve_points`: ``plots._step_curve_points`` (a step curve's points per pixel column);
* :func:`step_phase_rows` and :data:`STEP_PHASE_COLORS`: ``plots._step_rows`` / ``plots._ROW_COLORS``
  (step_trace's phases as bars, inference steps as one "Iteration" bar);
* :func:`sub_rows`: ``plots._lanes`` (a row per interval so intervals of one row never overlap).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import plots

#: The colour of each step phase row, as the step timeline PNG draws it.
STEP_PHASE_COLORS: dict[str, str] = dict(plots._ROW_COLORS)


def step_curve_points(t: np.ndarray, v: np.ndarray, x0: float, x1: float, columns: int) -> np.ndarray:
    """Positions of the points that draw a step curve at ``columns`` columns over ``[x0, x1]``."""
    return plots._step_curve_points(t, v, x0, x1, columns)


def step_phase_rows(step_trace: pd.DataFrame) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """step_trace's phases, top row first: (label, absolute start µs, width µs, Iteration ID) per row."""
    return [(r.label, r.start_us, r.width_us, r.iteration) for r in plots._step_rows(step_trace)]


def sub_rows(group: np.ndarray, lo: np.ndarray, hi: np.ndarray, tolerance: float = 0.0) -> np.ndarray:
    """A sub-row per interval so that intervals of one group in one sub-row never overlap (outer first);
    ``tolerance``: how much an interval may start before the previous one of its sub-row ends."""
    return plots._lanes(group, lo, hi, tolerance)
