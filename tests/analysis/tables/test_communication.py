"""Collective tables from hand-written raw data: communication_statistic, hccl_tasks, communication_time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geprof_nb.analysis.rundir import RunDir
from geprof_nb.analysis.tables import communication as comm
from geprof_nb.ge import hccl
from geprof_nb.prof.rawdata import GeTaskType, LinkType, RtTaskType, TransportType
from helpers.rawrun_helpers import Hashes, records, write_run

# Reference §4.5, verbatim.
HEADER = "Device_id,OP Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)".split(",")
SDMA, RDMA = TransportType.SDMA, TransportType.RDMA
HCCS, ON_CHIP, ROCE = LinkType.HCCS, LinkType.ON_CHIP, LinkType.ROCE

# connection id -> (node name, GE op type, GE task type, stream)
OPS = {0: ("MatMul_1", "MatMulV2", GeTaskType.AI_CORE, 0), 1: ("HcomAllReduce_0", "HcomAllReduce", GeTaskType.HCCL, 1),
       2: ("HcomAllGather_0", "HcomAllGather", GeTaskType.HCCL, 1)}
# (connection id, iteration, start ns, duration ns): iterations 1 and 2, a compute op and two collectives each
EXECUTIONS = [(0, 1, 900_000, 50_000), (1, 1, 1_000_000, 100_000), (2, 1, 1_200_000, 50_000),
              (0, 2, 1_900_000, 60_000), (1, 2, 2_000_000, 120_000), (2, 2, 2_200_000, 30_000)]
# the AllReduce of iteration 1, sub-task by sub-task: (name, start, dur, transport, link, size, src, dst)
ALL_REDUCE_1 = [
    ("Notify_Record", 1_000_000, 500, SDMA, HCCS, 0, 0, 1),
    ("Notify_Wait", 1_000_500, 20_000, SDMA, HCCS, 0, 3, 0),
    ("Memcpy", 1_020_500, 40_000, SDMA, HCCS, 4_000_000, 0, 1),
    ("Reduce_Inline", 1_060_500, 10_000, SDMA, ON_CHIP, 4_000_000, 0, 0),
    ("Notify_Wait", 1_070_500, 10_000, SDMA, HCCS, 0, 3, 0),
    ("Memcpy", 1_080_500, 19_500, SDMA, HCCS, 1_950_000, 0, 1),
]
# the AllGather of iteration 1: an RDMA send, then a wait; the inline reduce here runs over HCCS (transit)
ALL_GATHER_1 = [
    ("Notify_Wait", 1_200_000, 5_000, RDMA, ROCE, 0, 3, 0),
    ("RDMASend", 1_205_000, 25_000, RDMA, ROCE, 1_000_000, 0, 1),
    ("Reduce_Inline", 1_230_000, 5_000, SDMA, HCCS, 500_000, 3, 0),
    ("Notify_Wait", 1_235_000, 15_000, RDMA, ROCE, 0, 3, 0),
]


def _hccl_records(h: Hashes, conn: int, iteration: int, tasks: list[tuple]) -> list[dict]:
    return [dict(start=s, dur=d, connection_id=conn, iteration=iteration, name=h(n), transport=t, link=lk, size=sz,
                 src_rank=src, dst_rank=dst, stream_id=1) for n, s, d, t, lk, sz, src, dst in tasks]


def _base_records(h: Hashes) -> dict[str, np.ndarray]:
    track = [dict(connection_id=c, model_id=1, stream_id=st, task_id=10 + c,
                  task_type=RtTaskType.HCCL if gt == GeTaskType.HCCL else RtTaskType.KERNEL_AICORE, kernel_name=h(n))
             for c, (n, _, gt, st) in OPS.items()]
    basic = [dict(connection_id=c, op_name=h(n), task_type=gt, op_type=h(t),
                  block_dim=0 if gt == GeTaskType.HCCL else 8) for c, (n, t, gt, _) in OPS.items()]
    hwts = [dict(start=s, dur=d, connection_id=c, iteration=it) for c, it, s, d in EXECUTIONS]
    return {"task_track": records("task_track", track), "node_basic_info": records("node_basic_info", basic),
            "hwts": records("hwts", hwts)}


@pytest.fixture
def run(tmp_path) -> RunDir:
    h = Hashes()
    recs = _base_records(h)
    hccl_rows = (_hccl_records(h, 1, 1, ALL_REDUCE_1) + _hccl_records(h, 2, 1, ALL_GATHER_1)
                 + _hccl_records(h, 99, 1, [("Memcpy", 5_000_000, 1_000, SDMA, HCCS, 1_000, 0, 1)]))
    recs["hccl_task"] = records("hccl_task", hccl_rows[::-1])  # stored out of time order on purpose
    return RunDir(write_run(tmp_path / "run", recs, h.table))


# --------------------------------------------------------------------- statistic
def test_communication_statistic_values(run):
    stat = comm.communication_statistic(run)
    assert list(stat.columns) == HEADER
    assert stat["OP Type"].tolist() == ["hcom_allReduce_", "hcom_allGather_"]  # largest total first
    ar, ag = stat.iloc[0], stat.iloc[1]
    assert (ar["Count"], ar["Total Time(us)"], ar["Min Time(us)"], ar["Avg Time(us)"], ar["Max Time(us)"]) == \
        (2, 220.0, 100.0, 110.0, 120.0)
    assert (ag["Count"], ag["Total Time(us)"], ag["Min Time(us)"], ag["Max Time(us)"]) == (2, 80.0, 30.0, 50.0)
    assert ar["Ratio(%)"] == pytest.approx(73.333) and ag["Ratio(%)"] == pytest.approx(26.667)
    assert (stat["Device_id"] == 0).all()


def test_communication_statistic_without_collectives(tmp_path):
    h = Hashes()
    recs = _base_records(h)
    recs["hwts"] = recs["hwts"][recs["hwts"]["connection_id"] == 0]
    stat = comm.communication_statistic(RunDir(write_run(tmp_path / "r", recs, h.table)))
    assert stat.empty and list(stat.columns) == HEADER


@pytest.mark.parametrize("ge_type, msprof_type", [
    ("HcomAllReduce", "hcom_allReduce_"), ("HcomAllGather", "hcom_allGather_"),
    ("HcomReduceScatter", "hcom_reduceScatter_"), ("HcomBroadcast", "hcom_broadcast_"),
    ("hcom_allReduce_", "hcom_allReduce_"), ("N/A", "N/A")])
def test_hccl_op_type(ge_type, msprof_type):
    assert comm.hccl_op_type(ge_type) == msprof_type


def test_names_agree_with_the_runtime():
    for op_type in hccl.HCCL_OP_NAMES:
        assert comm.hccl_op_type(op_type) == hccl.HCCL_OP_NAMES[op_type]
    assert comm.DEFAULT_GROUP == hccl.DEFAULT_GROUP


# ---------------------------------------------------------------------- sub-tasks
def test_hccl_tasks_rows(run):
    t = comm.hccl_tasks(run)
    assert list(t.columns) == comm.HCCL_TASKS
    assert len(t) == len(ALL_REDUCE_1) + len(ALL_GATHER_1) + 1
    assert t["Start Time(us)"].is_monotonic_increasing
    ar = t[t["Node"] == "HcomAllReduce_0"]
    assert ar["Op Name"].unique().tolist() == ["hcom_allReduce__oup_0_1"]
    assert ar["OP Type"].unique().tolist() == ["hcom_allReduce_"]
    assert ar["Task Name"].tolist() == [x[0] for x in ALL_REDUCE_1]
    assert ar["Duration(us)"].tolist() == [x[2] / 1000 for x in ALL_REDUCE_1]
    assert ar["Size(Byte)"].tolist() == [x[5] for x in ALL_REDUCE_1]
    assert ar["Transport Type"].tolist() == ["SDMA"] * 6
    assert ar["Link Type"].tolist() == ["HCCS", "HCCS", "HCCS", "ON_CHIP", "HCCS", "HCCS"]
    assert (ar["Src Rank"].tolist(), ar["Dst Rank"].tolist()) == ([0, 3, 0, 0, 3, 0], [1, 0, 1, 0, 0, 1])
    # bandwidth = size / duration, in GB/s (bytes per ns): 4e6 B in 40 us = 100 GB/s
    assert ar["Bandwidth(GB/s)"].tolist() == pytest.approx([0, 0, 100.0, 400.0, 0, 100.0])
    ag = t[t["Node"] == "HcomAllGather_0"]
    assert ag["Op Name"].unique().tolist() == ["hcom_allGather__oup_1_1"]
    assert ag["Link Type"].tolist() == ["ROCE", "ROCE", "HCCS", "ROCE"]
    orphan = t[t["Iteration ID"].eq(1) & t["Op Name"].eq("N/A")]
    assert len(orphan) == 1 and orphan["Node"].iloc[0] == "N/A" and orphan["Stream ID"].iloc[0] == 1


def test_each_sub_task_has_its_own_names(tmp_path):
    """Names are looked up once per distinct id or code and given back to every row: two hash ids of
    one name, an id the dictionary lacks and transport / link codes no enum names keep their own text."""
    h = Hashes()
    recs = _base_records(h)
    other_wait, missing = 5000, 6000
    rows = _hccl_records(h, 1, 1, [("Notify_Wait", 1_000_000, 20_000, SDMA, HCCS, 0, 3, 0),
                                   ("Memcpy", 1_020_000, 40_000, SDMA, HCCS, 4_000_000, 0, 1),
                                   ("Notify_Wait", 1_060_000, 10_000, 7, 9, 0, 3, 0),
                                   ("Memcpy", 1_070_000, 5_000, SDMA, HCCS, 1_000, 0, 1)])
    rows[2]["name"], rows[3]["name"] = other_wait, missing
    recs["hccl_task"] = records("hccl_task", rows)
    run = RunDir(write_run(tmp_path / "run", recs, {**h.table, other_wait: "Notify_Wait"}))
    t = comm.hccl_tasks(run)
    assert t["Task Name"].tolist() == ["Notify_Wait", "Memcpy", "Notify_Wait", "<unknown 0x0000000000001770>"]
    assert t["Transport Type"].tolist() == ["SDMA", "SDMA", "7", "SDMA"]
    assert t["Link Type"].tolist() == ["HCCS", "HCCS", "9", "HCCS"]
    assert t["Op Name"].tolist() == ["hcom_allReduce__oup_0_1"] * 4 and t["Node"].tolist() == ["HcomAllReduce_0"] * 4
    assert all(pd.api.types.is_string_dtype(t[c]) for c in ("Op Name", "Node", "OP Type", "Task Name",
                                                             "Transport Type", "Link Type"))
    # both Notify_Waits are wait, whichever id names them; the unnamed copy is not transit
    ar = comm.communication_time(run).set_index("Op Name").loc["hcom_allReduce__oup_0_1"]
    assert ar["Wait Time(ms)"] == pytest.approx(0.030) and ar["Transit Time(ms)"] == pytest.approx(0.040)


def test_collective_names_count_over_the_collection(run):
    """msprof: index counts the group's collectives in time order; the last field counts executions of the op."""
    t = comm.communication_time(run, group="10.0.0.1%enp_60000_0_871")
    assert t["Op Name"].tolist() == ["hcom_allReduce__871_0_1", "hcom_allGather__871_1_1",
                                     "hcom_allReduce__871_2_2", "hcom_allGather__871_3_2"]
    assert t["Iteration ID"].tolist() == [1, 1, 2, 2]
    assert hccl.hccl_op_name("HcomAllGather", 3, 2, "10.0.0.1%enp_60000_0_871") == t["Op Name"].iloc[3]


