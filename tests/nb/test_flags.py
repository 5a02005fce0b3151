"""Every ``%%geprof`` flag reaches every output it should change: one test per flag.

Each test runs the same small cell with and without the flag (on the virtual clock unless the
clock is under test) and asserts on the values that must change: the Profile's tables, its
run info, and, where the flag changes what is shown, the displayed ``text/html`` / ``text/plain``
(by stable facts such as column and table names, not by layout).

The results explorer (``geprof_nb/nb/explorer.py``) shows every tab's content in its static
``text/html`` twin; the checks marked ``EXPLORER`` are about tabs only it has (Memory,
API/Host) and run only when it exists.
"""

from __future__ import annotations

import html
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.rundir import RunDir
from geprof_nb.analysis.tables import columns as C
from geprof_nb.ge.host_launch import NODE_HOST_COSTS
from geprof_nb.nb.config import PROFILING_FLAGS
from geprof_nb.nb.magics import GeprofMagics
from geprof_nb.prof import msprof
from geprof_nb.prof.events import AIC_METRICS
from geprof_nb.prof.rawdata import ReportLevel

EXPLORER = (Path(geprof_nb.__file__).resolve().parent / "nb" / "explorer.py").exists()
STEPS = 2

#: A static training graph on 2 ranks: AI Core and vector ops, one gradient AllReduce.
CELL = f"""
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), world_size=2))
for step in range({STEPS}):
    sess.run_graph(1)
"""
#: The same MLP with a dynamic batch dim: it runs node by node with host work per node.
DYNAMIC_CELL = f"""
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), dynamic=True))
for step in range({STEPS}):
    sess.run_graph(1)
"""
#: Fed by a GetNext, an AI CPU op.
AICPU_CELL = CELL.replace("world_size=2)", 'world_size=2, data="GetNext")')
#: mstx ranges around the steps and a marker.
MSTX_CELL = f"""
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=8, in_features=32, hidden=(32,), world_size=2))
for step in range({STEPS}):
    with ge.mstx.range(f"train step {{step}}"):
        sess.run_graph(1)
ge.mstx.mark("all steps done")
"""


class Run:
    """One ``%%geprof`` run: its Profile and what it displayed."""

    def __init__(self, profile, cap) -> None:
        self.profile = profile
        self.outputs = cap.outputs

    @property
    def shown(self) -> str:
        """Everything displayed as text: text/plain, and text/html with entities decoded."""
        parts = []
        for o in self.outputs:
            parts.append(str(o.data.get("text/plain", "")))
            parts.append(html.unescape(str(o.data.get("text/html", ""))))
        return "\n".join(parts)

    @property
    def shown_html(self) -> str:
        return "\n".join(html.unescape(str(o.data.get("text/html", ""))) for o in self.outputs)


def run(ip, line: str = "", cell: str = CELL, clock: str | None = "virtual", display: bool = False) -> Run:
    flags = f"{line} --clock {clock}" if clock else line
    if not display:
        flags += " --no-display"
    with capture_output() as cap:
        ip.run_cell_magic("geprof", flags.strip(), cell)
    return Run(ip.user_ns["_geprof"], cap)


def op_frame(profile) -> pd.DataFrame:
    """op_summary of the last iteration (for comparing two runs: the Model ID differs)."""
    return profile.ops().drop(columns=["Model ID"])


def api_names(profile, level: str | None = None) -> dict[str, int]:
    """``API Name`` -> ``Count`` of api_statistic (rows of ``level`` only, if given)."""
    api = profile.api_statistic
    if level is not None:
        api = api[api["Level"] == level]
    return dict(zip(api["API Name"].astype(str), api["Count"].astype(int)))


#: The profilingOptions flags tested here (PROFILING_FLAGS) ...
PROFILING = {"--output", "--training-trace", "--task-trace", "--fp-point", "--bp-point", "--hccl", "--aicpu",
             "--aic-metrics", "--msproftx", "--ge-api", "--runtime-api", "--task-memory", "--storage-limit",
             "--checkpoint-interval"}
