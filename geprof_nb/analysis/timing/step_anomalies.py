"""Steps slower than the typical one, and what made one of them slower: the critical paths of the step and of the
median step compared op by op (and gap by gap), so the deltas add up to the difference exactly."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

SLOW_COLUMNS = ["iteration", "step_ns", "median_ns", "excess_ns", "excess"]
EXPLAIN_COLUMNS = ["kind", "op_name", "step_ns", "median_step_ns", "delta_ns"]


def step_lengths(path: pd.DataFrame) -> pd.Series:
    """Each step's length (ns), from its critical path."""
    return path.groupby("iteration")["duration"].sum().astype(np.int64)


def slow_steps(path: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Steps longer than the median step by more than ``threshold`` (a fraction: 0.1 is 10 %), slowest first."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold) \
            or threshold < 0:
        raise ValueError(f"threshold {threshold!r} must be a finite fraction >= 0 (0.1: 10 % over the median step)")
    lengths = step_lengths(path)
    if lengths.empty:
        return pd.DataFrame(columns=SLOW_COLUMNS)
    median = float(lengths.median())
    out = pd.DataFrame({"iteration": lengths.index.to_numpy(np.int64), "step_ns": lengths.to_numpy(),
                        "median_ns": median, "excess_ns": lengths.to_numpy() - median})
    out["excess"] = out["excess_ns"] / median if median else 0.0
    out = out[out["step_ns"] > median * (1 + threshold)]
    return out.sort_values("excess_ns", ascending=False, kind="stable").reset_index(drop=True)[SLOW_COLUMNS]


def median_step(path: pd.DataFrame) -> int:
    """The step whose length is the median (the lower one of the middle two of an even count)."""
    lengths = step_lengths(path).sort_values(kind="stable")
    return int(lengths.index[(len(lengths) - 1) // 2])


def _by_cause(segments: pd.DataFrame) -> pd.Series:
    name = segments["op_name"].astype(str)
    key = np.where(segments["kind"].astype(str) == "idle", "", name)
    return segments.assign(op_name=key, kind=segments["kind"].astype(str)).groupby(
        ["kind", "op_name"])["duration"].sum()


def explain_step(path: pd.DataFrame, iteration: int, reference: int) -> pd.DataFrame:
    """Per (kind, op) on the critical path: its time in ``iteration`` and in ``reference``, and the difference;
    the differences add up to the two steps' difference.  Largest increase first; unchanged causes left out."""
    a = _by_cause(path[path["iteration"] == iteration])
    b = _by_cause(path[path["iteration"] == reference])
    both = pd.concat([a.rename("step_ns"), b.rename("median_step_ns")], axis=1).fillna(0).astype(np.int64)
    both["delta_ns"] = both["step_ns"] - both["median_step_ns"]
    both = both[both["delta_ns"] != 0].reset_index()
    out = both.sort_values("delta_ns", ascending=False, kind="stable").reset_index(drop=True)[EXPLAIN_COLUMNS]
    out.attrs["reference_step"] = reference
    return out
