"""GE's host profiler: ``profiling_scope`` (one bit test when off), the ``GlobalProfiler`` ring
buffer (fixed capacity, drops counted exactly), the stdout dump of ``GE_PROFILING_TO_STD_OUT``
(reference §6.3, byte for byte) and ``Profile.host_events``.
"""

from __future__ import annotations

import io
import json
import re
import threading

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.ge.host_launch import NODE_HOST_COSTS
from geprof_nb.ge.runtime import GE_PROFILING_TO_STD_OUT
from geprof_nb.prof import host_profiler, rawdata, scope
from geprof_nb.prof.clock import clock
from geprof_nb.prof.host_profiler import (
    EVENT_STRINGS,
    RT2_VERSION,
    GlobalProfiler,
    HostRecords,
    ProfilingEvent,
    event_string,
    global_profiler,
    rt2_profiler,
)
from geprof_nb.prof.properties import BIT_ALL, BIT_GE_HOST, GlobalProfilingWrapper

#: ``ge::profiling`` event order, as in reference §6.3.
REFERENCE_ORDER = """kAclCompileAndExecute, kAclMatchOpModel, kAclMatchStaticOpModel, kAclMatchDynamicOpModel,
kAclExecuteAsync, kAclLoadSingleOp, kAclBuildOpModel, kInferShape, kTiling, kUpdateShape, kConstPrepare,
kInitHybridExecuteArgs, kInitInferShapeContext, kDestroyInferShapeContext, kResetSubgraphExecutor,
kCommitInferShapeTask, kDeviceToHost, kPrepareTask, kLaunchTask, kCommitTilingTask, kAtomic, kKernelLaunchPrepare,
kRtKernelLaunch, kRtEventCreateRecord, kRtEventSync, kRtEventDestroy, kAclrtEventDestroy, kRtStreamSync, kOpExecute,
kModelExecute, kAllocMem, kCopyH2D, kPrepareNode, kWaitForPrepareDone, kPropgateOutputs, kOnNodeDoneCallback,
kValidateInputTensor, kAfterExecuted, kRtEventSychronize, kInferShapeWaitDependShape, kInferShapeWaitInputTensor,
kInferShapeCallInferFunc, kInferShapePropgate, kSelectBranch, kExecuteSubGraph, kInitSubGraphExecutor, kSelectBin,
kFindCompileCache, kAddCompileCache, kFuzzCompileOp, kCalcRuningParam, kGenTask, kRegisterBin, kFftsPlusPreThread,
kFftsPlusNodeThread, kFftsPlusInferShape, kOpFftsCalculateV2, kInitThreadRunInfo, kFftsPlusGraphSchedule,
kKnownGetAddrAndPrefCnt, kKernelGetAddrAndPrefCnt, kUpdateAddrAndPrefCnt, kInitOpRunInfo, kGetAutoThreadParam,
kAllocateOutputs, kAllocateWorkspaces, kInitTaskAddrs, kInitThreadRunParam, kUpdateTaskAndCache, kFftsPlusTaskLaunch,
kProfilingIndexEnd""".replace("\n", " ").replace(",", " ").split()
DISPLAY = {"kRtKernelLaunch": "rtKernelLaunch", "kRtEventCreateRecord": "rtEventCreate&Record",
           "kAllocMem": "AllocMemory", "kInferShapeCallInferFunc": "CallInferFunc",
           "kInferShapePropgate": "PropgateOutputShape", "kKnownGetAddrAndPrefCnt": "rtGetAddrAndPrefCntWithHandle",
           "kKernelGetAddrAndPrefCnt": "rtKernelGetAddrAndPrefCnt", "kFftsPlusTaskLaunch": "rtFftsPlusTaskLaunch",
           "kAclrtEventDestroy": "AclrtEventDestroy", "kRtStreamSync": "rtStreamSync"}
RECORD_LINE = re.compile(r"(\d+) (\d+) \[([^\]]+)\] \[([^\]]+)\] (Start|End)")