#: ... and the magic's own flags tested here.
MAGIC = {"--executor", "--clock", "--ranks", "-o", "--no-display"}


def test_every_profiling_option_flag_is_tested_here():
    """A new profilingOptions flag needs a test in this file; a renamed one fails here too."""
    assert {flag for flag, *_ in PROFILING_FLAGS} == PROFILING
    parser = GeprofMagics.geprof.parser
    flags = {s for action in parser._actions for s in action.option_strings}
    assert PROFILING | MAGIC <= flags


# ------------------------------------------------------------------------------------- --output
def test_output_puts_the_run_directory_under_it(ip, tmp_path):
    default = run(ip, display=True)
    assert default.profile.path.parent == (tmp_path / "geprof_output").resolve()
    out = tmp_path / "elsewhere" / "runs"
    chosen = run(ip, f"--output {out}", display=True)
    assert chosen.profile.path.parent == out.resolve()
    assert chosen.profile.path.name.startswith("PROF_")
    assert chosen.profile.options["output"] == str(out)
    assert not list((tmp_path / "geprof_output").glob(chosen.profile.path.name))
    # the run directory shown is the chosen one
    assert str(chosen.profile.path) in chosen.shown and str(out) not in default.shown


# ----------------------------------------------------------------------------- --training-trace
def test_a_bad_training_trace_offers_only_values_a_flag_can_carry(ip):
    with pytest.raises(UsageError) as exc:
        ip.run_cell_magic("geprof", "--training-trace maybe", "pass")
    assert str(exc.value) == "argument --training-trace: 'maybe' is not valid; accepted: 'on', 'off'"
    # GE's own check (its E10001 text) names the empty value its profilingOptions JSON takes
    assert ge.GEInitialize({"ge.exec.profilingMode": "1",
                            "ge.exec.profilingOptions": '{"training_trace": "maybe"}'}) != ge.SUCCESS
    assert ge.GEGetErrorMsg().endswith("'maybe' is not valid; accepted: 'on', 'off', ''")


def test_training_trace_off_gives_no_fp_bp_trace(ip):
    on, off = run(ip, display=True), run(ip, "--training-trace off", display=True)
    st_on, st_off = on.profile.step_trace, off.profile.step_trace
    assert st_on["FP Start(us)"].notna().all() and st_on["BP End(us)"].notna().all()
    assert st_on["FP to BP Time(us)"].gt(0).all()
    for col in ("FP Start(us)", "BP End(us)", "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)"):
        assert st_off[col].isna().all(), col
    # iteration boundaries still come from the model's start/end tasks (task time is on) ...
    assert len(st_off) == STEPS and st_off["Iteration Time(us)"].gt(0).all()
    # ... and with task time off too there is no step trace at all
    assert len(run(ip, "--training-trace off --task-trace off").profile.step_trace) == 0
    assert on.profile.options["training_trace"] == "on"
    assert off.profile.options.get("training_trace", "off") == "off"
    # shown: the FP/BP points are named only when the trace is on
    assert "FP point" in on.shown and "BP point" in on.shown
    assert "FP point" not in off.shown and "BP point" not in off.shown


