"""torch_npu-style memory tables (analysis.tables.memory): a static plan (``static_op_mem``, once) timed by
the task log (HWTS) and the step trace, in a run directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.rundir import RunDir
from geprof_nb.analysis.tables import memory
from geprof_nb.analysis.tables.memory import (
    MEMORY_RECORD,
    OPERATOR_MEMORY,
    memory_peak,
    memory_record,
    operator_memory,
    tensor_lifetimes,
)
from geprof_nb.prof import rawdata
from helpers.memory_runs import HELD, write_memory_run

ROOT = Path(__file__).resolve().parents[3]
MB = 1024 * 1024

#: Model 1 (pool 4096): (tensor, addr, size, alloc conn, free conn, stream). "out" is held to the step's end.
PLAN = [(11, 0, 1024, 1, 3, 3), (22, 1024, 2048, 2, 5, 3), (33, 0, 1024, 4, HELD, 4), (44, 2048, 512, 6, 7, 3)]
#: The task log: (connection id, iteration, start, duration).  Step 2 ran only some tasks, and the task
#: that releases "left" is not in the log (a run cut short), so "left" is never released.
TASKS = [(1, 1, 1000, 100), (2, 1, 1500, 100), (3, 1, 1900, 100), (4, 1, 2500, 100), (5, 1, 2900, 100),
         (1, 2, 11000, 100), (3, 2, 11901, 100), (6, 2, 13000, 100)]
STEP_ENDS = [(1, 1, 3500)]  # (model, iteration, model end of the step)
#: The events the tables must show: (timestamp, tensor, alloc?, model's allocated total after it, stream).
EVENTS = [(1000, 11, True, 1024, 3), (1500, 22, True, 3072, 3), (2000, 11, False, 2048, 3),
          (2500, 33, True, 3072, 4), (3000, 22, False, 1024, 3), (3500, 33, False, 0, 4),
          (11000, 11, True, 1024, 3), (12001, 11, False, 0, 3), (13000, 44, True, 512, 3)]


def _run(path: Path, plans=((1, 4096, PLAN),), tasks=TASKS, step_ends=STEP_ENDS, **kwargs) -> RunDir:
    return write_memory_run(path, list(plans), tasks, step_ends, **kwargs)


@pytest.fixture
def run(tmp_path) -> RunDir:
    return _run(tmp_path / "run")


def test_operator_memory_header_and_values(run):
    df = operator_memory(run)
    assert list(df.columns) == OPERATOR_MEMORY == [
        "Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)", "Duration(us)",
        "Active Duration(us)", "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
        "Allocation Total Active(MB)", "Release Total Allocated(MB)", "Release Total Reserved(MB)",
        "Release Total Active(MB)", "Stream Ptr", "Device Type"]
    assert list(df["Name"]) == ["conv1:0", "relu:0", "out:0", "conv1:0", "left:0"]
    assert list(df["Size(KB)"]) == [1.0, 2.0, 1.0, 1.0, 0.5]
    assert list(df["Allocation Time(us)"]) == [1.0, 1.5, 2.5, 11.0, 13.0]
    assert list(df["Release Time(us)"][:4]) == [2.0, 3.0, 3.5, 12.001]
    assert list(df["Duration(us)"][:4]) == [1.0, 1.5, 1.0, 1.001]
    assert list(df["Allocation Total Allocated(MB)"] * MB) == [1024, 3072, 3072, 1024, 512]
    assert list(df["Release Total Allocated(MB)"][:4] * MB) == [2048, 1024, 0, 0]
    assert (df["Allocation Total Reserved(MB)"] * MB == 4096).all()
    assert (df["Release Total Reserved(MB)"][:4] * MB == 4096).all()
    assert list(df["Stream Ptr"]) == [3, 3, 4, 3, 3]
    assert (df["Device Type"] == "NPU:0").all()
    # never released: the release side is empty
    last = df.iloc[4]
    assert np.isnan(last["Release Time(us)"]) and np.isnan(last["Duration(us)"])
    assert np.isnan(last["Release Total Allocated(MB)"])
    # a static pool has no caching allocator: Active equals the plain values
    pd.testing.assert_series_equal(df["Active Release Time(us)"], df["Release Time(us)"], check_names=False)
    pd.testing.assert_series_equal(df["Active Duration(us)"], df["Duration(us)"], check_names=False)
    pd.testing.assert_series_equal(df["Allocation Total Active(MB)"], df["Allocation Total Allocated(MB)"],
                                   check_names=False)
    pd.testing.assert_series_equal(df["Release Total Active(MB)"], df["Release Total Allocated(MB)"],
                                   check_names=False)


def test_memory_record_header_and_values(run):
    df = memory_record(run)
    assert list(df.columns) == MEMORY_RECORD == [
        "Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
        "Stream Ptr", "Device Type"]
    assert len(df) == len(EVENTS)
    assert (df["Component"] == "GE").all() and (df["Device Type"] == "NPU:0").all()
    assert list(df["Timestamp(us)"]) == [e[0] / 1000 for e in EVENTS]
    assert list(df["Total Allocated(MB)"] * MB) == [e[3] for e in EVENTS]
    assert list(df["Total Active(MB)"]) == list(df["Total Allocated(MB)"])
    assert (df["Total Reserved(MB)"] * MB == 4096).all()
    assert list(df["Stream Ptr"]) == [e[4] for e in EVENTS]


def test_held_tensors_are_released_at_the_step_end_of_the_task_log_without_a_step_trace(tmp_path):
    run = _run(tmp_path / "run", step_ends=[])
    df = memory_record(run)
    # "out" is released when the step's last task of model 1 ends (conn 5: 2900 + 100)
    assert list(df["Timestamp(us)"] * 1000)[:6] == [1000, 1500, 2000, 2500, 3000, 3000]
    assert list(df["Total Allocated(MB)"] * MB)[:6] == [1024, 3072, 2048, 3072, 1024, 0]


def test_memory_peak(run):
    peak = memory_peak(run)
    assert peak.allocated_bytes == 3072
    assert peak.timestamp_ns == 1500 and peak.time_us == 1.5  # the first time it was reached
    assert peak.tensor == "relu:0" and peak.model_id == 1
    assert peak.reserved_bytes == 4096


def test_two_models_add_up(tmp_path):
    """Totals are the device's: each model's latest totals summed; a model counts from its first event."""
    other = (2, 8192, [(55, 0, 512, 8, 9, 5)])
    tasks = TASKS[:5] + [(8, 1, 1200, 100), (9, 1, 3100, 100)]
    run = _run(tmp_path / "run", plans=[(1, 4096, PLAN), other], tasks=tasks)
    df = memory_record(run)
    assert list(df["Timestamp(us)"] * 1000) == [1000, 1200, 1500, 2000, 2500, 3000, 3200, 3500]
    assert list(df["Total Allocated(MB)"] * MB) == [1024, 1536, 3584, 2560, 3584, 1536, 1024, 0]
    assert list(df["Total Reserved(MB)"] * MB) == [4096] + [4096 + 8192] * 7
    peak = memory_peak(run)
    assert (peak.allocated_bytes, peak.timestamp_ns, peak.tensor) == (3584, 1500, "relu:0")
    om = operator_memory(run)
    assert list(om["Name"]) == ["conv1:0", "other_model:0", "relu:0", "out:0"]
    assert list(om["Duration(us)"]) == [1.0, 2.0, 1.5, 1.0]
    assert list(om["Release Total Allocated(MB)"] * MB) == [2560, 1024, 1536, 0]


def test_unknown_names_and_empty_runs(tmp_path):
    run = _run(tmp_path / "unknown", names={})
    assert operator_memory(run)["Name"][0] == f"<unknown 0x{11:016x}>"
    empty = _run(tmp_path / "empty", plans=[], tasks=[], step_ends=[])
    assert list(operator_memory(empty).columns) == OPERATOR_MEMORY and operator_memory(empty).empty
    assert list(memory_record(empty).columns) == MEMORY_RECORD and memory_record(empty).empty
    assert memory_peak(empty) is None


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """ResNet-50's plan and two scheduled steps, written as a run: the static plan, the task log
    (without the trace tasks, as the runtime reports it) and the step trace's model ends."""
    from geprof_nb import ge
    from geprof_nb.ge.compiler import CompiledModel
    from geprof_nb.ge.device import CostModel, get_device
    from geprof_nb.ge.memory import plan_memory, static_op_mem
    from geprof_nb.ge.schedule import StreamSchedule
    from geprof_nb.prof.msprof import hash_id

    g = ge.models.resnet50(batch_size=2, image_size=64, world_size=8)
    cm = CompiledModel(g, CostModel(get_device("Ascend910B")), 0, 1)
    table = cm.task_table(cm.profiling_points())
    plan = plan_memory(cm, table)
    times = StreamSchedule(table).steps(2, np.random.default_rng(0))
    launch = np.array([0, int(times.end[0]) + 1000])  # the second step starts after the first
    start = launch[:, None] + times.start
    end = start + times.dur
    base = 100
    keep = np.flatnonzero(table.rt_type != rawdata.RtTaskType.PROFILER_TRACE)
    path = tmp_path_factory.mktemp("real") / "run"
    _run(path, plans=[], tasks=[], step_ends=[(1, k + 1, int(end[k].max())) for k in range(2)],
                     names={hash_id(n): n for n in plan.names})
    data = path / rawdata.device_dir(0)
    np.save(data / rawdata.chunk_name("static_op_mem", 0), static_op_mem(plan, 1, base, lambda names: [hash_id(n) for n in names]), allow_pickle=False)
    hw = np.zeros(2 * len(keep), rawdata.HWTS_DTYPE)
    hw["start"] = start[:, keep].ravel()
    hw["dur"] = times.dur[:, keep].ravel()
    hw["connection_id"] = np.tile(base + keep, 2)
    hw["iteration"] = np.repeat([1, 2], len(keep))
    np.save(data / rawdata.chunk_name("hwts", 0), hw, allow_pickle=False)
    return RunDir(path), plan, start, end