# -------------------------------------------------------------------- time split
def test_communication_time_values(run):
    t = comm.communication_time(run).set_index("Op Name")
    assert list(comm.communication_time(run).columns) == comm.COMMUNICATION_TIME
    ar = t.loc["hcom_allReduce__oup_0_1"]
    # transit: the two HCCS Memcpys (the SDMA Reduce_Inline on ON_CHIP is local); wait: both Notify_Waits;
    # synchronization: the wait before the first transit; idle: the rest (record + local reduce)
    assert ar["Elapse Time(ms)"] == pytest.approx(0.1)
    assert ar["Transit Time(ms)"] == pytest.approx(0.0595)
    assert ar["Wait Time(ms)"] == pytest.approx(0.030)
    assert ar["Synchronization Time(ms)"] == pytest.approx(0.020)
    assert ar["Idle Time(ms)"] == pytest.approx(0.0105)
    assert ar["Wait Time Ratio"] == round(30 / 89.5, 4) and ar["Synchronization Time Ratio"] == round(20 / 79.5, 4)
    assert ar["Start Timestamp(us)"] == 1000.0
    ag = t.loc["hcom_allGather__oup_1_1"]
    # RDMASend over RDMA and an inline reduce over HCCS both move data: transit
    assert ag["Transit Time(ms)"] == pytest.approx(0.030)
    assert ag["Wait Time(ms)"] == pytest.approx(0.020)
    assert ag["Synchronization Time(ms)"] == pytest.approx(0.005)
    assert ag["Idle Time(ms)"] == pytest.approx(0.0)
    # iteration 2 has no sub-task records: only the elapse time is known
    it2 = t.loc["hcom_allReduce__oup_2_2"]
    assert it2["Elapse Time(ms)"] == pytest.approx(0.12)
    assert it2[["Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)",
                "Wait Time Ratio"]].isna().all()