@pytest.fixture(autouse=True)
def empty_ring_buffer():
    """The process-wide ring buffers start and end empty."""
    global_profiler.take()
    rt2_profiler.take()
    yield
    global_profiler.take()
    rt2_profiler.take()


def dynamic_mlp() -> ge.Graph:
    return ge.models.mlp(batch_size=4, in_features=16, hidden=(16,), dynamic=True)


def run_dynamic(steps: int = 1) -> ge.Session:
    s = ge.Session()
    assert s.add_graph(1, dynamic_mlp()) == ge.SUCCESS
    for _ in range(steps):
        assert s.run_graph(1) == ge.SUCCESS, ge.GEGetErrorMsg()
    return s


def profiled(out, executor: str = "v2", **fields) -> None:
    opts = {"output": str(out), "ge_api": "l1", **fields}
    assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.executor": executor, "ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": json.dumps(opts)}) == ge.SUCCESS


# ---------------------------------------------------------------------------------- event names


def test_event_indices_follow_the_reference_order():
    assert [e.name for e in sorted(ProfilingEvent, key=int)] == REFERENCE_ORDER
    assert [int(ProfilingEvent[n]) for n in REFERENCE_ORDER] == list(range(len(REFERENCE_ORDER)))


@pytest.mark.parametrize("name", REFERENCE_ORDER[:-1])
def test_event_display_names(name):
    expected = DISPLAY.get(name, name[1:])
    assert event_string(int(ProfilingEvent[name])) == expected == EVENT_STRINGS[int(ProfilingEvent[name])]


def test_unknown_event_index_is_unknown():
    end = int(ProfilingEvent.kProfilingIndexEnd)  # the sentinel: GE registers no string for it
    assert end == len(REFERENCE_ORDER) - 1 == len(EVENT_STRINGS)
    assert event_string(end) == f"UNKNOWN({end})"
    assert event_string(len(REFERENCE_ORDER)) == f"UNKNOWN({len(REFERENCE_ORDER)})"
    assert event_string(-1) == "UNKNOWN(-1)"


# ------------------------------------------------------------------------------- profiling_scope


def test_scope_is_the_shared_disabled_object_when_ge_host_is_off(monkeypatch):
    monkeypatch.setattr(GlobalProfilingWrapper, "enable_flags", BIT_ALL & ~BIT_GE_HOST)
    s = ge.profiling_scope("node", ProfilingEvent.kInferShape)
    assert s is scope.DISABLED and s is ge.profiling_scope("other", ProfilingEvent.kTiling)
    with s as entered:
        clock.spend(1000)
    assert entered is None and global_profiler.count == 0


@pytest.fixture
def virtual_clock():
    saved = clock.mode
    clock.set_mode("virtual")
    yield
    clock.set_mode(saved)


def test_scope_records_a_start_and_an_end_when_ge_host_is_on(monkeypatch, virtual_clock):
    monkeypatch.setattr(GlobalProfilingWrapper, "enable_flags", BIT_GE_HOST)  # that bit alone is enough
    t0 = clock.now_ns()
    with ge.profiling_scope("node", ProfilingEvent.kTiling) as s:
        assert s is not scope.DISABLED
        clock.spend(1500)
    records, dropped = global_profiler.take()
    tid = threading.get_native_id()
    assert dropped == 0
    assert records.rows() == [(t0, tid, "node", int(ProfilingEvent.kTiling), rawdata.HOST_EVENT_START),
                       (t0 + 1500, tid, "node", int(ProfilingEvent.kTiling), rawdata.HOST_EVENT_END)]


def test_scope_records_also_when_the_block_raises(monkeypatch):
    monkeypatch.setattr(GlobalProfilingWrapper, "enable_flags", BIT_GE_HOST)
    with pytest.raises(ValueError):
        with ge.profiling_scope("node", ProfilingEvent.kOpExecute):
            raise ValueError("boom")
    records, _ = global_profiler.take()
    assert [r[4] for r in records.rows()] == [rawdata.HOST_EVENT_START, rawdata.HOST_EVENT_END]


