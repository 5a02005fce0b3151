"""msprof's aicpu summary from hand-written aicpu and task_track records."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.rundir import RunDir
from geprof_nb.analysis.tables.aicpu import AICPU, aicpu
from geprof_nb.ge.aicpu import aicpu_records
from geprof_nb.prof.rawdata import RtTaskType
from helpers.rawrun_helpers import Hashes, records, write_run

# Reference §4.5, verbatim.
HEADER = ("Timestamp(us),Node,Compute_time(us),Memcpy_time(us),Task_time(us),Dispatch_time(us),Total_time(us),"
          "Stream ID,Task ID").split(",")


@pytest.fixture
def run(tmp_path) -> RunDir:
    h = Hashes()
    track = records("task_track", [
        dict(connection_id=3, model_id=1, stream_id=2, task_id=7, task_type=RtTaskType.KERNEL_AICPU,
             kernel_name=h("NonZero_1")),
        dict(connection_id=5, model_id=1, stream_id=2, task_id=9, task_type=RtTaskType.KERNEL_AICPU,
             kernel_name=h("gather/Unique")),
    ])
    rows = [  # (timestamp, connection id, iteration, compute, memcpy, dispatch) in ns; stored out of order
        (2_000_500, 5, 1, 30_000, 1_500, 4_000),
        (1_000_250, 3, 1, 12_345, 678, 5_000),
        (3_000_000, 3, 2, 10_000, 678, 5_000),
        (3_500_000, 42, 2, 1_000, 0, 2_000),  # no task track: node unknown
    ]
    aic = records("aicpu", [dict(timestamp=t, connection_id=c, iteration=i, compute_ns=cp, memcpy_ns=m,
                                 task_ns=cp + m, dispatch_ns=d, total_ns=cp + m + d) for t, c, i, cp, m, d in rows])
    return RunDir(write_run(tmp_path / "run", {"task_track": track, "aicpu": aic}, h.table))


def test_header_and_order(run):
    t = aicpu(run)
    assert list(t.columns) == HEADER == AICPU
    assert t["Timestamp(us)"].tolist() == [1000.25, 2000.5, 3000.0, 3500.0]
    assert t["Node"].tolist() == ["NonZero_1", "gather/Unique", "NonZero_1", "N/A"]


def test_values(run):
    t = aicpu(run)
    first = t.iloc[0]
    assert (first["Compute_time(us)"], first["Memcpy_time(us)"], first["Task_time(us)"],
            first["Dispatch_time(us)"], first["Total_time(us)"]) == (12.345, 0.678, 13.023, 5.0, 18.023)
    assert t["Stream ID"].tolist()[:3] == [2, 2, 2] and t["Task ID"].tolist()[:3] == [7, 9, 7]
    assert t["Stream ID"].isna().tolist() == [False, False, False, True]
    assert t["Task ID"].dtype == "Int64"


def test_breakdown_records_round_trip(tmp_path):
    """What ge.aicpu writes reads back with task + dispatch == total in every row."""
    h = Hashes()
    track = records("task_track", [dict(connection_id=0, stream_id=1, task_id=4, kernel_name=h("DropOutGenMask"))])
    total = np.array([40_000, 41_234, 36_000, 3_000])
    rec = aicpu_records(np.array([10, 20, 30, 40]) * 1000, 0, np.arange(1, 5), total, nbytes=20_000)
    t = aicpu(RunDir(write_run(tmp_path / "r", {"task_track": track, "aicpu": rec}, h.table)))
    assert t["Total_time(us)"].tolist() == (total / 1000).tolist()
    assert (t["Task_time(us)"] + t["Dispatch_time(us)"]).to_numpy() == pytest.approx(t["Total_time(us)"].to_numpy())
    assert (t["Compute_time(us)"] + t["Memcpy_time(us)"]).to_numpy() == pytest.approx(t["Task_time(us)"].to_numpy())
    assert t["Memcpy_time(us)"].tolist()[:3] == [10.0, 10.0, 10.0]  # 20 kB at 2 GB/s


def test_empty_run(tmp_path):
    t = aicpu(RunDir(write_run(tmp_path / "r", {}, {})))
    assert t.empty and list(t.columns) == HEADER
    assert isinstance(t, pd.DataFrame)
