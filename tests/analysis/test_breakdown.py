"""step_breakdown: the torch_npu step_trace_time split, on hand-made spans and on a real run."""

import numpy as np
import pandas as pd
import pytest
from geprof_testing import build_tiny_graph, run_profiled_session

from geprof_nb import ge
from geprof_nb.analysis.breakdown import STEP_TRACE_TIME, step_breakdown
from geprof_nb.analysis.tables import OpRows

T0 = 1_767_225_600_000_000_000


def rows(spans):
    """OpRows from (iteration, start ns offset, duration ns, communication?)."""
    it, start, dur, comm = map(np.asarray, zip(*spans))
    frame = pd.DataFrame({"Task Type": np.where(comm, "COMMUNICATION", "AI_CORE"), "Task Duration(us)": dur / 1000})
    return OpRows(frame, it.astype(np.int64), (T0 + start).astype(np.int64), np.arange(len(it)))


def trace(ends_us, first_start_us):
    """Step bounds: step 1 begins at first_start, every step ends at its entry of ends."""
    ends = T0 + np.asarray(ends_us, np.int64) * 1000
    begin = np.r_[T0 + first_start_us * 1000, ends[:-1]]
    return pd.DataFrame({"step": np.arange(1, len(ends) + 1), "begin": begin, "end": ends})


def test_hand_made_overlap():
    # step 1 window [0, 100] us: compute 10-40 and 50-70, comm 30-60 (overlaps both compute spans by 10 each)
    r = rows([(1, 10_000, 30_000, False), (1, 50_000, 20_000, False), (1, 30_000, 30_000, True)])
    b = step_breakdown(r, trace([100], 0)).iloc[0]
    assert list(b.index) == STEP_TRACE_TIME
    assert b["Computing"] == 50 and b["Communication"] == 30 and b["Overlapped"] == 20
    assert b["Communication(Not Overlapped)"] == 10 and b["Free"] == 100 - 60
    assert b["Stage"] == 100 and b["Bubble"] == 0 and b["Preparing"] == 10
    assert b["Communication(Not Overlapped and Exclude Receive)"] == 10


def test_windows_follow_iteration_ends():
    r = rows([(1, 5_000, 10_000, False), (2, 105_000, 10_000, False), (2, 110_000, 20_000, True)])
    b = step_breakdown(r, trace([100, 200], 0))
    assert list(b["Step"]) == [1, 2]
    assert list(b["Stage"]) == [100, 100]
    assert b.loc[1, "Preparing"] == 5 and b.loc[1, "Overlapped"] == 5 and b.loc[1, "Communication"] == 20


def test_preparing_counts_from_the_framework_step_start_where_known():
    """torch_npu's Preparing: first task - framework step start (bounds' framework_begin); a step without one
    (-1) counts from its window's start.  The windows themselves do not move."""
    r = rows([(1, 5_000, 10_000, False), (2, 105_000, 10_000, False)])
    b = step_breakdown(r, trace([100, 200], 0).assign(framework_begin=[T0 + 2_000, -1]))
    assert b["Preparing"].tolist() == [3.0, 5.0]
    assert b["Stage"].tolist() == [100, 100] and b["Free"].tolist() == [90, 90]


def test_real_run_adds_up(tmp_path):
    run = run_profiled_session(tmp_path, build_tiny_graph(world_size=2)[0], steps=3)
    b = run.profile.step_breakdown
    assert len(b) == 3 and (b["Computing"] > 0).all() and (b["Communication"] > 0).all()
    total = b["Computing"] + b["Communication(Not Overlapped)"] + b["Free"]
    assert np.allclose(total, b["Stage"], atol=1e-6)
    assert np.allclose(b["Overlapped"] + b["Communication(Not Overlapped)"], b["Communication"])
    assert (b["Free"] >= 0).all() and (b["Preparing"] >= 0).all()
    # Stage (step length) is the time between iteration ends
    ends = run.profile.step_trace["Iteration End(us)"].to_numpy()
    assert b["Stage"].iloc[1:].to_numpy() == pytest.approx(np.diff(ends), abs=0.5)


def test_task_trace_l0_splits_communication_as_l1_does(tmp_path):
    """At l0 op_summary has no Task Type; the collectives are known from the device's task type (HCCL)."""
    graph = ge.models.mlp(training=True, world_size=8)
    l0 = run_profiled_session(tmp_path / "l0", graph, 3, task_trace="l0").profile
    l1 = run_profiled_session(tmp_path / "l1", ge.models.mlp(training=True, world_size=8), 3).profile
    assert set(l0.op_summary["Task Type"].astype(str)) == {"N/A"}
    hccl = l0.task_time[l0.task_time["kernel_type"].astype(str) == "HCCL"]
    assert len(hccl) == 3 and l0.source.communication_rows().sum() == 3
    a, b = l0.step_breakdown, l1.step_breakdown
    assert (a["Communication"] > 0).all()
    assert a["Communication"].sum() == pytest.approx(hccl["task_time(us)"].sum(), abs=1e-6)  # one per step
    pd.testing.assert_frame_equal(a, b)