# --------------------------------------------------------------------------------- --task-trace
def test_task_trace_levels(ip):
    l1, l0, off = run(ip, display=True), run(ip, "--task-trace l0", display=True), run(ip, "--task-trace off",
                                                                                        display=True)
    assert run(ip, "--task-trace l1").profile.op_summary.columns.tolist() == l1.profile.op_summary.columns.tolist()
    ops1, ops0 = l1.profile.op_summary, l0.profile.op_summary
    # l1: op names, types, shapes, block dims and the PMU columns
    assert "loss/xentropy" in set(ops1["Op Name"].astype(str))
    assert (ops1.loc[ops1["Task Type"] == "AI_CORE", "Block Num"] > 0).all()
    assert set(C.pmu_columns("PipeUtilization", "A2")) <= set(ops1.columns)
    # l0: the same tasks with their times (names from the runtime's task track), without op info or PMU
    assert len(ops0) == len(ops1)
    np.testing.assert_allclose(ops0["Task Duration(us)"], ops1["Task Duration(us)"])
    assert ops0["Op Name"].tolist() == ops1["Op Name"].tolist()
    for col in ("OP Type", "Task Type", "Input Shapes", "Output Formats"):
        assert set(ops0[col].astype(str)) == {"N/A"}, col
    assert (ops0["Block Num"] == 0).all()
    assert not set(C.pmu_columns("PipeUtilization", "A2")) & set(ops0.columns)
    assert len(l0.profile.task_time) == len(l1.profile.task_time) > 0
    # off: no task data at all
    assert len(off.profile.op_summary) == len(off.profile.op_statistic) == len(off.profile.task_time) == 0
    assert len(off.profile.api_statistic) == 0
    # shown: op types and PMU columns at l1 only; nothing of the ops when off
    assert "SoftmaxCrossEntropyWithLogits" in l1.shown and "aic_mac_ratio" in l1.shown_html
    assert "loss/xentropy" in l0.shown
    assert "SoftmaxCrossEntropyWithLogits" not in l0.shown and "aic_mac_ratio" not in l0.shown
    assert "loss/xentropy" not in off.shown and "SoftmaxCrossEntropyWithLogits" not in off.shown


# ---------------------------------------------------------------------------- --fp-point/--bp-point
FP_OP, BP_OP = "dense_1/MatMulV2", "dense_0/Relu"


def _trace_vs_ops(profile, fp_op: str, bp_op: str) -> None:
    """Every iteration's FP Start is ``fp_op``'s task start, its BP End ``bp_op``'s task end."""
    st = profile.step_trace
    assert len(st) == STEPS
    for it in st["Iteration ID"]:
        ops = profile.ops(int(it))
        fp = ops[ops["Op Name"] == fp_op].iloc[0]
        bp = ops[ops["Op Name"] == bp_op].iloc[0]
        row = st[st["Iteration ID"] == it].iloc[0]
        assert row["FP Start(us)"] == pytest.approx(fp["Task Start Time(us)"], abs=0.5)
        assert row["BP End(us)"] == pytest.approx(bp["Task Start Time(us)"] + bp["Task Duration(us)"], abs=0.5)


def test_fp_point_moves_fp_start_to_the_chosen_op(ip):
    auto = run(ip, display=True)
    chosen = run(ip, f"--fp-point {FP_OP}", display=True)
    _trace_vs_ops(auto.profile, "dense_0/MatMulV2", "gradients/dense_0/Cast_grad/Cast")  # auto-detected
    _trace_vs_ops(chosen.profile, FP_OP, "gradients/dense_0/Cast_grad/Cast")
    assert (chosen.profile.step_trace["FP Start(us)"] > auto.profile.step_trace["FP Start(us)"]).all()
    assert chosen.profile.options["fp_point"] == FP_OP
    assert f"FP point '{FP_OP}' (fp_point option)" in chosen.shown
    assert "(fp_point option)" not in auto.shown


def test_bp_point_moves_bp_end_to_the_chosen_op(ip):
    auto = run(ip, display=True)
    chosen = run(ip, f"--bp-point {BP_OP}", display=True)
    _trace_vs_ops(chosen.profile, "dense_0/MatMulV2", BP_OP)
    assert (chosen.profile.step_trace["BP End(us)"] < auto.profile.step_trace["BP End(us)"]).all()
    assert chosen.profile.options["bp_point"] == BP_OP
    assert f"BP point '{BP_OP}' (bp_point option)" in chosen.shown
    assert "(bp_point option)" not in auto.shown


def test_fp_and_bp_point_naming_no_op_fall_back_to_auto_detection(ip):
    auto = run(ip)
    with pytest.warns(UserWarning, match="names no op") as warned:
        wrong = run(ip, "--fp-point no/such/op --bp-point nor/this")
    assert {"fp_point", "bp_point"} <= {str(w.message).split()[0] for w in warned}
    pd.testing.assert_frame_equal(wrong.profile.step_trace.drop(columns="Model ID"),  # the next cell's model:
                                  auto.profile.step_trace.drop(columns="Model ID"))  # GE's next model id
    assert any("fp_point 'no/such/op' names no op" in n for n in wrong.profile.notes)
    assert any("bp_point 'nor/this' names no op" in n for n in wrong.profile.notes)


