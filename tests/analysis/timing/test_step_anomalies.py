"""Slow steps and what made one slow: a step made slow by a known cause gets the delta attributed to it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.timing.critical_path import frame, step_path
from geprof_nb.analysis.timing.dependency_graph import ASSUMPTIONS_IMPORTED, Tasks, step_graphs
from geprof_nb.analysis.timing.step_anomalies import explain_step, median_step, slow_steps
from helpers.geprof_testing import build_tiny_graph, run_profiled_session


def _steps(slow_op_ns: int, host_ns: int) -> pd.DataFrame:
    """Three steps of one stream, A then B; step 2's B takes ``slow_op_ns`` longer and waits ``host_ns`` more for
    its launch.  Durations by hand: A 100, B 200, a 50 ns host gap before B."""
    rows, bounds = [], []
    for k, step in enumerate((1, 2, 3)):
        begin = k * 10_000
        extra_b = slow_op_ns if step == 2 else 0
        gap = 50 + (host_ns if step == 2 else 0)
        a = (begin, begin + 100)
        b = (a[1] + gap, a[1] + gap + 200 + extra_b)
        rows += [("A", a), ("B", b)]
        bounds.append((step, begin, b[1]))
    names = np.array([r[0] for r in rows], object)
    start = np.array([r[1][0] for r in rows])
    end = np.array([r[1][1] for r in rows])
    tasks = Tasks(names, names.copy(), np.full(len(rows), "AI_CORE", object), np.zeros(len(rows), np.int64),
                  np.arange(len(rows)), start, end, np.ones(len(rows), bool), True, ASSUMPTIONS_IMPORTED)
    graphs = step_graphs(tasks, pd.DataFrame(bounds, columns=["step", "begin", "end"]))
    return frame([row for g in graphs for row in step_path(g, tasks)], tasks)


def test_a_slow_op_and_a_host_stall_are_what_made_the_step_slow():
    path = _steps(slow_op_ns=700, host_ns=300)
    assert median_step(path) == 3  # by length 1, 3 (both 350 ns), 2: the middle one
    slow = slow_steps(path, 0.1)
    assert slow[["iteration", "step_ns", "median_ns", "excess_ns"]].values.tolist() == [[2, 1350, 350.0, 1000.0]]
    explained = explain_step(path, 2, 3)
    assert explained[["kind", "op_name", "delta_ns"]].values.tolist() == [["compute", "B", 700], ["host", "B", 300]]
    assert explained["delta_ns"].sum() == 1000
    assert slow_steps(path, 3.0).empty  # 1000 / 350 is under 300 %


def test_the_threshold_is_checked():
    with pytest.raises(ValueError, match="threshold -0.5 must be a finite fraction >= 0"):
        slow_steps(_steps(0, 0), -0.5)


def test_explain_step_on_a_run_adds_up_to_the_difference(tmp_path):
    profile = run_profiled_session(tmp_path, build_tiny_graph(2)[0], steps=4, hccl="on").profile
    b = profile.source.step_bounds().set_index("step")
    lengths = b["end"] - b["begin"]
    reference = int(lengths.sort_values(kind="stable").index[(len(lengths) - 1) // 2])
    for n in lengths.index:
        explained = profile.explain_step(int(n))
        assert explained.attrs["reference_step"] == reference
        assert explained["delta_ns"].sum() == lengths[n] - lengths[reference]
    with pytest.raises(ValueError, match="iteration"):
        profile.explain_step(99)
