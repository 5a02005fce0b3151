"""format="msprof": a PROF_ directory with msprof's summary CSVs and timeline JSON.

The values are checked against the raw records of the run (exact integer ns),
the layout and formatting against msprof's rules (reference §3.3, §4).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.export import export_profile
from geprof_nb.analysis.export.cells import wait_cells
from geprof_nb.analysis.export.naming import stamp14
from geprof_nb.analysis.export.timeline import format_pid
from geprof_nb.analysis.sources.source import Source
from geprof_nb.analysis.tables import columns as C
from geprof_nb.prof import rawdata
from helpers.geprof_testing import build_tiny_graph, read_csv, run_profiled_session, small_resnet

TIMESTAMP = re.compile(r"^\d+\.\d{3}\t$")
THREE_DECIMALS = re.compile(r"^\d+\.\d{3}$")


def us_tab(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}\t"


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    """ResNet-50 on 8 ranks with HCCL sub-tasks and memory, exported once."""
    out = tmp_path_factory.mktemp("resnet_msprof")
    run = run_profiled_session(out / "run", small_resnet(8), 3, hccl="on", task_memory="on")
    prof_dir = run.profile.export(out / "export", "msprof")
    return run.profile, prof_dir / "mindstudio_profiler_output"


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    """A dynamic-shape MLP (node-by-node launches, so HostToDevice flows) with mstx ranges."""
    out = tmp_path_factory.mktemp("dynamic_msprof")
    opts = {"output": str(out / "run"), "training_trace": "on", "msproftx": "on", "hccl": "on"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    try:
        sess = ge.Session()
        sess.add_graph(1, ge.models.mlp(batch_size=8, in_features=16, hidden=(16,), dynamic=True, world_size=2))
        for step in range(2):
            with ge.mstx.range(f"step {step}"):
                assert sess.run_graph(1) == ge.SUCCESS
            ge.mstx.mark("between steps")
    finally:
        ge.GEFinalize()
    profile = geprof_nb.load(out / "run")
    return profile, profile.export(out / "export", "msprof") / "mindstudio_profiler_output"


def one(directory: Path, pattern: str) -> Path:
    found = sorted(directory.glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


# --------------------------------------------------------------------------- layout


def test_layout_reuses_the_run_name(resnet):
    profile, out = resnet
    assert out.parent.name == profile.run.path.name
    assert re.fullmatch(r"PROF_\d{6}_\d{17}_[A-Z]+", out.parent.name)
    stamp = stamp14(profile)
    assert re.fullmatch(r"\d{14}", stamp)
    names = {p.name for p in out.iterdir()}
    expected = {f"{n}_{stamp}.csv" for n in ("op_summary", "op_statistic", "api_statistic", "task_time", "step_trace",
                                             "communication_statistic")}
    expected |= {f"msprof_{stamp}.json", f"step_trace_{stamp}.json"}
    assert names == expected  # no msprof_tx: the run recorded no markers, and msprof writes no empty summary


def test_unknown_format_names_the_accepted_ones(resnet, tmp_path):
    with pytest.raises(ValueError, match="msprof, ascend_pt, chrome, parquet"):
        export_profile(resnet[0], tmp_path, "excel")


# --------------------------------------------------------------------------- op_summary


def test_op_summary_header_and_values(resnet):
    profile, out = resnet
    header, rows = read_csv(one(out, "op_summary_*.csv"))
    frame = profile.op_summary
    assert header == list(frame.columns)
    assert len(rows) == len(frame)
    col = {name: i for i, name in enumerate(header)}
    # exact starts: the raw HWTS starts of the op tasks, in order
    run = profile.run
    hw, track = run.load("hwts"), run.load("task_track")
    named = set(track["connection_id"][track["kernel_name"] != 0].tolist())
    starts = np.sort(hw["start"][np.isin(hw["connection_id"], list(named))])
    assert [r[col["Task Start Time(us)"]] for r in rows] == [us_tab(int(ns)) for ns in starts]
    assert all(TIMESTAMP.match(r[col["Task Start Time(us)"]]) for r in rows)
    # 3 decimals, integers, N/A
    assert all(THREE_DECIMALS.match(r[col["Task Duration(us)"]]) for r in rows)
    aiv = [r for r in rows if r[col["Task Type"]] == "AI_VECTOR_CORE"]
    assert aiv and all(r[col["aicore_time(us)"]] == "N/A" and r[col["aic_total_cycles"]] == "N/A" for r in aiv)
    assert all(re.fullmatch(r"\d+", r[col["aiv_total_cycles"]]) for r in aiv)
    comm = [r for r in rows if r[col["Task Type"]] == "COMMUNICATION"]
    assert comm and all(r[col["Task ID"]] == "N/A" and r[col["Stream ID"]] == "N/A" for r in comm)
    assert all(r[col["Block Num"]] == "0" for r in comm)


def test_op_summary_wait_time_and_shapes(resnet):
    profile, out = resnet
    path = one(out, "op_summary_*.csv")
    header, rows = read_csv(path)
    i = header.index("Task Wait Time(us)")
    waits = profile.op_summary["Task Wait Time(us)"].to_numpy()
    assert rows[0][i] == "0"
    kind = header.index("Task Type")
    comm = [r for r in rows[1:] if r[kind] == "COMMUNICATION"]
    assert comm and all(r[i] == "0" for r in comm)  # msprof's literal 0 for communication rows
    assert all(re.fullmatch(r"\d+\.\d{6}", r[i]) for r in rows[1:] if r[kind] != "COMMUNICATION")
    assert [float(r[i]) for r in rows] == pytest.approx(list(waits), abs=1e-9)
    assert wait_cells(np.array([0.0, 20.0, 0.02])).tolist() == ["0", "20.000000", "0.020000"]
    assert wait_cells(np.array([0.0, 20.0, 0.0, 3.5]), np.array([2])).tolist() == ["0", "20.000000", "0", "3.500000"]
    # shapes carry literal quotes (the CSV file shows them tripled), other cells are bare
    shapes = [r[header.index("Input Shapes")] for r in rows if r[header.index("Input Shapes")] != "N/A"]
    assert shapes and all(s.startswith('"') and s.endswith('"') for s in shapes)
    assert '"""2,3,64,64;64,3,7,7"""' in path.read_text()


def test_timestamps_are_exact_where_floats_are_not(resnet):
    """Floats of ~1.77e15 us hold 0.25 us: rounding them misses the raw ns, times_ns does not."""
    profile, _ = resnet
    frame = profile.op_summary
    exact = profile.source.times_ns("op_summary", frame).iloc[:, 0].to_numpy(np.int64)
    rounded = Source.times_ns(profile.source, "op_summary", frame).iloc[:, 0].to_numpy(np.int64)
    assert (exact == profile._op_rows.start_ns).all()
    assert (exact != rounded).any() and np.abs(exact - rounded).max() <= 128


# --------------------------------------------------------------------------- step_trace, task_time, others


def test_step_trace_repeated_reduce_columns_and_exact_tags(resnet):
    profile, out = resnet
    header, rows = read_csv(one(out, "step_trace_*.csv"))
    n_reduce = header.count("Reduce Start(us)")
    assert n_reduce == 4
    assert header == C.STEP_TRACE + C.STEP_TRACE_REDUCE * n_reduce
    tr = profile.run.load("step_trace")
    for r, row in enumerate(rows):
        it = int(row[1])
        tags = {int(t): int(ts) for t, ts, i in zip(tr["tag_id"], tr["timestamp"], tr["index_id"]) if i == it}
        assert row[2] == us_tab(tags[rawdata.FP_TAG]) and row[3] == us_tab(tags[rawdata.BP_TAG])
        assert row[4] == us_tab(tags[rawdata.ITER_END_TAG])
        for k in range(n_reduce):
            assert row[10 + 2 * k] == us_tab(tags[rawdata.ALL_REDUCE_START_TAG + 2 * k])
            assert THREE_DECIMALS.match(row[11 + 2 * k])
    assert rows[0][header.index("Data Aug Bound(us)")] == "N/A"  # no previous iteration
    assert THREE_DECIMALS.match(rows[1][header.index("Data Aug Bound(us)")])


@pytest.fixture(scope="module")
def get_next(tmp_path_factory):
    """An MLP fed by GetNext (trace tags 20000/20001) on 2 ranks, exported once."""
    out = tmp_path_factory.mktemp("get_next_msprof")
    run = run_profiled_session(out / "run", ge.models.mlp(batch_size=8, data="GetNext", world_size=2), 3)
    return run.profile, run.profile.export(out / "export", "msprof") / "mindstudio_profiler_output"


def test_step_trace_csv_header_is_msprofs_with_get_next(get_next):
    """The Profile's GetNext columns stay out of the CSV: its header is msprof's (reference §3.3)."""
    profile, out = get_next
    assert set(C.STEP_TRACE_GETNEXT) <= set(profile.step_trace.columns)
    header, rows = read_csv(one(out, "step_trace_*.csv"))
    assert header == C.STEP_TRACE + C.STEP_TRACE_REDUCE
    assert len(rows) == 3 and all(len(row) == len(header) for row in rows)
    assert rows[0][header.index("Reduce Start(us)")] == us_tab(int(profile.source.times_ns(
        "step_trace", profile.step_trace)["Reduce Start(us)"].iloc[0]))


def test_step_trace_json_get_next_slices(get_next):
    """One msprof ``GetNext`` slice per step on the Step Trace thread, args from the exact tags."""
    profile, out = get_next
    steps = json.loads(one(out, "step_trace_*.json").read_text())
    slices = [e for e in steps if e.get("cat") == "GetNext Time"]
    assert len(slices) == 3 and {e["name"] for e in slices} == {"GetNext"}
    tr = profile.run.load("step_trace")
    starts = sorted(int(t) for t in tr["timestamp"][tr["tag_id"] == rawdata.GET_NEXT_START_TAG])
    ends = sorted(int(t) for t in tr["timestamp"][tr["tag_id"] == rawdata.GET_NEXT_START_TAG + 1])
    for e, start, end in zip(slices, starts, ends):
        assert set(e["args"]) == {"GetNext Start", "GetNext End", "GetNext Time(us)"}
        assert e["args"]["GetNext Start"] == e["ts"] == us_tab(start)[:-1]
        assert e["args"]["GetNext End"] == us_tab(end)[:-1]
        assert e["args"]["GetNext Time(us)"] == e["dur"] == (end - start) / 1000
        assert e["tid"] == 70000 + int(profile.step_trace["Model ID"].iloc[0])
    assert [e["args"]["GetNext Time(us)"] for e in slices] == profile.step_trace["GetNext Time(us)"].tolist()


def test_no_get_next_slices_without_get_next(resnet):
    profile, out = resnet
    assert not [e for e in json.loads(one(out, "step_trace_*.json").read_text()) if e.get("cat") == "GetNext Time"]


def test_task_time_exact_start_and_stop(resnet):
    profile, out = resnet
    header, rows = read_csv(one(out, "task_time_*.csv"))
    assert header == list(profile.task_time.columns)
    hw = profile.run.load("hwts")
    hw = hw[np.argsort(hw["start"], kind="stable")]
    assert [r[6] for r in rows] == [us_tab(int(s)) for s in hw["start"]]
    assert [r[7] for r in rows] == [us_tab(int(s) + int(d)) for s, d in zip(hw["start"], hw["dur"])]


def test_other_summaries(resnet):
    profile, out = resnet
    for name in ("op_statistic", "api_statistic", "communication_statistic"):
        header, rows = read_csv(one(out, f"{name}_*.csv"))
        frame = getattr(profile, name)
        assert header == list(frame.columns) and len(rows) == len(frame)
    header, rows = read_csv(one(out, "api_statistic_*.csv"))
    assert all(r[0] == "host" and THREE_DECIMALS.match(r[3]) and re.fullmatch(r"\d+", r[4]) for r in rows)


def test_slices_keep_the_header_and_every_row(resnet, tmp_path):
    profile, out = resnet
    whole = one(out, "op_summary_*.csv").read_text().splitlines()
    sliced = export_profile(profile, tmp_path, "msprof", slice_rows=1000) / "mindstudio_profiler_output"
    stamp = stamp14(profile)
    parts = sorted(sliced.glob("op_summary_slice_*"), key=lambda p: int(p.name.split("_")[3]))
    n = len(whole) - 1
    assert [p.name for p in parts] == [f"op_summary_slice_{i}_{stamp}.csv" for i in range(-(-n // 1000))]
    lines = [p.read_text().splitlines() for p in parts]
    assert all(part[0] == whole[0] for part in lines)
    assert [len(part) - 1 for part in lines[:-1]] == [1000] * (len(parts) - 1)
    assert sum((part[1:] for part in lines), []) == whole[1:]
    assert not list(sliced.glob(f"op_summary_{stamp}.csv"))
    assert (sliced / f"step_trace_{stamp}.csv").exists()  # small tables stay whole


# --------------------------------------------------------------------------- timeline


def load_timeline(out: Path) -> list[dict]:
    events = json.loads(one(out, "msprof_*.json").read_text())
    assert isinstance(events, list)
    return events


def processes(events: list[dict]) -> dict[str, int]:
    return {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}


def test_timeline_processes_pids_and_metadata(resnet):
    profile, out = resnet
    events = load_timeline(out)
    procs = processes(events)
    pid = profile.info["pid"]
    assert procs == {"CANN": format_pid(pid, 7, 31), "Ascend Hardware": format_pid(pid, 14, 0),
                     "Communication": format_pid(pid, 16, 0), "NPU MEM": format_pid(pid, 17, 0),
                     "Overlap Analysis": format_pid(pid, 31, 0)}
    assert format_pid(pid, 14, 0) == (pid << 10) | (14 << 5) | 0
    meta = {(e["pid"], e["name"]): e["args"] for e in events if e["ph"] == "M" and e["tid"] == 0
            and e["name"].startswith("process_")}
    for name, p in procs.items():
        assert meta[(p, "process_labels")] == {"labels": "CPU" if name == "CANN" else "NPU 0"}
    assert meta[(procs["Ascend Hardware"], "process_sort_index")] == {"sort_index": 14}
    assert meta[(procs["CANN"], "process_sort_index")] == {"sort_index": 7}
    for e in events:
        if "ts" in e:
            assert isinstance(e["ts"], str) and re.fullmatch(r"\d+\.\d{3}", e["ts"])
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0


def test_one_thread_per_stream_with_task_args(resnet):
    profile, out = resnet
    events = load_timeline(out)
    hw = processes(events)["Ascend Hardware"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["pid"] == hw and e["name"] == "thread_name"}
    tasks = profile.source.device_tasks()
    streams = set(tasks["stream_id"].tolist())
    assert {t: n for t, n in names.items() if t in streams} == {s: f"Stream {s}" for s in streams}
    slices = [e for e in events if e["pid"] == hw and e["ph"] == "X" and e["tid"] in streams]
    assert len(slices) == len(tasks)
    assert Counter(e["tid"] for e in slices) == Counter(tasks["stream_id"].tolist())
    conv = next(e for e in slices if e["name"] == "resnet_model/conv1/Conv2D")
    assert set(conv["args"]) == {"Model Id", "Task Type", "Physic Stream Id", "Task Id", "Batch Id", "Subtask Id",
                                 "connection_id"}
    assert conv["args"]["Task Type"] == "AI_CORE" and conv["args"]["Physic Stream Id"] == conv["tid"]
    first = profile.op_summary.iloc[0]
    first_slice = next(e for e in slices if e["name"] == first["Op Name"])
    assert first_slice["ts"] + "\t" == us_tab(int(profile._op_rows.start_ns[0]))


def test_step_trace_slices(resnet):
    profile, out = resnet
    events = load_timeline(out)
    steps = json.loads(one(out, "step_trace_*.json").read_text())
    hw = processes(events)["Ascend Hardware"]
    assert processes(steps) == {"Ascend Hardware": hw}
    in_timeline = [e for e in events if e.get("cat") in ("Iteration Time", "FP_BP Time", "Iteration Refresh",
                                                          "Data_aug Bound", "Reduce")]
    assert in_timeline == [e for e in steps if e["ph"] == "X"]
    names = {e["name"] for e in in_timeline}
    assert {"Iteration 1", "FP_BP Time 1", "Iteration Refresh 1", "Data_aug Bound 2", "Reduce_1_0"} <= names
    assert "Data_aug Bound 1" not in names
    it1 = next(e for e in in_timeline if e["name"] == "Iteration 1")
    assert it1["tid"] == 70000 + int(profile.step_trace["Model ID"].iloc[0])
    assert set(it1["args"]) == {"Iteration ID", "FP Start", "BP End", "Iteration End", "Iteration Time(us)"}
    assert it1["args"]["Iteration Time(us)"] == pytest.approx(profile.step_trace["Iteration Time(us)"].iloc[0])
    fpbp = next(e for e in in_timeline if e["name"] == "FP_BP Time 1")
    assert fpbp["ts"] == it1["args"]["FP Start"] and set(fpbp["args"]) == {"Iteration ID", "FP Start", "BP End",
                                                                              "FP_BP Time(us)"}
    aug = next(e for e in in_timeline if e["name"] == "Data_aug Bound 2")
    assert set(aug["args"]) == {"Iteration ID", "Data_aug Bound(us)"}
    thread = [e for e in steps if e["name"] == "thread_name" and e["tid"] == it1["tid"]]
    assert thread[0]["args"]["name"] == f"Step Trace(Model ID:{it1['tid'] - 70000})"


def test_communication_layer(resnet):
    profile, out = resnet
    events = load_timeline(out)
    pid = processes(events)["Communication"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e["pid"] == pid and e["name"] == "thread_name"}
    planes = sorted(set(profile.hccl_tasks["Plane ID"]))
    assert threads == {0: "Group hccl_world_group Communication", **{p + 1: f"Plane {p}" for p in planes}}
    ops = [e for e in events if e["pid"] == pid and e["ph"] == "X" and e["tid"] == 0]
    assert [e["name"] for e in ops] == list(profile.communication_time["Op Name"])
    sub = [e for e in events if e["pid"] == pid and e["ph"] == "X" and e["tid"] > 0]
    assert len(sub) == len(profile.hccl_tasks)
    assert {e["name"] for e in sub} <= {"Notify_Record", "Notify_Wait", "Memcpy", "Reduce_Inline", "RDMASend"}


def test_overlap_analysis_adds_up_to_step_breakdown(resnet):
    profile, out = resnet
    events = load_timeline(out)
    pid = processes(events)["Overlap Analysis"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e["pid"] == pid and e["name"] == "thread_name"}
    assert threads == {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
    totals = Counter()
    for e in events:
        if e["pid"] == pid and e["ph"] == "X":
            totals[e["name"]] += round(e["dur"] * 1000)
    b = profile.step_breakdown
    for kind in ("Computing", "Communication", "Communication(Not Overlapped)", "Free"):
        assert totals[kind] == round(b[kind].sum() * 1000), kind


def test_memory_counters(resnet):
    profile, out = resnet
    events = load_timeline(out)
    counters = [e for e in events if e["ph"] == "C"]
    assert len(counters) == len(profile.memory_record)
    assert set(counters[0]["args"]) == {"Total Allocated(MB)", "Total Reserved(MB)"}


def test_host_to_device_flows_pair_launches_with_their_tasks(dynamic):
    profile, out = dynamic
    events = load_timeline(out)
    procs = processes(events)
    flows = [e for e in events if e.get("cat") == "HostToDevice"]
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    ends = {e["id"]: e for e in flows if e["ph"] == "f"}
    launches = [e for e in events if e["pid"] == procs["CANN"] and e["ph"] == "X"
                and e["args"]["Mode"].startswith("Launch")]
    assert len(starts) == len(ends) == len(launches) == len(profile.op_summary)
    kernels = {(e["pid"], e["tid"], e["ts"]): e for e in events if e["pid"] == procs["Ascend Hardware"]
               and e["ph"] == "X"}
    launch_at = {(e["tid"], e["ts"]): e for e in launches}
    for flow_id, s in starts.items():
        f = ends[flow_id]
        assert s["name"] == f["name"] == f"HostToDevice{flow_id}" and f["bp"] == "e"
        kernel = kernels[(f["pid"], f["tid"], f["ts"])]
        launch = launch_at[(s["tid"], s["ts"])]
        assert launch["name"] == f"Node@{kernel['name']}"  # the launch names the op it queued
        assert float(s["ts"]) <= float(f["ts"])


def test_msprof_tx_summary_and_layer(dynamic):
    profile, out = dynamic
    header, rows = read_csv(one(out, "msprof_tx_*.csv"))
    assert header == list(profile.msprof_tx.columns) and len(rows) == 4
    rec = profile.run.load("mstx")
    rec = rec[np.argsort(rec["start"], kind="stable")]
    assert [r[7] for r in rows] == [us_tab(int(s)) for s in rec["start"]]
    assert all(r[-1] == "N/A" and r[-2] == "N/A" for r in rows)
    events = load_timeline(out)
    pid = processes(events)["PID Name"]
    assert pid == format_pid(profile.info["pid"], 6, 31)
    tx = [e for e in events if e["pid"] == pid and e["ph"] == "X"]
    assert sorted(e["name"] for e in tx) == ["between steps", "between steps", "step 0", "step 1"]
    assert all(e["args"]["event_type"] in ("marker", "start/end") for e in tx)


def test_static_graphs_get_no_per_task_flows(tmp_path):
    run = run_profiled_session(tmp_path / "run", build_tiny_graph(world_size=1)[0], 2)
    out = run.profile.export(tmp_path / "x", "msprof") / "mindstudio_profiler_output"
    events = load_timeline(out)
    assert not [e for e in events if e.get("cat") == "HostToDevice"]
    assert {"CANN", "Ascend Hardware", "Overlap Analysis"} <= set(processes(events))
    assert not list(out.glob("communication_statistic_*"))  # no collectives, no file


def test_a_run_without_device_data_exports(tmp_path):
    """Profiling on, no graph run: the formats still write what there is (msprof: the API summary)."""
    opts = {"output": str(tmp_path / "run"), "training_trace": "on"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(opts),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    ge.GEFinalize()
    profile = geprof_nb.load(tmp_path / "run")
    out = profile.export(tmp_path / "m", "msprof") / "mindstudio_profiler_output"
    assert {p.name.split("_2")[0] for p in out.iterdir()} == {"api_statistic", "msprof"}
    pt = profile.export(tmp_path / "pt", "ascend_pt") / "ASCEND_PROFILER_OUTPUT"
    assert (pt / "kernel_details.csv").read_text().count("\n") == 1  # the header only
    assert json.loads((pt / "communication.json").read_text()) == {}
    assert json.loads(profile.export(tmp_path / "c", "chrome").read_text())["traceEvents"]