# ------------------------------------------------------------------------------------------ --hccl
def test_hccl_adds_the_collective_sub_tasks(ip):
    off, on = run(ip), run(ip, "--hccl on")
    assert len(off.profile.hccl_tasks) == 0
    tasks = on.profile.hccl_tasks
    assert len(tasks) > 0
    assert set(tasks["Node"].astype(str)) == {"gradients/HcomAllReduce_0"}
    assert {"Notify_Record", "Notify_Wait", "Memcpy", "Reduce_Inline"} <= set(tasks["Task Name"].astype(str))
    assert set(tasks["Iteration ID"]) == set(range(1, STEPS + 1))
    # the per-collective split needs the sub-tasks
    ct_off, ct_on = off.profile.communication_time, on.profile.communication_time
    assert len(ct_off) == len(ct_on) == STEPS
    split = ["Transit Time(ms)", "Wait Time(ms)", "Synchronization Time(ms)", "Idle Time(ms)"]
    assert ct_off[split].isna().all().all()
    assert ct_on[split].notna().all().all() and (ct_on["Wait Time(ms)"] > 0).all()
    # communication_statistic comes from op_summary's COMMUNICATION rows: the same either way
    assert len(on.profile.communication_statistic) == 1
    assert on.profile.communication_statistic["OP Type"].tolist() == ["hcom_allReduce_"]
    pd.testing.assert_frame_equal(on.profile.communication_statistic, off.profile.communication_statistic)


# ----------------------------------------------------------------------------------------- --aicpu
def test_aicpu_adds_the_ai_cpu_kernel_split(ip):
    off, on = run(ip, cell=AICPU_CELL), run(ip, "--aicpu on", cell=AICPU_CELL)
    assert len(off.profile.aicpu) == 0
    table = on.profile.aicpu
    assert table["Node"].tolist() == ["GetNext"] * STEPS
    parts = table["Compute_time(us)"] + table["Memcpy_time(us)"]
    np.testing.assert_allclose(table["Task_time(us)"], parts, atol=0.002)
    assert (table["Total_time(us)"] > table["Task_time(us)"]).all()
    ops = on.profile.op_summary
    getnext = ops[ops["Op Name"] == "GetNext"]
    assert set(getnext["Task Type"].astype(str)) == {"AI_CPU"} and len(getnext) == STEPS
    # the AI CPU kernels run either way: only the split is added
    pd.testing.assert_frame_equal(op_frame(on.profile), op_frame(off.profile))


# ----------------------------------------------------------------------------------- --aic-metrics
@pytest.mark.parametrize("group", AIC_METRICS)
def test_aic_metrics_group_columns(ip, group):
    other = "Memory" if group == "PipeUtilization" else "PipeUtilization"
    base, chosen = run(ip, f"--aic-metrics {other}", display=True), run(ip, f"--aic-metrics {group}", display=True)
    family = chosen.profile.device["chip_family"]
    cols, other_cols = C.pmu_columns(group, family), C.pmu_columns(other, family)
    own = [c for c in cols if c not in other_cols]
    assert own, f"{group} has no column of its own"
    ops = chosen.profile.op_summary
    assert [c for c in ops.columns if c in cols] == cols  # all of them, in msprof's order
    assert not [c for c in own if c in base.profile.op_summary.columns]
    for c in cols:  # every column has values (an event the run did not program would leave NaN)
        assert ops[c].notna().any(), c
    assert chosen.profile.info["pmu_events"]["metrics"] == [group]
    assert chosen.profile.options.get("aic_metrics", "PipeUtilization") == group
    # the same tasks and durations: only the counters differ
    np.testing.assert_allclose(ops["Task Duration(us)"], base.profile.op_summary["Task Duration(us)"])
    # shown: the group's own columns, not the other group's
    assert [c for c in own if c not in chosen.shown_html] == []
    assert [c for c in own if c in base.shown_html] == []


