"""format="ascend_pt": the torch_npu directory msprof-analyze reads (msprof_analyze_inputs.md §3, §6)."""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.export.ascend_pt import KERNEL_RENAMES
from geprof_nb.analysis.export.timeline import format_pid
from geprof_nb.analysis.tables import memory
from geprof_nb.analysis.tables.breakdown import step_windows
from helpers.geprof_testing import read_csv, run_profiled_session, run_two_graphs, small_resnet
from helpers.real_fixtures import STAMP, write_msprof


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A ResNet-50 run on 8 ranks (HCCL sub-tasks, memory) exported as rank 0 and rank 1."""
    out = tmp_path_factory.mktemp("resnet_pt")
    run = run_profiled_session(out / "run", small_resnet(8), 3, hccl="on", task_memory="on")
    dirs = [run.profile.export(out / "cluster", "ascend_pt", rank=r) for r in (0, 1)]
    return run.profile, dirs


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory):
    """A dynamic-shape MLP: every kernel launched by its own node launch."""
    out = tmp_path_factory.mktemp("dynamic_pt")
    run = run_profiled_session(out / "run", ge.models.mlp(batch_size=8, in_features=16, hidden=(16,), dynamic=True,
                                                          world_size=2), 2, hccl="on")
    return run.profile, run.profile.export(out / "x", "ascend_pt")


def output(d: Path) -> Path:
    return d / "ASCEND_PROFILER_OUTPUT"


def trace(d: Path) -> list[dict]:
    events = json.loads((output(d) / "trace_view.json").read_text())
    assert isinstance(events, list)  # a dict would be read as GPU data
    return events


def processes(events: list[dict]) -> dict[str, int]:
    return {e["args"]["name"]: e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}


def test_layout_and_rank_files(exported):
    profile, dirs = exported
    for rank, d in enumerate(dirs):
        assert re.fullmatch(rf".+-rank{rank}_{profile.info['pid']}_\d{{17}}_ascend_pt", d.name)
        assert d.name.split("_")[-3] == dirs[0].name.split("_")[-3]
        info = json.loads((d / f"profiler_info_{rank}.json").read_text())
        assert info["rank_id"] == rank
        assert info["config"]["experimental_config"]["_profiler_level"] == "Level1"
        assert info["config"]["experimental_config"]["_aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"
        assert json.loads((d / "profiler_metadata.json").read_text()) == {"ENV_VARIABLES": {}}
        device = json.loads(next(d.glob("PROF_*/device_0/info.json.0")).read_text())["DeviceInfo"][0]
        assert device["ai_core_num"] == 24 and device["aiv_num"] == 48 and device["aic_frequency"] == "1800"
        names = {p.name for p in output(d).iterdir()}
        assert names == {"kernel_details.csv", "step_trace_time.csv", "trace_view.json", "op_statistic.csv",
                         "api_statistic.csv", "operator_memory.csv", "memory_record.csv", "communication.json",
                         "communication_matrix.json"}
    assert dirs[0] != dirs[1]


@pytest.mark.parametrize("rank", [-1, 1.5, "x", True, None])
def test_a_rank_that_is_not_a_whole_number_from_0_is_refused_naming_rank(exported, rank, tmp_path):
    with pytest.raises(ValueError) as err:
        exported[0].export(tmp_path / "x", "ascend_pt", rank=rank)
    assert str(err.value) == f"rank {rank!r} is not valid; accepted: a whole number >= 0"
    assert not (tmp_path / "x").exists()


def test_kernel_details(exported):
    profile, (d, _) = exported
    header, rows = read_csv(output(d) / "kernel_details.csv")
    frame = profile.op_summary
    assert header == ["Step Id"] + [KERNEL_RENAMES.get(c, c) for c in frame.columns]
    assert header[:12] == ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
                           "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)"]
    assert {"Block Dim", "Mix Block Dim"} <= set(header) and "Block Num" not in header
    assert [int(r[0]) for r in rows] == list(profile.iteration_of_ops)
    shapes = [r[header.index("Input Shapes")] for r in rows if r[header.index("Input Shapes")] != "N/A"]
    assert all(s[0] == s[-1] == '"' for s in shapes)
    assert '"""2,3,64,64;64,3,7,7"""' in (output(d) / "kernel_details.csv").read_text()


def test_kernel_start_times_are_the_trace_view_kernel_ts(exported):
    profile, (d, _) = exported
    header, rows = read_csv(output(d) / "kernel_details.csv")
    events = trace(d)
    hw = processes(events)["Ascend Hardware"]
    kernels = {(e["name"], e["ts"]) for e in events if e["pid"] == hw and e["ph"] == "X"}
    name, start = header.index("Name"), header.index("Start Time(us)")
    assert all(r[start].endswith("\t") for r in rows)
    assert all((r[name], r[start].rstrip("\t")) in kernels for r in rows)
    slices = [e for e in events if e["pid"] == hw and e["ph"] == "X" and "Stream Id" in e["args"]]
    assert slices and all(e["args"]["Stream Id"] == e["tid"] for e in slices)


def test_step_trace_time(exported):
    profile, (d, _) = exported
    header, rows = read_csv(output(d) / "step_trace_time.csv")
    b = profile.step_breakdown
    assert header == list(b.columns) and header[:2] == ["Device_id", "Step"]
    assert [int(r[1]) for r in rows] == list(b["Step"])
    for k, col in enumerate(header[2:], 2):
        assert [float(r[k]) for r in rows] == pytest.approx(list(b[col]), abs=5e-4)


def test_preparing_is_the_first_kernel_start_minus_the_profiler_step_start(exported):
    """torch_npu's Preparing (first device task start - framework step start), from the exported files
    themselves: each step's first kernel_details Start Time minus its ProfilerStep#n ts in trace_view.json,
    exactly as step_trace_time.csv prints it (3 decimals); not the time since the previous step's end."""
    profile, (d, _) = exported
    first, expected = _exported_preparing(d)
    assert profile.step_breakdown["Preparing"].tolist() == [float(v) for v in expected.values()]
    windows = step_windows(profile.source.step_bounds(), profile.source.op_rows())
    assert all(first[s] - Decimal(int(w0)) / 1000 != expected[s] for s, w0 in zip(windows["step"], windows["start"]))


