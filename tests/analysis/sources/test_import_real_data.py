"""Real torch_npu and msprof output (``tests/data``, see ``SOURCES.md`` there), loaded by geprof_nb.load:
every table equals what the files hold, read here by the csv and json modules alone (``real_data``)."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb.analysis import Profile
from geprof_nb.analysis.cluster.profile import ClusterProfile
from geprof_nb.analysis.sources.source import OP_STATISTIC_L0_NOTE
from geprof_nb.analysis.sources.trace_view import read_trace_view
from helpers.real_data import (
    COMPUTE_ADVICE,
    LEVELS,
    OLDER_OP_SUMMARY,
    PYTORCH_TEXT,
    RUNS,
    SERVER_RANKS,
    SHARED_REAL_DATA,
    collective_type,
    collectives,
    communication_ops,
    copy_run,
    kernels,
    ns,
    output,
    read_csv,
    run_id,
    spans,
    union_us,
)

HCCL_NOTE = ("{} kernels are collectives labelled Accelerator Core HCCL (torch_npu's label): shown as Task Type "
             "COMMUNICATION, msprof's label, and counted as communication")


@pytest.fixture(scope="module", params=RUNS, ids=run_id)
def run(request):
    return request.param, geprof_nb.load(request.param)


def close(a: float, b: Decimal | float, tol: float = 1e-6) -> bool:
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=tol)


# ------------------------------------------------------------------------ every table of every run
def test_kernels_are_kernel_details(run):
    path, p = run
    k = kernels(path)
    f = p.op_summary
    assert isinstance(p, Profile) and len(f) == len(k.rows) == 191 and not k.short
    assert f["Op Name"].tolist() == k.column("Name")
    assert p.source.op_rows().start_ns.tolist() == [ns(t) for t in k.column("Start Time(us)")]
    assert f["Task Duration(us)"].tolist() == k.floats("Duration(us)")
    assert p.iteration_of_ops.tolist() == [int(s) for s in k.column("Step Id")]
    assert f["Task Type"].astype(str).tolist() == [{"HCCL": "COMMUNICATION"}.get(c, c)
                                                   for c in k.column("Accelerator Core")]
    by_file = defaultdict(list)
    for r in k.rows:
        by_file[(r["Type"], {"HCCL": "COMMUNICATION"}.get(r["Accelerator Core"], r["Accelerator Core"]))].append(r)
    ours = f.groupby([f["OP Type"].astype(str), f["Task Type"].astype(str)])["Task Duration(us)"].agg(["count", "sum"])
    assert len(ours) == len(by_file)
    for key, rows in by_file.items():
        assert ours.loc[key, "count"] == len(rows) and close(ours.loc[key, "sum"], k.total("Duration(us)", rows)), key


def test_step_breakdown_is_step_trace_time(run):
    path, p = run
    table = read_csv(output(path, "step_trace_time.csv"))
    b = p.step_breakdown
    assert len(b) == len(table.rows) == 1
    for column in table.header:
        assert b[column].tolist() == [float(v) for v in table.column(column)], column


def test_statistics_are_the_files(run):
    path, p = run
    stat = output(path, "op_statistic.csv")
    if stat.is_file():
        table = read_csv(stat)
        s = p.op_statistic
        assert s["OP Type"].tolist() == table.column("OP Type") and s["Core Type"].tolist() == table.column("Core Type")
        assert s["Count"].tolist() == [int(c) for c in table.column("Count")]
        assert s["Total Time(us)"].tolist() == table.floats("Total Time(us)")
    else:  # Level0: torch_npu writes none, as OP Type is N/A for every kernel
        assert path.parent.name == "level0" and p.op_statistic.empty and OP_STATISTIC_L0_NOTE in p.notes
    api = output(path, "api_statistic.csv")
    a = p.api_statistic
    if api.is_file():
        table = read_csv(api)
        assert a["API Name"].tolist() == table.column("API Name")
        assert a["Count"].tolist() == [int(c) for c in table.column("Count")]
        assert close(a["Time(us)"].sum(), table.total("Time(us)"))
    else:
        assert a.empty


def test_memory_tables_are_the_files(run):
    path, p = run
    allocations = read_csv(output(path, "operator_memory.csv"))
    m = p.operator_memory
    assert len(m) == len(allocations.rows) and m["Name"].astype(str).tolist() == allocations.column("Name")
    assert close(m["Size(KB)"].sum(), allocations.total("Size(KB)"))
    exact = p.times_ns("operator_memory")["Allocation Time(us)"].tolist()
    assert exact == [ns(t) for t in allocations.column("Allocation Time(us)")]
    records = read_csv(output(path, "memory_record.csv"))
    r = p.memory_record
    assert len(r) == len(records.rows)
    assert r["Total Allocated(MB)"].max() == np.nanmax(records.floats("Total Allocated(MB)"))
    assert r["Total Allocated(MB)"].isna().tolist() == [math.isnan(v) for v in records.floats("Total Allocated(MB)")]
    assert close(r["Total Reserved(MB)"].sum(), records.total("Total Reserved(MB)"))
    assert p.times_ns("memory_record")["Timestamp(us)"].tolist() == [ns(t) for t in records.column("Timestamp(us)")]


def test_communication_statistic_is_the_hccl_kernels(run):
    """At every level, Level0 included (no Type, no communication.json): 4 allReduce collectives."""
    path, p = run
    hccl = collectives(path)
    assert len(hccl) == 4
    s = p.communication_statistic.set_index("OP Type")
    by_type = defaultdict(list)
    for r in hccl:
        by_type[collective_type(r)].append(r)
    assert sorted(s.index) == sorted(by_type) == ["hcom_allReduce_"]
    for op_type, rows in by_type.items():
        durations = [float(r["Duration(us)"]) for r in rows]
        assert s.loc[op_type, "Count"] == len(rows)
        assert close(s.loc[op_type, "Total Time(us)"], sum(Decimal(r["Duration(us)"]) for r in rows), 5e-4)
        assert s.loc[op_type, "Max Time(us)"] == max(durations) and s.loc[op_type, "Min Time(us)"] == min(durations)
    assert p.source.communication_rows().sum() == len(hccl)
    assert HCCL_NOTE.format(len(hccl)) in p.notes


def test_communication_time_is_communication_json(run):
    path, p = run
    ops = communication_ops(path)
    ct = p.communication_time
    if path.parent.name == "level0":
        assert not ops and ct.empty
        return
    ops.sort(key=lambda op: op[2]["Start Timestamp(us)"])
    assert ct["Op Name"].tolist() == [name for _, name, _ in ops]
    assert ct["Iteration ID"].tolist() == [step for step, _, _ in ops]
    for column in ("Start Timestamp(us)", "Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
                   "Synchronization Time(ms)", "Idle Time(ms)", "Wait Time Ratio", "Synchronization Time Ratio"):
        assert ct[column].tolist() == [info[column] for _, _, info in ops], column
    # each op is the kernel of its name, which lasts as long to the ns (the file adds sub-ns digits)
    duration = {r["Name"]: Decimal(r["Duration(us)"]) for r in collectives(path)}
    assert all(abs(Decimal(repr(info["Elapse Time(ms)"])) * 1000 - duration[name]) < Decimal("0.001")
               for _, name, info in ops)


def test_identity_from_the_files(run):
    path, p = run
    rank = int(path.name[len("rank")])
    info = json.loads((path / f"profiler_info_{rank}.json").read_text())
    level = info["config"]["experimental_config"]["_profiler_level"]
    assert p.info["rank"] == rank and p.info["profiler_level"] == level == f"Level{path.parent.name[-1]}"
    # kernel_details has no Device_id and the trace labels its device processes "NPU": the memory files name it
    devices = set(read_csv(output(path, "memory_record.csv")).column("Device Type"))
    assert devices == {f"NPU:{rank}"} and p.device_id == rank and (p.op_summary["Device_id"] == rank).all()
    assert (p.step_breakdown["Device_id"] == rank).all()


def test_computed_step_split_is_the_kernels_unions(run, tmp_path):
    """Without step_trace_time.csv the split is computed from the kernels: the unions of the collectives'
    and the other kernels' spans (exact ns, from the files' decimals) and their overlap."""
    path, _ = run
    p = geprof_nb.load(copy_run(path, tmp_path, without=("step_trace_time.csv",)))
    assert p.source.step_breakdown_table() is None
    k = kernels(path)
    comm = union_us(spans(collectives(path)))
    compute = union_us(spans([r for r in k.rows if r["Accelerator Core"] != "HCCL"]))
    overlapped = comm + compute - union_us(spans(k.rows))
    b = p.step_breakdown
    assert b["Step"].tolist() == [50]
    assert close(b["Communication"].iloc[0], comm) and close(b["Computing"].iloc[0], compute)
    assert close(b["Overlapped"].iloc[0], overlapped)
    assert close(b["Communication(Not Overlapped)"].iloc[0], comm - overlapped)
    # torch_npu's own numbers, from float µs, agree to 0.03 µs
    recorded = read_csv(output(path, "step_trace_time.csv")).rows[0]
    for column in ("Communication", "Computing", "Overlapped"):
        assert abs(b[column].iloc[0] - float(recorded[column])) < 0.03


def test_advisor_and_explorer_on_real_runs(run):
    """The advisor's headline finding is the not-overlapped communication of the file's step split."""
    from geprof_nb.nb.explorer import TAB_TITLES, Explorer

    path, p = run
    findings = p.advise()
    rule = findings[findings["Rule"] == "Communication not overlapped with compute"]
    assert len(rule) == 1 and rule["Priority"].iloc[0] == "High"
    not_overlapped = float(read_csv(output(path, "step_trace_time.csv")).rows[0]["Communication(Not Overlapped)"])
    assert f"{not_overlapped:,.1f} us per step" in rule["Finding"].iloc[0]
    explorer = Explorer(p)
    for title in TAB_TITLES:
        explorer.select(title)
    assert f"Communication(Not Overlapped) {not_overlapped:.3f} us" in explorer.text_summary()


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_is_a_cluster_of_its_two_ranks(level):
    c = geprof_nb.load(PYTORCH_TEXT / level)
    assert isinstance(c, ClusterProfile) and list(c.ranks) == [0, 1]
    for rank in (0, 1):
        path = PYTORCH_TEXT / level / f"rank{rank}_ascend_pt"
        single = geprof_nb.load(path)
        assert c.rank(rank).path == path and c.rank(rank).device_id == rank
        pd.testing.assert_frame_equal(c.rank(rank).step_breakdown, single.step_breakdown)
        pd.testing.assert_frame_equal(c.rank(rank).communication_statistic, single.communication_statistic)
        recorded = read_csv(output(path, "step_trace_time.csv")).rows[0]
        row = c.cluster_step_trace_time.query("Index == @rank").iloc[0]
        for column in ("Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free",
                       "Stage", "Bubble", "Preparing"):
            assert row[column] == float(recorded[column]), (rank, column)
    ct = c.communication_time
    assert Counter(ct["Rank"]) == {r: len(communication_ops(PYTORCH_TEXT / level / f"rank{r}_ascend_pt"))
                                   for r in (0, 1) if level != "level0"}
    assert close(ct["Elapse Time(ms)"].sum(), sum(Decimal(repr(info["Elapse Time(ms)"])) for r in (0, 1)
                                                  for _, _, info in communication_ops(PYTORCH_TEXT / level /
                                                                                      f"rank{r}_ascend_pt")))
    # the links between the two ranks: each file's "allreduce-total" entry of the link to the other rank
    expected = {}
    for r in (0, 1):
        path = output(PYTORCH_TEXT / level / f"rank{r}_ascend_pt", "communication_matrix.json")
        if not path.is_file():
            continue
        for kinds in json.loads(path.read_text()).values():
            for key, links in kinds["collective"].items():
                if key.startswith("allreduce-total@"):
                    link = links[f"{r}-{1 - r}"]
                    expected[(r, 1 - r)] = (round(link["Transit Size(MB)"] * 1e6), link["Transit Time(ms)"] * 1000)
    m = c.communication_matrix
    assert sorted(zip(m["Src Rank"], m["Dst Rank"])) == sorted(expected)
    for s, d, size, time in m[["Src Rank", "Dst Rank", "Size(Byte)", "Transit Time(us)"]].itertuples(index=False):
        assert size == expected[(s, d)][0] and close(time, expected[(s, d)][1])


@pytest.fixture(scope="module")
def shared():
    """The workspace's copy of the issue's data set (level0 and level2), where it is there."""
    found = next((p for p in SHARED_REAL_DATA if p.is_dir()), None)
    if found is None:
        pytest.skip("../shared/real-data is not here (a fresh clone)")
    return found


def test_cut_trace_views_read_as_the_originals(shared):
    """tests/data keeps of each trace_view.json only the events geprof reads (SOURCES.md)."""
    for level in ("level0", "level2"):
        for rank in (0, 1):
            name = f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
            whole, cut = read_trace_view(shared / level / name), read_trace_view(PYTORCH_TEXT / level / name)
            pd.testing.assert_frame_equal(whole.steps, cut.steps)
            assert whole.launch_of == cut.launch_of and len(cut.launch_of) == 210
            assert whole.device_id == cut.device_id


def test_shared_real_data_loads_as_the_copies(shared):
    for level in ("level0", "level2"):
        for rank in (0, 1):
            a = geprof_nb.load(shared / level / f"rank{rank}_ascend_pt")
            b = geprof_nb.load(PYTORCH_TEXT / level / f"rank{rank}_ascend_pt")
            for table in ("op_summary", "step_breakdown", "communication_statistic", "communication_time",
                          "operator_memory", "memory_record", "op_statistic", "api_statistic"):
                pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), obj=f"{level} {rank} {table}")
            assert a.source.step_bounds().equals(b.source.step_bounds())


# ------------------------------------------------------------------ the cases seen on real files
def test_hccl_kernels_without_step_trace_time_are_communication():
    """msprof-analyze's kernel_details: 19 collectives (346,398.74 us), no step_trace_time.csv."""
    hccl = collectives(COMPUTE_ADVICE)
    assert len(hccl) == 19 and sum(Decimal(r["Duration(us)"]) for r in hccl) == Decimal("346398.74")
    p = geprof_nb.load(COMPUTE_ADVICE)
    assert HCCL_NOTE.format(19) in p.notes
    b = p.step_breakdown
    assert b["Step"].tolist() == [1] and close(b["Communication"].iloc[0], union_us(spans(hccl)))
    assert close(b["Communication"].iloc[0], 346398.74)  # the 19 do not overlap one another
    s = p.communication_statistic.set_index("OP Type")
    by_type = defaultdict(list)
    for r in hccl:
        by_type[collective_type(r)].append(Decimal(r["Duration(us)"]))
    assert dict(s["Count"]) == {t: len(d) for t, d in by_type.items()} == {
        "hcom_broadcast_": 2, "hcom_allReduce_": 14, "hcom_allGather_": 2, "hcom_reduceScatter_": 1}
    for t, durations in by_type.items():
        assert close(s.loc[t, "Total Time(us)"], sum(durations), 5e-4), t
    # op_statistic, as msprof's, leaves the collectives out
    assert "COMMUNICATION" not in set(p.op_statistic["Core Type"]) and "HCCL" not in set(p.op_statistic["Core Type"])
    assert p.op_statistic["Count"].sum() == 591 - 19


