"""advise(): every rule fires on a graph built to trigger it and stays quiet on one built not to.

Graphs are small and run 3 steps on the virtual clock.  Large tensors are device-resident
Variables (fed by a small Data input) where a big per-step input copy would otherwise dominate
the step and hide what the graph is built to show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import geprof_nb
from geprof_nb import ge
from geprof_nb.analysis.findings import advisor
from geprof_nb.analysis.findings.advisor import COLUMNS, advise
from geprof_nb.analysis.profile import Profile
from geprof_nb.analysis.sources.source import Source
from geprof_nb.analysis.tables.columns import op_summary_columns
from geprof_nb.analysis.tables.roofline import device_roofs, row_bounds
from geprof_nb.analysis.tables.summary import OpRows
from helpers.geprof_testing import build_tiny_graph, run_aged, run_profiled_session, run_two_graphs, small_resnet

AICPU = "AI CPU op on the critical path"
CUBE = "Low cube utilisation"
MEMORY = "Memory-bound ops"
HOST = "Host-bound: device idle between tasks"
DATA = "Large Data Aug Bound"
COMM = "Communication not overlapped with compute"
TINY = "Many tiny kernels"
TRANSDATA = "TransData format conversions"
DYNAMIC = "Dynamic shapes change between steps"


def inference(name: str, build) -> ge.Graph:
    """A graph whose outputs are what ``build(g)`` returns."""
    g = ge.Graph(name)
    out = build(g)
    g.output(out if isinstance(out, list) else [out])
    return g


def profile_of(tmp_path: Path, graph: ge.Graph, steps: int = 3, **options) -> Profile:
    return run_profiled_session(tmp_path / "prof", graph, steps, **options).profile


def run_batches(tmp_path: Path, graph: ge.Graph, batches: list[int]) -> Profile:
    """Run a dynamic-batch MLP (inputs x [b, 784], labels [b, 10]) once per batch size, ge_api l1."""
    out = tmp_path / "prof"
    prof = {"output": str(out), "training_trace": "on", "aic_metrics": "PipeUtilization", "ge_api": "l1"}
    assert ge.GEInitialize({"ge.exec.profilingMode": "1", "ge.exec.profilingOptions": json.dumps(prof),
                            "geprof.clock": "virtual"}) == ge.SUCCESS
    sess = ge.Session()
    assert sess.add_graph(1, graph) == ge.SUCCESS
    for b in batches:
        inputs = [np.zeros((b, 784), np.float16), np.zeros((b, 10), np.float16)]
        assert sess.run_graph(1, inputs) == ge.SUCCESS, ge.GEGetErrorMsg()
    ge.GEFinalize()
    return geprof_nb.load(out)


def finding(frame: pd.DataFrame, rule: str) -> pd.Series:
    rows = frame[frame["Rule"] == rule]
    assert len(rows) == 1, f"{rule!r} not found in {list(frame['Rule'])}"
    return rows.iloc[0]


def rules(frame: pd.DataFrame) -> set[str]:
    return set(frame["Rule"])


def saving(p: Profile, **change) -> float:
    """What ``p.what_if(**change)`` saves per typical step (us): the mean of now - predicted, outliers left out."""
    predicted = p.what_if(**change).predicted
    split = p.step_split
    typical = predicted[~predicted["iteration"].isin(split.outlier_steps if split is not None else [])]
    return float((typical["now_ns"] - typical["predicted_ns"]).mean()) / 1000.0


# ----------------------------------------------------------------------- AI CPU
def test_aicpu_op_alone_on_the_device_is_found(tmp_path):
    def build(g):  # a NonZero over 1 MiB: ~0.5 ms of AI CPU while the stream waits
        x = g.data("x", (512, 1024), "float16")
        nz = g.op("NonZero", g.op("Relu", x), name="mask/NonZero", max_output=1024)
        return [nz, g.op("MatMulV2", [x, g.variable("w", (1024, 1024), "float16")], name="fc")]

    p = profile_of(tmp_path, inference("aicpu", build), aicpu="on")
    f = finding(advise(p), AICPU)
    assert f["Priority"] == "High" and f["Time at stake (us)"] > 400
    # what taking the NonZero off the device saves on the critical path
    assert f["Time at stake basis"] == "what-if"
    assert f["Time at stake (us)"] == pytest.approx(saving(p, remove_ops=["mask/NonZero"]), abs=1e-3)
    assert "'mask/NonZero'" in f["Evidence"] and "compute" in f["Evidence"]  # the aicpu table's split
    assert "AI Core" in f["Suggestion"]


def test_small_aicpu_op_in_a_heavy_step_is_not_reported(tmp_path):
    def build(g):  # a 15 us NonZero beside ~1.5 ms of MatMuls
        nz = g.op("NonZero", g.data("x", (16, 16), "float16"), name="mask/NonZero")
        y = g.op("Add", [g.variable("a", (4096, 4096), "float16"), g.data("bias", (4096,), "float16")])
        for i in range(4):
            y = g.op("MatMulV2", [y, g.variable(f"w{i}", (4096, 4096), "float16")], name=f"fc{i}")
        return [nz, y]

    found = advise(profile_of(tmp_path, inference("aicpu_small", build)))
    assert AICPU not in rules(found)


# ------------------------------------------------------------------ cube, memory
def matmuls(m: int, k: int, layers: int = 3):
    def build(g):
        y = g.data("x", (m, k), "float16")
        for i in range(layers):
            y = g.op("MatMulV2", [y, g.variable(f"w{i}", (k, k), "float16")], name=f"fc{i}")
        return y

    return build


@pytest.mark.parametrize("device", ["Ascend910B", "Ascend910A"])
def test_small_batch_matmuls_are_memory_bound_not_low_cube_utilisation(tmp_path, device):
    # M = 16 rows against 4096x4096 weights: each call streams 32 MiB of weights for few MACs; the cube is idle
    # (mac_ratio ~0.06) but the bytes at the HBM bandwidth are the ceiling, so no cube utilisation saves time
    p = profile_of(tmp_path, inference("gemv", matmuls(16, 4096)), device=device)
    ops = p.op_summary
    mac = ops["aic_mac_ratio"] if "aic_mac_ratio" in ops else ops["mac_ratio"]
    assert (mac[ops["OP Type"] == "MatMulV2"] < advisor.CUBE_LOW_UTILIZATION).all()
    roofs = device_roofs(p.device)
    bound = row_bounds(ops, p.source.op_work(roofs), roofs)
    assert set(bound[(ops["OP Type"] == "MatMulV2").to_numpy()]) == {"memory"}
    assert CUBE not in rules(advise(p))


def _imported_matmuls(memory_bound_only: bool = False) -> Profile:
    """Imported op rows (PMU columns only: ArithmeticUtilization's FLOPs, Memory's bandwidths) of 3 steps, each a
    compute-bound and a memory-bound MatMul of 200 us at mac_ratio 0.1 on every AI Core (910B2 roofs: 353.9
    TFLOP/s fp16, 1.6 TB/s, 1800 MHz).  ``big``: 17.7 TFLOP (50 us at the cube's peak), 0.2 MB (1 GB/s x 200 us);
    ``gemv``: 1 GFLOP (3 us), 258 MB (1200 GB/s x 200 us: 161 us at the bandwidth)."""
    names = ["gemv"] if memory_bound_only else ["big", "gemv"]
    flops = {"big": 50e-6 * 353.8944e12, "gemv": 1e9}
    bw = {"big": 1.0, "gemv": 1200.0}
    rows = [{"Model ID": 1, "Op Name": n, "OP Type": "MatMulV2", "Task Type": "AI_CORE",
             "Task Start Time(us)": 1e6 + 1000.0 * step + 300.0 * k, "Task Duration(us)": 200.0,
             "Input Data Types": "DT_FLOAT16;DT_FLOAT16", "aic_total_cycles": 200.0 * 1800, "aic_mac_ratio": 0.1,
             "aic_mte2_ratio": 0.1, "cube_utilization(%)": 100.0, "aic_cube_fops": flops[n],
             "aic_main_mem_read_bw(GB/s)": bw[n], "aic_main_mem_write_bw(GB/s)": 0.0}
            for step in range(3) for k, n in enumerate(names)]
    frame = pd.DataFrame(rows)
    start_ns = np.rint(frame["Task Start Time(us)"].to_numpy() * 1000).astype(np.int64)
    its = np.repeat(np.arange(1, 4), len(names))
    return Profile(_Tables(OpRows(frame, its, start_ns, np.arange(len(frame)))))


def test_the_cube_rule_claims_compute_bound_matmuls_only():
    p = _imported_matmuls()
    assert p.roofline.set_index("Op Name")["Bound"].to_dict() == {"big": "compute", "gemv": "memory"}
    f = finding(advise(p), CUBE)
    # the compute-bound MatMul at 80% instead of 10% effective utilisation: 200 x (1 - 0.1 / 0.8) per step
    assert f["Time at stake (us)"] == pytest.approx(175.0)
    assert "'big'" in f["Evidence"] and "'gemv'" not in f["Evidence"]
    assert "1 MatMul/Conv task per step left out, memory-bound on the roofline" in f["Evidence"]
    assert f["Finding"].startswith("1 MatMul/Conv op of at least")
    assert CUBE not in rules(advise(_imported_matmuls(memory_bound_only=True)))


def test_large_matmuls_are_neither_low_utilisation_nor_memory_bound(tmp_path):
    found = advise(profile_of(tmp_path, inference("gemm", matmuls(2048, 2048))))
    assert CUBE not in rules(found) and MEMORY not in rules(found)


def test_huge_elementwise_ops_are_memory_bound(tmp_path):
    def build(g):  # three element-wise ops over 32 MiB tensors: MTE2 busy, vector idle
        a, b = g.variable("a", (4096, 4096), "float16"), g.variable("b", (4096, 4096), "float16")
        y = g.op("Add", [a, g.data("x", (4096,), "float16")], name="big_add")
        return g.op("Relu", g.op("Mul", [y, b], name="big_mul"), name="big_relu")

    p = profile_of(tmp_path, inference("elementwise", build))
    f = finding(advise(p), MEMORY)
    assert "Mul:" in f["Evidence"] and "'big_mul'" in f["Evidence"] and "mte2_ratio" in f["Evidence"]
    assert f["Priority"] == "High"
    # at stake: the bound ops (MTE2 busy half the kernel, twice the compute pipe) at their compute pipe's time
    # (duration x compute ratio / MTE2 ratio)
    ops = p.op_summary
    compute = pd.concat([ops["aiv_vec_ratio"], ops["aic_mac_ratio"]], axis=1).max(axis=1)
    mte2 = ops["aiv_mte2_ratio"]
    bound = ops[(mte2 >= 0.5) & (mte2 >= 2 * compute)]
    dur = bound["Task Duration(us)"]
    at_compute = (dur * compute[bound.index] / mte2[bound.index]).groupby(bound["Op Name"]).sum()
    speedup = (dur.groupby(bound["Op Name"]).sum() / at_compute).to_dict()
    assert set(speedup) == {"big_mul"}  # Add and Relu read one big tensor each: MTE2 under half their time
    assert f["Time at stake (us)"] == pytest.approx(saving(p, op_speedup=speedup), abs=1e-3)
    # the roofline agrees: memory-bound, and the time the rule promises (the compute pipe's) is no faster than
    # its FLOPs at the vector peak, so the saving never assumes more than the compute roof allows
    roof = p.roofline.set_index("Op Name").loc["big_mul"]
    assert roof["Bound"] == "memory"
    assert at_compute["big_mul"] >= roof["FLOPs"] / (roof["Compute Roof TFLOP/s"] * 1e12) * 1e6


def test_memory_bound_needs_pmu_columns(tmp_path):
    def build(g):
        a = g.variable("a", (4096, 4096), "float16")
        return g.op("Add", [a, g.data("x", (4096,), "float16")], name="big_add")

    found = advise(profile_of(tmp_path, inference("elementwise", build), aic_metrics="Memory"))
    assert MEMORY not in rules(found)  # no pipe ratios collected: the rule has no data


# ------------------------------------------------------------------------- host
def test_dynamic_shape_graph_is_host_bound(tmp_path):
    g = ge.models.mlp(batch_size=8, hidden=(64,), training=False, dynamic=True)
    f = finding(advise(profile_of(tmp_path, g, ge_api="l1")), HOST)
    assert f["Priority"] == "High"
    assert "dynamic-shape" in f["Evidence"] and "InferShape" in f["Evidence"]  # host profiler spans
    assert "ge.dynamicDims" in f["Suggestion"]


def test_a_node_by_node_graphs_gap_before_fp_is_host_bound_time_not_a_data_aug_bound(tmp_path):
    """The accuracy benchmark's dynamic-shape scenarios: every node runs with its own InferShape, Tiling and
    launch, so the gap before the FP start is the first nodes' host work.  The advisor called it a Large Data
    Aug Bound too (an input pipeline that was never there); it is the host-bound finding's, added to its gaps."""
    g = ge.models.mlp(batch_size=8, hidden=(64,), training=False, dynamic=True)
    p = profile_of(tmp_path, g, ge_api="l1")
    found = advise(p)
    assert DATA not in rules(found)
    host = finding(found, HOST)
    ops = p.op_summary
    start = p.source.op_rows().start_ns.astype(np.int64) / 1000.0
    end = start + ops["Task Duration(us)"].to_numpy(float)
    its = p.iteration_of_ops.to_numpy()
    gap = np.concatenate([start[its == it][1:] - end[its == it][:-1] for it in np.unique(its)])
    gaps = float(gap[gap >= advisor.MIN_GAP_US].sum())  # sub-us gaps are back-to-back tasks, not idle
    dab = p.step_trace["Data Aug Bound(us)"].dropna()
    assert len(dab) == 2 and dab.mean() > 50  # two whole step periods; ~86 us each on this mlp
    # the rule measures the gaps (92 us a step) and the gap before FP (86 us), to the float-us timestamps' resolution
    measure = float(re.search(r"the rule's own measure ([\d,.]+) us", host["Evidence"]).group(1).replace(",", ""))
    assert measure == pytest.approx(gaps / 3 + dab.mean(), abs=0.5)
    assert measure > 0.9 * p.step_split.length_us
    assert f"the {dab.mean():,.1f} us per step before the FP start (Data Aug Bound)" in host["Evidence"]
    # its time at stake is what no host gap saves on the critical path (the gap before FP is outside the graph)
    assert host["Time at stake basis"] == "what-if"
    assert host["Time at stake (us)"] == pytest.approx(saving(p, host_gap_us=0), abs=1e-3)
    assert gaps / 3 < host["Time at stake (us)"] < measure


def test_static_graph_is_not_host_bound(tmp_path):
    found = advise(profile_of(tmp_path, ge.models.mlp(batch_size=8, hidden=(64,), training=False)))
    assert HOST not in rules(found)


# ------------------------------------------------------------------------- data
def test_slow_getnext_makes_a_large_data_aug_bound(tmp_path):
    # GetNext (AI CPU) produces 6.5 MB per step: ~3 ms before the FP point, against ~20 us of compute
    g = ge.models.mlp(batch_size=4096, training=False, data="GetNext")
    found = advise(profile_of(tmp_path, g))
    f = finding(found, DATA)
    assert f["Priority"] == "High" and "'GetNext'" in f["Evidence"] and "prefetch" in f["Suggestion"]
    assert AICPU not in rules(found)  # the dataset iterator is the data rule's, not the AI CPU rule's
    # the wait before the FP start is outside the step's dependency graph: no what-if models it
    assert f["Time at stake basis"] == "estimate" and "what-if" not in f["Evidence"]


def test_a_graph_launchs_own_gap_in_a_short_step_is_no_data_aug_bound(tmp_path):
    """The accuracy benchmark's clean scenarios: one 4096^3 MatMul, a ~0.5 ms step, and between steps only the
    launch's own ~55 us (RunGraph, the input copy): over a tenth of the step, and no input pipeline to fix."""
    def build(g):
        a = g.op("Add", [g.variable("a", (3072, 4096), "float16", trainable=False), g.data("x", (4096,), "float16")])
        return g.op("MatMulV2", [a, g.variable("w", (4096, 4096), "float16")], name="fc")

    p = profile_of(tmp_path, inference("one_gemm", build))
    dab = p.step_trace["Data Aug Bound(us)"].dropna()
    assert dab.mean() / p.step_split.length_us > advisor.DATA_AUG_MIN_SHARE  # the share alone would fire
    assert dab.mean() < advisor.DATA_AUG_MIN_US
    assert advise(p).empty


def test_heavy_step_with_small_inputs_has_no_data_aug_finding(tmp_path):
    g = ge.models.mlp(batch_size=8192, in_features=64, hidden=(4096, 4096, 4096), training=False)
    assert DATA not in rules(advise(profile_of(tmp_path, g)))


# ---------------------------------------------------------------- communication
def test_allreduce_of_a_tiny_model_is_not_overlapped(tmp_path):
    g, _ = build_tiny_graph(world_size=8)  # 1 bucket, ~110 us ring AllReduce, ~25 us of compute
    f = finding(advise(profile_of(tmp_path, g)), COMM)
    assert f["Priority"] == "High" and "HcomAllReduce" in f["Evidence"]
    assert "split gradients into more, smaller buckets" in f["Suggestion"]  # one bucket: split it


def test_many_small_allreduces_are_latency_bound(tmp_path):
    g, _ = build_tiny_graph(world_size=2, bucket_bytes=256)  # one ~16 us AllReduce per weight
    f = finding(advise(profile_of(tmp_path, g)), COMM)
    assert "HcomAllReduce x2" in f["Evidence"]
    assert f["Suggestion"].startswith("Fuse gradients into fewer, larger AllReduce buckets")


def test_task_trace_l0_finds_the_same_collectives(tmp_path):
    """l0 op_summary has no Task Type or OP Type: the collectives come from the device's HCCL tasks,
    so they are neither missed by the communication finding nor counted as compute kernels."""
    g, _ = build_tiny_graph(world_size=2, bucket_bytes=256)
    l0 = advise(run_profiled_session(tmp_path / "l0", g, 3, task_trace="l0").profile)
    assert "HcomAllReduce x2" in finding(l0, COMM)["Evidence"]
    l1 = advise(profile_of(tmp_path, g))
    assert finding(l0, COMM)["Evidence"] == finding(l1, COMM)["Evidence"]


def test_bucketed_allreduce_under_heavy_backward_is_overlapped(tmp_path):
    # 7 gradient buckets of 2 MiB, each hidden behind ~0.5 ms of backward MatMuls; only the last shows
    g = ge.Graph("heavy")
    feats = g.op("Add", [g.variable("features", (32768, 1024), "float16", trainable=False),
                         g.data("x", (1, 1024), "float16")])
    y = feats
    for i in range(6):
        y = g.op("MatMulV2", [y, g.variable(f"w{i}", (1024, 1024), "float16")], name=f"fc{i}")
    y = g.op("MatMulV2", [y, g.variable("wo", (1024, 16), "float16")], name="out")
    loss, _ = g.op("SoftmaxCrossEntropyWithLogits", [y, g.data("labels", (32768, 16), "float16")])
    ge.add_training(g, g.op("ReduceMean", loss, axes=[0]), world_size=8, bucket_bytes=2 << 20)
    p = profile_of(tmp_path, g)
    assert (p.step_breakdown["Communication"] > 0).all()
    assert COMM not in rules(advise(p))


# ---------------------------------------------------------------- tiny kernels
def test_chain_of_tiny_ops_is_a_fusion_candidate(tmp_path):
    def build(g):
        y = g.data("x", (16, 16), "float16")
        for i in range(100):
            y = g.op("Relu", y, name=f"tiny{i}") if i % 2 else g.op("Add", [y, y], name=f"tiny{i}")
        return y

    p = profile_of(tmp_path, inference("tiny", build))
    f = finding(advise(p), TINY)
    assert f["Priority"] == "High" and "Add x50" in f["Evidence"] and "Relu x50" in f["Evidence"]
    assert "100 kernels per step" in f["Finding"]
    # at stake: every tiny kernel without the fixed cost (the shortest kernel's time), one at it removed
    dur = p.op_summary.groupby("Op Name")["Task Duration(us)"].mean()
    floor = p.op_summary["Task Duration(us)"].min()
    speedup = {n: d / (d - floor) for n, d in dur.items() if d > floor}
    removed = [n for n, d in dur.items() if d <= floor]
    assert len(speedup) + len(removed) == 100  # an op is removed only if each of its calls is the shortest
    assert f["Time at stake (us)"] == pytest.approx(saving(p, op_speedup=speedup, remove_ops=removed), abs=1e-3)


def test_few_large_kernels_are_not_tiny(tmp_path):
    assert TINY not in rules(advise(profile_of(tmp_path, inference("gemm", matmuls(2048, 2048)))))


def test_fused_optimizer_is_suggested_for_many_small_updates(resnet_run):
    f = finding(advise(resnet_run.profile), TINY)
    assert "ApplyMomentum" in f["Suggestion"]


# -------------------------------------------------------------------- TransData
def convs(trans: bool):
    def build(g):
        y = g.op("Add", [g.variable("features", (32, 64, 56, 56), "float16"), g.data("x", (1, 64, 1, 1), "float16")])
        for i in range(3):
            if trans:  # a round trip through 5HD before every convolution
                y = g.op("TransData", y, name=f"to5hd_{i}", dst_format="NC1HWC0")
                y = g.op("TransData", y, name=f"tonchw_{i}", dst_format="NCHW")
            y = g.op("Conv2D", [y, g.variable(f"w{i}", (64, 64, 3, 3), "float16")], name=f"conv{i}",
                     strides=1, pads=1)
        return y

    return build


def test_transdata_round_trips_are_found(tmp_path):
    p = profile_of(tmp_path, inference("trans", convs(True)))
    found = advise(p)
    f = finding(found, TRANSDATA)
    names = [f"{d}_{i}" for i in range(3) for d in ("to5hd", "tonchw")]
    assert f["Time at stake (us)"] == pytest.approx(saving(p, remove_ops=names), abs=1e-3)
    assert f["Time at stake (us)"] > 0
    assert "6 TransData per step" in f["Evidence"] and "NC1HWC0 -> NCHW" in f["Evidence"]
    assert "NC1HWC0" in f["Suggestion"]
    assert MEMORY not in rules(found)  # TransData time is counted once, by its own rule


def test_convolutions_without_transdata(tmp_path):
    assert TRANSDATA not in rules(advise(profile_of(tmp_path, inference("trans_no", convs(False)))))


# ------------------------------------------------------------------ dynamic shapes
def test_changing_batch_sizes_of_a_dynamic_graph(tmp_path):
    g = ge.models.mlp(batch_size=8, hidden=(64,), training=False, dynamic=True)
    f = finding(advise(run_batches(tmp_path, g, [8, 16, 8, 32])), DYNAMIC)
    assert "'dense_0/MatMulV2': 8,784;784,64 -> 16,784;784,64 -> 32,784;784,64" in f["Evidence"]
    assert "3 different input shape sets over 4 steps" in f["Finding"]
    assert f["Time at stake (us)"] > 0 and "ge.dynamicDims" in f["Suggestion"]


def test_constant_batch_of_a_dynamic_graph_is_not_recompiled(tmp_path):
    g = ge.models.mlp(batch_size=8, hidden=(64,), training=False, dynamic=True)
    found = advise(run_batches(tmp_path, g, [16, 16, 16]))
    assert DYNAMIC not in rules(found) and HOST in rules(found)


# -------------------------------------------------------------------- the frame
def test_findings_are_ranked(resnet_run):
    found = advise(resnet_run.profile)
    assert list(found.columns) == COLUMNS and len(found) >= 2
    rank = found["Priority"].map(advisor.PRIORITIES.index)
    assert rank.is_monotonic_increasing
    for _, group in found.groupby("Priority"):
        assert group["Time at stake (us)"].is_monotonic_decreasing
    assert found.loc[0, "Rule"] == COMM  # 8 ranks, a tiny ResNet: exposed AllReduce dominates
    assert (found["Finding"].str.contains(r"\d") & (found["Evidence"].str.len() > 0)).all()
    assert resnet_run.profile.advise().equals(found)


class _Tables(Source):
    """A source with only op_summary rows (what a minimal import gives)."""

    def __init__(self, rows: OpRows) -> None:
        self.rows = rows

    @property
    def path(self) -> Path:
        return Path("imported")

    def op_rows(self) -> OpRows:
        return self.rows


def test_empty_profile_gives_an_empty_frame():
    frame = pd.DataFrame(columns=op_summary_columns("A2", "l1", "PipeUtilization"))
    empty = np.zeros(0, np.int64)
    found = advise(Profile(_Tables(OpRows(frame, empty, empty, empty))))
    assert found.empty and list(found.columns) == COLUMNS


def test_op_summary_alone_still_gives_the_rules_that_need_only_it(resnet_run):
    full = resnet_run.profile
    ops = full.op_summary
    start_ns = np.rint(ops["Task Start Time(us)"].to_numpy() * 1000).astype(np.int64)
    p = Profile(_Tables(OpRows(ops, full.iteration_of_ops.to_numpy(), start_ns, np.arange(len(ops)))))
    assert p.step_trace.empty and p.host_events.empty
    found = advise(p)
    assert TINY in rules(found) and DATA not in rules(found)  # no step_trace: that rule is skipped
    assert list(found.columns) == COLUMNS


def _advice_on_categories_and_on_plain_strings(profile: Profile, missing_in: tuple[str, ...]
                                               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """advise() of ``profile``'s op_summary with every seventh row's ``missing_in`` columns missing, once as
    categoricals (as geprof builds them) and once as plain strings (as an import may).  Op Name stays
    categorical: findings list ops in its category order, plain strings would sort them."""
    ops = profile.op_summary.copy()
    missing = np.arange(len(ops)) % 7 == 3
    for col in missing_in:
        ops[col] = ops[col].where(~missing)
    assert isinstance(ops["OP Type"].dtype, pd.CategoricalDtype) and ops["OP Type"].isna().sum() == missing.sum()
    plain = ops.assign(**{c: ops[c].astype(str) for c in ops.select_dtypes("category").columns if c != "Op Name"})
    start_ns = np.rint(ops["Task Start Time(us)"].to_numpy() * 1000).astype(np.int64)
    its = profile.iteration_of_ops.to_numpy()
    return tuple(advise(Profile(_Tables(OpRows(f, its, start_ns, np.arange(len(f)))))) for f in (ops, plain))


def test_categorical_and_plain_text_columns_give_the_same_advice(resnet_run):
    """The rules test op_summary's names, types and shapes once per category (millions of rows, a few
    hundred distinct values); missing values must still match nothing and count as no type."""
    categorical, plain = _advice_on_categories_and_on_plain_strings(
        resnet_run.profile, ("OP Type", "Task Type", "Input Shapes"))
    assert TINY in rules(categorical)
    pd.testing.assert_frame_equal(categorical, plain)


def test_categorical_and_plain_shape_columns_give_the_same_dynamic_shape_advice(tmp_path):
    g = ge.models.mlp(batch_size=8, hidden=(64,), training=False, dynamic=True)
    categorical, plain = _advice_on_categories_and_on_plain_strings(
        run_batches(tmp_path, g, [8, 16, 8, 32, 16]), ("OP Type", "Task Type", "OP State"))
    f = finding(categorical, DYNAMIC)
    assert "different input shape sets over 5 steps" in f["Finding"]
    pd.testing.assert_frame_equal(categorical, plain)


def test_same_advice_from_an_msprof_export_read_back(resnet_run, tmp_path):
    imported = geprof_nb.load(resnet_run.profile.export(tmp_path / "msprof", format="msprof"))
    assert not isinstance(imported.source, type(resnet_run.profile.source))  # read from the CSV files
    again, own = advise(imported), advise(resnet_run.profile)
    # the same findings; an imported run's graph takes every gap as the host's launch (eager), so its findings
    # keep the rules' own measures, which the run's what-if findings quote
    assert set(own["Time at stake basis"]) == {"what-if"} and set(again["Time at stake basis"]) == {"estimate"}
    key = ["Rule", "Finding", "Suggestion"]
    pd.testing.assert_frame_equal(again.sort_values("Rule")[key].reset_index(drop=True),
                                  own.sort_values("Rule")[key].reset_index(drop=True))
    for _, row in own.iterrows():
        measure = re.search(r"the rule's own measure ([\d,.]+) us", row["Evidence"]).group(1)
        assert finding(again, row["Rule"])["Time at stake (us)"] == pytest.approx(float(measure.replace(",", "")),
                                                                                abs=0.05)


# ----------------------------------------------------------- what the steps average over
def test_steps_whose_tasks_aged_out_are_not_averaged_in(tmp_path):
    """storage_limit deleted the first steps' task chunks but not their step trace: the figures are the
    kept steps' own, as the same run without a limit has them for those steps."""
    full = run_aged(tmp_path / "full", None)
    aged = run_aged(tmp_path / "aged", 22_000)
    kept = aged.iterations
    assert 0 < len(kept) < len(aged.step_trace)
    ref = full.step_breakdown.set_index("Step").loc[kept]
    f = finding(advise(aged), COMM)
    assert f["Time at stake (us)"] == pytest.approx(ref["Communication(Not Overlapped)"].mean(), abs=1e-3)
    assert f["Share of step (%)"] == pytest.approx(
        100 * ref["Communication(Not Overlapped)"].mean() / ref["Stage"].mean(), abs=0.01)


def test_another_graph_running_between_steps_is_not_host_idle(tmp_path):
    """Graph 2 runs between graph 1's iterations: the gap before it is the host launching another graph,
    not idle between one iteration's tasks (no gap inside either graph's iterations reaches 1 us)."""
    p = run_two_graphs(tmp_path)
    ops = p.op_summary.assign(_it=p.iteration_of_ops.to_numpy())
    ops["_end"] = ops["Task Start Time(us)"] + ops["Task Duration(us)"]
    ops = ops.sort_values(["Model ID", "_it", "Task Start Time(us)"])
    by_iteration = [ops["Model ID"], ops["_it"]]
    prev_end = ops.groupby(by_iteration)["_end"].cummax().groupby(by_iteration).shift()
    assert ((ops["Task Start Time(us)"] - prev_end).dropna() < advisor.MIN_GAP_US).all()  # the premise
    assert HOST not in rules(advise(p))


def test_data_aug_bound_is_the_main_models_gap_less_other_graphs_tasks_in_it(tmp_path):
    """Graph 2's iteration runs inside graph 1's Data Aug Bound gap: the device is busy then, so the finding
    is graph 1's gaps (not graph 2's, which were averaged in) less the time graph 2's tasks cover of them."""
    p = run_two_graphs(tmp_path)
    st = p.step_trace
    main = st[st["Model ID"] == 1].dropna(subset=["Data Aug Bound(us)"])
    ops = p.op_summary[p.op_summary["Model ID"] == 2]
    covered = []
    for fp, dab in zip(main["FP Start(us)"], main["Data Aug Bound(us)"]):  # overlapping tasks count once
        hi, total, reach = fp, 0.0, fp - dab  # reach: how far the window is counted, from its start
        for s, d in sorted(zip(ops["Task Start Time(us)"], ops["Task Duration(us)"])):
            a, b = max(s, reach), min(s + d, hi)
            total += max(0.0, b - a)
            reach = max(reach, min(s + d, hi))
        covered.append(total)
    assert 0 < min(covered) and max(covered) < main["Data Aug Bound(us)"].min()  # the premise
    f = advise(p).set_index("Rule").loc["Large Data Aug Bound"]
    waits = float((main["Data Aug Bound(us)"] - covered).mean())
    assert f["Time at stake (us)"] == pytest.approx(waits, abs=1e-3)
    assert f"other models' tasks ran {float(np.mean(covered)):,.1f} us of it, so the device waits " \
           f"{waits:,.1f} us" in f["Evidence"]
    assert f"Data Aug Bound mean {main['Data Aug Bound(us)'].mean():,.1f} us" in f["Evidence"]


def single_op_run(tmp_path: Path, calls: int = 50) -> Profile:
    """``calls`` tiny aclopExecute Adds: each is its own iteration (no model, no step trace)."""
    with ge.simulation_settings(clock_mode="virtual"):
        try:
            with geprof_nb.profile(output=str(tmp_path)) as block:
                for _ in range(calls):
                    assert ge.acl.aclopExecute("Add", [((256, 256), "float16"), ((256, 256), "float16")]) == 0
                assert ge.acl.aclrtSynchronizeStream() == 0
        finally:
            ge.GEFinalize()
    return block.profile


def test_single_op_run_idle_between_ops_is_host_bound(tmp_path):
    p = single_op_run(tmp_path)
    ops = p.op_summary
    assert set(ops["Model ID"]) == {0xFFFFFFFF} and len(p.iterations) == 50  # the premise: one iteration per op
    start = ops["Task Start Time(us)"].to_numpy()
    span = float((start + ops["Task Duration(us)"].to_numpy()).max() - start.min())
    idle = span - float(ops["Task Duration(us)"].sum())
    assert idle / span > 0.85
    found = advise(p)
    host = finding(found, HOST)
    assert host["Priority"] == "High"
    assert host["Time at stake (us)"] == pytest.approx(idle, abs=1.0)  # the run is one step: its span
    assert host["Share of step (%)"] == pytest.approx(100 * idle / span, abs=0.2)
    assert host["Time at stake (us)"] == pytest.approx(ops["Task Wait Time(us)"].sum(), abs=1.0)
    assert "single-op run: 50 op tasks" in host["Evidence"] and "49 gaps" in host["Evidence"]
    tiny = finding(found, TINY)
    assert tiny["Finding"].startswith("50 kernels per run are shorter than 5 us")
    assert tiny["Time at stake (us)"] == pytest.approx(50 * ops["Task Duration(us)"].min(), abs=1e-3)


# ------------------------------------------------------------ one-off stalls, one-step data
STALL = "One-off stall"
REAL_LEVEL2 = Path("/work/shared/real-data/msinsight_pytorch_text/level2/rank0_ascend_pt")


def real_clock_resnet(tmp_path: Path, sleep_before: dict[int, float], steps: int = 8) -> Profile:
    """The small ResNet-50 (8 ranks) on the real clock, ``time.sleep(s)`` in the loop before the steps
    ``sleep_before`` names (1-based: the step the sleep comes before)."""
    import time

    with ge.simulation_settings(clock_mode="real"):
        sess = ge.Session()
        assert sess.add_graph(1, small_resnet(8)) == ge.SUCCESS
        with geprof_nb.profile(output=str(tmp_path / "real")) as run:
            for step in range(1, steps + 1):
                if step in sleep_before:
                    time.sleep(sleep_before[step])
                assert sess.run_graph(1) == ge.SUCCESS
    return run.profile


def test_a_one_off_host_stall_is_its_own_finding_and_no_per_step_claim(tmp_path, resnet_run):
    """time.sleep(0.2) in the user's loop before step 5 of 8: one finding names the 200 ms stall before step 5;
    no rule turns it into a per-step claim (the old advisor: a High Large Data Aug Bound of ~25 ms per
    step, its own evidence a median of 0.1 ms), and the per-step findings are the virtual-clock run's."""
    p = real_clock_resnet(tmp_path, {5: 0.2})
    found = advise(p)
    stall = finding(found, STALL)
    sb = p.step_breakdown.set_index("Step")
    others = sb.drop(index=[1, 5])["Free"]  # the whole periods but the stall
    extra = float(sb.loc[5, "Free"] - pd.concat([others, sb.loc[[5], "Free"]]).median())
    assert 200_000 <= extra < 260_000
    assert stall["Finding"].startswith(f"A {extra / 1000:,.1f} ms stall before step 5: ")
    assert f"once ({extra / 8:,.1f} us per step over the run's 8 steps)" in stall["Finding"]
    assert stall["Time at stake (us)"] == pytest.approx(extra / 8, abs=1e-3) and stall["Priority"] == "High"
    assert stall["Time at stake basis"] == "estimate"  # once, in a step the per-step figures leave out
    assert "Data Aug Bound (previous iteration end to FP start)" in stall["Evidence"]
    assert DATA not in rules(found) and HOST not in rules(found)
    virtual = advise(resnet_run.profile)  # the same model on the virtual clock, 3 steps
    # MEMORY: the optimizer (ApplyMomentum) and the weights' Casts read their stored tensors from HBM, no L2
    # speed-up for a step's first read: about 5 % of this small model's step
    assert rules(found) - {STALL} == rules(virtual) == {COMM, TINY, MEMORY}
    assert "per step: mean of 7 steps, outlier step 5 left out" in finding(found, COMM)["Evidence"]
    # the shares are of the step figure, the typical steps' mean period
    split = p.step_split
    assert split.outlier_steps == {5} and split.steps == (2, 3, 4, 6, 7, 8)
    comm = finding(found, COMM)
    assert comm["Share of step (%)"] == pytest.approx(100 * comm["Time at stake (us)"] / split.length_us, abs=0.01)
    typical = sb.loc[list(split.steps), "Communication(Not Overlapped)"].mean()
    assert f"the rule's own measure {typical:,.1f} us" in comm["Evidence"]
    collectives = p.op_summary.loc[p.op_summary["OP Type"].astype(str).str.startswith("Hcom"), "Op Name"]
    assert comm["Time at stake (us)"] == pytest.approx(saving(p, remove_ops=list(collectives.unique())), abs=1e-3)


def test_host_time_before_every_step_is_a_per_step_finding_not_a_stall(tmp_path):
    """A 30 ms sleep before every step (a slow input pipeline) is per-step host time: Large Data Aug Bound
    says it, per step, and no step is an outlier (30 ms, so that a loaded machine's scheduling delays, a few
    ms, stay far below the outlier threshold of half the median step)."""
    p = real_clock_resnet(tmp_path, {s: 0.03 for s in range(1, 9)})
    found = advise(p)
    assert STALL not in rules(found) and p.step_split.outliers == ()
    data = finding(found, DATA)
    assert "per step: mean of 8 steps" in data["Evidence"]
    st = p.step_trace.dropna(subset=["Data Aug Bound(us)"])
    assert data["Time at stake (us)"] == pytest.approx(st["Data Aug Bound(us)"].mean(), abs=1e-3)
    assert data["Time at stake (us)"] >= 30_000


@pytest.mark.skipif(not REAL_LEVEL2.exists(), reason="the real 910B data is not on this machine")
def test_a_real_one_step_run_gets_no_finding_that_compares_steps():
    """MindStudio Insight's torch_npu Level2 data is one step (50): the old advisor said "27 dynamic-shape ops
    see 1 different input shape sets over 1 steps" (op names that run with several shapes inside the step)."""
    found = advise(geprof_nb.load(REAL_LEVEL2))
    assert DYNAMIC not in rules(found) and STALL not in rules(found)
    assert COMM in rules(found)


def _real_rows_in_steps(steps: int, change: str | None = None) -> Profile:
    """The real Level2 step's op rows repeated as ``steps`` steps, 130 ms apart, in one model (Model ID 1:
    not single ops, so the steps count); ``change``: an op whose shapes differ in the last step."""
    real = geprof_nb.load(REAL_LEVEL2).op_summary
    start_ns = np.rint(real["Task Start Time(us)"].to_numpy() * 1000).astype(np.int64)
    frames, starts, its = [], [], []
    for k in range(steps):
        f = real.assign(**{"Model ID": 1})
        if change is not None and k == steps - 1:
            f["Input Shapes"] = f["Input Shapes"].astype(str).where(f["Op Name"] != change, "1,2,3,4")
        frames.append(f)
        starts.append(start_ns + k * 130_000_000)
        its.append(np.full(len(f), 50 + k))
    frame = pd.concat(frames, ignore_index=True)
    frame["Task Start Time(us)"] = np.concatenate(starts) / 1000.0
    return Profile(_Tables(OpRows(frame, np.concatenate(its), np.concatenate(starts), np.arange(len(frame)))))


@pytest.mark.skipif(not REAL_LEVEL2.exists(), reason="the real 910B data is not on this machine")
def test_shapes_compared_between_steps_not_inside_one():
    """An op name that runs with four shapes inside every step (seven calls), the same each time, changes nothing
    between steps; one whose shape differs in the second step does."""
    relu = "aclnnInplaceRelu_Relu_Relu"
    same = _real_rows_in_steps(2)
    assert same.op_summary["Op Name"].eq(relu).sum() == 2 * 7  # the premise: seven calls per step, four shapes
    assert DYNAMIC not in rules(advise(same))
    f = finding(advise(_real_rows_in_steps(2, change=relu)), DYNAMIC)
    assert f["Finding"].startswith("1 dynamic-shape op see 2 different input shape sets over 2 steps")
    assert f"{relu!r}: 32,64,55,55 -> 32,192,27,27 -> 32,384,13,13 -> 32,256,13,13 -> ..." in f["Evidence"]


@pytest.mark.skipif(not REAL_LEVEL2.exists(), reason="the real 910B data is not on this machine")
def test_a_burst_of_ops_in_one_step_is_no_per_step_claim():
    """Step 4 of five copies of the real step also runs 2,000 TransData back to back after its last task (a
    one-off format conversion, ~110 ms): the step is an outlier, so TransData is its typical ~1.4 ms per step,
    1 % of the step, no finding.  The old advisor averaged the burst in: ~23 ms "per step", a High finding."""
    p = _real_rows_in_steps(5)
    ops, start_ns, its = p.op_summary, p.source.op_rows().start_ns, p.iteration_of_ops.to_numpy()
    step4 = its == 53
    td = ops.index[(ops["OP Type"] == "TransData").to_numpy() & step4][0]
    end4 = int((start_ns[step4] + np.rint(ops.loc[step4, "Task Duration(us)"].to_numpy() * 1000)).max())
    dur_ns = int(round(ops.loc[td, "Task Duration(us)"] * 1000))
    burst = pd.DataFrame([ops.loc[td]] * 2000).reset_index(drop=True)
    burst_start = end4 + np.arange(2000, dtype=np.int64) * dur_ns
    burst["Task Start Time(us)"] = burst_start / 1000.0
    frame = pd.concat([ops, burst], ignore_index=True)
    starts = np.concatenate([start_ns, burst_start])
    burst_p = Profile(_Tables(OpRows(frame, np.concatenate([its, np.full(2000, 53)]), starts, np.arange(len(frame)))))
    assert burst_p.step_split.outlier_steps == {53}
    found = advise(burst_p)
    assert TRANSDATA not in rules(found)
    per_step = float(ops.loc[(ops["OP Type"] == "TransData").to_numpy() & (its == 50), "Task Duration(us)"].sum())
    assert 100 * per_step / burst_p.step_split.length_us < 100 * advisor.TRANSDATA_MIN_SHARE  # the typical share


def test_counts_in_findings_are_whole_numbers(tmp_path):
    """ResNet-50's memory-bound ops differ a little from step to step (their PMU ratios do), so their mean
    per step is fractional (186.2): a finding counts ops, so it says 186, and every count in a finding or
    its evidence is a whole number with its noun in the plural."""
    p = profile_of(tmp_path, ge.models.resnet50(batch_size=32, training=True, world_size=8), 5)
    findings = p.advise().set_index("Rule")
    memory = findings.loc[MEMORY]
    count = re.match(r"(\d+) ops per step spend most of their time moving data from HBM", memory["Finding"])
    assert count, memory["Finding"]
    per_type = [int(n) for n in re.findall(r": (\d+) ops?/step, ", memory["Evidence"])]  # the top op types
    assert per_type and sum(per_type) <= int(count[1]) + len(per_type)
    for text in [*findings["Finding"], *findings["Evidence"]]:
        assert not re.search(r"\d\.\d+ (ops?|kernels|collectives?|TransData)\b", text), text
        assert "(s)" not in text, text


# ----------------------------------------------------------------- exclusive time at stake
def test_exclusive_stakes_leave_each_finding_what_the_step_has_left():
    # in rank order: 600 and 300 fit a 1,000 us step, the third gets the 100 us left, the fourth nothing
    assert advisor.exclusive_stakes(np.array([600.0, 300.0, 200.0, 50.0]), 1000.0).tolist() == [600, 300, 100, 0]
    assert advisor.exclusive_stakes(np.array([1500.0, 10.0]), 1000.0).tolist() == [1000, 0]  # never beyond the step
    assert advisor.exclusive_stakes(np.array([20.0, 30.0]), 1000.0).tolist() == [20, 30]  # nothing shared


def test_findings_table_adds_the_exclusive_column_in_rank_order():
    f = [advisor.Finding(f"rule {i}", "", "", "", us) for i, us in enumerate((100.0, 700.0, 400.0))]
    frame = advisor.findings_table(f, 1000.0)
    assert frame["Rule"].tolist() == ["rule 1", "rule 2", "rule 0"]  # High 70%, High 40%, Medium 10%
    assert frame["Time at stake (us)"].tolist() == [700, 400, 100]  # each finding's own figure stays
    assert frame["Exclusive time at stake (us)"].tolist() == [700, 300, 0]
    assert frame.attrs["step_us"] == 1000.0


ZOO = {
    "mlp": lambda: ge.models.mlp(batch_size=8, hidden=(64,), training=False),
    "mlp dynamic": lambda: ge.models.mlp(batch_size=8, hidden=(64,), training=False, dynamic=True),
    "mlp GetNext": lambda: ge.models.mlp(batch_size=4096, training=False, data="GetNext"),
    "resnet50 x8": lambda: small_resnet(8),
    "bert": lambda: ge.models.bert(layers=2, seq_len=64, batch_size=4, training=True, world_size=8),
    "tiny-llama": lambda: ge.models.llm("tiny-llama", seq_len=256),
}


@pytest.mark.slow
@pytest.mark.parametrize("model", list(ZOO))
def test_zoo_models_findings_never_claim_more_than_the_step(tmp_path, model):
    p = profile_of(tmp_path, ZOO[model](), ge_api="l1")
    found = advise(p)
    step = found.attrs["step_us"]
    assert step > 0, model  # a clean model may have no finding at all (mlp: its launch gaps are below 100 us)
    exclusive = found["Exclusive time at stake (us)"]
    assert exclusive.sum() <= step + 1e-3
    assert (found["Time at stake (us)"] <= step + 1e-3).all() and (exclusive <= step + 1e-3).all()
    if len(found):
        assert exclusive.iloc[0] == pytest.approx(min(found["Time at stake (us)"].iloc[0], step), abs=1e-3)
    # each what-if finding's time at stake is its change's saving; their exclusive savings are the chain's
    # increments, adding up to what all the changes save together (a change can save more once another is made:
    # removing exposed communication puts the tiny kernels on the critical path)
    what_if = found.attrs["what_if"]
    together: dict = {}
    for (_, row), kw in zip(found.iterrows(), what_if):
        assert (kw is not None) == (row["Time at stake basis"] == "what-if"), row["Rule"]
        if kw is None:
            continue
        assert row["Time at stake (us)"] == pytest.approx(saving(p, **kw), abs=2e-3), row["Rule"]
        for pattern, factor in kw.get("op_speedup", {}).items():
            together.setdefault("op_speedup", {})[pattern] = together.get("op_speedup", {}).get(pattern, 1.0) * factor
        together.setdefault("remove_ops", []).extend(kw.get("remove_ops", []))
        if "host_gap_us" in kw:
            together["host_gap_us"] = 0.0
    if together and exclusive.sum() < step - 1e-3:  # nothing clipped at the step
        chained = exclusive[found["Time at stake basis"] == "what-if"].sum()
        assert chained == pytest.approx(saving(p, **together), abs=2e-3 * len(found))

