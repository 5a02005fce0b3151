"""Export -> import gives back the tables we exported (msprof, ascend_pt, parquet)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis import ClusterProfile
from geprof_nb.analysis.sources.source import TIMESTAMP_COLUMNS
from geprof_nb.analysis.tables.breakdown import step_windows
from helpers.geprof_testing import run_profiled_session, small_resnet

MSPROF_TABLES = ("op_summary", "op_statistic", "api_statistic", "task_time", "step_trace",
                 "communication_statistic", "msprof_tx")


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """ResNet on 8 ranks with every layer that an export carries: hccl, aicpu, memory, APIs, markers."""
    out = tmp_path_factory.mktemp("full")
    prof = {"output": str(out), "training_trace": "on", "task_trace": "on", "aic_metrics": "PipeUtilization",
            "hccl": "on", "aicpu": "on", "task_memory": "on", "ge_api": "l1", "msproftx": "on"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "geprof.clock": "virtual",
                            "ge.exec.profilingOptions": json.dumps(prof)}) == ge.SUCCESS
    try:
        sess = ge.Session()
        assert sess.add_graph(1, small_resnet(8)) == ge.SUCCESS
        for step in range(3):
            with ge.mstx.range(f"step {step}"):
                assert sess.run_graph(1) == ge.SUCCESS
    finally:
        ge.GEFinalize()
    return geprof_nb.load(out)


def _equal(a: pd.DataFrame, b: pd.DataFrame, name: str) -> None:
    assert list(a.columns) == list(b.columns), name
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_categorical=False,
                                  check_dtype=False, obj=name)


def test_msprof_export_imports_to_equal_tables(full_run, tmp_path):
    back = geprof_nb.load(full_run.export(tmp_path, format="msprof"))
    for name in MSPROF_TABLES:
        ours = getattr(full_run, name)
        assert len(ours) > 0, name  # the run exercised every table the export writes
        _equal(getattr(back, name), ours, name)
    assert (back._op_rows.start_ns == full_run._op_rows.start_ns).all()  # exact ns, not the printed µs
    assert list(back.iterations) == list(full_run.iterations) == [1, 2, 3]
    # Preparing counts from the ModelExecute call that ran a step: the timeline JSON's Model@ModelExecute events
    _equal(back.step_breakdown, full_run.step_breakdown, "step_breakdown")


def test_msprof_export_without_a_timeline_counts_preparing_from_the_step_window(full_run, tmp_path):
    back = geprof_nb.load(full_run.export(tmp_path, format="msprof", timeline=False))
    preparing = "Preparing"  # no ModelExecute call times: api_statistic only sums them
    _equal(back.step_breakdown.drop(columns=preparing), full_run.step_breakdown.drop(columns=preparing),
           "step_breakdown")
    assert (back.source.step_bounds()["framework_begin"] == -1).all()
    windows = step_windows(back.source.step_bounds(), back._op_rows)
    first = pd.Series(back._op_rows.start_ns).groupby(back._op_rows.iteration).min()
    assert back.step_breakdown[preparing].tolist() == [(int(first[s]) - int(w0)) / 1000 for s, w0 in
                                                       zip(windows["step"], windows["start"])]
    assert back.step_breakdown[preparing].tolist() != full_run.step_breakdown[preparing].tolist()


@pytest.fixture(scope="module")
def l0_run(tmp_path_factory):
    """An MLP on 8 ranks at task_trace l0: op_summary has no Task Type, the collectives are HCCL tasks."""
    out = tmp_path_factory.mktemp("l0")
    return run_profiled_session(out, ge.models.mlp(training=True, world_size=8), 3, task_trace="l0").profile


COMMUNICATION = ["Step", "Communication(Not Overlapped)", "Overlapped", "Communication"]


@pytest.mark.parametrize("fmt", ["msprof", "ascend_pt"])
def test_task_trace_l0_import_keeps_the_collectives(l0_run, tmp_path, fmt):
    """msprof: op_summary's N/A Task Type rows matched to task_time's HCCL tasks (stream, task id, start);
    ascend_pt: Level0 kernel_details rows matched to communication.json's collectives (start, duration).
    The ascend_pt step split is computed here, not read: step_trace_time.csv is removed."""
    exported = l0_run.export(tmp_path, format=fmt)
    if fmt == "ascend_pt":
        (exported / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").unlink()
    back = geprof_nb.load(exported)
    assert set(back.op_summary["Task Type"].astype(str)) == {"N/A"} and back.source.step_breakdown_table() is None
    ours = l0_run.source.communication_rows()
    assert ours.sum() == 3 and back.source.communication_rows().tolist() == ours.tolist()
    assert (l0_run.step_breakdown["Communication"] > 0).all()
    _equal(back.step_breakdown[COMMUNICATION], l0_run.step_breakdown[COMMUNICATION], "step_breakdown")
    assert len(l0_run.communication_statistic) == 1
    _equal(back.communication_statistic, l0_run.communication_statistic, "communication_statistic")
    rule = "Communication not overlapped with compute"
    assert rule in set(l0_run.advise()["Rule"]) and rule in set(back.advise()["Rule"])
    assert not [n for n in back.notes if "communication.json" in n]


def test_level0_collectives_matching_no_kernel_are_noted(l0_run, tmp_path):
    exported = l0_run.export(tmp_path, format="ascend_pt")
    path = exported / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    content = json.loads(path.read_text())
    for step in content.values():
        for op in step["collective"].values():
            op["Communication Time Info"]["Start Timestamp(us)"] += 3.0  # past the 1 µs a printed start may be off
    path.write_text(json.dumps(content))
    back = geprof_nb.load(exported)
    assert back.source.communication_rows().sum() == 0
    assert ("3 of the 3 collectives in communication.json match no kernel_details row by name and time (or by "
            "start and duration); kernel_details has no Accelerator Core (Level0), so their kernels, if any, count as "
            "computing, not communication") in back.notes


def test_msprof_export_of_an_import_is_byte_identical(full_run, tmp_path):
    first = full_run.export(tmp_path / "a", format="msprof") / "mindstudio_profiler_output"
    second = geprof_nb.load(first.parent).export(tmp_path / "b", format="msprof") / "mindstudio_profiler_output"
    def by_table(out):  # the names' timestamp is the run start, which msprof output does not record
        return {p.name.rsplit("_", 1)[0]: p.read_bytes() for p in out.glob("*.csv")}

    a, b = by_table(first), by_table(second)
    assert sorted(a) == sorted(MSPROF_TABLES)
    for name in MSPROF_TABLES:
        assert b[name] == a[name], name


def test_ascend_pt_export_imports_to_equal_tables(full_run, tmp_path):
    back = geprof_nb.load(full_run.export(tmp_path, format="ascend_pt"))
    ours = full_run.op_summary  # kernel_details' 0 for the other core of a pure-core task reads back as missing
    _equal(back.op_summary[list(ours.columns)], ours, "op_summary")
    assert list(back.iterations) == [1, 2, 3]
    assert (back.iteration_of_ops.to_numpy() == full_run.iteration_of_ops.to_numpy()).all()
    _equal(back.step_breakdown, full_run.step_breakdown, "step_breakdown")  # read from step_trace_time.csv
    _equal(back.op_statistic, full_run.op_statistic, "op_statistic")
    for name in ("operator_memory", "memory_record"):
        assert len(getattr(full_run, name)) > 0
        _equal(getattr(back, name), getattr(full_run, name), name)
    assert "3 iterations" in repr(back)


def test_parquet_export_imports_to_equal_tables(full_run, tmp_path):
    back = geprof_nb.load(full_run.export(tmp_path, format="parquet"))
    for name in MSPROF_TABLES + ("step_breakdown", "operator_memory", "memory_record", "hccl_tasks", "aicpu"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(full_run, name), obj=name)
    assert np.array_equal(back._op_rows.start_ns, full_run._op_rows.start_ns)


def test_a_cluster_of_ascend_pt_exports_loads_per_rank(full_run, tmp_path):
    for rank in (0, 1):
        full_run.export(tmp_path, format="ascend_pt", rank=rank)
    cluster = geprof_nb.load(tmp_path)
    assert isinstance(cluster, ClusterProfile) and sorted(cluster.ranks) == [0, 1]
    sb = cluster.step_breakdown
    assert list(sb["Rank"].unique()) == [0, 1]
    for rank in (0, 1):
        mine = sb[sb["Rank"] == rank].drop(columns="Rank")
        _equal(mine, full_run.step_breakdown, f"rank {rank}")


#: Every table of a Profile (tensor_lifetimes is a raw run's only: its pool addresses are in no export).
PROFILE_TABLES = ("op_summary", "op_statistic", "step_trace", "task_time", "api_statistic", "host_events", "msprof_tx",
                  "communication_statistic", "hccl_tasks", "communication_time", "aicpu", "operator_memory",
                  "memory_record", "step_breakdown")


@pytest.mark.parametrize("fmt", ["db", "msprof_db"])
def test_db_export_imports_to_equal_tables(full_run, tmp_path, fmt):
    """torch_npu's and msprof's SQLite layout: every table back as it was, dtypes too, and every timestamp
    exact to the ns (the floats of a table resolve only 0.25 µs)."""
    back = geprof_nb.load(full_run.export(tmp_path, format=fmt))
    assert type(back.source).__name__ == "DbSource" and back.source.torch_npu == (fmt == "db")
    for name in PROFILE_TABLES:
        ours = getattr(full_run, name)
        if name not in ("host_events", "aicpu"):  # this run has no host profiler events and no AI CPU kernels
            assert len(ours) > 0, name
        pd.testing.assert_frame_equal(getattr(back, name), ours, check_categorical=False, obj=name)
    for name in TIMESTAMP_COLUMNS:
        assert back.times_ns(name).reset_index(drop=True).equals(full_run.times_ns(name).reset_index(drop=True)), name
    assert np.array_equal(back.iteration_of_ops.to_numpy(), full_run.iteration_of_ops.to_numpy())
    assert list(back.iterations) == [1, 2, 3] and back.notes == []


#: What only geprof's GEPROF_* tables hold, per format: (table, column or None for the whole table).
ONLY_IN_GEPROF_TABLES = {
    "db": {("op_summary", "Op Name"), ("op_summary", "OP Type"), ("task_time", "kernel_name"), ("hccl_tasks", "Node"),
           ("step_trace", None)},
    "msprof_db": {("op_summary", "Op Name"), ("op_summary", "OP Type"), ("task_time", "kernel_name"),
                  ("hccl_tasks", "Node"), ("step_trace", None), ("step_breakdown", None), ("communication_time",
                  "Iteration ID"), ("hccl_tasks", "Iteration ID"), ("operator_memory", None), ("memory_record", None)},
}


@pytest.mark.parametrize("fmt", ["db", "msprof_db"])
def test_a_db_without_geprofs_tables_reads_from_the_real_ones(full_run, tmp_path, fmt):
    """With the GEPROF_* tables dropped (a DB as torch_npu / msprof write it) every table is built from the real
    schema and equals the Profile's but for what that schema has no place for: a collective's GE node name and type
    (the DB names it as msprof does), step_trace, and for msprof's DB the steps and the per-tensor memory tables
    (rebuilt from NPU_OP_MEM's events)."""
    exported = full_run.export(tmp_path, format=fmt)
    for path in exported.rglob("*.db"):
        conn = sqlite3.connect(path)
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for name in (n for n in names if n.startswith("GEPROF_")):
            conn.execute(f"DROP TABLE {name}")
        conn.commit()
        conn.close()
    back = geprof_nb.load(exported)
    allowed = ONLY_IN_GEPROF_TABLES[fmt]
    for name in PROFILE_TABLES:
        ours, theirs = getattr(full_run, name), getattr(back, name)
        if (name, None) in allowed:
            continue
        skip = [c for t, c in allowed if t == name]
        pd.testing.assert_frame_equal(theirs.drop(columns=skip), ours.drop(columns=skip), check_categorical=False,
                                      check_dtype=len(ours) > 0, obj=name)  # an empty table: any dtype
    comm = full_run.source.communication_rows()
    # the collectives' rows name them as communication_time does (msprof's name and HCCL op type)
    assert back.op_summary["Op Name"].astype(str)[comm].tolist() == full_run.communication_time["Op Name"].tolist()
    assert set(back.op_summary["OP Type"].astype(str)[comm]) == {"hcom_allReduce_"}
    assert back.step_trace.empty and set(back.hccl_tasks["Node"]) == {"N/A"}
    if fmt == "msprof_db":
        assert list(back.iterations) == [1] and "no steps in the DB" in " ".join(back.notes)
        assert len(back.operator_memory) == len(full_run.operator_memory)
        assert (back.operator_memory["Stream Ptr"] == 0).all()


def test_db_and_text_exports_of_one_run_import_alike(full_run, tmp_path):
    """The text and the DB output of one run give the same tables; the DB has more of them (task_time, the HCCL
    sub-tasks, the markers, step_trace: torch_npu's text output has none of these)."""
    text = geprof_nb.load(full_run.export(tmp_path / "text", format="ascend_pt"))
    db = geprof_nb.load(full_run.export(tmp_path / "db", format="db"))
    only_db = {"task_time", "hccl_tasks", "msprof_tx", "step_trace"}
    for name in PROFILE_TABLES:
        if name in only_db:
            assert getattr(text, name).empty and len(getattr(db, name)) > 0, name
            continue
        pd.testing.assert_frame_equal(getattr(db, name), getattr(text, name), check_categorical=False,
                                      check_dtype=False, obj=name)
    assert np.array_equal(db._op_rows.start_ns, text._op_rows.start_ns)


@pytest.mark.parametrize("ts", ["18446744073709551616", "-9223372036854775809", "-1.5", "1e400"])
def test_a_model_execute_time_no_int64_ns_holds_is_as_if_the_call_had_none(full_run, tmp_path, ts):
    """A ts written as a number past 64 bits, negative or past a float (a damaged timeline) is no begin: the steps'
    Preparing counts from their windows, as without a timeline (it raised trace_view's internal _Inexact)."""
    out = full_run.export(tmp_path, format="msprof")
    timeline = next(out.rglob("msprof_*.json"))
    events = json.loads(timeline.read_text())
    calls = [e for e in events if e.get("name") == "Model@ModelExecute"]
    assert calls
    for e in calls:
        e["ts"] = "\x00ts\x00"
    timeline.write_text(json.dumps(events).replace('"\\u0000ts\\u0000"', ts))
    back = geprof_nb.load(out)
    assert (back.source.step_bounds()["framework_begin"] == -1).all()
    without = geprof_nb.load(full_run.export(tmp_path / "plain", format="msprof", timeline=False))
    _equal(back.step_breakdown, without.step_breakdown, "step_breakdown")