def test_communication_json_ops_are_matched_by_name_and_time():
    """level1 rank 0 prints elapse times with sub-ns digits (79.08952021875 ms): all 4 collectives are
    found, also where kernel_details does not label them (Accelerator Core N/A, as a Level0 file has)."""
    path = PYTORCH_TEXT / "level1" / "rank0_ascend_pt"
    elapse = [info["Elapse Time(ms)"] for _, _, info in communication_ops(path)]
    assert 79.08952021875 in elapse and len(elapse) == 4
    s = geprof_nb.load(path).communication_statistic
    assert s["Count"].tolist() == [4] and close(s["Total Time(us)"].iloc[0], Decimal("105991.876"), 5e-4)


def test_unlabelled_collectives_are_found_in_communication_json(tmp_path):
    path = PYTORCH_TEXT / "level1" / "rank0_ascend_pt"
    copy = copy_run(path, tmp_path)
    kd = output(copy, "kernel_details.csv")
    kd.write_text(kd.read_text(encoding="utf-8").replace(",HCCL,", ",N/A,"), encoding="utf-8")
    p = geprof_nb.load(copy)
    assert set(p.op_summary["Task Type"].astype(str)) != {"COMMUNICATION"}
    rows = p.source.communication_rows()
    assert p.op_summary["Op Name"][rows].tolist() == [r["Name"] for r in collectives(path)]
    s = p.communication_statistic
    assert s["OP Type"].tolist() == ["hcom_allReduce_"] and s["Count"].tolist() == [4]
    assert close(s["Total Time(us)"].iloc[0], sum(Decimal(r["Duration(us)"]) for r in collectives(path)), 5e-4)
    assert not [n for n in p.notes if "communication.json" in n]


