"""Virtual-clock runs are bit-for-bit reproducible; seeds and clocks change what they should."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.geprof_testing import run_profiled_session, small_resnet


def _run(tmp_path, name, **kw):
    return run_profiled_session(tmp_path / name, small_resnet(4), 3, **kw).profile


def test_two_virtual_runs_are_identical(tmp_path):
    a = _run(tmp_path, "a")
    b = _run(tmp_path, "b")
    assert a.path != b.path
    pd.testing.assert_frame_equal(a.op_summary, b.op_summary)
    pd.testing.assert_frame_equal(a.step_trace, b.step_trace)
    pd.testing.assert_frame_equal(a.op_statistic, b.op_statistic)
    assert a.info["start_ns"] == b.info["start_ns"] and a.info["end_ns"] == b.info["end_ns"]


def test_repeated_runs_in_the_same_output_dir_are_identical(tmp_path):
    a = _run(tmp_path, "same")
    b = _run(tmp_path, "same")
    assert a.path.parent == b.path.parent and a.path != b.path
    pd.testing.assert_frame_equal(a.op_summary, b.op_summary)
    pd.testing.assert_frame_equal(a.step_trace, b.step_trace)


def test_seed_changes_the_jitter(tmp_path):
    a = _run(tmp_path, "seed0")
    b = _run(tmp_path, "seed7", ge_options={"geprof.seed": "7"})
    assert len(a.op_summary) == len(b.op_summary)
    assert (a.op_summary["Op Name"].astype(str) == b.op_summary["Op Name"].astype(str)).mean() > 0.95
    assert not a.op_summary["Task Duration(us)"].equals(b.op_summary["Task Duration(us)"])
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(a.step_trace, b.step_trace)


def test_real_clock_keeps_structure(tmp_path):
    a = _run(tmp_path, "virtual")
    r = _run(tmp_path, "real", clock="real")
    assert r.info["clock"] == "real" and a.info["clock"] == "virtual"
    assert len(r.op_summary) == len(a.op_summary) and len(r.step_trace) == len(a.step_trace)
    # device durations do not depend on the host clock
    pd.testing.assert_series_equal(a.op_summary["Task Duration(us)"], r.op_summary["Task Duration(us)"])
