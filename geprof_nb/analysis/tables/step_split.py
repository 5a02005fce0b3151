"""The one step definition every summary leads with:
``step 8.777 ms = Computing 93.1% / exposed Communication 1.5% / Free 5.4%``.

A *step* is a step period, from one iteration's end to the next: step_breakdown's window
(:func:`.breakdown.step_periods`), so its Free holds the host gap before the step.  Its length is
Computing + Communication(Not Overlapped) + Free, the whole period (torch_npu's Stage leaves out
its pipeline Bubble; here it is 0), so the three shares add up to 100 %.

The figure is the mean over the *typical* step periods: the whole periods that are not outliers.
A mean, not a median, because the parts of a mean add up to it and the parts of a median do not;
leaving the outliers out makes it as robust as the median against a one-off stall.  An outlier is a
step whose length exceeds the median whole period's by more than :data:`OUTLIER_SHARE` of it
(:func:`step_split` names each, with how much longer it was and how much of that is Free, a stall).
Outliers are told apart only from :data:`MIN_PERIODS_FOR_OUTLIERS` whole periods on; a run with
fewer has every period in its mean.

Other step figures are other definitions and are named where they appear: step_trace's
Iteration Time (an iteration's own span, model start to iteration end, without the gap before it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .breakdown import step_periods, whole_periods

#: The parts of a step, as step_breakdown names them, and as the headline names them.
PARTS = ("Computing", "Communication(Not Overlapped)", "Free")
PART_LABELS = ("Computing", "exposed Communication", "Free")
#: A step longer than the median step by more than this share of it is an outlier: a real step's
#: length varies by a few percent from step to step (the advisor's 5 % noise level), a one-off stall
#: (a checkpoint save, a data loader that hiccups, the user's code once between two steps) by far more.
OUTLIER_SHARE = 0.5
#: Fewest whole step periods among which an outlier is told apart: with three, one outlier cannot
#: move the median (with two, either could be the odd one).
MIN_PERIODS_FOR_OUTLIERS = 3


@dataclass(frozen=True)
class OutlierStep:
    """A step far longer than the median one (:data:`OUTLIER_SHARE`), left out of the step figure."""

    step: int
    length_us: float
    #: How much longer than the median step.
    extra_us: float
    #: How much more Free (device idle) than the median step: the stall, when it explains the excess.
    extra_free_us: float
    #: Whether it is a whole step period (from the previous iteration's end); the first step of a
    #: window spans only itself.
    whole: bool

    def describe(self) -> str:
        why = (f"{self.extra_free_us / 1000:,.1f} ms more Free than the median step" if self.is_stall
               else f"{self.extra_us / 1000:,.1f} ms longer than the median step")
        return f"step {self.step} ({self.length_us / 1000:,.1f} ms, {why})"

    @property
    def is_stall(self) -> bool:
        """Most of the excess is device idle time: the host (or the input pipeline) stalled once."""
        return self.extra_free_us >= 0.5 * self.extra_us


@dataclass(frozen=True)
class StepSplit:
    """The step figure: mean length and parts (us) of the typical steps, which steps, which were left out."""

    length_us: float
    computing_us: float
    communication_us: float
    free_us: float
    #: The steps averaged (typical whole periods).
    steps: tuple[int, ...]
    #: Steps left out as outliers, in step order.
    outliers: tuple[OutlierStep, ...]
    #: The median whole step period's length (what outliers are measured against).
    median_us: float
    #: Whether the steps averaged are whole periods; not when no step follows another in the run
    #: (one step, or steps each alone in its collection window): each then spans only itself.
    whole: bool = True

    @property
    def parts_us(self) -> tuple[float, float, float]:
        return self.computing_us, self.communication_us, self.free_us

    @property
    def shares(self) -> tuple[float, float, float]:
        """Computing, exposed Communication and Free as % of the step (they add up to 100)."""
        if self.length_us <= 0:
            return (float("nan"),) * 3
        return tuple(100.0 * p / self.length_us for p in self.parts_us)  # type: ignore[return-value]

    def headline(self) -> str:
        """``step X ms = Computing a% / exposed Communication b% / Free c%``."""
        parts = " / ".join(f"{label} {share:.1f}%" for label, share in zip(PART_LABELS, self.shares))
        return f"step {self.length_us / 1000:.3f} ms = {parts}"

    def basis(self) -> str:
        """What the figure is: how many step periods it averages and which outliers it leaves out."""
        n = len(self.steps)
        if not self.whole:
            text = ("the run's only step, its own span: no step before it" if n == 1 else
                    f"mean of {n} steps, each its own span: no step follows another in a collection window")
        else:
            text = f"mean of {n} step period{'s' * (n != 1)}, from one iteration's end to the next"
        if self.outliers:
            text += "; left out as outliers: " + ", ".join(o.describe() for o in self.outliers)
        return text

    @property
    def outlier_steps(self) -> set[int]:
        return {o.step for o in self.outliers}


def step_split(breakdown: pd.DataFrame, bounds: pd.DataFrame) -> StepSplit | None:
    """The step figure of a run's step_breakdown and step bounds (:meth:`..sources.source.Source.step_bounds`);
    ``None`` when step_breakdown has no rows or lacks a part."""
    if breakdown.empty or not set(PARTS) <= set(breakdown.columns):
        return None
    whole = step_periods(breakdown, bounds)
    all_steps = _steps(breakdown)
    whole_steps = set(all_steps[whole_periods(breakdown, bounds)].tolist())
    length = _length(whole)
    outliers: list[OutlierStep] = []
    median = float(np.median(length)) if len(length) else 0.0
    if len(whole) >= MIN_PERIODS_FOR_OUTLIERS and median > 0:
        median_free = float(np.median(whole["Free"].to_numpy(np.float64)))
        lengths, free = _length(breakdown), breakdown["Free"].to_numpy(np.float64)
        for i in np.flatnonzero(lengths > median * (1 + OUTLIER_SHARE)):
            step = int(all_steps[i])
            outliers.append(OutlierStep(step, float(lengths[i]), float(lengths[i]) - median,
                                        float(free[i]) - median_free, step in whole_steps))
    left_out = {o.step for o in outliers}
    typical = whole[~np.isin(_steps(whole), list(left_out))]
    parts = [float(typical[p].astype(np.float64).mean()) for p in PARTS]
    steps = tuple(_steps(typical).tolist())
    return StepSplit(sum(parts), *parts, steps, tuple(outliers), median, whole=bool(whole_steps & set(steps)))


def _steps(rows: pd.DataFrame) -> np.ndarray:
    """Each row's step number (-1 where the table has none)."""
    return pd.to_numeric(rows["Step"], errors="coerce").fillna(-1).to_numpy(np.int64)


def _length(rows: pd.DataFrame) -> np.ndarray:
    """Each row's step length: Computing + Communication(Not Overlapped) + Free (us)."""
    return rows[list(PARTS)].to_numpy(np.float64).sum(axis=1)
