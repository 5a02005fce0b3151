"""``format="db"`` / ``"msprof_db"``: torch_npu's and msprof's SQLite files, their tables, columns and types as a
real torch_npu DB has them (MindStudio Insight's test data), and rows that say what the Profile says."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb.analysis import ClusterProfile
from geprof_nb.analysis.export import db as export_db
from helpers.cluster_testing import simulate_cluster
from helpers.geprof_testing import run_profiled_session, small_resnet
from helpers.real_data import PYTORCH_DB

REAL = PYTORCH_DB / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
#: How the current schema differs from the real (CANN 8.0-era) torch_npu DB: renamed and added columns.
NEWER_COLUMNS = {"COMPUTE_TASK_INFO": ({"blockDim": "blockNum", "mixBlockDim": "mixBlockNum"},
                                       ["opState", "hf32Eligible"]),
                 "COMMUNICATION_OP": ({}, ["deviceId"]), "COMMUNICATION_TASK_INFO": ({}, ["isMaster", "bandwidth"])}


def schema(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Every table's (column, declared type), read with sqlite3 alone."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: [(r[1], r[2]) for r in conn.execute("SELECT * FROM pragma_table_info(?)", (t,))] for t in tables}
    finally:
        conn.close()


def rows(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def double_hash(text: str) -> str:
    """msprof-analyze's group hash (cluster_time_summary's ``double_hash``), written out here."""
    h = [0, 0]
    for ch in text:
        h = [((h[0] * 29) & 0xFFFFFFFF) + ord(ch) & 0xFFFFFFFF, ((h[1] * 131) & 0xFFFFFFFF) + ord(ch) & 0xFFFFFFFF]
    return str((h[0] << 32) | h[1])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("db_export")
    profile = run_profiled_session(root / "run", small_resnet(8), 2, hccl="on", task_memory="on", ge_api="l1").profile
    out = profile.export(root / "x", format="db", rank=3)
    return profile, out


def test_the_layout_is_torch_npus(run):
    profile, out = run
    assert out.name.endswith("_ascend_pt") and (out / "profiler_info_3.json").is_file()
    info = json.loads((out / "profiler_info_3.json").read_text())
    assert info["rank_id"] == 3 and info["config"]["experimental_config"]["_export_type"] == "db"
    assert sorted(p.name for p in (out / "ASCEND_PROFILER_OUTPUT").iterdir()) == ["analysis.db",
                                                                                   "ascend_pytorch_profiler_3.db"]
    assert not list(out.rglob("*.tmp"))  # each file was built under a temporary name and renamed


def test_tables_columns_and_types_are_a_real_dbs(run):
    profile, out = run
    ours = schema(out / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_3.db")
    theirs = schema(REAL / "ascend_pytorch_profiler_0.db")
    shared = sorted(set(ours) & set(theirs))
    assert {"TASK", "COMPUTE_TASK_INFO", "TASK_PMU_INFO", "COMMUNICATION_OP", "COMMUNICATION_TASK_INFO", "CANN_API",
            "STRING_IDS", "META_DATA", "HOST_INFO", "RANK_DEVICE_MAP", "STEP_TIME", "PYTORCH_API", "CONNECTION_IDS",
            "OP_MEMORY", "MEMORY_RECORD", "NPU_INFO", "SESSION_TIME_INFO", "AICORE_FREQ", "ENUM_API_TYPE",
            "ENUM_HCCL_LINK_TYPE", "ENUM_HCCL_TRANSPORT_TYPE", "ENUM_HCCL_DATA_TYPE", "ENUM_HCCL_RDMA_TYPE",
            "ENUM_MSTX_EVENT_TYPE", "ENUM_MODULE"} <= set(shared)
    for table in shared:
        renames, added = NEWER_COLUMNS.get(table, ({}, []))
        expected = [(renames.get(c, c), t) for c, t in theirs[table]] + [(c, dict(ours[table])[c]) for c in added]
        assert ours[table] == expected, table
    assert schema(out / "ASCEND_PROFILER_OUTPUT" / "analysis.db") == schema(REAL / "analysis.db")
    index = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
    assert rows(out / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_3.db", index) == rows(
        REAL / "ascend_pytorch_profiler_0.db", index)
    # geprof's own tables are the GEPROF_* ones, nothing else is new
    extra = set(ours) - set(theirs)
    assert {t for t in extra if not t.startswith("GEPROF_")} == {"MSTX_EVENTS", "MEMCPY_INFO",
                                                               "ENUM_MEMCPY_OPERATION"}


def test_enum_tables_hold_every_value_of_the_real_ones(run):
    _, out = run
    db = out / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_3.db"
    for table in ("ENUM_HCCL_DATA_TYPE", "ENUM_HCCL_LINK_TYPE", "ENUM_HCCL_TRANSPORT_TYPE", "ENUM_HCCL_RDMA_TYPE",
                  "ENUM_MSTX_EVENT_TYPE"):
        real = dict(rows(REAL / "ascend_pytorch_profiler_0.db", f"SELECT id, name FROM {table}"))
        ours = dict(rows(db, f"SELECT id, name FROM {table}"))
        assert real.items() <= ours.items(), table
    api_types = dict(rows(db, "SELECT id, name FROM ENUM_API_TYPE"))
    assert api_types[20000] == "acl" and api_types[15000] == "model" and api_types[5500] == "communication"


def test_run_facts_rows(run):
    profile, out = run
    db = out / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_3.db"
    meta = dict(rows(db, "SELECT name, value FROM META_DATA"))
    assert meta["SCHEMA_VERSION"] == "1.2.0" and json.loads(meta["ENV_VARIABLES"]) == {}
    assert "distributed_args" not in meta  # a single run exported without a world size
    assert rows(db, "SELECT hostName FROM HOST_INFO") == [(profile.info["hostname"],)]
    assert rows(db, "SELECT rankId, deviceId FROM RANK_DEVICE_MAP") == [(3, profile.device_id)]
    assert rows(db, "SELECT id, name FROM NPU_INFO") == [(profile.device_id, profile.device["name"])]
    assert rows(db, "SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO") == [(profile.info["start_ns"],
                                                                                  profile.info["end_ns"])]
    assert {f for (f,) in rows(db, "SELECT freq FROM AICORE_FREQ")} == {profile.device["aic_frequency"]}
    # a step is its ModelExecute call, as the ascend_pt export's ProfilerStep#<n>
    calls = profile.source.api_calls()
    execute = calls[calls["api"] == "ModelExecute"]
    assert rows(db, "SELECT id, startNs, endNs FROM STEP_TIME") == list(zip(
        execute["iteration"].tolist(), execute["begin"].tolist(), execute["end"].tolist()))
    steps = rows(db, "SELECT s.value, p.startNs, p.endNs FROM PYTORCH_API p JOIN STRING_IDS s ON s.id = p.name "
                     "WHERE p.connectionId IS NULL")
    assert steps == [(f"ProfilerStep#{i}", str(b), str(e)) for i, b, e in zip(
        execute["iteration"], execute["begin"], execute["end"])]


def test_tasks_and_their_joins(run):
    profile, out = run
    db = out / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_3.db"
    tasks, sub = profile.source.device_tasks(), profile.hccl_tasks
    assert len(sub) > 0
    assert rows(db, "SELECT count(*) FROM TASK") == [(len(tasks) + len(sub),)]
    assert rows(db, "SELECT count(*), min(globalTaskId), max(globalTaskId), count(DISTINCT globalTaskId) FROM TASK") \
        == [(len(tasks) + len(sub), 0, len(tasks) + len(sub) - 1, len(tasks) + len(sub))]
    starts = [s for (s,) in rows(db, "SELECT startNs FROM TASK ORDER BY globalTaskId")]
    assert starts == sorted(starts)  # numbered by start
    comm = profile.source.communication_rows()
    ops = profile.op_summary
    assert rows(db, "SELECT count(*) FROM COMPUTE_TASK_INFO") == [(int((~comm).sum()),)]
    assert rows(db, "SELECT count(*) FROM COMMUNICATION_TASK_INFO") == [(len(sub),)]
    names = rows(db, "SELECT s.value FROM COMMUNICATION_OP c JOIN STRING_IDS s ON s.id = c.opName ORDER BY opId")
    assert [n for (n,) in names] == profile.communication_time["Op Name"].tolist()
    # every compute task's connection is the ModelExecute call that ran its step, inside that step's window
    joined = rows(db, "SELECT a.value, c.startNs, st.id FROM COMPUTE_TASK_INFO ci JOIN TASK t ON t.globalTaskId = "
                      "ci.globalTaskId JOIN CANN_API c ON c.connectionId = t.connectionId JOIN STRING_IDS a ON a.id = "
                      "c.name JOIN STEP_TIME st ON c.startNs BETWEEN st.startNs AND st.endNs")
    assert len(joined) == int((~comm).sum()) and {a for a, _, _ in joined} == {"ModelExecute"}
    assert sorted(s for _, _, s in joined) == sorted(profile.iteration_of_ops[~comm].tolist())
    # sub-tasks carry their collective's connection id
    assert rows(db, "SELECT count(*) FROM COMMUNICATION_TASK_INFO ct JOIN TASK t ON t.globalTaskId = ct.globalTaskId "
                    "JOIN COMMUNICATION_OP c ON c.opId = ct.opId WHERE t.connectionId = c.connectionId") == [(len(sub),)]
    # PMU: times in ns, the core's own metrics only
    first = np.flatnonzero((ops["Task Type"] == "AI_CORE").to_numpy())[0]
    gid = rows(db, "SELECT globalTaskId FROM TASK WHERE startNs = ?", (int(profile._op_rows.start_ns[first]),))
    metrics = dict(rows(db, "SELECT s.value, p.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name "
                            "WHERE p.globalTaskId = ?", (gid[0][0],)))
    assert metrics["aic_mac_time"] == pytest.approx(ops["aic_mac_time(us)"].iloc[first] * 1000)
    assert metrics["aic_total_cycles"] == int(ops["aic_total_cycles"].iloc[first])
    assert not any(m.startswith("aiv_") for m in metrics)
    # every string id a table names is in STRING_IDS
    assert rows(db, "SELECT count(*) FROM COMPUTE_TASK_INFO WHERE name NOT IN (SELECT id FROM STRING_IDS) OR opType "
                    "NOT IN (SELECT id FROM STRING_IDS) OR inputShapes NOT IN (SELECT id FROM STRING_IDS)") == [(0,)]


def test_analysis_db_holds_the_step_split_and_the_communication_analysis(run):
    profile, out = run
    db = out / "ASCEND_PROFILER_OUTPUT" / "analysis.db"
    b = profile.step_breakdown
    assert rows(db, "SELECT step, computing, communication_not_overlapped, free FROM StepTraceTime") == list(zip(
        b["Step"].astype(str), b["Computing"], b["Communication(Not Overlapped)"], b["Free"]))
    ct = profile.communication_time
    time_rows = rows(db, "SELECT hccl_op_name, group_name, elapse_time, transit_time, wait_time, step FROM "
                         "CommAnalyzerTime")
    assert time_rows == list(zip(ct["Op Name"], [double_hash("hccl_world_group")] * len(ct), ct["Elapse Time(ms)"],
                                 ct["Transit Time(ms)"], ct["Wait Time(ms)"], "step" + ct["Iteration ID"].astype(str)))
    # the matrix has each collective's i-i LOCAL link, by which msprof-analyze maps local ranks to global ones
    local = rows(db, "SELECT count(DISTINCT hccl_op_name) FROM CommAnalyzerMatrix WHERE transport_type = 'LOCAL' "
                     "AND src_rank = dst_rank")
    assert local == [(len(ct),)]


def test_a_failed_export_leaves_no_database(run, tmp_path, monkeypatch):
    profile, _ = run

    def broken(self):
        raise RuntimeError("disk gone")

    monkeypatch.setattr(export_db.DbTables, "cann_api_table", broken)
    with pytest.raises(RuntimeError, match="disk gone"):
        profile.export(tmp_path, format="db")
    assert not list(tmp_path.rglob("*.db")) and not list(tmp_path.rglob("*.tmp"))


def test_a_cluster_exports_one_directory_per_rank_that_loads_as_the_cluster(tmp_path):
    cluster = simulate_cluster(tmp_path / "sim", ranks=4, steps=2, graph=small_resnet(4))
    for fmt in ("db", "msprof_db"):
        out = cluster.export(tmp_path / fmt, format=fmt)
        back = geprof_nb.load(out)
        assert isinstance(back, ClusterProfile) and list(back.ranks) == list(cluster.ranks), fmt
        assert back.world_size == cluster.world_size
        for r, profile in cluster.ranks.items():
            pd.testing.assert_frame_equal(back.rank(r).step_breakdown, profile.step_breakdown, obj=f"{fmt} {r}")
    (rank1,) = (tmp_path / "db").glob("*-rank1_*_ascend_pt")
    meta = dict(rows(rank1 / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_1.db",
                     "SELECT name, value FROM META_DATA"))
    size = cluster.world_size
    assert json.loads(meta["distributed_args"])["world_size"] == size
    assert json.loads(meta["parallel_group_info"]) == {"hccl_world_group": {
        "group_name": "dp", "group_rank": 1, "global_ranks": list(range(size))}}
    infos = sorted(json.loads(p.read_text())["rank_id"] for p in (tmp_path / "msprof_db").glob("PROF_*/device_*/info.*"))
    assert infos == list(cluster.ranks)


def _all_rows(path: Path) -> dict[str, list[tuple]]:
    return {t: rows(path, f"SELECT * FROM {t} ORDER BY rowid") for t in schema(path)}


def test_big_tables_written_by_a_second_process_hold_the_same_rows(run, tmp_path, monkeypatch):
    profile, here = run
    monkeypatch.setattr(export_db, "SIDE_MIN_ROWS", 0)  # every side table, however small, goes to the process
    there = profile.export(tmp_path / "side", format="db", rank=3)
    name = "ascend_pytorch_profiler_3.db"
    (a,), (b,) = list(here.rglob(name)), list(there.rglob(name))
    side, local = _all_rows(b), _all_rows(a)
    assert set(side) == set(local)
    for table in export_db.SIDE_PROCESS_TABLES:
        assert len(side[table]) > 100, table  # the run has rows in each, so the process wrote some
    for table in local:
        assert side[table] == local[table], table
    assert sorted(p.name for p in b.parent.iterdir()) == sorted(p.name for p in a.parent.iterdir())


def test_a_failed_second_process_says_why_and_leaves_no_database(run, tmp_path, monkeypatch):
    profile, _ = run
    fail = tmp_path / "fail.sh"
    fail.write_text("#!/bin/sh\necho 'no space left on device' >&2\nexit 3\n")
    fail.chmod(0o755)
    monkeypatch.setattr(export_db, "SIDE_MIN_ROWS", 0)
    monkeypatch.setattr("geprof_nb.analysis.export.db_rows.sys.executable", str(fail))
    with pytest.raises(RuntimeError, match=r"^writing TASK_PMU_INFO in a second process failed \(exit 3\): "
                                           r"no space left on device$"):
        profile.export(tmp_path / "x", format="db")
    left = [p.name for p in tmp_path.rglob("*") if p.is_file() and p != fail]
    assert left and not [n for n in left if n.endswith((".db", ".tmp", ".side", ".npy"))], left


def test_without_an_interpreter_to_start_the_big_tables_are_written_here(run, tmp_path, monkeypatch):
    profile, here = run
    monkeypatch.setattr(export_db, "SIDE_MIN_ROWS", 0)
    monkeypatch.setattr("geprof_nb.analysis.export.db_rows.sys.executable", str(tmp_path / "no-python"))
    there = profile.export(tmp_path / "x", format="db", rank=3)
    name = "ascend_pytorch_profiler_3.db"
    assert _all_rows(next(there.rglob(name))) == _all_rows(next(here.rglob(name)))
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith((".tmp", ".side", ".npy"))]
