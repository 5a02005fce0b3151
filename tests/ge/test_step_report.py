"""ge/step_report.py: a batch of steps as the device records them, and another rank's reporter of the same model."""

from __future__ import annotations

import numpy as np
import pytest

from geprof_nb import ge
from geprof_nb.ge.runtime import DeviceRuntime
from geprof_nb.prof import msprof
from geprof_nb.prof.properties import BIT_TASK_TIME, BIT_TRAINING_TRACE
from geprof_nb.prof.rawdata import MODEL_END_TAG, MODEL_START_TAG, RtTaskType

STEPS = 3


@pytest.fixture
def model():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = ge.Session()
    assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,))) == ge.SUCCESS
    assert s.build_graph(1) == ge.SUCCESS
    yield s.model(1)
    ge.GEFinalize()


def _grids(n_tasks: int):
    start = np.arange(STEPS * n_tasks, dtype=np.int64).reshape(STEPS, n_tasks) * 100
    dur = np.full((STEPS, n_tasks), 70, np.int64)
    cycles = np.full((STEPS, n_tasks), 2**40, np.int64)  # more than the 32-bit counter holds
    return start, dur, cycles


def test_a_batch_of_task_records_leaves_out_the_trace_tasks(model, monkeypatch):
    build = model.builds.current
    table = build.table
    rt = model.runtime
    got = []
    monkeypatch.setattr(rt.device_collector, "report_tasks", got.append)
    monkeypatch.setattr(rt, "pmu_events", {"aic": ["pmu"]})
    start, dur, cycles = _grids(len(table))
    model.reporter.report_steps(build, BIT_TASK_TIME, start, dur, cycles, np.array([5, 6, 7]))
    rec = np.concatenate(got)
    keep = np.flatnonzero(table.rt_type != RtTaskType.PROFILER_TRACE)
    assert len(keep) < len(table)  # the step has trace tasks, which the task log does not hold
    assert len(rec) == STEPS * len(keep)
    assert (rec["start"].reshape(STEPS, -1) == start[:, keep]).all() and (rec["dur"] == 70).all()
    assert (rec["block_cycles"] == 2**32 - 1).all()  # capped, not wrapped
    assert rec["iteration"].tolist() == np.repeat([5, 6, 7], len(keep)).tolist()
    base = rec["connection_id"].reshape(STEPS, -1) - keep
    assert (base == base[0, 0]).all()  # one id per task, the same in every step


def test_without_counters_programmed_no_cycles_are_recorded(model, monkeypatch):
    got = []
    monkeypatch.setattr(model.runtime.device_collector, "report_tasks", got.append)
    build = model.builds.current
    model.reporter.report_steps(build, BIT_TASK_TIME, *_grids(len(build.table)), np.array([1, 2, 3]))
    assert (np.concatenate(got)["block_cycles"] == 0).all()


def test_the_step_trace_brackets_each_step(model, monkeypatch):
    build = model.builds.current
    table = build.table
    got = []
    monkeypatch.setattr(model.runtime.device_collector, "report_step_trace", got.append)
    start, dur, cycles = _grids(len(table))
    model.reporter.report_steps(build, BIT_TRAINING_TRACE, start, dur, cycles, np.array([1, 2, 3]))
    rec = np.concatenate(got).reshape(STEPS, -1)
    assert (rec["tag_id"][:, 0] == MODEL_START_TAG).all() and (rec["tag_id"][:, -1] == MODEL_END_TAG).all()
    assert rec["timestamp"][:, 0].tolist() == start.min(axis=1).tolist()
    assert rec["timestamp"][:, -1].tolist() == (start + dur).max(axis=1).tolist()
    assert (rec["model_id"] == model.model_id).all() and rec["index_id"][:, 0].tolist() == [1, 2, 3]


def test_another_ranks_reporter_has_the_models_ids_and_its_own_connection_ids(model, monkeypatch):
    other = DeviceRuntime(model.runtime.preset, device_id=1, seed=1)
    twin = model.reporter.on_device(other)
    assert (twin.model_id, twin.graph_id, twin.links, twin.runtime) == (model.model_id, 1, model.reporter.links,
                                                                         other)
    build = model.builds.current
    seen = {}
    for name, reporter in (("rank0", model.reporter), ("rank1", twin)):
        got = []
        monkeypatch.setattr(reporter.runtime.device_collector, "report_tasks", got.append)
        with msprof.reporting_to(msprof.Msprof()):  # each rank's own library: its ids start at 0
            reporter.report_steps(build, BIT_TASK_TIME, *_grids(len(build.table)), np.array([1, 2, 3]))
        seen[name] = np.concatenate(got)["connection_id"]
    assert seen["rank0"].min() == seen["rank1"].min() == 0
    assert seen["rank0"].tolist() == seen["rank1"].tolist()
