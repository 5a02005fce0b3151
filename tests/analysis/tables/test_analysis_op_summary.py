"""op_summary: rows, exact headers, per-row facts, PipeUtilization metrics, Task Wait Time."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.tables import columns as C
from geprof_nb.analysis.tables import summary
from geprof_nb.ge.graph import DTYPES, FORMATS
from geprof_nb.prof.rawdata import DataType, Format
from helpers.geprof_testing import build_tiny_graph, run_two_graphs, small_resnet

# Reference §4.1, verbatim (msprof op_summary_assembler unit test).
A2_PIPE_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Num,Mix Block Num,HF32 Eligible,Input Shapes,Input Data Types,"
    "Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,"
    "aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,"
    "aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),"
    "aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
    "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
).split(",")
# Reference §4.1: exact header for non-Stars chips (910A) without PMU columns ...
NON_STARS_BASE = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Num,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats"
).split(",")
# ... and the PipeUtilization columns of older chips (§4.1 list, time columns in us, memory_bound last).
NON_STARS_PIPE = ["aicore_time(us)", "total_cycles", "vec_time(us)", "vec_ratio", "mac_time(us)", "mac_ratio",
                  "scalar_time(us)", "scalar_ratio", "mte1_time(us)", "mte1_ratio", "mte2_time(us)", "mte2_ratio",
                  "mte3_time(us)", "mte3_ratio", "icache_miss_rate", "memory_bound"]

RUNS = ["resnet_run", "resnet_run_ws1", "mlp_910a_run"]


@pytest.fixture(params=RUNS)
def run(request):
    return request.getfixturevalue(request.param)


# ---------------------------------------------------------------------------- headers
def test_a2_pipe_utilization_header(resnet_run):
    assert len(A2_PIPE_HEADER) == 46
    assert list(resnet_run.profile.op_summary.columns) == A2_PIPE_HEADER
    assert C.op_summary_columns("A2", "l1", "PipeUtilization") == A2_PIPE_HEADER


def test_910a_header(mlp_910a_run):
    cols = list(mlp_910a_run.profile.op_summary.columns)
    assert cols == NON_STARS_BASE + NON_STARS_PIPE
    assert "Mix Block Num" not in cols and "Context ID" not in cols
    assert not [c for c in cols if c.startswith(("aiv_", "aic_"))]
    assert mlp_910a_run.profile.device["chip_family"] == "910A"


def test_header_without_pmu(run_profiled):
    g = build_tiny_graph(world_size=2)[0]
    with pytest.warns(UserWarning, match=r"aic_metrics 'Custom:0x49,0x8': Custom event groups are not simulated; no AI Core PMU data"):
        run = run_profiled(g, steps=1, aic_metrics="Custom:0x49,0x8", subdir="custom")
    assert list(run.profile.op_summary.columns) == A2_PIPE_HEADER[:21]
    l0 = run_profiled(g, steps=2, task_trace="l0", subdir="l0")
    ops = l0.profile.op_summary
    assert list(ops.columns) == A2_PIPE_HEADER[:21]
    assert len(ops) == 2 * l0.n_kernels
    # task_time l0: launch and execution time only (reference §4.1)
    assert (ops["OP Type"] == "N/A").all() and (ops["Task Type"] == "N/A").all()
    assert (ops["Block Num"] == 0).all() and (ops["Input Shapes"] == "N/A").all()
    assert (ops["Op Name"] != "N/A").all()


def test_collectives_at_task_trace_l0_are_treated_as_at_l1(run_profiled):
    """l0 records no basic info, but the task track knows the HCCL tasks: their Task ID / Stream ID are
    N/A and a compute op's wait is the gap after the previous compute task, at either level (the
    virtual clock gives both runs the same timeline)."""
    g = build_tiny_graph(world_size=2)[0]
    l1 = run_profiled(g, steps=2, subdir="l1").profile.op_summary
    l0 = run_profiled(g, steps=2, task_trace="l0", subdir="l0").profile.op_summary
    comm = l1["Task Type"] == "COMMUNICATION"
    assert comm.sum() == 2 and l0["Op Name"].tolist() == l1["Op Name"].tolist()
    assert l0["Task Start Time(us)"].tolist() == l1["Task Start Time(us)"].tolist()
    for col in ("Task ID", "Stream ID"):
        assert l0[col][comm.to_numpy()].isna().all() and l0[col][~comm.to_numpy()].notna().all()
    assert l0["Task Wait Time(us)"].tolist() == l1["Task Wait Time(us)"].tolist()
    assert (l0["Task Wait Time(us)"][comm.to_numpy()] == 0).all()
    assert (l0["Task Wait Time(us)"] > 1).any()  # a compute op waited for the collective between them


# ------------------------------------------------------------------------------- rows
def test_one_row_per_kernel_task_per_step(run):
    p = run.profile
    n = run.n_kernels
    assert n == sum(1 for node in run.graph.nodes if node.engine != "GE_LOCAL")
    assert len(p.op_summary) == run.steps * n
    assert p.iterations.tolist() == list(range(1, run.steps + 1))
    kernel_names = sorted(run.graph.nodes[int(run.table.node[i])].name
                          for i, k in enumerate(run.table.kernels) if k is not None)
    for it in p.iterations:
        ops = p.ops(int(it))
        assert len(ops) == n, it
        assert sorted(ops["Op Name"].astype(str)) == kernel_names
    assert len(p.ops()) == n  # the last iteration
    assert (p.iteration_of_ops.index == p.op_summary.index).all()


@pytest.mark.parametrize("executor", ["v1", "v2"])
def test_rows_per_step_with_either_executor(run_profiled, executor):
    g = build_tiny_graph(world_size=2)[0]
    run = run_profiled(g, steps=3, executor=executor)
    p = run.profile
    # forward 6 (labels_relu, fc1, act1, fc2, xent, loss), backward 7, 1 AllReduce, 2 ApplyMomentum
    assert run.n_kernels == 16 == sum(1 for n in g.nodes if n.engine != "GE_LOCAL")
    assert [len(p.ops(i)) for i in (1, 2, 3)] == [run.n_kernels] * 3
    host = p.run.load("event" if executor == "v1" else "api")
    model_level = host[host["level"] == 15000]  # graph API calls are reported at level acl too
    assert len(model_level) == (6 if executor == "v1" else 3)


def test_sorted_by_start_and_durations_exact(run):
    p = run.profile
    ops = p.op_summary
    assert ops["Task Start Time(us)"].is_monotonic_increasing
    rows = summary.op_rows(p.run)
    hw = p.run.load("hwts")
    dur_by_start = dict(zip(hw["start"].tolist(), hw["dur"].tolist()))
    for s, d in zip(rows.start_ns[:200], ops["Task Duration(us)"].to_numpy()[:200]):
        assert d == dur_by_start[int(s)] / 1000
    assert np.allclose(ops["Task Start Time(us)"], rows.start_ns / 1000, rtol=0, atol=0.5)


def test_row_facts_match_the_task_table(run):
    p, t = run.profile, run.table
    ops = p.ops(1)
    by_name = {run.graph.nodes[int(t.node[i])].name: i for i, k in enumerate(t.kernels) if k is not None}
    for _, row in ops.iterrows():
        i = by_name[row["Op Name"]]
        node = run.graph.nodes[int(t.node[i])]
        k = t.kernels[i]
        assert row["OP Type"] == node.type and row["Model ID"] == run.model_id
        if node.type == "HcomAllReduce":
            assert row["Task Type"] == "COMMUNICATION"
            assert row["Task ID"] is pd.NA and row["Stream ID"] is pd.NA
            assert row["OP State"] == "N/A" and row["HF32 Eligible"] == "N/A"
            assert row["Block Num"] == 0 and row["Task Wait Time(us)"] == 0
            assert row["Input Shapes"] == "N/A" and row["Output Formats"] == "N/A"
            assert np.isnan(row["aicore_time(us)"]) if "aicore_time(us)" in row else True
        else:
            assert row["Task ID"] == t.task_id[i] and row["Stream ID"] == t.stream[i] == run.compiled.compute_stream
            assert row["OP State"] == "static"
            assert row["Block Num"] == k.block_dim
            assert row["Task Type"] in ("AI_CORE", "AI_VECTOR_CORE", "AI_CPU")
            assert row["HF32 Eligible"] in ("YES", "NO")


def _dtype_text(name):
    dt = DTYPES[name][0]
    return "FLOAT" if dt == DataType.DT_FLOAT else dt.name[3:]


def _tensor_text(descs):
    shapes = ";".join(",".join(str(d) for d in desc.shape) for desc in descs)
    types = ";".join(_dtype_text(desc.dtype) for desc in descs)
    formats = ";".join(Format(FORMATS[desc.format]).name[len("FORMAT_"):] for desc in descs)
    return shapes, types, formats


def test_tensor_columns_describe_inputs_and_outputs(resnet_run):
    p, g = resnet_run.profile, resnet_run.graph
    ops = p.ops(2)
    checked = 0
    for _, row in ops[ops["Task Type"] != "COMMUNICATION"].iterrows():
        node = g.node(row["Op Name"])
        ins = _tensor_text([t.desc for t in node.inputs])
        outs = _tensor_text(node.outputs)
        assert (row["Input Shapes"], row["Input Data Types"], row["Input Formats"]) == ins, node
        assert (row["Output Shapes"], row["Output Data Types"], row["Output Formats"]) == outs, node
        checked += 1
    assert checked == resnet_run.n_kernels - len(g.nodes_of_type("HcomAllReduce"))
    conv = ops[ops["Op Name"] == "resnet_model/conv1/Conv2D"].iloc[0]
    assert (conv["Input Shapes"], conv["Input Data Types"], conv["Input Formats"], conv["Output Shapes"]) == (
        "2,3,64,64;64,3,7,7", "FLOAT16;FLOAT16", "NCHW;ND", "2,64,32,32")
    # 12 tensors travel in three MsprofTensorInfo records
    bn = ops[ops["OP Type"] == "BNTrainingUpdate"].iloc[0]
    assert len(bn["Input Shapes"].split(";")) == 7 and len(bn["Output Shapes"].split(";")) == 5


# ------------------------------------------------------------------------ Task Wait Time
def test_task_wait_time(run):
    p = run.profile
    ops = p.op_summary
    rows = summary.op_rows(p.run)
    start = rows.start_ns
    dur = np.rint(ops["Task Duration(us)"].to_numpy() * 1000).astype(np.int64)
    comm = (ops["Task Type"] == "COMMUNICATION").to_numpy()
    want = np.zeros(len(ops))
    prev_end = None
    for i in np.argsort(start, kind="stable"):
        if comm[i]:
            continue
        if prev_end is not None:
            want[i] = max(0, start[i] - prev_end) / 1000
        prev_end = start[i] + dur[i]
    got = ops["Task Wait Time(us)"].to_numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    assert got[0] == 0 and (got >= 0).all() and (got[comm] == 0).all()
    assert (got > 0).any()  # the host gap between steps shows up


# ------------------------------------------------------------------- PipeUtilization
def _notnan(s):
    return s.to_numpy(dtype=float)[~np.isnan(s.to_numpy(dtype=float))]


def test_ratios_within_unit_interval(run):
    ops = run.profile.op_summary
    cols = [c for c in ops.columns if c.endswith("_ratio") or c.endswith("icache_miss_rate")]
    assert len(cols) >= 7
    for c in cols:
        v = _notnan(ops[c])
        assert len(v) > 0, c
        assert ((v >= 0) & (v <= 1)).all(), (c, v.min(), v.max())


def _a2_core_rows(ops):
    aic = (ops["Task Type"] == "AI_CORE").to_numpy()
    aiv = (ops["Task Type"] == "AI_VECTOR_CORE").to_numpy()
    return aic, aiv


@pytest.mark.parametrize("which", ["resnet_run", "resnet_run_ws1"])
def test_a2_metrics_sit_on_the_right_core(which, request):
    ops = request.getfixturevalue(which).profile.op_summary
    aic, aiv = _a2_core_rows(ops)
    assert aic.any() and aiv.any()
    aic_cols = [c for c in ops.columns if c.startswith("aic_")] + ["aicore_time(us)", "cube_utilization(%)"]
    aiv_cols = [c for c in ops.columns if c.startswith("aiv_")]
    for c in aic_cols:
        assert ops[c][aic].notna().all() and ops[c][~aic].isna().all(), c
    for c in aiv_cols:
        assert ops[c][aiv].notna().all() and ops[c][~aiv].isna().all(), c


@pytest.mark.parametrize("which", ["resnet_run", "resnet_run_ws1"])
def test_cube_utilization(which, request):
    run = request.getfixturevalue(which)
    ops = run.profile.op_summary
    dev = run.profile.device
    freq, cores = dev["aic_frequency"], dev["ai_core_num"]
    assert (freq, cores) == (1800, 24)
    aic, _ = _a2_core_rows(ops)
    sel = ops[aic]
    cu = sel["cube_utilization(%)"].to_numpy(float)
    assert ((cu >= 0) & (cu <= 100)).all()
    total = sel["aic_total_cycles"].astype("int64").to_numpy()
    dur = sel["Task Duration(us)"].to_numpy()
    want = total / (freq * cores * dur) * 100
    np.testing.assert_allclose(cu, want, rtol=0, atol=0.0006)
    assert cu.max() > 1  # not all trivially zero


def test_aicore_time_and_pipe_times_a2(resnet_run):
    ops = resnet_run.profile.op_summary
    dev = resnet_run.profile.device
    aic, aiv = _a2_core_rows(ops)
    for mask, prefix, time_col, cores in ((aic, "aic_", "aicore_time(us)", dev["ai_core_num"]),
                                          (aiv, "aiv_", "aiv_time(us)", dev["aiv_num"])):
        sel = ops[mask]
        t = sel[time_col].to_numpy(float)
        dur = sel["Task Duration(us)"].to_numpy()
        assert (t <= dur).all() and (t > 0).all()
        # aicore_time = per-block cycles x waves / frequency; total cycles = per-block cycles x blocks
        bd = sel["Block Num"].astype("int64").to_numpy()
        total = sel[f"{prefix}total_cycles"].astype("int64").to_numpy()
        assert (total % bd == 0).all()
        want = total / bd * np.ceil(bd / cores) / dev["aic_frequency"]
        np.testing.assert_allclose(t, want, rtol=0, atol=0.0006)
        pipes = [c[len(prefix):-len("_ratio")] for c in sel.columns if c.startswith(prefix) and c.endswith("_ratio")]
        assert pipes == (C.PIPE_UTILIZATION_A2_AIC if prefix == "aic_" else C.PIPE_UTILIZATION_A2_AIV)
        for pipe in pipes:
            ratio = sel[f"{prefix}{pipe}_ratio"].to_numpy(float)
            ptime = sel[f"{prefix}{pipe}_time(us)"].to_numpy(float)
            assert (np.abs(ptime - ratio * t) <= 0.0005 * t + 0.0011).all(), pipe
            assert (ptime <= t + 0.001).all()


def test_910a_metrics(mlp_910a_run):
    ops = mlp_910a_run.profile.op_summary
    dev = mlp_910a_run.profile.device
    assert (dev["ai_core_num"], dev["aic_frequency"]) == (32, 1000)
    assert set(ops["Task Type"].astype(str)) <= {"AI_CORE", "AI_CPU", "COMMUNICATION"}
    core = (ops["Task Type"] == "AI_CORE").to_numpy()
    sel = ops[core]
    assert sel[NON_STARS_PIPE].notna().all().drop("memory_bound").all()
    t = sel["aicore_time(us)"].to_numpy(float)
    assert (t <= sel["Task Duration(us)"].to_numpy()).all()
    for pipe in C.PIPE_UTILIZATION_910A:
        ptime, ratio = sel[f"{pipe}_time(us)"].to_numpy(float), sel[f"{pipe}_ratio"].to_numpy(float)
        assert (np.abs(ptime - ratio * t) <= 0.0005 * t + 0.0011).all(), pipe
    mb = sel["memory_bound"].to_numpy(float)
    denom = np.maximum(sel["mac_ratio"].to_numpy(float), sel["vec_ratio"].to_numpy(float))
    ok = denom >= 0.05
    np.testing.assert_allclose(mb[ok], sel["mte2_ratio"].to_numpy(float)[ok] / denom[ok], rtol=0.05, atol=0.01)
    assert ops[~core][NON_STARS_PIPE[:-1]].isna().all().all()


def test_pmu_off_rows_are_nan_on_non_pmu_tasks(resnet_run):
    ops = resnet_run.profile.op_summary
    comm = ops[ops["Task Type"] == "COMMUNICATION"]
    assert len(comm) > 0
    pmu = A2_PIPE_HEADER[21:]
    for c in pmu:
        assert comm[c].isna().all(), c


def test_dtypes_of_the_frame(resnet_run):
    ops = resnet_run.profile.op_summary
    assert ops["Task Start Time(us)"].dtype == np.float64 and ops["Task Duration(us)"].dtype == np.float64
    assert str(ops["Task ID"].dtype) == "Int64" and str(ops["aic_total_cycles"].dtype) == "Int64"
    assert isinstance(ops["Op Name"].dtype, pd.CategoricalDtype)
    assert math.isclose(ops["Task Wait Time(us)"].sum(), ops["Task Wait Time(us)"].sum())


def _assert_spans_are_op_rows(rundir) -> None:
    spans, rows = summary.op_spans(rundir), summary.op_rows(rundir)
    pd.testing.assert_frame_equal(spans.frame, rows.frame[summary.SPAN_COLUMNS], check_exact=True)
    for field in ("iteration", "start_ns", "connection_id"):
        assert np.array_equal(getattr(spans, field), getattr(rows, field)), field


def test_op_spans_are_op_summarys_rows_and_columns(run):
    """A cluster's step split and collective tables read op_spans instead of every rank's op_summary:
    the same rows in the same order, each column's values, dtype and categories op_summary's."""
    _assert_spans_are_op_rows(run.profile.run)


def test_op_spans_at_task_trace_l0_and_with_two_graphs(run_profiled, tmp_path):
    """Where OP Type and Task Type are N/A (l0) and where two models' ops interleave."""
    l0 = run_profiled(small_resnet(), task_trace="l0", hccl="on")
    assert set(l0.profile.op_summary["Task Type"].astype(str)) == {"N/A"}
    _assert_spans_are_op_rows(l0.profile.run)
    two = run_two_graphs(tmp_path / "two")
    assert set(two.op_summary["Model ID"]) == {1, 2}
    _assert_spans_are_op_rows(two.run)