# -------------------------------------------------------------------------------- ring buffer


def test_ring_buffer_keeps_up_to_capacity_and_counts_every_drop():
    gp = GlobalProfiler(capacity=5)
    for i in range(4):
        gp.record_scope(f"e{i}", int(ProfilingEvent.kTiling), 10 * i, 10 * i + 5)
    assert gp.count == 8 and gp.dropped == 4  # a scope that does not fit whole is dropped whole
    gp.record_many(["a", "b", "c"], [0, 1, 2], [1, 2, 3], [0, 1, 2], [5, 6, 7])
    assert gp.count == 14 and gp.dropped == 10
    records, dropped = gp.take()
    assert dropped == 10 and [r[2] for r in records.rows()] == ["e0", "e0", "e1", "e1"]
    assert gp.count == 0 and gp.dropped == 0
    empty, dropped = gp.take()
    assert len(empty) == 0 and dropped == 0


def test_record_many_fills_the_remaining_room_exactly():
    gp = GlobalProfiler(capacity=7)
    gp.record_scope("first", 7, 0, 1)
    gp.record_many(["a", "b", "c", "d"], [0, 1, 2, 3], [7, 8, 8, 7], [1, 2, 3, 4], [2, 3, 4, 5])
    records, dropped = gp.take()
    rows = records.rows()
    assert [r[2] for r in rows] == ["first", "first", "a", "a", "b", "b"]  # 2 of 4 fit (room 5 -> 2 scopes)
    assert dropped == 4
    assert [r[3] for r in rows[2:]] == [7, 7, 8, 8]
    assert [(r[0], r[4]) for r in rows[2:]] == [(1, 0), (2, 1), (2, 0), (3, 1)]


def test_taken_scopes_in_recording_order():
    """GE records a scope (its Start and its End) when the scope exits: the buffer is in order of scope
    ends, across threads too.  A node-by-node step's scopes are offered when the step is reported,
    after scopes that ran later: in_recording_order() puts them where they were recorded (the dump's
    order; take() itself keeps the order offered)."""
    gp = GlobalProfiler()
    gp.record_scope("later", 7, 100, 110)  # ran after the step below, offered first
    gp.record_many(["a", "b"], [0, 1, 0], [7, 8, 8], [0, 5, 40], [5, 10, 50], thread_ids=np.array([1, 1, 2]))
    gp.record_scope("outer", 7, 20, 60)  # encloses c's scope of thread 2: recorded when it ends, after it
    taken, dropped = gp.take()
    assert dropped == 0
    assert [r[2] for r in taken.rows()[::2]] == ["later", "a", "b", "a", "outer"]  # as offered
    records = taken.in_recording_order()
    assert [(r[2], r[0], r[4]) for r in records.rows()] == [
        ("a", 0, 0), ("a", 5, 1), ("b", 5, 0), ("b", 10, 1), ("a", 40, 0), ("a", 50, 1),
        ("outer", 20, 0), ("outer", 60, 1), ("later", 100, 0), ("later", 110, 1)]
    assert [r[1] for r in records.rows()][:6] == [1, 1, 1, 1, 2, 2]
    assert records.in_recording_order() is records  # already in order: nothing to do


def test_overflow_in_a_run_is_reported_in_info_json_and_notes(tmp_path, monkeypatch):
    profiled(tmp_path / "full", "v1")  # V1's records are ge::profiling's (the buffer below)
    run_dynamic(2)
    ge.GEFinalize()
    full = geprof_nb.load(tmp_path / "full")
    total = 2 * len(full.host_events)
    assert total > 40 and "dropped" not in full.info

    monkeypatch.setattr(global_profiler, "capacity", 40)
    profiled(tmp_path / "small", "v1")
    run_dynamic(2)
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path / "small")
    assert len(p.host_events) == 20
    assert p.info["dropped"] == {"host_event": total - 40}
    assert p.dropped == {"host_event": total - 40}
    assert f"{total - 40} host_event records were dropped (buffer full)" in p.notes
    # what was kept is the beginning of the full run's records
    cols = ["Element", "Event", "Start(us)", "End(us)", "Duration(us)"]
    kept = p.host_events[cols].astype(str).reset_index(drop=True)
    ref = full.host_events[cols].astype(str).iloc[:20].reset_index(drop=True)
    assert kept.equals(ref)


