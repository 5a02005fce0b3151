"""How long the stream Gantt takes from an op_summary of many tasks to a PNG."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from harness import Result, median_time  # noqa: E402

from geprof_nb.nb.plots import figure_png, task_gantt  # noqa: E402

TASK_TYPES = ["AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MIX_AIC", "COMMUNICATION", "MEMCPY_ASYNC"]


def synthetic_op_summary(n: int, streams: int = 4, seed: int = 0) -> pd.DataFrame:
    """The op_summary columns the Gantt reads, for ``n`` tasks on ``streams`` streams: µs-scale tasks
    (1% long ones) back to back with µs gaps, absolute µs timestamps of today's size, msprof dtypes
    (nullable Int64 Stream ID, categorical Task Type)."""
    rng = np.random.default_rng(seed)
    stream = rng.integers(1, streams + 1, n)
    dur = np.where(rng.random(n) < 0.01, rng.exponential(200.0, n), rng.exponential(2.0, n))
    start = np.empty(n)
    for s in range(1, streams + 1):
        mine = stream == s
        start[mine] = np.cumsum(dur[mine] + rng.exponential(1.0, mine.sum())) - dur[mine]
    return pd.DataFrame({
        "Stream ID": pd.array(stream, dtype="Int64"),
        "Task Type": pd.Categorical.from_codes(rng.integers(0, len(TASK_TYPES), n), TASK_TYPES),
        "Task Start Time(us)": 1.7e15 + start,
        "Task Duration(us)": dur,
    })


def _gantt_png(n: int, target_s: float) -> Result:
    frame = synthetic_op_summary(n)
    sizes: dict[str, int] = {}

    def run() -> None:
        sizes["png_bytes"] = len(figure_png(task_gantt(frame)))

    seconds = median_time(run, runs=5)
    return Result(f"task_gantt {n:,} tasks -> PNG", seconds, "s", f"<= {target_s}", seconds <= target_s,
                  {"tasks": n, "streams": 4, "width_px": 1100, **sizes})


def gantt_100k(quick: bool) -> Result:
    """task_gantt + figure_png of 100,000 tasks (target: <= 0.3 s)."""
    return _gantt_png(100_000, 0.3)


def gantt_1m(quick: bool) -> Result:
    """task_gantt + figure_png of 1,000,000 tasks (target: <= 1.5 s)."""
    return _gantt_png(1_000_000, 1.5)


BENCHMARKS = [gantt_100k, gantt_1m]
