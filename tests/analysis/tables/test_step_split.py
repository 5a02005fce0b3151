"""The step figure every summary leads with (analysis/tables/step_split.py): its arithmetic, the outlier
rule, and a real one-step torch_npu run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb.analysis.tables.step_split import MIN_PERIODS_FOR_OUTLIERS, OUTLIER_SHARE, step_split

REAL = Path("/work/shared/real-data/msinsight_pytorch_text/level2/rank0_ascend_pt")


def breakdown(parts: list[tuple[float, float, float]], first_step: int = 1) -> pd.DataFrame:
    """step_breakdown rows from (Computing, Communication(Not Overlapped), Free) per step (us)."""
    c, n, f = map(np.asarray, zip(*parts))
    steps = np.arange(first_step, first_step + len(parts))
    return pd.DataFrame({"Device_id": 0, "Step": steps, "Computing": c, "Communication(Not Overlapped)": n,
                         "Free": f, "Stage": c + n + f})


def chained(steps: int, first_step: int = 1) -> pd.DataFrame:
    """Step bounds of consecutive steps in one window (every step but the first is a whole period)."""
    s = np.arange(first_step, first_step + steps)
    return pd.DataFrame({"step": s, "begin": s * 10, "end": s * 10 + 5})


def test_the_figure_is_the_mean_of_the_whole_periods_and_its_shares_add_up():
    # step 1 spans only itself (no previous end): it is left out, whatever it holds
    rows = breakdown([(100.0, 0.0, 0.0), (800.0, 100.0, 100.0), (810.0, 90.0, 120.0), (790.0, 110.0, 80.0)])
    split = step_split(rows, chained(4))
    assert split.steps == (2, 3, 4) and split.outliers == () and split.whole
    assert split.computing_us == pytest.approx(800.0) and split.communication_us == pytest.approx(100.0)
    assert split.free_us == pytest.approx(100.0) and split.length_us == pytest.approx(1000.0)
    assert split.shares == pytest.approx((80.0, 10.0, 10.0))
    assert split.headline() == "step 1.000 ms = Computing 80.0% / exposed Communication 10.0% / Free 10.0%"
    assert split.basis() == "mean of 3 step periods, from one iteration's end to the next"


def test_a_one_off_stall_is_left_out_and_named():
    """A 300 ms stall before step 6 of 8.7 ms steps: the figure is the other steps' (as on the virtual clock)
    and the stall is named with its step and size."""
    typical = (8_200.0, 130.0, 450.0)
    parts = [typical] * 10
    parts[5] = (8_200.0, 130.0, 450.0 + 300_000.0)  # step 6
    split = step_split(breakdown(parts), chained(10))
    assert split.steps == (2, 3, 4, 5, 7, 8, 9, 10)
    assert split.length_us == pytest.approx(8_780.0) and split.free_us == pytest.approx(450.0)
    [stall] = split.outliers
    assert (stall.step, stall.whole, stall.is_stall) == (6, True, True)
    assert stall.length_us == pytest.approx(308_780.0) and stall.extra_free_us == pytest.approx(300_000.0)
    assert split.headline() == "step 8.780 ms = Computing 93.4% / exposed Communication 1.5% / Free 5.1%"
    assert split.basis() == ("mean of 8 step periods, from one iteration's end to the next; left out as outliers: "
                             "step 6 (308.8 ms, 300.0 ms more Free than the median step)")


def test_the_outlier_threshold_is_half_the_median_step_beyond_it():
    base = (1_000.0, 0.0, 0.0)
    just_below = (1_000.0 * (1 + OUTLIER_SHARE) - 1.0, 0.0, 0.0)
    just_above = (1_000.0 * (1 + OUTLIER_SHARE) + 1.0, 0.0, 0.0)
    assert step_split(breakdown([base, base, base, just_below]), chained(4)).outliers == ()
    [slow] = step_split(breakdown([base, base, base, just_above]), chained(4)).outliers
    assert slow.step == 4 and not slow.is_stall  # the excess is Computing, not a stall
    assert slow.describe() == "step 4 (1.5 ms, 0.5 ms longer than the median step)"


def test_too_few_periods_tell_no_outlier_apart():
    """With fewer than MIN_PERIODS_FOR_OUTLIERS whole periods every one is in the mean, however long."""
    rows = breakdown([(1.0, 0.0, 0.0), (1_000.0, 0.0, 0.0), (1_000.0, 0.0, 50_000.0)])
    assert MIN_PERIODS_FOR_OUTLIERS == 3
    split = step_split(rows, chained(3))
    assert split.outliers == () and split.steps == (2, 3)
    assert split.length_us == pytest.approx(26_000.0)


def test_a_slow_first_step_is_named_though_it_is_no_whole_period():
    """An imported run's first step often includes warm-up: it is outside the figure anyway (it spans only
    itself), and named as an outlier so per-step rules leave it out too."""
    parts = [(50_000.0, 0.0, 0.0)] + [(1_000.0, 0.0, 10.0)] * 4
    split = step_split(breakdown(parts), chained(5))
    [first] = split.outliers
    assert first.step == 1 and not first.whole and split.steps == (2, 3, 4, 5)


def test_steps_that_each_span_only_themselves_say_so():
    rows = breakdown([(1_000.0, 0.0, 10.0), (1_000.0, 0.0, 30.0)])
    bounds = chained(2).assign(window=[0, 1])  # each step alone in its collection window
    split = step_split(rows, bounds)
    assert not split.whole and split.steps == (1, 2) and split.free_us == pytest.approx(20.0)
    assert split.basis() == "mean of 2 steps, each its own span: no step follows another in a collection window"


def test_no_rows_or_no_parts_is_no_figure():
    assert step_split(breakdown([(1.0, 0.0, 0.0)]).iloc[:0], chained(1)) is None
    assert step_split(breakdown([(1.0, 0.0, 0.0)]).drop(columns="Free"), chained(1)) is None


@pytest.mark.skipif(not REAL.exists(), reason="the real 910B data is not on this machine")
def test_a_real_one_step_torch_npu_run():
    """step_trace_time.csv of MindStudio Insight's test data (level2 rank 0): one step, 50, its own span."""
    p = geprof_nb.load(REAL)
    split = step_split(p.step_breakdown, p.source.step_bounds())
    computing, exposed, free = 8868.240000000003, 95962.01599999999, 25032.619  # the file's cells
    assert split.steps == (50,) and split.outliers == () and not split.whole
    assert split.length_us == pytest.approx(computing + exposed + free)
    assert split.headline() == "step 129.863 ms = Computing 6.8% / exposed Communication 73.9% / Free 19.3%"
    assert split.basis() == "the run's only step, its own span: no step before it"
    assert sum(split.shares) == pytest.approx(100.0)