def test_tables_from_a_real_plan(real):
    run, plan, start, end = real
    om = operator_memory(run)
    assert len(om) == 2 * len(plan)
    assert not om["Release Time(us)"].isna().any()
    assert (om["Duration(us)"] >= 0).all()
    sizes = dict(zip(plan.names, plan.size / 1024))
    assert (om["Size(KB)"] == om["Name"].map(sizes).astype(float)).all()
    first = om.iloc[: len(plan)]
    assert first["Allocation Time(us)"].max() < om.iloc[len(plan):]["Allocation Time(us)"].min()
    k = plan.index("gradients/HcomAllReduce_0:0")
    row = first[first["Name"] == plan.names[k]].iloc[0]
    assert row["Duration(us)"] == (end[0].max() - start[0][plan.alloc_task[k]]) / 1000

    rec = memory_record(run)
    assert len(rec) == 4 * len(plan)
    assert rec["Total Allocated(MB)"].min() >= 0 and rec["Total Allocated(MB)"].iloc[-1] == 0
    assert (rec["Total Reserved(MB)"] * MB == plan.pool_size).all()
    peak = memory_peak(run)
    assert peak.allocated_bytes == int(round(rec["Total Allocated(MB)"].max() * MB)) <= plan.pool_size
    # the peak on the tasks' clock, by hand: every allocation at its task's start, every release at its
    # task's end (held ones at the step's end), releases first where they meet; streams overlap, so the
    # launch-order peak of the plan is an upper bound
    ts, delta = [], []
    for s in range(2):
        held = np.where(plan.until_end, end[s].max(), end[s][plan.free_task])
        ts += [start[s][plan.alloc_task], held]
        delta += [plan.size, -plan.size]
    ts, delta = np.concatenate(ts), np.concatenate(delta)
    order = np.lexsort((delta > 0, ts))
    assert peak.allocated_bytes == int(np.cumsum(delta[order]).max()) <= plan.peak_live_bytes