# ------------------------------------------------------------------------------------- --msproftx
def test_msproftx_collects_mstx_ranges_and_marks(ip):
    off, on = run(ip, cell=MSTX_CELL), run(ip, "--msproftx on", cell=MSTX_CELL)
    assert len(off.profile.msprof_tx) == 0
    tx = on.profile.msprof_tx
    assert tx["message"].tolist() == [f"train step {i}" for i in range(STEPS)] + ["all steps done"]
    assert tx["event_type"].tolist() == ["start/end"] * STEPS + ["marker"]
    ranges = tx.iloc[:STEPS]
    assert (ranges["End_time(us)"] > ranges["Start_time(us)"]).all()
    # each range holds its step's RunGraph, which ends after the device's iteration end
    st = on.profile.step_trace
    assert (ranges["End_time(us)"].to_numpy() >= st["Iteration End(us)"].to_numpy()).all()
    assert (ranges["Start_time(us)"].to_numpy() < st["Iteration End(us)"].to_numpy()).all()


# ---------------------------------------------------------------------------------------- --ge-api
def test_ge_api_levels_on_a_dynamic_graph(ip):
    off, l0, l1 = (run(ip, line, cell=DYNAMIC_CELL, display=True)
                   for line in ("", "--ge-api l0", "--ge-api l1"))
    launches = api_names(off.profile, "node")
    assert set(launches) == {"LaunchKernelWithHandle"}  # task time alone: the node launches (RT2)
    n_launch = launches["LaunchKernelWithHandle"]
    assert n_launch == STEPS * len(off.profile.ops(1))
    # l0: the host scheduling of each node in api_statistic, no host events yet
    node0 = api_names(l0.profile, "node")
    assert node0 == {"LaunchKernelWithHandle": n_launch, "InferShape": n_launch, "Tiling": n_launch}
    assert len(off.profile.host_events) == len(l0.profile.host_events) == 0
    # l1: also GE's host profiler events, per node and phase
    assert api_names(l1.profile, "node") == node0
    ev = l1.profile.host_events
    assert {"InferShape", "Tiling", "AllocMemory", "KernelLaunchPrepare", "rtKernelLaunch", "CopyH2D"} == set(
        ev["Event"].astype(str))
    per_event = ev["Event"].astype(str).value_counts()
    assert per_event["InferShape"] == per_event["rtKernelLaunch"] == n_launch
    assert set(ev.loc[ev["Event"] == "rtKernelLaunch", "Element"]) == set(off.profile.ops(1)["Op Name"])
    assert l1.profile.options["ge_api"] == "l1"
    if EXPLORER:  # API/Host tab
        assert "KernelLaunchPrepare" in l1.shown_html and "KernelLaunchPrepare" not in off.shown_html


def test_ge_api_l0_does_not_need_task_time(ip):
    p = run(ip, "--ge-api l0 --task-trace off", cell=DYNAMIC_CELL).profile
    assert {"InferShape", "Tiling"} <= set(api_names(p, "node"))


# ----------------------------------------------------------------------------------- --runtime-api
@pytest.mark.parametrize("cell, expected", [
    (CELL, {"rtModelExecute": STEPS, "rtStreamSynchronize": STEPS}),
    (DYNAMIC_CELL, {"rtKernelLaunch": None, "rtMemcpyAsync": STEPS * 2, "rtStreamSynchronize": STEPS}),
], ids=["static", "dynamic"])
def test_runtime_api_adds_runtime_api_rows(ip, cell, expected):
    off, on = run(ip, cell=cell, display=True), run(ip, "--runtime-api on", cell=cell, display=True)
    assert api_names(off.profile, "runtime") == {}
    got = api_names(on.profile, "runtime")
    if expected.get("rtKernelLaunch", 0) is None:  # one per node launch
        expected = dict(expected, rtKernelLaunch=api_names(on.profile, "node")["LaunchKernelWithHandle"])
    assert got == expected
    # the other levels are unchanged
    others = {k: v for k, v in api_names(on.profile).items() if k not in got}
    assert others == api_names(off.profile)
    if EXPLORER:  # API/Host tab
        assert "rtStreamSynchronize" in on.shown_html and "rtStreamSynchronize" not in off.shown_html