def test_two_graphs_preparing_is_the_main_models_first_kernel_minus_its_profiler_step(tmp_path):
    """With a second graph run between the steps, step_trace_time.csv's Preparing is still each step's own
    first kernel (model 1's of that Step Id in kernel_details) minus its ProfilerStep#n ts, never a kernel of
    graph 2 that ran earlier in the window (it read -125 us)."""
    profile = run_two_graphs(tmp_path / "run")
    d = profile.export(tmp_path / "x", "ascend_pt")
    header, rows = read_csv(output(d) / "kernel_details.csv")
    assert {r[header.index("Model ID")] for r in rows} == {"1", "2"}
    _exported_preparing(d, model="1")


def _exported_preparing(d: Path, model: str | None = None) -> tuple[dict[int, Decimal], dict[int, Decimal]]:
    """Each Step Id's first kernel start (of ``model``'s kernels, default all) in kernel_details.csv, and
    that minus its ProfilerStep#n ts in trace_view.json; checks step_trace_time.csv prints the latter as its
    Preparing (3 decimals).  Returns both."""
    step_ts = {int(e["name"].split("#")[1]): Decimal(e["ts"]) for e in trace(d)
               if e.get("cat") == "cpu_op" and e["name"].startswith("ProfilerStep#")}
    header, rows = read_csv(output(d) / "kernel_details.csv")
    start, model_col = header.index("Start Time(us)"), header.index("Model ID")
    first: dict[int, Decimal] = {}
    for r in rows:
        if model is None or r[model_col] == model:
            ts = Decimal(r[start].rstrip("\t"))
            first[int(r[0])] = min(first.get(int(r[0]), ts), ts)
    expected = {s: first[s] - step_ts[s] for s in sorted(step_ts)}
    assert len(expected) == 3 and all(v > 0 for v in expected.values())
    header, rows = read_csv(output(d) / "step_trace_time.csv")
    assert {int(r[1]): r[header.index("Preparing")] for r in rows} == {s: f"{v:.3f}" for s, v in expected.items()}
    return first, expected