def test_shared_op_rows_give_the_same_tables(run):
    from geprof_nb.analysis.tables.summary import op_rows

    rows = op_rows(run)
    pd.testing.assert_frame_equal(comm.hccl_tasks(run, rows=rows), comm.hccl_tasks(run))
    pd.testing.assert_frame_equal(comm.communication_statistic(run, rows=rows), comm.communication_statistic(run))


def test_simulated_ring_through_the_tables(tmp_path):
    """Sub-tasks laid out by ge.hccl, stored as HCCL_TASK_DTYPE, read back: the split follows the layout."""
    n, nbytes, links = 8, 64 << 20, hccl.Links()
    ideal = hccl.collective_duration_ns("HcomAllReduce", nbytes, n, links)
    starts = np.array([1_000_000, 1_000_000 + 3 * ideal])
    durs = np.array([ideal, ideal + 50_000])  # the second execution waited 50 us for a peer
    sub = hccl.ring_subtasks("HcomAllReduce", nbytes, n, 0, links, starts, durs)
    h = Hashes()
    recs = _base_records(h)
    hw = records("hwts", [dict(start=s, dur=d, connection_id=1, iteration=i + 1) for i, (s, d) in
                          enumerate(zip(starts, durs))])
    recs["hwts"] = hw
    recs["hccl_task"] = sub.records(1, np.array([1, 2]), {s: h(s) for s in np.unique(sub.name)}, stream_id=1)
    run = RunDir(write_run(tmp_path / "sim", recs, h.table))

    tasks = comm.hccl_tasks(run)
    mem = tasks[tasks["Task Name"] == "Memcpy"]
    assert mem.groupby("Iteration ID")["Size(Byte)"].sum().tolist() == [2 * (n - 1) * nbytes // n] * 2
    assert mem["Bandwidth(GB/s)"].to_numpy() == pytest.approx(links.hccs_bandwidth / 1e9, rel=1e-4)
    t = comm.communication_time(run)
    memcpy_ms = mem.groupby("Iteration ID")["Duration(us)"].sum().to_numpy() / 1000
    assert t["Transit Time(ms)"].to_numpy() == pytest.approx(memcpy_ms)
    waits = tasks[tasks["Task Name"] == "Notify_Wait"].groupby("Iteration ID")["Duration(us)"]
    assert t["Wait Time(ms)"].to_numpy() == pytest.approx(waits.sum().to_numpy() / 1000)
    # the peer's 50 us land in the synchronization wait (the first Notify_Wait)
    assert t["Synchronization Time(ms)"].diff().iloc[1] == pytest.approx(0.050)
    assert t["Wait Time(ms)"].diff().iloc[1] == pytest.approx(0.050)
    assert t["Transit Time(ms)"].diff().iloc[1] == pytest.approx(0.0)
    total = t["Transit Time(ms)"] + t["Wait Time(ms)"] + t["Idle Time(ms)"]
    assert total.to_numpy() == pytest.approx(t["Elapse Time(ms)"].to_numpy())


def test_analysis_modules_do_not_import_the_runtime():
    code = ("import sys, geprof_nb.analysis.tables.communication, geprof_nb.analysis.tables.aicpu; "
            "bad = sorted(m for m in sys.modules if m.startswith('geprof_nb.ge')); print(bad); "
            "sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_empty_run(tmp_path):
    run = RunDir(write_run(tmp_path / "empty", {}, {}))
    assert list(comm.hccl_tasks(run).columns) == comm.HCCL_TASKS and comm.hccl_tasks(run).empty
    assert list(comm.communication_time(run).columns) == comm.COMMUNICATION_TIME
    assert comm.communication_time(run).empty and comm.communication_statistic(run).empty


def test_collectives_are_found_at_task_trace_l0(tmp_path):
    """At l0 op_summary has no Task Type or OP Type; the collectives come from the task track and
    their type from the node's name, so hccl_tasks and communication_time match an l1 run's."""
    from helpers.geprof_testing import run_profiled_session, small_resnet

    l1 = run_profiled_session(tmp_path / "l1", small_resnet(8), 2, hccl="on").profile
    l0 = run_profiled_session(tmp_path / "l0", small_resnet(8), 2, hccl="on", task_trace="l0").profile
    assert (l0.op_summary["Task Type"] == "N/A").all()
    for table in ("hccl_tasks", "communication_time"):
        ours, ref = getattr(l0, table), getattr(l1, table)
        assert len(ours) == len(ref) > 0
        pd.testing.assert_frame_equal(ours, ref, check_categorical=False)


def test_communication_statistic_at_task_trace_l0_is_l1s(tmp_path):
    """l0 op_summary has no Task Type or OP Type: the collectives are the device's HCCL tasks, typed by name."""
    from geprof_nb import ge
    from helpers.geprof_testing import run_profiled_session

    l0 = run_profiled_session(tmp_path / "l0", ge.models.mlp(training=True, world_size=8), 3, task_trace="l0").profile
    l1 = run_profiled_session(tmp_path / "l1", ge.models.mlp(training=True, world_size=8), 3).profile
    assert set(l0.op_summary["OP Type"].astype(str)) == {"N/A"}
    stat = l0.communication_statistic
    assert list(stat["OP Type"]) == ["hcom_allReduce_"] and list(stat["Count"]) == [3]
    pd.testing.assert_frame_equal(stat, l1.communication_statistic)