# ----------------------------------------------------------------------------------- --task-memory
def test_task_memory_adds_memory_tables(ip):
    off, on = run(ip, display=True), run(ip, "--task-memory on", display=True)
    assert len(off.profile.operator_memory) == len(off.profile.memory_record) == 0
    assert off.profile.memory_peak is None
    om, mr = on.profile.operator_memory, on.profile.memory_record
    assert len(om) > 0 and len(mr) == 2 * len(om)  # one allocation and one release record each
    assert (om["Size(KB)"] > 0).all() and (om["Release Time(us)"] >= om["Allocation Time(us)"]).all()
    op_names = set(on.profile.op_summary["Op Name"].astype(str))
    assert {n.rsplit(":", 1)[0] for n in om["Name"].astype(str)} & op_names
    peak = on.profile.memory_peak
    assert peak is not None and peak.allocated_bytes > 0
    assert mr["Total Allocated(MB)"].max() * 1024 * 1024 == pytest.approx(peak.allocated_bytes, rel=1e-6)
    if EXPLORER:  # Memory tab: the peak and the allocations
        assert "Allocation Time(us)" in on.shown_html and "Allocation Time(us)" not in off.shown_html


# --------------------------------------------------------------------------- --checkpoint-interval
CHECKPOINT_CELL = """
import json, time
from geprof_nb.prof import msprof as _msprof
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,)))
for step in range(30):  # batches of 8 and 16 steps are reported to msprof meanwhile
    sess.run_graph(1)
time.sleep(0.4)
mid_run = json.loads((_msprof.lib.run_dir / "info.json").read_text())  # what a kill now would leave
"""


def test_checkpoint_interval_sets_how_far_behind_the_run_directory_can_be(ip):
    """No chunk is full in this cell: with checkpoints 0.1 s apart its info.json counts the 24 steps reported
    (in the chunks still growing) before the cell ends; with an hour between them it counts none yet."""
    often = run(ip, "--checkpoint-interval 0.1", cell=CHECKPOINT_CELL)
    seen = ip.user_ns["mid_run"]
    rarely = run(ip, "--checkpoint-interval 3600", cell=CHECKPOINT_CELL)
    assert often.profile.options["checkpoint_interval"] == "0.1" == seen["options"]["checkpoint_interval"]
    assert rarely.profile.options["checkpoint_interval"] == "3600"
    assert seen["records"]["step_trace"] == 24 * len(often.profile.run.load("step_trace")) // 30
    assert ip.user_ns["mid_run"]["records"] == {}
    pd.testing.assert_frame_equal(op_frame(often.profile), op_frame(rarely.profile))  # what is collected is alike


def test_checkpoint_interval_out_of_range_is_refused_naming_the_flag(ip):
    with pytest.raises(UsageError, match=r"^argument --checkpoint-interval: '0.01' is not valid; accepted: seconds, "
                                         r"0.1 to 3600, e.g. '2' or '0.5'$"):
        run(ip, "--checkpoint-interval 0.01")
    assert not msprof.lib.running


# --------------------------------------------------------------------------------- --storage-limit
AGING_CELL = """
from geprof_nb.prof import msprof as _msprof
if _msprof.lib.storage_limit_bytes:  # a limit is set: lower it from 200MB to 30 kB, so 40 steps reach it
    _msprof.lib.storage_limit_bytes = 30_000
sess = ge.Session()
sess.add_graph(1, ge.models.mlp(batch_size=4, in_features=16, hidden=(16,)))
for step in range(40):
    sess.run_graph(1)
"""


def test_storage_limit_is_recorded(ip):
    off, on = run(ip), run(ip, "--storage-limit 300MB")
    assert on.profile.options["storage_limit"] == "300MB" == on.profile.info["options"]["storage_limit"]
    assert "storage_limit" not in off.profile.options
    assert on.profile.info["aged_out"]["chunks"] == 0  # far from the limit: nothing deleted
    pd.testing.assert_frame_equal(op_frame(on.profile), op_frame(off.profile))