def test_every_event_is_its_task_time(real):
    """An alloc at its producer task's start, a release at its last reader's end (or the step's end),
    with the plan's address, size and stream."""
    run, plan, start, end = real
    tl = tensor_lifetimes(run)
    idx = tl["Name"].map({n: i for i, n in enumerate(plan.names)}).to_numpy()
    step = (tl["Allocation Time(us)"].to_numpy() * 1000 >= start[1].min()).astype(int)  # 0 or 1
    assert (tl["Address"].to_numpy() == plan.offset[idx]).all()
    assert (tl["Size(KB)"].to_numpy() * 1024 == plan.size[idx]).all()
    assert (tl["Stream ID"].to_numpy() == plan.stream[idx]).all()
    alloc_ns = start[step, plan.alloc_task[idx]]
    free_ns = np.where(plan.until_end[idx], end.max(axis=1)[step], end[step, plan.free_task[idx]])
    assert (tl["Allocation Time(us)"].to_numpy() == alloc_ns / 1000).all()
    assert (tl["Release Time(us)"].to_numpy() == free_ns / 1000).all()


def test_every_step_allocates_and_releases_each_tensor_once(real):
    run, plan, _, _ = real
    rec = memory_record(run)
    allocated = (rec["Total Allocated(MB)"] * MB).round().astype(np.int64).to_numpy()
    assert allocated.max() <= plan.pool_size
    # the totals go back to zero exactly at the end of each step, and never below
    assert (allocated >= 0).all() and (allocated == 0).sum() == 2


def test_a_release_and_an_allocation_at_the_same_time_come_in_task_order(tmp_path):
    """Tasks back to back on one stream: b (read by task 2) is released at the very time c (task 3's
    output) is allocated at the same address; the release must come first or allocated would exceed the pool."""
    plan = [(11, 0, 512, 1, 3, 0), (22, 512, 512, 1, 2, 0), (33, 512, 512, 3, 3, 0)]
    tasks = [(1, 1, 0, 10), (2, 1, 10, 10), (3, 1, 20, 10)]
    run = _run(tmp_path / "run", plans=[(1, 1024, plan)], tasks=tasks, step_ends=[(1, 1, 30)], chunks=1)
    rec = memory_record(run)
    assert list(rec["Total Allocated(MB)"] * MB) == [512, 1024, 512, 1024, 512, 0]
    om = operator_memory(run)
    assert list(om["Name"]) == ["conv1:0", "relu:0", "out:0"]
    assert (om["Allocation Total Allocated(MB)"] * MB).max() <= 1024