def test_statistics_and_memory_tables(exported):
    profile, (d, _) = exported
    header, rows = read_csv(output(d) / "op_statistic.csv")
    assert header == ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                      "Max Time(us)", "Ratio(%)"]
    assert len(rows) == len(profile.op_statistic)
    header, rows = read_csv(output(d) / "api_statistic.csv")
    assert header[0] == "Level" and len(rows) == len(profile.api_statistic)
    header, rows = read_csv(output(d) / "memory_record.csv")
    assert header == list(profile.memory_record.columns) and len(rows) == len(profile.memory_record)
    stamps = memory.event_times(profile.run)
    assert [r[1] for r in rows] == [f"{int(t) // 1000}.{int(t) % 1000:03d}\t" for t in stamps]
    header, rows = read_csv(output(d) / "operator_memory.csv")
    assert header == list(profile.operator_memory.columns) and len(rows) == len(profile.operator_memory)


def test_trace_view_framework_layer_and_flows(exported):
    profile, (d, _) = exported
    events = trace(d)
    procs = processes(events)
    assert {"Python", "CANN", "Ascend Hardware", "Communication", "Overlap Analysis"} <= set(procs)
    assert procs["Python"] == profile.info["pid"] and procs["Ascend Hardware"] == format_pid(profile.info["pid"], 14, 0)
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op"]
    steps = [e for e in cpu_ops if e["name"].startswith("ProfilerStep#")]
    assert [e["name"] for e in steps] == [f"ProfilerStep#{s}" for s in profile.step_breakdown["Step"]]
    flows = [e for e in events if e.get("cat") == "async_npu"]
    assert all(e["name"] == "torch_to_npu" for e in flows)
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    ends = {e["id"]: e for e in flows if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(ends) == len(profile.op_summary)
    kernels = {(e["pid"], e["tid"], e["ts"]) for e in events if e["pid"] == procs["Ascend Hardware"]
               and e["ph"] == "X"}
    assert all((f["pid"], f["tid"], f["ts"]) in kernels for f in ends.values())
    op_starts = {(e["pid"], e["tid"], e["ts"]) for e in cpu_ops}
    assert all((s["pid"], s["tid"], s["ts"]) in op_starts for s in starts.values())
    ids = [e["id"] for e in events if e.get("cat") == "HostToDevice"]
    assert not set(ids) & set(starts)
    # each kernel lies inside the ProfilerStep of its iteration
    spans = {int(e["name"].split("#")[1]): (float(e["ts"]), float(e["ts"]) + e["dur"]) for e in steps}
    t = profile.source.device_tasks()
    for it, start in zip(t["iteration"][t["op"]], t["start"][t["op"]]):
        lo, hi = spans[int(it)]
        assert lo <= start / 1000 <= hi


def test_dynamic_graph_flows_start_at_each_node_launch(dynamic):
    profile, d = dynamic
    events = trace(d)
    launches = {(e["tid"], e["ts"]): e["name"] for e in events if e.get("cat") == "cpu_op"
                and not e["name"].startswith("ProfilerStep") and e["name"] != "ModelExecute"}
    hw = processes(events)["Ascend Hardware"]
    kernels = {(e["tid"], e["ts"]): e["name"] for e in events if e["pid"] == hw and e["ph"] == "X"}
    flows = [e for e in events if e.get("cat") == "async_npu"]
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    for f in (e for e in flows if e["ph"] == "f"):
        s = starts[f["id"]]
        assert launches[(s["tid"], s["ts"])] == kernels[(f["tid"], f["ts"])]
    assert len(starts) == len(profile.op_summary)


def test_communication_thread_order(exported):
    _, (d, _) = exported
    events = trace(d)
    pid = processes(events)["Communication"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["pid"] == pid and e["name"] == "thread_name"}
    order = {e["tid"]: e["args"]["sort_index"] for e in events if e["pid"] == pid and e["name"] == "thread_sort_index"}
    ordered = [names[t] for t in sorted(names, key=order.get)]
    assert "Communication" in ordered[0] and all(n.startswith("Plane ") for n in ordered[1:])
    ops = [e for e in events if e["pid"] == pid and e["ph"] == "X" and e["tid"] == 0]
    assert ops and all(re.fullmatch(r"hcom_allReduce__\w+_\d+_\d+", e["name"]) for e in ops)


def test_overlap_analysis_adds_up(exported):
    profile, (d, _) = exported
    events = trace(d)
    pid = processes(events)["Overlap Analysis"]
    totals = Counter()
    for e in events:
        if e["pid"] == pid and e["ph"] == "X":
            totals[e["name"]] += round(e["dur"] * 1000)
    b = profile.step_breakdown
    assert {k: totals[k] for k in ("Computing", "Communication(Not Overlapped)", "Free")} == \
        {k: round(b[k].sum() * 1000) for k in ("Computing", "Communication(Not Overlapped)", "Free")}


def test_communication_json(exported):
    profile, (d, _) = exported
    comm = json.loads((output(d) / "communication.json").read_text())
    ct = profile.communication_time
    assert sorted(comm) == [f"step{i}" for i in sorted(set(ct["Iteration ID"]))]
    for step, groups in comm.items():
        assert set(groups) == {"collective", "p2p"} and groups["p2p"] == {}
        collective = groups["collective"]
        total = collective["Total Op Info"]
        assert set(total["Communication Bandwidth Info"]) == {"RDMA", "HCCS", "PCIE", "SDMA", "SIO"}
        mine = ct[ct["Iteration ID"] == int(step[4:])]
        assert sorted(k for k in collective if k != "Total Op Info") == sorted(f"{n}@hccl_world_group"
                                                                            for n in mine["Op Name"])
        assert total["Communication Time Info"]["Elapse Time(ms)"] == pytest.approx(mine["Elapse Time(ms)"].sum())
    op = ct.iloc[0]
    entry = comm[f"step{op['Iteration ID']}"]["collective"][f"{op['Op Name']}@hccl_world_group"]
    info = entry["Communication Time Info"]
    for key in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)",
                "Wait Time Ratio", "Synchronization Time Ratio"):
        assert info[key] == pytest.approx(op[key])
    tasks = profile.hccl_tasks
    transit = tasks[(tasks["Op Name"] == op["Op Name"]) & (tasks["Task Name"].isin(["Memcpy", "Reduce_Inline"]))
                    & (tasks["Link Type"] == "HCCS")]
    hccs = entry["Communication Bandwidth Info"]["HCCS"]
    assert hccs["Transit Size(MB)"] == pytest.approx(transit["Size(Byte)"].sum() / 1e6)
    assert hccs["Transit Time(ms)"] == pytest.approx(info["Transit Time(ms)"])  # every transit task is on HCCS here
    assert entry["Communication Bandwidth Info"]["SDMA"]["Transit Size(MB)"] == hccs["Transit Size(MB)"]