def test_storage_limit_aging_is_noted_and_shown(ip, monkeypatch):
    monkeypatch.setattr(msprof.lib, "chunk_records", 64)  # small chunks, so the cell's run ages cheaply
    monkeypatch.setattr(msprof.lib, "storage_limit_bytes", msprof.lib.storage_limit_bytes)
    off = run(ip, cell=AGING_CELL, display=True)
    on = run(ip, "--storage-limit 200MB", cell=AGING_CELL, display=True)
    assert off.profile.info["aged_out"]["chunks"] == 0 and len(off.profile.step_trace) == 40
    aged = on.profile.info["aged_out"]
    assert aged["chunks"] > 0
    assert 0 < len(on.profile.step_trace) < 40
    notes = [n for n in on.profile.notes if n.startswith("storage_limit 200MB reached")]
    assert len(notes) == 1 and "early iterations are missing" in notes[0]
    assert notes[0] in on.shown
    assert "storage_limit 200MB reached" not in off.shown and "aged out" not in off.shown


# -------------------------------------------------------------------------------------- --executor
def test_executor_v1_and_v2_report_differently(ip):
    v2 = run(ip, "--executor v2 --ge-api l1", cell=DYNAMIC_CELL)
    v1 = run(ip, "--executor v1 --ge-api l1", cell=DYNAMIC_CELL)
    default = run(ip, "--ge-api l1", cell=DYNAMIC_CELL)
    pd.testing.assert_frame_equal(default.profile.host_events.drop(columns="Thread ID"),
                                  v2.profile.host_events.drop(columns="Thread ID"))  # v2 is the default
    raw1, raw2 = RunDir(v1.profile.path), RunDir(v2.profile.path)
    model = int(ReportLevel.MODEL)
    # V2 (RT2): one ModelExecute api record per step and node-level launch records; no events
    assert (raw2.load("api")["level"] == model).sum() == STEPS and len(raw2.load("event")) == 0
    assert "LaunchKernelWithHandle" in api_names(v2.profile, "node")
    # V1 (hybrid): RecordStart/RecordEnd events per step, no model or node api records
    assert (raw1.load("event")["level"] == model).sum() == 2 * STEPS
    assert (raw1.load("api")["level"] == model).sum() == 0 and api_names(v1.profile, "node") == {}
    assert api_names(v1.profile, "model") == {"ModelExecute": STEPS} == api_names(v2.profile, "model")
    # V1's host work per node is heavier: the host events carry each executor's costs
    for prof, costs in ((v1.profile, NODE_HOST_COSTS["v1"]), (v2.profile, NODE_HOST_COSTS["v2"])):
        ev = prof.host_events
        for event, ns in (("InferShape", costs.infer_shape), ("Tiling", costs.tiling),
                          ("rtKernelLaunch", costs.kernel_launch)):
            assert set(ev.loc[ev["Event"] == event, "Duration(us)"]) == {ns / 1000}, event
    assert (v1.profile.step_trace["Iteration Time(us)"].to_numpy()
            > v2.profile.step_trace["Iteration Time(us)"].to_numpy()).all()


# ----------------------------------------------------------------------------------------- --clock
def test_clock_virtual_repeats_exactly_and_real_is_wall_time(ip):
    a, b = run(ip, "-o a"), run(ip, "-o b")
    assert a.profile.path != b.profile.path
    assert a.profile.info["clock"] == b.profile.info["clock"] == "virtual"
    assert a.profile.info["start_ns"] == b.profile.info["start_ns"]
    pd.testing.assert_frame_equal(a.profile.step_trace.drop(columns="Model ID"),
                                  b.profile.step_trace.drop(columns="Model ID"))
    pd.testing.assert_frame_equal(op_frame(a.profile), op_frame(b.profile))
    before = time.time_ns()
    real = run(ip, "--clock real", clock=None)
    after = time.time_ns()
    assert real.profile.info["clock"] == "real"
    st = real.profile.step_trace
    assert len(st) == STEPS
    # the simulated device runs on from the host's launch without the host waiting for it: on a fast host its
    # last steps end up to their own device time past the wall clock at the cell's end
    ahead = int(st["Iteration Time(us)"].sum() * 1000)
    assert before <= real.profile.info["start_ns"] <= real.profile.info["end_ns"] <= after + ahead
    assert (st["Iteration End(us)"] * 1000 >= before).all() and (st["Iteration End(us)"] * 1000 <= after + ahead).all()