def assert_step_rows(run, iteration, alloc_rows, record_rows):
    """The tables of one step equal the whole run's rows of it (names compared as text: a step's own
    categorical lists its names in its own order)."""
    def same(part, whole):
        pd.testing.assert_frame_equal(part, whole.reset_index(drop=True), check_categorical=False)

    same(operator_memory(run, iteration=iteration), operator_memory(run).iloc[alloc_rows])
    same(tensor_lifetimes(run, iteration=iteration), tensor_lifetimes(run).iloc[alloc_rows])
    same(memory_record(run, iteration=iteration), memory_record(run).iloc[record_rows])


def test_an_iteration_s_tables_are_the_whole_run_s_rows_of_that_step(real):
    """Built from the step's tasks alone (one model, steps apart in time), equal to the whole run's rows."""
    run, plan, start, end = real
    for k in (1, 2):
        alloc_ns = tensor_lifetimes(run)["Allocation Time(us)"].to_numpy() * 1000
        record_ns = memory_record(run)["Timestamp(us)"].to_numpy() * 1000
        in_step = lambda ns: np.flatnonzero((ns >= start[k - 1].min()) & (ns <= end[k - 1].max()))  # noqa: E731
        assert len(in_step(alloc_ns)) == len(plan) and len(in_step(record_ns)) == 2 * len(plan)
        assert_step_rows(run, k, in_step(alloc_ns), in_step(record_ns))
        assert len(memory._events(run, 0, k)) == 2 * len(plan)  # the step's own events, not the whole run's
        rec = memory_record(run, iteration=k)
        peak = memory_peak(run, iteration=k)
        i = int(np.argmax(rec["Total Allocated(MB)"].to_numpy()))
        assert peak.allocated_bytes == int(round(rec["Total Allocated(MB)"].iloc[i] * MB))
        assert peak.timestamp_ns == int(round(rec["Timestamp(us)"].iloc[i] * 1000))
    assert memory_peak(run, iteration=2).allocated_bytes == memory_peak(run).allocated_bytes


def test_a_step_that_its_own_tasks_cannot_tell_is_read_from_the_whole_run(tmp_path):
    """Step 2 leaves "left" unreleased (its reader is not in the log), and with two models the totals
    count model 2's pool from its first step on: both read step 2's rows from the whole run."""
    run = _run(tmp_path / "cut")
    assert_step_rows(run, 1, [0, 1, 2], [0, 1, 2, 3, 4, 5])
    assert_step_rows(run, 2, [3, 4], [6, 7, 8])
    assert list(operator_memory(run, iteration=2)["Name"]) == ["conv1:0", "left:0"]
    assert memory_peak(run, iteration=2).tensor == "conv1:0" and memory_peak(run, iteration=2).timestamp_ns == 11000
    # step 2 allocates conv1 and its reader runs only in step 3: the whole run pairs them across the steps
    across = _run(tmp_path / "across", tasks=TASKS[:5] + [(1, 2, 11000, 100), (3, 3, 21000, 100)])
    assert_step_rows(across, 2, [3], [6])
    assert operator_memory(across, iteration=2)["Release Time(us)"].tolist() == [21.1]

    other = (2, 8192, [(55, 0, 512, 8, 9, 5)])
    tasks = TASKS[:5] + [(8, 1, 1200, 100), (9, 1, 3100, 100), (1, 2, 11000, 100), (3, 2, 11901, 100)]
    two = _run(tmp_path / "two", plans=[(1, 4096, PLAN), other], tasks=tasks)
    assert_step_rows(two, 2, [4], [8, 9])
    rec = memory_record(two, iteration=2)
    assert list(rec["Total Reserved(MB)"] * MB) == [4096 + 8192] * 2  # model 2's pool counts from step 1 on
    assert list(rec["Total Allocated(MB)"] * MB) == [1024, 0]

    assert operator_memory(run, iteration=7).empty and list(memory_record(run, iteration=7).columns) == MEMORY_RECORD
    assert memory_peak(run, iteration=7) is None


def test_analysis_memory_does_not_import_the_runtime():
    code = ("import sys, geprof_nb.analysis.tables.memory; "
            "bad = sorted(m for m in sys.modules if m.startswith('geprof_nb.ge')); print(bad); "
            "sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