# ---------------------------------------------------------------------------- the stdout dump


def test_dump_format_is_ges_exactly():
    out = io.StringIO()
    records = [(1767225600000000000, 42, "conv1", int(ProfilingEvent.kRtKernelLaunch), rawdata.HOST_EVENT_START),
               (1767225600000003000, 42, "conv1", int(ProfilingEvent.kRtKernelLaunch), rawdata.HOST_EVENT_END),
               (1767225600000004000, 43, "fc", int(ProfilingEvent.kAllocMem), rawdata.HOST_EVENT_START),
               (1767225600000004800, 43, "fc", 999, rawdata.HOST_EVENT_END)]
    GlobalProfiler.dump(HostRecords.from_rows(records), 0, out, 10)
    assert out.getvalue() == (
        "Profiler version: 1.0, dump start, records num: 4\n"
        "1767225600000000000 42 [conv1] [rtKernelLaunch] Start\n"
        "1767225600000003000 42 [conv1] [rtKernelLaunch] End\n"
        "1767225600000004000 43 [fc] [AllocMemory] Start\n"
        "1767225600000004800 43 [fc] UNKNOWN(999) End\n"
        "Profiling dump end\n")


def test_dump_with_dropped_records_says_so_after_the_header():
    out = io.StringIO()
    records = [(5, 1, "a", int(ProfilingEvent.kInferShape), rawdata.HOST_EVENT_START),
               (6, 1, "a", int(ProfilingEvent.kInferShape), rawdata.HOST_EVENT_END)]
    GlobalProfiler.dump(HostRecords.from_rows(records), 6, out, 2)
    assert out.getvalue() == (
        "Profiler version: 1.0, dump start, records num: 8\n"
        "Too many records(8), the records after 2 will be dropped\n"
        "5 1 [a] [InferShape] Start\n"
        "6 1 [a] [InferShape] End\n"
        "Profiling dump end\n")


HEADERS = {"v1": r"Profiler version: 1\.0", "v2": r"ExecutorProfiler version: 2\.0-SingleThread"}


def test_rt2_dump_format_is_ges_exactly():
    """RT2's GlobalProfiler dump (global_profiler.cc): its own header, each record when it happened
    (the model's Start before the nodes', its End after them), the model's as ``[Model] [Execute]``."""
    out = io.StringIO()
    execute, infer = int(ProfilingEvent.kModelExecute), int(ProfilingEvent.kInferShape)
    records = [(1000, 42, "conv1", infer, rawdata.HOST_EVENT_START),
               (3500, 42, "conv1", infer, rawdata.HOST_EVENT_END),
               (3500, 42, "fc", infer, rawdata.HOST_EVENT_START),
               (4000, 42, "fc", infer, rawdata.HOST_EVENT_END),
               (1000, 42, "Model", execute, rawdata.HOST_EVENT_START),
               (4000, 42, "Model", execute, rawdata.HOST_EVENT_END)]
    GlobalProfiler.dump(HostRecords.from_rows(records), 2, out, 6, version=RT2_VERSION)
    assert out.getvalue() == (
        "ExecutorProfiler version: 2.0-SingleThread, dump start, records num: 8\n"
        "Too many records(8), the records after 6 will be dropped\n"
        "1000 42 [Model] [Execute] Start\n"
        "1000 42 [conv1] [InferShape] Start\n"
        "3500 42 [conv1] [InferShape] End\n"
        "3500 42 [fc] [InferShape] Start\n"
        "4000 42 [fc] [InferShape] End\n"
        "4000 42 [Model] [Execute] End\n"
        "Profiling dump end\n")


