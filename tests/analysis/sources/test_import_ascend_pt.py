"""Importing torch_npu ``*_ascend_pt`` directories and clusters of them, written from the documented formats."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb.analysis import Profile
from geprof_nb.analysis.cluster.profile import ClusterProfile
from geprof_nb.analysis.sources.ascend_pt import AscendPtSource
from geprof_nb.analysis.tables.breakdown import STEP_TRACE_TIME
from geprof_nb.errors import ImportFormatError
from helpers.real_fixtures import (
    PT_LINK_GBPS,
    PT_LINK_MB,
    PT_LINK_MS,
    STEP_TRACE_TIME_HEADER,
    write_ascend_pt,
    write_cluster,
    write_msprof,
)


@pytest.fixture
def level1(tmp_path):
    run = write_ascend_pt(tmp_path)
    return run, geprof_nb.load(run.path)


def test_kernel_details_renames_are_undone(level1):
    run, p = level1
    assert isinstance(p, Profile) and isinstance(p.source, AscendPtSource)
    f = p.op_summary
    cols = list(f.columns)
    assert cols[:11] == ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State",
                         "Task Type", "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)"]
    assert cols[11:13] == ["Block Num", "Mix Block Num"]
    assert not {"Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Block Dim"} & set(cols)
    assert (f["Device_id"] == 0).all() and f["Device_id"].dtype == np.int64
    assert f["Op Name"].tolist() == [k.name for k in run.kernels]
    assert f["Task Type"].tolist() == [k.core for k in run.kernels]
    assert f["Task Duration(us)"].tolist() == [k.dur_ns / 1000 for k in run.kernels]
    assert f["Block Num"].dtype == "Int64" and f["Block Num"].iloc[0] == 24


def test_exact_start_times_and_steps(level1):
    run, p = level1
    rows = p.source.op_rows()
    assert rows.start_ns.tolist() == [k.start_ns for k in run.kernels]
    assert rows.iteration.tolist() == [k.step for k in run.kernels]
    assert (rows.connection_id == -1).all()
    assert p.iterations.tolist() == [1, 2, 3]


def test_quoted_shape_cells_are_unquoted(level1):
    run, p = level1
    text = (run.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_text()
    assert '"""8192,1024;1024,4096"""' in text
    f = p.op_summary
    assert f["Input Shapes"].iloc[0] == "8192,1024;1024,4096"
    assert f["Input Shapes"].iloc[3] == ""
    assert f["Input Data Types"].iloc[0] == "DT_BF16;DT_BF16" and f["Input Data Types"].iloc[2] == "N/A"
    assert f["Input Shapes"].cat.categories.dtype == object


def test_na_and_pmu_columns(level1):
    _, p = level1
    f = p.op_summary
    comm = (f["Task Type"] == "COMMUNICATION").to_numpy()
    assert f["Task ID"][comm].isna().all() and f["Task ID"][~comm].notna().all()
    assert f["aic_total_cycles"].dtype == "Int64" and f["aic_total_cycles"].iloc[0] == 2070221
    assert np.isnan(f["aic_mac_ratio"].iloc[1]) and f["aiv_vec_ratio"].iloc[1] == 0.351
    assert p.options == {"aic_metrics": "PipeUtilization"} and p.device["chip_family"] == "A2"


def test_other_cores_zero_pmu_cells_read_as_missing(tmp_path):
    """torch_npu writes 0 in the other core's PMU cells of a pure AI Core / AI Vector Core kernel;
    op_summary has them missing (a mean of aiv_vec_ratio must not count the MatMul)."""
    run = write_ascend_pt(tmp_path)
    path = run.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    core = header.index("Accelerator Core")
    for row in rows[1:]:
        for i, name in enumerate(header):
            other = (row[core] == "AI_CORE" and name.startswith("aiv_")) or (
                row[core] == "AI_VECTOR_CORE" and (name.startswith("aic_") or name == "aicore_time(us)"))
            if other or (row[core] == "AI_CPU" and name == "aiv_vec_ratio"):
                row[i] = "0"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    f = geprof_nb.load(run.path).op_summary
    kind = f["Task Type"].astype(str)
    assert f.loc[kind == "AI_CORE", ["aiv_vec_ratio", "aiv_total_cycles"]].isna().all().all()
    assert f.loc[kind == "AI_VECTOR_CORE", ["aicore_time(us)", "aic_mac_ratio"]].isna().all().all()
    assert f.loc[kind == "AI_CORE", "aic_mac_ratio"].iloc[0] == 0.783  # the task's own core is kept
    assert (f.loc[kind == "AI_CPU", "aiv_vec_ratio"] == 0).all()  # not a pure-core task: its 0 is a value


def test_step_trace_time_is_the_step_breakdown_table(level1):
    run, p = level1
    table = p.source.step_breakdown_table()
    assert list(table.columns) == STEP_TRACE_TIME
    assert table["Step"].tolist() == [1, 2, 3] and table["Step"].dtype == np.int64
    assert table["Device_id"].dtype == np.int64
    assert table.iloc[:, 1:].to_numpy().tolist() == run.breakdown
    assert table["Communication"].tolist() == [1500.0] * 3


def test_step_bounds_from_profiler_steps_to_the_last_kernel(level1):
    run, p = level1
    b = p.source.step_bounds()
    last = {s: max(k.start_ns + k.dur_ns for k in run.kernels if k.step == s) for s, _, _ in run.steps}
    assert b.to_numpy().tolist() == [[s, begin, max(end, last[s]), begin] for s, begin, end in run.steps]
    assert list(b.columns) == ["step", "begin", "end", "framework_begin"]  # Preparing counts from the ProfilerStep
    assert all(last[s] > end for s, _, end in run.steps)  # the device runs behind the host


def test_statistics_memory_and_communication(level1):
    run, p = level1
    st = p.op_statistic
    assert list(st.columns)[:3] == ["Device_id", "OP Type", "Core Type"] and (st["Device_id"] == 0).all()
    assert st["Total Time(us)"].tolist() == [3600.021, 90.033]
    api = p.api_statistic
    assert api["Device_id"].tolist() == ["host"] and api["API Name"].tolist() == ["aclnnMm"]
    mem = p.operator_memory
    assert mem["Name"].tolist() == ["aten::mm", "aten::add"] and isinstance(mem["Name"].dtype, pd.CategoricalDtype)
    assert np.isnan(mem["Release Time(us)"].iloc[1]) and mem["Duration(us)"].iloc[0] == 2000.001
    assert mem["Stream Ptr"].dtype == np.int64
    times = p.source.times_ns("operator_memory", mem)
    assert times["Release Time(us)"].iloc[0] - times["Allocation Time(us)"].iloc[0] == 2_000_001
    assert times["Release Time(us)"].iloc[1] is pd.NA
    rec = p.memory_record
    assert rec["Component"].tolist() == ["PTA", "PTA", "APP"] and rec["Stream Ptr"].isna().tolist() == [
        False, False, True]
    ct = p.communication_time
    assert ct["Op Name"].tolist() == ["hcom_allReduce__871_0_1"] * 3
    assert ct["OP Type"].tolist() == ["hcom_allReduce_"] * 3 and ct["Iteration ID"].tolist() == [1, 2, 3]
    assert ct["Elapse Time(ms)"].tolist() == [1.5] * 3 and ct["Wait Time Ratio"].iloc[0] == 0.1463


def test_identity_rank_and_metadata(level1):
    run, p = level1
    assert p.name == run.path.name and p.info["rank"] == 0 and p.info["profiler_level"] == "Level1"
    assert p.info["profiler_metadata"]["distributed_args"]["world_size"] == 2
    assert p.notes == []
    assert geprof_nb.load(run.path / "ASCEND_PROFILER_OUTPUT").path == run.path
    assert geprof_nb.load(run.path.parent).path == run.path  # a directory holding one run


def test_level0_without_step_id_uses_the_trace(tmp_path):
    run = write_ascend_pt(tmp_path, level="Level0", step_id=False, device_id=5)
    p = geprof_nb.load(run.path)
    f = p.op_summary
    assert list(f.columns) == ["Device_id", "Op Name", "OP Type", "Task Type", "Task Start Time(us)",
                               "Task Duration(us)", "Task Wait Time(us)", "Block Num", "Input Shapes",
                               "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
                               "Output Formats"]
    assert p.device_id == 5 and (f["Device_id"] == 5).all()
    with pytest.raises(ValueError, match=r"^model_id 1: this run's op_summary has no Model ID column "):
        p.ops(model_id=1)
    # device kernels run after the host step ends sometimes; the torch_to_npu flows still place them
    assert p.source.op_rows().iteration.tolist() == [k.step for k in run.kernels]
    assert any("ProfilerStep" in n for n in p.notes)
    assert p.options == {}
    table = p.source.step_breakdown_table()  # msprof-analyze's sample header: no Device_id
    assert list(table.columns) == STEP_TRACE_TIME and (table["Device_id"] == 5).all()


def test_device_id_from_the_trace_when_kernel_details_has_none(tmp_path):
    run = write_ascend_pt(tmp_path, device_id=6)
    assert geprof_nb.load(run.path).device_id == 6


def test_without_steps_anywhere_everything_is_iteration_1(tmp_path):
    run = write_ascend_pt(tmp_path, step_id=False)
    trace = run.path / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    events = [e for e in json.loads(trace.read_text()) if not e["name"].startswith("ProfilerStep")]
    trace.write_text(json.dumps({"traceEvents": events}))
    p = geprof_nb.load(run.path)
    assert set(p.iterations.tolist()) == {1} and p.source.step_bounds().empty
    assert any("every kernel is in iteration 1" in n for n in p.notes)


def test_kernels_outside_steps_are_iteration_0(tmp_path):
    run = write_ascend_pt(tmp_path)
    path = run.path / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = path.read_text().splitlines()
    lines[1] = "," + lines[1].split(",", 1)[1]
    path.write_text("\n".join(lines) + "\n")
    p = geprof_nb.load(run.path)
    assert p.source.op_rows().iteration[0] == 0
    assert any("1 kernels have no Step Id" in n for n in p.notes)


# ------------------------------------------------------------------------------- clusters
def test_cluster_of_ascend_pt_ranks(tmp_path):
    runs = write_cluster(tmp_path / "cluster")
    c = geprof_nb.load(tmp_path / "cluster")
    assert isinstance(c, ClusterProfile) and list(c.ranks) == [0, 1]
    assert c.rank(1).path == runs[1].path and c.rank(1).device_id == 1
    b = c.step_breakdown
    assert list(b.columns) == ["Rank", *STEP_TRACE_TIME]
    assert b["Rank"].tolist() == [0, 0, 0, 1, 1, 1] and b["Rank"].dtype == np.int64
    for r in (0, 1):
        part = b[b["Rank"] == r].drop(columns="Rank").reset_index(drop=True)
        pd.testing.assert_frame_equal(part, c.rank(r).step_breakdown)
    assert (b[b["Rank"] == 1]["Computing"].to_numpy() > b[b["Rank"] == 0]["Computing"].to_numpy()).all()
    with pytest.raises(KeyError, match=r"no rank 5 .* ranks: \[0, 1\]"):
        c.rank(5)
    assert repr(c) == "<geprof ClusterProfile cluster: ranks [0, 1]>"


def test_cluster_communication_matrix_from_communication_matrix_json(tmp_path):
    """torch_npu records no HCCL sub-tasks: the links are each rank's communication_matrix.json, summed
    over the steps as msprof-analyze does: the ``allreduce-total`` entries, not the ``top1`` statistics."""
    write_cluster(tmp_path)
    c = geprof_nb.load(tmp_path)
    m = c.communication_matrix
    assert m[["Src Rank", "Dst Rank", "Link Type", "Transport Type"]].values.tolist() == [
        [0, 1, "HCCS", "SDMA"], [1, 0, "HCCS", "SDMA"]]
    assert m["Tasks"].tolist() == [3, 3]  # one total entry a step
    assert m["Size(Byte)"].tolist() == [int(3 * PT_LINK_MB * 1e6)] * 2
    assert m["Transit Time(us)"].to_numpy() == pytest.approx([3 * PT_LINK_MS * 1000] * 2)
    assert m["Bandwidth(GB/s)"].to_numpy() == pytest.approx([PT_LINK_GBPS] * 2, abs=1e-4)
    assert c.slow_links.empty


def test_cluster_maps_local_ranks_to_global_by_each_ranks_own_link(tmp_path):
    """Ranks 4 and 5 are local ranks 0 and 1 of their group: each file's ``i-i`` link says whose is which."""
    for rank, local in ((4, 0), (5, 1)):
        write_ascend_pt(tmp_path, rank, local_rank=local)
    m = geprof_nb.load(tmp_path).communication_matrix
    assert m[["Src Rank", "Dst Rank"]].values.tolist() == [[4, 5], [5, 4]]