def test_last_line_without_line_break_loads(tmp_path):
    path = PYTORCH_TEXT / "level2" / "rank0_ascend_pt"
    copy = copy_run(path, tmp_path)
    kd = output(copy, "kernel_details.csv")
    data = kd.read_bytes()
    assert data.endswith(b"\n")
    kd.write_bytes(data.rstrip(b"\r\n"))
    p = geprof_nb.load(copy)
    assert p.op_summary["Task Duration(us)"].tolist() == kernels(path).floats("Duration(us)")
    assert not [n for n in p.notes if "truncated" in n or "skipped" in n]
    assert (f"{kd}: its last line (192) has no line break after it, as a file cut off while being written ends: "
            "read as it is (if the file was cut there, that row's last cell is incomplete)") in p.notes


def test_a_short_row_is_skipped_and_named():
    """msinsight's test_rank_0: line 17 of kernel_details.csv has 31 of the header's 32 cells."""
    path = SERVER_RANKS / "test_rank_0"
    k = kernels(path)
    assert k.short == [17] and len(k.rows) == 20
    p = geprof_nb.load(path)
    assert p.op_summary["Op Name"].astype(str).tolist() == k.column("Name")
    assert p.source.op_rows().start_ns.tolist() == [ns(t) for t in k.column("Start Time(us)")]
    kd = output(path, "kernel_details.csv")
    assert (f"{kd}: 1 rows skipped, whose cells do not match the header's 32 columns: line 17 (31 fields). A row cut "
            "short or hand-edited cannot say which cell is missing, so none of it is read; every other row is."
            ) in p.notes