def test_device_timeline_is_consistent(run):
    """On the device: no overlap within a stream, and each synchronous step starts after the previous ended."""
    p = run.profile
    ops = p.op_summary
    rows = summary.op_rows(p.run)
    start = rows.start_ns
    end = start + np.rint(ops["Task Duration(us)"].to_numpy() * 1000).astype(np.int64)
    stream = ops["Stream ID"].astype("Int64").fillna(-1).to_numpy()
    comm = (ops["Task Type"] == "COMMUNICATION").to_numpy()
    for mask in (~comm, comm):
        if mask.any():
            order = np.argsort(start[mask], kind="stable")
            s, e = start[mask][order], end[mask][order]
            assert (s[1:] >= e[:-1]).all()
    assert len(set(stream[~comm])) == 1
    its = rows.iteration
    for it in range(2, run.steps + 1):
        assert start[its == it].min() > end[its == it - 1].max()


def test_times_ns_gives_the_recorded_ns_the_float_us_column_cannot(resnet_run):
    """At an epoch of ~1.8e15 us a float step is 0.25 us: Profile.times_ns gives each row's exact ns."""
    p = resnet_run.profile
    exact = p.times_ns("op_summary")
    assert list(exact.columns) == ["Task Start Time(us)"] and len(exact) == len(p.op_summary)
    ns = exact["Task Start Time(us)"].to_numpy(np.int64)
    assert np.array_equal(ns, p.source.op_rows().start_ns)
    floats = p.op_summary["Task Start Time(us)"].to_numpy()
    assert np.array_equal(floats, ns / 1000.0)  # the table's float is the nearest one to each ns
    assert np.array_equal(floats % 0.25, np.zeros(len(floats)))  # floats this large step by 0.25 us,
    assert (ns % 250 != 0).any()  # the recorded ns do not
    steps = p.times_ns("step_trace")
    assert list(steps.columns) == [c for c in p.step_trace.columns if c in steps.columns]
    assert np.array_equal(steps["Iteration End(us)"].to_numpy(np.int64) / 1000.0,
                          p.step_trace["Iteration End(us)"].to_numpy())
    with pytest.raises(ValueError, match="table 'op_statistic' has no timestamp columns; tables with them: "
                                         "op_summary, step_trace, "):
        p.times_ns("op_statistic")