def _parse_dump(text: str, executor: str = "v1") -> tuple[int, list[tuple], list[str]]:
    lines = text.splitlines()
    m = re.fullmatch(HEADERS[executor] + r", dump start, records num: (\d+)", lines[0])
    assert m, lines[0]
    assert lines[-1] == "Profiling dump end"
    body = lines[1:-1]
    extra = [ln for ln in body if not RECORD_LINE.fullmatch(ln)]
    recs = [RECORD_LINE.fullmatch(ln).groups() for ln in body if RECORD_LINE.fullmatch(ln)]
    return int(m.group(1)), recs, extra


@pytest.mark.parametrize("executor", ["v1", "v2"])
def test_ge_profiling_to_std_out_dumps_the_host_profiler(monkeypatch, capsys, executor):
    """V1's records are GE's ``ge::profiling`` (version 1.0), RT2's its GlobalProfiler's (2.0-SingleThread,
    with the model's ``[Model] [Execute]`` records around the step's)."""
    monkeypatch.setenv(GE_PROFILING_TO_STD_OUT, "1")
    assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.executor": executor}) == ge.SUCCESS  # no msprof
    assert GlobalProfilingWrapper.enable_flags == BIT_GE_HOST
    capsys.readouterr()
    s = run_dynamic(1)
    names = [n.name for n in s.model(1).compiled.graph.nodes]
    ge.GEFinalize()
    assert GlobalProfilingWrapper.enable_flags == 0
    text = capsys.readouterr().out
    n, recs, extra = _parse_dump(text, executor)
    assert extra == [] and n == len(recs) > 0
    tid = str(threading.get_native_id())
    assert {r[1] for r in recs} == {tid}
    if executor == "v2":
        assert [r[2:] for r in (recs[0], recs[-1])] == [("Model", "Execute", "Start"), ("Model", "Execute", "End")]
        assert all(r[2] != "Model" for r in recs[1:-1])
        recs = recs[1:-1]
    assert {r[3] for r in recs} == {"InferShape", "Tiling", "AllocMemory", "KernelLaunchPrepare", "rtKernelLaunch",
                                    "CopyH2D"}
    assert {r[2] for r in recs} <= set(names)
    assert {r[2] for r in recs if r[3] == "CopyH2D"} == {"x", "labels"}  # the input copies
    # Start/End pairs of one element and event, End not before Start, durations the modelled costs
    costs = NODE_HOST_COSTS[executor]
    expected = {"InferShape": costs.infer_shape, "Tiling": costs.tiling, "AllocMemory": costs.alloc_mem,
                "KernelLaunchPrepare": costs.launch_prepare, "rtKernelLaunch": costs.kernel_launch,
                "CopyH2D": costs.memcpy}
    for start, end in zip(recs[::2], recs[1::2]):
        assert (start[4], end[4]) == ("Start", "End") and start[2:4] == end[2:4]
        assert int(end[0]) - int(start[0]) == expected[start[3]]


@pytest.mark.parametrize("executor", ["v1", "v2"])
def test_ge_profiling_to_std_out_with_overflow(monkeypatch, capsys, executor):
    monkeypatch.setenv(GE_PROFILING_TO_STD_OUT, "")  # set at all, even empty, is enough
    buffer = global_profiler if executor == "v1" else rt2_profiler
    dumps = []
    for capacity in (host_profiler.DEFAULT_CAPACITY, 10):
        monkeypatch.setattr(buffer, "capacity", capacity)
        assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.executor": executor}) == ge.SUCCESS
        capsys.readouterr()
        run_dynamic(1)
        ge.GEFinalize()
        dumps.append(_parse_dump(capsys.readouterr().out, executor))
    (n_full, full, extra_full), (n, recs, extra) = dumps
    assert extra_full == [] and n_full == len(full) > 10
    assert n == n_full and len(recs) == 10  # every offered record counted, 10 kept
    assert extra == [f"Too many records({n}), the records after 10 will be dropped"]
    if executor == "v1":  # the first 10
        assert [r[1:] for r in recs] == [r[1:] for r in full[:10]]
    else:  # the model's records (offered when the step returned) and the first of the step's (offered later)
        assert [r[1:] for r in recs] == [r[1:] for r in full[:9]] + [r[1:] for r in full[-1:]]