def test_damaged_communication_matrix_json_names_the_link(tmp_path):
    run = write_cluster(tmp_path)[1]
    path = run.path / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json"
    content = json.loads(path.read_text())
    content["step2"]["collective"]["allreduce-total@5196826027332097320"]["1-0"]["Transit Time(ms)"] = "fast"
    path.write_text(json.dumps(content))
    with pytest.raises(ImportFormatError, match=r"communication_matrix.json: allreduce-total@\d+ 1-0: link field "
                                                r"'Transit Time\(ms\)' is 'fast'; expected a number"):
        geprof_nb.load(tmp_path).communication_matrix  # noqa: B018


def test_cluster_takes_the_newest_run_of_a_rank(tmp_path):
    write_cluster(tmp_path)
    newer = write_ascend_pt(tmp_path, 1, pid=32000, n_steps=2)
    newer.path.rename(newer.path.with_name(newer.path.name.replace("20250101000000001", "20250102000000001")))
    c = geprof_nb.load(tmp_path)
    assert c.rank(1).iterations.tolist() == [1, 2]
    assert any("rank 1: 2 runs" in n for n in c.notes)


def test_cluster_of_rank_directories(tmp_path):
    for r in (0, 1):
        write_msprof(tmp_path / f"rank_{r}", device_id=r)
    c = geprof_nb.load(tmp_path)
    assert isinstance(c, ClusterProfile) and list(c.ranks) == [0, 1]
    assert c.rank(1).device_id == 1 and len(c.step_breakdown) == 6


