"""torch_npu's DB output read as a Profile: the real files of MindStudio Insight's test data (tests/data/SOURCES.md),
checked against what sqlite3 alone reads from them, and against the text output of the same training."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb.analysis import ClusterProfile
from helpers.real_data import DB_RUNS, PYTORCH_DB, PYTORCH_TEXT


def query(run, sql: str, params: tuple = ()) -> list[tuple]:
    db = next((run / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db"))
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def rank0():
    return geprof_nb.load(DB_RUNS[0])


def test_op_summary_is_the_compute_tasks_and_the_collectives(rank0):
    (n_compute,) = query(DB_RUNS[0], "SELECT count(*) FROM COMPUTE_TASK_INFO")[0]
    (n_comm,) = query(DB_RUNS[0], "SELECT count(*) FROM COMMUNICATION_OP")[0]
    ops = rank0.op_summary
    assert (n_compute, n_comm) == (187, 4) and len(ops) == n_compute + n_comm
    assert (ops["Task Type"] == "COMMUNICATION").sum() == n_comm == rank0.source.communication_rows().sum()
    # a row is its task: name, start and duration (ns -> µs), block dim, shapes without torch_npu's literal quotes
    (name, start, end, block, shapes) = query(DB_RUNS[0], """
        SELECT n.value, t.startNs, t.endNs, c.blockDim, s.value FROM COMPUTE_TASK_INFO c
        JOIN TASK t ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS n ON n.id = c.name
        JOIN STRING_IDS s ON s.id = c.inputShapes WHERE n.value = 'Conv2D1'""")[0]
    row = ops[ops["Op Name"] == "Conv2D1"].iloc[0]
    assert rank0._op_rows.start_ns[ops.index.get_loc(row.name)] == start
    assert row["Task Duration(us)"] == (end - start) / 1000 == 314.786
    assert row["Block Num"] == block == 16 and shapes == '"32,1,224,224,8;121,4,16,8;64"'
    assert row["Input Shapes"] == "32,1,224,224,8;121,4,16,8;64"
    # PMU: ns in the file, µs with 3 decimals here; the vector core's zeros of a cube task are missing
    pmu = dict(query(DB_RUNS[0], """SELECT s.value, p.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name
        JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = p.globalTaskId JOIN STRING_IDS n ON n.id = c.name
        WHERE n.value = 'Conv2D1'"""))
    assert row["aic_mac_time(us)"] == round(pmu["aic_mac_time"] / 1000, 3) == 162.323
    assert row["aicore_time(us)"] == round(pmu["aic_total_time"] / 1000, 3)
    assert row["aic_mac_ratio"] == round(pmu["aic_mac_ratio"], 3) and row["aic_total_cycles"] == 8947030
    assert pmu["aiv_vec_time"] == 0 and np.isnan(row["aiv_vec_time(us)"])
    # a collective's row: COMMUNICATION_OP's span and names, no stream or task id
    (op_name, op_start, op_end, op_type) = query(DB_RUNS[0], """SELECT n.value, c.startNs, c.endNs, t.value FROM
        COMMUNICATION_OP c JOIN STRING_IDS n ON n.id = c.opName JOIN STRING_IDS t ON t.id = c.opType
        ORDER BY c.startNs""")[0]
    comm = ops[ops["Task Type"] == "COMMUNICATION"].iloc[0]
    assert (comm["Op Name"], comm["OP Type"], comm["Task Duration(us)"]) == (op_name, op_type,
                                                                            (op_end - op_start) / 1000)
    assert pd.isna(comm["Stream ID"]) and pd.isna(comm["Task ID"])


def test_steps_tables_and_notes(rank0):
    assert list(rank0.iterations) == [50] == [s for (s,) in query(DB_RUNS[0], "SELECT id FROM STEP_TIME")]
    conn = sqlite3.connect(f"{(DB_RUNS[0] / 'ASCEND_PROFILER_OUTPUT' / 'analysis.db').as_uri()}?mode=ro", uri=True)
    step, computing, free = conn.execute("SELECT step, computing, free FROM StepTraceTime").fetchone()
    n_comm_time = conn.execute("SELECT count(*) FROM CommAnalyzerTime").fetchone()[0]
    conn.close()
    b = rank0.step_breakdown
    assert (b["Step"].tolist(), b["Computing"].tolist(), b["Free"].tolist()) == ([int(step)], [computing], [free])
    assert len(rank0.communication_time) == n_comm_time == 4
    assert len(rank0.hccl_tasks) == query(DB_RUNS[0], "SELECT count(*) FROM COMMUNICATION_TASK_INFO")[0][0] == 296
    assert len(rank0.task_time) == query(DB_RUNS[0], "SELECT count(*) FROM TASK WHERE globalTaskId NOT IN "
                                                     "(SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)")[0][0]
    assert len(rank0.api_statistic) == query(DB_RUNS[0], "SELECT count(DISTINCT type || '/' || name) FROM CANN_API")[0][0]
    assert len(rank0.operator_memory) == 184 and len(rank0.memory_record) == 990
    notes = " ".join(rank0.notes)
    assert "no cube_utilization(%)" in notes and "no opState or hf32Eligible" in notes
    assert "aiv_mac_time(us), aiv_mac_ratio, aiv_mte1_time(us), aiv_mte1_ratio" in notes
    assert rank0.info["rank"] == 0 and rank0.options == {"aic_metrics": "PipeUtilization"}


def test_db_and_text_output_of_the_training_agree(rank0):
    """The same script and profiler configuration captured once as text, once as DB: the same kernels and columns
    (the DB adds the vector core's mac/mte1 metrics the text leaves out), step, and collectives."""
    text = geprof_nb.load(PYTORCH_TEXT / "level2" / "rank0_ascend_pt")
    extra = ["aiv_mac_time(us)", "aiv_mac_ratio", "aiv_mte1_time(us)", "aiv_mte1_ratio"]
    assert [c for c in rank0.op_summary.columns if c not in extra] == list(text.op_summary.columns)
    for col in ("Op Name", "OP Type", "Task Type"):  # a collective's name holds its group's hash: not across captures
        mine, theirs = (p.op_summary[p.op_summary["Task Type"] != "COMMUNICATION"] if col == "Op Name" else
                        p.op_summary for p in (rank0, text))
        assert sorted(mine[col].astype(str)) == sorted(theirs[col].astype(str)), col
    assert list(rank0.iterations) == list(text.iterations)
    assert list(rank0.step_breakdown.columns) == list(text.step_breakdown.columns)
    assert list(rank0.communication_time.columns) == list(text.communication_time.columns)
    assert len(rank0.communication_time) == len(text.communication_time)
    pd.testing.assert_index_equal(pd.Index(rank0.op_statistic.columns), pd.Index(text.op_statistic.columns))
    assert sorted(rank0.op_statistic["OP Type"]) == sorted(text.op_statistic["OP Type"])


def test_two_rank_folders_load_as_a_cluster():
    cluster = geprof_nb.load(PYTORCH_DB)
    assert isinstance(cluster, ClusterProfile) and list(cluster.ranks) == [0, 1]
    assert all(type(p.source).__name__ == "DbSource" for p in cluster.ranks.values())
    assert list(cluster.step_breakdown["Rank"]) == [0, 1]
    assert len(cluster.communication_time) == 8  # 4 collectives per rank


def test_a_db_file_opens_its_run(rank0):
    db = DB_RUNS[0] / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    again = geprof_nb.load(db)
    assert again.path == DB_RUNS[0] and len(again.op_summary) == len(rank0.op_summary)


def test_a_run_with_text_and_db_output_reads_the_text_and_says_so(tmp_path):
    run = tmp_path / "both_ascend_pt"
    (run / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    for src in (PYTORCH_TEXT / "level2" / "rank0_ascend_pt").rglob("*"):
        if src.is_file():
            dst = run / src.relative_to(PYTORCH_TEXT / "level2" / "rank0_ascend_pt")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    db = DB_RUNS[0] / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    (run / "ASCEND_PROFILER_OUTPUT" / db.name).write_bytes(db.read_bytes())
    profile = geprof_nb.load(run)
    assert type(profile.source).__name__ == "AscendPtSource"
    assert any("holds DB output (ascend_pytorch_profiler_0.db)" in n for n in profile.notes)
    assert type(geprof_nb.load(run / "ASCEND_PROFILER_OUTPUT" / db.name).source).__name__ == "DbSource"