def test_ops_of_one_model_keeps_its_iterations_apart_from_the_others(tmp_path):
    """Each model counts its own iterations: iteration 2 of a run that trains graph 1 and infers with graph 2
    is one of each, and ``model_id`` picks one model's."""
    p = run_two_graphs(tmp_path)
    models = p.op_summary["Model ID"]
    per_model = models.value_counts().to_dict()
    assert sorted(per_model) == [1, 2]
    both = p.ops(2)
    assert set(both["Model ID"]) == {1, 2} and len(both) == (per_model[1] + per_model[2]) // 3
    for model in (1, 2):
        mine = p.ops(2, model_id=model)
        assert set(mine["Model ID"]) == {model} and len(mine) == per_model[model] // 3
        assert (p.iteration_of_ops[mine.index] == 2).all()
        last = p.ops(model_id=model)
        assert (p.iteration_of_ops[last.index] == 3).all() and len(last) == per_model[model] // 3
    assert len(p.ops(2, model_id=1)) + len(p.ops(2, model_id=2)) == len(both)
    with pytest.raises(ValueError, match=r"^model_id 7 is not in this run; its model ids are 1, 2$"):
        p.ops(model_id=7)
    with pytest.raises(ValueError, match=r"^iteration 9 is not in model 2; its iterations are 1..3$"):
        p.ops(9, model_id=2)
    with pytest.raises(TypeError, match=r"^model_id '1' is not valid; accepted: an integer$"):
        p.ops(model_id="1")
