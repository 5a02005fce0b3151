"""The host API layers as tables: the Graph API reporter (AddGraph, BuildGraph, RunGraph,
RunGraphAsync, RemoveGraph at level acl), ``api_statistic`` (reference §4.3) and ``task_time``
(reference §4.4).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.sources.source import _latest_call_before
from geprof_nb.ge import status as st
from geprof_nb.prof import events, scope
from geprof_nb.prof.api_types import AclProfType, GeProfInfoType
from geprof_nb.prof.properties import BIT_ALL, BIT_TASK_TIME, GlobalProfilingWrapper, ProfilingProperties
from geprof_nb.prof.rawdata import ReportLevel
from helpers.rawrun_helpers import records, write_run

API_STATISTIC_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance".split(",")
TASK_TIME_HEADER = ("Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),"
                    "task_stop(us)").split(",")


def profiled(out: Path, executor: str = "v2", **fields: str) -> None:
    opts = {"output": str(out), **fields}
    extra = {"geprof.executor": executor}
    assert ge.GEInitialize({"geprof.clock": "virtual", "ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": json.dumps(opts), **extra}) == ge.SUCCESS


def tiny_mlp(**kw) -> ge.Graph:
    return ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), **kw)


# ------------------------------------------------------------------------------ reference values


def test_ge_prof_info_type_values_are_the_reference_ones():
    t = GeProfInfoType
    assert (t.kModelExecute, t.kModelLoad, t.kInputCopy, t.kOutputCopy, t.kModelLevelEnd, t.kHostOpExec) == (
        1, 2, 3, 4, 5, 8)
    assert (t.kInferShape, t.kCompatibleInferShape, t.kTiling, t.kCompatibleTiling, t.kStreamSync, t.kStepInfo,
            t.kNodeLevelEnd) == tuple(range(0x010001, 0x010008))
    assert (t.kIsGraphNeedRebuild, t.kRemoveGraph, t.kAddGraph, t.kBuildGraph, t.kRunGraphAsync, t.kGEInitialize,
            t.kGEFinalize, t.kAclLevelEnd) == tuple(range(0x0A0001, 0x0A0009))


def test_acl_prof_type_values_are_the_reference_ones():
    assert AclProfType.AclopCompile == 0x010001 and AclProfType.AclopCompileAndExecute == 0x010002
    assert AclProfType.AclopLoad == 0x018001 and AclProfType.AclopExecute == 0x018002
    assert AclProfType.AclmdlExecute == 0x020001
    assert AclProfType.AclblasGemmEx == 0x046001


# -------------------------------------------------------------------------- Graph API reporter


GRAPH_CALLS = {GeProfInfoType.kAddGraph: 2, GeProfInfoType.kBuildGraph: 1, GeProfInfoType.kRunGraph: 3,
               GeProfInfoType.kRunGraphAsync: 2, GeProfInfoType.kRemoveGraph: 1, GeProfInfoType.kGEFinalize: 1}


def _graph_api_session() -> list[tuple]:
    """AddGraph x2, BuildGraph, RunGraph x3 (one fails), RunGraphAsync x2, RemoveGraph; the callbacks."""
    calls = []
    s = ge.Session()
    assert s.add_graph(7, tiny_mlp()) == ge.SUCCESS
    assert s.add_graph(8, tiny_mlp()) == ge.SUCCESS
    assert s.build_graph(7) == ge.SUCCESS
    assert s.run_graph(7) == ge.SUCCESS
    assert s.run_graph(7) == ge.SUCCESS
    assert s.run_graph(99) != ge.SUCCESS  # a failing call is timed too
    assert s.run_graph_async(8, None, lambda status, outputs: calls.append((status, outputs))) == ge.SUCCESS
    assert s.run_graph_async(99, None, lambda status, outputs: calls.append((status, outputs))) != ge.SUCCESS
    assert s.remove_graph(8) == ge.SUCCESS
    return calls


def test_graph_api_calls_are_reported_at_level_acl(tmp_path):
    profiled(tmp_path)
    calls = _graph_api_session()
    ge.GEFinalize()
    assert [c[0] == ge.SUCCESS for c in calls] == [True, False]
    p = geprof_nb.load(tmp_path)
    api = p.run.load("api")
    acl = api[api["level"] == ReportLevel.ACL]
    counts = pd.Series(acl["type"]).value_counts().to_dict()
    assert counts == {int(k): v for k, v in GRAPH_CALLS.items()}
    assert (acl["end"] >= acl["begin"]).all()
    # item id = graph id
    items = {(int(t), int(i)) for t, i in zip(acl["type"], acl["item_id"])}
    assert {(int(GeProfInfoType.kAddGraph), 7), (int(GeProfInfoType.kAddGraph), 8),
            (int(GeProfInfoType.kBuildGraph), 7), (int(GeProfInfoType.kRunGraph), 7),
            (int(GeProfInfoType.kRunGraph), 99), (int(GeProfInfoType.kRunGraphAsync), 8),
            (int(GeProfInfoType.kRemoveGraph), 8)} <= items
    stat = p.api_statistic
    acl_rows = stat[stat["Level"] == "acl"].set_index("API Name")["Count"].to_dict()
    assert acl_rows == {"AddGraph": 2, "BuildGraph": 1, "RunGraph": 3, "RunGraphAsync": 2, "RemoveGraph": 1,
                        "GEFinalize": 1}


def test_run_graph_async_calls_back_with_its_status():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    calls = _graph_api_session()
    assert len(calls) == 2
    assert calls[0] == (ge.SUCCESS, [])
    assert calls[1] == (st.GE_GRAPH_GRAPH_NOT_EXIST, [])


def test_run_graph_async_without_a_callback():
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    s = ge.Session()
    assert s.add_graph(1, tiny_mlp()) == ge.SUCCESS
    assert s.run_graph_async(1) == ge.SUCCESS and s.model(1).iterations == 1


def test_graph_api_needs_task_time(tmp_path):
    profiled(tmp_path, task_trace="off", training_trace="on")
    _graph_api_session()
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    assert len(p.run.load("api")) == 0 and p.api_statistic.empty
    assert list(p.api_statistic.columns) == API_STATISTIC_HEADER
    # profiling was on all the same: graph 7 ran twice, graph 8 once
    assert sorted(zip(p.step_trace["Model ID"], p.step_trace["Iteration ID"])) == [(1, 1), (1, 2), (2, 1)]


# ---------------------------------------------------------------------------------- api_statistic


def test_api_statistic_columns_and_statistics(tmp_path):
    profiled(tmp_path)
    _graph_api_session()
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    stat = p.api_statistic
    assert list(stat.columns) == API_STATISTIC_HEADER
    assert set(stat["Device_id"]) == {"host"}
    assert stat["Time(us)"].is_monotonic_decreasing
    api = p.run.load("api")
    names = {int(GeProfInfoType.kRunGraph): "RunGraph", int(GeProfInfoType.kAddGraph): "AddGraph"}
    for type_id, name in names.items():
        sel = (api["level"] == ReportLevel.ACL) & (api["type"] == type_id)
        durs = (api["end"][sel] - api["begin"][sel]) / 1000.0
        row = stat[(stat["Level"] == "acl") & (stat["API Name"] == name)].iloc[0]
        assert row["Count"] == len(durs)
        assert row["Time(us)"] == pytest.approx(round(durs.sum(), 3))
        assert row["Avg(us)"] == pytest.approx(round(durs.mean(), 3))
        assert row["Min(us)"] == pytest.approx(round(durs.min(), 3))
        assert row["Max(us)"] == pytest.approx(round(durs.max(), 3))
        mean = sum(durs) / len(durs)
        population = sum((d - mean) ** 2 for d in durs) / len(durs)  # not the sample variance (n - 1)
        assert row["Variance"] == pytest.approx(round(population, 3))
    run_graph = stat[stat["API Name"] == "RunGraph"].iloc[0]
    assert run_graph["Min(us)"] == 0 < run_graph["Variance"]  # the failing call took no (virtual) time


def _raw_api_run(path: Path, rows: list[dict], events: list[dict] | None = None,
                 type_info: dict | None = None) -> geprof_nb.Profile:
    recs = {"api": records("api", rows)}
    if events:
        recs["event"] = records("event", events)
    write_run(path, recs, {})
    if type_info is not None:
        info = json.loads((path / "info.json").read_text())
        info["type_info"] = type_info
        (path / "info.json").write_text(json.dumps(info))
    return geprof_nb.load(path)


def test_api_statistic_from_known_records(tmp_path):
    rows = [{"level": 20000, "type": 0x020001, "begin": b, "end": b + d} for b, d in
            ((0, 1000), (5000, 3000), (9000, 2000))]
    rows += [{"level": lv, "type": 7, "begin": 0, "end": 4000} for lv in (15000, 10000, 5500, 5000)]
    rows += [{"level": 20000, "type": 0xABC, "begin": 0, "end": 500}]
    type_info = {"20000": {str(0x020001): "aclmdlExecute"}, "15000": {"7": "M"}, "10000": {"7": "N"},
                 "5500": {"7": "C"}, "5000": {"7": "R"}}
    stat = _raw_api_run(tmp_path / "run", rows, type_info=type_info).api_statistic
    assert list(stat.columns) == API_STATISTIC_HEADER
    first = stat.iloc[0]
    assert list(first) == ["host", "acl", "aclmdlExecute", 6.0, 3, 2.0, 1.0, 3.0, pytest.approx(2 / 3, abs=1e-3)]
    levels = dict(zip(stat["API Name"], stat["Level"]))
    assert levels == {"aclmdlExecute": "acl", "M": "model", "N": "node", "C": "communication", "R": "runtime",
                      "type_0xabc": "acl"}


def test_api_statistic_pairs_start_and_end_events(tmp_path):
    # V1's model-level RecordStart/RecordEnd: start and end events share level, type, thread and request id
    events = [{"level": 15000, "type": 1, "thread_id": 9, "request_id": r, "timestamp": t}
              for r, t in ((1, 100), (2, 5000), (1, 1100), (2, 8000))]
    stat = _raw_api_run(tmp_path / "run", [], events, {"15000": {"1": "ModelExecute"}}).api_statistic
    row = stat.iloc[0]
    assert (row["Level"], row["API Name"], row["Count"], row["Time(us)"], row["Min(us)"], row["Max(us)"]) == (
        "model", "ModelExecute", 2, 4.0, 1.0, 3.0)


def test_v1_model_events_appear_as_model_execute(tmp_path):
    profiled(tmp_path, executor="v1")
    s = ge.Session()
    assert s.add_graph(1, tiny_mlp()) == ge.SUCCESS
    for _ in range(3):
        assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    assert len(p.run.load("event")) == 6
    row = p.api_statistic.set_index("API Name").loc["ModelExecute"]
    assert row["Level"] == "model" and row["Count"] == 3


# -------------------------------------------------------------------------------------- task_time


@pytest.fixture
def two_stream_run(tmp_path) -> geprof_nb.Profile:
    """An mlp on 2 ranks: gradient AllReduce on the HCCL stream, event record/wait between the streams."""
    profiled(tmp_path)
    s = ge.Session()
    assert s.add_graph(1, tiny_mlp(world_size=2)) == ge.SUCCESS
    for _ in range(2):
        assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    return geprof_nb.load(tmp_path)


def test_task_time_header_and_every_task(two_stream_run):
    p = two_stream_run
    tt = p.task_time
    assert list(tt.columns) == TASK_TIME_HEADER
    assert len(tt) == len(p.run.load("hwts"))
    kinds = tt["kernel_type"].astype(str)
    assert {"EVENT_RECORD", "EVENT_WAIT", "MEMCPY_ASYNC"} <= set(kinds)
    assert "PROFILER_TRACE" not in set(kinds)
    runtime_tasks = tt[kinds.isin(["EVENT_RECORD", "EVENT_WAIT", "MEMCPY_ASYNC"])]
    assert set(runtime_tasks["kernel_name"].astype(str)) == {"N/A"}
    kernels = tt[kinds.str.startswith("KERNEL_") | (kinds == "HCCL")]
    assert len(kernels) == len(p.op_summary)
    assert sorted(kernels["kernel_name"].astype(str)) == sorted(p.op_summary["Op Name"].astype(str))
    assert len(set(tt["stream_id"])) == 2
    assert set(tt["Device_id"]) == {0}


def test_task_time_stop_is_start_plus_time(two_stream_run):
    tt = two_stream_run.task_time
    assert np.allclose(tt["task_stop(us)"], tt["task_start(us)"] + tt["task_time(us)"], rtol=0, atol=0.5)
    hw = two_stream_run.run.load("hwts")
    order = np.argsort(hw["start"], kind="stable")
    start, dur = hw["start"][order].astype(np.int64), hw["dur"][order].astype(np.int64)
    assert np.array_equal(tt["task_time(us)"].to_numpy(), dur / 1000.0)  # exact durations
    assert np.array_equal(tt["task_stop(us)"].to_numpy(), (start + dur) / 1000.0)  # stop from integer ns
    assert tt["task_start(us)"].is_monotonic_increasing
    assert (tt["task_time(us)"] > 0).all()


def test_task_time_matches_op_summary_ids(two_stream_run):
    p = two_stream_run
    tt = p.task_time
    ops = p.op_summary[p.op_summary["Task Type"] != "COMMUNICATION"]
    merged = ops.merge(tt, left_on=["Task Start Time(us)", "Op Name"],
                       right_on=["task_start(us)", "kernel_name"])
    assert len(merged) == len(ops)
    assert (merged["Stream ID"].astype(int) == merged["stream_id"]).all()
    assert (merged["Task ID"].astype(int) == merged["task_id"]).all()
    assert np.array_equal(merged["Task Duration(us)"], merged["task_time(us)"])


def test_task_time_is_empty_without_task_data(tmp_path):
    profiled(tmp_path, task_trace="off", training_trace="on")
    s = ge.Session()
    assert s.add_graph(1, tiny_mlp()) == ge.SUCCESS
    assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    tt = geprof_nb.load(tmp_path).task_time
    assert tt.empty and list(tt.columns) == TASK_TIME_HEADER


def test_reporters_are_the_shared_disabled_object_when_their_switch_is_off(monkeypatch):
    props = ProfilingProperties.instance()
    monkeypatch.setattr(GlobalProfilingWrapper, "enable_flags", BIT_ALL & ~BIT_TASK_TIME)
    monkeypatch.setattr(props, "switch", ~events.PROF_ACL_API_MASK & 0xFFFFFFFF)
    assert scope.GraphProfilingReporter(GeProfInfoType.kAddGraph) is scope.DISABLED
    assert scope.AclProfilingReporter(AclProfType.AclmdlExecute) is scope.DISABLED
    monkeypatch.setattr(GlobalProfilingWrapper, "enable_flags", BIT_TASK_TIME)
    monkeypatch.setattr(props, "switch", events.PROF_ACL_API_MASK)
    assert scope.GraphProfilingReporter(GeProfInfoType.kAddGraph) is not scope.DISABLED
    assert scope.AclProfilingReporter(AclProfType.AclmdlExecute) is not scope.DISABLED


def test_latest_call_before_pairs_each_run_with_its_own_call_across_gaps():
    """Calls of keys 7 and 9 at 0, 10, 20, ...; runs start 3 ns after their call.  Key 7's call at 20 and
    the run of its call at 40 were lost (aged out): no pairing shifts, the run after the lost call is not
    given the call before it, and a call whose run was lost is left unpaired."""
    call_key = np.array([7, 9, 7, 9, 7, 9, 7, 9, 7])
    call_begin = np.array([0, 5, 10, 15, 30, 35, 40, 45, 50])  # key 7's call at 20 is missing
    run_key = np.array([7, 7, 7, 9, 9, 9, 9, 7, 7])
    run_start = np.array([3, 13, 23, 8, 18, 38, 48, 33, 53])  # key 7's run of the call at 40 is missing
    calls, runs = _latest_call_before(call_key, call_begin, run_key, run_start)
    pairs = {(int(call_begin[c]), int(run_start[r])) for c, r in zip(calls, runs)}
    assert pairs == {(0, 3), (10, 13), (30, 33), (50, 53), (5, 8), (15, 18), (35, 38), (45, 48)}
    # the run at 23 reaches key 7's call at 10, which keeps its own run (13); the call at 40 has none
    assert [len(x) for x in _latest_call_before(call_key, call_begin, run_key[:0], run_start[:0])] == [0, 0]
