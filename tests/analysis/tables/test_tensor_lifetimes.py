"""tensor_lifetimes: operator_memory's allocations with their pool addresses, from the static plans."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.profile import Profile
from geprof_nb.analysis.rundir import RunDir
from geprof_nb.analysis.sources.source import Source
from geprof_nb.analysis.tables.memory import TENSOR_LIFETIMES, operator_memory, tensor_lifetimes
from geprof_nb.ge.memory import plan_memory
from helpers.geprof_testing import run_profiled_session, small_resnet
from helpers.memory_runs import HELD, write_memory_run

#: Model 1 (pool 4096) and model 2 (pool 512, which starts at 0 too):
#: (tensor, addr, size, alloc conn, free conn, stream).  "out" reuses conv1's bytes and is held to the
#: step's end; "left" is allocated in step 2, whose releasing task is not in the log.
PLANS = [(1, 4096, [(11, 0, 1024, 1, 3, 3), (22, 1024, 2048, 2, 5, 3), (33, 0, 1024, 4, HELD, 4),
                    (44, 2048, 512, 6, 7, 3)]),
         (2, 512, [(55, 0, 256, 8, 9, 7)])]
#: (connection id, iteration, start, duration), written out of time order: the table must not
#: depend on the order records arrive in.
TASKS = [(1, 1, 1000, 100), (2, 1, 1500, 100), (8, 1, 1700, 100), (3, 1, 1900, 100), (4, 1, 2500, 100),
         (5, 1, 2900, 100), (9, 1, 3500, 100), (6, 2, 13000, 100)][::-1]
STEP_ENDS = [(1, 1, 3500)]
NAMES = {11: "conv1:0", 22: "relu:0", 33: "out:0", 44: "left:0", 55: "other:0"}


def write_run(path: Path, empty: bool = False) -> RunDir:
    if empty:
        return write_memory_run(path, [], [], [], NAMES)
    return write_memory_run(path, PLANS, TASKS, STEP_ENDS, NAMES)


def test_columns_and_values(tmp_path):
    df = tensor_lifetimes(write_run(tmp_path / "run"))
    assert list(df.columns) == TENSOR_LIFETIMES == [
        "Name", "Model ID", "Address", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Duration(us)",
        "Stream ID"]
    assert list(df["Name"]) == ["conv1:0", "relu:0", "other:0", "out:0", "left:0"]
    assert list(df["Model ID"]) == [1, 1, 2, 1, 1]
    assert list(df["Address"]) == [0, 1024, 0, 0, 2048]
    assert list(df["Size(KB)"]) == [1.0, 2.0, 0.25, 1.0, 0.5]
    assert list(df["Allocation Time(us)"]) == [1.0, 1.5, 1.7, 2.5, 13.0]
    assert list(df["Release Time(us)"][:4]) == [2.0, 3.0, 3.6, 3.5]
    assert np.isnan(df["Release Time(us)"].iloc[4]) and np.isnan(df["Duration(us)"].iloc[4])
    assert list(df["Duration(us)"][:4]) == pytest.approx([1.0, 1.5, 1.9, 1.0])
    assert list(df["Stream ID"]) == [3, 3, 7, 4, 3]


def test_same_rows_as_operator_memory(tmp_path):
    run = write_run(tmp_path / "run")
    tl, om = tensor_lifetimes(run), operator_memory(run)
    assert_same_allocations(tl, om)


def test_empty_run_has_the_columns(tmp_path):
    df = tensor_lifetimes(write_run(tmp_path / "run", empty=True))
    assert list(df.columns) == TENSOR_LIFETIMES and df.empty


def assert_same_allocations(tl: pd.DataFrame, om: pd.DataFrame) -> None:
    """Row for row the same tensors, sizes, times and streams (times compared exactly)."""
    assert len(tl) == len(om)
    assert list(tl["Name"].astype(str)) == list(om["Name"].astype(str))
    for col in ("Size(KB)", "Allocation Time(us)", "Release Time(us)", "Duration(us)"):
        np.testing.assert_array_equal(tl[col].to_numpy(float), om[col].to_numpy(float), err_msg=col)
    np.testing.assert_array_equal(tl["Stream ID"].to_numpy(), om["Stream Ptr"].to_numpy())


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory):
    return run_profiled_session(tmp_path_factory.mktemp("mem"), small_resnet(8), 3, task_memory="on")


def test_profile_table_matches_operator_memory(memory_run):
    p = memory_run.profile
    tl = p.tensor_lifetimes
    assert list(tl.columns) == TENSOR_LIFETIMES
    assert len(tl) > 1000  # ~1,100 tensors a step, 3 steps
    assert_same_allocations(tl, p.operator_memory)
    assert (tl["Model ID"] == memory_run.model_id).all()


def test_addresses_are_the_static_plan_offsets(memory_run):
    """Every allocation sits at GE's planned offset, inside the pool, and tensors live at the same
    time never share bytes."""
    p = memory_run.profile
    tl = p.tensor_lifetimes
    plan = plan_memory(memory_run.compiled, memory_run.table)
    names = tl["Name"].astype(str)
    planned = np.array([plan.offset[plan.index(n)] for n in names])
    np.testing.assert_array_equal(tl["Address"].to_numpy(), planned)
    size = np.rint(tl["Size(KB)"].to_numpy() * 1024).astype(np.int64)
    pool = p.memory_record["Total Reserved(MB)"].max() * 1024 * 1024
    assert (tl["Address"].to_numpy() + size <= pool).all()
    # no two tensors of one step overlap in both time and address
    a0, a1 = tl["Address"].to_numpy(), tl["Address"].to_numpy() + size
    t0, t1 = tl["Allocation Time(us)"].to_numpy(), tl["Release Time(us)"].to_numpy()
    first = slice(0, len(tl) // 3)
    both = ((a0[first, None] < a1[None, first]) & (a0[None, first] < a1[first, None])
            & (t0[first, None] < t1[None, first]) & (t0[None, first] < t1[first, None]))
    np.fill_diagonal(both, False)
    assert not both.any()


def test_without_task_memory_the_table_is_empty(resnet_run):
    tl = resnet_run.profile.tensor_lifetimes
    assert list(tl.columns) == TENSOR_LIFETIMES and tl.empty


def test_imported_sources_have_no_addresses(memory_run, tmp_path):
    class Bare(Source):  # a source that implements only what every source must
        path = tmp_path

        def op_rows(self):
            return memory_run.profile.source.op_rows()

    tl = Profile(Bare()).tensor_lifetimes
    assert list(tl.columns) == TENSOR_LIFETIMES and tl.empty