def test_communication_matrix_has_self_links_and_relabelled_ranks(exported):
    _, dirs = exported
    for rank, d in enumerate(dirs):
        matrix = json.loads((output(d) / "communication_matrix.json").read_text())
        for groups in matrix.values():
            for op, links in groups["collective"].items():
                assert op.endswith("@hccl_world_group")
                assert links[f"{rank}-{rank}"]["Transport Type"] == "LOCAL"
                assert links[f"{rank}-{rank + 1}"]["Transport Type"] == "HCCS"
                assert all(v["Op Name"] == op.split("@")[0] for v in links.values())


def test_other_core_pmu_cells_are_zero_in_kernel_details(exported, tmp_path):
    """A pure AI Core task ran no AI Vector Core cycles (and the other way round): kernel_details holds 0
    there, as msprof-analyze needs numbers; AI CPU and communication rows keep N/A, op_summary keeps NaN."""
    profile, (d, _) = exported
    header, rows = read_csv(output(d) / "kernel_details.csv")
    col = {name: header.index(name) for name in header}
    by_core = {}
    for r in rows:
        by_core.setdefault(r[col["Accelerator Core"]], []).append(r)
    assert {"AI_CORE", "AI_VECTOR_CORE", "COMMUNICATION"} <= set(by_core)
    for r in by_core["AI_CORE"]:
        assert [r[col[c]] for c in ("aiv_time(us)", "aiv_total_cycles", "aiv_vec_time(us)", "aiv_vec_ratio")] == \
            ["0.000", "0", "0.000", "0.000"]
        assert float(r[col["aicore_time(us)"]]) > 0 and float(r[col["aic_mac_time(us)"]]) > 0
    for r in by_core["AI_VECTOR_CORE"]:
        assert [r[col[c]] for c in ("aicore_time(us)", "aic_total_cycles", "aic_mac_time(us)", "cube_utilization(%)")] \
            == ["0.000", "0", "0.000", "0.000"]
        assert float(r[col["aiv_time(us)"]]) > 0
    for r in by_core["COMMUNICATION"]:
        assert r[col["aiv_vec_time(us)"]] == r[col["aicore_time(us)"]] == "N/A"
    ops = profile.op_summary
    assert ops.loc[ops["Task Type"] == "AI_CORE", "aiv_vec_time(us)"].isna().all()  # the table itself: unknown
    (summary,) = (profile.export(tmp_path, "msprof") / "mindstudio_profiler_output").glob("op_summary_*.csv")
    header, rows = read_csv(summary)
    core, vec = header.index("Task Type"), header.index("aiv_vec_time(us)")
    assert {r[vec] for r in rows if r[core] == "AI_CORE"} == {"N/A"}  # msprof's op_summary keeps N/A