def _dumps(text: str) -> list[tuple[str, list[str]]]:
    """The header and record lines of each dump in ``text`` (a dump runs from its header to its end line)."""
    dumps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if "version: " in line and ", dump start, records num: " in line:
            dumps.append((line, []))
        elif RECORD_LINE.fullmatch(line):
            dumps[-1][1].append(line)
    return dumps


@pytest.mark.parametrize("executor", ["v1", "v2"])
def test_dump_is_in_recording_order(monkeypatch, capsys, executor):
    """A run_graph's node-by-node scopes (reported when the run is flushed) come before the
    aclopExecute scopes recorded after it: every dump is in time order."""
    monkeypatch.setenv(GE_PROFILING_TO_STD_OUT, "1")
    assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.executor": executor}) == ge.SUCCESS
    capsys.readouterr()
    run_dynamic(1)
    x = np.zeros((4, 8), np.float16)
    for _ in range(2):
        assert ge.acl.aclopExecute("Relu", [x]) == 0
    ge.GEFinalize()
    dumps = _dumps(capsys.readouterr().out)
    lines = [ln for _, d in dumps for ln in d]
    assert {RECORD_LINE.fullmatch(ln).group(3) for ln in lines} >= {"Relu", "dense_0/MatMulV2"}
    for _, d in dumps:
        stamps = [int(RECORD_LINE.fullmatch(ln).group(1)) for ln in d]
        assert stamps == sorted(stamps)
    relu = [int(RECORD_LINE.fullmatch(ln).group(1)) for ln in lines if RECORD_LINE.fullmatch(ln).group(3) == "Relu"]
    step = [int(RECORD_LINE.fullmatch(ln).group(1)) for ln in lines if RECORD_LINE.fullmatch(ln).group(3) != "Relu"]
    assert max(step) <= min(relu)
    # the ACL op's records are ge::profiling's (1.0); RT2 keeps its own buffer
    headers = [h.split(", dump start")[0] for h, _ in dumps]
    assert headers == (["Profiler version: 1.0"] if executor == "v1" else
                       ["Profiler version: 1.0", "ExecutorProfiler version: 2.0-SingleThread"])
    acl_elements = {RECORD_LINE.fullmatch(ln).group(3) for ln in dumps[0][1]}
    assert acl_elements >= {"Relu", "dense_0/MatMulV2"} if executor == "v1" else acl_elements == {"Relu"}


def test_rt2_dump_brackets_each_step_with_the_models_execute_records(monkeypatch, capsys):
    monkeypatch.setenv(GE_PROFILING_TO_STD_OUT, "1")
    assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.executor": "v2"}) == ge.SUCCESS
    capsys.readouterr()
    run_dynamic(2)
    ge.GEFinalize()
    n, recs, extra = _parse_dump(capsys.readouterr().out, "v2")
    assert extra == [] and n == len(recs)
    model = [i for i, r in enumerate(recs) if r[2:4] == ("Model", "Execute")]
    assert [recs[i][4] for i in model] == ["Start", "End", "Start", "End"]
    assert model[0] == 0 and model[-1] == len(recs) - 1 and model[2] == model[1] + 1
    assert model[1] - model[0] == model[3] - model[2] > 1  # the same node records inside each step
    assert int(recs[model[1]][0]) <= int(recs[model[2]][0])