def test_rows_cut_short_in_a_real_file_are_skipped_and_the_rest_read(tmp_path):
    path = PYTORCH_TEXT / "level2" / "rank0_ascend_pt"
    copy = copy_run(path, tmp_path)
    kd = output(copy, "kernel_details.csv")
    lines = kd.read_text(encoding="utf-8").split("\n")
    lines[99] = ",".join(lines[99].split(",")[:10])  # line 100
    cells = lines[149].split(",")
    lines[149] = ",".join(cells[:9]) + "," + cells[9][:3]  # line 150, cut inside its Duration(us)
    kd.write_text("\n".join(lines), encoding="utf-8")
    whole = kernels(copy)
    assert whole.short == [100, 150] and len(whole.rows) == 189
    p = geprof_nb.load(copy)
    assert p.op_summary["Task Duration(us)"].tolist() == whole.floats("Duration(us)")
    assert close(p.op_summary["Task Duration(us)"].sum(), whole.total("Duration(us)"))
    note = next(n for n in p.notes if "rows skipped" in n)
    assert note == (f"{kd}: 2 rows skipped, whose cells do not match the header's 46 columns: lines 100 (10 "
                    "fields), 150 (10 fields). A row cut short or hand-edited cannot say which cell is missing, so "
                    "none of it is read; every other row is.")