def test_a_device_the_ranks_do_not_have_is_refused_naming_device_id(tmp_path):
    run = write_ascend_pt(tmp_path / "one", device_id=6)
    with pytest.raises(ValueError) as err:
        geprof_nb.load(run.path, device_id=0)
    assert str(err.value) == f"device_id 0 is not in {run.path.resolve()}; its devices are 6"
    assert geprof_nb.load(run.path, device_id=6).device_id == 6
    ranks = write_cluster(tmp_path / "cluster")  # rank r on device r
    with pytest.raises(ValueError) as err:
        geprof_nb.load(tmp_path / "cluster", device_id=1)
    assert str(err.value) == f"device_id 1 is not in {ranks[0].path.resolve()}; its devices are 0"


def test_dirs_without_ranks_open_the_newest(tmp_path):
    a = write_ascend_pt(tmp_path, 0)
    b = write_ascend_pt(tmp_path, 1, n_steps=2)
    for run in (a, b):
        next(run.path.glob("profiler_info_*.json")).rename(run.path / "profiler_info.json")
    p = geprof_nb.load(tmp_path)
    assert isinstance(p, Profile) and p.path == b.path
    assert any("holds 2 runs" in n for n in p.notes)


def test_step_trace_time_header_constant_matches_breakdown():
    assert STEP_TRACE_TIME_HEADER == STEP_TRACE_TIME