@pytest.fixture(scope="module")
def level0(tmp_path_factory):
    """An MLP on 8 ranks at task_trace l0 and the same at l1, exported."""
    out = tmp_path_factory.mktemp("level0_pt")
    runs = {level: run_profiled_session(out / level, ge.models.mlp(training=True, world_size=8), 3,
                                        task_trace=level).profile for level in ("l0", "l1")}
    return runs, {level: p.export(out / f"x_{level}", "ascend_pt") for level, p in runs.items()}


def test_task_trace_l0_is_written_as_level0(level0):
    runs, dirs = level0
    config = {level: json.loads(next(d.glob("profiler_info_*.json")).read_text())["config"]["experimental_config"]
              for level, d in dirs.items()}
    assert (config["l0"]["_profiler_level"], config["l0"]["_aic_metrics"]) == ("Level0", "ACL_AICORE_NONE")
    assert (config["l1"]["_profiler_level"], config["l1"]["_aic_metrics"]) == ("Level1", "ACL_AICORE_PIPE_UTILIZATION")
    header, rows = read_csv(output(dirs["l0"]) / "kernel_details.csv")
    assert header == ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                      "Wait Time(us)", "Block Num", "Input Shapes", "Input Data Types", "Input Formats",
                      "Output Shapes", "Output Data Types", "Output Formats"]
    assert len(rows) == len(runs["l0"].op_summary) and {r[8] for r in rows} == {"0"}
    assert "Block Dim" in read_csv(output(dirs["l1"]) / "kernel_details.csv")[0]


def test_task_trace_l0_trace_view_knows_the_collectives(level0):
    """Overlap Analysis and the Communication layer at l0 are those of l1 (the HCCL tasks, not Task Type)."""
    _, dirs = level0

    def summary(d: Path) -> tuple[Counter, list]:
        events = trace(d)
        pids = processes(events)
        totals = Counter()
        for e in events:
            if e["pid"] == pids["Overlap Analysis"] and e["ph"] == "X":
                totals[e["name"]] += round(e["dur"] * 1000)
        ops = [(e["name"], e["ts"]) for e in events if e["pid"] == pids["Communication"] and e["ph"] == "X"]
        return totals, ops

    (totals0, ops0), (totals1, ops1) = summary(dirs["l0"]), summary(dirs["l1"])
    assert totals0["Communication"] > 0 and totals0 == totals1
    assert len(ops0) == 3 and ops0 == ops1


def test_real_msprof_run_with_legacy_statistics_headers_exports(tmp_path):
    """A real msprof run's op_statistic may have the legacy header (Model Name first, no Device_id;
    reference §4.2): the ascend_pt export writes torch_npu's statistics columns either way."""
    run = write_msprof(tmp_path / "real")
    path = run.output / f"op_statistic_{STAMP}.csv"
    header, rows = read_csv(path)
    legacy = ["Model Name"] + header[1:]
    path.write_text("\n".join(",".join(r) for r in [legacy] + [["resnet"] + r[1:] for r in rows]) + "\n")
    profile = geprof_nb.load(run.path)
    assert "Model Name" in profile.op_statistic.columns and "Device_id" not in profile.op_statistic.columns
    d = profile.export(tmp_path / "pt", "ascend_pt")
    header, exported = read_csv(output(d) / "op_statistic.csv")
    assert header == ["OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                      "Max Time(us)", "Ratio(%)"]
    assert [r[:3] for r in exported] == [r[1:4] for r in rows]
    header, _ = read_csv(output(d) / "api_statistic.csv")
    assert header == ["Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"]