def test_spreadsheet_exponent_numbers_parse():
    """msinsight's test_rank_1 memory_record.csv went through a spreadsheet: 1.69512E+15, 9.4509E+13."""
    path = SERVER_RANKS / "test_rank_1"
    records = read_csv(output(path, "memory_record.csv"))
    p = geprof_nb.load(path)
    r = p.memory_record
    assert len(r) == len(records.rows) == 30
    assert p.times_ns("memory_record")["Timestamp(us)"].tolist() == [ns(t) for t in records.column("Timestamp(us)")]
    assert ns("1.69512E+15") == 1_695_120_000_000_000_000 and r["Timestamp(us)"].iloc[0] == 1.69512e15
    pointers = [int(Decimal(v)) if v else None for v in records.column("Stream Ptr")]
    assert r["Stream Ptr"].astype(object).where(r["Stream Ptr"].notna(), None).tolist() == pointers
    assert 94_509_000_000_000 in pointers
    assert close(r["Total Reserved(MB)"].sum(), records.total("Total Reserved(MB)"))
    mr = output(path, "memory_record.csv")
    assert [n for n in p.notes if "exponent notation" in n] == [
        f"{mr}: column 'Timestamp(us)' has 30 numbers in exponent notation (line 2: 1.69512E+15), as a spreadsheet "
        "saves them: read by their value, they are only as exact as the digits written (times or ids closer than "
        "that cannot be told apart)",
        f"{mr}: column 'Stream Ptr' has 3 numbers in exponent notation (line 29: 9.4509E+13), as a spreadsheet "
        "saves them: read by their value, they are only as exact as the digits written (times or ids closer than "
        "that cannot be told apart)"]


