"""Importing real msprof output (``PROF_*/mindstudio_profiler_output``) written from the documented formats."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb.analysis import Profile
from geprof_nb.analysis.sources.msprof import MsprofSource
from helpers.real_fixtures import (
    A2_MEMORY_HEADER,
    A2_PIPE_HEADER,
    A910_PIPE_HEADER,
    OLD_STAMP,
    STAMP,
    write_csv,
    write_msprof,
)


@pytest.fixture
def a2(tmp_path):
    run = write_msprof(tmp_path)
    return run, geprof_nb.load(run.path)


def test_op_summary_keeps_msprofs_columns_and_exact_start_times(a2):
    run, p = a2
    assert isinstance(p, Profile) and isinstance(p.source, MsprofSource)
    f = p.op_summary
    assert list(f.columns) == A2_PIPE_HEADER
    assert len(f) == len(run.rows) == 15
    start_ns = p.source.op_rows().start_ns
    assert start_ns.dtype == np.int64
    assert start_ns.tolist() == [r.start_ns for r in run.rows]
    assert start_ns[0] == 1_717_575_960_208_020_758  # float64 us would give ...020_750
    assert (f["Task Start Time(us)"].to_numpy() == start_ns / 1000.0).all()
    assert f["Task Duration(us)"].tolist() == [r.dur_ns / 1000.0 for r in run.rows]
    times = p.source.times_ns("op_summary", f)
    assert times["Task Start Time(us)"].tolist() == start_ns.tolist()


def test_na_cells_are_missing_values_and_text_stays_text(a2):
    run, p = a2
    f = p.op_summary
    comm = (f["Task Type"] == "COMMUNICATION").to_numpy()
    cube = (f["Task Type"] == "AI_CORE").to_numpy()
    assert comm.sum() == 3
    assert f["Task ID"].isna().to_numpy().tolist() == comm.tolist()
    assert f["Stream ID"][comm].isna().all() and f["Stream ID"][~comm].notna().all()
    assert (f["OP State"][comm] == "N/A").all() and (f["OP State"][~comm] == "static").all()
    assert f["Context ID"].isna().all()
    assert f["aiv_vec_ratio"][cube].isna().all() and f["aic_mac_ratio"][cube].notna().all()
    assert f["aic_total_cycles"][cube].tolist() == [int(r.cells["aic_total_cycles"]) for r in run.rows if
                                                    r.task_type == "AI_CORE"]
    assert f["aic_total_cycles"][~cube].isna().all()
    assert f["Block Num"][comm].tolist() == [0, 0, 0]
    first_wait = [r.cells["Task Wait Time(us)"] for r in run.rows][1]
    assert first_wait.endswith("000") and f["Task Wait Time(us)"].iloc[1] == float(first_wait)


def test_dtypes_match_a_geprof_run(a2, resnet_run):
    _, p = a2
    ours = resnet_run.profile.op_summary.dtypes
    theirs = p.op_summary.dtypes
    assert list(theirs.index) == list(ours.index)
    for col in ours.index:
        a, b = ours[col], theirs[col]
        if isinstance(a, pd.CategoricalDtype):
            assert isinstance(b, pd.CategoricalDtype) and b.categories.dtype == object, col
        else:
            assert a == b, col


def test_shapes_are_unquoted_and_scalars_kept(a2):
    _, p = a2
    f = p.op_summary
    by_name = f.drop_duplicates("Op Name").set_index("Op Name")
    assert by_name.loc["fc1", "Input Shapes"] == "8,16;16,32"
    assert by_name.loc["mean", "Input Shapes"] == "8,32;"
    assert by_name.loc["mean", "Output Shapes"] == ""
    assert by_name.loc["hcom_allReduce__871_0_1", "Input Shapes"] == "N/A"
    assert by_name.loc["fc1", "Input Data Types"] == "FLOAT16;FLOAT16"


def test_iterations_follow_step_trace_windows(tmp_path):
    run = write_msprof(tmp_path, extra_late=True)
    p = geprof_nb.load(run.path)
    assert p.source.op_rows().iteration.tolist() == [r.iteration for r in run.rows]
    assert p.iterations.tolist() == [1, 2, 3]
    assert len(p.ops(2)) == 5
    assert any("1 op_summary rows start after the last step_trace iteration end" in n for n in p.notes)


def test_without_step_trace_everything_is_iteration_1(tmp_path):
    run = write_msprof(tmp_path, step_trace=False)
    p = geprof_nb.load(run.path)
    assert set(p.iterations.tolist()) == {1}
    assert p.step_trace.empty and list(p.step_trace.columns)[:2] == ["Device_id", "Iteration ID"]
    assert any("no step_trace" in n for n in p.notes)


def test_step_trace_repeats_reduce_pairs(a2):
    run, p = a2
    st = p.step_trace
    assert list(st.columns[-4:]) == ["Reduce Start(us)", "Reduce Duration(us)"] * 2
    assert st["Iteration ID"].tolist() == [1, 2, 3] and st["Iteration ID"].dtype == np.int64
    assert np.isnan(st.iloc[0]["Data Aug Bound(us)"]) and not np.isnan(st.iloc[1]["Data Aug Bound(us)"])
    assert np.isnan(st.iloc[2, -2]) and np.isnan(st.iloc[2, -1]) and not np.isnan(st.iloc[1, -2])
    assert st.iloc[0, -3] == 1500.25
    assert (st["Iteration End(us)"].to_numpy() == np.asarray(run.step_ends) / 1000.0).all()
    times = p.source.times_ns("step_trace", st)
    assert list(times.columns) == ["FP Start(us)", "BP End(us)", "Iteration End(us)", "Reduce Start(us)",
                                   "Reduce Start(us)"]
    assert times["Iteration End(us)"].tolist() == run.step_ends
    assert times.iloc[2, 4] is pd.NA
    bounds = p.source.step_bounds()
    assert bounds["end"].tolist() == run.step_ends and bounds["begin"].tolist() == run.step_begins


def test_step_breakdown_from_exact_bounds(a2):
    run, p = a2
    b = p.step_breakdown
    assert b["Step"].tolist() == [1, 2, 3]
    assert b["Communication"].tolist() == [1500.25] * 3
    assert b["Stage"].iloc[0] == (run.step_ends[0] - run.step_begins[0]) / 1000
    assert b["Stage"].iloc[1] == (run.step_ends[1] - run.step_ends[0]) / 1000


def test_other_summaries(a2):
    run, p = a2
    st = p.op_statistic
    assert st["OP Type"].tolist()[0] == "MatMulV2" and st["Count"].dtype == np.int64
    assert st.loc[st["OP Type"] == "Add", "Total Time(us)"].item() == 3 * 3.217
    api = p.api_statistic
    assert api["Device_id"].tolist() == ["host", "host"] and api["Variance"].tolist() == [0.807, 0.0]
    tt = p.task_time
    assert tt["kernel_name"].iloc[0] == "N/A" and isinstance(tt["kernel_name"].dtype, pd.CategoricalDtype)
    assert tt["stream_id"].dtype == np.int64
    tt_ns = p.source.times_ns("task_time", tt)
    assert tt_ns["task_start(us)"].iloc[1] == run.rows[0].start_ns
    assert tt_ns["task_stop(us)"].iloc[1] == run.rows[0].start_ns + run.rows[0].dur_ns
    cs = p.communication_statistic
    assert cs["OP Type"].tolist() == ["hcom_allReduce_"] and cs["Count"].tolist() == [3]
    tx = p.msprof_tx
    assert tx["message"].tolist() == ["epoch 1, step 1"] and tx["payload_value"].tolist() == ["N/A"]
    assert np.isnan(tx["Device Start_time(us)"].iloc[0]) and tx["pid"].dtype == np.int64
    assert p.source.times_ns("msprof_tx", tx)["Start_time(us)"].iloc[0] == 1_717_575_960_208_011_757


def test_identity_and_device_facts(a2):
    run, p = a2
    assert p.name == run.path.name and p.path == run.path
    assert p.info["format"] == "msprof" and p.options == {"aic_metrics": "PipeUtilization"}
    assert p.device == {"chip_family": "A2", "ai_core_num": 24, "aic_frequency": 1800, "aiv_num": 48,
                        "hwts_frequency": 50}
    assert p.complete and p.device_id == 0
    assert geprof_nb.load(run.output).op_summary.equals(p.op_summary)  # the output directory itself
    assert geprof_nb.load(run.path.parent).name == run.path.name  # a directory holding the run


def test_sliced_files_are_concatenated_and_the_newest_export_wins(tmp_path):
    run = write_msprof(tmp_path, slices=3, stale_export=True)
    assert len(list(run.output.glob("op_summary_slice_*"))) == 3
    p = geprof_nb.load(run.path)
    assert p.source.op_rows().start_ns.tolist() == [r.start_ns for r in run.rows]
    assert p.info["files"]["op_summary"] == [f"op_summary_slice_{i}_{STAMP}.csv" for i in range(3)]
    assert any(f"op_summary_{OLD_STAMP}.csv" in n and "newest" in n for n in p.notes)


def test_incomplete_slices_are_skipped(tmp_path):
    run = write_msprof(tmp_path, slices=3, stale_export=True)
    (run.output / f"op_summary_slice_1_{STAMP}.csv").unlink()
    p = geprof_nb.load(run.path)
    assert len(p.op_summary) == 1  # the older, complete export
    assert any("incomplete" in n for n in p.notes)


def test_910a_header_without_mix_block_num_and_context_id(tmp_path):
    run = write_msprof(tmp_path, header="910A-PipeUtilization")
    p = geprof_nb.load(run.path)
    f = p.op_summary
    assert list(f.columns) == A910_PIPE_HEADER
    assert "Mix Block Num" not in f.columns and "Context ID" not in f.columns
    assert p.device["chip_family"] == "910A" and p.options == {"aic_metrics": "PipeUtilization"}
    assert f["total_cycles"].dtype == "Int64" and f["memory_bound"].dtype == np.float64
    vector = (f["Task Type"] == "AI_VECTOR_CORE").to_numpy()
    assert f["vec_ratio"][vector].notna().all()


def test_memory_metric_columns(tmp_path):
    run = write_msprof(tmp_path, header="A2-Memory")
    p = geprof_nb.load(run.path)
    f = p.op_summary
    assert list(f.columns) == A2_MEMORY_HEADER
    assert p.options == {"aic_metrics": "Memory"}
    cube = (f["Task Type"] == "AI_CORE").to_numpy()
    assert f["aic_main_mem_read_bw(GB/s)"].dtype == np.float64
    assert f["aic_main_mem_read_bw(GB/s)"][cube].notna().all() and f["aiv_ub_read_bw(GB/s)"][cube].isna().all()


def test_a_device_is_chosen(tmp_path):
    run = write_msprof(tmp_path, device_id=3)
    p = geprof_nb.load(run.path)
    assert p.device_id == 3 and (p.op_summary["Device_id"] == 3).all()
    assert any("device 0 requested" in n for n in p.notes)
    assert len(p.step_trace) == 3 and len(p.task_time) == 13


def test_a_device_the_data_does_not_have_is_refused_naming_device_id(tmp_path):
    run = write_msprof(tmp_path, device_id=3)
    with pytest.raises(ValueError) as err:
        geprof_nb.load(run.path, device_id=0)
    assert str(err.value) == f"device_id 0 is not in {run.path.resolve()}; its devices are 3"
    assert geprof_nb.load(run.path, device_id=np.int64(3)).device_id == 3


def test_rows_of_other_devices_are_left_out(tmp_path):
    run = write_msprof(tmp_path)
    path = next(run.output.glob("op_summary_*.csv"))
    lines = path.read_text().splitlines()
    extra = [line.replace("0,", "1,", 1) for line in lines[1:3]]
    path.write_text("\n".join(lines + extra) + "\n")
    p = geprof_nb.load(run.path)
    assert len(p.op_summary) == 15 and p.device_id == 0
    assert any("devices [0, 1]" in n for n in p.notes)
    assert len(geprof_nb.load(run.path, device_id=1).op_summary) == 2


def test_crlf_files_and_bom(tmp_path):
    run = write_msprof(tmp_path)
    path = next(run.output.glob("api_statistic_*.csv"))
    header = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"]
    write_csv(path, header, [["host", "acl", "aclrtSynchronizeStream", "1.5", "1", "1.5", "1.5", "1.5", "0"]],
              crlf=True)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    api = geprof_nb.load(run.path).api_statistic
    assert list(api.columns) == header and api["Count"].tolist() == [1]