def test_clock_defaults_to_real(ip):
    assert run(ip, clock=None).profile.info["clock"] == "real"


# ------------------------------------------------------------------------------- -o / --no-display
def test_o_binds_the_profile_to_the_name(ip):
    run(ip)
    assert "named_run" not in ip.user_ns
    r = run(ip, "-o named_run")
    assert ip.user_ns["named_run"] is r.profile is ip.user_ns["_geprof"]


def test_no_display_shows_nothing_but_still_binds(ip):
    shown, hidden = run(ip, display=True), run(ip, "-o quiet")  # run() adds --no-display
    assert len(shown.outputs) > 0 and "text/html" in shown.outputs[0].data
    assert "Op Name" in shown.shown_html and "loss/xentropy" in shown.shown
    assert hidden.outputs == []
    assert ip.user_ns["quiet"] is hidden.profile and len(hidden.profile.op_summary) > 0


# -------------------------------------------------------------------------------------- --ranks
def test_ranks_simulates_every_rank_with_a_run_directory_each(ip, tmp_path):
    cell = CELL.replace("world_size=2", "world_size=4")
    run4 = run(ip, f"--ranks 4 --hccl on --output {tmp_path / 'c'}", cell=cell)
    cluster = run4.profile
    assert list(cluster.ranks) == [0, 1, 2, 3] and cluster.path.name.startswith("CLUSTER_")
    assert cluster.path.parent == (tmp_path / "c").resolve()
    for r, p in cluster.ranks.items():
        assert p.info["cluster"]["rank"] == r and len(p.step_trace) == STEPS
        assert set(p.hccl_tasks["Src Rank"]) | set(p.hccl_tasks["Dst Rank"]) <= {0, 1, 2, 3}
    single = run(ip, f"--hccl on --output {tmp_path / 's'}", cell=CELL).profile
    assert single.path.name.startswith("PROF_")  # without --ranks, one device as before
    with pytest.raises(UsageError, match="is not a whole number"):
        run(ip, "--ranks x", cell=cell)


@pytest.mark.parametrize("group", ["L2Cache", "MemoryAccess"])
def test_an_aic_metrics_group_the_device_lacks_is_a_usage_error_before_any_run(ip, tmp_path, group):
    with pytest.raises(UsageError, match=f"--aic-metrics: '{group}' is not available on --device Ascend910A; "
                                         "accepted there: ArithmeticUtilization, PipeUtilization, Memory, MemoryL0, "
                                         "MemoryUB, ResourceConflictRatio$"):
        ip.run_cell_magic("geprof", f"--device Ascend910A --aic-metrics {group} --output out --no-display", "x = 1")
    assert not (tmp_path / "out").exists() and not msprof.lib.running
    ip.run_cell_magic("geprof", f"--device Ascend910B --aic-metrics {group} --output out --no-display", "x = 1")
    assert msprof.lib.last_run_dir.parent == (tmp_path / "out").resolve()


def test_a_group_the_initialised_device_lacks_is_a_usage_error_before_any_run(ip, tmp_path):
    """Without --device the device is the one GE already runs on (an earlier cell initialised it)."""
    assert ge.GEInitialize({"geprof.device": "Ascend910A"}) == ge.SUCCESS, ge.GEGetErrorMsg()
    with pytest.raises(UsageError, match="^--aic-metrics: profiling option 'aic_metrics': 'L2Cache' is not available "
                                         "on Ascend910A; accepted: ArithmeticUtilization, "):
        ip.run_cell_magic("geprof", "--aic-metrics L2Cache --output out --no-display", "x = 1")
    assert not (tmp_path / "out").exists() and not msprof.lib.running