def test_older_cann_op_summary_header_loads():
    table = read_csv(OLDER_OP_SUMMARY)
    assert "Device_id" not in table.header and {"Task Start Time", "Block Dim", "mac_ratio"} <= set(table.header)
    p = geprof_nb.load(OLDER_OP_SUMMARY.parent)
    f = p.op_summary
    assert list(f.columns[:11]) == ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "Task Type",
                                    "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Num"]
    row = table.rows[0]
    assert p.source.op_rows().start_ns.tolist() == [ns(row["Task Start Time"])] == [1_043_640_017_380_831]
    assert f["Task Duration(us)"].tolist() == [float(row["Task Duration(us)"])]
    assert f["Block Num"].tolist() == [int(row["Block Dim"])] and f["Device_id"].tolist() == [0]
    for column in ("mac_ratio", "vec_ratio", "mte2_ratio", "memory_bound"):
        assert f[column].tolist() == [float(row[column])], column
    assert p.device["chip_family"] == "910A" and p.options == {"aic_metrics": "PipeUtilization"}
    assert (f"{OLDER_OP_SUMMARY}: an older CANN op_summary header: read 'Task Start Time' as 'Task Start Time(us)', "
            "'Block Dim' as 'Block Num'; its PMU columns (total_cycles, vec_ratio, mac_ratio, memory_bound, ...) have "
            "no aic_/aiv_ prefix: the names msprof still gives them for an AI Core that runs cube and vector work "
            "itself (910A, 310P), read as that chip family's") in p.notes
    assert (f"{OLDER_OP_SUMMARY}: no Device_id column (an older CANN op_summary): its rows are read as device 0"
            in p.notes)


def test_rank_folders_not_named_ascend_pt_are_a_cluster():
    c = geprof_nb.load(SERVER_RANKS)
    assert isinstance(c, ClusterProfile) and list(c.ranks) == [0, 1]
    for rank in (0, 1):
        path = SERVER_RANKS / f"test_rank_{rank}"
        assert c.rank(rank).path == path and c.rank(rank).device_id == rank
        recorded = read_csv(output(path, "step_trace_time.csv")).rows[0]
        assert c.cluster_step_trace_time.query("Index == @rank")["Communication"].tolist() == [
            float(recorded["Communication"])]
        s = c.rank(rank).communication_statistic
        assert s["Count"].sum() == len(collectives(path))
    assert geprof_nb.load(SERVER_RANKS / "test_rank_1").path == SERVER_RANKS / "test_rank_1"
    assert np.isin(c.step_breakdown["Rank"], [0, 1]).all()