@pytest.mark.parametrize("executor", ["v1", "v2"])
def test_a_static_graph_dumps_only_rt2s_model_records(monkeypatch, capsys, executor):
    """A static graph has no node-by-node host work: V1 records nothing, RT2 its model's execution."""
    monkeypatch.setenv(GE_PROFILING_TO_STD_OUT, "1")
    assert ge.GEInitialize({"geprof.clock": "virtual", "geprof.executor": executor}) == ge.SUCCESS
    s = ge.Session()
    assert s.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,))) == ge.SUCCESS
    capsys.readouterr()
    assert s.run_graph(1) == ge.SUCCESS
    ge.GEFinalize()
    out = capsys.readouterr().out
    if executor == "v1":
        assert "Profiler version" not in out
        return
    n, recs, extra = _parse_dump(out, "v2")
    assert n == 2 and extra == [] and [r[2:] for r in recs] == [("Model", "Execute", "Start"), ("Model", "Execute", "End")]


def test_without_the_variable_nothing_is_recorded_or_dumped(monkeypatch, capsys):
    monkeypatch.delenv(GE_PROFILING_TO_STD_OUT, raising=False)
    assert ge.GEInitialize({"geprof.clock": "virtual"}) == ge.SUCCESS
    assert GlobalProfilingWrapper.enable_flags == 0
    run_dynamic(1)
    assert global_profiler.count == rt2_profiler.count == 0
    ge.GEFinalize()
    assert capsys.readouterr().out == ""


# ----------------------------------------------------------------------------- host_events table


def test_host_events_pairs_start_and_end_into_spans(tmp_path):
    profiled(tmp_path)
    s = run_dynamic(2)
    kernels = sum(1 for k in s.model(1).table.kernels if k is not None)
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    he = p.host_events
    raw = p.run.load("host_event")
    assert list(he.columns) == ["Thread ID", "Element", "Event", "Start(us)", "End(us)", "Duration(us)"]
    assert len(he) == len(raw) // 2 and len(raw) % 2 == 0
    assert np.allclose(he["Duration(us)"], he["End(us)"] - he["Start(us)"], atol=0.5)
    # durations are exact (integer ns differences), not float differences of timestamps
    costs = NODE_HOST_COSTS["v2"]
    durations = {ev: set(d) for ev, d in he.groupby("Event", observed=True)["Duration(us)"]}
    assert durations == {
        "InferShape": {costs.infer_shape / 1000}, "Tiling": {costs.tiling / 1000},
        "AllocMemory": {costs.alloc_mem / 1000}, "KernelLaunchPrepare": {costs.launch_prepare / 1000},
        "rtKernelLaunch": {costs.kernel_launch / 1000}, "CopyH2D": {costs.memcpy / 1000},
    }
    assert (he["Event"] == "InferShape").sum() == 2 * kernels
    assert he["Start(us)"].is_monotonic_increasing
    assert set(he["Thread ID"]) == {threading.get_native_id()}
    # against the raw records: each row is one Start followed by its End
    starts, ends = raw[0::2], raw[1::2]
    assert (starts["phase"] == rawdata.HOST_EVENT_START).all() and (ends["phase"] == rawdata.HOST_EVENT_END).all()
    assert sorted((ends["timestamp"] - starts["timestamp"]).tolist()) == sorted(
        (he["Duration(us)"] * 1000).round().astype(int).tolist())


def test_host_events_is_empty_without_ge_host(tmp_path):
    profiled(tmp_path, ge_api="l0")  # l0: CANN host, but not GE's host profiler
    run_dynamic(1)
    ge.GEFinalize()
    p = geprof_nb.load(tmp_path)
    assert p.host_events.empty and list(p.host_events.columns) == [
        "Thread ID", "Element", "Event", "Start(us)", "End(us)", "Duration(us)"]


def test_default_capacity_is_ges():
    assert host_profiler.DEFAULT_CAPACITY == 10 * 1024 * 1024 == GlobalProfiler().capacity
